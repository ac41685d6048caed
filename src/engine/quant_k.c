/*
 * K-quants Q2_K..Q6_K and the Q8_K activation type in portable C: dequantizers, ggml's
 * reference quantizers bit for bit (ggml's scale+min, symmetric coordinate-descent and
 * 18-trial-scale searches), the Q8_K activation quantizer and the scalar dot products in
 * ggml's 8-lane summation order. Also the ops table per dispatch level behind quant_k_ops.
 * Every float operation here rounds separately (the tree builds with -ffp-contract=off).
 */
#include "quant_k.h"

#include <assert.h>
#include <math.h>
#include <string.h>

#include "quant_k_blocks.h"

/* Below this magnitude a group counts as all zero (ggml's GROUP_MAX_EPS). */
#define GROUP_MAX_EPS 1e-15f

/*
 * Round half to even in f32, valid for |v| <= 4194303: adding 1.5 * 2^23 leaves the rounded
 * integer in the low mantissa bits.
 */
static inline int round_half_even(float v)
{
    float shifted = v + 12582912.f;
    int32_t bits;
    memcpy(&bits, &shifted, sizeof bits);
    return (bits & 0x007fffff) - 0x00400000;
}

static inline int clamp_int(int v, int lo, int hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

static inline float f16_field(const uint8_t *p)
{
    return quant_f16_to_f32(kq_read_u16(p));
}

/* ---------------------------------------------------------------- searches */

/*
 * qkx2: best scale and non-negative min for n values with weights w, quants L in 0..nmax.
 * Returns the scale; *the_min receives the offset subtracted after scaling.
 */
static float search_scale_min(int n, int nmax, const float *x, const float *w, uint8_t *L,
                              float *the_min, uint8_t *L_trial, float rmin, float rdelta,
                              int nstep, bool absolute_error)
{
    float min = x[0], max = x[0];
    float sum_w = w[0], sum_x = w[0] * x[0];
    for (int i = 1; i < n; i++) {
        if (x[i] < min)
            min = x[i];
        if (x[i] > max)
            max = x[i];
        sum_w += w[i];
        sum_x += w[i] * x[i];
    }
    if (min > 0)
        min = 0;
    if (max == min) {
        memset(L, 0, (size_t)n);
        *the_min = -min;
        return 0.f;
    }
    float iscale = (float)nmax / (max - min);
    float scale = 1.f / iscale;
    float best_error = 0.f;
    for (int i = 0; i < n; i++) {
        L[i] = (uint8_t)clamp_int(round_half_even(iscale * (x[i] - min)), 0, nmax);
        float diff = scale * L[i] + min - x[i];
        diff = absolute_error ? fabsf(diff) : diff * diff;
        best_error += w[i] * diff;
    }
    for (int step = 0; step <= nstep; step++) {
        iscale = (rmin + rdelta * (float)step + (float)nmax) / (max - min);
        float sum_l = 0.f, sum_l2 = 0.f, sum_xl = 0.f;
        for (int i = 0; i < n; i++) {
            int l = clamp_int(round_half_even(iscale * (x[i] - min)), 0, nmax);
            L_trial[i] = (uint8_t)l;
            float wl = w[i] * (float)l;
            sum_l += wl;
            sum_l2 += wl * (float)l;
            sum_xl += wl * x[i];
        }
        float det = sum_w * sum_l2 - sum_l * sum_l;
        if (!(det > 0))
            continue;
        float this_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
        float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
        if (this_min > 0) {
            this_min = 0;
            this_scale = sum_xl / sum_l2;
        }
        float error = 0.f;
        for (int i = 0; i < n; i++) {
            float diff = this_scale * L_trial[i] + this_min - x[i];
            diff = absolute_error ? fabsf(diff) : diff * diff;
            error += w[i] * diff;
        }
        if (error < best_error) {
            memcpy(L, L_trial, (size_t)n);
            best_error = error;
            scale = this_scale;
            min = this_min;
        }
    }
    *the_min = -min;
    return scale;
}

/* Index of the first element of largest magnitude, or -1 when every element is zero. */
static int first_max_abs(int n, const float *x)
{
    float amax = 0.f;
    int at = -1;
    for (int i = 0; i < n; i++) {
        float ax = fabsf(x[i]);
        if (ax > amax) {
            amax = ax;
            at = i;
        }
    }
    return at;
}

/* q3: symmetric scale refined by coordinate descent; L in 0..2*nmax-1. */
static float search_scale_q3(int n, int nmax, const float *x, int8_t *L)
{
    int at = first_max_abs(n, x);
    if (at < 0 || fabsf(x[at]) < GROUP_MAX_EPS) {
        memset(L, 0, (size_t)n);
        return 0.f;
    }
    float iscale = (float)-nmax / x[at];
    float sumlx = 0.f, suml2 = 0.f;
    for (int i = 0; i < n; i++) {
        int l = clamp_int(round_half_even(iscale * x[i]), -nmax, nmax - 1);
        L[i] = (int8_t)l;
        float w = x[i] * x[i];
        sumlx += w * x[i] * (float)l;
        suml2 += w * (float)l * (float)l;
    }
    for (int pass = 0; pass < 5; pass++) {
        int changed = 0;
        for (int i = 0; i < n; i++) {
            float w = x[i] * x[i];
            float slx = sumlx - w * x[i] * (float)L[i];
            if (!(slx > 0))
                continue;
            float sl2 = suml2 - w * (float)L[i] * (float)L[i];
            int nl = clamp_int(round_half_even(x[i] * sl2 / slx), -nmax, nmax - 1);
            if (nl == L[i])
                continue;
            slx += w * x[i] * (float)nl;
            sl2 += w * (float)nl * (float)nl;
            if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
                L[i] = (int8_t)nl;
                sumlx = slx;
                suml2 = sl2;
                changed++;
            }
        }
        if (!changed)
            break;
    }
    for (int i = 0; i < n; i++)
        L[i] = (int8_t)(L[i] + nmax);
    return suml2 > 0 ? sumlx / suml2 : 0.f;
}

/* Weighted sums (weights x^2) of the symmetric quants of x at iscale; optionally stores L. */
static void symmetric_sums(int n, int nmax, const float *x, float iscale, uint8_t *L,
                           float *sumlx, float *suml2)
{
    float slx = 0.f, sl2 = 0.f;
    for (int i = 0; i < n; i++) {
        int l = clamp_int(round_half_even(iscale * x[i]), -nmax, nmax - 1);
        if (L)
            L[i] = (uint8_t)(nmax + l);
        float w = x[i] * x[i];
        slx += w * x[i] * (float)l;
        sl2 += w * (float)l * (float)l;
    }
    *sumlx = slx;
    *suml2 = sl2;
}

/* qx (ggml's rmse_type 1): the best of 19 trial scales around nmax/max; L in 0..2*nmax-1. */
static float search_scale_qx(int n, int nmax, const float *x, uint8_t *L)
{
    int at = first_max_abs(n, x);
    if (at < 0 || fabsf(x[at]) < GROUP_MAX_EPS) {
        memset(L, 0, (size_t)n);
        return 0.f;
    }
    float max = x[at];
    float sumlx, suml2;
    symmetric_sums(n, nmax, x, (float)-nmax / max, L, &sumlx, &suml2);
    float scale = suml2 != 0 ? sumlx / suml2 : 0.f;
    float best = scale * sumlx;
    for (int t = -9; t <= 9; t++) {
        if (t == 0)
            continue;
        float iscale = -((float)nmax + 0.1f * (float)t) / max;
        symmetric_sums(n, nmax, x, iscale, NULL, &sumlx, &suml2);
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            symmetric_sums(n, nmax, x, iscale, L, &sumlx, &suml2);
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

/* ---------------------------------------------------------------- shared packing */

/* Four 2-bit values 32 apart per byte, per 128 elements (Q2_K and Q3_K qs). */
static void pack_2bit(const uint8_t L[QK_K], uint8_t qs[64])
{
    for (int half = 0; half < QK_K; half += 128)
        for (int l = 0; l < 32; l++)
            qs[half / 4 + l] = (uint8_t)(L[half + l] | L[half + l + 32] << 2 |
                                         L[half + l + 64] << 4 | L[half + l + 96] << 6);
}

/* Low and high nibbles of 32-byte runs: 64 elements per run (Q4_K and Q5_K qs). */
static void pack_4bit(const uint8_t L[QK_K], uint8_t qs[128])
{
    for (int chunk = 0; chunk < QK_K / 64; chunk++)
        for (int l = 0; l < 32; l++)
            qs[32 * chunk + l] = (uint8_t)((L[64 * chunk + l] & 15) |
                                           (L[64 * chunk + l + 32] & 15) << 4);
}

/* Inverse of kq_unpack_scales_k4 for 6-bit scales ls[j] and mins lm[j]. */
static void pack_scales_k4(const uint8_t ls[8], const uint8_t lm[8], uint8_t packed[12])
{
    for (int j = 0; j < 4; j++) {
        packed[j] = (uint8_t)(ls[j] | (ls[j + 4] >> 4) << 6);
        packed[j + 4] = (uint8_t)(lm[j] | (lm[j + 4] >> 4) << 6);
        packed[j + 8] = (uint8_t)((ls[j + 4] & 15) | (lm[j + 4] & 15) << 4);
    }
}

/* ---------------------------------------------------------------- unpacking to i8 quants */

/*
 * Each weight type's quants of one super-block as signed bytes in element order, biases
 * applied (Q3_K -4..3, Q6_K -32..31, the others unsigned). Loops follow the bit layout
 * so the compiler can vectorize them.
 */
static void unpack_q2(const block_q2_k *b, int8_t q[QK_K])
{
    for (int h = 0; h < 2; h++)
        for (int k = 0; k < 4; k++)
            for (int l = 0; l < 32; l++)
                q[128 * h + 32 * k + l] = (int8_t)((b->qs[32 * h + l] >> (2 * k)) & 3);
}

static void unpack_q3(const block_q3_k *b, int8_t q[QK_K])
{
    for (int h = 0; h < 2; h++)
        for (int k = 0; k < 4; k++)
            for (int l = 0; l < 32; l++) {
                int low = (b->qs[32 * h + l] >> (2 * k)) & 3;
                int high = (b->hmask[l] >> (4 * h + k)) & 1;
                q[128 * h + 32 * k + l] = (int8_t)(low + 4 * high - 4);
            }
}

static void unpack_q4(const block_q4_k *b, int8_t q[QK_K])
{
    for (int c = 0; c < 4; c++)
        for (int l = 0; l < 32; l++) {
            q[64 * c + l] = (int8_t)(b->qs[32 * c + l] & 15);
            q[64 * c + 32 + l] = (int8_t)(b->qs[32 * c + l] >> 4);
        }
}

static void unpack_q5(const block_q5_k *b, int8_t q[QK_K])
{
    for (int c = 0; c < 4; c++)
        for (int l = 0; l < 32; l++) {
            int high_lo = (b->qh[l] >> (2 * c)) & 1, high_hi = (b->qh[l] >> (2 * c + 1)) & 1;
            q[64 * c + l] = (int8_t)((b->qs[32 * c + l] & 15) + 16 * high_lo);
            q[64 * c + 32 + l] = (int8_t)((b->qs[32 * c + l] >> 4) + 16 * high_hi);
        }
}

static void unpack_q6(const block_q6_k *b, int8_t q[QK_K])
{
    for (int h = 0; h < 2; h++) {
        const uint8_t *ql = b->ql + 64 * h, *qh = b->qh + 32 * h;
        int8_t *out = q + 128 * h;
        for (int l = 0; l < 32; l++) {
            out[l] = (int8_t)(((ql[l] & 15) | (qh[l] & 3) << 4) - 32);
            out[l + 32] = (int8_t)(((ql[l + 32] & 15) | ((qh[l] >> 2) & 3) << 4) - 32);
            out[l + 64] = (int8_t)(((ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4) - 32);
            out[l + 96] = (int8_t)(((ql[l + 32] >> 4) | (qh[l] >> 6) << 4) - 32);
        }
    }
}

/* out = f32(scale * q) - min over one sub-block: how every K-quant dequantizes. */
static void dequantize_run(float *out, const int8_t *q, int n, float scale, float min)
{
    for (int l = 0; l < n; l++)
        out[l] = scale * (float)q[l] - min;
}

/* ---------------------------------------------------------------- Q2_K */

static void dequantize_q2_k(const void *blocks, float *out, size_t n)
{
    const block_q2_k *b = blocks;
    for (size_t i = 0; i < n / QK_K; i++, b++, out += QK_K) {
        float d = f16_field(b->d), dmin = f16_field(b->dmin);
        int8_t q[QK_K];
        unpack_q2(b, q);
        for (int s = 0; s < 16; s++)
            dequantize_run(out + 16 * s, q + 16 * s, 16, d * (float)(b->scales[s] & 15),
                           dmin * (float)(b->scales[s] >> 4));
    }
}

/*
 * Scale the sixteen sub-block values v[] to 4 bits against their maximum; returns the f16
 * super-scale. Used for Q2_K's scales (low nibbles) and mins (high nibbles).
 */
static uint16_t pack_q2_nibbles(const float v[16], uint8_t scales[16], int shift)
{
    float max = 0.f;
    for (int j = 0; j < 16; j++)
        if (v[j] > max)
            max = v[j];
    if (!(max > 0))
        return 0;
    float iscale = 15.f / max;
    for (int j = 0; j < 16; j++)
        scales[j] |= (uint8_t)((unsigned)round_half_even(iscale * v[j]) << shift);
    return quant_f32_to_f16(max / 15.f);
}

static void quantize_q2_k(const float *in, void *blocks, size_t n)
{
    block_q2_k *b = blocks;
    for (size_t i = 0; i < n / QK_K; i++, b++, in += QK_K) {
        uint8_t L[QK_K], L_trial[16];
        float w[16], scale[16], min[16];
        for (int j = 0; j < 16; j++) {
            for (int l = 0; l < 16; l++)
                w[l] = fabsf(in[16 * j + l]);
            scale[j] = search_scale_min(16, 3, in + 16 * j, w, L + 16 * j, &min[j], L_trial,
                                        -0.5f, 0.1f, 15, true);
        }
        memset(b->scales, 0, sizeof b->scales);
        kq_write_u16(b->d, pack_q2_nibbles(scale, b->scales, 0));
        kq_write_u16(b->dmin, pack_q2_nibbles(min, b->scales, 4));
        float d = f16_field(b->d), dmin = f16_field(b->dmin);
        for (int j = 0; j < 16; j++) {
            float dd = d * (float)(b->scales[j] & 15);
            if (dd == 0)
                continue;
            float dm = dmin * (float)(b->scales[j] >> 4);
            for (int l = 0; l < 16; l++)
                L[16 * j + l] =
                    (uint8_t)clamp_int(round_half_even((in[16 * j + l] + dm) / dd), 0, 3);
        }
        pack_2bit(L, b->qs);
    }
}

/* ---------------------------------------------------------------- Q3_K */

static void dequantize_q3_k(const void *blocks, float *out, size_t n)
{
    const block_q3_k *b = blocks;
    for (size_t i = 0; i < n / QK_K; i++, b++, out += QK_K) {
        float d = f16_field(b->d);
        int8_t scales[16], q[QK_K];
        kq_unpack_scales_q3(b->scales, scales);
        unpack_q3(b, q);
        /* x - 0.f is x for every x, -0 included: no min term, same values */
        for (int s = 0; s < 16; s++)
            dequantize_run(out + 16 * s, q + 16 * s, 16, d * (float)scales[s], 0.f);
    }
}

static void quantize_q3_k(const float *in, void *blocks, size_t n)
{
    block_q3_k *b = blocks;
    for (size_t i = 0; i < n / QK_K; i++, b++, in += QK_K) {
        int8_t L_signed[QK_K];
        uint8_t L[QK_K];
        float scale[16];
        for (int j = 0; j < 16; j++)
            scale[j] = search_scale_q3(16, 4, in + 16 * j, L_signed + 16 * j);
        int at = first_max_abs(16, scale);
        float max_scale = at < 0 ? 0.f : scale[at];
        memset(b->scales, 0, sizeof b->scales);
        if (max_scale != 0) {
            float iscale = -32.f / max_scale;
            for (int j = 0; j < 16; j++) {
                int l = clamp_int(round_half_even(iscale * scale[j]), -32, 31) + 32;
                if (j < 8)
                    b->scales[j] = (uint8_t)(l & 15);
                else
                    b->scales[j - 8] |= (uint8_t)((l & 15) << 4);
                b->scales[8 + j % 4] |= (uint8_t)((l >> 4) << (2 * (j / 4)));
            }
            kq_write_u16(b->d, quant_f32_to_f16(1.f / iscale));
        } else {
            kq_write_u16(b->d, 0);
        }
        for (int e = 0; e < QK_K; e++)
            L[e] = (uint8_t)L_signed[e];
        float d = f16_field(b->d);
        int8_t scales[16];
        kq_unpack_scales_q3(b->scales, scales);
        for (int j = 0; j < 16; j++) {
            float dd = d * (float)scales[j];
            if (dd == 0)
                continue;
            for (int l = 0; l < 16; l++)
                L[16 * j + l] =
                    (uint8_t)(clamp_int(round_half_even(in[16 * j + l] / dd), -4, 3) + 4);
        }
        memset(b->hmask, 0, sizeof b->hmask);
        for (int e = 0; e < QK_K; e++) {
            if (L[e] > 3) {
                b->hmask[e % 32] |= (uint8_t)(1 << (e / 32));
                L[e] -= 4;
            }
        }
        pack_2bit(L, b->qs);
    }
}

/* ---------------------------------------------------------------- Q4_K and Q5_K */

static void dequantize_q4_k(const void *blocks, float *out, size_t n)
{
    const block_q4_k *b = blocks;
    for (size_t i = 0; i < n / QK_K; i++, b++, out += QK_K) {
        float d = f16_field(b->d), dmin = f16_field(b->dmin);
        uint8_t sc_m[16];
        int8_t q[QK_K];
        kq_unpack_scales_k4(b->scales, sc_m);
        unpack_q4(b, q);
        for (int j = 0; j < 8; j++)
            dequantize_run(out + 32 * j, q + 32 * j, 32, d * (float)sc_m[j],
                           dmin * (float)sc_m[8 + j]);
    }
}

static void dequantize_q5_k(const void *blocks, float *out, size_t n)
{
    const block_q5_k *b = blocks;
    for (size_t i = 0; i < n / QK_K; i++, b++, out += QK_K) {
        float d = f16_field(b->d), dmin = f16_field(b->dmin);
        uint8_t sc_m[16];
        int8_t q[QK_K];
        kq_unpack_scales_k4(b->scales, sc_m);
        unpack_q5(b, q);
        for (int j = 0; j < 8; j++)
            dequantize_run(out + 32 * j, q + 32 * j, 32, d * (float)sc_m[j],
                           dmin * (float)sc_m[8 + j]);
    }
}

/*
 * The part Q4_K and Q5_K share: per 32-element sub-block, qkx2 with weights av_x + |x|,
 * 6-bit scales and mins, then requantization to 0..nmax with the stored values.
 * Writes d, dmin and scales and leaves the final quants in L.
 */
static void quantize_k4_scales(const float *in, int nmax, float rmin, int nstep,
                               uint8_t d_out[2], uint8_t dmin_out[2], uint8_t packed[12],
                               uint8_t L[QK_K])
{
    uint8_t L_trial[32];
    float w[32], scale[8], min[8];
    float max_scale = 0.f, max_min = 0.f;
    for (int j = 0; j < 8; j++) {
        const float *x = in + 32 * j;
        float sum_x2 = 0.f;
        for (int l = 0; l < 32; l++)
            sum_x2 += x[l] * x[l];
        float av_x = sqrtf(sum_x2 / 32.f);
        for (int l = 0; l < 32; l++)
            w[l] = av_x + fabsf(x[l]);
        scale[j] = search_scale_min(32, nmax, x, w, L + 32 * j, &min[j], L_trial, rmin, 0.1f,
                                    nstep, false);
        if (scale[j] > max_scale)
            max_scale = scale[j];
        if (min[j] > max_min)
            max_min = min[j];
    }
    float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
    float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
    uint8_t ls[8], lm[8];
    for (int j = 0; j < 8; j++) {
        /* ggml converts to u8 before clamping: a negative value wraps, then clamps to 63 */
        uint8_t s = (uint8_t)round_half_even(inv_scale * scale[j]);
        uint8_t m = (uint8_t)round_half_even(inv_min * min[j]);
        ls[j] = s < 63 ? s : 63;
        lm[j] = m < 63 ? m : 63;
    }
    pack_scales_k4(ls, lm, packed);
    kq_write_u16(d_out, quant_f32_to_f16(max_scale / 63.f));
    kq_write_u16(dmin_out, quant_f32_to_f16(max_min / 63.f));
    float d = f16_field(d_out), dmin = f16_field(dmin_out);
    uint8_t sc_m[16];
    kq_unpack_scales_k4(packed, sc_m);
    for (int j = 0; j < 8; j++) {
        float dd = d * (float)sc_m[j];
        if (dd == 0)
            continue;
        float dm = dmin * (float)sc_m[8 + j];
        for (int l = 0; l < 32; l++)
            L[32 * j + l] =
                (uint8_t)clamp_int(round_half_even((in[32 * j + l] + dm) / dd), 0, nmax);
    }
}

static void quantize_q4_k(const float *in, void *blocks, size_t n)
{
    block_q4_k *b = blocks;
    for (size_t i = 0; i < n / QK_K; i++, b++, in += QK_K) {
        uint8_t L[QK_K];
        quantize_k4_scales(in, 15, -1.f, 20, b->d, b->dmin, b->scales, L);
        pack_4bit(L, b->qs);
    }
}

static void quantize_q5_k(const float *in, void *blocks, size_t n)
{
    block_q5_k *b = blocks;
    for (size_t i = 0; i < n / QK_K; i++, b++, in += QK_K) {
        uint8_t L[QK_K];
        quantize_k4_scales(in, 31, -0.5f, 15, b->d, b->dmin, b->scales, L);
        memset(b->qh, 0, sizeof b->qh);
        for (int e = 0; e < QK_K; e++) {
            if (L[e] > 15) {
                b->qh[e % 32] |= (uint8_t)(1 << (e / 32));
                L[e] -= 16;
            }
        }
        pack_4bit(L, b->qs);
    }
}

/* ---------------------------------------------------------------- Q6_K */

static void dequantize_q6_k(const void *blocks, float *out, size_t n)
{
    const block_q6_k *b = blocks;
    for (size_t i = 0; i < n / QK_K; i++, b++, out += QK_K) {
        float d = f16_field(b->d);
        int8_t q[QK_K];
        unpack_q6(b, q);
        for (int s = 0; s < 16; s++)
            dequantize_run(out + 16 * s, q + 16 * s, 16, d * (float)b->scales[s], 0.f);
    }
}

static void pack_q6(const uint8_t L[QK_K], block_q6_k *b)
{
    for (int h = 0; h < 2; h++) {
        const uint8_t *src = L + 128 * h;
        uint8_t *ql = b->ql + 64 * h, *qh = b->qh + 32 * h;
        for (int l = 0; l < 32; l++) {
            ql[l] = (uint8_t)((src[l] & 15) | (src[l + 64] & 15) << 4);
            ql[l + 32] = (uint8_t)((src[l + 32] & 15) | (src[l + 96] & 15) << 4);
            qh[l] = (uint8_t)(src[l] >> 4 | (src[l + 32] >> 4) << 2 | (src[l + 64] >> 4) << 4 |
                              (src[l + 96] >> 4) << 6);
        }
    }
}

static void quantize_q6_k(const float *in, void *blocks, size_t n)
{
    block_q6_k *b = blocks;
    for (size_t i = 0; i < n / QK_K; i++, b++, in += QK_K) {
        uint8_t L[QK_K];
        float scale[16];
        for (int g = 0; g < 16; g++)
            scale[g] = search_scale_qx(16, 32, in + 16 * g, L + 16 * g);
        int at = first_max_abs(16, scale);
        if (at < 0 || fabsf(scale[at]) < GROUP_MAX_EPS) {
            memset(b, 0, sizeof *b);
            continue;
        }
        float iscale = -128.f / scale[at];
        kq_write_u16(b->d, quant_f32_to_f16(1.f / iscale));
        for (int g = 0; g < 16; g++) {
            int s = round_half_even(iscale * scale[g]);
            b->scales[g] = (int8_t)(s < 127 ? s : 127);
        }
        float d = f16_field(b->d);
        for (int g = 0; g < 16; g++) {
            float dd = d * (float)b->scales[g];
            if (dd == 0)
                continue;
            for (int l = 0; l < 16; l++)
                L[16 * g + l] =
                    (uint8_t)(clamp_int(round_half_even(in[16 * g + l] / dd), -32, 31) + 32);
        }
        pack_q6(L, b);
    }
}

/* ---------------------------------------------------------------- Q8_K */

static void dequantize_q8_k(const void *blocks, float *out, size_t n)
{
    const block_q8_k *b = blocks;
    for (size_t i = 0; i < n / QK_K; i++, b++, out += QK_K) {
        float d = q8k_d(b);
        for (int e = 0; e < QK_K; e++)
            out[e] = d * (float)b->qs[e];
    }
}

void quant_k_quantize_q8_k(const float *in, void *blocks, size_t n)
{
    block_q8_k *b = blocks;
    for (size_t i = 0; i < n / QK_K; i++, b++, in += QK_K) {
        int at = first_max_abs(QK_K, in);
        if (at < 0) {
            /* ggml leaves bsums unwritten here; zero is the only value consistent with qs */
            memset(b, 0, sizeof *b);
            continue;
        }
        float iscale = -127.f / in[at];
        for (int e = 0; e < QK_K; e++) {
            int q = round_half_even(iscale * in[e]);
            b->qs[e] = (int8_t)(q < 127 ? q : 127);
        }
        for (int g = 0; g < 16; g++) {
            int sum = 0;
            for (int l = 0; l < 16; l++)
                sum += b->qs[16 * g + l];
            int16_t sum16 = (int16_t)sum;
            memcpy(b->bsums + 2 * g, &sum16, sizeof sum16);
        }
        float d = 1.f / iscale;
        memcpy(b->d, &d, sizeof d);
    }
}

/* ---------------------------------------------------------------- scalar dots */

/*
 * ggml's portable order for the 8-lane types: per super-block, integer lane sums acc[l]
 * over elements e with e % 8 == l, weighted by the sub-block scale; then
 * sums[l] += (dx * dy) * acc[l], and the lanes are added into sumf at the very end.
 */
static float finish_lanes(float sumf, const float sums[8])
{
    for (int l = 0; l < 8; l++)
        sumf += sums[l];
    return sumf;
}

static void add_lanes(float sums[8], float d, const int32_t acc[8])
{
    for (int l = 0; l < 8; l++)
        sums[l] += d * (float)acc[l];
}

/*
 * acc[l] += scale * sum of q[e] * y[e] over the n (16 or 32) elements with e % 8 == l.
 * The partial sums fit in i16 (at most 4 products of |q| <= 32 and |y| <= 127), which lets
 * baseline SSE2 vectorize the loop.
 */
static void add_scaled_lanes(int32_t acc[8], int scale, const int8_t *q, const int8_t *y, int n)
{
    int16_t partial[8] = {0};
    for (int k = 0; k < n; k += 8)
        for (int l = 0; l < 8; l++)
            partial[l] = (int16_t)(partial[l] + (int16_t)q[k + l] * (int16_t)y[k + l]);
    for (int l = 0; l < 8; l++)
        acc[l] += scale * partial[l];
}

/* Sum over the 16 groups of bsums[g] * mins[g / per_group]. */
static int bsums_dot_mins(const block_q8_k *y, const uint8_t *mins, int per_group)
{
    int sum = 0;
    for (int g = 0; g < 16; g++)
        sum += q8k_bsum(y, g) * mins[g / per_group];
    return sum;
}

static float dot_q2_k(size_t n, const void *w, const void *a)
{
    const block_q2_k *x = w;
    const block_q8_k *y = a;
    float sumf = 0.f;
    for (size_t i = 0; i < n / QK_K; i++, x++, y++) {
        int8_t q[QK_K];
        uint8_t mins[16];
        unpack_q2(x, q);
        for (int s = 0; s < 16; s++)
            mins[s] = x->scales[s] >> 4;
        int summs = bsums_dot_mins(y, mins, 1);
        int32_t acc[8] = {0};
        for (int s = 0; s < 16; s++)
            add_scaled_lanes(acc, x->scales[s] & 15, q + 16 * s, y->qs + 16 * s, 16);
        int isum = 0;
        for (int l = 0; l < 8; l++)
            isum += acc[l];
        float dy = q8k_d(y);
        float dall = dy * f16_field(x->d), dmin = dy * f16_field(x->dmin);
        sumf += dall * (float)isum - dmin * (float)summs;
    }
    return sumf;
}

static float dot_q3_k(size_t n, const void *w, const void *a)
{
    const block_q3_k *x = w;
    const block_q8_k *y = a;
    float sums[8] = {0};
    for (size_t i = 0; i < n / QK_K; i++, x++, y++) {
        int8_t scales[16], q[QK_K];
        kq_unpack_scales_q3(x->scales, scales);
        unpack_q3(x, q);
        int32_t acc[8] = {0};
        for (int s = 0; s < 16; s++)
            add_scaled_lanes(acc, scales[s], q + 16 * s, y->qs + 16 * s, 16);
        add_lanes(sums, f16_field(x->d) * q8k_d(y), acc);
    }
    return finish_lanes(0.f, sums);
}

static float dot_q4_k(size_t n, const void *w, const void *a)
{
    const block_q4_k *x = w;
    const block_q8_k *y = a;
    float sums[8] = {0}, sumf = 0.f;
    for (size_t i = 0; i < n / QK_K; i++, x++, y++) {
        uint8_t sc_m[16];
        int8_t q[QK_K];
        kq_unpack_scales_k4(x->scales, sc_m);
        unpack_q4(x, q);
        int summs = bsums_dot_mins(y, sc_m + 8, 2);
        int32_t acc[8] = {0};
        for (int j = 0; j < 8; j++)
            add_scaled_lanes(acc, sc_m[j], q + 32 * j, y->qs + 32 * j, 32);
        float dy = q8k_d(y);
        add_lanes(sums, f16_field(x->d) * dy, acc);
        sumf -= f16_field(x->dmin) * dy * (float)summs;
    }
    return finish_lanes(sumf, sums);
}

static float dot_q5_k(size_t n, const void *w, const void *a)
{
    const block_q5_k *x = w;
    const block_q8_k *y = a;
    float sums[8] = {0}, sumf = 0.f;
    for (size_t i = 0; i < n / QK_K; i++, x++, y++) {
        uint8_t sc_m[16];
        int8_t q[QK_K];
        kq_unpack_scales_k4(x->scales, sc_m);
        unpack_q5(x, q);
        int summs = bsums_dot_mins(y, sc_m + 8, 2);
        int32_t acc[8] = {0};
        for (int j = 0; j < 8; j++)
            add_scaled_lanes(acc, sc_m[j], q + 32 * j, y->qs + 32 * j, 32);
        float dy = q8k_d(y);
        add_lanes(sums, f16_field(x->d) * dy, acc);
        sumf -= f16_field(x->dmin) * dy * (float)summs;
    }
    return finish_lanes(sumf, sums);
}

static float dot_q6_k(size_t n, const void *w, const void *a)
{
    const block_q6_k *x = w;
    const block_q8_k *y = a;
    float sums[8] = {0};
    for (size_t i = 0; i < n / QK_K; i++, x++, y++) {
        int8_t q[QK_K];
        unpack_q6(x, q);
        int32_t acc[8] = {0};
        for (int s = 0; s < 16; s++)
            add_scaled_lanes(acc, x->scales[s], q + 16 * s, y->qs + 16 * s, 16);
        add_lanes(sums, f16_field(x->d) * q8k_d(y), acc);
    }
    return finish_lanes(0.f, sums);
}

/* ---------------------------------------------------------------- packed layout */

enum { PACK_ROWS = QUANT_PACK_ROWS };

/* One row's super-block `block` into lane r of the packed super-block at out. */
typedef void (*pack_lane_fn)(uint8_t *out, size_t r, const void *block);

/* Every super-block of every row into its group's lanes (the layouts of quant_k_blocks.h). */
static void pack_groups(const void *w, size_t n, size_t n_rows, void *packed,
                        size_t block_bytes, pack_lane_fn pack_lane)
{
    const uint8_t *rows = w;
    size_t n_blocks = n / QK_K;
    uint8_t *out = packed;
    for (size_t g = 0; g < n_rows / PACK_ROWS; g++)
        for (size_t b = 0; b < n_blocks; b++, out += PACK_ROWS * block_bytes)
            for (size_t r = 0; r < PACK_ROWS; r++)
                pack_lane(out, r, rows + ((g * PACK_ROWS + r) * n_blocks + b) * block_bytes);
}

/* The n_words 4-byte words of a row's field into lane r of n_words vectors at out. */
static void pack_words(uint8_t *out, size_t r, const void *field, size_t n_words)
{
    const uint8_t *words = field;
    for (size_t v = 0; v < n_words; v++)
        memcpy(out + 64 * v + 4 * r, words + 4 * v, 4);
}

static void pack_lane_q2_k(uint8_t *out, size_t r, const void *block)
{
    const block_q2_k *src = block;
    memcpy(out + 2 * r, src->d, 2);
    memcpy(out + Q2K_DMIN_AT + 2 * r, src->dmin, 2);
    pack_words(out + Q2K_SCALES_AT, r, src->scales, 4);
    pack_words(out + Q2K_QS_AT, r, src->qs, 16);
}

/* Byte i of the words X, Y, Z (z = 0, 1, 2) of Q3_K triple (p, v) for quants u[32k + l]
 * (0..7), l = 16p + 4v + i: the layout of quant_k_blocks.h. */
static uint8_t q3_triple_byte(const uint8_t u[QK_K], int z, int l)
{
    int in_place = u[32 * (2 * z) + l] << 5 | u[32 * (2 * z + 1) + l] << 2;
    int split = z < 2 ? u[32 * (6 + z) + l] & 3 : (u[32 * 6 + l] >> 2) | (u[32 * 7 + l] >> 2) << 1;
    return (uint8_t)(in_place | split);
}

static void pack_lane_q3_k(uint8_t *out, size_t r, const void *block)
{
    const block_q3_k *src = block;
    int8_t q[QK_K];
    uint8_t u[QK_K];
    unpack_q3(src, q);
    for (int e = 0; e < QK_K; e++)
        u[e] = (uint8_t)(q[e] + 4);
    memcpy(out + 2 * r, src->d, 2);
    pack_words(out + Q3K_SCALES_AT, r, src->scales, 3);
    for (int p = 0; p < 2; p++)
        for (int v = 0; v < 4; v++)
            for (int z = 0; z < 3; z++)
                for (int i = 0; i < 4; i++)
                    out[Q3K_TRIPLE_AT(p, v) + 64 * z + 4 * r + i] =
                        q3_triple_byte(u, z, 16 * p + 4 * v + i);
}

static void pack_lane_q4_k(uint8_t *out, size_t r, const void *block)
{
    const block_q4_k *src = block;
    memcpy(out + 2 * r, src->d, 2);
    memcpy(out + 32 + 2 * r, src->dmin, 2);
    pack_words(out + Q4K_SCALES_AT, r, src->scales, 3);
    pack_words(out + Q4K_QS_AT, r, src->qs, 32);
}

static void pack_lane_q5_k(uint8_t *out, size_t r, const void *block)
{
    const block_q5_k *src = block;
    memcpy(out + 2 * r, src->d, 2);
    memcpy(out + 32 + 2 * r, src->dmin, 2);
    pack_words(out + Q5K_SCALES_AT, r, src->scales, 3);
    pack_words(out + Q5K_QH_AT, r, src->qh, 8);
    pack_words(out + Q5K_QS_AT, r, src->qs, 32);
}

/* Word triple (h, v) of a Q6_K row (quant_k_blocks.h): byte j of X, Y, Z holds quarters
 * 0, 1, 2 of position j in bits 0-5 and two bits of quarter 3 in bits 6-7. Quarter k (q +
 * 32) of position j is, in the block, a nibble of ql word 16h + v (k = 0 low, 2 high) or
 * 16h + 8 + v (k = 1 low, 3 high) under bit pair k of qh word 8h + v. The four positions go
 * at once, a byte each of a 32-bit word; no shift carries a bit out of its byte's mask. */
static void pack_triple_q6_k(const block_q6_k *src, size_t h, size_t v, uint32_t xyz[3])
{
    const uint32_t low4 = 0x0f0f0f0fu, low2 = 0x03030303u;
    uint32_t ql02, ql13, qh;
    memcpy(&ql02, src->ql + 4 * (16 * h + v), 4);
    memcpy(&ql13, src->ql + 4 * (16 * h + 8 + v), 4);
    memcpy(&qh, src->qh + 4 * (8 * h + v), 4);
    uint32_t q3 = (ql13 >> 4 & low4) | (qh >> 6 & low2) << 4;
    xyz[0] = (ql02 & low4) | (qh & low2) << 4 | (q3 & low2) << 6;
    xyz[1] = (ql13 & low4) | (qh >> 2 & low2) << 4 | (q3 >> 2 & low2) << 6;
    xyz[2] = (ql02 >> 4 & low4) | (qh >> 4 & low2) << 4 | (q3 >> 4 & low2) << 6;
}

static void pack_lane_q6_k(uint8_t *out, size_t r, const void *block)
{
    const block_q6_k *src = block;
    memcpy(out + 2 * r, src->d, 2);
    pack_words(out + Q6K_SCALES_AT, r, src->scales, 4);
    for (size_t h = 0; h < 2; h++)
        for (size_t v = 0; v < 8; v++) {
            uint32_t xyz[3];
            pack_triple_q6_k(src, h, v, xyz);
            pack_words(out + Q6K_TRIPLE_AT(h, v), r, xyz, 3);
        }
}

void quant_k_pack_q2_k(const void *w, size_t n, size_t n_rows, void *packed)
{
    pack_groups(w, n, n_rows, packed, sizeof(block_q2_k), pack_lane_q2_k);
}

void quant_k_pack_q3_k(const void *w, size_t n, size_t n_rows, void *packed)
{
    pack_groups(w, n, n_rows, packed, sizeof(block_q3_k), pack_lane_q3_k);
}

void quant_k_pack_q4_k(const void *w, size_t n, size_t n_rows, void *packed)
{
    pack_groups(w, n, n_rows, packed, sizeof(block_q4_k), pack_lane_q4_k);
}

void quant_k_pack_q5_k(const void *w, size_t n, size_t n_rows, void *packed)
{
    pack_groups(w, n, n_rows, packed, sizeof(block_q5_k), pack_lane_q5_k);
}

void quant_k_pack_q6_k(const void *w, size_t n, size_t n_rows, void *packed)
{
    pack_groups(w, n, n_rows, packed, sizeof(block_q6_k), pack_lane_q6_k);
}

void quant_k_sub_block_sums(const void *act, size_t n, void *sums)
{
    const block_q8_k *y = act;
    uint8_t *out = sums;
    for (size_t b = 0; b < n / QK_K; b++)
        for (int k = 0; k < 8; k++) {
            int16_t sum = (int16_t)(q8k_bsum(&y[b], 2 * k) + q8k_bsum(&y[b], 2 * k + 1));
            memcpy(out + 16 * b + 2 * k, &sum, sizeof sum);
        }
}

/* ---------------------------------------------------------------- ops table */

enum { KQ_Q2, KQ_Q3, KQ_Q4, KQ_Q5, KQ_Q6, KQ_Q8, KQ_COUNT };

#define KQ_OPS(type_, deq, quant, dotfn) KQ_OPS_ACT(type_, deq, quant, dotfn, quant_k_quantize_q8_k)
#define KQ_OPS_ACT(type_, deq, quant, dotfn, act)                                           \
    {.type = (type_), .dequantize = (deq), .quantize = (quant),                             \
     .act_type = TENSOR_TYPE_Q8_K, .quantize_act = (act), .dot = (dotfn)}
/* Every packed K type names the sub-block sums, which only Q4_K's and Q5_K's kernels read:
 * products of several types share one quantized input and its sums (a Q4_K_M layer's Q4_K
 * wq and Q6_K wv), prepared by whichever ops the forward pass holds. */
#define KQ_PACKED_OPS(type_, deq, quant, dotfn, act, pack_fn, packed_fn)                     \
    {.type = (type_), .dequantize = (deq), .quantize = (quant),                             \
     .act_type = TENSOR_TYPE_Q8_K, .quantize_act = (act), .dot = (dotfn),                   \
     .pack = (pack_fn), .act_sums = quant_k_sub_block_sums, .matmul_packed = (packed_fn)}

/*
 * Per type and level. AVX-512 has its own kernels for Q4_K, Q5_K and Q6_K (the Q4_K_M and
 * Q5_K_M types) and reuses the AVX2 ones otherwise; without VNNI it takes the packed AVX2
 * Q2_K / Q3_K / Q4_K / Q5_K / Q6_K kernels, whose float steps its dots share. Dequantize and quantize are the
 * portable ones at every level (exact, and off the per-token hot path); the Q8_K activation
 * quantizer has an AVX-512 version with the same bytes (scalar, it was a visible share of a
 * Q4_K_M prompt).
 * Q8_K has no dot partner in ggml: its entry exists for (de)quantizing activations.
 */
static const quant_ops kq_ops[KQ_COUNT][CPU_LEVEL_COUNT] = {
    [KQ_Q2] = {KQ_OPS(TENSOR_TYPE_Q2_K, dequantize_q2_k, quantize_q2_k, dot_q2_k),
               KQ_PACKED_OPS(TENSOR_TYPE_Q2_K, dequantize_q2_k, quantize_q2_k, quant_k_dot_q2_k_avx2,
                             quant_k_quantize_q8_k, quant_k_pack_q2_k,
                             quant_k_matmul_packed_q2_k_avx2),
               KQ_PACKED_OPS(TENSOR_TYPE_Q2_K, dequantize_q2_k, quantize_q2_k, quant_k_dot_q2_k_avx2,
                             quant_k_quantize_q8_k_avx512, quant_k_pack_q2_k,
                             quant_k_matmul_packed_q2_k_avx2)},
    [KQ_Q3] = {KQ_OPS(TENSOR_TYPE_Q3_K, dequantize_q3_k, quantize_q3_k, dot_q3_k),
               KQ_PACKED_OPS(TENSOR_TYPE_Q3_K, dequantize_q3_k, quantize_q3_k, quant_k_dot_q3_k_avx2,
                             quant_k_quantize_q8_k, quant_k_pack_q3_k,
                             quant_k_matmul_packed_q3_k_avx2),
               KQ_PACKED_OPS(TENSOR_TYPE_Q3_K, dequantize_q3_k, quantize_q3_k, quant_k_dot_q3_k_avx2,
                             quant_k_quantize_q8_k_avx512, quant_k_pack_q3_k,
                             quant_k_matmul_packed_q3_k_avx2)},
    [KQ_Q4] = {KQ_OPS(TENSOR_TYPE_Q4_K, dequantize_q4_k, quantize_q4_k, dot_q4_k),
               KQ_PACKED_OPS(TENSOR_TYPE_Q4_K, dequantize_q4_k, quantize_q4_k, quant_k_dot_q4_k_avx2,
                             quant_k_quantize_q8_k, quant_k_pack_q4_k,
                             quant_k_matmul_packed_q4_k_avx2),
               KQ_PACKED_OPS(TENSOR_TYPE_Q4_K, dequantize_q4_k, quantize_q4_k, quant_k_dot_q4_k_avx512,
                             quant_k_quantize_q8_k_avx512, quant_k_pack_q4_k,
                             quant_k_matmul_packed_q4_k_avx2)},
    [KQ_Q5] = {KQ_OPS(TENSOR_TYPE_Q5_K, dequantize_q5_k, quantize_q5_k, dot_q5_k),
               KQ_PACKED_OPS(TENSOR_TYPE_Q5_K, dequantize_q5_k, quantize_q5_k, quant_k_dot_q5_k_avx2,
                             quant_k_quantize_q8_k, quant_k_pack_q5_k,
                             quant_k_matmul_packed_q5_k_avx2),
               KQ_PACKED_OPS(TENSOR_TYPE_Q5_K, dequantize_q5_k, quantize_q5_k, quant_k_dot_q5_k_avx512,
                             quant_k_quantize_q8_k_avx512, quant_k_pack_q5_k,
                             quant_k_matmul_packed_q5_k_avx2)},
    [KQ_Q6] = {KQ_OPS(TENSOR_TYPE_Q6_K, dequantize_q6_k, quantize_q6_k, dot_q6_k),
               KQ_PACKED_OPS(TENSOR_TYPE_Q6_K, dequantize_q6_k, quantize_q6_k, quant_k_dot_q6_k_avx2,
                             quant_k_quantize_q8_k, quant_k_pack_q6_k,
                             quant_k_matmul_packed_q6_k_avx2),
               KQ_PACKED_OPS(TENSOR_TYPE_Q6_K, dequantize_q6_k, quantize_q6_k, quant_k_dot_q6_k_avx512,
                             quant_k_quantize_q8_k_avx512, quant_k_pack_q6_k,
                             quant_k_matmul_packed_q6_k_avx2)},
    [KQ_Q8] = {KQ_OPS(TENSOR_TYPE_Q8_K, dequantize_q8_k, quant_k_quantize_q8_k, NULL),
               KQ_OPS(TENSOR_TYPE_Q8_K, dequantize_q8_k, quant_k_quantize_q8_k, NULL),
               KQ_OPS_ACT(TENSOR_TYPE_Q8_K, dequantize_q8_k, quant_k_quantize_q8_k, NULL,
                          quant_k_quantize_q8_k_avx512)},
};

/* Q2_K, Q3_K, Q4_K, Q5_K and Q6_K at level avx512 with VNNI: the same kernels plus the
 * packed matrix ones. Q2_K's and Q3_K's dots are the AVX2 ones, which add super-blocks in
 * the packed order. */
static const quant_ops q2_k_vnni_ops =
    KQ_PACKED_OPS(TENSOR_TYPE_Q2_K, dequantize_q2_k, quantize_q2_k, quant_k_dot_q2_k_avx2,
                  quant_k_quantize_q8_k_avx512, quant_k_pack_q2_k,
                  quant_k_matmul_packed_q2_k_avx512);
static const quant_ops q3_k_vnni_ops =
    KQ_PACKED_OPS(TENSOR_TYPE_Q3_K, dequantize_q3_k, quantize_q3_k, quant_k_dot_q3_k_avx2,
                  quant_k_quantize_q8_k_avx512, quant_k_pack_q3_k,
                  quant_k_matmul_packed_q3_k_avx512);
static const quant_ops q4_k_vnni_ops =
    KQ_PACKED_OPS(TENSOR_TYPE_Q4_K, dequantize_q4_k, quantize_q4_k, quant_k_dot_q4_k_avx512,
                  quant_k_quantize_q8_k_avx512, quant_k_pack_q4_k,
                  quant_k_matmul_packed_q4_k_avx512);
static const quant_ops q5_k_vnni_ops =
    KQ_PACKED_OPS(TENSOR_TYPE_Q5_K, dequantize_q5_k, quantize_q5_k, quant_k_dot_q5_k_avx512,
                  quant_k_quantize_q8_k_avx512, quant_k_pack_q5_k,
                  quant_k_matmul_packed_q5_k_avx512);
static const quant_ops q6_k_vnni_ops =
    KQ_PACKED_OPS(TENSOR_TYPE_Q6_K, dequantize_q6_k, quantize_q6_k, quant_k_dot_q6_k_avx512,
                  quant_k_quantize_q8_k_avx512, quant_k_pack_q6_k,
                  quant_k_matmul_packed_q6_k_avx512);

const quant_ops *quant_k_ops(uint32_t type, enum cpu_level level)
{
    if (type < TENSOR_TYPE_Q2_K || type > TENSOR_TYPE_Q8_K)
        return NULL;
    assert(level < CPU_LEVEL_COUNT);
    if (level == CPU_LEVEL_AVX512 && cpu_has_avx512_vnni()) {
        if (type == TENSOR_TYPE_Q2_K)
            return &q2_k_vnni_ops;
        if (type == TENSOR_TYPE_Q3_K)
            return &q3_k_vnni_ops;
        if (type == TENSOR_TYPE_Q4_K)
            return &q4_k_vnni_ops;
        if (type == TENSOR_TYPE_Q5_K)
            return &q5_k_vnni_ops;
        if (type == TENSOR_TYPE_Q6_K)
            return &q6_k_vnni_ops;
    }
    return &kq_ops[type - TENSOR_TYPE_Q2_K][level];
}

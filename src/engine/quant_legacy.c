/*
 * Scalar arithmetic of F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 and Q8_1,
 * and the per-level ops tables of these types. The quantizers are ggml's
 * quantize_row_*_ref bit for bit; activations use ggml's x86 recipe at every level so that a
 * model gives the same activation bytes whatever the CPU. Dot products follow ggml's
 * portable order; the SIMD levels only replace the dot pointers.
 */
#include "quant_legacy.h"

#include <float.h>
#include <math.h>
#include <string.h>

#define QK QUANT_QK32

static float half(uint16_t h)
{
    return quant_f16_to_f32(h);
}

/* ---- F32, F16, BF16 ------------------------------------------------------------------- */

static void dequantize_f32(const void *blocks, float *out, size_t n)
{
    memcpy(out, blocks, n * sizeof(float));
}

static void quantize_f32(const float *in, void *blocks, size_t n)
{
    memcpy(blocks, in, n * sizeof(float));
}

static void dequantize_f16(const void *blocks, float *out, size_t n)
{
    const uint16_t *h = blocks;
    for (size_t i = 0; i < n; i++)
        out[i] = quant_f16_to_f32(h[i]);
}

static void quantize_f16(const float *in, void *blocks, size_t n)
{
    uint16_t *h = blocks;
    for (size_t i = 0; i < n; i++)
        h[i] = quant_f32_to_f16(in[i]);
}

static void dequantize_bf16(const void *blocks, float *out, size_t n)
{
    const uint16_t *h = blocks;
    for (size_t i = 0; i < n; i++)
        out[i] = quant_bf16_to_f32(h[i]);
}

static void quantize_bf16(const float *in, void *blocks, size_t n)
{
    uint16_t *h = blocks;
    for (size_t i = 0; i < n; i++)
        h[i] = quant_f32_to_bf16(in[i]);
}

/* Portable float dots: each product rounded to f32, accumulated in f64, as in ggml. */
static float dot_f32(size_t n, const void *w, const void *a)
{
    const float *x = w, *y = a;
    double sum = 0.0;
    for (size_t i = 0; i < n; i++)
        sum += (double)(x[i] * y[i]);
    return (float)sum;
}

static float dot_f16(size_t n, const void *w, const void *a)
{
    const uint16_t *x = w, *y = a;
    double sum = 0.0;
    for (size_t i = 0; i < n; i++)
        sum += (double)(quant_f16_to_f32(x[i]) * quant_f16_to_f32(y[i]));
    return (float)sum;
}

static float dot_bf16(size_t n, const void *w, const void *a)
{
    const uint16_t *x = w, *y = a;
    double sum = 0.0;
    for (size_t i = 0; i < n; i++)
        sum += (double)(quant_bf16_to_f32(x[i]) * quant_bf16_to_f32(y[i]));
    return (float)sum;
}

/* ---- shared block helpers ------------------------------------------------------------- */

/* The signed value of largest magnitude; the first one wins ties, as in ggml. */
static float first_max_signed(const float *x)
{
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < QK; j++) {
        if (fabsf(x[j]) > amax) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    }
    return max;
}

static void block_min_max(const float *x, float *min, float *max)
{
    *min = FLT_MAX;
    *max = -FLT_MAX;
    for (int j = 0; j < QK; j++) {
        if (x[j] < *min)
            *min = x[j];
        if (x[j] > *max)
            *max = x[j];
    }
}

static float block_amax(const float *x)
{
    float amax = 0.0f;
    for (int j = 0; j < QK; j++)
        if (fabsf(x[j]) > amax)
            amax = fabsf(x[j]);
    return amax;
}

/* Low nibble of qs[j] is element j, high nibble element j + 16. */
static void pack_nibbles(const uint8_t *q, uint8_t *qs)
{
    for (int j = 0; j < QK / 2; j++)
        qs[j] = (uint8_t)((q[j] & 0x0f) | ((q[j + QK / 2] & 0x0f) << 4));
}

static void unpack_nibbles(const uint8_t *qs, uint8_t *q)
{
    for (int j = 0; j < QK / 2; j++) {
        q[j] = qs[j] & 0x0f;
        q[j + QK / 2] = qs[j] >> 4;
    }
}

/* Bit j of the LE u32 qh is bit 4 of element j's quant. */
static void pack_high_bits(const uint8_t *q, uint8_t *qh)
{
    uint32_t bits = 0;
    for (int j = 0; j < QK; j++)
        bits |= (uint32_t)((q[j] >> 4) & 1) << j;
    for (int b = 0; b < 4; b++)
        qh[b] = (uint8_t)(bits >> (8 * b));
}

static void unpack_five_bits(const uint8_t *qs, const uint8_t *qh, uint8_t *q)
{
    uint32_t bits = (uint32_t)qh[0] | (uint32_t)qh[1] << 8 | (uint32_t)qh[2] << 16 |
                    (uint32_t)qh[3] << 24;
    unpack_nibbles(qs, q);
    for (int j = 0; j < QK; j++)
        q[j] |= (uint8_t)(((bits >> j) & 1) << 4);
}

static int q_min(int a, int b)
{
    return a < b ? a : b;
}

/* ---- Q4_0 ----------------------------------------------------------------------------- */

static void dequantize_q4_0(const void *blocks, float *out, size_t n)
{
    const block_q4_0 *b = blocks;
    for (size_t i = 0; i < n / QK; i++, out += QK) {
        float d = half(b[i].d);
        uint8_t q[QK];
        unpack_nibbles(b[i].qs, q);
        for (int j = 0; j < QK; j++)
            out[j] = (float)(q[j] - 8) * d;
    }
}

static void quantize_q4_0(const float *in, void *blocks, size_t n)
{
    block_q4_0 *b = blocks;
    for (size_t i = 0; i < n / QK; i++, in += QK) {
        float d = first_max_signed(in) / -8.0f;
        float id = d != 0.0f ? 1.0f / d : 0.0f;
        b[i].d = quant_f32_to_f16(d);
        uint8_t q[QK];
        for (int j = 0; j < QK; j++) {
            float scaled = in[j] * id;
            q[j] = (uint8_t)q_min(15, (int)(int8_t)(scaled + 8.5f));
        }
        pack_nibbles(q, b[i].qs);
    }
}

static float dot_q4_0(size_t n, const void *w, const void *a)
{
    const block_q4_0 *x = w;
    const block_q8_0 *y = a;
    float sumf = 0.0f;
    for (size_t i = 0; i < n / QK; i++) {
        uint8_t q[QK];
        unpack_nibbles(x[i].qs, q);
        int sumi = 0;
        for (int j = 0; j < QK; j++)
            sumi += (q[j] - 8) * y[i].qs[j];
        float partial = (float)sumi * half(x[i].d);
        sumf += partial * half(y[i].d);
    }
    return sumf;
}

/* ---- Q4_1 ----------------------------------------------------------------------------- */

static void dequantize_q4_1(const void *blocks, float *out, size_t n)
{
    const block_q4_1 *b = blocks;
    for (size_t i = 0; i < n / QK; i++, out += QK) {
        float d = half(b[i].d), m = half(b[i].m);
        uint8_t q[QK];
        unpack_nibbles(b[i].qs, q);
        for (int j = 0; j < QK; j++) {
            float scaled = (float)q[j] * d;
            out[j] = scaled + m;
        }
    }
}

static void quantize_q4_1(const float *in, void *blocks, size_t n)
{
    block_q4_1 *b = blocks;
    for (size_t i = 0; i < n / QK; i++, in += QK) {
        float min, max;
        block_min_max(in, &min, &max);
        float d = (max - min) / 15.0f;
        float id = d != 0.0f ? 1.0f / d : 0.0f;
        b[i].d = quant_f32_to_f16(d);
        b[i].m = quant_f32_to_f16(min);
        uint8_t q[QK];
        for (int j = 0; j < QK; j++) {
            float scaled = (in[j] - min) * id;
            q[j] = (uint8_t)q_min(15, (int)(int8_t)(scaled + 0.5f));
        }
        pack_nibbles(q, b[i].qs);
    }
}

static float dot_q4_1(size_t n, const void *w, const void *a)
{
    const block_q4_1 *x = w;
    const block_q8_1 *y = a;
    float sumf = 0.0f;
    for (size_t i = 0; i < n / QK; i++) {
        uint8_t q[QK];
        unpack_nibbles(x[i].qs, q);
        int sumi = 0;
        for (int j = 0; j < QK; j++)
            sumi += q[j] * y[i].qs[j];
        float dxdy = half(x[i].d) * half(y[i].d);
        float scaled = dxdy * (float)sumi;
        float min_term = half(x[i].m) * half(y[i].s);
        sumf += scaled + min_term;
    }
    return sumf;
}

/* ---- Q5_0 ----------------------------------------------------------------------------- */

static void dequantize_q5_0(const void *blocks, float *out, size_t n)
{
    const block_q5_0 *b = blocks;
    for (size_t i = 0; i < n / QK; i++, out += QK) {
        float d = half(b[i].d);
        uint8_t q[QK];
        unpack_five_bits(b[i].qs, b[i].qh, q);
        for (int j = 0; j < QK; j++)
            out[j] = (float)(q[j] - 16) * d;
    }
}

static void quantize_q5_0(const float *in, void *blocks, size_t n)
{
    block_q5_0 *b = blocks;
    for (size_t i = 0; i < n / QK; i++, in += QK) {
        float d = first_max_signed(in) / -16.0f;
        float id = d != 0.0f ? 1.0f / d : 0.0f;
        b[i].d = quant_f32_to_f16(d);
        uint8_t q[QK];
        for (int j = 0; j < QK; j++) {
            float scaled = in[j] * id;
            q[j] = (uint8_t)q_min(31, (int)(int8_t)(scaled + 16.5f));
        }
        pack_nibbles(q, b[i].qs);
        pack_high_bits(q, b[i].qh);
    }
}

static float dot_q5_0(size_t n, const void *w, const void *a)
{
    const block_q5_0 *x = w;
    const block_q8_0 *y = a;
    float sumf = 0.0f;
    for (size_t i = 0; i < n / QK; i++) {
        uint8_t q[QK];
        unpack_five_bits(x[i].qs, x[i].qh, q);
        int sumi = 0;
        for (int j = 0; j < QK; j++)
            sumi += (q[j] - 16) * y[i].qs[j];
        float dxdy = half(x[i].d) * half(y[i].d);
        sumf += dxdy * (float)sumi;
    }
    return sumf;
}

/* ---- Q5_1 ----------------------------------------------------------------------------- */

static void dequantize_q5_1(const void *blocks, float *out, size_t n)
{
    const block_q5_1 *b = blocks;
    for (size_t i = 0; i < n / QK; i++, out += QK) {
        float d = half(b[i].d), m = half(b[i].m);
        uint8_t q[QK];
        unpack_five_bits(b[i].qs, b[i].qh, q);
        for (int j = 0; j < QK; j++) {
            float scaled = (float)q[j] * d;
            out[j] = scaled + m;
        }
    }
}

static void quantize_q5_1(const float *in, void *blocks, size_t n)
{
    block_q5_1 *b = blocks;
    for (size_t i = 0; i < n / QK; i++, in += QK) {
        float min, max;
        block_min_max(in, &min, &max);
        float d = (max - min) / 31.0f;
        float id = d != 0.0f ? 1.0f / d : 0.0f;
        b[i].d = quant_f32_to_f16(d);
        b[i].m = quant_f32_to_f16(min);
        uint8_t q[QK];
        for (int j = 0; j < QK; j++) {
            float scaled = (in[j] - min) * id;
            q[j] = (uint8_t)(scaled + 0.5f); /* ggml does not clamp here */
        }
        pack_nibbles(q, b[i].qs);
        pack_high_bits(q, b[i].qh);
    }
}

static float dot_q5_1(size_t n, const void *w, const void *a)
{
    const block_q5_1 *x = w;
    const block_q8_1 *y = a;
    float sumf = 0.0f;
    for (size_t i = 0; i < n / QK; i++) {
        uint8_t q[QK];
        unpack_five_bits(x[i].qs, x[i].qh, q);
        int sumi = 0;
        for (int j = 0; j < QK; j++)
            sumi += q[j] * y[i].qs[j];
        float dxdy = half(x[i].d) * half(y[i].d);
        float scaled = dxdy * (float)sumi;
        float min_term = half(x[i].m) * half(y[i].s);
        sumf += scaled + min_term;
    }
    return sumf;
}

/* ---- Q8_0 and Q8_1 -------------------------------------------------------------------- */

static void dequantize_q8_0(const void *blocks, float *out, size_t n)
{
    const block_q8_0 *b = blocks;
    for (size_t i = 0; i < n / QK; i++, out += QK) {
        float d = half(b[i].d);
        for (int j = 0; j < QK; j++)
            out[j] = (float)b[i].qs[j] * d;
    }
}

static void dequantize_q8_1(const void *blocks, float *out, size_t n)
{
    const block_q8_1 *b = blocks;
    for (size_t i = 0; i < n / QK; i++, out += QK) {
        float d = half(b[i].d);
        for (int j = 0; j < QK; j++)
            out[j] = (float)b[i].qs[j] * d;
    }
}

/* Reference quantizer: id = 1/d and roundf (ties away from zero). Returns the unrounded d. */
static float quantize_block_q8_ref(const float *in, int8_t *qs, int *sum)
{
    float d = block_amax(in) / 127.0f;
    float id = d != 0.0f ? 1.0f / d : 0.0f;
    *sum = 0;
    for (int j = 0; j < QK; j++) {
        float scaled = in[j] * id;
        qs[j] = (int8_t)roundf(scaled);
        *sum += qs[j];
    }
    return d;
}

/* ggml's x86 activation recipe: id = 127/amax and round half to even. */
static float quantize_block_q8_act(const float *in, int8_t *qs, int *sum)
{
    float amax = block_amax(in);
    float d = amax / 127.0f;
    float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    *sum = 0;
    for (int j = 0; j < QK; j++) {
        float scaled = in[j] * id;
        qs[j] = (int8_t)nearbyintf(scaled); /* the default rounding mode is to nearest even */
        *sum += qs[j];
    }
    return d;
}

static void quantize_q8_0(const float *in, void *blocks, size_t n)
{
    block_q8_0 *b = blocks;
    for (size_t i = 0; i < n / QK; i++, in += QK) {
        int sum;
        b[i].d = quant_f32_to_f16(quantize_block_q8_ref(in, b[i].qs, &sum));
    }
}

static void quantize_act_q8_0(const float *in, void *blocks, size_t n)
{
    block_q8_0 *b = blocks;
    for (size_t i = 0; i < n / QK; i++, in += QK) {
        int sum;
        b[i].d = quant_f32_to_f16(quantize_block_q8_act(in, b[i].qs, &sum));
    }
}

static void quantize_q8_1(const float *in, void *blocks, size_t n)
{
    block_q8_1 *b = blocks;
    for (size_t i = 0; i < n / QK; i++, in += QK) {
        int sum;
        float d = quantize_block_q8_ref(in, b[i].qs, &sum);
        b[i].d = quant_f32_to_f16(d);
        b[i].s = quant_f32_to_f16((float)sum * d);
    }
}

static void quantize_act_q8_1(const float *in, void *blocks, size_t n)
{
    block_q8_1 *b = blocks;
    for (size_t i = 0; i < n / QK; i++, in += QK) {
        int sum;
        float d = quantize_block_q8_act(in, b[i].qs, &sum);
        b[i].d = quant_f32_to_f16(d);
        b[i].s = quant_f32_to_f16(d * (float)sum);
    }
}

void quant_quantize_act_q8_0(const float *in, void *blocks, size_t n)
{
    quantize_act_q8_0(in, blocks, n);
}

static float dot_q8_0(size_t n, const void *w, const void *a)
{
    const block_q8_0 *x = w;
    const block_q8_0 *y = a;
    float sumf = 0.0f;
    for (size_t i = 0; i < n / QK; i++) {
        int sumi = 0;
        for (int j = 0; j < QK; j++)
            sumi += x[i].qs[j] * y[i].qs[j];
        float dxdy = half(x[i].d) * half(y[i].d);
        sumf += (float)sumi * dxdy;
    }
    return sumf;
}

/* ---- packed layout -------------------------------------------------------------------- */

/*
 * Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0 rows repacked in groups of QUANT_PACK_ROWS = 16, so that
 * one vector lane follows one row (a 512-bit vector holds all 16 rows, a 256-bit one 8 of
 * them): per block, the 16 rows' f16 scales d (32 bytes), for Q4_1 / Q5_1 then their f16
 * mins m (32 bytes), then the quants as 4-byte words, word j of all 16 rows in one 64-byte
 * vector. The 4-bit types keep their nibble bytes (word j holds elements 4j..4j+3 in its low
 * nibbles and 16+4j.. in its high ones); Q8_0 stores q + 128, unsigned, so that vpdpbusd
 * multiplies it by the signed activations. A packed group takes exactly the bytes of its
 * 16 rows. Plain C: this runs once per matrix at load, at every level.
 */
enum { PACK_ROWS = QUANT_PACK_ROWS, PACK_SCALE_BYTES = 2 * PACK_ROWS };

/* One row's block `block` into lane r of the packed block at out. */
typedef void (*pack_lane_fn)(uint8_t *out, size_t r, const void *block);

/* Every block of every row into its group's lanes. */
static void pack_groups(const void *w, size_t n, size_t n_rows, void *packed, size_t block_bytes,
                        pack_lane_fn pack_lane)
{
    const uint8_t *rows = w;
    size_t n_blocks = n / QUANT_QK32;
    uint8_t *out = packed;
    for (size_t g = 0; g < n_rows / PACK_ROWS; g++)
        for (size_t b = 0; b < n_blocks; b++, out += PACK_ROWS * block_bytes)
            for (size_t r = 0; r < PACK_ROWS; r++)
                pack_lane(out, r, rows + ((g * PACK_ROWS + r) * n_blocks + b) * block_bytes);
}

/* Lane r of the four nibble words that start at `words`. */
static void pack_nibble_words(uint8_t *words, size_t r, const uint8_t qs[16])
{
    for (size_t j = 0; j < 4; j++)
        memcpy(words + 64 * j + 4 * r, qs + 4 * j, 4);
}

/*
 * Lane r of the high-bit word of Q5_0 / Q5_1, which sits before their nibble words,
 * transposed so that byte k of it lines up with byte k of every nibble word: its bit j is
 * the high bit of element 4j + k, i.e. of byte k's low nibble in word j (j < 4) or of its
 * high nibble in word j - 4. A kernel then moves the bit of a whole vector of quants into
 * place with one shift and one AND.
 */
static void pack_high_word(uint8_t *word, size_t r, const uint8_t qh[4])
{
    uint32_t bits = (uint32_t)qh[0] | (uint32_t)qh[1] << 8 | (uint32_t)qh[2] << 16 |
                    (uint32_t)qh[3] << 24;
    for (size_t k = 0; k < 4; k++) {
        uint8_t byte = 0;
        for (size_t j = 0; j < 8; j++)
            byte |= (uint8_t)((bits >> (4 * j + k) & 1u) << j);
        word[4 * r + k] = byte;
    }
}

static void pack_lane_q4_0(uint8_t *out, size_t r, const void *block)
{
    const block_q4_0 *src = block;
    memcpy(out + 2 * r, &src->d, 2);
    pack_nibble_words(out + PACK_SCALE_BYTES, r, src->qs);
}

static void pack_lane_q4_1(uint8_t *out, size_t r, const void *block)
{
    const block_q4_1 *src = block;
    memcpy(out + 2 * r, &src->d, 2);
    memcpy(out + PACK_SCALE_BYTES + 2 * r, &src->m, 2);
    pack_nibble_words(out + 2 * PACK_SCALE_BYTES, r, src->qs);
}

static void pack_lane_q5_0(uint8_t *out, size_t r, const void *block)
{
    const block_q5_0 *src = block;
    memcpy(out + 2 * r, &src->d, 2);
    pack_high_word(out + PACK_SCALE_BYTES, r, src->qh);
    pack_nibble_words(out + PACK_SCALE_BYTES + 64, r, src->qs);
}

static void pack_lane_q5_1(uint8_t *out, size_t r, const void *block)
{
    const block_q5_1 *src = block;
    memcpy(out + 2 * r, &src->d, 2);
    memcpy(out + PACK_SCALE_BYTES + 2 * r, &src->m, 2);
    pack_high_word(out + 2 * PACK_SCALE_BYTES, r, src->qh);
    pack_nibble_words(out + 2 * PACK_SCALE_BYTES + 64, r, src->qs);
}

static void pack_lane_q8_0(uint8_t *out, size_t r, const void *block)
{
    const block_q8_0 *src = block;
    memcpy(out + 2 * r, &src->d, 2);
    for (size_t j = 0; j < 8; j++)
        for (size_t k = 0; k < 4; k++)
            out[PACK_SCALE_BYTES + 64 * j + 4 * r + k] = (uint8_t)(src->qs[4 * j + k] ^ 0x80);
}

void quant_pack_q4_0(const void *w, size_t n, size_t n_rows, void *packed)
{
    pack_groups(w, n, n_rows, packed, sizeof(block_q4_0), pack_lane_q4_0);
}

void quant_pack_q4_1(const void *w, size_t n, size_t n_rows, void *packed)
{
    pack_groups(w, n, n_rows, packed, sizeof(block_q4_1), pack_lane_q4_1);
}

void quant_pack_q5_0(const void *w, size_t n, size_t n_rows, void *packed)
{
    pack_groups(w, n, n_rows, packed, sizeof(block_q5_0), pack_lane_q5_0);
}

void quant_pack_q5_1(const void *w, size_t n, size_t n_rows, void *packed)
{
    pack_groups(w, n, n_rows, packed, sizeof(block_q5_1), pack_lane_q5_1);
}

void quant_pack_q8_0(const void *w, size_t n, size_t n_rows, void *packed)
{
    pack_groups(w, n, n_rows, packed, sizeof(block_q8_0), pack_lane_q8_0);
}

/* F32 / F16 / BF16 rows in the float tile kernels' layout (quant_legacy.h); the last chunk
 * of a row holds n % 16 elements when that is not 0. */

static void pack_float_tiles(const void *w, size_t n, size_t n_rows, void *packed,
                             size_t elem_bytes)
{
    const uint8_t *rows = w;
    uint8_t *out = packed;
    for (size_t tile = 0; tile < n_rows; tile += QUANT_FLOAT_TILE_ROWS)
        for (size_t i = 0; i < n; i += QUANT_FLOAT_CHUNK) {
            size_t len = n - i < QUANT_FLOAT_CHUNK ? n - i : QUANT_FLOAT_CHUNK;
            for (size_t r = 0; r < QUANT_FLOAT_TILE_ROWS; r++, out += len * elem_bytes)
                memcpy(out, rows + ((tile + r) * n + i) * elem_bytes, len * elem_bytes);
        }
}

static void pack_float_tiles_f32(const void *w, size_t n, size_t n_rows, void *packed)
{
    pack_float_tiles(w, n, n_rows, packed, sizeof(float));
}

static void pack_float_tiles_16bit(const void *w, size_t n, size_t n_rows, void *packed)
{
    pack_float_tiles(w, n, n_rows, packed, sizeof(uint16_t));
}

/* What the packed Q4_1 / Q5_1 kernels need of each Q8_1 activation block: its d, then
 * its s, as f32 arrays (the quants are unsigned, so their integer sums need no start). */
static void prepare_packed_act_q8_1(const void *act, size_t n, void *sums)
{
    const block_q8_1 *y = act;
    size_t n_blocks = n / QK;
    float *dy = sums, *sy = dy + n_blocks;
    for (size_t b = 0; b < n_blocks; b++) {
        dy[b] = half(y[b].d);
        sy[b] = half(y[b].s);
    }
}

/* ---- tables --------------------------------------------------------------------------- */

/* Slots of the types this file owns, in a fixed order shared by every level's table. */
enum legacy_slot { SLOT_F32, SLOT_F16, SLOT_BF16, SLOT_Q4_0, SLOT_Q4_1, SLOT_Q5_0, SLOT_Q5_1,
                   SLOT_Q8_0, SLOT_Q8_1, SLOT_COUNT };

#define OPS(t, deq, quant, act, quant_act, dot_fn) \
    PACKED_OPS(t, deq, quant, act, quant_act, dot_fn, NULL, NULL, NULL)
#define FLOAT_OPS(t, deq, quant, dot_fn, matmul_fn, pack_fn, packed_fn) \
    {.type = TENSOR_TYPE_##t, .dequantize = (deq), .quantize = (quant), \
     .act_type = TENSOR_TYPE_##t, .quantize_act = (quant), .dot = (dot_fn), \
     .matmul = (matmul_fn), .pack = (pack_fn), .matmul_packed = (packed_fn)}
#define PACKED_OPS(t, deq, quant, act, quant_act, dot_fn, pack_fn, sums_fn, packed_fn) \
    {.type = TENSOR_TYPE_##t, .dequantize = (deq), .quantize = (quant), \
     .act_type = TENSOR_TYPE_##act, .quantize_act = (quant_act), .dot = (dot_fn), \
     .pack = (pack_fn), .act_sums = (sums_fn), .matmul_packed = (packed_fn)}

/*
 * One level's table: the scalar dequantizers (but F16's) and quantizers with that level's
 * dots; `tiles(f16)` names the level's F16 tile kernel, `packed(q4_0)` its packed Q4_0
 * kernel (see the tables below). Q8_1 is an activation type only, so it has no dot.
 */
#define LEVEL_TABLE(f16_to_f32, f32_to_f16, q8_0_act, f32_dot, f16_dot, bf16_dot, q4_0_dot,   \
                    q4_1_dot, q5_0_dot, q5_1_dot, q8_0_dot, tiles, packed)                    \
    {                                                                                         \
        [SLOT_F32] = FLOAT_OPS(F32, dequantize_f32, quantize_f32, f32_dot, tiles(f32),        \
                               pack_float_tiles_f32, tiles(packed_f32)),                      \
        [SLOT_F16] = FLOAT_OPS(F16, f16_to_f32, f32_to_f16, f16_dot, tiles(f16),              \
                               pack_float_tiles_16bit, tiles(packed_f16)),                    \
        [SLOT_BF16] = FLOAT_OPS(BF16, dequantize_bf16, quantize_bf16, bf16_dot, tiles(bf16),  \
                                pack_float_tiles_16bit, tiles(packed_bf16)),                  \
        [SLOT_Q4_0] = PACKED_OPS(Q4_0, dequantize_q4_0, quantize_q4_0, Q8_0, q8_0_act, q4_0_dot, \
                                 quant_pack_q4_0, quant_prepare_packed_act_avx2,              \
                                 packed(q4_0)),                                               \
        [SLOT_Q4_1] = PACKED_OPS(Q4_1, dequantize_q4_1, quantize_q4_1, Q8_1, quantize_act_q8_1, \
                                 q4_1_dot, quant_pack_q4_1, prepare_packed_act_q8_1,          \
                                 packed(q4_1)),                                               \
        [SLOT_Q5_0] = PACKED_OPS(Q5_0, dequantize_q5_0, quantize_q5_0, Q8_0, q8_0_act, q5_0_dot, \
                                 quant_pack_q5_0, quant_prepare_packed_act_avx2,              \
                                 packed(q5_0)),                                               \
        [SLOT_Q5_1] = PACKED_OPS(Q5_1, dequantize_q5_1, quantize_q5_1, Q8_1, quantize_act_q8_1, \
                                 q5_1_dot, quant_pack_q5_1, prepare_packed_act_q8_1,          \
                                 packed(q5_1)),                                               \
        [SLOT_Q8_0] = PACKED_OPS(Q8_0, dequantize_q8_0, quantize_q8_0, Q8_0, q8_0_act, q8_0_dot, \
                                 quant_pack_q8_0, quant_prepare_packed_act_avx2,              \
                                 packed(q8_0)),                                               \
        [SLOT_Q8_1] = OPS(Q8_1, dequantize_q8_1, quantize_q8_1, Q8_1, quantize_act_q8_1, NULL), \
    }

/* The scalar level has no packed kernels (so quant_packable is false for its matrices) and
 * no float tile kernels. */
#define NO_TILE_KERNEL(type) NULL
#define TILES_AVX2(type) quant_matmul_##type##_avx2
#define TILES_AVX512(type) quant_matmul_##type##_avx512
#define NO_PACKED_KERNEL(type) NULL
#define PACKED_AVX2(type) quant_matmul_packed_##type##_avx2
#define PACKED_AVX512(type) quant_matmul_packed_##type##_avx512

static const quant_ops scalar_ops[SLOT_COUNT] =
    LEVEL_TABLE(dequantize_f16, quantize_f16, quant_quantize_act_q8_0, dot_f32, dot_f16, dot_bf16, dot_q4_0,
                dot_q4_1, dot_q5_0, dot_q5_1, dot_q8_0, NO_TILE_KERNEL, NO_PACKED_KERNEL);

/* The 32-element types take the packed maddubs kernels, the float types tile kernels. */
static const quant_ops avx2_ops[SLOT_COUNT] = LEVEL_TABLE(
    quant_dequantize_f16_avx2, quant_quantize_f16_avx2, quant_quantize_act_q8_0_avx2, quant_dot_f32_avx2,
    quant_dot_f16_avx2, quant_dot_bf16_avx2, quant_dot_q4_0_avx2, quant_dot_q4_1_avx2,
    quant_dot_q5_0_avx2, quant_dot_q5_1_avx2, quant_dot_q8_0_avx2, TILES_AVX2, PACKED_AVX2);

/* The 32-element types' dots of every level add blocks in the packed kernels' order, so
 * without VNNI AVX-512 takes the packed AVX2 kernels, with VNNI packed VNNI ones. */
static const quant_ops avx512_ops[SLOT_COUNT] = LEVEL_TABLE(
    quant_dequantize_f16_avx2, quant_quantize_f16_avx2, quant_quantize_act_q8_0_avx2, quant_dot_f32_avx512,
    quant_dot_f16_avx512, quant_dot_bf16_avx512, quant_dot_q4_0_avx512, quant_dot_q4_1_avx512,
    quant_dot_q5_0_avx512, quant_dot_q5_1_avx512, quant_dot_q8_0_avx512, TILES_AVX512,
    PACKED_AVX2);

static const quant_ops avx512_vnni_ops[SLOT_COUNT] = LEVEL_TABLE(
    quant_dequantize_f16_avx2, quant_quantize_f16_avx2, quant_quantize_act_q8_0_avx2, quant_dot_f32_avx512,
    quant_dot_f16_avx512, quant_dot_bf16_avx512, quant_dot_q4_0_avx512_vnni,
    quant_dot_q4_1_avx512_vnni, quant_dot_q5_0_avx512_vnni, quant_dot_q5_1_avx512_vnni,
    quant_dot_q8_0_avx512_vnni, TILES_AVX512, PACKED_AVX512);

/* BF16 where cpu_prefers_vdpbf16ps: vdpbf16ps dot and tiles (quant_legacy_avx512.c). */
static const quant_ops bf16_dp_ops = FLOAT_OPS(BF16, dequantize_bf16, quantize_bf16,
                                               quant_dot_bf16_avx512_bf16,
                                               quant_matmul_bf16_avx512_bf16,
                                               pack_float_tiles_16bit,
                                               quant_matmul_packed_bf16_avx512_bf16);

static int slot_of(uint32_t type)
{
    switch (type) {
    case TENSOR_TYPE_F32: return SLOT_F32;
    case TENSOR_TYPE_F16: return SLOT_F16;
    case TENSOR_TYPE_BF16: return SLOT_BF16;
    case TENSOR_TYPE_Q4_0: return SLOT_Q4_0;
    case TENSOR_TYPE_Q4_1: return SLOT_Q4_1;
    case TENSOR_TYPE_Q5_0: return SLOT_Q5_0;
    case TENSOR_TYPE_Q5_1: return SLOT_Q5_1;
    case TENSOR_TYPE_Q8_0: return SLOT_Q8_0;
    case TENSOR_TYPE_Q8_1: return SLOT_Q8_1;
    default: return -1;
    }
}

const quant_ops *quant_legacy_ops(uint32_t type, enum cpu_level level)
{
    int slot = slot_of(type);
    if (slot < 0)
        return NULL;
    switch (level) {
    case CPU_LEVEL_AVX512:
        if (slot == SLOT_BF16 && cpu_prefers_vdpbf16ps())
            return &bf16_dp_ops;
        return cpu_has_avx512_vnni() ? &avx512_vnni_ops[slot] : &avx512_ops[slot];
    case CPU_LEVEL_AVX2:
        return &avx2_ops[slot];
    default:
        return &scalar_ops[slot];
    }
}

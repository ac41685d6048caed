/*
 * AVX2 versions of vision_order.c's steps: the same operations in the same order, so their
 * results equal the portable ones bit for bit (test_vision_order checks it), only faster:
 * ggml's vector exponential in 8 lanes, the vector dot of a query against 8 keys at once
 * (one key a lane), and products in the matrix kernel's order (its 16 lanes as two
 * registers) or the vector dot's. Never called on a CPU without AVX2 and FMA.
 */
#include <immintrin.h>
#include <math.h>

#include "vision_order.h"

/* j * 2^n for integral n in [-192, 192], rounded once as vscalefps does: powers of two
 * outside the normal range are reached through an exact first step by 2^+-64. */
static inline __m256 scale_by_power(__m256 j, __m256 n)
{
    __m256i e = _mm256_cvttps_epi32(n);
    __m256i below = _mm256_cmpgt_epi32(_mm256_set1_epi32(-126), e);
    __m256i above = _mm256_cmpgt_epi32(e, _mm256_set1_epi32(127));
    __m256 pre = _mm256_blendv_ps(_mm256_set1_ps(1.0f), _mm256_set1_ps(0x1p-64f),
                                  _mm256_castsi256_ps(below));
    pre = _mm256_blendv_ps(pre, _mm256_set1_ps(0x1p64f), _mm256_castsi256_ps(above));
    e = _mm256_add_epi32(e, _mm256_and_si256(below, _mm256_set1_epi32(64)));
    e = _mm256_sub_epi32(e, _mm256_and_si256(above, _mm256_set1_epi32(64)));
    /* 2^e: a normal float's exponent field, or below -126 a subnormal's single bit */
    __m256i normal = _mm256_slli_epi32(_mm256_add_epi32(e, _mm256_set1_epi32(127)), 23);
    __m256i tiny =
        _mm256_sllv_epi32(_mm256_set1_epi32(1), _mm256_add_epi32(e, _mm256_set1_epi32(149)));
    __m256i subnormal = _mm256_cmpgt_epi32(_mm256_set1_epi32(-126), e);
    __m256 power = _mm256_castsi256_ps(_mm256_blendv_epi8(normal, tiny, subnormal));
    return _mm256_mul_ps(_mm256_mul_ps(j, pre), power);
}

/* The exponential of vision_order.c's vector_expf, eight lanes at once. */
static inline __m256 exp8(__m256 x)
{
    const __m256 shifter = _mm256_set1_ps(0x1.8p23f);
    __m256 z = _mm256_fmadd_ps(x, _mm256_set1_ps(0x1.715476p+0f), shifter);
    __m256 n = _mm256_sub_ps(z, shifter);
    __m256 b = _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.7f7d1cp-20f),
                                _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.62e4p-1f), x));
    __m256 u = _mm256_mul_ps(b, b);
    __m256 high =
        _mm256_fmadd_ps(_mm256_set1_ps(0x1.0e4020p-7f), b, _mm256_set1_ps(0x1.573e2ep-5f));
    __m256 low = _mm256_fmadd_ps(_mm256_set1_ps(0x1.555e66p-3f), b, _mm256_set1_ps(0x1.fffdb6p-2f));
    __m256 j = _mm256_fmadd_ps(_mm256_fmadd_ps(high, u, low), u,
                               _mm256_fmadd_ps(_mm256_set1_ps(0x1.ffffecp-1f), b,
                                               _mm256_set1_ps(1.0f)));
    __m256 abs_n = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), n);
    __m256 far = _mm256_cmp_ps(abs_n, _mm256_set1_ps(192.0f), _CMP_GT_OQ);
    __m256 res = scale_by_power(j, _mm256_andnot_ps(far, n));
    if (_mm256_testz_ps(far, far))
        return res;
    __m256 low_side = _mm256_cmp_ps(n, _mm256_setzero_ps(), _CMP_LE_OQ);
    __m256 edge = _mm256_blendv_ps(_mm256_set1_ps(INFINITY), _mm256_setzero_ps(), low_side);
    return _mm256_blendv_ps(res, edge, far);
}

/* Sixteen lanes (lo: 0..7, hi: 8..15) by the tree of vision_sum16. */
static inline float sum16(__m256 lo, __m256 hi)
{
    __m256 t = _mm256_add_ps(hi, lo);
    __m128 u = _mm_add_ps(_mm256_extractf128_ps(t, 1), _mm256_castps256_ps128(t));
    __m128 v = _mm_add_ps(u, _mm_movehl_ps(u, u));
    return _mm_cvtss_f32(_mm_add_ss(v, _mm_movehdup_ps(v)));
}

double vision_softmax_row_avx2(float *x, size_t n, float scale)
{
    /* the maximum is the same whatever the order it is taken in */
    __m256 vscale = _mm256_set1_ps(scale), vmax = _mm256_set1_ps(-INFINITY);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + i), vscale);
        _mm256_storeu_ps(x + i, v);
        vmax = _mm256_max_ps(vmax, v);
    }
    __m128 m4 = _mm_max_ps(_mm256_extractf128_ps(vmax, 1), _mm256_castps256_ps128(vmax));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    float max = _mm_cvtss_f32(_mm_max_ss(m4, _mm_movehdup_ps(m4)));
    for (; i < n; i++) {
        x[i] = x[i] * scale;
        max = x[i] > max ? x[i] : max;
    }
    vmax = _mm256_set1_ps(max);
    double sum = 0.0;
    for (i = 0; i + 16 <= n; i += 16) {
        __m256 lo = exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), vmax));
        __m256 hi = exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i + 8), vmax));
        _mm256_storeu_ps(x + i, lo);
        _mm256_storeu_ps(x + i + 8, hi);
        sum += (double)sum16(lo, hi);
    }
    for (; i < n; i++) {
        x[i] = expf(x[i] - max);
        sum += (double)x[i];
    }
    return sum;
}

void vision_swiglu_row_avx2(float *x, const float *g, size_t n)
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16) /* ggml's 16-lane steps, as two halves */
        for (size_t k = i; k < i + 16; k += 8) {
            __m256 v = _mm256_loadu_ps(x + k);
            __m256 e = exp8(_mm256_sub_ps(_mm256_setzero_ps(), v));
            __m256 silu = _mm256_div_ps(v, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
            _mm256_storeu_ps(x + k, _mm256_mul_ps(silu, _mm256_loadu_ps(g + k)));
        }
    for (; i < n; i++)
        x[i] = x[i] / (1.0f + expf(-x[i])) * g[i];
}

/* As vision_order_avx512.c's dot_16_keys, for 8 keys. */
static inline __attribute__((always_inline)) __m256 dot_8_keys(const float *q, const float *kt,
                                                                 size_t ld, size_t d)
{
    size_t whole = d & ~(size_t)63;
    __m256 c[16];
#pragma GCC unroll 16
    for (size_t l = 0; l < 16; l++) {
        __m256 p[4];
#pragma GCC unroll 4
        for (size_t j = 0; j < 4; j++) {
            p[j] = _mm256_setzero_ps();
            for (size_t i = 0; i < whole; i += 64)
                p[j] = _mm256_fmadd_ps(_mm256_set1_ps(q[i + 16 * j + l]),
                                       _mm256_loadu_ps(kt + (i + 16 * j + l) * ld), p[j]);
        }
        c[l] = _mm256_add_ps(_mm256_add_ps(p[0], p[2]), _mm256_add_ps(p[1], p[3]));
    }
    __m256 t[8], u[4];
    for (size_t i = 0; i < 8; i++)
        t[i] = _mm256_add_ps(c[i + 8], c[i]);
    for (size_t i = 0; i < 4; i++)
        u[i] = _mm256_add_ps(t[i + 4], t[i]);
    __m256 s = _mm256_add_ps(_mm256_add_ps(u[0], u[2]), _mm256_add_ps(u[1], u[3]));
    size_t plain = whole + ((d - whole) & ~(size_t)7);
    for (size_t i = whole; i < plain; i++)
        s = _mm256_add_ps(s, _mm256_mul_ps(_mm256_set1_ps(q[i]), _mm256_loadu_ps(kt + i * ld)));
    for (size_t i = plain; i < d; i++)
        s = _mm256_fmadd_ps(_mm256_set1_ps(q[i]), _mm256_loadu_ps(kt + i * ld), s);
    return s;
}

void vision_scores_avx2(const float *q, size_t nq, const float *tiles, size_t n, size_t d,
                        float *scores)
{
    /* a tile of keys for every query: its d rows of 16 stay in the first-level cache */
    size_t j = 0;
    for (; j + VISION_KEY_TILE <= n; j += VISION_KEY_TILE) {
        const float *tile = tiles + j * d;
        for (size_t i = 0; i < nq; i++)
            for (size_t half = 0; half < VISION_KEY_TILE; half += 8)
                _mm256_storeu_ps(scores + i * n + j + half,
                                 dot_8_keys(q + i * d, tile + half, VISION_KEY_TILE, d));
    }
    for (; j < n; j++) {
        const float *key = tiles + (j - j % VISION_KEY_TILE) * d + j % VISION_KEY_TILE;
        for (size_t i = 0; i < nq; i++)
            scores[i * n + j] = vision_vec_dot_strided(q + i * d, key, VISION_KEY_TILE, d);
    }
}

/* One row against one token in the vector dot's order (its 16-lane registers as pairs). */
static float vec_dot(const float *x, const float *y, size_t n)
{
    size_t whole = n & ~(size_t)63;
    __m256 s[8];
    for (size_t j = 0; j < 8; j++)
        s[j] = _mm256_setzero_ps();
    for (size_t i = 0; i < whole; i += 64)
        for (size_t j = 0; j < 8; j++)
            s[j] = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 8 * j), _mm256_loadu_ps(y + i + 8 * j),
                                   s[j]);
    /* registers 0..3 of 16 lanes are pairs (0,1) (2,3) (4,5) (6,7) here */
    __m256 lo = _mm256_add_ps(_mm256_add_ps(s[0], s[4]), _mm256_add_ps(s[2], s[6]));
    __m256 hi = _mm256_add_ps(_mm256_add_ps(s[1], s[5]), _mm256_add_ps(s[3], s[7]));
    float sum = sum16(lo, hi);
    size_t plain = whole + ((n - whole) & ~(size_t)7);
    for (size_t i = whole; i < plain; i++)
        sum = sum + x[i] * y[i];
    for (size_t i = plain; i < n; i++)
        sum = fmaf(x[i], y[i], sum);
    return sum;
}

/* Rows of w times tokens of x in the matrix kernel's order, two rows by two tokens. */
static void dot16_tile(const float *w, size_t n_in, size_t rows, const float *x, size_t toks,
                       float *y, size_t ldy)
{
    __m256 lo[2][2], hi[2][2];
    for (size_t r = 0; r < rows; r++)
        for (size_t t = 0; t < toks; t++)
            lo[r][t] = hi[r][t] = _mm256_setzero_ps();
    for (size_t i = 0; i < n_in; i += 16)
        for (size_t r = 0; r < rows; r++) {
            __m256 wl = _mm256_loadu_ps(w + r * n_in + i);
            __m256 wh = _mm256_loadu_ps(w + r * n_in + i + 8);
            for (size_t t = 0; t < toks; t++) {
                lo[r][t] = _mm256_fmadd_ps(wl, _mm256_loadu_ps(x + t * n_in + i), lo[r][t]);
                hi[r][t] = _mm256_fmadd_ps(wh, _mm256_loadu_ps(x + t * n_in + i + 8), hi[r][t]);
            }
        }
    for (size_t r = 0; r < rows; r++)
        for (size_t t = 0; t < toks; t++)
            y[t * ldy + r] = sum16(lo[r][t], hi[r][t]);
}

void vision_matmul_rows_avx2(const float *w, size_t n_in, size_t row_begin, size_t row_end,
                             const float *x, size_t n_tokens, float *y, size_t ldy,
                             bool matrix_order)
{
    if (!matrix_order) {
        for (size_t t = 0; t < n_tokens; t++)
            for (size_t r = row_begin; r < row_end; r++)
                y[t * ldy + r] = vec_dot(w + r * n_in, x + t * n_in, n_in);
        return;
    }
    for (size_t t = 0; t < n_tokens; t += 2) {
        size_t toks = n_tokens - t < 2 ? n_tokens - t : 2;
        for (size_t r = row_begin; r < row_end; r += 2) {
            size_t rows = row_end - r < 2 ? row_end - r : 2;
            dot16_tile(w + r * n_in, n_in, rows, x + t * n_in, toks, y + t * ldy + r, ldy);
        }
    }
}

float vision_dot8_avx2(const float *a, const float *b, size_t n)
{
    __m256 acc = _mm256_setzero_ps();
    for (size_t k = 0; k < n; k += 8)
        acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + k), _mm256_loadu_ps(b + k), acc);
    float lane[8], four[4];
    _mm256_storeu_ps(lane, acc);
    for (size_t l = 0; l < 4; l++)
        four[l] = lane[l] + lane[l + 4];
    return (four[0] + four[2]) + (four[1] + four[3]);
}

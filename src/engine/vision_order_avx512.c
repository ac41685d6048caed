/*
 * AVX-512 versions of vision_order.c's steps: the same operations in the same order, so
 * their results equal the portable ones bit for bit (test_vision_order checks it), only
 * faster: ggml's vector exponential in 16 lanes, the vector dot of a query against 16 keys at
 * once (one key a lane), and products in the matrix kernel's or the vector dot's order.
 * Never called on a CPU without AVX-512.
 */
#include <immintrin.h>
#include <math.h>

#include "vision_order.h"

/* The exponential of vision_order.c's vector_expf, sixteen lanes at once. */
static inline __m512 exp16(__m512 x)
{
    const __m512 shifter = _mm512_set1_ps(0x1.8p23f);
    __m512 z = _mm512_fmadd_ps(x, _mm512_set1_ps(0x1.715476p+0f), shifter);
    __m512 n = _mm512_sub_ps(z, shifter);
    __m512 b = _mm512_fnmadd_ps(n, _mm512_set1_ps(0x1.7f7d1cp-20f),
                                _mm512_fnmadd_ps(n, _mm512_set1_ps(0x1.62e4p-1f), x));
    __m512 u = _mm512_mul_ps(b, b);
    __m512 high =
        _mm512_fmadd_ps(_mm512_set1_ps(0x1.0e4020p-7f), b, _mm512_set1_ps(0x1.573e2ep-5f));
    __m512 low = _mm512_fmadd_ps(_mm512_set1_ps(0x1.555e66p-3f), b, _mm512_set1_ps(0x1.fffdb6p-2f));
    __m512 j = _mm512_fmadd_ps(_mm512_fmadd_ps(high, u, low), u,
                               _mm512_fmadd_ps(_mm512_set1_ps(0x1.ffffecp-1f), b,
                                               _mm512_set1_ps(1.0f)));
    __m512 res = _mm512_scalef_ps(j, n);
    __mmask16 far = _mm512_cmp_ps_mask(_mm512_abs_ps(n), _mm512_set1_ps(192.0f), _CMP_GT_OQ);
    if (!far)
        return res;
    __mmask16 low_side = _mm512_cmp_ps_mask(n, _mm512_setzero_ps(), _CMP_LE_OQ);
    __m512 edge = _mm512_mask_blend_ps(low_side, _mm512_set1_ps(INFINITY), _mm512_setzero_ps());
    return _mm512_mask_blend_ps(far, res, edge);
}

double vision_softmax_row_avx512(float *x, size_t n, float scale)
{
    /* the maximum is the same whatever the order it is taken in */
    __m512 vscale = _mm512_set1_ps(scale), vmax = _mm512_set1_ps(-INFINITY);
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 v = _mm512_mul_ps(_mm512_loadu_ps(x + i), vscale);
        _mm512_storeu_ps(x + i, v);
        vmax = _mm512_max_ps(vmax, v);
    }
    float max = _mm512_reduce_max_ps(vmax);
    for (; i < n; i++) {
        x[i] = x[i] * scale;
        max = x[i] > max ? x[i] : max;
    }
    vmax = _mm512_set1_ps(max);
    double sum = 0.0;
    for (i = 0; i + 16 <= n; i += 16) {
        __m512 e = exp16(_mm512_sub_ps(_mm512_loadu_ps(x + i), vmax));
        _mm512_storeu_ps(x + i, e);
        sum += (double)_mm512_reduce_add_ps(e);
    }
    for (; i < n; i++) {
        x[i] = expf(x[i] - max);
        sum += (double)x[i];
    }
    return sum;
}

void vision_swiglu_row_avx512(float *x, const float *g, size_t n)
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 v = _mm512_loadu_ps(x + i);
        __m512 e = exp16(_mm512_sub_ps(_mm512_setzero_ps(), v));
        __m512 silu = _mm512_div_ps(v, _mm512_add_ps(_mm512_set1_ps(1.0f), e));
        _mm512_storeu_ps(x + i, _mm512_mul_ps(silu, _mm512_loadu_ps(g + i)));
    }
    for (; i < n; i++)
        x[i] = x[i] / (1.0f + expf(-x[i])) * g[i];
}

/*
 * scores[j] = vec_dot(q, key j) for 16 keys from kt (d rows of keys, stride ld): lane l
 * holds key l's dot, built by the same steps as vision_vec_dot: per 64-element block the
 * four partial sums of each of the 16 positions, folded, then the tree over the positions,
 * then the remaining elements.
 */
static inline __attribute__((always_inline)) __m512 dot_16_keys(const float *q, const float *kt,
                                                                 size_t ld, size_t d)
{
    size_t whole = d & ~(size_t)63;
    __m512 c[16];
#pragma GCC unroll 16
    for (size_t l = 0; l < 16; l++) {
        __m512 p[4];
#pragma GCC unroll 4
        for (size_t j = 0; j < 4; j++) {
            p[j] = _mm512_setzero_ps();
            for (size_t i = 0; i < whole; i += 64)
                p[j] = _mm512_fmadd_ps(_mm512_set1_ps(q[i + 16 * j + l]),
                                       _mm512_loadu_ps(kt + (i + 16 * j + l) * ld), p[j]);
        }
        c[l] = _mm512_add_ps(_mm512_add_ps(p[0], p[2]), _mm512_add_ps(p[1], p[3]));
    }
    __m512 t[8], u[4];
    for (size_t i = 0; i < 8; i++)
        t[i] = _mm512_add_ps(c[i + 8], c[i]);
    for (size_t i = 0; i < 4; i++)
        u[i] = _mm512_add_ps(t[i + 4], t[i]);
    __m512 s = _mm512_add_ps(_mm512_add_ps(u[0], u[2]), _mm512_add_ps(u[1], u[3]));
    size_t plain = whole + ((d - whole) & ~(size_t)7);
    for (size_t i = whole; i < plain; i++)
        s = _mm512_add_ps(s, _mm512_mul_ps(_mm512_set1_ps(q[i]), _mm512_loadu_ps(kt + i * ld)));
    for (size_t i = plain; i < d; i++)
        s = _mm512_fmadd_ps(_mm512_set1_ps(q[i]), _mm512_loadu_ps(kt + i * ld), s);
    return s;
}

void vision_scores_avx512(const float *q, size_t nq, const float *tiles, size_t n, size_t d,
                          float *scores)
{
    /* a tile of keys for every query: its d rows of 16 stay in the first-level cache */
    size_t j = 0;
    for (; j + VISION_KEY_TILE <= n; j += VISION_KEY_TILE) {
        const float *tile = tiles + j * d;
        for (size_t i = 0; i < nq; i++)
            _mm512_storeu_ps(scores + i * n + j, dot_16_keys(q + i * d, tile, VISION_KEY_TILE, d));
    }
    for (; j < n; j++) {
        const float *key = tiles + (j - j % VISION_KEY_TILE) * d + j % VISION_KEY_TILE;
        for (size_t i = 0; i < nq; i++)
            scores[i * n + j] = vision_vec_dot_strided(q + i * d, key, VISION_KEY_TILE, d);
    }
}

/* One row against one token in the vector dot's order: 64-element blocks in four
 * registers, folded and summed by the tree, then the rest. */
static float vec_dot(const float *x, const float *y, size_t n)
{
    size_t whole = n & ~(size_t)63;
    __m512 s[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(),
                   _mm512_setzero_ps()};
    for (size_t i = 0; i < whole; i += 64)
        for (size_t j = 0; j < 4; j++)
            s[j] = _mm512_fmadd_ps(_mm512_loadu_ps(x + i + 16 * j),
                                   _mm512_loadu_ps(y + i + 16 * j), s[j]);
    float sum = _mm512_reduce_add_ps(
        _mm512_add_ps(_mm512_add_ps(s[0], s[2]), _mm512_add_ps(s[1], s[3])));
    size_t plain = whole + ((n - whole) & ~(size_t)7);
    for (size_t i = whole; i < plain; i++)
        sum = sum + x[i] * y[i];
    for (size_t i = plain; i < n; i++)
        sum = fmaf(x[i], y[i], sum);
    return sum;
}

/* Rows of w times tokens of x in the matrix kernel's order: 16 lanes of FMA per pair, four
 * rows by four tokens at a time. */
/* dot16_tile's whole tile, its bounds constants: the sixteen sums stay in registers, where
 * loops of a variable count keep them in memory and load and store one at every FMA. */
static void dot16_tile_4x4(const float *w, size_t n_in, const float *x, float *y, size_t ldy)
{
    __m512 acc[4][4];
#pragma GCC unroll 4
    for (size_t r = 0; r < 4; r++)
#pragma GCC unroll 4
        for (size_t t = 0; t < 4; t++)
            acc[r][t] = _mm512_setzero_ps();
    for (size_t i = 0; i < n_in; i += 16) {
        __m512 xv[4];
#pragma GCC unroll 4
        for (size_t t = 0; t < 4; t++)
            xv[t] = _mm512_loadu_ps(x + t * n_in + i);
#pragma GCC unroll 4
        for (size_t r = 0; r < 4; r++) {
            __m512 wv = _mm512_loadu_ps(w + r * n_in + i);
#pragma GCC unroll 4
            for (size_t t = 0; t < 4; t++)
                acc[r][t] = _mm512_fmadd_ps(wv, xv[t], acc[r][t]);
        }
    }
#pragma GCC unroll 4
    for (size_t r = 0; r < 4; r++)
#pragma GCC unroll 4
        for (size_t t = 0; t < 4; t++)
            y[t * ldy + r] = _mm512_reduce_add_ps(acc[r][t]);
}

static void dot16_tile(const float *w, size_t n_in, size_t rows, const float *x, size_t toks,
                       float *y, size_t ldy)
{
    if (rows == 4 && toks == 4) {
        dot16_tile_4x4(w, n_in, x, y, ldy);
        return;
    }
    __m512 acc[4][4];
    for (size_t r = 0; r < rows; r++)
        for (size_t t = 0; t < toks; t++)
            acc[r][t] = _mm512_setzero_ps();
    for (size_t i = 0; i < n_in; i += 16)
        for (size_t r = 0; r < rows; r++) {
            __m512 wv = _mm512_loadu_ps(w + r * n_in + i);
            for (size_t t = 0; t < toks; t++)
                acc[r][t] = _mm512_fmadd_ps(wv, _mm512_loadu_ps(x + t * n_in + i), acc[r][t]);
        }
    for (size_t r = 0; r < rows; r++)
        for (size_t t = 0; t < toks; t++)
            y[t * ldy + r] = _mm512_reduce_add_ps(acc[r][t]);
}

void vision_matmul_rows_avx512(const float *w, size_t n_in, size_t row_begin, size_t row_end,
                               const float *x, size_t n_tokens, float *y, size_t ldy,
                               bool matrix_order)
{
    if (!matrix_order) {
        for (size_t t = 0; t < n_tokens; t++)
            for (size_t r = row_begin; r < row_end; r++)
                y[t * ldy + r] = vec_dot(w + r * n_in, x + t * n_in, n_in);
        return;
    }
    for (size_t t = 0; t < n_tokens; t += 4) {
        size_t toks = n_tokens - t < 4 ? n_tokens - t : 4;
        for (size_t r = row_begin; r < row_end; r += 4) {
            size_t rows = row_end - r < 4 ? row_end - r : 4;
            dot16_tile(w + r * n_in, n_in, rows, x + t * n_in, toks, y + t * ldy + r, ldy);
        }
    }
}

/*
 * AVX2 versions of attention's two products (blocks.h chooses them at the avx2 level): the
 * scores over key tiles, a tile row of 16 cells as two 8-lane vectors, and the values, every
 * head of the group against each value row as it is read. Never called on a CPU without
 * AVX2, FMA and F16C.
 */
#include <immintrin.h>
#include <math.h>

#include "blocks.h"

/* the head count and the tile half must be constants in the loops */
#define ALWAYS_INLINE static inline __attribute__((always_inline))

ALWAYS_INLINE __m256 load_key_row(const void *tiles, size_t index, bool f16)
{
    if (f16)
        return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)tiles + index)));
    return _mm256_loadu_ps((const float *)tiles + index);
}

/* Heads per pass over a tile: two vectors each, 8 chains in 16 registers. */
enum { SCORE_HEADS = 4 };

ALWAYS_INLINE void score_tile(bool f16, const void *tiles, size_t t, size_t head_dim,
                              const float *q, size_t n_heads, float *scores, size_t ld_scores)
{
    __m256 low[SCORE_HEADS], high[SCORE_HEADS];
    for (size_t h = 0; h < n_heads; h++)
        low[h] = high[h] = _mm256_setzero_ps();
    size_t row = t * head_dim * KV_KEY_TILE;
    for (size_t d = 0; d < head_dim; d++) {
        __m256 k_low = load_key_row(tiles, row + d * KV_KEY_TILE, f16);
        __m256 k_high = load_key_row(tiles, row + d * KV_KEY_TILE + 8, f16);
        for (size_t h = 0; h < n_heads; h++) {
            __m256 qd = _mm256_broadcast_ss(q + h * head_dim + d);
            low[h] = _mm256_fmadd_ps(k_low, qd, low[h]);
            high[h] = _mm256_fmadd_ps(k_high, qd, high[h]);
        }
    }
    for (size_t h = 0; h < n_heads; h++) {
        _mm256_storeu_ps(scores + h * ld_scores + t * KV_KEY_TILE, low[h]);
        _mm256_storeu_ps(scores + h * ld_scores + t * KV_KEY_TILE + 8, high[h]);
    }
}

ALWAYS_INLINE void score_all_tiles(bool f16, const void *tiles, size_t n_tiles, size_t head_dim,
                                   const float *q, size_t n_heads, float *scores,
                                   size_t ld_scores)
{
    for (size_t t = 0; t < n_tiles; t++)
        score_tile(f16, tiles, t, head_dim, q, n_heads, scores, ld_scores);
}

#define SCORE_CASE(k)                                                                      \
    case k:                                                                                \
        if (f16)                                                                           \
            score_all_tiles(true, tiles, n_tiles, head_dim, q_part, k, part, ld_scores);   \
        else                                                                               \
            score_all_tiles(false, tiles, n_tiles, head_dim, q_part, k, part, ld_scores);  \
        break;

void block_attention_scores_avx2(bool f16, const void *tiles, size_t n_tiles, size_t head_dim,
                                 const float *q, size_t n_heads, float *scores, size_t ld_scores)
{
    for (size_t h0 = 0; h0 < n_heads; h0 += SCORE_HEADS) {
        size_t n = n_heads - h0 < SCORE_HEADS ? n_heads - h0 : SCORE_HEADS;
        const float *q_part = q + h0 * head_dim;
        float *part = scores + h0 * ld_scores;
        switch (n) {
            SCORE_CASE(1) SCORE_CASE(2) SCORE_CASE(3) SCORE_CASE(4)
        }
    }
}

/* Heads per pass over the values, two vectors of outputs each: 8 accumulators. */
enum { VALUE_HEADS = 4, VALUE_OUTPUTS = 16 };
/* Cells per block: a block's value rows are read once from memory, then from cache for every
 * further group of heads and outputs. */
enum { VALUE_CELLS = 128 };

ALWAYS_INLINE __m256 load_value(const void *row, size_t i, bool f16)
{
    if (f16)
        return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)row + i)));
    return _mm256_loadu_ps((const float *)row + i);
}

/* Outputs [i0, i0 + 16) of n_heads (<= VALUE_HEADS) heads over cells [c0, c1), added to out. */
ALWAYS_INLINE void value_chunk(bool f16, const void *values, size_t n, size_t i0, size_t c0,
                               size_t c1, const float *p, size_t ld_p, size_t n_heads,
                               float *out)
{
    __m256 low[VALUE_HEADS], high[VALUE_HEADS];
    for (size_t h = 0; h < n_heads; h++) {
        low[h] = _mm256_loadu_ps(out + h * n + i0);
        high[h] = _mm256_loadu_ps(out + h * n + i0 + 8);
    }
    size_t elem = f16 ? 2 : 4;
    for (size_t c = c0; c < c1; c++) {
        const char *row = (const char *)values + c * n * elem;
        __m256 v_low = load_value(row, i0, f16), v_high = load_value(row, i0 + 8, f16);
        for (size_t h = 0; h < n_heads; h++) {
            __m256 weight = _mm256_broadcast_ss(p + h * ld_p + c);
            low[h] = _mm256_fmadd_ps(v_low, weight, low[h]);
            high[h] = _mm256_fmadd_ps(v_high, weight, high[h]);
        }
    }
    for (size_t h = 0; h < n_heads; h++) {
        _mm256_storeu_ps(out + h * n + i0, low[h]);
        _mm256_storeu_ps(out + h * n + i0 + 8, high[h]);
    }
}

/* Outputs past the last whole chunk, one at a time. */
static void value_tail(bool f16, const void *values, size_t n, size_t i0, size_t c0, size_t c1,
                       const float *p, size_t ld_p, size_t n_heads, float *out)
{
    for (size_t c = c0; c < c1; c++)
        for (size_t h = 0; h < n_heads; h++)
            for (size_t i = i0; i < n; i++)
                out[h * n + i] = fmaf(p[h * ld_p + c],
                                      f16 ? _cvtsh_ss(((const uint16_t *)values)[c * n + i])
                                          : ((const float *)values)[c * n + i],
                                      out[h * n + i]);
}

ALWAYS_INLINE void value_block(bool f16, const void *values, size_t n, size_t c0, size_t c1,
                               const float *p, size_t ld_p, size_t n_heads, float *out)
{
    size_t whole = n / VALUE_OUTPUTS * VALUE_OUTPUTS;
    for (size_t h0 = 0; h0 < n_heads; h0 += VALUE_HEADS) {
        size_t heads = n_heads - h0 < VALUE_HEADS ? n_heads - h0 : VALUE_HEADS;
        const float *p_part = p + h0 * ld_p;
        float *out_part = out + h0 * n;
        for (size_t i0 = 0; i0 < whole; i0 += VALUE_OUTPUTS)
            switch (heads) {
            case 1: value_chunk(f16, values, n, i0, c0, c1, p_part, ld_p, 1, out_part); break;
            case 2: value_chunk(f16, values, n, i0, c0, c1, p_part, ld_p, 2, out_part); break;
            case 3: value_chunk(f16, values, n, i0, c0, c1, p_part, ld_p, 3, out_part); break;
            default: value_chunk(f16, values, n, i0, c0, c1, p_part, ld_p, 4, out_part); break;
            }
    }
    if (whole < n)
        value_tail(f16, values, n, whole, c0, c1, p, ld_p, n_heads, out);
}

void block_attention_values_avx2(bool f16, const void *values, size_t n, size_t n_cells,
                                 const float *p, size_t ld_p, size_t n_heads, float *out)
{
    for (size_t i = 0; i < n_heads * n; i++)
        out[i] = 0.0f;
    for (size_t c0 = 0; c0 < n_cells; c0 += VALUE_CELLS) {
        size_t c1 = n_cells - c0 < VALUE_CELLS ? n_cells : c0 + VALUE_CELLS;
        if (f16)
            value_block(true, values, n, c0, c1, p, ld_p, n_heads, out);
        else
            value_block(false, values, n, c0, c1, p, ld_p, n_heads, out);
    }
}

/*
 * attention_q8.h's scores on AVX-512 VNNI: a key tile's quants, four components of its 16
 * cells at a time, turned into one lane per cell (a dword permute and a byte shuffle), then
 * one vpdpbusd per query head adds the four products of each cell. vpdpbusd multiplies
 * unsigned by signed bytes, so the keys go in unsigned (Q8_0's q + 128, Q4_0's nibbles q + 8
 * as stored) and the sums start at minus that offset times the query block's sum: exactly
 * the integer sums of the portable kernel, and so its bits.
 */
#include <immintrin.h>

#include "attention_q8.h"

/* the head counts, tiles per pass and cache type must be constants in the loops */
#define ALWAYS_INLINE static inline __attribute__((always_inline))

/* Four rows of a tile (a row per component, a byte per cell) as 16 lanes of 4 bytes: lane c
 * holds cell c's four components in order. */
ALWAYS_INLINE __m512i rows_to_lanes(__m512i rows)
{
    /* dword 4 L + r of the result is row r's cells 4 L..4 L + 3 */
    const __m512i dwords = _mm512_set_epi32(15, 11, 7, 3, 14, 10, 6, 2, 13, 9, 5, 1, 12, 8, 4, 0);
    const __m512i bytes = _mm512_broadcast_i32x4(
        _mm_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15));
    return _mm512_shuffle_epi8(_mm512_permutexvar_epi32(dwords, rows), bytes);
}

/*
 * The rounded heads of a call reordered for the passes: per block and step of the kernel, the
 * n_heads dwords of four components it broadcasts (two per head for Q4_0: components 4 s.. and
 * 16 + 4 s..), then per block the heads' starting sums and scales. With one pointer and
 * constant offsets the broadcasts fold into vpdpbusd's memory operand; with a pointer per
 * head the loop ran out of registers.
 */
typedef struct q8_order {
    int32_t q[ATTENTION_Q8_COMPONENTS / 4];
    int32_t start[ATTENTION_Q8_COMPONENTS / 32];
    float scale[ATTENTION_Q8_COMPONENTS / 32];
} q8_order;

ALWAYS_INLINE void order_query(corral_kv_type type, const attention_q8_query *query,
                               size_t n_heads, q8_order *out)
{
    size_t dk = query->head_dim, n_blocks = dk / 32;
    const int32_t *q4 = (const int32_t *)query->q; /* four int8 components a dword */
    int32_t offset = type == CORRAL_KV_Q8_0 ? 128 : 8;
    for (size_t b = 0; b < n_blocks; b++)
        for (size_t h = 0; h < n_heads; h++) {
            const int32_t *block = q4 + (h * dk + 32 * b) / 4;
            for (size_t w = 0; w < 8; w++) {
                /* Q4_0: step w % 4, the low (w < 4) or high dword */
                size_t at = type == CORRAL_KV_Q8_0 ? (b * 8 + w) * n_heads + h
                                                   : ((b * 4 + w % 4) * n_heads + h) * 2 + w / 4;
                out->q[at] = block[w];
            }
            out->start[b * n_heads + h] = -offset * query->sum[h * n_blocks + b];
            out->scale[b * n_heads + h] = query->scale[h * n_blocks + b];
        }
}

/* Tiles ahead of a pass that it asks L1 for, as block_attention_scores_avx512 does: those
 * of the pass after next. */
enum { Q8_PREFETCH_PASSES = 2 };

/* Tiles [t, t + n_pass) against the n_heads rounded heads (n_pass * n_heads <= 8: 8 integer
 * and 8 float accumulators). */
ALWAYS_INLINE void score_pass(corral_kv_type type, const uint8_t *tiles, size_t t,
                              size_t n_pass, size_t n_heads, const attention_q8_query *query,
                              const q8_order *order, float *scores, size_t ld_scores,
                              attention_next_stream *next)
{
    size_t dk = query->head_dim, n_blocks = dk / 32, tile_bytes = kv_key_tile_bytes(type, dk);
    const uint8_t *tile0 = tiles + t * tile_bytes;
    const uint8_t *quants0 = tile0 + n_blocks * KV_KEY_TILE * sizeof(uint16_t);
    /* 64-byte rows of four components per block: 8 for Q8_0, 4 (of two nibbles) for Q4_0 */
    size_t steps = type == CORRAL_KV_Q8_0 ? 8 : 4;
    uintptr_t ahead = (uintptr_t)(tile0 + Q8_PREFETCH_PASSES * n_pass * tile_bytes);
    uintptr_t ahead_end = ahead + n_pass * tile_bytes;
    size_t lines_per_step = (n_pass * tile_bytes / 64 + n_blocks * steps - 1) / (n_blocks * steps);
    const __m512i flip = _mm512_set1_epi8((char)0x80), low = _mm512_set1_epi8(0x0f);
    __m512 acc[4][8];
    for (size_t j = 0; j < n_pass; j++)
        for (size_t h = 0; h < n_heads; h++)
            acc[j][h] = _mm512_setzero_ps();
    for (size_t b = 0; b < n_blocks; b++) {
        __m512i sums[4][8];
        for (size_t h = 0; h < n_heads; h++) {
            __m512i start = _mm512_set1_epi32(order->start[b * n_heads + h]);
            for (size_t j = 0; j < n_pass; j++)
                sums[j][h] = start;
        }
        for (size_t s = 0; s < steps; s++) {
            for (size_t i = 0; i < lines_per_step && ahead < ahead_end; i++, ahead += 64)
                _mm_prefetch((const char *)ahead, _MM_HINT_T0);
            attention_next_step(next);
            const int32_t *qs = order->q + (b * steps + s) * n_heads * (8 / steps);
            for (size_t j = 0; j < n_pass; j++) {
                const uint8_t *quants = quants0 + j * tile_bytes;
                if (type == CORRAL_KV_Q8_0) {
                    /* rows 32 b + 4 s..: components 32 b + 4 s.. */
                    __m512i k = rows_to_lanes(_mm512_loadu_si512(
                        quants + (32 * b + 4 * s) * KV_KEY_TILE));
                    k = _mm512_xor_si512(k, flip);
                    for (size_t h = 0; h < n_heads; h++)
                        sums[j][h] = _mm512_dpbusd_epi32(sums[j][h], k,
                                                         _mm512_set1_epi32(qs[h]));
                } else {
                    /* rows 16 b + 4 s..: components 32 b + 4 s.. low, 32 b + 16 + 4 s.. high */
                    __m512i k = rows_to_lanes(_mm512_loadu_si512(
                        quants + (16 * b + 4 * s) * KV_KEY_TILE));
                    __m512i k_low = _mm512_and_si512(k, low);
                    __m512i k_high = _mm512_and_si512(_mm512_srli_epi16(k, 4), low);
                    for (size_t h = 0; h < n_heads; h++) {
                        sums[j][h] = _mm512_dpbusd_epi32(sums[j][h], k_low,
                                                         _mm512_set1_epi32(qs[2 * h]));
                        sums[j][h] = _mm512_dpbusd_epi32(sums[j][h], k_high,
                                                         _mm512_set1_epi32(qs[2 * h + 1]));
                    }
                }
            }
        }
        for (size_t j = 0; j < n_pass; j++) {
            __m512 key_scales = _mm512_cvtph_ps(_mm256_loadu_si256(
                (const __m256i *)(tile0 + j * tile_bytes + b * KV_KEY_TILE * sizeof(uint16_t))));
            for (size_t h = 0; h < n_heads; h++) {
                __m512 scale = _mm512_mul_ps(key_scales,
                                             _mm512_set1_ps(order->scale[b * n_heads + h]));
                acc[j][h] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sums[j][h]), scale, acc[j][h]);
            }
        }
    }
    for (size_t h = 0; h < n_heads; h++)
        for (size_t j = 0; j < n_pass; j++)
            _mm512_storeu_ps(scores + h * ld_scores + (t + j) * KV_KEY_TILE, acc[j][h]);
}

/* Every tile for n_heads heads (a constant after inlining). */
ALWAYS_INLINE void score_all(corral_kv_type type, const void *tiles, size_t n_tiles,
                             size_t n_heads, const attention_q8_query *query, float *scores,
                             size_t ld_scores, attention_next next)
{
    size_t per_pass = n_heads <= 2 ? 4 : n_heads <= 4 ? 2 : 1;
    size_t steps = query->head_dim / 32 * (type == CORRAL_KV_Q8_0 ? 8 : 4);
    attention_next_stream stream =
        attention_next_start(next, (n_tiles + per_pass - 1) / per_pass * steps);
    q8_order order;
    order_query(type, query, n_heads, &order);
    size_t t = 0;
    if (per_pass == 4)
        for (; t + 4 <= n_tiles; t += 4)
            score_pass(type, tiles, t, 4, n_heads, query, &order, scores, ld_scores, &stream);
    if (per_pass >= 2)
        for (; t + 2 <= n_tiles; t += 2)
            score_pass(type, tiles, t, 2, n_heads, query, &order, scores, ld_scores, &stream);
    for (; t < n_tiles; t++)
        score_pass(type, tiles, t, 1, n_heads, query, &order, scores, ld_scores, &stream);
}

#define Q8_SCORE_CASE(k)                                                                    \
    case k:                                                                                 \
        if (type == CORRAL_KV_Q8_0)                                                         \
            score_all(CORRAL_KV_Q8_0, tiles, n_tiles, k, query, scores, ld_scores, next);   \
        else                                                                                \
            score_all(CORRAL_KV_Q4_0, tiles, n_tiles, k, query, scores, ld_scores, next);   \
        break;

void attention_q8_scores_avx512_vnni(corral_kv_type type, const void *tiles, size_t n_tiles,
                                     const attention_q8_query *query, float *scores,
                                     size_t ld_scores, attention_next next)
{
    switch (query->n_heads) {
        Q8_SCORE_CASE(1) Q8_SCORE_CASE(2) Q8_SCORE_CASE(3) Q8_SCORE_CASE(4)
        Q8_SCORE_CASE(5) Q8_SCORE_CASE(6) Q8_SCORE_CASE(7) Q8_SCORE_CASE(8)
    }
}

/*
 * attention_q8.h's scores at the avx2 level, and at the avx512 level on a CPU without VNNI:
 * two rows of a key tile (two components of its 16 cells) interleaved, then per query head
 * one multiply-add of pairs per 8 cells (vpmaddwd on Q8_0's int8 widened to int16;
 * vpmaddubsw on Q4_0's nibbles, whose sums fit 16 bits over half a block). The integer sums
 * are exact and the float steps those of the portable kernel: its bits.
 */
#include <immintrin.h>
#include <string.h>

#include "attention_q8.h"

/* the head count and cache type must be constants in the loops */
#define ALWAYS_INLINE static inline __attribute__((always_inline))

/* Query heads per pass over a tile: 2 vectors of 8 int32 sums each. */
enum { Q8_AVX2_HEADS = 4 };

/*
 * A pass's heads [h0, h0 + n_heads) laid out for the kernel: per block and step of two rows
 * the dwords it broadcasts, head after head (Q8_0: components j, j + 1 as the int16 pair of a
 * dword, low first, what vpmaddwd takes; Q4_0: the byte pairs of components j, j + 1 and
 * j + 16, j + 17, each twice, what vpmaddubsw takes), then per block the heads' offsets and
 * scales. One pointer with constant offsets in the loop rather than one per head.
 */
typedef struct q8_avx2_order {
    int32_t pair[ATTENTION_Q8_COMPONENTS / 2];
    int32_t offset[ATTENTION_Q8_COMPONENTS / 32];
    float scale[ATTENTION_Q8_COMPONENTS / 32];
} q8_avx2_order;

/* Two int16 as a dword, a low first. */
static int32_t int16_pair(int16_t a, int16_t b)
{
    return (int32_t)((uint32_t)(uint16_t)a | (uint32_t)(uint16_t)b << 16);
}

/* Components i and i + 1 of the query as the byte pair of a word. */
static int16_t byte_pair(const int8_t *q)
{
    int16_t pair;
    memcpy(&pair, q, sizeof pair);
    return pair;
}

static void order_query(corral_kv_type type, const attention_q8_query *query, size_t h0,
                        size_t n_heads, q8_avx2_order *out)
{
    size_t dk = query->head_dim, n_blocks = dk / 32;
    for (size_t b = 0; b < n_blocks; b++)
        for (size_t h = 0; h < n_heads; h++) {
            const int8_t *q = query->q + (h0 + h) * dk + 32 * b;
            if (type == CORRAL_KV_Q8_0)
                for (size_t j = 0; j < 32; j += 2)
                    out->pair[(b * 16 + j / 2) * n_heads + h] = int16_pair(q[j], q[j + 1]);
            else
                for (size_t j = 0; j < 16; j += 2) {
                    int32_t *at = out->pair + ((b * 8 + j / 2) * n_heads + h) * 2;
                    at[0] = int16_pair(byte_pair(q + j), byte_pair(q + j));
                    at[1] = int16_pair(byte_pair(q + j + 16), byte_pair(q + j + 16));
                }
            size_t from = (h0 + h) * n_blocks + b;
            /* Q4_0's nibbles carry q + 8: minus 8 times the query block's sum */
            out->offset[b * n_heads + h] = type == CORRAL_KV_Q4_0 ? -8 * query->sum[from] : 0;
            out->scale[b * n_heads + h] = query->scale[from];
        }
}

/* The 16 int16 sums of a ymm as two vectors of 8 int32. */
ALWAYS_INLINE void widen_add(__m256i sums16, __m256i *low, __m256i *high)
{
    *low = _mm256_add_epi32(*low, _mm256_cvtepi16_epi32(_mm256_castsi256_si128(sums16)));
    *high = _mm256_add_epi32(*high, _mm256_cvtepi16_epi32(_mm256_extracti128_si256(sums16, 1)));
}

/* Tile t for the query's heads [h0, h0 + n_heads). */
ALWAYS_INLINE void score_tile(corral_kv_type type, const uint8_t *tile,
                              size_t head_dim, const q8_avx2_order *order, size_t n_heads,
                              float *scores, size_t ld_scores, attention_next_stream *next)
{
    size_t n_blocks = head_dim / 32;
    const uint8_t *quants = tile + n_blocks * KV_KEY_TILE * sizeof(uint16_t);
    __m256 acc[Q8_AVX2_HEADS][2];
    for (size_t h = 0; h < n_heads; h++)
        acc[h][0] = acc[h][1] = _mm256_setzero_ps();
    for (size_t b = 0; b < n_blocks; b++) {
        __m256i low[Q8_AVX2_HEADS], high[Q8_AVX2_HEADS];
        for (size_t h = 0; h < n_heads; h++)
            low[h] = high[h] = _mm256_setzero_si256();
        if (type == CORRAL_KV_Q8_0) {
            for (size_t j = 0; j < 32; j += 2) {
                attention_next_step(next);
                const uint8_t *row = quants + (32 * b + j) * KV_KEY_TILE;
                __m128i r0 = _mm_loadu_si128((const __m128i *)row);
                __m128i r1 = _mm_loadu_si128((const __m128i *)(row + KV_KEY_TILE));
                /* per cell the pair (component j, j + 1) as int16: cells 0..7, 8..15 */
                __m256i k_low = _mm256_cvtepi8_epi16(_mm_unpacklo_epi8(r0, r1));
                __m256i k_high = _mm256_cvtepi8_epi16(_mm_unpackhi_epi8(r0, r1));
                const int32_t *qs = order->pair + (b * 16 + j / 2) * n_heads;
                for (size_t h = 0; h < n_heads; h++) {
                    __m256i pair = _mm256_set1_epi32(qs[h]);
                    low[h] = _mm256_add_epi32(low[h], _mm256_madd_epi16(k_low, pair));
                    high[h] = _mm256_add_epi32(high[h], _mm256_madd_epi16(k_high, pair));
                }
            }
        } else {
            /* rows j, j + 1 of the block: nibbles q + 8 of components j, j + 1 (low) and
             * j + 16, j + 17 (high); a pair's products are at most 2 * 15 * 127, so eight
             * pairs add up in 16 bits: low and high halves summed apart, widened once */
            __m256i sums_low[Q8_AVX2_HEADS], sums_high[Q8_AVX2_HEADS];
            for (size_t h = 0; h < n_heads; h++)
                sums_low[h] = sums_high[h] = _mm256_setzero_si256();
            const __m256i nibble = _mm256_set1_epi8(0x0f);
            for (size_t j = 0; j < 16; j += 2) {
                attention_next_step(next);
                const uint8_t *row = quants + (16 * b + j) * KV_KEY_TILE;
                __m128i r0 = _mm_loadu_si128((const __m128i *)row);
                __m128i r1 = _mm_loadu_si128((const __m128i *)(row + KV_KEY_TILE));
                __m256i pairs = _mm256_set_m128i(_mm_unpackhi_epi8(r0, r1), _mm_unpacklo_epi8(r0, r1));
                __m256i n_low = _mm256_and_si256(pairs, nibble);
                __m256i n_high = _mm256_and_si256(_mm256_srli_epi16(pairs, 4), nibble);
                const int32_t *qs = order->pair + (b * 8 + j / 2) * n_heads * 2;
                for (size_t h = 0; h < n_heads; h++) {
                    __m256i q_low = _mm256_set1_epi32(qs[2 * h]);
                    __m256i q_high = _mm256_set1_epi32(qs[2 * h + 1]);
                    sums_low[h] = _mm256_add_epi16(sums_low[h], _mm256_maddubs_epi16(n_low, q_low));
                    sums_high[h] =
                        _mm256_add_epi16(sums_high[h], _mm256_maddubs_epi16(n_high, q_high));
                }
            }
            for (size_t h = 0; h < n_heads; h++) {
                widen_add(sums_low[h], &low[h], &high[h]);
                widen_add(sums_high[h], &low[h], &high[h]);
            }
        }
        const uint16_t *key_scales = (const uint16_t *)tile + b * KV_KEY_TILE;
        __m256 scales_low = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)key_scales));
        __m256 scales_high = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(key_scales + 8)));
        for (size_t h = 0; h < n_heads; h++) {
            __m256i offset = _mm256_set1_epi32(order->offset[b * n_heads + h]);
            __m256 qs = _mm256_set1_ps(order->scale[b * n_heads + h]);
            acc[h][0] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_add_epi32(low[h], offset)),
                                        _mm256_mul_ps(scales_low, qs), acc[h][0]);
            acc[h][1] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_add_epi32(high[h], offset)),
                                        _mm256_mul_ps(scales_high, qs), acc[h][1]);
        }
    }
    for (size_t h = 0; h < n_heads; h++) {
        _mm256_storeu_ps(scores + h * ld_scores, acc[h][0]);
        _mm256_storeu_ps(scores + h * ld_scores + 8, acc[h][1]);
    }
}

ALWAYS_INLINE void score_all(corral_kv_type type, const void *tiles, size_t n_tiles,
                             const attention_q8_query *query, size_t h0, size_t n_heads,
                             float *scores, size_t ld_scores, attention_next next)
{
    size_t dk = query->head_dim, tile_bytes = kv_key_tile_bytes(type, dk);
    q8_avx2_order order;
    order_query(type, query, h0, n_heads, &order);
    /* a step per two rows of each tile */
    size_t steps = dk / 32 * (type == CORRAL_KV_Q8_0 ? 16 : 8);
    attention_next_stream stream = attention_next_start(next, n_tiles * steps);
    for (size_t t = 0; t < n_tiles; t++)
        score_tile(type, (const uint8_t *)tiles + t * tile_bytes, dk, &order, n_heads,
                   scores + h0 * ld_scores + t * KV_KEY_TILE, ld_scores, &stream);
}

#define Q8_AVX2_CASE(k)                                                                     \
    case k:                                                                                 \
        if (type == CORRAL_KV_Q8_0)                                                         \
            score_all(CORRAL_KV_Q8_0, tiles, n_tiles, query, h0, k, scores, ld_scores,      \
                      next);                                                                \
        else                                                                                \
            score_all(CORRAL_KV_Q4_0, tiles, n_tiles, query, h0, k, scores, ld_scores,      \
                      next);                                                                \
        break;

void attention_q8_scores_avx2(corral_kv_type type, const void *tiles, size_t n_tiles,
                              const attention_q8_query *query, float *scores, size_t ld_scores,
                              attention_next next)
{
    for (size_t h0 = 0; h0 < query->n_heads; h0 += Q8_AVX2_HEADS) {
        size_t n = query->n_heads - h0 < Q8_AVX2_HEADS ? query->n_heads - h0 : Q8_AVX2_HEADS;
        switch (n) { Q8_AVX2_CASE(1) Q8_AVX2_CASE(2) Q8_AVX2_CASE(3) Q8_AVX2_CASE(4) }
        next.n_bytes = 0; /* the first pass streams it */
    }
}

/*
 * Attention scores over a quantized key cache (Q8_0 or Q4_0 tiles, blocks.h) in integers:
 * each query head is rounded to blocks of 32 int8 components with a float scale (as llama.cpp
 * rounds a query to Q8_0 before its dot products with quantized keys), and a score is, block
 * by block, the exact integer dot product of those int8 components with the keys' quants,
 * times the query block's scale times the key block's, summed over the blocks in order with
 * one fused multiply-add each. The integer sums are exact, and the few float operations are
 * the same at every level, so every level gives the same bits; at the avx512 level with VNNI
 * the dot products run on vpdpbusd, four multiply-adds per lane and instruction, where the
 * exact F32 path (block_attention_scores on F32 / F16 tiles) needs a conversion and an FMA
 * per component.
 */
#ifndef CORRAL_ENGINE_ATTENTION_Q8_H
#define CORRAL_ENGINE_ATTENTION_Q8_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "blocks.h"

/* Query heads per pass of the score kernels, and the components they hold at most: a pass
 * takes at most 8 heads, and fewer where heads are wider than 1024. */
enum { ATTENTION_Q8_HEADS = 8, ATTENTION_Q8_COMPONENTS = ATTENTION_Q8_HEADS * 1024 };

/* Room for the rounded heads of one pass (attention_q8_query, blocks.h, points into it). */
typedef struct attention_q8_room {
    int8_t q[ATTENTION_Q8_COMPONENTS] __attribute__((aligned(64)));
    float scale[ATTENTION_Q8_COMPONENTS / 32];
    int32_t sum[ATTENTION_Q8_COMPONENTS / 32];
} attention_q8_room;

/* The most query heads of head_dim components one attention_q8_room holds (at least 1 for
 * any head_dim kv_type_fits takes for a quantized type). */
static inline size_t attention_q8_heads(size_t head_dim)
{
    size_t n = ATTENTION_Q8_COMPONENTS / head_dim;
    return n < ATTENTION_Q8_HEADS ? n : ATTENTION_Q8_HEADS;
}

/*
 * Heads [0, n_heads) of q (head_dim floats each) rounded block by block into q8 (n_heads *
 * head_dim), scale and sum (n_heads * head_dim / 32 each): scale = max |x| / 127, q = x /
 * scale rounded to the nearest integer, ties to even (all 0 where the scale is 0: a block of
 * zeros, or of values under 127 times the smallest float). The one rounding of every level;
 * each block's depends on its own 32 components only. Returns the heads as the kernels take
 * them.
 */
attention_q8_query attention_q8_round(const float *q, size_t n_heads, size_t head_dim,
                                      int8_t *q8, float *scale, int32_t *sum);

/* Heads [h0, h0 + n_heads) of rounded heads. */
static inline attention_q8_query attention_q8_query_part(const attention_q8_query *query,
                                                         size_t h0, size_t n_heads)
{
    size_t n_blocks = query->head_dim / 32;
    return (attention_q8_query){query->q + h0 * query->head_dim, query->scale + h0 * n_blocks,
                                query->sum + h0 * n_blocks, n_heads, query->head_dim};
}

/*
 * The scores of the rounded heads against n_tiles key tiles of a quantized type (see the
 * top of this file), scores[h * ld_scores + c] as block_attention_scores lays them out;
 * next as there. Each level's version (at most attention_q8_heads(head_dim) heads); the
 * scalar one is the reference.
 */
void attention_q8_scores(corral_kv_type type, const void *tiles, size_t n_tiles,
                         const attention_q8_query *query, float *scores, size_t ld_scores);
void attention_q8_scores_avx2(corral_kv_type type, const void *tiles, size_t n_tiles,
                              const attention_q8_query *query, float *scores, size_t ld_scores,
                              attention_next next);
/* Needs AVX-512 VNNI (cpu_has_avx512_vnni). */
void attention_q8_scores_avx512_vnni(corral_kv_type type, const void *tiles, size_t n_tiles,
                                     const attention_q8_query *query, float *scores,
                                     size_t ld_scores, attention_next next);

/* Any number of rounded heads scored by the active level's kernel, a pass at a time. */
void attention_q8_scores_rounded(corral_kv_type type, const void *tiles, size_t n_tiles,
                                 const attention_q8_query *query, float *scores,
                                 size_t ld_scores, attention_next next);

/*
 * block_attention_scores for a quantized type: the heads rounded a pass at a time
 * (attention_q8_round), then scored by the active level's kernel.
 */
void block_attention_scores_quantized(corral_kv_type type, const void *tiles, size_t n_tiles,
                                      size_t head_dim, const float *q, size_t n_heads,
                                      float *scores, size_t ld_scores, attention_next next);

/*
 * The portable kernel, compiled into each level's file so that the compiler vectorises it
 * with that level's instructions: for each tile and head, per block the exact integer sums of
 * the 16 cells, then score = fma((float)sum, key scale * query scale, score).
 */
static inline __attribute__((always_inline)) void
attention_q8_scores_portable(corral_kv_type type, const void *tiles, size_t n_tiles,
                             const attention_q8_query *query, float *scores, size_t ld_scores)
{
    size_t dk = query->head_dim, n_blocks = dk / 32;
    size_t tile_bytes = kv_key_tile_bytes(type, dk);
    for (size_t t = 0; t < n_tiles; t++) {
        const uint8_t *tile = (const uint8_t *)tiles + t * tile_bytes;
        const uint8_t *quants = tile + n_blocks * KV_KEY_TILE * sizeof(uint16_t);
        for (size_t h = 0; h < query->n_heads; h++) {
            const int8_t *qh = query->q + h * dk;
            float acc[KV_KEY_TILE] = {0};
            for (size_t b = 0; b < n_blocks; b++) {
                int32_t sums[KV_KEY_TILE] = {0};
                const int8_t *qb = qh + 32 * b;
                if (type == CORRAL_KV_Q8_0) {
                    const int8_t *rows = (const int8_t *)quants + 32 * b * KV_KEY_TILE;
                    for (size_t j = 0; j < 32; j++)
                        for (size_t lane = 0; lane < KV_KEY_TILE; lane++)
                            sums[lane] += qb[j] * rows[j * KV_KEY_TILE + lane];
                } else { /* Q4_0: row j of the block, nibbles q + 8 of components j, j + 16 */
                    const uint8_t *rows = quants + 16 * b * KV_KEY_TILE;
                    for (size_t j = 0; j < 16; j++)
                        for (size_t lane = 0; lane < KV_KEY_TILE; lane++) {
                            uint8_t pair = rows[j * KV_KEY_TILE + lane];
                            sums[lane] += qb[j] * ((pair & 0x0f) - 8) +
                                          qb[j + 16] * ((pair >> 4) - 8);
                        }
                }
                float qs = query->scale[h * n_blocks + b];
                const uint16_t *ks = (const uint16_t *)tile + b * KV_KEY_TILE;
                for (size_t lane = 0; lane < KV_KEY_TILE; lane++)
                    acc[lane] = fmaf((float)sums[lane], quant_f16_to_f32(ks[lane]) * qs, acc[lane]);
            }
            for (size_t lane = 0; lane < KV_KEY_TILE; lane++)
                scores[h * ld_scores + t * KV_KEY_TILE + lane] = acc[lane];
        }
    }
}

#endif

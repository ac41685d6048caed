/*
 * Scores over a quantized key cache (attention_q8.h): the query's rounding, shared by every
 * level, the scalar kernel, and the choice of kernel per level.
 */
#include "attention_q8.h"

#include <math.h>

#include "cpu.h"

attention_q8_query attention_q8_round(const float *q, size_t n_heads, size_t head_dim,
                                      int8_t *q8, float *scale_out, int32_t *sum_out)
{
    /* x + 1.5 * 2^23 - 1.5 * 2^23 rounds |x| < 2^22 to the nearest integer, ties to even, in
     * plain float arithmetic (no libm call: roundf / fmaxf calls were an eighth of a decoding
     * token's attention when it rounded its query heads once per chunk of cells) */
    const float magic = 12582912.0f;
    for (size_t b = 0; b < n_heads * head_dim / 32; b++) {
        const float *x = q + 32 * b;
        float max = 0.0f;
        for (size_t j = 0; j < 32; j++) {
            float a = fabsf(x[j]);
            max = a > max ? a : max;
        }
        float scale = max / 127.0f;
        int32_t sum = 0;
        for (size_t j = 0; j < 32; j++) {
            /* |x| / scale is at most 127 give or take a rounding: the clamp keeps it there */
            float r = scale > 0.0f ? (x[j] / scale + magic) - magic : 0.0f;
            int8_t v = (int8_t)(r > 127.0f ? 127.0f : r < -127.0f ? -127.0f : r);
            q8[32 * b + j] = v;
            sum += v;
        }
        scale_out[b] = scale;
        sum_out[b] = sum;
    }
    return (attention_q8_query){q8, scale_out, sum_out, n_heads, head_dim};
}

void attention_q8_scores(corral_kv_type type, const void *tiles, size_t n_tiles,
                         const attention_q8_query *query, float *scores, size_t ld_scores)
{
    if (type == CORRAL_KV_Q8_0)
        attention_q8_scores_portable(CORRAL_KV_Q8_0, tiles, n_tiles, query, scores, ld_scores);
    else
        attention_q8_scores_portable(CORRAL_KV_Q4_0, tiles, n_tiles, query, scores, ld_scores);
}

void attention_q8_scores_rounded(corral_kv_type type, const void *tiles, size_t n_tiles,
                                 const attention_q8_query *query, float *scores,
                                 size_t ld_scores, attention_next next)
{
    enum cpu_level level = cpu_active_level();
    bool vnni = level >= CPU_LEVEL_AVX512 && cpu_has_avx512_vnni();
    size_t per_pass = attention_q8_heads(query->head_dim);
    for (size_t h0 = 0; h0 < query->n_heads; h0 += per_pass, next.n_bytes = 0) {
        size_t n = query->n_heads - h0 < per_pass ? query->n_heads - h0 : per_pass;
        attention_q8_query pass = attention_q8_query_part(query, h0, n);
        float *part = scores + h0 * ld_scores;
        if (vnni)
            attention_q8_scores_avx512_vnni(type, tiles, n_tiles, &pass, part, ld_scores, next);
        else if (level >= CPU_LEVEL_AVX2) /* avx512 without VNNI too */
            attention_q8_scores_avx2(type, tiles, n_tiles, &pass, part, ld_scores, next);
        else
            attention_q8_scores(type, tiles, n_tiles, &pass, part, ld_scores);
    }
}

void block_attention_scores_quantized(corral_kv_type type, const void *tiles, size_t n_tiles,
                                      size_t head_dim, const float *q, size_t n_heads,
                                      float *scores, size_t ld_scores, attention_next next)
{
    attention_q8_room room;
    size_t per_pass = attention_q8_heads(head_dim);
    for (size_t h0 = 0; h0 < n_heads; h0 += per_pass, next.n_bytes = 0) {
        size_t n = n_heads - h0 < per_pass ? n_heads - h0 : per_pass;
        attention_q8_query query =
            attention_q8_round(q + h0 * head_dim, n, head_dim, room.q, room.scale, room.sum);
        attention_q8_scores_rounded(type, tiles, n_tiles, &query, scores + h0 * ld_scores,
                                    ld_scores, next);
    }
}

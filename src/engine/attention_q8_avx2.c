/*
 * attention_q8.h's portable score kernel compiled for AVX2 (the compiler vectorises its
 * integer sums over the 16 cells of a tile): the avx2 level's, and the avx512 level's on a
 * CPU without VNNI. The same bits as the scalar kernel: integer sums, then the same float
 * operations.
 */
#include "attention_q8.h"

void attention_q8_scores_avx2(corral_kv_type type, const void *tiles, size_t n_tiles,
                              const attention_q8_query *query, float *scores, size_t ld_scores)
{
    /* the type a constant in each copy of the loops */
    if (type == CORRAL_KV_Q8_0)
        attention_q8_scores_portable(CORRAL_KV_Q8_0, tiles, n_tiles, query, scores, ld_scores);
    else
        attention_q8_scores_portable(CORRAL_KV_Q4_0, tiles, n_tiles, query, scores, ld_scores);
}

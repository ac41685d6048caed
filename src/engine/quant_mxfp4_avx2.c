/*
 * AVX2 MXFP4 . Q8_0 dot product (quant_mxfp4.h): a block's 32 codes become their integer
 * values with one byte shuffle from the value table, are multiplied by the activation quants
 * exactly in i16 / i32, and the blocks are added in order into one f32 sum with a fused
 * multiply-add each, so results differ from the scalar level by rounding only.
 */
#include "quant_legacy.h"
#include "quant_mxfp4.h"
#include "quant_x86.h"

/* Eight i32 partial sums of a block's values times its activation quants. Values are at
 * most 12 in magnitude, so maddubs's pair sums (24 * 128) cannot saturate. */
static inline __m256i block_sums_mxfp4(const block_mxfp4 *x, const block_q8_0 *y, __m256i table)
{
    __m256i values = _mm256_shuffle_epi8(table, x86_unpack_nibbles(x->qs));
    __m256i quants = _mm256_loadu_si256((const __m256i *)y->qs);
    return x86_dot_i8(values, quants);
}

float quant_dot_mxfp4_avx2(size_t n, const void *w, const void *a)
{
    const block_mxfp4 *x = w;
    const block_q8_0 *y = a;
    const __m256i table =
        _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)quant_mxfp4_values));
    size_t n_blocks = n / QUANT_QK32, i = 0;
    float acc = 0.0f;
    for (; i + 4 <= n_blocks; i += 4) {
        __m256i s[4];
        for (int k = 0; k < 4; k++)
            s[k] = block_sums_mxfp4(x + i + k, y + i + k, table);
        __m256i quads =
            _mm256_hadd_epi32(_mm256_hadd_epi32(s[0], s[1]), _mm256_hadd_epi32(s[2], s[3]));
        int32_t isum[4];
        _mm_storeu_si128((__m128i *)isum, _mm_add_epi32(_mm256_castsi256_si128(quads),
                                                        _mm256_extracti128_si256(quads, 1)));
        for (int k = 0; k < 4; k++)
            acc = x86_fused_add(x86_half(y[i + k].d) * quant_mxfp4_scale(x[i + k].e), isum[k],
                                acc);
    }
    for (; i < n_blocks; i++)
        acc = x86_fused_add(x86_half(y[i].d) * quant_mxfp4_scale(x[i].e),
                            x86_hsum_epi32(block_sums_mxfp4(x + i, y + i, table)), acc);
    return acc;
}

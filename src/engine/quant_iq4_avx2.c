/*
 * AVX2 IQ4_NL . Q8_0 and IQ4_XS . Q8_K dot products (quant_iq4.h): 32 codes become their
 * codebook values with one byte shuffle, the products with the activation quants are summed
 * exactly in i16 / i32, and the blocks (IQ4_NL) or super-blocks (IQ4_XS) are added in order
 * into one f32 sum with a fused multiply-add each, so results differ from the scalar level by
 * rounding only.
 */
#include "quant_iq4.h"
#include "quant_k_blocks.h"
#include "quant_legacy.h"
#include "quant_x86.h"

/* The codebook in both 128-bit lanes, for _mm256_shuffle_epi8. */
static inline __m256i codebook(void)
{
    return _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)quant_iq4_values));
}

/* maddubs's pair sums of 32 codes' values times 32 activation quants: values are at most 127
 * in magnitude and quants never -128 (Q8_0 and Q8_K scale by the largest magnitude over 127),
 * so a pair is at most 2 * 127 * 127 and cannot saturate. */
static inline __m256i pair_sums(const uint8_t qs[16], const int8_t q8[32], __m256i table)
{
    __m256i values = _mm256_shuffle_epi8(table, x86_unpack_nibbles(qs));
    __m256i quants = _mm256_loadu_si256((const __m256i *)q8);
    return _mm256_maddubs_epi16(_mm256_sign_epi8(values, values),
                                _mm256_sign_epi8(quants, values));
}

float quant_dot_iq4_nl_avx2(size_t n, const void *w, const void *a)
{
    const block_iq4_nl *x = w;
    const block_q8_0 *y = a;
    const __m256i table = codebook(), ones = _mm256_set1_epi16(1);
    size_t n_blocks = n / QUANT_QK32, i = 0;
    float acc = 0.0f;
    for (; i + 4 <= n_blocks; i += 4) {
        __m256i s[4];
        for (int k = 0; k < 4; k++)
            s[k] = _mm256_madd_epi16(pair_sums(x[i + k].qs, y[i + k].qs, table), ones);
        __m256i quads =
            _mm256_hadd_epi32(_mm256_hadd_epi32(s[0], s[1]), _mm256_hadd_epi32(s[2], s[3]));
        int32_t isum[4];
        _mm_storeu_si128((__m128i *)isum, _mm_add_epi32(_mm256_castsi256_si128(quads),
                                                        _mm256_extracti128_si256(quads, 1)));
        for (int k = 0; k < 4; k++)
            acc = x86_fused_add(x86_half(y[i + k].d) * x86_half(x[i + k].d), isum[k], acc);
    }
    for (; i < n_blocks; i++)
        acc = x86_fused_add(
            x86_half(y[i].d) * x86_half(x[i].d),
            x86_hsum_epi32(_mm256_madd_epi16(pair_sums(x[i].qs, y[i].qs, table), ones)), acc);
    return acc;
}

/* A super-block's eight sub-block pair sums each times its s - 32 (|s - 32| <= 32) in the
 * i16 x i16 madd, added in i32: the whole sum is at most 256 * 127 * 127 * 32 < 2^31 in
 * magnitude, so it is exact. */
float quant_dot_iq4_xs_avx2(size_t n, const void *w, const void *a)
{
    const block_iq4_xs *x = w;
    const block_q8_k *y = a;
    const __m256i table = codebook();
    float acc = 0.0f;
    for (size_t i = 0; i < n / QK_K; i++) {
        __m256i isum = _mm256_setzero_si256();
        for (int k = 0; k < QK_K / 32; k++) {
            __m256i scale = _mm256_set1_epi16((int16_t)(quant_iq4_xs_sub_scale(&x[i], k) - 32));
            __m256i pairs = pair_sums(x[i].qs + 16 * k, y[i].qs + 32 * k, table);
            isum = _mm256_add_epi32(isum, _mm256_madd_epi16(pairs, scale));
        }
        acc = x86_fused_add(x86_half(x[i].d) * q8k_d(&y[i]), x86_hsum_epi32(isum), acc);
    }
    return acc;
}

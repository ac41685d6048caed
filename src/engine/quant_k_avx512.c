/*
 * AVX-512 (F/BW/VL) dot products of the weight types Q4_K_M models are made of, Q4_K and
 * Q6_K, against Q8_K activations. Each 512-bit step covers 64 contiguous activation bytes,
 * with the weight quants rebuilt in the same element order. Integer sums equal the scalar
 * ones; the float order differs as in the AVX2 kernels. The other K types use AVX2 code at
 * this level (see quant_k.c).
 */
#include <immintrin.h>

#include "quant_k_blocks.h"

static inline float f16_field(const uint8_t *p)
{
    return _cvtsh_ss(kq_read_u16(p));
}

static inline __m256i load256(const void *p)
{
    return _mm256_loadu_si256((const __m256i *)p);
}

static inline __m512i join256(__m256i lo, __m256i hi)
{
    return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

/* vpermw indices putting i16 scale `first` over words 0..15 and `first + 1` over 16..31. */
static inline __m512i scale_index_pairs(int first)
{
    return join256(_mm256_set1_epi16((short)first), _mm256_set1_epi16((short)(first + 1)));
}

/* vpermw indices putting i16 scale `first + w / 8` over word w (four 16-element groups). */
static inline __m512i scale_index_quads(int first)
{
    __m128i a = _mm_set1_epi16((short)first), b = _mm_set1_epi16((short)(first + 1));
    __m128i c = _mm_set1_epi16((short)(first + 2)), d = _mm_set1_epi16((short)(first + 3));
    return join256(_mm256_set_m128i(b, a), _mm256_set_m128i(d, c));
}

float quant_k_dot_q4_k_avx512(size_t n, const void *w, const void *a)
{
    const block_q4_k *x = w;
    const block_q8_k *y = a;
    const __m256i mask4 = _mm256_set1_epi8(15);
    __m512i index[4];
    for (int c = 0; c < 4; c++)
        index[c] = scale_index_pairs(2 * c);
    __m512 acc = _mm512_setzero_ps();
    __m256 acc_min = _mm256_setzero_ps();
    for (size_t i = 0; i < n / QK_K; i++, x++, y++) {
        float dy = q8k_d(y);
        uint32_t words[4];
        kq_scales_k4_words(x->scales, words);
        __m128i sc_m = _mm_setr_epi32((int)words[0], (int)words[1], (int)words[2], (int)words[3]);
        __m128i sc_m16_lo = _mm_cvtepu8_epi16(sc_m);
        __m128i mins = _mm_cvtepu8_epi16(_mm_unpackhi_epi64(sc_m, sc_m));
        __m256i mins_per_group =
            _mm256_set_m128i(_mm_unpackhi_epi16(mins, mins), _mm_unpacklo_epi16(mins, mins));
        __m256i summs = _mm256_madd_epi16(load256(y->bsums), mins_per_group);
        acc_min = _mm256_fmadd_ps(_mm256_set1_ps(-dy * f16_field(x->dmin)),
                                  _mm256_cvtepi32_ps(summs), acc_min);

        __m512i scales = _mm512_castsi128_si512(sc_m16_lo); /* vpermw reads words 0..7 only */
        __m512i sumi = _mm512_setzero_si512();
        for (int c = 0; c < 4; c++) {
            /* 64 elements: sub-block 2c in the low nibbles, 2c + 1 in the high ones */
            __m256i bytes = load256(x->qs + 32 * c);
            __m512i q = join256(_mm256_and_si256(bytes, mask4),
                                _mm256_and_si256(_mm256_srli_epi16(bytes, 4), mask4));
            __m512i p = _mm512_maddubs_epi16(q, _mm512_loadu_si512(y->qs + 64 * c));
            p = _mm512_madd_epi16(p, _mm512_permutexvar_epi16(index[c], scales));
            sumi = _mm512_add_epi32(sumi, p);
        }
        acc = _mm512_fmadd_ps(_mm512_set1_ps(dy * f16_field(x->d)), _mm512_cvtepi32_ps(sumi),
                              acc);
    }
    __m128 m = _mm_add_ps(_mm256_castps256_ps128(acc_min), _mm256_extractf128_ps(acc_min, 1));
    m = _mm_add_ps(m, _mm_movehl_ps(m, m));
    m = _mm_add_ss(m, _mm_movehdup_ps(m));
    return _mm512_reduce_add_ps(acc) + _mm_cvtss_f32(m);
}

float quant_k_dot_q6_k_avx512(size_t n, const void *w, const void *a)
{
    const block_q6_k *x = w;
    const block_q8_k *y = a;
    const __m512i mask4 = _mm512_set1_epi8(15), mask2 = _mm512_set1_epi8(3);
    __m512i index[4];
    for (int quad = 0; quad < 4; quad++)
        index[quad] = scale_index_quads(4 * quad);
    __m512 acc = _mm512_setzero_ps();
    for (size_t i = 0; i < n / QK_K; i++, x++, y++) {
        __m256i scales16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)x->scales));
        /* q = stored (0..63) - 32, so subtract 32 * sum_g scale_g * bsums[g] */
        __m256i bias = _mm256_madd_epi16(load256(y->bsums), scales16);
        __m512i scales = _mm512_castsi256_si512(scales16); /* vpermw reads words 0..15 only */

        __m512i sumi = _mm512_setzero_si512();
        for (int h = 0; h < 2; h++) {
            /* ql = [ql0 | ql1] and qh = [qh | qh >> 2] give elements k = 0,1 in the low bits
             * and k = 2,3 after shifting by 4: 64 contiguous elements each */
            __m512i ql = _mm512_loadu_si512(x->ql + 64 * h);
            __m256i qh256 = load256(x->qh + 32 * h);
            __m512i qh = join256(qh256, _mm256_srli_epi16(qh256, 2));
            __m512i q01 = _mm512_or_si512(_mm512_and_si512(ql, mask4),
                                          _mm512_slli_epi16(_mm512_and_si512(qh, mask2), 4));
            __m512i q23 = _mm512_or_si512(
                _mm512_and_si512(_mm512_srli_epi16(ql, 4), mask4),
                _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(qh, 4), mask2), 4));
            __m512i p01 = _mm512_maddubs_epi16(q01, _mm512_loadu_si512(y->qs + 128 * h));
            __m512i p23 = _mm512_maddubs_epi16(q23, _mm512_loadu_si512(y->qs + 128 * h + 64));
            p01 = _mm512_madd_epi16(p01, _mm512_permutexvar_epi16(index[2 * h], scales));
            p23 = _mm512_madd_epi16(p23, _mm512_permutexvar_epi16(index[2 * h + 1], scales));
            sumi = _mm512_add_epi32(sumi, _mm512_add_epi32(p01, p23));
        }
        sumi = _mm512_sub_epi32(sumi, _mm512_zextsi256_si512(_mm256_slli_epi32(bias, 5)));
        acc = _mm512_fmadd_ps(_mm512_set1_ps(q8k_d(y) * f16_field(x->d)),
                              _mm512_cvtepi32_ps(sumi), acc);
    }
    return _mm512_reduce_add_ps(acc);
}

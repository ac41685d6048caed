/*
 * What the AVX2 and AVX-512 kernels of the lattice IQ types (quant_iq_lattice_avx2.c,
 * quant_iq_lattice_avx512.c) share: the steps that put a super-block's sign bytes and grid
 * indices together before its sub-blocks are decoded, and the f32 steps after its integer
 * sum. Every function here needs AVX2, which both files are compiled with.
 */
#ifndef CORRAL_ENGINE_QUANT_IQ_LATTICE_X86_H
#define CORRAL_ENGINE_QUANT_IQ_LATTICE_X86_H

#include "quant_iq_lattice.h"
#include "quant_k_blocks.h"
#include "quant_x86.h"

/*
 * Sign bytes from bytes that each hold a 7-bit sign code in bits 0-6 (bit 7 clear): bit 7
 * becomes the parity of the seven, as quant_iq_sign_bytes has it. The shifts reach across
 * bytes, but each step folds a byte's own bits into its low bits, and only bit 0 is kept.
 */
static inline __m256i iq_sign_bytes_from_codes(__m256i codes)
{
    __m256i t = _mm256_xor_si256(codes, _mm256_srli_epi16(codes, 4));
    t = _mm256_xor_si256(t, _mm256_srli_epi16(t, 2));
    t = _mm256_xor_si256(t, _mm256_srli_epi16(t, 1));
    __m256i parity = _mm256_and_si256(t, _mm256_set1_epi8(1));
    return _mm256_or_si256(codes, _mm256_slli_epi16(parity, 7));
}

/* The sign bytes of the 8 sub-blocks whose words of four 7-bit codes (bits 0-27) are the i32
 * lanes of `words`: lane k becomes sub-block k's four sign bytes, group 0's lowest. */
static inline __m256i iq_sign_bytes_from_words(__m256i words)
{
    /* code l moves up by l bits, to byte l */
    const __m256i code = _mm256_set1_epi32(0x7f);
    __m256i c0 = _mm256_and_si256(words, code);
    __m256i c1 = _mm256_and_si256(_mm256_slli_epi32(words, 1), _mm256_slli_epi32(code, 8));
    __m256i c2 = _mm256_and_si256(_mm256_slli_epi32(words, 2), _mm256_slli_epi32(code, 16));
    __m256i c3 = _mm256_and_si256(_mm256_slli_epi32(words, 3), _mm256_slli_epi32(code, 24));
    __m256i codes = _mm256_or_si256(_mm256_or_si256(c0, c1), _mm256_or_si256(c2, c3));
    return iq_sign_bytes_from_codes(codes);
}

/* IQ2_XXS: bytes 4-7 of sub-block k's 8 are its word of four sign codes and its scale (bits
 * 28-31); the words of the 8 sub-blocks as i32 lanes, sub-block 0's lowest. */
static inline __m256i iq2_xxs_words(const block_iq2_xxs *b)
{
    __m256 lo = _mm256_castsi256_ps(_mm256_loadu_si256((const __m256i *)b->qs));
    __m256 hi = _mm256_castsi256_ps(_mm256_loadu_si256((const __m256i *)(b->qs + 32)));
    /* the odd i32 of each 128-bit lane: words 0, 1, 4, 5 | 2, 3, 6, 7, then put in order */
    __m256i words = _mm256_castps_si256(_mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(3, 1, 3, 1)));
    return _mm256_permute4x64_epi64(words, _MM_SHUFFLE(3, 1, 2, 0));
}

/* IQ3_XXS: the eight words of sign codes and scales follow the 64 grid indices. */
static inline __m256i iq3_xxs_words(const block_iq3_xxs *b)
{
    return _mm256_loadu_si256((const __m256i *)(b->qs + 64));
}

/* IQ2_XS: the sign bytes of the 32 groups, group g's byte g (each u16 of qs holds its
 * group's sign code in bits 9-15). */
static inline __m256i iq2_xs_sign_bytes(const block_iq2_xs *b)
{
    __m256i lo = _mm256_srli_epi16(_mm256_loadu_si256((const __m256i *)b->qs), 9);
    __m256i hi = _mm256_srli_epi16(_mm256_loadu_si256((const __m256i *)(b->qs + 32)), 9);
    __m256i codes = _mm256_permute4x64_epi64(_mm256_packus_epi16(lo, hi), _MM_SHUFFLE(3, 1, 2, 0));
    return iq_sign_bytes_from_codes(codes);
}

/* IQ2_S's 32 grid indices: qs[g] with bits 2(g % 4), 2(g % 4) + 1 of qh[g / 4] as bits 8-9,
 * made 16 at a time (the multiply by 2^(8 - 2(g % 4)) moves each pair there). */
static inline void iq2_s_indices(const block_iq2_s *b, uint16_t idx[32])
{
    const __m128i spread = _mm_setr_epi8(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
    const __m256i shift = _mm256_setr_epi16(256, 64, 16, 4, 256, 64, 16, 4, 256, 64, 16, 4, 256,
                                            64, 16, 4);
    for (int q = 0; q < 2; q++) {
        __m128i qh = _mm_shuffle_epi8(_mm_cvtsi32_si128((int)iq_u32(b->qh + 4 * q)), spread);
        __m256i high = _mm256_and_si256(_mm256_mullo_epi16(_mm256_cvtepu8_epi16(qh), shift),
                                        _mm256_set1_epi16(0x300));
        __m256i low = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(b->qs + 16 * q)));
        _mm256_storeu_si256((__m256i *)(idx + 16 * q), _mm256_or_si256(low, high));
    }
}

/* IQ3_S's 64 grid indices: qs[i] with bit i % 8 of qh[i / 8] as bit 8, made 16 at a time
 * from 16 bytes of qs and 2 of qh. */
static inline void iq3_s_indices(const block_iq3_s *b, uint16_t idx[64])
{
    const __m128i spread = _mm_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
    const __m128i bits = _mm_set1_epi64x((long long)0x8040201008040201ULL);
    for (int q = 0; q < 4; q++) {
        __m128i qh = _mm_shuffle_epi8(_mm_set1_epi16((int16_t)iq_u16(b->qh + 2 * q)), spread);
        __m128i set = _mm_cmpeq_epi8(_mm_and_si128(qh, bits), bits);
        __m256i ninth = _mm256_and_si256(_mm256_cvtepi8_epi16(set), _mm256_set1_epi16(0x100));
        __m256i low = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(b->qs + 16 * q)));
        _mm256_storeu_si256((__m256i *)(idx + 16 * q), _mm256_or_si256(low, ninth));
    }
}

/*
 * IQ1_S and IQ1_M: 8 times an element is e = 8 * grid value + 1 or - 1 (at most 9 in
 * magnitude). The kernels multiply e + 9 (0 to 18, unsigned as maddubs wants it, so no signs
 * to apply) and start each super-block's sum from minus 9 times each 16-element quarter's
 * scale times its quant sum (Q8_K's bsums), which leaves the same integer as e would.
 */

/* IQ1_S's 2s + 1 per quarter (both halves of sub-block k take bits 12-14 of qh[k]). */
static inline __m256i iq1_s_half_scales(const block_iq1_s *b)
{
    __m128i s = _mm_and_si128(_mm_srli_epi16(_mm_loadu_si128((const __m128i *)b->qh), 12),
                              _mm_set1_epi16(7));
    __m256i odd = _mm256_cvtepu16_epi32(_mm_add_epi16(_mm_add_epi16(s, s), _mm_set1_epi16(1)));
    return _mm256_or_si256(odd, _mm256_slli_epi32(odd, 16));
}

/* 16 u16 lanes, lane f bits 3(f % 4) .. + 2 of the u16 word f / 4 of `words`: each word
 * goes to four lanes, and a multiply moves lane f's field to bits 13-15. */
static inline __m256i iq_three_bit_fields(const uint8_t words[8])
{
    const __m256i spread = _mm256_setr_epi8(0, 1, 0, 1, 0, 1, 0, 1, 2, 3, 2, 3, 2, 3, 2, 3, 4, 5,
                                            4, 5, 4, 5, 4, 5, 6, 7, 6, 7, 6, 7, 6, 7);
    const __m256i up = _mm256_setr_epi16(8192, 1024, 128, 16, 8192, 1024, 128, 16, 8192, 1024,
                                         128, 16, 8192, 1024, 128, 16);
    __m256i all = _mm256_set1_epi64x((long long)iq_u64(words));
    return _mm256_srli_epi16(_mm256_mullo_epi16(_mm256_shuffle_epi8(all, spread), up), 13);
}

/* IQ1_M's 2s + 1 per quarter: quarter f is bits 3(f % 4) .. + 2 of scales word f / 4. */
static inline __m256i iq1_m_half_scales(const block_iq1_m *b)
{
    __m256i s = iq_three_bit_fields(b->scales);
    return _mm256_add_epi16(_mm256_add_epi16(s, s), _mm256_set1_epi16(1));
}

/* IQ1_M's 32 grid indices: qs[g] with bits 0-2 (g even) or 4-6 (g odd) of qh[g / 2] as bits
 * 8-10; the multiply moves the field to bits 13-15 as above. */
static inline void iq1_m_indices(const block_iq1_m *b, uint16_t idx[32])
{
    const __m256i spread = _mm256_setr_epi8(0, -1, 0, -1, 1, -1, 1, -1, 2, -1, 2, -1, 3, -1, 3,
                                            -1, 4, -1, 4, -1, 5, -1, 5, -1, 6, -1, 6, -1, 7, -1,
                                            7, -1);
    const __m256i up = _mm256_set1_epi32(0x02002000); /* 2^13 for even g, 2^9 for odd */
    for (int h = 0; h < 2; h++) {
        __m256i bytes = _mm256_set1_epi64x((long long)iq_u64(b->qh + 8 * h));
        __m256i field = _mm256_srli_epi16(
            _mm256_mullo_epi16(_mm256_shuffle_epi8(bytes, spread), up), 13);
        __m256i low = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(b->qs + 16 * h)));
        _mm256_storeu_si256((__m256i *)(idx + 16 * h),
                            _mm256_or_si256(low, _mm256_slli_epi16(field, 8)));
    }
}

/* What a super-block's IQ1 sum starts from: -9 times the quarters' scales times quant sums,
 * 8 i32 lanes (at most 9 * 15 * 2 * 16 * 127 in magnitude each). */
static inline __m256i iq1_sum_start(__m256i half_scales, const block_q8_k *y)
{
    __m256i minus_nine = _mm256_mullo_epi16(half_scales, _mm256_set1_epi16(-9));
    return _mm256_madd_epi16(minus_nine, _mm256_loadu_si256((const __m256i *)y->bsums));
}

/*
 * The f32 steps of a type after a super-block's integer sum, as the scalar code takes them:
 * IQ2 / IQ3 add d_w * d_a times the sum and multiply the row's sum by a fixed factor at the
 * end (1/8, 1/4, or none for IQ3_S); IQ1 adds d_w * d_a times the eighths' sum over 8 (the
 * kernels sum 8 times each IQ1 element; see quant_iq_lattice_avx2.c).
 */
enum iq_steps { STEPS_EIGHTH, STEPS_QUARTER, STEPS_PLAIN, STEPS_EIGHTHS_SUM };

static inline float iq_x86_add_super_block(float sumf, float d, int32_t sum, enum iq_steps steps)
{
    return steps == STEPS_EIGHTHS_SUM ? sumf + d * ((float)sum * 0.125f)
                                      : iq_add_super_block(sumf, d, sum);
}

static inline float iq_x86_finish_row(float sumf, enum iq_steps steps)
{
    return steps == STEPS_EIGHTH ? 0.125f * sumf : steps == STEPS_QUARTER ? 0.25f * sumf : sumf;
}

static inline float iq_f16_at_start(const uint8_t *block)
{
    return x86_half(iq_u16(block));
}

static inline float iq1_m_d(const uint8_t *block)
{
    return x86_half(iq1_m_scale_bits((const block_iq1_m *)block));
}

#endif

/*
 * AVX2 dot products of the lattice IQ types with Q8_K (quant_iq_lattice.h). A sub-block of
 * 32 elements is one vector: its grid entries are gathered 8 (or 4) bytes each, its signs
 * become +1 / -1 bytes that multiply the activation quants (sign_epi8), and maddubs / madd
 * multiply and add them with the sub-block's scale in i16 / i32. Where a grid index has bits
 * in two places (IQ2_S, IQ3_S) a super-block's indices are put together with vectors first.
 * Those sums are exact, and the f32 steps after a super-block give the scalar code's values,
 * so every result has the scalar dot's bits.
 */
#include "quant_iq_grids.h"
#include "quant_iq_lattice.h"
#include "quant_k_blocks.h"
#include "quant_x86.h"

/* +1 or -1 per element from four sign bytes (byte l for elements 8l .. 8l + 7). */
static inline __m256i byte_multipliers(const uint8_t signs[4])
{
    return _mm256_or_si256(x86_high_bit_mask(signs), _mm256_set1_epi8(1));
}

/* The +1 / -1 multipliers of four groups from their 7-bit sign codes (group l's first). */
static inline __m256i code_multipliers(unsigned c0, unsigned c1, unsigned c2, unsigned c3)
{
    return _mm256_set_epi64x(
        (long long)quant_iq_sign_multipliers[c3], (long long)quant_iq_sign_multipliers[c2],
        (long long)quant_iq_sign_multipliers[c1], (long long)quant_iq_sign_multipliers[c0]);
}

/* The same for an IQ2_XXS / IQ3_XXS sub-block's word of four codes. */
static inline __m256i word_multipliers(uint32_t aux)
{
    return code_multipliers(aux & 127, aux >> 7 & 127, aux >> 14 & 127, aux >> 21 & 127);
}

/* Grid values (unsigned, at most 62) times quants signed by the multipliers, pairs summed in
 * i16 (at most 2 * 62 * 127, no saturation), then times the i16 scales and summed in eight
 * i32 lanes. */
static inline __m256i signed_sub_block(__m256i grid, __m256i multipliers, const int8_t *q8,
                                       __m256i scales)
{
    __m256i q = _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)q8), multipliers);
    return _mm256_madd_epi16(_mm256_maddubs_epi16(grid, q), scales);
}

/* One scale for the whole sub-block, or one per 16-element half (low lane first). */
static inline __m256i scale_words(int first_half, int second_half)
{
    return _mm256_set_m128i(_mm_set1_epi16((int16_t)second_half),
                            _mm_set1_epi16((int16_t)first_half));
}

static inline __m256i grid64(const uint64_t *grid, unsigned i0, unsigned i1, unsigned i2,
                             unsigned i3)
{
    return _mm256_set_epi64x((long long)grid[i3], (long long)grid[i2], (long long)grid[i1],
                             (long long)grid[i0]);
}

static inline __m256i grid32(const uint32_t *grid, const uint8_t idx[8])
{
    return _mm256_setr_epi32((int)grid[idx[0]], (int)grid[idx[1]], (int)grid[idx[2]],
                             (int)grid[idx[3]], (int)grid[idx[4]], (int)grid[idx[5]],
                             (int)grid[idx[6]], (int)grid[idx[7]]);
}

float quant_dot_iq2_xxs_avx2(size_t n, const void *w, const void *a)
{
    const block_iq2_xxs *x = w;
    const block_q8_k *y = a;
    float sumf = 0.0f;
    for (size_t i = 0; i < n / QK_K; i++) {
        __m256i acc = _mm256_setzero_si256();
        for (int k = 0; k < QK_K / 32; k++) {
            const uint8_t *sub = x[i].qs + 8 * k;
            uint32_t aux = iq_u32(sub + 4);
            int ls = (int)(2 * (aux >> 28) + 1);
            __m256i grid = grid64(quant_iq2xxs_grid, sub[0], sub[1], sub[2], sub[3]);
            acc = _mm256_add_epi32(acc, signed_sub_block(grid, word_multipliers(aux),
                                                         y[i].qs + 32 * k,
                                                         _mm256_set1_epi16((int16_t)ls)));
        }
        sumf = iq_add_super_block(sumf, x86_half(iq_u16(x[i].d)) * q8k_d(&y[i]),
                                  x86_hsum_epi32(acc));
    }
    return 0.125f * sumf;
}

float quant_dot_iq2_xs_avx2(size_t n, const void *w, const void *a)
{
    const block_iq2_xs *x = w;
    const block_q8_k *y = a;
    float sumf = 0.0f;
    for (size_t i = 0; i < n / QK_K; i++) {
        __m256i acc = _mm256_setzero_si256();
        for (int k = 0; k < QK_K / 32; k++) {
            uint16_t q[4];
            for (int l = 0; l < 4; l++)
                q[l] = iq_u16(x[i].qs + 2 * (4 * k + l));
            __m256i signs = code_multipliers(q[0] >> 9, q[1] >> 9, q[2] >> 9, q[3] >> 9);
            __m256i grid = grid64(quant_iq2xs_grid, q[0] & 511u, q[1] & 511u, q[2] & 511u,
                                  q[3] & 511u);
            __m256i scales = scale_words(2 * (x[i].scales[k] & 0xf) + 1,
                                         2 * (x[i].scales[k] >> 4) + 1);
            acc = _mm256_add_epi32(acc, signed_sub_block(grid, signs, y[i].qs + 32 * k, scales));
        }
        sumf = iq_add_super_block(sumf, x86_half(iq_u16(x[i].d)) * q8k_d(&y[i]),
                                  x86_hsum_epi32(acc));
    }
    return 0.125f * sumf;
}

/* A super-block's 32 IQ2_S grid indices: qs[g] with bits 2(g % 4), 2(g % 4) + 1 of qh[g / 4]
 * as bits 8-9, made 16 at a time (the multiply by 2^(8 - 2(g % 4)) moves each pair there). */
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

float quant_dot_iq2_s_avx2(size_t n, const void *w, const void *a)
{
    const block_iq2_s *x = w;
    const block_q8_k *y = a;
    float sumf = 0.0f;
    for (size_t i = 0; i < n / QK_K; i++) {
        __m256i acc = _mm256_setzero_si256();
        uint16_t idx[32];
        iq2_s_indices(&x[i], idx);
        for (int k = 0; k < QK_K / 32; k++) {
            const uint16_t *ik = idx + 4 * k;
            __m256i grid = grid64(quant_iq2s_grid, ik[0], ik[1], ik[2], ik[3]);
            __m256i scales = scale_words(2 * (x[i].scales[k] & 0xf) + 1,
                                         2 * (x[i].scales[k] >> 4) + 1);
            __m256i signs = byte_multipliers(x[i].qs + 32 + 4 * k);
            acc = _mm256_add_epi32(acc, signed_sub_block(grid, signs, y[i].qs + 32 * k, scales));
        }
        sumf = iq_add_super_block(sumf, x86_half(iq_u16(x[i].d)) * q8k_d(&y[i]),
                                  x86_hsum_epi32(acc));
    }
    return 0.125f * sumf;
}

float quant_dot_iq3_xxs_avx2(size_t n, const void *w, const void *a)
{
    const block_iq3_xxs *x = w;
    const block_q8_k *y = a;
    float sumf = 0.0f;
    for (size_t i = 0; i < n / QK_K; i++) {
        __m256i acc = _mm256_setzero_si256();
        for (int k = 0; k < QK_K / 32; k++) {
            const uint8_t *q3 = x[i].qs + 8 * k;
            uint32_t aux = iq_u32(x[i].qs + 64 + 4 * k);
            int ls = (int)(2 * (aux >> 28) + 1);
            __m256i grid = grid32(quant_iq3xxs_grid, q3);
            acc = _mm256_add_epi32(acc, signed_sub_block(grid, word_multipliers(aux),
                                                         y[i].qs + 32 * k,
                                                         _mm256_set1_epi16((int16_t)ls)));
        }
        sumf = iq_add_super_block(sumf, x86_half(iq_u16(x[i].d)) * q8k_d(&y[i]),
                                  x86_hsum_epi32(acc));
    }
    return 0.25f * sumf;
}

/* A super-block's 64 IQ3_S grid indices: qs[i] with bit i % 8 of qh[i / 8] as bit 8, made
 * 16 at a time from 16 bytes of qs and 2 of qh. */
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

float quant_dot_iq3_s_avx2(size_t n, const void *w, const void *a)
{
    const block_iq3_s *x = w;
    const block_q8_k *y = a;
    float sumf = 0.0f;
    for (size_t i = 0; i < n / QK_K; i++) {
        __m256i acc = _mm256_setzero_si256();
        uint16_t idx[64];
        iq3_s_indices(&x[i], idx);
        for (int k = 0; k < QK_K / 32; k++) {
            const uint16_t *ik = idx + 8 * k;
            const uint32_t *g = quant_iq3s_grid;
            __m256i grid = _mm256_setr_epi32((int)g[ik[0]], (int)g[ik[1]], (int)g[ik[2]],
                                             (int)g[ik[3]], (int)g[ik[4]], (int)g[ik[5]],
                                             (int)g[ik[6]], (int)g[ik[7]]);
            int ls = 2 * (x[i].scales[k / 2] >> (4 * (k % 2)) & 0xf) + 1;
            acc = _mm256_add_epi32(acc, signed_sub_block(grid, byte_multipliers(x[i].signs + 4 * k),
                                                         y[i].qs + 32 * k,
                                                         _mm256_set1_epi16((int16_t)ls)));
        }
        sumf = iq_add_super_block(sumf, x86_half(iq_u16(x[i].d)) * q8k_d(&y[i]),
                                  x86_hsum_epi32(acc));
    }
    return sumf;
}

/*
 * IQ1_S and IQ1_M: an element is (2s + 1) * (value + shift) with value in {-1, 0, 1} and shift
 * +-1/8, so 8 times it is (2s + 1) times the small integer 8 * value +- 1 (at most 9 in
 * magnitude). Summed with the quants that is S = 8 * sum_grid + sum_shift in one i32 pass
 * (pairs in i16 at most 2 * 9 * 127, S below 9 * 15 * 127 * 256 < 2^24). The scalar code
 * rounds sum_grid + sum_shift / 8 to f32 once, and that exact value is S / 8, which f32
 * holds exactly; so S * 1/8 is the same float.
 */
static inline __m256i shifted_sub_block(__m256i grid, __m256i shifts, const int8_t *q8,
                                        __m256i scales)
{
    __m256i eighths = _mm256_add_epi8(_mm256_sign_epi8(_mm256_set1_epi8(8), grid), shifts);
    __m256i quants = _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)q8), eighths);
    return _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_abs_epi8(eighths), quants), scales);
}

static inline float iq1_add_eighths(float sumf, float d, int32_t eighths)
{
    return sumf + d * ((float)eighths * 0.125f);
}

float quant_dot_iq1_s_avx2(size_t n, const void *w, const void *a)
{
    const block_iq1_s *x = w;
    const block_q8_k *y = a;
    float sumf = 0.0f;
    for (size_t i = 0; i < n / QK_K; i++) {
        __m256i acc = _mm256_setzero_si256();
        for (int k = 0; k < QK_K / 32; k++) {
            const uint8_t *qs = x[i].qs + 4 * k;
            unsigned qh = iq_u16(x[i].qh + 2 * k);
            __m256i grid = grid64(quant_iq1s_grid, qs[0] | (qh << 8 & 0x700),
                                  qs[1] | (qh << 5 & 0x700), qs[2] | (qh << 2 & 0x700),
                                  qs[3] | (qh >> 1 & 0x700));
            __m256i shifts = _mm256_set1_epi8(qh & 0x8000 ? -1 : 1);
            __m256i scales = _mm256_set1_epi16((int16_t)(2 * (qh >> 12 & 7) + 1));
            acc = _mm256_add_epi32(acc, shifted_sub_block(grid, shifts, y[i].qs + 32 * k, scales));
        }
        sumf = iq1_add_eighths(sumf, x86_half(iq_u16(x[i].d)) * q8k_d(&y[i]),
                               x86_hsum_epi32(acc));
    }
    return sumf;
}

/* -1 for the elements of the groups whose shift is down (bit 3 of qh[0] for group 0, bit 7
 * for group 1, then the same of qh[1]), +1 for the others. */
static inline __m256i iq1_m_shifts(const uint8_t qh[2])
{
    const __m256i spread = _mm256_setr_epi64x(0, 0, 0x0101010101010101, 0x0101010101010101);
    const __m256i bits = _mm256_setr_epi64x(0x0808080808080808, (long long)0x8080808080808080ULL,
                                            0x0808080808080808, (long long)0x8080808080808080ULL);
    __m256i bytes = _mm256_shuffle_epi8(_mm256_set1_epi16((int16_t)iq_u16(qh)), spread);
    __m256i down = _mm256_cmpeq_epi8(_mm256_and_si256(bytes, bits), bits);
    return _mm256_or_si256(down, _mm256_set1_epi8(1));
}

float quant_dot_iq1_m_avx2(size_t n, const void *w, const void *a)
{
    const block_iq1_m *x = w;
    const block_q8_k *y = a;
    float sumf = 0.0f;
    for (size_t i = 0; i < n / QK_K; i++) {
        __m256i acc = _mm256_setzero_si256();
        for (int k = 0; k < QK_K / 32; k++) {
            const uint8_t *qs = x[i].qs + 4 * k, *qh = x[i].qh + 2 * k;
            __m256i grid = grid64(quant_iq1s_grid, qs[0] | (qh[0] << 8 & 0x700u),
                                  qs[1] | (qh[0] << 4 & 0x700u), qs[2] | (qh[1] << 8 & 0x700u),
                                  qs[3] | (qh[1] << 4 & 0x700u));
            unsigned word = iq_u16(x[i].scales + 2 * (k / 2)) >> (6 * (k % 2));
            __m256i scales =
                scale_words((int)(2 * (word & 7) + 1), (int)(2 * (word >> 3 & 7) + 1));
            acc = _mm256_add_epi32(
                acc, shifted_sub_block(grid, iq1_m_shifts(qh), y[i].qs + 32 * k, scales));
        }
        sumf = iq1_add_eighths(sumf, x86_half(iq1_m_scale_bits(&x[i])) * q8k_d(&y[i]),
                               x86_hsum_epi32(acc));
    }
    return sumf;
}

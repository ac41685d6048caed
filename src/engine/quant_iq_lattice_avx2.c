/*
 * AVX2 dot products of the lattice IQ types with Q8_K (quant_iq_lattice.h). A sub-block of
 * 32 elements is one vector: its grid entries are gathered 8 (or 4) bytes each, its signs
 * become a byte mask that flips the activation quants, and maddubs / madd multiply and add
 * them with the sub-block's scale in i16 / i32. Those sums are exact, and the f32 steps after
 * a super-block are the scalar code's, so every result has the scalar dot's bits.
 */
#include "quant_iq_grids.h"
#include "quant_iq_lattice.h"
#include "quant_k_blocks.h"
#include "quant_x86.h"

/* +1 or -1 per element from four sign bytes (byte l for elements 8l .. 8l + 7). */
static inline __m256i sign_multipliers(uint32_t signs)
{
    return _mm256_or_si256(x86_high_bit_mask((const uint8_t *)&signs), _mm256_set1_epi8(1));
}

/* The four sign bytes of an IQ2_XXS / IQ3_XXS sub-block from its four 7-bit codes. */
static inline uint32_t sign_code_bytes(uint32_t aux)
{
    return (uint32_t)quant_iq_sign_bytes[aux & 127] |
           (uint32_t)quant_iq_sign_bytes[aux >> 7 & 127] << 8 |
           (uint32_t)quant_iq_sign_bytes[aux >> 14 & 127] << 16 |
           (uint32_t)quant_iq_sign_bytes[aux >> 21 & 127] << 24;
}

/* Grid values (unsigned, at most 62) times signed quants, pairs summed in i16 (at most
 * 2 * 62 * 127, no saturation), then times the i16 scales and summed in eight i32 lanes. */
static inline __m256i signed_sub_block(__m256i grid, uint32_t signs, const int8_t *q8,
                                       __m256i scales)
{
    __m256i q = _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)q8), sign_multipliers(signs));
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

static inline __m256i grid32(const uint32_t *grid, const unsigned idx[8])
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
            acc = _mm256_add_epi32(acc, signed_sub_block(grid, sign_code_bytes(aux),
                                                         y[i].qs + 32 * k, scale_words(ls, ls)));
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
            uint32_t signs = 0;
            for (int l = 0; l < 4; l++) {
                q[l] = iq_u16(x[i].qs + 2 * (4 * k + l));
                signs |= (uint32_t)quant_iq_sign_bytes[q[l] >> 9] << (8 * l);
            }
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

float quant_dot_iq2_s_avx2(size_t n, const void *w, const void *a)
{
    const block_iq2_s *x = w;
    const block_q8_k *y = a;
    float sumf = 0.0f;
    for (size_t i = 0; i < n / QK_K; i++) {
        __m256i acc = _mm256_setzero_si256();
        for (int k = 0; k < QK_K / 32; k++) {
            const uint8_t *qs = x[i].qs + 4 * k;
            unsigned qh = x[i].qh[k];
            __m256i grid = grid64(quant_iq2s_grid, qs[0] | (qh << 8 & 0x300),
                                  qs[1] | (qh << 6 & 0x300), qs[2] | (qh << 4 & 0x300),
                                  qs[3] | (qh << 2 & 0x300));
            __m256i scales = scale_words(2 * (x[i].scales[k] & 0xf) + 1,
                                         2 * (x[i].scales[k] >> 4) + 1);
            acc = _mm256_add_epi32(acc, signed_sub_block(grid, iq_u32(x[i].qs + 32 + 4 * k),
                                                         y[i].qs + 32 * k, scales));
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
            unsigned idx[8];
            for (int j = 0; j < 8; j++)
                idx[j] = q3[j];
            acc = _mm256_add_epi32(acc, signed_sub_block(grid32(quant_iq3xxs_grid, idx),
                                                         sign_code_bytes(aux), y[i].qs + 32 * k,
                                                         scale_words(ls, ls)));
        }
        sumf = iq_add_super_block(sumf, x86_half(iq_u16(x[i].d)) * q8k_d(&y[i]),
                                  x86_hsum_epi32(acc));
    }
    return 0.25f * sumf;
}

float quant_dot_iq3_s_avx2(size_t n, const void *w, const void *a)
{
    const block_iq3_s *x = w;
    const block_q8_k *y = a;
    float sumf = 0.0f;
    for (size_t i = 0; i < n / QK_K; i++) {
        __m256i acc = _mm256_setzero_si256();
        for (int k = 0; k < QK_K / 32; k++) {
            const uint8_t *qs = x[i].qs + 8 * k;
            unsigned qh = x[i].qh[k], idx[8];
            for (int j = 0; j < 8; j++)
                idx[j] = qs[j] | (qh >> j & 1) << 8;
            int ls = 2 * (x[i].scales[k / 2] >> (4 * (k % 2)) & 0xf) + 1;
            acc = _mm256_add_epi32(acc, signed_sub_block(grid32(quant_iq3s_grid, idx),
                                                         iq_u32(x[i].signs + 4 * k),
                                                         y[i].qs + 32 * k, scale_words(ls, ls)));
        }
        sumf = iq_add_super_block(sumf, x86_half(iq_u16(x[i].d)) * q8k_d(&y[i]),
                                  x86_hsum_epi32(acc));
    }
    return sumf;
}

/* Quants times grid values of -1, 0 or +1 are the quants with their sign flipped or zeroed
 * (sign_epi8); pairs summed in i16 against ones, then times the i16 scales in i32. */
static inline __m256i shifted_sub_block(__m256i grid, const int8_t *q8, __m256i scales)
{
    __m256i products = _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)q8), grid);
    return _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), products), scales);
}

float quant_dot_iq1_s_avx2(size_t n, const void *w, const void *a)
{
    const block_iq1_s *x = w;
    const block_q8_k *y = a;
    float sumf = 0.0f;
    for (size_t i = 0; i < n / QK_K; i++) {
        __m256i acc = _mm256_setzero_si256();
        int32_t sum_shift = 0;
        for (int k = 0; k < QK_K / 32; k++) {
            const uint8_t *qs = x[i].qs + 4 * k;
            unsigned qh = iq_u16(x[i].qh + 2 * k);
            int ls = (int)(2 * (qh >> 12 & 7) + 1);
            __m256i grid = grid64(quant_iq1s_grid, qs[0] | (qh << 8 & 0x700),
                                  qs[1] | (qh << 5 & 0x700), qs[2] | (qh << 2 & 0x700),
                                  qs[3] | (qh >> 1 & 0x700));
            acc = _mm256_add_epi32(acc, shifted_sub_block(grid, y[i].qs + 32 * k,
                                                          scale_words(ls, ls)));
            sum_shift += ls * (qh & 0x8000 ? -1 : 1) *
                         (q8k_bsum(&y[i], 2 * k) + q8k_bsum(&y[i], 2 * k + 1));
        }
        sumf = iq1_add_super_block(sumf, x86_half(iq_u16(x[i].d)) * q8k_d(&y[i]),
                                   x86_hsum_epi32(acc), sum_shift);
    }
    return sumf;
}

float quant_dot_iq1_m_avx2(size_t n, const void *w, const void *a)
{
    const block_iq1_m *x = w;
    const block_q8_k *y = a;
    float sumf = 0.0f;
    for (size_t i = 0; i < n / QK_K; i++) {
        __m256i grid_acc = _mm256_setzero_si256(), shift_acc = _mm256_setzero_si256();
        for (int k = 0; k < QK_K / 32; k++) {
            const uint8_t *qs = x[i].qs + 4 * k, *qh = x[i].qh + 2 * k;
            __m256i grid = grid64(quant_iq1s_grid, qs[0] | (qh[0] << 8 & 0x700u),
                                  qs[1] | (qh[0] << 4 & 0x700u), qs[2] | (qh[1] << 8 & 0x700u),
                                  qs[3] | (qh[1] << 4 & 0x700u));
            unsigned word = iq_u16(x[i].scales + 2 * (k / 2)) >> (6 * (k % 2));
            __m256i scales = scale_words((int)(2 * (word & 7) + 1), (int)(2 * (word >> 3 & 7) + 1));
            /* the shift signs as sign bytes: all of group g's bits where it shifts down */
            uint32_t down = 0;
            for (int l = 0; l < 4; l++)
                if (qh[l / 2] >> (4 * (l % 2) + 3) & 1)
                    down |= 0xffu << (8 * l);
            __m256i q8 = _mm256_loadu_si256((const __m256i *)(y[i].qs + 32 * k));
            __m256i shifted = _mm256_sign_epi8(q8, sign_multipliers(down));
            grid_acc = _mm256_add_epi32(grid_acc, shifted_sub_block(grid, y[i].qs + 32 * k, scales));
            shift_acc = _mm256_add_epi32(
                shift_acc,
                _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), shifted), scales));
        }
        sumf = iq1_add_super_block(sumf, x86_half(iq1_m_scale_bits(&x[i])) * q8k_d(&y[i]),
                                   x86_hsum_epi32(grid_acc), x86_hsum_epi32(shift_acc));
    }
    return sumf;
}

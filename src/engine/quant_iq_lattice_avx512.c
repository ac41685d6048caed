/*
 * AVX-512 dot products and matrix tiles of the lattice IQ types with Q8_K
 * (quant_iq_lattice.h). A 512-bit vector holds two sub-blocks (64 weights): one gather brings
 * their grid entries (8 of 8 bytes, or 16 of 4 bytes for IQ3), their signs are a 64-bit mask
 * that negates the activation quants they meet, and maddubs / madd multiply and add in i16 /
 * i32 with the scales of their four 16-weight quarters. What a super-block's sub-blocks share
 * is put together once first (quant_iq_lattice_x86.h): sign bytes from 7-bit codes, grid
 * indices whose bits lie in two places, and the 16 half-sub-block scales, from which each
 * pair's scales are one permute. The integer sums are exact and the f32 steps after a
 * super-block are the scalar code's, so every result has the scalar dot's bits, in a dot or
 * in a tile.
 */
#include "quant_iq_grids.h"
#include "quant_iq_lattice_x86.h"
#include "quant_k_blocks.h"

/* Two decoded sub-blocks: the magnitudes of their 64 weights (unsigned bytes, at most 62),
 * which of them are negative, and the i16 scales of their four quarters. IQ1_S and IQ1_M
 * decode to eighths plus 9, never negative (see pair_iq1). */
typedef struct iq_pair {
    __m512i magnitudes, scales;
    __mmask64 negative;
} iq_pair;

/* What a super-block's pairs read besides the block. */
typedef struct iq_super_block {
    const uint8_t *block;
    __m256i half_scales; /* 16 i16: 2s + 1 of sub-block k's halves at 2k and 2k + 1 */
    uint64_t signs[4];   /* pair p's sign bits, bit j for weight j of the two sub-blocks */
    uint32_t down;       /* IQ1: bit g set when group g's shift is -1/8 */
    uint16_t idx[64];    /* grid indices, where they need more than a byte */
} iq_super_block;

/* The 32 i16 scales of pair p's four quarters (half h of sub-block 2p + j is quarter 2j + h). */
static inline __m512i pair_scales(const iq_super_block *sb, int p)
{
    const __m512i quarter = _mm512_set_epi64(0x0003000300030003, 0x0003000300030003,
                                             0x0002000200020002, 0x0002000200020002,
                                             0x0001000100010001, 0x0001000100010001, 0, 0);
    __m512i at = _mm512_add_epi16(quarter, _mm512_set1_epi16((int16_t)(4 * p)));
    return _mm512_permutexvar_epi16(at, _mm512_castsi256_si512(sb->half_scales));
}

static inline iq_pair make_pair(const iq_super_block *sb, int p, __m512i grid, __mmask64 negative)
{
    return (iq_pair){grid, pair_scales(sb, p), negative};
}

/* i16 pairs of 2s + 1 from 8 scales s, each scale in both i16 of its i32 lane. */
static inline __m256i doubled_scales(__m256i s)
{
    __m256i odd = _mm256_add_epi32(_mm256_add_epi32(s, s), _mm256_set1_epi32(1));
    return _mm256_or_si256(odd, _mm256_slli_epi32(odd, 16));
}

/* 2s + 1 for the 16 4-bit scales of IQ2_XS / IQ2_S, low nibble (first half) first. */
static inline __m256i nibble_scales(const uint8_t scales[8])
{
    __m128i b = _mm_loadl_epi64((const __m128i *)scales);
    __m128i nibbles = _mm_unpacklo_epi8(_mm_and_si128(b, _mm_set1_epi8(0xf)),
                                        _mm_and_si128(_mm_srli_epi16(b, 4), _mm_set1_epi8(0xf)));
    __m256i s = _mm256_cvtepu8_epi16(nibbles);
    return _mm256_add_epi16(_mm256_add_epi16(s, s), _mm256_set1_epi16(1));
}

static inline __m512i gather64(const uint64_t *grid, __m128i eight_u16)
{
    return _mm512_i64gather_epi64(_mm512_cvtepu16_epi64(eight_u16), (const void *)grid, 8);
}

static inline __m512i gather32(const uint32_t *grid, __m256i sixteen_u16)
{
    return _mm512_i32gather_epi32(_mm512_cvtepu16_epi32(sixteen_u16), (const void *)grid, 4);
}

/* ---- IQ2_XXS and IQ3_XXS: words of four sign codes and a scale ---- */

static inline void words_signs_scales(iq_super_block *sb, __m256i words)
{
    _mm256_storeu_si256((__m256i *)sb->signs, iq_sign_bytes_from_words(words));
    sb->half_scales = doubled_scales(_mm256_srli_epi32(words, 28));
}

static inline void prepare_iq2_xxs(iq_super_block *sb)
{
    words_signs_scales(sb, iq2_xxs_words((const block_iq2_xxs *)sb->block));
}

static inline iq_pair pair_iq2_xxs(const iq_super_block *sb, int p)
{
    const block_iq2_xxs *b = (const block_iq2_xxs *)sb->block;
    /* grid indices are bytes 0-3 of each sub-block's 8 */
    const __m128i take = _mm_setr_epi8(0, -1, 1, -1, 2, -1, 3, -1, 8, -1, 9, -1, 10, -1, 11, -1);
    __m128i at = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(b->qs + 16 * p)), take);
    return make_pair(sb, p, gather64(quant_iq2xxs_grid, at), sb->signs[p]);
}

static inline void prepare_iq3_xxs(iq_super_block *sb)
{
    words_signs_scales(sb, iq3_xxs_words((const block_iq3_xxs *)sb->block));
}

static inline iq_pair pair_iq3_xxs(const iq_super_block *sb, int p)
{
    const block_iq3_xxs *b = (const block_iq3_xxs *)sb->block;
    __m256i at = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(b->qs + 16 * p)));
    return make_pair(sb, p, gather32(quant_iq3xxs_grid, at), sb->signs[p]);
}

/* ---- IQ2_XS and IQ2_S: two scales a sub-block ---- */

static inline void prepare_iq2_xs(iq_super_block *sb)
{
    const block_iq2_xs *b = (const block_iq2_xs *)sb->block;
    _mm256_storeu_si256((__m256i *)sb->signs, iq2_xs_sign_bytes(b));
    sb->half_scales = nibble_scales(b->scales);
}

static inline iq_pair pair_iq2_xs(const iq_super_block *sb, int p)
{
    const block_iq2_xs *b = (const block_iq2_xs *)sb->block;
    __m128i at = _mm_and_si128(_mm_loadu_si128((const __m128i *)(b->qs + 16 * p)),
                               _mm_set1_epi16(511));
    return make_pair(sb, p, gather64(quant_iq2xs_grid, at), sb->signs[p]);
}

static inline void prepare_iq2_s(iq_super_block *sb)
{
    const block_iq2_s *b = (const block_iq2_s *)sb->block;
    iq2_s_indices(b, sb->idx);
    sb->half_scales = nibble_scales(b->scales);
}

static inline iq_pair pair_iq2_s(const iq_super_block *sb, int p)
{
    const block_iq2_s *b = (const block_iq2_s *)sb->block;
    __m128i at = _mm_loadu_si128((const __m128i *)(sb->idx + 8 * p));
    /* each group's sign byte is qs[32 + g] */
    return make_pair(sb, p, gather64(quant_iq2s_grid, at), iq_u64(b->qs + 32 + 8 * p));
}

/* ---- IQ3_S ---- */

static inline void prepare_iq3_s(iq_super_block *sb)
{
    const block_iq3_s *b = (const block_iq3_s *)sb->block;
    iq3_s_indices(b, sb->idx);
    /* sub-block k's scale is nibble k % 2 of scales[k / 2]; both halves take it */
    __m128i s = _mm_cvtsi32_si128((int)iq_u32(b->scales));
    __m128i nibbles = _mm_unpacklo_epi8(_mm_and_si128(s, _mm_set1_epi8(0xf)),
                                        _mm_and_si128(_mm_srli_epi16(s, 4), _mm_set1_epi8(0xf)));
    sb->half_scales = doubled_scales(_mm256_cvtepu8_epi32(nibbles));
}

static inline iq_pair pair_iq3_s(const iq_super_block *sb, int p)
{
    const block_iq3_s *b = (const block_iq3_s *)sb->block;
    __m256i at = _mm256_loadu_si256((const __m256i *)(sb->idx + 16 * p));
    return make_pair(sb, p, gather32(quant_iq3s_grid, at), iq_u64(b->signs + 8 * p));
}

/* ---- IQ1_S and IQ1_M: grid values -1, 0, +1, each group shifted up or down by 1/8 ---- */

/* 11-bit grid indices: qs[g] with bits 8-10 from `high` (one u16 a group, the bits at 0-2). */
static inline void iq1_indices(iq_super_block *sb, const uint8_t qs[32], __m512i high)
{
    __m512i ninth = _mm512_slli_epi16(_mm512_and_si512(high, _mm512_set1_epi16(7)), 8);
    __m512i low = _mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *)qs));
    _mm512_storeu_si512(sb->idx, _mm512_or_si512(low, ninth));
}

/* IQ1 (see quant_iq_lattice_x86.h): e + 9 for 8 times each element e, with no signs. */
static inline iq_pair pair_iq1(const iq_super_block *sb, int p)
{
    /* grid value -1, 0, +1 (low nibble 15, 0, 1) to 8 * value + 9 */
    const __m512i plus_nine = _mm512_broadcast_i32x4(
        _mm_setr_epi8(9, 17, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1));
    __m512i grid = gather64(quant_iq1s_grid, _mm_loadu_si128((const __m128i *)(sb->idx + 8 * p)));
    __m512i scaled = _mm512_shuffle_epi8(plus_nine, _mm512_and_si512(grid, _mm512_set1_epi8(15)));
    __m512i down = _mm512_movm_epi64((__mmask8)(sb->down >> (8 * p)));
    __m512i shifted = _mm512_add_epi8(scaled, _mm512_or_si512(down, _mm512_set1_epi8(1)));
    return make_pair(sb, p, shifted, 0);
}

static inline __m512i iq1_start(const iq_super_block *sb, const block_q8_k *y)
{
    return _mm512_zextsi256_si512(iq1_sum_start(sb->half_scales, y));
}

static inline __m512i start_at_zero(const iq_super_block *sb, const block_q8_k *y)
{
    (void)sb;
    (void)y;
    return _mm512_setzero_si512();
}

/* u16 lane g holds g >> shift: group g reads word g / 4 (shift 2) or byte g / 2 (shift 1). */
static inline __m512i lanes_over(int shift)
{
    return _mm512_srli_epi16(
        _mm512_set_epi16(31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19, 18, 17, 16, 15, 14,
                         13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
        (unsigned)shift);
}

static inline void prepare_iq1_s(iq_super_block *sb)
{
    const block_iq1_s *b = (const block_iq1_s *)sb->block;
    __m128i qh = _mm_loadu_si128((const __m128i *)b->qh);
    /* group 4k + l takes bits 3l .. 3l + 2 of qh[k], and bit 15 says its shift */
    __m512i per_group = _mm512_permutexvar_epi16(lanes_over(2), _mm512_castsi128_si512(qh));
    const __m512i by = _mm512_set1_epi64(0x0009000600030000);
    iq1_indices(sb, b->qs, _mm512_srlv_epi16(per_group, by));
    sb->down = (uint32_t)_mm512_movepi16_mask(per_group);
    sb->half_scales = iq1_s_half_scales(b);
}

static inline void prepare_iq1_m(iq_super_block *sb)
{
    const block_iq1_m *b = (const block_iq1_m *)sb->block;
    /* group g takes the low nibble of qh[g / 2] when g is even, the high one when odd:
     * bits 0-2 of the grid index's top, bit 3 its shift */
    __m256i bytes = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)b->qh));
    __m512i qh = _mm512_castsi256_si512(bytes);
    __m512i nibble = _mm512_srlv_epi16(_mm512_permutexvar_epi16(lanes_over(1), qh),
                                       _mm512_set1_epi32(0x00040000));
    iq1_indices(sb, b->qs, nibble);
    sb->down = (uint32_t)_mm512_test_epi16_mask(nibble, _mm512_set1_epi16(8));
    sb->half_scales = iq1_m_half_scales(b);
}

/* ---- the dot and the tile ---- */

/* acc plus a pair times 64 Q8_K quants, in i32 lanes: maddubs pairs at most 2 * 62 * 127 (no
 * saturation), then the scales in an i32 madd and add, or one vpdpwssd with VNNI. */
static inline __m512i pair_add(__m512i acc, iq_pair pr, const int8_t *q8, bool signed_weights,
                               bool vnni)
{
    __m512i q = _mm512_loadu_si512(q8);
    if (signed_weights)
        q = _mm512_mask_sub_epi8(q, pr.negative, _mm512_setzero_si512(), q);
    __m512i products = _mm512_maddubs_epi16(pr.magnitudes, q);
    return vnni ? _mm512_dpwssd_epi32(acc, products, pr.scales)
                : _mm512_add_epi32(acc, _mm512_madd_epi16(products, pr.scales));
}

typedef void (*prepare_fn)(iq_super_block *sb);
typedef iq_pair (*pair_fn)(const iq_super_block *sb, int p);
typedef float (*scale_fn)(const uint8_t *block);
typedef __m512i (*start_fn)(const iq_super_block *sb, const block_q8_k *y);

/* How a type's sum is taken beyond its pairs: what the accumulator starts from, whether the
 * pairs carry signs, the f32 steps, and whether a tile may use VNNI (a lone row's dot does
 * not: vpdpwssd's latency on the accumulator's chain costs it more than the madd it saves). */
typedef struct iq_sum_steps {
    start_fn start;
    bool signed_weights;
    enum iq_steps steps;
    bool vnni;
} iq_sum_steps;

enum { PAIRS = QK_K / 64 };

static inline __attribute__((always_inline)) float
lattice_dot(size_t n, const void *w, const void *a, size_t block_bytes, prepare_fn prepare,
            pair_fn pair, scale_fn scale, iq_sum_steps sum)
{
    const block_q8_k *y = a;
    float sumf = 0.0f;
    iq_super_block sb;
    for (size_t i = 0; i < n / QK_K; i++) {
        sb.block = (const uint8_t *)w + i * block_bytes;
        prepare(&sb);
        __m512i acc = sum.start(&sb, &y[i]);
        for (int p = 0; p < PAIRS; p++)
            acc = pair_add(acc, pair(&sb, p), y[i].qs + 64 * p, sum.signed_weights, false);
        sumf = iq_x86_add_super_block(sumf, scale(sb.block) * q8k_d(&y[i]),
                                      _mm512_reduce_add_epi32(acc), sum.steps);
    }
    return iq_x86_finish_row(sumf, sum.steps);
}

/* Activation rows a tile takes at once: each decoded super-block serves that many. */
enum { TILE_TOKENS = 8 };

/* quant_matmul_fn: every weight row against tiles of activation rows, each super-block
 * decoded once per tile; each result the bits of lattice_dot. A lone activation row takes
 * lattice_dot itself, which keeps each decoded pair in registers. */
static inline __attribute__((always_inline)) void
lattice_matmul(size_t n, const void *w, size_t w_row_bytes, size_t n_rows, const void *act,
               size_t act_row_bytes, size_t n_tokens, float *y, size_t ldy, size_t block_bytes,
               prepare_fn prepare, pair_fn pair, scale_fn scale, iq_sum_steps sum)
{
    iq_super_block sb;
    iq_pair dec[PAIRS];
    for (size_t r = 0; r < n_rows; r++) {
        const uint8_t *row = (const uint8_t *)w + r * w_row_bytes;
        for (size_t t0 = 0; t0 < n_tokens; t0 += TILE_TOKENS) {
            size_t tile = n_tokens - t0 < TILE_TOKENS ? n_tokens - t0 : TILE_TOKENS;
            if (tile == 1) {
                y[t0 * ldy + r] = lattice_dot(n, row, (const char *)act + t0 * act_row_bytes,
                                              block_bytes, prepare, pair, scale, sum);
                continue;
            }
            const block_q8_k *blocks[TILE_TOKENS];
            float sumf[TILE_TOKENS];
            for (size_t t = 0; t < tile; t++) {
                blocks[t] = (const block_q8_k *)((const char *)act + (t0 + t) * act_row_bytes);
                sumf[t] = 0.0f;
            }
            for (size_t i = 0; i < n / QK_K; i++) {
                sb.block = row + i * block_bytes;
                prepare(&sb);
                for (int p = 0; p < PAIRS; p++)
                    dec[p] = pair(&sb, p);
                float d = scale(sb.block);
                for (size_t t = 0; t < tile; t++) {
                    __m512i acc = sum.start(&sb, &blocks[t][i]);
                    const int8_t *q8 = blocks[t][i].qs;
                    for (int p = 0; p < PAIRS; p++)
                        acc = pair_add(acc, dec[p], q8 + 64 * p, sum.signed_weights, sum.vnni);
                    sumf[t] = iq_x86_add_super_block(sumf[t], d * q8k_d(&blocks[t][i]),
                                                     _mm512_reduce_add_epi32(acc), sum.steps);
                }
            }
            for (size_t t = 0; t < tile; t++)
                y[(t0 + t) * ldy + r] = iq_x86_finish_row(sumf[t], sum.steps);
        }
    }
}

#define LATTICE_MATMUL(name, suffix, vnni, block_type, pair, scale, start, signs, steps) \
    void quant_matmul_##name##_##suffix(size_t n, const void *w, size_t w_row_bytes, \
                                        size_t n_rows, const void *act, size_t act_row_bytes, \
                                        size_t n_tokens, float *y, size_t ldy) \
    { \
        lattice_matmul(n, w, w_row_bytes, n_rows, act, act_row_bytes, n_tokens, y, ldy, \
                       sizeof(block_type), prepare_##name, pair, scale, \
                       (iq_sum_steps){start, signs, steps, vnni}); \
    }
#define LATTICE_KERNELS(name, block_type, pair, scale, start, signs, steps) \
    float quant_dot_##name##_avx512(size_t n, const void *w, const void *a) \
    { \
        return lattice_dot(n, w, a, sizeof(block_type), prepare_##name, pair, scale, \
                           (iq_sum_steps){start, signs, steps, false}); \
    } \
    LATTICE_MATMUL(name, avx512, false, block_type, pair, scale, start, signs, steps) \
    LATTICE_MATMUL(name, avx512_vnni, true, block_type, pair, scale, start, signs, steps)

LATTICE_KERNELS(iq2_xxs, block_iq2_xxs, pair_iq2_xxs, iq_f16_at_start, start_at_zero, true,
                STEPS_EIGHTH)
LATTICE_KERNELS(iq2_xs, block_iq2_xs, pair_iq2_xs, iq_f16_at_start, start_at_zero, true,
                STEPS_EIGHTH)
LATTICE_KERNELS(iq2_s, block_iq2_s, pair_iq2_s, iq_f16_at_start, start_at_zero, true,
                STEPS_EIGHTH)
LATTICE_KERNELS(iq3_xxs, block_iq3_xxs, pair_iq3_xxs, iq_f16_at_start, start_at_zero, true,
                STEPS_QUARTER)
LATTICE_KERNELS(iq3_s, block_iq3_s, pair_iq3_s, iq_f16_at_start, start_at_zero, true,
                STEPS_PLAIN)
LATTICE_KERNELS(iq1_s, block_iq1_s, pair_iq1, iq_f16_at_start, iq1_start, false,
                STEPS_EIGHTHS_SUM)
LATTICE_KERNELS(iq1_m, block_iq1_m, pair_iq1, iq1_m_d, iq1_start, false, STEPS_EIGHTHS_SUM)

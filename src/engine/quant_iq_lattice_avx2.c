/*
 * AVX2 dot products and matrix tiles of the lattice IQ types with Q8_K (quant_iq_lattice.h).
 * A super-block is decoded once into 8 vectors of 32 weights: each sub-block's grid entries
 * are gathered 8 (or 4) bytes each and its signs become +1 / -1 bytes; then, for each
 * activation row that meets it, the quants take the weights' signs (sign_epi8) and maddubs /
 * madd multiply and add them with the sub-block's scales in i16 / i32. Where a grid index has
 * bits in two places (IQ2_S, IQ3_S) a super-block's indices are put together with vectors
 * first. Those sums are exact, and the f32 steps after a super-block give the scalar code's
 * values, so every result has the scalar dot's bits, in a dot or in a tile.
 */
#include "quant_iq_grids.h"
#include "quant_iq_lattice_x86.h"
#include "quant_k_blocks.h"

/* +1 or -1 per element from four sign bytes (byte l for elements 8l .. 8l + 7). */
static inline __m256i byte_multipliers(const uint8_t signs[4])
{
    return _mm256_or_si256(x86_high_bit_mask(signs), _mm256_set1_epi8(1));
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

/* Eight 4-byte grid entries, one gather from eight byte indices. */
static inline __m256i grid32(const uint32_t *grid, const uint8_t idx[8])
{
    __m256i at = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)idx));
    return _mm256_i32gather_epi32((const int *)grid, at, 4);
}

/*
 * One decoded sub-block: its 32 weights' magnitudes (unsigned bytes, at most 62) and signs
 * (+1 / -1 bytes), and the i16 scales of its two halves. IQ1_S and IQ1_M decode to eighths
 * plus 9, with no signs (see iq1_plus_nine).
 */
typedef struct iq_sub_block {
    __m256i magnitudes, signs, scales;
} iq_sub_block;

/* A super-block being decoded: the block, and what some types put together for the whole
 * super-block first: IQ2_S's, IQ3_S's and IQ1_M's grid indices, the sign bytes of the types
 * that store 7-bit sign codes (IQ2_XXS, IQ2_XS, IQ3_XXS), IQ1's quarter scales. */
typedef struct iq_super_block {
    const uint8_t *block;
    int16_t half_scales[16]; /* IQ1: 2s + 1 of each 16-element quarter */
    uint16_t idx[64]; /* IQ2_S, IQ3_S, IQ1_M: grid indices */
    uint8_t signs[32]; /* sub-block k's four sign bytes at 4k */
} iq_super_block;

/* The i32 lanes of a decoded sub-block times 32 Q8_K quants: maddubs pairs at most
 * 2 * 62 * 127 (no saturation), then the scales in the i32 madd. */
static inline __m256i sub_block_dot(iq_sub_block sb, const int8_t *q8, bool signed_weights)
{
    __m256i q = _mm256_loadu_si256((const __m256i *)q8);
    if (signed_weights)
        q = _mm256_sign_epi8(q, sb.signs);
    return _mm256_madd_epi16(_mm256_maddubs_epi16(sb.magnitudes, q), sb.scales);
}

/* What a super-block's i32 lanes start from: nothing, or IQ1's offset (iq1_sum_start). */
static inline __m256i start_at_zero(const iq_super_block *sb, const block_q8_k *y)
{
    (void)sb;
    (void)y;
    return _mm256_setzero_si256();
}

static inline __m256i start_iq1(const iq_super_block *sb, const block_q8_k *y)
{
    return iq1_sum_start(_mm256_loadu_si256((const __m256i *)sb->half_scales), y);
}

/* IQ2_XXS: the +1 / -1 multipliers of a sub-block's four groups from its word of four 7-bit
 * sign codes, looked up per group; the word is read for the scale anyway, and putting a
 * super-block's sign bytes together first (as for IQ2_XS and IQ3_XXS) measured slower here. */
static inline __m256i word_multipliers(uint32_t aux)
{
    const uint64_t *m = quant_iq_sign_multipliers;
    return _mm256_set_epi64x((long long)m[aux >> 21 & 127], (long long)m[aux >> 14 & 127],
                             (long long)m[aux >> 7 & 127], (long long)m[aux & 127]);
}

static inline void prepare_iq2_xxs(iq_super_block *sb)
{
    (void)sb;
}

static inline iq_sub_block sub_iq2_xxs(const iq_super_block *sb, int k)
{
    const block_iq2_xxs *b = (const block_iq2_xxs *)sb->block;
    const uint8_t *sub = b->qs + 8 * k;
    uint32_t aux = iq_u32(sub + 4);
    return (iq_sub_block){grid64(quant_iq2xxs_grid, sub[0], sub[1], sub[2], sub[3]),
                          word_multipliers(aux), _mm256_set1_epi16((int16_t)(2 * (aux >> 28) + 1))};
}

static inline void prepare_iq2_xs(iq_super_block *sb)
{
    _mm256_storeu_si256((__m256i *)sb->signs, iq2_xs_sign_bytes((const block_iq2_xs *)sb->block));
}

static inline iq_sub_block sub_iq2_xs(const iq_super_block *sb, int k)
{
    const block_iq2_xs *b = (const block_iq2_xs *)sb->block;
    uint16_t q[4];
    for (int l = 0; l < 4; l++)
        q[l] = iq_u16(b->qs + 2 * (4 * k + l));
    return (iq_sub_block){
        grid64(quant_iq2xs_grid, q[0] & 511u, q[1] & 511u, q[2] & 511u, q[3] & 511u),
        byte_multipliers(sb->signs + 4 * k),
        scale_words(2 * (b->scales[k] & 0xf) + 1, 2 * (b->scales[k] >> 4) + 1)};
}

static inline void prepare_iq2_s(iq_super_block *sb)
{
    iq2_s_indices((const block_iq2_s *)sb->block, sb->idx);
}

static inline iq_sub_block sub_iq2_s(const iq_super_block *sb, int k)
{
    const block_iq2_s *b = (const block_iq2_s *)sb->block;
    const uint16_t *ik = sb->idx + 4 * k;
    return (iq_sub_block){grid64(quant_iq2s_grid, ik[0], ik[1], ik[2], ik[3]),
                          byte_multipliers(b->qs + 32 + 4 * k),
                          scale_words(2 * (b->scales[k] & 0xf) + 1, 2 * (b->scales[k] >> 4) + 1)};
}

static inline void prepare_iq3_xxs(iq_super_block *sb)
{
    __m256i words = iq3_xxs_words((const block_iq3_xxs *)sb->block);
    _mm256_storeu_si256((__m256i *)sb->signs, iq_sign_bytes_from_words(words));
}

static inline iq_sub_block sub_iq3_xxs(const iq_super_block *sb, int k)
{
    const block_iq3_xxs *b = (const block_iq3_xxs *)sb->block;
    return (iq_sub_block){grid32(quant_iq3xxs_grid, b->qs + 8 * k),
                          byte_multipliers(sb->signs + 4 * k),
                          _mm256_set1_epi16((int16_t)(2 * (b->qs[64 + 4 * k + 3] >> 4) + 1))};
}

static inline void prepare_iq3_s(iq_super_block *sb)
{
    iq3_s_indices((const block_iq3_s *)sb->block, sb->idx);
}

static inline iq_sub_block sub_iq3_s(const iq_super_block *sb, int k)
{
    const block_iq3_s *b = (const block_iq3_s *)sb->block;
    __m256i at = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(sb->idx + 8 * k)));
    return (iq_sub_block){
        _mm256_i32gather_epi32((const int *)quant_iq3s_grid, at, 4),
        byte_multipliers(b->signs + 4 * k),
        _mm256_set1_epi16((int16_t)(2 * (b->scales[k / 2] >> (4 * (k % 2)) & 0xf) + 1))};
}

/*
 * IQ1_S and IQ1_M: an element is (2s + 1) * (value + shift) with value in {-1, 0, 1} and shift
 * +-1/8, so 8 times it is (2s + 1) times the small integer 8 * value +- 1. Summed with the
 * quants (as that plus 9, quant_iq_lattice_x86.h) that is S = 8 * sum_grid + sum_shift in one
 * i32 pass (S below 9 * 15 * 127 * 256 < 2^24). The scalar code rounds sum_grid + sum_shift / 8
 * to f32 once, and that exact value is S / 8, which f32 holds exactly; so S * 1/8 is the same
 * float.
 */
static inline iq_sub_block iq1_plus_nine(__m256i grid, __m256i shifts, __m256i scales)
{
    /* grid value -1, 0, +1 (low nibble 15, 0, 1) to 8 * value + 9 */
    const __m256i plus_nine = _mm256_setr_epi8(9, 17, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1,
                                               9, 17, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1);
    __m256i scaled = _mm256_shuffle_epi8(plus_nine, _mm256_and_si256(grid, _mm256_set1_epi8(15)));
    return (iq_sub_block){_mm256_add_epi8(scaled, shifts), _mm256_setzero_si256(), scales};
}

static inline void prepare_iq1_s(iq_super_block *sb)
{
    _mm256_storeu_si256((__m256i *)sb->half_scales,
                        iq1_s_half_scales((const block_iq1_s *)sb->block));
}

static inline void prepare_iq1_m(iq_super_block *sb)
{
    const block_iq1_m *b = (const block_iq1_m *)sb->block;
    iq1_m_indices(b, sb->idx);
    _mm256_storeu_si256((__m256i *)sb->half_scales, iq1_m_half_scales(b));
}

static inline iq_sub_block sub_iq1_s(const iq_super_block *sb, int k)
{
    const block_iq1_s *b = (const block_iq1_s *)sb->block;
    const uint8_t *qs = b->qs + 4 * k;
    unsigned qh = iq_u16(b->qh + 2 * k);
    __m256i grid = grid64(quant_iq1s_grid, qs[0] | (qh << 8 & 0x700), qs[1] | (qh << 5 & 0x700),
                          qs[2] | (qh << 2 & 0x700), qs[3] | (qh >> 1 & 0x700));
    return iq1_plus_nine(grid, _mm256_set1_epi8(qh & 0x8000 ? -1 : 1),
                         _mm256_set1_epi16((int16_t)(2 * (qh >> 12 & 7) + 1)));
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

static inline iq_sub_block sub_iq1_m(const iq_super_block *sb, int k)
{
    const block_iq1_m *b = (const block_iq1_m *)sb->block;
    const uint16_t *ik = sb->idx + 4 * k;
    unsigned word = iq_u16(b->scales + 2 * (k / 2)) >> (6 * (k % 2));
    return iq1_plus_nine(grid64(quant_iq1s_grid, ik[0], ik[1], ik[2], ik[3]),
                         iq1_m_shifts(b->qh + 2 * k),
                         scale_words((int)(2 * (word & 7) + 1), (int)(2 * (word >> 3 & 7) + 1)));
}

/* A type's parts: what its super-block needs first, each sub-block, its f16 scale. */
typedef void (*prepare_fn)(iq_super_block *sb);
typedef iq_sub_block (*sub_block_fn)(const iq_super_block *sb, int k);
typedef float (*scale_fn)(const uint8_t *block);
typedef __m256i (*start_fn)(const iq_super_block *sb, const block_q8_k *y);

/* How a type's sum is taken beyond its sub-blocks: what it starts from, whether the
 * sub-blocks carry signs, the f32 steps. */
typedef struct iq_sum_steps {
    start_fn start;
    bool signed_weights;
    enum iq_steps steps;
} iq_sum_steps;

static inline __attribute__((always_inline)) float
lattice_dot(size_t n, const void *w, const void *a, size_t block_bytes, prepare_fn prepare,
            sub_block_fn sub_block, scale_fn scale, iq_sum_steps sum)
{
    const block_q8_k *y = a;
    float sumf = 0.0f;
    iq_super_block sb;
    for (size_t i = 0; i < n / QK_K; i++) {
        sb.block = (const uint8_t *)w + i * block_bytes;
        prepare(&sb);
        __m256i acc = sum.start(&sb, &y[i]);
        for (int k = 0; k < QK_K / 32; k++)
            acc = _mm256_add_epi32(
                acc, sub_block_dot(sub_block(&sb, k), y[i].qs + 32 * k, sum.signed_weights));
        sumf = iq_x86_add_super_block(sumf, scale(sb.block) * q8k_d(&y[i]), x86_hsum_epi32(acc),
                                      sum.steps);
    }
    return iq_x86_finish_row(sumf, sum.steps);
}

/* Activation rows a tile takes at once: each decoded super-block serves that many. */
enum { TILE_TOKENS = 8 };

/* quant_matmul_fn: every weight row against tiles of activation rows, each super-block
 * decoded once per tile; each result the bits of lattice_dot. A lone activation row takes
 * lattice_dot itself, which keeps each decoded sub-block in registers. */
static inline __attribute__((always_inline)) void
lattice_matmul(size_t n, const void *w, size_t w_row_bytes, size_t n_rows, const void *act,
               size_t act_row_bytes, size_t n_tokens, float *y, size_t ldy, size_t block_bytes,
               prepare_fn prepare, sub_block_fn sub_block, scale_fn scale, iq_sum_steps sum)
{
    iq_super_block sb;
    iq_sub_block dec[QK_K / 32];
    for (size_t r = 0; r < n_rows; r++) {
        const uint8_t *row = (const uint8_t *)w + r * w_row_bytes;
        for (size_t t0 = 0; t0 < n_tokens; t0 += TILE_TOKENS) {
            size_t tile = n_tokens - t0 < TILE_TOKENS ? n_tokens - t0 : TILE_TOKENS;
            if (tile == 1) {
                y[t0 * ldy + r] = lattice_dot(n, row, (const char *)act + t0 * act_row_bytes,
                                              block_bytes, prepare, sub_block, scale, sum);
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
                for (int k = 0; k < QK_K / 32; k++)
                    dec[k] = sub_block(&sb, k);
                float d = scale(sb.block);
                for (size_t t = 0; t < tile; t++) {
                    __m256i acc = sum.start(&sb, &blocks[t][i]);
                    const int8_t *q8 = blocks[t][i].qs;
                    for (int k = 0; k < QK_K / 32; k++)
                        acc = _mm256_add_epi32(
                            acc, sub_block_dot(dec[k], q8 + 32 * k, sum.signed_weights));
                    sumf[t] = iq_x86_add_super_block(sumf[t], d * q8k_d(&blocks[t][i]),
                                                     x86_hsum_epi32(acc), sum.steps);
                }
            }
            for (size_t t = 0; t < tile; t++)
                y[(t0 + t) * ldy + r] = iq_x86_finish_row(sumf[t], sum.steps);
        }
    }
}

#define LATTICE_KERNELS(name, block_type, scale, start, signs, steps) \
    float quant_dot_##name##_avx2(size_t n, const void *w, const void *a) \
    { \
        return lattice_dot(n, w, a, sizeof(block_type), prepare_##name, sub_##name, scale, \
                           (iq_sum_steps){start, signs, steps}); \
    } \
    void quant_matmul_##name##_avx2(size_t n, const void *w, size_t w_row_bytes, size_t n_rows, \
                                    const void *act, size_t act_row_bytes, size_t n_tokens, \
                                    float *y, size_t ldy) \
    { \
        lattice_matmul(n, w, w_row_bytes, n_rows, act, act_row_bytes, n_tokens, y, ldy, \
                       sizeof(block_type), prepare_##name, sub_##name, scale, \
                       (iq_sum_steps){start, signs, steps}); \
    }

LATTICE_KERNELS(iq2_xxs, block_iq2_xxs, iq_f16_at_start, start_at_zero, true, STEPS_EIGHTH)
LATTICE_KERNELS(iq2_xs, block_iq2_xs, iq_f16_at_start, start_at_zero, true, STEPS_EIGHTH)
LATTICE_KERNELS(iq2_s, block_iq2_s, iq_f16_at_start, start_at_zero, true, STEPS_EIGHTH)
LATTICE_KERNELS(iq3_xxs, block_iq3_xxs, iq_f16_at_start, start_at_zero, true, STEPS_QUARTER)
LATTICE_KERNELS(iq3_s, block_iq3_s, iq_f16_at_start, start_at_zero, true, STEPS_PLAIN)
LATTICE_KERNELS(iq1_s, block_iq1_s, iq_f16_at_start, start_iq1, false, STEPS_EIGHTHS_SUM)
LATTICE_KERNELS(iq1_m, block_iq1_m, iq1_m_d, start_iq1, false, STEPS_EIGHTHS_SUM)

/*
 * Scalar arithmetic of the lattice IQ types (quant_iq_lattice.h) and their per-level ops:
 * dequantize as ggml does it, bit for bit, and the dot products with Q8_K activations, each
 * super-block's sum exact in integers and the f32 steps after it those of ggml's portable
 * code.
 */
#include "quant_iq_lattice.h"

#include "quant_iq_grids.h"
#include "quant_k_blocks.h"

/* Byte j of a grid entry. */
static inline int grid_byte(uint64_t entry, int j)
{
    return (int)(entry >> (8 * j) & 0xff);
}

/* 8 elements: scale times grid bytes, negated where the sign byte has the element's bit. The
 * product with +-1 (not a negation) keeps ggml's bits for a zero or NaN scale. */
static void dequantize_signed_group(uint64_t entry, uint8_t signs, float scale, float *out)
{
    for (int j = 0; j < 8; j++)
        out[j] = scale * (float)grid_byte(entry, j) * (signs >> j & 1 ? -1.0f : 1.0f);
}

/* Sum over 8 elements of grid bytes times signs times activation quants. */
static int32_t signed_group_dot(uint64_t entry, uint8_t signs, const int8_t *q8)
{
    int32_t sum = 0;
    for (int j = 0; j < 8; j++)
        sum += grid_byte(entry, j) * q8[j] * (signs >> j & 1 ? -1 : 1);
    return sum;
}

/* Two 4-element IQ3 grid entries as one group of 8. */
static inline uint64_t iq3_pair(const uint32_t *grid, unsigned first, unsigned second)
{
    return (uint64_t)grid[first] | (uint64_t)grid[second] << 32;
}

/* The sign byte of the 7-bit code at bit 7l of word. */
static inline uint8_t sign_code(uint32_t word, int l)
{
    return quant_iq_sign_bytes[word >> (7 * l) & 127];
}

static void dequantize_iq2_xxs(const void *blocks, float *out, size_t n)
{
    const block_iq2_xxs *b = blocks;
    for (size_t i = 0; i < n / QK_K; i++) {
        float d = quant_f16_to_f32(iq_u16(b[i].d));
        for (int k = 0; k < QK_K / 32; k++) {
            const uint8_t *sub = b[i].qs + 8 * k;
            uint32_t aux = iq_u32(sub + 4);
            float db = d * (0.5f + (float)(aux >> 28)) * 0.25f;
            for (int l = 0; l < 4; l++, out += 8)
                dequantize_signed_group(quant_iq2xxs_grid[sub[l]], sign_code(aux, l), db, out);
        }
    }
}

static void dequantize_iq2_xs(const void *blocks, float *out, size_t n)
{
    const block_iq2_xs *b = blocks;
    for (size_t i = 0; i < n / QK_K; i++) {
        float d = quant_f16_to_f32(iq_u16(b[i].d));
        for (int k = 0; k < QK_K / 32; k++) {
            float db[2] = {d * (0.5f + (float)(b[i].scales[k] & 0xf)) * 0.25f,
                           d * (0.5f + (float)(b[i].scales[k] >> 4)) * 0.25f};
            for (int l = 0; l < 4; l++, out += 8) {
                uint16_t q = iq_u16(b[i].qs + 2 * (4 * k + l));
                dequantize_signed_group(quant_iq2xs_grid[q & 511],
                                        quant_iq_sign_bytes[q >> 9], db[l / 2], out);
            }
        }
    }
}

static inline unsigned iq2_s_index(const block_iq2_s *b, int g)
{
    return b->qs[g] | (unsigned)(b->qh[g / 4] >> (2 * (g % 4)) & 3) << 8;
}

static void dequantize_iq2_s(const void *blocks, float *out, size_t n)
{
    const block_iq2_s *b = blocks;
    for (size_t i = 0; i < n / QK_K; i++) {
        float d = quant_f16_to_f32(iq_u16(b[i].d));
        for (int k = 0; k < QK_K / 32; k++) {
            float db[2] = {d * (0.5f + (float)(b[i].scales[k] & 0xf)) * 0.25f,
                           d * (0.5f + (float)(b[i].scales[k] >> 4)) * 0.25f};
            for (int l = 0; l < 4; l++, out += 8) {
                int g = 4 * k + l;
                dequantize_signed_group(quant_iq2s_grid[iq2_s_index(&b[i], g)],
                                        b[i].qs[32 + g], db[l / 2], out);
            }
        }
    }
}

static void dequantize_iq3_xxs(const void *blocks, float *out, size_t n)
{
    const block_iq3_xxs *b = blocks;
    for (size_t i = 0; i < n / QK_K; i++) {
        float d = quant_f16_to_f32(iq_u16(b[i].d));
        for (int k = 0; k < QK_K / 32; k++) {
            const uint8_t *q3 = b[i].qs + 8 * k;
            uint32_t aux = iq_u32(b[i].qs + 64 + 4 * k);
            float db = d * (0.5f + (float)(aux >> 28)) * 0.5f;
            for (int l = 0; l < 4; l++, out += 8)
                dequantize_signed_group(iq3_pair(quant_iq3xxs_grid, q3[2 * l], q3[2 * l + 1]),
                                        sign_code(aux, l), db, out);
        }
    }
}

static inline unsigned iq3_s_index(const block_iq3_s *b, int i)
{
    return b->qs[i] | (unsigned)(b->qh[i / 8] >> (i % 8) & 1) << 8;
}

static inline int iq3_s_scale(const block_iq3_s *b, int k)
{
    return 2 * (b->scales[k / 2] >> (4 * (k % 2)) & 0xf) + 1;
}

static void dequantize_iq3_s(const void *blocks, float *out, size_t n)
{
    const block_iq3_s *b = blocks;
    for (size_t i = 0; i < n / QK_K; i++) {
        float d = quant_f16_to_f32(iq_u16(b[i].d));
        for (int k = 0; k < QK_K / 32; k++) {
            float db = d * (float)iq3_s_scale(&b[i], k);
            for (int l = 0; l < 4; l++, out += 8) {
                int g = 4 * k + l;
                dequantize_signed_group(iq3_pair(quant_iq3s_grid, iq3_s_index(&b[i], 2 * g),
                                                 iq3_s_index(&b[i], 2 * g + 1)),
                                        b[i].signs[g], db, out);
            }
        }
    }
}

/* 8 elements: scale times (grid value + shift), the grid's bytes being int8. */
static void dequantize_shifted_group(uint64_t entry, float shift, float scale, float *out)
{
    for (int j = 0; j < 8; j++)
        out[j] = scale * ((float)(int8_t)grid_byte(entry, j) + shift);
}

static int32_t shifted_group_dot(uint64_t entry, const int8_t *q8)
{
    int32_t sum = 0;
    for (int j = 0; j < 8; j++)
        sum += q8[j] * (int8_t)grid_byte(entry, j);
    return sum;
}

static inline unsigned iq1_s_index(const block_iq1_s *b, int g)
{
    return b->qs[g] | (unsigned)(iq_u16(b->qh + 2 * (g / 4)) >> (3 * (g % 4)) & 7) << 8;
}

static void dequantize_iq1_s(const void *blocks, float *out, size_t n)
{
    const block_iq1_s *b = blocks;
    for (size_t i = 0; i < n / QK_K; i++) {
        float d = quant_f16_to_f32(iq_u16(b[i].d));
        for (int k = 0; k < QK_K / 32; k++) {
            uint16_t qh = iq_u16(b[i].qh + 2 * k);
            float dl = d * (float)(2 * (qh >> 12 & 7) + 1);
            float shift = qh & 0x8000 ? -0.125f : 0.125f;
            for (int l = 0; l < 4; l++, out += 8)
                dequantize_shifted_group(quant_iq1s_grid[iq1_s_index(&b[i], 4 * k + l)], shift,
                                         dl, out);
        }
    }
}

static inline unsigned iq1_m_index(const block_iq1_m *b, int g)
{
    return b->qs[g] | (unsigned)(b->qh[g / 2] >> (4 * (g % 2)) & 7) << 8;
}

static inline bool iq1_m_shift_down(const block_iq1_m *b, int g)
{
    return b->qh[g / 2] >> (4 * (g % 2) + 3) & 1;
}

/* The 3-bit scale of half h (0, 1) of sub-block k, as 2s + 1. */
static inline int iq1_m_scale(const block_iq1_m *b, int k, int h)
{
    return 2 * (iq_u16(b->scales + 2 * (k / 2)) >> (6 * (k % 2) + 3 * h) & 7) + 1;
}

static void dequantize_iq1_m(const void *blocks, float *out, size_t n)
{
    const block_iq1_m *b = blocks;
    for (size_t i = 0; i < n / QK_K; i++) {
        float d = quant_f16_to_f32(iq1_m_scale_bits(&b[i]));
        for (int k = 0; k < QK_K / 32; k++) {
            float dl[2] = {d * (float)iq1_m_scale(&b[i], k, 0),
                           d * (float)iq1_m_scale(&b[i], k, 1)};
            for (int l = 0; l < 4; l++, out += 8) {
                int g = 4 * k + l;
                dequantize_shifted_group(quant_iq1s_grid[iq1_m_index(&b[i], g)],
                                         iq1_m_shift_down(&b[i], g) ? -0.125f : 0.125f,
                                         dl[l / 2], out);
            }
        }
    }
}

/*
 * The dots. Per super-block an exact integer sum over the sub-blocks of (2s + 1) times the
 * sub-block's grid . quants sum; the super-block adds d_w * d_a times it to an f32 sum, and the
 * types whose scale has a fixed factor (1/8, 1/4) apply it to the row's sum at the end.
 */
static float dot_iq2_xxs(size_t n, const void *w, const void *a)
{
    const block_iq2_xxs *x = w;
    const block_q8_k *y = a;
    float sumf = 0.0f;
    for (size_t i = 0; i < n / QK_K; i++) {
        const int8_t *q8 = y[i].qs;
        int32_t bsum = 0;
        for (int k = 0; k < QK_K / 32; k++) {
            const uint8_t *sub = x[i].qs + 8 * k;
            uint32_t aux = iq_u32(sub + 4);
            int32_t sum = 0;
            for (int l = 0; l < 4; l++, q8 += 8)
                sum += signed_group_dot(quant_iq2xxs_grid[sub[l]], sign_code(aux, l), q8);
            bsum += sum * (int32_t)(2 * (aux >> 28) + 1);
        }
        sumf = iq_add_super_block(sumf, quant_f16_to_f32(iq_u16(x[i].d)) * q8k_d(&y[i]), bsum);
    }
    return 0.125f * sumf;
}

static float dot_iq2_xs(size_t n, const void *w, const void *a)
{
    const block_iq2_xs *x = w;
    const block_q8_k *y = a;
    float sumf = 0.0f;
    for (size_t i = 0; i < n / QK_K; i++) {
        const int8_t *q8 = y[i].qs;
        int32_t bsum = 0;
        for (int k = 0; k < QK_K / 32; k++)
            for (int h = 0; h < 2; h++) {
                int32_t sum = 0;
                for (int l = 2 * h; l < 2 * h + 2; l++, q8 += 8) {
                    uint16_t q = iq_u16(x[i].qs + 2 * (4 * k + l));
                    sum += signed_group_dot(quant_iq2xs_grid[q & 511],
                                            quant_iq_sign_bytes[q >> 9], q8);
                }
                bsum += sum * (2 * (x[i].scales[k] >> (4 * h) & 0xf) + 1);
            }
        sumf = iq_add_super_block(sumf, quant_f16_to_f32(iq_u16(x[i].d)) * q8k_d(&y[i]), bsum);
    }
    return 0.125f * sumf;
}

static float dot_iq2_s(size_t n, const void *w, const void *a)
{
    const block_iq2_s *x = w;
    const block_q8_k *y = a;
    float sumf = 0.0f;
    for (size_t i = 0; i < n / QK_K; i++) {
        const int8_t *q8 = y[i].qs;
        int32_t bsum = 0;
        for (int k = 0; k < QK_K / 32; k++)
            for (int h = 0; h < 2; h++) {
                int32_t sum = 0;
                for (int g = 4 * k + 2 * h; g < 4 * k + 2 * h + 2; g++, q8 += 8)
                    sum += signed_group_dot(quant_iq2s_grid[iq2_s_index(&x[i], g)],
                                            x[i].qs[32 + g], q8);
                bsum += sum * (2 * (x[i].scales[k] >> (4 * h) & 0xf) + 1);
            }
        sumf = iq_add_super_block(sumf, quant_f16_to_f32(iq_u16(x[i].d)) * q8k_d(&y[i]), bsum);
    }
    return 0.125f * sumf;
}

static float dot_iq3_xxs(size_t n, const void *w, const void *a)
{
    const block_iq3_xxs *x = w;
    const block_q8_k *y = a;
    float sumf = 0.0f;
    for (size_t i = 0; i < n / QK_K; i++) {
        const int8_t *q8 = y[i].qs;
        int32_t bsum = 0;
        for (int k = 0; k < QK_K / 32; k++) {
            const uint8_t *q3 = x[i].qs + 8 * k;
            uint32_t aux = iq_u32(x[i].qs + 64 + 4 * k);
            int32_t sum = 0;
            for (int l = 0; l < 4; l++, q8 += 8)
                sum += signed_group_dot(iq3_pair(quant_iq3xxs_grid, q3[2 * l], q3[2 * l + 1]),
                                        sign_code(aux, l), q8);
            bsum += sum * (int32_t)(2 * (aux >> 28) + 1);
        }
        sumf = iq_add_super_block(sumf, quant_f16_to_f32(iq_u16(x[i].d)) * q8k_d(&y[i]), bsum);
    }
    return 0.25f * sumf;
}

static float dot_iq3_s(size_t n, const void *w, const void *a)
{
    const block_iq3_s *x = w;
    const block_q8_k *y = a;
    float sumf = 0.0f;
    for (size_t i = 0; i < n / QK_K; i++) {
        const int8_t *q8 = y[i].qs;
        int32_t bsum = 0;
        for (int k = 0; k < QK_K / 32; k++) {
            int32_t sum = 0;
            for (int l = 0; l < 4; l++, q8 += 8) {
                int g = 4 * k + l;
                sum += signed_group_dot(iq3_pair(quant_iq3s_grid, iq3_s_index(&x[i], 2 * g),
                                                 iq3_s_index(&x[i], 2 * g + 1)),
                                        x[i].signs[g], q8);
            }
            bsum += sum * iq3_s_scale(&x[i], k);
        }
        sumf = iq_add_super_block(sumf, quant_f16_to_f32(iq_u16(x[i].d)) * q8k_d(&y[i]), bsum);
    }
    return sumf;
}

/* IQ1_S / IQ1_M: d * (sum of quants times grid values + 1/8 * sum of quants times shifts),
 * rounded as ggml's portable code rounds it (quant_iq_lattice_avx2.c gets the same bits from
 * one sum of eighths). */
static float iq1_add_super_block(float sumf, float d, int32_t sum_grid, int32_t sum_shift)
{
    return sumf + d * ((float)sum_grid + 0.125f * (float)sum_shift);
}

/* IQ1_S: the shifts' part is the sub-block's quant sum (two of Q8_K's 16-element sums) times
 * its scale and the shift's sign. */
static float dot_iq1_s(size_t n, const void *w, const void *a)
{
    const block_iq1_s *x = w;
    const block_q8_k *y = a;
    float sumf = 0.0f;
    for (size_t i = 0; i < n / QK_K; i++) {
        const int8_t *q8 = y[i].qs;
        int32_t sum_grid = 0, sum_shift = 0;
        for (int k = 0; k < QK_K / 32; k++) {
            uint16_t qh = iq_u16(x[i].qh + 2 * k);
            int32_t ls = 2 * (qh >> 12 & 7) + 1, sum = 0;
            for (int l = 0; l < 4; l++, q8 += 8)
                sum += shifted_group_dot(quant_iq1s_grid[iq1_s_index(&x[i], 4 * k + l)], q8);
            sum_grid += ls * sum;
            sum_shift += ls * (qh & 0x8000 ? -1 : 1) *
                         (q8k_bsum(&y[i], 2 * k) + q8k_bsum(&y[i], 2 * k + 1));
        }
        sumf = iq1_add_super_block(sumf, quant_f16_to_f32(iq_u16(x[i].d)) * q8k_d(&y[i]),
                                   sum_grid, sum_shift);
    }
    return sumf;
}

/* IQ1_M: each group of 8 has its own shift sign, so the shifts' part sums quants per group. */
static float dot_iq1_m(size_t n, const void *w, const void *a)
{
    const block_iq1_m *x = w;
    const block_q8_k *y = a;
    float sumf = 0.0f;
    for (size_t i = 0; i < n / QK_K; i++) {
        const int8_t *q8 = y[i].qs;
        int32_t sum_grid = 0, sum_shift = 0;
        for (int k = 0; k < QK_K / 32; k++)
            for (int h = 0; h < 2; h++) {
                int32_t grid_part = 0, shift_part = 0;
                for (int g = 4 * k + 2 * h; g < 4 * k + 2 * h + 2; g++, q8 += 8) {
                    int32_t quants = 0;
                    for (int j = 0; j < 8; j++)
                        quants += q8[j];
                    grid_part += shifted_group_dot(quant_iq1s_grid[iq1_m_index(&x[i], g)], q8);
                    shift_part += iq1_m_shift_down(&x[i], g) ? -quants : quants;
                }
                int32_t ls = iq1_m_scale(&x[i], k, h);
                sum_grid += ls * grid_part;
                sum_shift += ls * shift_part;
            }
        sumf = iq1_add_super_block(sumf, quant_f16_to_f32(iq1_m_scale_bits(&x[i])) * q8k_d(&y[i]),
                                   sum_grid, sum_shift);
    }
    return sumf;
}

/*
 * Activations are quantized by the K-quants' Q8_K functions at each level, so a layer mixing
 * these types with K-quants shares one quantized input (forward.c). No packed layouts: at the
 * x86 levels a product takes the tile kernel on the rows as they are in the file, at the
 * scalar level the dot per row and token (quant_matmul_rows).
 */
#define LATTICE_OPS(type_id, deq, act, dot_fn, matmul_fn) \
    {.type = (type_id), .dequantize = (deq), .act_type = TENSOR_TYPE_Q8_K, \
     .quantize_act = (act), .dot = (dot_fn), .matmul = (matmul_fn)}
/* Each type's ops per level, and avx512's with VNNI after them. */
enum { AT_AVX512_VNNI = CPU_LEVEL_COUNT, LATTICE_OPS_COUNT };
#define LATTICE_LEVELS(type_id, deq, scalar_dot, name) \
    { \
        [CPU_LEVEL_SCALAR] = LATTICE_OPS(type_id, deq, quant_k_quantize_q8_k, scalar_dot, NULL), \
        [CPU_LEVEL_AVX2] = LATTICE_OPS(type_id, deq, quant_k_quantize_q8_k, \
                                       quant_dot_##name##_avx2, quant_matmul_##name##_avx2), \
        [CPU_LEVEL_AVX512] = LATTICE_OPS(type_id, deq, quant_k_quantize_q8_k_avx512, \
                                         quant_dot_##name##_avx512, quant_matmul_##name##_avx512), \
        [AT_AVX512_VNNI] = LATTICE_OPS(type_id, deq, quant_k_quantize_q8_k_avx512, \
                                       quant_dot_##name##_avx512, \
                                       quant_matmul_##name##_avx512_vnni), \
    }

static const quant_ops iq2_xxs_ops[LATTICE_OPS_COUNT] =
    LATTICE_LEVELS(TENSOR_TYPE_IQ2_XXS, dequantize_iq2_xxs, dot_iq2_xxs, iq2_xxs);
static const quant_ops iq2_xs_ops[LATTICE_OPS_COUNT] =
    LATTICE_LEVELS(TENSOR_TYPE_IQ2_XS, dequantize_iq2_xs, dot_iq2_xs, iq2_xs);
static const quant_ops iq2_s_ops[LATTICE_OPS_COUNT] =
    LATTICE_LEVELS(TENSOR_TYPE_IQ2_S, dequantize_iq2_s, dot_iq2_s, iq2_s);
static const quant_ops iq3_xxs_ops[LATTICE_OPS_COUNT] =
    LATTICE_LEVELS(TENSOR_TYPE_IQ3_XXS, dequantize_iq3_xxs, dot_iq3_xxs, iq3_xxs);
static const quant_ops iq3_s_ops[LATTICE_OPS_COUNT] =
    LATTICE_LEVELS(TENSOR_TYPE_IQ3_S, dequantize_iq3_s, dot_iq3_s, iq3_s);
static const quant_ops iq1_s_ops[LATTICE_OPS_COUNT] =
    LATTICE_LEVELS(TENSOR_TYPE_IQ1_S, dequantize_iq1_s, dot_iq1_s, iq1_s);
static const quant_ops iq1_m_ops[LATTICE_OPS_COUNT] =
    LATTICE_LEVELS(TENSOR_TYPE_IQ1_M, dequantize_iq1_m, dot_iq1_m, iq1_m);

const quant_ops *quant_iq_lattice_ops(uint32_t type, enum cpu_level level)
{
    unsigned at = level == CPU_LEVEL_AVX512 && cpu_has_avx512_vnni() ? AT_AVX512_VNNI
                                                                     : (unsigned)level;
    switch (type) {
    case TENSOR_TYPE_IQ2_XXS:
        return &iq2_xxs_ops[at];
    case TENSOR_TYPE_IQ2_XS:
        return &iq2_xs_ops[at];
    case TENSOR_TYPE_IQ2_S:
        return &iq2_s_ops[at];
    case TENSOR_TYPE_IQ3_XXS:
        return &iq3_xxs_ops[at];
    case TENSOR_TYPE_IQ3_S:
        return &iq3_s_ops[at];
    case TENSOR_TYPE_IQ1_S:
        return &iq1_s_ops[at];
    case TENSOR_TYPE_IQ1_M:
        return &iq1_m_ops[at];
    default:
        return NULL;
    }
}

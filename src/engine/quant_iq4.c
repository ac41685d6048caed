/*
 * Scalar IQ4_NL and IQ4_XS arithmetic and their per-level ops (quant_iq4.h): dequantize as
 * ggml does it, bit for bit, and the dot products with the activation types ggml pairs them
 * with, Q8_0 for IQ4_NL and Q8_K for IQ4_XS, adding the same terms in the same order as ggml's
 * portable code.
 */
#include "quant_iq4.h"

#include <string.h>

#include "quant_k_blocks.h"
#include "quant_legacy.h"

/* The IQ4 formats' definition: code i stands for this value times the block's scale. */
const int8_t quant_iq4_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                     1,    13,   25,  38,  53,  69,  89,  113};

/* 32 elements of nibbles qs (the IQ4_NL layout) times d. */
static void dequantize_nibbles(const uint8_t qs[16], float d, float *out)
{
    for (int j = 0; j < 16; j++) {
        out[j] = d * (float)quant_iq4_values[qs[j] & 0x0f];
        out[j + 16] = d * (float)quant_iq4_values[qs[j] >> 4];
    }
}

/* Sum over the 32 elements of nibbles qs times the activation quants q8, exact in int. */
static int nibbles_dot(const uint8_t qs[16], const int8_t q8[32])
{
    int low = 0, high = 0;
    for (int j = 0; j < 16; j++) {
        low += q8[j] * quant_iq4_values[qs[j] & 0x0f];
        high += q8[j + 16] * quant_iq4_values[qs[j] >> 4];
    }
    return low + high;
}

static void dequantize_iq4_nl(const void *blocks, float *out, size_t n)
{
    const block_iq4_nl *b = blocks;
    for (size_t i = 0; i < n / QUANT_QK32; i++, out += QUANT_QK32)
        dequantize_nibbles(b[i].qs, quant_f16_to_f32(b[i].d), out);
}

/* Each sub-block's scale is rounded to f32 before it multiplies the values, as in ggml. */
static void dequantize_iq4_xs(const void *blocks, float *out, size_t n)
{
    const block_iq4_xs *b = blocks;
    for (size_t i = 0; i < n / QK_K; i++) {
        float d = quant_f16_to_f32(b[i].d);
        for (int k = 0; k < QK_K / 32; k++, out += 32)
            dequantize_nibbles(b[i].qs + 16 * k,
                               d * (float)(quant_iq4_xs_sub_scale(&b[i], k) - 32), out);
    }
}

static float dot_iq4_nl(size_t n, const void *w, const void *a)
{
    const block_iq4_nl *x = w;
    const block_q8_0 *y = a;
    float sumf = 0.0f;
    for (size_t i = 0; i < n / QUANT_QK32; i++) {
        float d = quant_f16_to_f32(y[i].d) * quant_f16_to_f32(x[i].d);
        sumf += d * (float)nibbles_dot(x[i].qs, y[i].qs);
    }
    return sumf;
}

/* One f32 addition per sub-block, its scale d_w * d_a * (s - 32) rounded first. */
static float dot_iq4_xs(size_t n, const void *w, const void *a)
{
    const block_iq4_xs *x = w;
    const block_q8_k *y = a;
    float sumf = 0.0f;
    for (size_t i = 0; i < n / QK_K; i++) {
        float d = quant_f16_to_f32(x[i].d) * q8k_d(&y[i]);
        for (int k = 0; k < QK_K / 32; k++) {
            float dk = d * (float)(quant_iq4_xs_sub_scale(&x[i], k) - 32);
            sumf += dk * (float)nibbles_dot(x[i].qs + 16 * k, y[i].qs + 32 * k);
        }
    }
    return sumf;
}

/* Every block of every row into its group's lanes (the layout of quant_iq4.h). */
void quant_iq4_pack_nl(const void *w, size_t n, size_t n_rows, void *packed)
{
    const block_iq4_nl *rows = w;
    size_t n_blocks = n / QUANT_QK32;
    uint8_t *out = packed;
    for (size_t g = 0; g < n_rows / QUANT_PACK_ROWS; g++)
        for (size_t b = 0; b < n_blocks; b++, out += QUANT_PACK_ROWS * sizeof(block_iq4_nl))
            for (size_t r = 0; r < QUANT_PACK_ROWS; r++) {
                const block_iq4_nl *src = &rows[(g * QUANT_PACK_ROWS + r) * n_blocks + b];
                memcpy(out + 2 * r, &src->d, 2);
                for (size_t v = 0; v < 4; v++)
                    memcpy(out + IQ4NL_QS_AT + 64 * v + 4 * r, src->qs + 4 * v, 4);
            }
}

/* Every super-block of every row into its group's lanes (the layout of quant_iq4.h). */
void quant_iq4_pack_xs(const void *w, size_t n, size_t n_rows, void *packed)
{
    const block_iq4_xs *rows = w;
    size_t n_blocks = n / QK_K;
    uint8_t *out = packed;
    for (size_t g = 0; g < n_rows / QUANT_PACK_ROWS; g++)
        for (size_t b = 0; b < n_blocks; b++, out += QUANT_PACK_ROWS * sizeof(block_iq4_xs))
            for (size_t r = 0; r < QUANT_PACK_ROWS; r++) {
                const block_iq4_xs *src = &rows[(g * QUANT_PACK_ROWS + r) * n_blocks + b];
                memcpy(out + 2 * r, &src->d, 2);
                memcpy(out + IQ4XS_SCALES_H_AT + 2 * r, &src->scales_h, 2);
                memcpy(out + IQ4XS_SCALES_L_AT + 4 * r, src->scales_l, 4);
                for (size_t v = 0; v < sizeof src->qs / 4; v++)
                    memcpy(out + IQ4XS_QS_AT + 64 * v + 4 * r, src->qs + 4 * v, 4);
            }
}

/*
 * Activations are quantized by the same functions as for Q8_0 and the K-quants at each level,
 * so a layer mixing these types with those shares one quantized input (forward.c). Both types
 * have packed kernels at the x86 levels (the AVX2 ones at avx512 without VNNI). IQ4_NL's read
 * the packed Q4_0 / Q8_0 kernels' sums. IQ4_XS's VNNI kernel reads the K-quants' sub-block
 * sums, and its AVX2 one names them too, as every packed K type does, because a Q4_K or Q5_K
 * product sharing its input may read the sums its ops prepare.
 */
#define IQ4_NL_OPS(act, dot_fn) \
    {.type = TENSOR_TYPE_IQ4_NL, .dequantize = dequantize_iq4_nl, \
     .act_type = TENSOR_TYPE_Q8_0, .quantize_act = (act), .dot = (dot_fn)}
#define IQ4_NL_PACKED_OPS(packed_fn) \
    {.type = TENSOR_TYPE_IQ4_NL, .dequantize = dequantize_iq4_nl, \
     .act_type = TENSOR_TYPE_Q8_0, .quantize_act = quant_quantize_act_q8_0_avx2, \
     .dot = quant_dot_iq4_nl_avx2, .pack = quant_iq4_pack_nl, \
     .act_sums = quant_prepare_packed_act_avx2, .matmul_packed = (packed_fn)}
#define IQ4_XS_OPS(act, dot_fn) \
    {.type = TENSOR_TYPE_IQ4_XS, .dequantize = dequantize_iq4_xs, \
     .act_type = TENSOR_TYPE_Q8_K, .quantize_act = (act), .dot = (dot_fn)}
#define IQ4_XS_PACKED_OPS(act, dot_fn, packed_fn) \
    {.type = TENSOR_TYPE_IQ4_XS, .dequantize = dequantize_iq4_xs, \
     .act_type = TENSOR_TYPE_Q8_K, .quantize_act = (act), .dot = (dot_fn), \
     .pack = quant_iq4_pack_xs, .act_sums = quant_k_sub_block_sums, \
     .matmul_packed = (packed_fn)}

static const quant_ops iq4_nl_ops[CPU_LEVEL_COUNT] = {
    [CPU_LEVEL_SCALAR] = IQ4_NL_OPS(quant_quantize_act_q8_0, dot_iq4_nl),
    [CPU_LEVEL_AVX2] = IQ4_NL_PACKED_OPS(quant_iq4_matmul_packed_nl_avx2),
    [CPU_LEVEL_AVX512] = IQ4_NL_PACKED_OPS(quant_iq4_matmul_packed_nl_avx2),
};
static const quant_ops iq4_xs_ops[CPU_LEVEL_COUNT] = {
    [CPU_LEVEL_SCALAR] = IQ4_XS_OPS(quant_k_quantize_q8_k, dot_iq4_xs),
    [CPU_LEVEL_AVX2] = IQ4_XS_PACKED_OPS(quant_k_quantize_q8_k, quant_dot_iq4_xs_avx2,
                                         quant_iq4_matmul_packed_xs_avx2),
    [CPU_LEVEL_AVX512] = IQ4_XS_PACKED_OPS(quant_k_quantize_q8_k_avx512, quant_dot_iq4_xs_avx2,
                                           quant_iq4_matmul_packed_xs_avx2),
};

/* Level avx512 with VNNI: the same, but the 16-row packed kernels. */
static const quant_ops iq4_nl_vnni_ops = IQ4_NL_PACKED_OPS(quant_iq4_matmul_packed_nl_avx512);
static const quant_ops iq4_xs_vnni_ops = IQ4_XS_PACKED_OPS(
    quant_k_quantize_q8_k_avx512, quant_dot_iq4_xs_avx2, quant_iq4_matmul_packed_xs_avx512);

const quant_ops *quant_iq4_ops(uint32_t type, enum cpu_level level)
{
    bool vnni = level == CPU_LEVEL_AVX512 && cpu_has_avx512_vnni();
    if (type == TENSOR_TYPE_IQ4_NL)
        return vnni ? &iq4_nl_vnni_ops : &iq4_nl_ops[level];
    if (type == TENSOR_TYPE_IQ4_XS && vnni)
        return &iq4_xs_vnni_ops;
    if (type == TENSOR_TYPE_IQ4_XS)
        return &iq4_xs_ops[level];
    return NULL;
}

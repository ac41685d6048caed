/*
 * Scalar MXFP4 arithmetic and its per-level ops (quant_mxfp4.h): dequantize, ggml's reference
 * quantizer bit for bit, and the dot product with Q8_0 activations (quantized with the same
 * recipe as for Q8_0 weights, so a model's activations do not depend on its weight types).
 */
#include "quant_mxfp4.h"

#include <math.h>
#include <string.h>

#include "quant_legacy.h"

#define QK QUANT_QK32

const int8_t quant_mxfp4_values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

static void dequantize_mxfp4(const void *blocks, float *out, size_t n)
{
    const block_mxfp4 *b = blocks;
    for (size_t i = 0; i < n / QK; i++, out += QK) {
        float d = quant_mxfp4_scale(b[i].e);
        for (int j = 0; j < QK / 2; j++) {
            out[j] = (float)quant_mxfp4_values[b[i].qs[j] & 0x0f] * d;
            out[j + QK / 2] = (float)quant_mxfp4_values[b[i].qs[j] >> 4] * d;
        }
    }
}

/* The code whose value times d is nearest x: the first of equals, so 0 takes code 0 and a
 * value halfway between two magnitudes the smaller. */
static uint8_t nearest_code(float x, float d)
{
    uint8_t best = 0;
    float best_err = fabsf((float)quant_mxfp4_values[0] * d - x);
    for (uint8_t i = 1; i < 16; i++) {
        float err = fabsf((float)quant_mxfp4_values[i] * d - x);
        if (err < best_err) {
            best = i;
            best_err = err;
        }
    }
    return best;
}

/* The exponent byte of a block whose largest magnitude is amax: its largest value lands on
 * the codes' top magnitude (6 = 12 halves, hence 2 below the power of two). The library's
 * log2f decides near powers of two, as in ggml. Out-of-range results (amax below 2^-125, or
 * infinite) are clamped where ggml's conversion would be undefined. */
static uint8_t block_exponent(float amax)
{
    if (!(amax > 0.0f))
        return 0;
    float e = floorf(log2f(amax)) - 2.0f + 127.0f;
    return e <= 0.0f ? 0 : e >= 255.0f ? 255 : (uint8_t)e;
}

static void quantize_mxfp4(const float *in, void *blocks, size_t n)
{
    block_mxfp4 *b = blocks;
    for (size_t i = 0; i < n / QK; i++, in += QK) {
        float amax = 0.0f;
        for (int j = 0; j < QK; j++)
            if (amax < fabsf(in[j]))
                amax = fabsf(in[j]);
        b[i].e = block_exponent(amax);
        float d = quant_mxfp4_scale(b[i].e);
        for (int j = 0; j < QK / 2; j++)
            b[i].qs[j] = (uint8_t)(nearest_code(in[j], d) | nearest_code(in[j + QK / 2], d) << 4);
    }
}

static float dot_mxfp4(size_t n, const void *w, const void *a)
{
    const block_mxfp4 *x = w;
    const block_q8_0 *y = a;
    float sumf = 0.0f;
    for (size_t i = 0; i < n / QK; i++) {
        int sumi = 0;
        for (int j = 0; j < QK / 2; j++) {
            sumi += y[i].qs[j] * quant_mxfp4_values[x[i].qs[j] & 0x0f];
            sumi += y[i].qs[j + QK / 2] * quant_mxfp4_values[x[i].qs[j] >> 4];
        }
        float d = quant_f16_to_f32(y[i].d) * quant_mxfp4_scale(x[i].e);
        sumf += d * (float)sumi;
    }
    return sumf;
}

void quant_pack_mxfp4(const void *w, size_t n, size_t n_rows, void *packed)
{
    const block_mxfp4 *rows = w;
    size_t n_blocks = n / QK;
    uint8_t *out = packed;
    for (size_t g = 0; g < n_rows / QUANT_PACK_ROWS; g++)
        for (size_t b = 0; b < n_blocks; b++, out += QUANT_PACK_ROWS * sizeof(block_mxfp4))
            for (size_t r = 0; r < QUANT_PACK_ROWS; r++) {
                const block_mxfp4 *src = &rows[(g * QUANT_PACK_ROWS + r) * n_blocks + b];
                out[r] = src->e;
                for (size_t j = 0; j < 4; j++)
                    memcpy(out + QUANT_PACK_ROWS + 64 * j + 4 * r, src->qs + 4 * j, 4);
            }
}

/* Activations are Q8_0, quantized as for Q8_0 weights at the same level, so a model's
 * activations do not depend on its weight types. */
static const quant_ops scalar_ops = {
    .type = TENSOR_TYPE_MXFP4, .dequantize = dequantize_mxfp4, .quantize = quantize_mxfp4,
    .act_type = TENSOR_TYPE_Q8_0, .quantize_act = quant_quantize_act_q8_0, .dot = dot_mxfp4};
/* The SIMD levels repack the experts at load for their packed kernels, whose sums need the
 * activations' -16 * sum(q) start values. */
#define PACKED_MXFP4_OPS(packed_fn) \
    {.type = TENSOR_TYPE_MXFP4, .dequantize = dequantize_mxfp4, .quantize = quantize_mxfp4, \
     .act_type = TENSOR_TYPE_Q8_0, .quantize_act = quant_quantize_act_q8_0_avx2, \
     .dot = quant_dot_mxfp4_avx2, .pack = quant_pack_mxfp4, \
     .act_sums = quant_prepare_packed_act_avx2, .matmul_packed = (packed_fn)}

static const quant_ops avx2_ops = PACKED_MXFP4_OPS(quant_matmul_packed_mxfp4_avx2);
static const quant_ops avx512_vnni_ops = PACKED_MXFP4_OPS(quant_matmul_packed_mxfp4_avx512);

const quant_ops *quant_mxfp4_ops(uint32_t type, enum cpu_level level)
{
    if (type != TENSOR_TYPE_MXFP4)
        return NULL;
    if (level >= CPU_LEVEL_AVX512 && cpu_has_avx512_vnni())
        return &avx512_vnni_ops;
    return level >= CPU_LEVEL_AVX2 ? &avx2_ops : &scalar_ops;
}

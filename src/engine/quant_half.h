/*
 * IEEE binary16 and bfloat16 <-> float32 conversions with ggml's rounding,
 * inline because attention and the F16 kernels call them per element. Portable integer code:
 * results never depend on the CPU, so SIMD code may use F16C only where it gives these bits
 * (half -> float always; float -> half for every non-NaN input).
 */
#ifndef CORRAL_ENGINE_QUANT_HALF_H
#define CORRAL_ENGINE_QUANT_HALF_H

#include <stdint.h>
#include <string.h>

static inline uint32_t quant_float_bits(float f)
{
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    return bits;
}

static inline float quant_bits_float(uint32_t bits)
{
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

static inline float quant_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exponent = (h >> 10) & 0x1f;
    uint32_t mantissa = h & 0x3ff;
    /* All three cases are computed and one selected, so loops over halves vectorize. */
    uint32_t normal = ((exponent + 112) << 23) | (mantissa << 13);
    uint32_t subnormal = quant_float_bits((float)mantissa * 0x1p-24f); /* exact; 0 for 0 */
    uint32_t inf_or_nan = 0x7f800000 | (mantissa << 13) | (mantissa ? 0x400000 : 0); /* quiet */
    uint32_t magnitude = exponent == 0 ? subnormal : exponent == 31 ? inf_or_nan : normal;
    return quant_bits_float(sign | magnitude);
}

static inline uint16_t quant_f32_to_f16(float f)
{
    uint32_t bits = quant_float_bits(f);
    uint16_t sign = (uint16_t)((bits >> 16) & 0x8000);
    uint32_t magnitude = bits & 0x7fffffff;

    if (magnitude > 0x7f800000)
        return sign | 0x7e00; /* ggml drops the NaN payload */
    if (magnitude >= 0x477ff000) /* >= 65520 rounds (ties to even) past 65504 */
        return sign | 0x7c00;
    if (magnitude >= 0x38800000) {
        /* Normal half: rebias the exponent (127 -> 15), then round 13 bits off to even.
         * A carry out of the mantissa correctly bumps the exponent. */
        uint32_t rebiased = magnitude - (112u << 23);
        return sign | (uint16_t)((rebiased + 0xfff + ((rebiased >> 13) & 1)) >> 13);
    }
    uint32_t exponent = magnitude >> 23;
    if (exponent < 102) /* below 2^-25: rounds to zero */
        return sign;
    /* Subnormal half: the value in units of 2^-24 is mantissa * 2^(exponent - 126). */
    uint32_t mantissa = (magnitude & 0x7fffff) | 0x800000;
    uint32_t shift = 126 - exponent; /* 14..24 */
    uint32_t quotient = mantissa >> shift;
    uint32_t remainder = mantissa & ((1u << shift) - 1);
    uint32_t half = 1u << (shift - 1);
    if (remainder > half || (remainder == half && (quotient & 1)))
        quotient++;
    return sign | (uint16_t)quotient;
}

static inline float quant_bf16_to_f32(uint16_t h)
{
    return quant_bits_float((uint32_t)h << 16);
}

static inline uint16_t quant_f32_to_bf16(float f)
{
    uint32_t bits = quant_float_bits(f);
    if ((bits & 0x7fffffff) > 0x7f800000)
        return (uint16_t)((bits >> 16) | 0x40);
    return (uint16_t)((bits + 0x7fff + ((bits >> 16) & 1)) >> 16);
}

#endif

// f32 to f16 bits, rounded to nearest with ties to even as the CPU rounds (quant_half.h), in
// integer arithmetic. GLSL leaves packHalf2x16's rounding to the implementation: Mesa's
// lavapipe rounds to nearest even, but on an NVIDIA H200 every path that rounded through it
// parted from the CPU, and an f16 KV cache, a Q8_0 scale or the GELU table's index one step
// off moves a model's logits. The shaders make their f16 bits here instead.

uint half_bits(float x)
{
    uint bits = floatBitsToUint(x);
    uint sign = (bits >> 16) & 0x8000u, magnitude = bits & 0x7fffffffu;
    if (magnitude > 0x7f800000u)
        return sign | 0x7e00u; // a NaN, without its payload
    if (magnitude >= 0x477ff000u) // from 65520 on, past 65504: infinity
        return sign | 0x7c00u;
    if (magnitude >= 0x38800000u) { // a normal half: exponent rebiased, 13 bits rounded off
        uint rebiased = magnitude - (112u << 23);
        return sign | ((rebiased + 0xfffu + ((rebiased >> 13) & 1u)) >> 13);
    }
    uint exponent = magnitude >> 23;
    if (exponent < 102u) // below 2^-25
        return sign;
    // a subnormal half, in units of 2^-24: the mantissa shifted right by 14 to 24 bits
    uint mantissa = (magnitude & 0x7fffffu) | 0x800000u, shift = 126u - exponent;
    uint quotient = mantissa >> shift, remainder = mantissa & ((1u << shift) - 1u);
    uint half_unit = 1u << (shift - 1u);
    if (remainder > half_unit || (remainder == half_unit && (quotient & 1u) != 0u))
        quotient++;
    return sign | quotient;
}

// two floats as f16s in one word, a in the low half
uint pack_halves(float a, float b)
{
    return half_bits(a) | (half_bits(b) << 16);
}

// x rounded to the nearest f16 and back
float round_half(float x)
{
    return unpackHalf2x16(half_bits(x)).x;
}

#version 450
// gate = silu(gate) * up as swiglu.comp makes it, then quantized for the product that reads
// it as quantize_q8_0 and quantize_q8_k quantize it (kind 0: Q8_0, 1: Q8_1, 2: Q8_K): the FFN's
// activation and the down product's quantization in one dispatch. One thread a block, which
// reads back only what it wrote; n is a whole number of blocks.
#extension GL_GOOGLE_include_directive : require
layout(local_size_x = 64) in;
layout(std430, binding = 0) buffer Gate { float g[]; };
layout(std430, binding = 1) readonly buffer Up { float u[]; };
layout(std430, binding = 2) writeonly buffer Quants { int q[]; };
layout(std430, binding = 3) writeonly buffer Scales { float d[]; };
layout(push_constant) uniform Params { uint n, kind; } p;

#include "half.glsl"
#define QUANTIZE_INPUT(i) g[i]
#include "quantize.glsl"

void main()
{
    uint block = p.kind == 2u ? 256u : 32u;
    for (uint b = gl_GlobalInvocationID.x; b < p.n / block; b += gl_NumWorkGroups.x * 64u) {
        for (uint i = b * block; i < (b + 1u) * block; i++)
            g[i] = g[i] / (1.0 + exp(-g[i])) * u[i];
        if (p.kind == 2u)
            quantize_q8_k_block(b);
        else
            quantize_q8_0_block(b, p.kind == 1u);
    }
}

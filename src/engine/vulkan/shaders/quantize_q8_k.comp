#version 450
// x to Q8_K blocks of 256 as the CPU quantizes activations for K-quant weights
// (quantize.glsl). One thread a block.
#extension GL_GOOGLE_include_directive : require
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer Input { float x[]; };
layout(std430, binding = 1) writeonly buffer Quants { int q[]; };
layout(std430, binding = 2) writeonly buffer Scales { float d[]; };
layout(push_constant) uniform Params { uint n_blocks; } p;

#include "half.glsl"
#define QUANTIZE_INPUT(i) x[i]
#include "quantize.glsl"

void main()
{
    for (uint b = gl_GlobalInvocationID.x; b < p.n_blocks; b += gl_NumWorkGroups.x * 64u)
        quantize_q8_k_block(b);
}

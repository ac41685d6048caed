#version 450
// x to Q8_0 (or Q8_1, with sums) blocks as the CPU quantizes activations (quantize.glsl).
// One thread a block.
#extension GL_GOOGLE_include_directive : require
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer Input { float x[]; };
layout(std430, binding = 1) writeonly buffer Quants { int q[]; };
layout(std430, binding = 2) writeonly buffer Scales { float d[]; };
layout(push_constant) uniform Params { uint n_blocks, sums; } p;

#include "half.glsl"
#define QUANTIZE_INPUT(i) x[i]
#include "quantize.glsl"

void main()
{
    for (uint b = gl_GlobalInvocationID.x; b < p.n_blocks; b += gl_NumWorkGroups.x * 64u)
        quantize_q8_0_block(b, p.sums != 0u);
}

#version 450
// x to Q8_0 blocks as the CPU quantizes activations: per block of 32 the scale
// amax / 127 (kept as the f16 it is stored as) and each value times 127 / amax rounded to
// nearest even. Quants go four to a word, scales one float each. One thread a block.
// With sums (Q8_1, the partner of Q4_1 and Q5_1), scales take two floats a block: the
// scale, and the f16 value of the unrounded scale times the block's quant sum.
#extension GL_GOOGLE_include_directive : require
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer Input { float x[]; };
layout(std430, binding = 1) writeonly buffer Quants { int q[]; };
layout(std430, binding = 2) writeonly buffer Scales { float d[]; };
layout(push_constant) uniform Params { uint n_blocks, sums; } p;

#include "half.glsl"

void main()
{
    for (uint b = gl_GlobalInvocationID.x; b < p.n_blocks; b += gl_NumWorkGroups.x * 64u) {
        float amax = 0.0;
        for (uint j = 0u; j < 32u; j++)
            amax = max(amax, abs(x[b * 32u + j]));
        float id = amax != 0.0 ? 127.0 / amax : 0.0;
        int sum = 0;
        for (uint k = 0u; k < 8u; k++) {
            int word = 0;
            for (uint j = 0u; j < 4u; j++) {
                int v = int(roundEven(x[b * 32u + k * 4u + j] * id));
                word |= (v & 0xff) << (8u * j);
                sum += v;
            }
            q[b * 8u + k] = word;
        }
        float scale = amax / 127.0;
        float rounded = round_half(scale);
        if (p.sums != 0u) {
            d[2u * b] = rounded;
            d[2u * b + 1u] = round_half(scale * float(sum));
        } else {
            d[b] = rounded;
        }
    }
}

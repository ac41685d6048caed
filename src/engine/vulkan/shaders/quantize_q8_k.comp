#version 450
// x to Q8_K blocks of 256 as the CPU quantizes activations for K-quant weights: the scale
// -127 / (the first value of the largest magnitude), values times it rounded to nearest
// even (at most 127), the block's scale 1 / that (a float). Quants go four to a word. One
// thread a block; an all-zero block is all zeros.
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer Input { float x[]; };
layout(std430, binding = 1) writeonly buffer Quants { int q[]; };
layout(std430, binding = 2) writeonly buffer Scales { float d[]; };
layout(push_constant) uniform Params { uint n_blocks; } p;

void main()
{
    for (uint b = gl_GlobalInvocationID.x; b < p.n_blocks; b += gl_NumWorkGroups.x * 64u) {
        float amax = 0.0, top = 0.0;
        for (uint j = 0u; j < 256u; j++) {
            float v = x[b * 256u + j];
            if (abs(v) > amax) {
                amax = abs(v);
                top = v;
            }
        }
        float iscale = amax != 0.0 ? -127.0 / top : 0.0;
        for (uint k = 0u; k < 64u; k++) {
            int word = 0;
            for (uint j = 0u; j < 4u; j++) {
                int v = min(int(roundEven(iscale * x[b * 256u + k * 4u + j])), 127);
                word |= (v & 0xff) << (8u * j);
            }
            q[b * 64u + k] = word;
        }
        d[b] = amax != 0.0 ? 1.0 / iscale : 0.0;
    }
}

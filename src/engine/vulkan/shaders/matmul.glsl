// y[t][row] = W[row] . x[t]: one workgroup per (row, token), its threads over the row's
// elements or blocks, summed in shared memory. F32 weights take x as it is, F16 weights x
// rounded to f16, Q4_0 and Q8_0 weights x quantized to Q8_0 (quantize_q8_0.comp): the
// partners the CPU kernels use, so both sides multiply the same numbers.
#extension GL_GOOGLE_include_directive : require

layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer Weights { uint w[]; };
layout(std430, binding = 1) readonly buffer Input { float x[]; };
layout(std430, binding = 2) readonly buffer InputQuants { int xq[]; }; // 8 words a block
layout(std430, binding = 3) readonly buffer InputScales { float xd[]; };
layout(std430, binding = 4) writeonly buffer Output { float y[]; };
layout(push_constant) uniform Params {
    uint n_in, n_out, n_tokens, row_bytes, rows_per_z;
} p;

#include "common.glsl"

shared float partial[64];

// the signed byte j of Q8_0 activation block `block`
int act_q(uint block, uint j)
{
    return bitfieldExtract(xq[block * 8u + (j >> 2)], int((j & 3u) * 8u), 8);
}

void main()
{
    uint row = gl_WorkGroupID.x + gl_WorkGroupID.z * p.rows_per_z;
    uint t = gl_WorkGroupID.y;
    if (row >= p.n_out) // the whole group leaves together
        return;
    uint tid = gl_LocalInvocationID.x;
    uint base = row * p.row_bytes;
    float sum = 0.0;
#if defined(WEIGHT_F32)
    for (uint i = tid; i < p.n_in; i += 64u)
        sum += uintBitsToFloat(w[(base >> 2) + i]) * x[t * p.n_in + i];
#elif defined(WEIGHT_F16)
    for (uint i = tid; i < p.n_in; i += 64u)
        sum += half_at(base + 2u * i) * round_half(x[t * p.n_in + i]);
#else
    uint n_blocks = p.n_in / 32u;
    for (uint b = tid; b < n_blocks; b += 64u) {
        uint ab = t * n_blocks + b;
        int sumi = 0;
#if defined(WEIGHT_Q4_0)
        uint at = base + b * 18u;
        for (uint j = 0u; j < 16u; j++) {
            uint pair = byte_at(at + 2u + j);
            sumi += (int(pair & 15u) - 8) * act_q(ab, j) + (int(pair >> 4) - 8) * act_q(ab, j + 16u);
        }
#else // WEIGHT_Q8_0
        uint at = base + b * 34u;
        for (uint j = 0u; j < 32u; j++)
            sumi += sbyte_at(at + 2u + j) * act_q(ab, j);
#endif
        sum += float(sumi) * half_at(at) * xd[ab];
    }
#endif
    partial[tid] = sum;
    barrier();
    for (uint s = 32u; s > 0u; s >>= 1) {
        if (tid < s)
            partial[tid] += partial[tid + s];
        barrier();
    }
    if (tid == 0u)
        y[t * p.n_out + row] = partial[0];
}

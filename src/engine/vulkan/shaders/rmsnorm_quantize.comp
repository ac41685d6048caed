#version 450
// out[r] = x[r] / sqrt(mean(x[r]^2) + eps) * w as rmsnorm.comp makes it (with `add`, after
// x[r] += a[r] as add_rmsnorm.comp), then the row quantized for the products that read it,
// as quantize_q8_0 and quantize_q8_k quantize it (kind 0: Q8_0, 1: Q8_1, 2: Q8_K): a norm and
// its products' quantization in one dispatch. n is a whole number of blocks. One workgroup
// per row.
#extension GL_GOOGLE_include_directive : require
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer Weight { float w[]; };
layout(std430, binding = 1) buffer X { float x[]; };
layout(std430, binding = 2) readonly buffer Addend { float a[]; };
layout(std430, binding = 3) writeonly buffer Quants { int q[]; };
// read back by other threads of the group for the quantization
layout(std430, binding = 4) coherent buffer Output { float y[]; };
layout(std430, binding = 5) writeonly buffer Scales { float d[]; };
layout(push_constant) uniform Params { uint n; float eps; uint add, kind; } p;

#include "half.glsl"
#define QUANTIZE_INPUT(i) y[i]
#include "quantize.glsl"

shared float partial[64];

void main()
{
    uint tid = gl_LocalInvocationID.x, row = gl_WorkGroupID.x * p.n;
    float sum = 0.0;
    for (uint i = tid; i < p.n; i += 64u) {
        if (p.add != 0u)
            x[row + i] += a[row + i]; // each element is this thread's alone
        sum += x[row + i] * x[row + i];
    }
    partial[tid] = sum;
    barrier();
    sum = 0.0; // every thread adds the partial sums alike, as rmsnorm.comp
    for (uint i = 0u; i < 64u; i++)
        sum += partial[i];
    float scale = 1.0 / sqrt(sum / float(p.n) + p.eps);
    for (uint i = tid; i < p.n; i += 64u)
        y[row + i] = x[row + i] * scale * w[i];
    memoryBarrierBuffer();
    barrier();
    uint block = p.kind == 2u ? 256u : 32u;
    for (uint b = row / block + tid; b < (row + p.n) / block; b += 64u) {
        if (p.kind == 2u)
            quantize_q8_k_block(b);
        else
            quantize_q8_0_block(b, p.kind == 1u);
    }
}

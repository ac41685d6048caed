#version 450
// x[r] += d[r], then out[r] = x[r] / sqrt(mean(x[r]^2) + eps) * w: a residual and the RMSNorm
// after it in one dispatch, each value and sum as binary.comp's add and rmsnorm.comp's norm
// make them. One workgroup per row.
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer Weight { float w[]; };
layout(std430, binding = 1) buffer X { float x[]; };
layout(std430, binding = 2) readonly buffer Addend { float d[]; };
layout(std430, binding = 4) writeonly buffer Output { float y[]; };
layout(push_constant) uniform Params { uint n; float eps; } p;

shared float partial[64];

void main()
{
    uint tid = gl_LocalInvocationID.x, row = gl_WorkGroupID.x * p.n;
    float sum = 0.0;
    for (uint i = tid; i < p.n; i += 64u) {
        x[row + i] += d[row + i]; // each element is this thread's alone
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
}

#version 450
// out[r] = x[r] / sqrt(mean(x[r]^2) + eps) * w: one workgroup per row.
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer Weight { float w[]; };
layout(std430, binding = 1) readonly buffer Input { float x[]; };
layout(std430, binding = 4) writeonly buffer Output { float y[]; };
layout(push_constant) uniform Params { uint n; float eps; } p;

shared float partial[64];

void main()
{
    uint tid = gl_LocalInvocationID.x, row = gl_WorkGroupID.x * p.n;
    float sum = 0.0;
    for (uint i = tid; i < p.n; i += 64u)
        sum += x[row + i] * x[row + i];
    partial[tid] = sum;
    barrier();
    for (uint s = 32u; s > 0u; s >>= 1) {
        if (tid < s)
            partial[tid] += partial[tid + s];
        barrier();
    }
    float scale = 1.0 / sqrt(partial[0] / float(p.n) + p.eps);
    for (uint i = tid; i < p.n; i += 64u)
        y[row + i] = x[row + i] * scale * w[i];
}

#version 450
// In place per row of n: x = softmax(scale * x). One group per row.
layout(local_size_x = 64) in;
layout(std430, binding = 0) buffer X { float x[]; };
layout(push_constant) uniform Params { uint n; float scale; } p;

shared float reduce[64];

void main()
{
    uint tid = gl_LocalInvocationID.x, row = gl_WorkGroupID.x * p.n;
    float m = -1.0 / 0.0;
    for (uint i = tid; i < p.n; i += 64u)
        m = max(m, p.scale * x[row + i]);
    // every thread reduces the 64 values alike: one barrier each (see matmul.glsl)
    reduce[tid] = m;
    barrier();
    for (uint i = 0u; i < 64u; i++)
        m = max(m, reduce[i]);
    barrier();
    float sum = 0.0;
    for (uint i = tid; i < p.n; i += 64u) {
        float e = exp(p.scale * x[row + i] - m);
        x[row + i] = e;
        sum += e;
    }
    reduce[tid] = sum;
    barrier();
    sum = 0.0;
    for (uint i = 0u; i < 64u; i++)
        sum += reduce[i];
    float inv = 1.0 / sum;
    for (uint i = tid; i < p.n; i += 64u)
        x[row + i] *= inv;
}

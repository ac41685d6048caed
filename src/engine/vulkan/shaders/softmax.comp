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
    reduce[tid] = m;
    barrier();
    for (uint r = 32u; r > 0u; r >>= 1) {
        if (tid < r)
            reduce[tid] = max(reduce[tid], reduce[tid + r]);
        barrier();
    }
    m = reduce[0];
    barrier();
    float sum = 0.0;
    for (uint i = tid; i < p.n; i += 64u) {
        float e = exp(p.scale * x[row + i] - m);
        x[row + i] = e;
        sum += e;
    }
    reduce[tid] = sum;
    barrier();
    for (uint r = 32u; r > 0u; r >>= 1) {
        if (tid < r)
            reduce[tid] += reduce[tid + r];
        barrier();
    }
    float inv = 1.0 / reduce[0];
    for (uint i = tid; i < p.n; i += 64u)
        x[row + i] *= inv;
}

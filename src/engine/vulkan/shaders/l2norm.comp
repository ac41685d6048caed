#version 450
// In place: x = x / |x| over spans of n floats, computed as the CPU's
// delta_net_l2_normalize (an RMSNorm with eps / n, then times 1/sqrt(n)). Workgroup (s, r)
// takes span s of row r, the rows row_stride floats apart.
layout(local_size_x = 64) in;
layout(std430, binding = 4) buffer X { float x[]; };
layout(push_constant) uniform Params { uint n, row_stride; float eps; } p;

shared float partial[64];

void main()
{
    uint tid = gl_LocalInvocationID.x;
    uint at = gl_WorkGroupID.y * p.row_stride + gl_WorkGroupID.x * p.n;
    float sum = 0.0;
    for (uint i = tid; i < p.n; i += 64u)
        sum += x[at + i] * x[at + i];
    partial[tid] = sum;
    barrier();
    sum = 0.0; // every thread adds the partial sums alike: one barrier (see matmul.glsl)
    for (uint i = 0u; i < 64u; i++)
        sum += partial[i];
    float scale = 1.0 / sqrt(sum / float(p.n) + p.eps / float(p.n));
    float after = 1.0 / sqrt(float(p.n));
    for (uint i = tid; i < p.n; i += 64u)
        x[at + i] = x[at + i] * scale * after;
}

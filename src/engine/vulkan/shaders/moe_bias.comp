#version 450
// In place: each (token, expert) pair's row of n floats plus its expert's row of a bias
// holding a row per expert (gpt-oss's expert biases), grid-stride over count = pairs * n.
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer Bias { float bias[]; };
layout(std430, binding = 1) readonly buffer Ids { uint ids[]; };
layout(std430, binding = 4) buffer Rows { float y[]; };
layout(push_constant) uniform Params { uint count, n; } p;

void main()
{
    for (uint i = gl_GlobalInvocationID.x; i < p.count; i += gl_NumWorkGroups.x * 256u)
        y[i] += bias[ids[i / p.n] * p.n + i % p.n];
}

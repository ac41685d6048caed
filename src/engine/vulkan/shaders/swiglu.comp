#version 450
// In place: gate = silu(gate) * up, over n elements (grid-stride).
layout(local_size_x = 256) in;
layout(std430, binding = 0) buffer Gate { float g[]; };
layout(std430, binding = 1) readonly buffer Up { float u[]; };
layout(push_constant) uniform Params { uint n; } p;

void main()
{
    for (uint i = gl_GlobalInvocationID.x; i < p.n; i += gl_NumWorkGroups.x * 256u)
        g[i] = g[i] / (1.0 + exp(-g[i])) * u[i];
}

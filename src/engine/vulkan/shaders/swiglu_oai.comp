#version 450
// In place, gpt-oss's clamped SwiGLU: g = min(gate, limit), u = clamp(up, -limit, limit),
// gate = g * sigmoid(alpha * g) * (u + 1), over n elements (grid-stride).
layout(local_size_x = 256) in;
layout(std430, binding = 0) buffer Gate { float g[]; };
layout(std430, binding = 1) readonly buffer Up { float u[]; };
layout(push_constant) uniform Params { uint n; float alpha, limit; } p;

void main()
{
    for (uint i = gl_GlobalInvocationID.x; i < p.n; i += gl_NumWorkGroups.x * 256u) {
        float x = min(g[i], p.limit), y = clamp(u[i], -p.limit, p.limit);
        g[i] = x / (1.0 + exp(p.alpha * -x)) * (y + 1.0);
    }
}

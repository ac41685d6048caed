#version 450
// Gated DeltaNet's gates per (token, value head), in place of their logits (delta_net.c):
// decay = exp(softplus(alpha + dt[h]) * a[h]), softplus linear above 20 as the CPU's, and
// strength = sigmoid(beta). Grid-stride over n_tokens * n_heads.
layout(local_size_x = 256) in;
layout(std430, binding = 0) buffer Alpha { float alpha[]; };
layout(std430, binding = 1) buffer Beta { float beta[]; };
layout(std430, binding = 2) readonly buffer Dt { float dt[]; };
layout(std430, binding = 3) readonly buffer A { float a[]; };
layout(push_constant) uniform Params { uint n, n_heads; } p;

void main()
{
    for (uint i = gl_GlobalInvocationID.x; i < p.n; i += gl_NumWorkGroups.x * 256u) {
        uint h = i % p.n_heads;
        float x = alpha[i] + dt[h];
        float softplus = x > 20.0 ? x : log(1.0 + exp(x));
        alpha[i] = exp(softplus * a[h]);
        beta[i] = 1.0 / (1.0 + exp(-beta[i]));
    }
}

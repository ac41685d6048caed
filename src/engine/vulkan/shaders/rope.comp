#version 450
// RoPE in place on n_heads heads of head_dim per token, with the token's cos/sin row
// (n_rot floats: cos and sin of pair i at 2i, 2i + 1) computed on the CPU. mode 0 rotates
// adjacent pairs (llama), 1 the halves of the rotated span (NEOX), 2 each half of the span
// on its own as NEOX does the whole (gemma4v's tower): pair i < n_rot / 4 is (i, i + n_rot /
// 4), pair n_rot / 4 + i is (n_rot / 2 + i, n_rot / 2 + i + n_rot / 4). One group per (token,
// head).
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer CosSin { float cs[]; };
layout(std430, binding = 1) buffer Heads { float x[]; };
layout(push_constant) uniform Params { uint n_heads, head_dim, n_rot, mode; } p;

void main()
{
    uint t = gl_WorkGroupID.x, h = gl_WorkGroupID.y, half_rot = p.n_rot / 2u;
    uint head = (t * p.n_heads + h) * p.head_dim;
    for (uint i = gl_LocalInvocationID.x; i < half_rot; i += 64u) {
        float c = cs[t * p.n_rot + 2u * i], s = cs[t * p.n_rot + 2u * i + 1u];
        uint quarter = half_rot / 2u;
        uint a = p.mode == 0u ? 2u * i : p.mode == 1u ? i : i / quarter * half_rot + i % quarter;
        uint b = p.mode == 0u ? a + 1u : p.mode == 1u ? i + half_rot : a + quarter;
        float x0 = x[head + a], x1 = x[head + b];
        x[head + a] = x0 * c - x1 * s;
        x[head + b] = x0 * s + x1 * c;
    }
}

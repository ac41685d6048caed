#version 450
// Keys or values of a batch into a layer's cache, laid out [sequence][KV head][cell][dim]
// as F32 or F16 (two to a word). tokens: (sequence, cell) per token. One group per
// (token, KV head).
#extension GL_GOOGLE_include_directive : require
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer Tokens { uint tokens[]; };
layout(std430, binding = 1) readonly buffer Input { float x[]; };
layout(std430, binding = 4) writeonly buffer Cache { uint cache[]; };
layout(push_constant) uniform Params { uint n_head_kv, head_dim, n_cells, f16; } p;

#include "half.glsl"

void main()
{
    uint t = gl_WorkGroupID.x, h = gl_WorkGroupID.y;
    uint seq = tokens[2u * t], cell = tokens[2u * t + 1u];
    uint src = (t * p.n_head_kv + h) * p.head_dim;
    uint dst = ((seq * p.n_head_kv + h) * p.n_cells + cell) * p.head_dim;
    if (p.f16 != 0u) {
        for (uint i = gl_LocalInvocationID.x; i < p.head_dim / 2u; i += 64u)
            cache[dst / 2u + i] = pack_halves(x[src + 2u * i], x[src + 2u * i + 1u]);
    } else {
        for (uint i = gl_LocalInvocationID.x; i < p.head_dim; i += 64u)
            cache[dst + i] = floatBitsToUint(x[src + i]);
    }
}

#version 450
// Keys or values of a batch into a layer's cache, laid out [sequence][KV head][cell][dim]
// as F32 or F16 (two to a word). tokens: (sequence, cell) per token. Keys may be turned on
// the way (n_rot > 0), each value as rope.comp turns it in place (mode 0: adjacent pairs, 1:
// NEOX's halves), so that the RoPE of the keys and their store are one dispatch; the input
// stays as it was. One group per (token, KV head).
#extension GL_GOOGLE_include_directive : require
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer Tokens { uint tokens[]; };
layout(std430, binding = 1) readonly buffer Input { float x[]; };
layout(std430, binding = 2) readonly buffer CosSin { float cs[]; };
layout(std430, binding = 4) writeonly buffer Cache { uint cache[]; };
layout(push_constant) uniform Params { uint n_head_kv, head_dim, n_cells, f16, n_rot, mode; } p;

#include "half.glsl"

// Element i of the head at src of token t, turned where rope.comp turns it.
float value(uint t, uint src, uint i)
{
    uint half_rot = p.n_rot / 2u;
    if (i >= 2u * half_rot)
        return x[src + i];
    bool first = p.mode == 0u ? (i & 1u) == 0u : i < half_rot;
    uint pair = p.mode == 0u ? i / 2u : first ? i : i - half_rot;
    uint a = p.mode == 0u ? 2u * pair : pair;
    uint b = p.mode == 0u ? 2u * pair + 1u : pair + half_rot;
    float c = cs[t * p.n_rot + 2u * pair], s = cs[t * p.n_rot + 2u * pair + 1u];
    float x0 = x[src + a], x1 = x[src + b];
    return first ? x0 * c - x1 * s : x0 * s + x1 * c;
}

void main()
{
    uint t = gl_WorkGroupID.x, h = gl_WorkGroupID.y;
    uint seq = tokens[2u * t], cell = tokens[2u * t + 1u];
    uint src = (t * p.n_head_kv + h) * p.head_dim;
    uint dst = ((seq * p.n_head_kv + h) * p.n_cells + cell) * p.head_dim;
    if (p.f16 != 0u) {
        for (uint i = gl_LocalInvocationID.x; i < p.head_dim / 2u; i += 64u)
            cache[dst / 2u + i] = pack_halves(value(t, src, 2u * i), value(t, src, 2u * i + 1u));
    } else {
        for (uint i = gl_LocalInvocationID.x; i < p.head_dim; i += 64u)
            cache[dst + i] = floatBitsToUint(value(t, src, i));
    }
}

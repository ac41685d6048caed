#version 450
// Cells of one sequence's cache rows moved (src_cell + i to dst_cell + i: the ranges apart,
// or the same cells, turned in place), keys turned by the RoPE angles of cos_sin on their
// first n_rot components (mode 0: adjacent pairs, 1: the halves of the span) when rotate is
// set, rows and spans of any width. A thread takes one rotated pair at a time, reading both
// components before it writes either, so no thread reads what another writes even in
// place; the rest of the row (from n_rot on, a whole number of words) is copied word for
// word. F16 components share a 32-bit word: adjacent pairs fill one, written whole, but a
// word of the halves holds components of two pairs (two threads'), so each half of it is
// written on its own bits by an atomic and and or. One group per (cell, KV head).
#extension GL_GOOGLE_include_directive : require
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer CosSin { float cs[]; };
layout(std430, binding = 4) buffer Cache { uint cache[]; };
layout(push_constant) uniform Params {
    uint n_head_kv, head_dim, n_cells, f16, seq, src_cell, dst_cell, n_rot, mode, rotate;
} p;

#include "half.glsl"

float cached(uint index)
{
    uint word = cache[p.f16 != 0u ? index / 2u : index];
    return p.f16 != 0u ? unpackHalf2x16(word >> ((index & 1u) * 16u)).x : uintBitsToFloat(word);
}

// one component, alone in its word's bits
void store(uint index, float value)
{
    if (p.f16 == 0u) {
        cache[index] = floatBitsToUint(value);
        return;
    }
    uint shift = (index & 1u) * 16u, bits = half_bits(value);
    atomicAnd(cache[index / 2u], ~(0xffffu << shift));
    atomicOr(cache[index / 2u], bits << shift);
}

void main()
{
    uint cell = gl_WorkGroupID.x, h = gl_WorkGroupID.y, tid = gl_LocalInvocationID.x;
    uint head = (p.seq * p.n_head_kv + h) * p.n_cells;
    uint from = (head + p.src_cell + cell) * p.head_dim, to = (head + p.dst_cell + cell) * p.head_dim;
    uint turned = p.rotate != 0u ? p.n_rot : 0u, half_rot = turned / 2u;
    for (uint i = tid; i < half_rot; i += 64u) {
        uint a = p.mode == 0u ? 2u * i : i, b = p.mode == 0u ? 2u * i + 1u : i + half_rot;
        float x0 = cached(from + a), x1 = cached(from + b);
        float c = cs[2u * i], s = cs[2u * i + 1u];
        float y0 = x0 * c - x1 * s, y1 = x0 * s + x1 * c;
        if (p.f16 != 0u && p.mode == 0u) {
            cache[(to + a) / 2u] = pack_halves(y0, y1);
        } else {
            store(to + a, y0);
            store(to + b, y1);
        }
    }
    if (p.f16 != 0u) {
        for (uint w = turned / 2u + tid; w < p.head_dim / 2u; w += 64u)
            cache[to / 2u + w] = cache[from / 2u + w];
    } else {
        for (uint d = turned + tid; d < p.head_dim; d += 64u)
            cache[to + d] = cache[from + d];
    }
}

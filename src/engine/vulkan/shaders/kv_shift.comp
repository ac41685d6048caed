#version 450
// Cells of one sequence's cache rows moved down (src_cell + i to dst_cell + i, the ranges
// apart), keys turned by the RoPE angles of cos_sin on their first n_rot components (mode 0:
// adjacent pairs, 1: the halves of the span) when rotate is set. A row's first 256
// components are read into shared memory first, so F16 words are written whole; the rest
// (never turned: n_rot is at most 256) are copied word for word. One group per (cell, KV
// head).
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer CosSin { float cs[]; };
layout(std430, binding = 4) buffer Cache { uint cache[]; };
layout(push_constant) uniform Params {
    uint n_head_kv, head_dim, n_cells, f16, seq, src_cell, dst_cell, n_rot, mode, rotate;
} p;

shared float row[256];

float cached(uint index)
{
    uint word = cache[p.f16 != 0u ? index / 2u : index];
    return p.f16 != 0u ? unpackHalf2x16(word >> ((index & 1u) * 16u)).x : uintBitsToFloat(word);
}

float turned(uint d)
{
    if (p.rotate == 0u || d >= p.n_rot)
        return row[d];
    uint half_rot = p.n_rot / 2u;
    uint i = p.mode == 0u ? d / 2u : d % half_rot;
    bool second = p.mode == 0u ? (d & 1u) != 0u : d >= half_rot;
    uint a = p.mode == 0u ? 2u * i : i, b = p.mode == 0u ? 2u * i + 1u : i + half_rot;
    float c = cs[2u * i], s = cs[2u * i + 1u];
    return second ? row[a] * s + row[b] * c : row[a] * c - row[b] * s;
}

void main()
{
    uint cell = gl_WorkGroupID.x, h = gl_WorkGroupID.y, tid = gl_LocalInvocationID.x;
    uint head = (p.seq * p.n_head_kv + h) * p.n_cells;
    uint from = (head + p.src_cell + cell) * p.head_dim, to = (head + p.dst_cell + cell) * p.head_dim;
    uint held = min(p.head_dim, 256u);
    for (uint d = tid; d < held; d += 64u)
        row[d] = cached(from + d);
    barrier();
    if (p.f16 != 0u) {
        for (uint w = tid; w < held / 2u; w += 64u)
            cache[to / 2u + w] = packHalf2x16(vec2(turned(2u * w), turned(2u * w + 1u)));
        for (uint w = held / 2u + tid; w < p.head_dim / 2u; w += 64u)
            cache[to / 2u + w] = cache[from / 2u + w];
    } else {
        for (uint d = tid; d < held; d += 64u)
            cache[to + d] = floatBitsToUint(turned(d));
        for (uint d = held + tid; d < p.head_dim; d += 64u)
            cache[to + d] = cache[from + d];
    }
}

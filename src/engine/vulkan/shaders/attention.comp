#version 450
// Causal attention of one query head of one token over its sequence's cached cells
// 0..pos (kv_store.comp's layout), or with a window the last `window` of them, or (last_at
// not 0) up to the cell tokens[last_at + t] instead of its own, as an image's tokens that see
// each other both ways do, and (first_at not 0) from the cell tokens[first_at + t] on, as a
// vision tower's windows of rows do, and (around not 0) only the cells less than `around`
// from its own on either side, as an encoder's sliding layers do; an online softmax over
// chunks of 64 cells: each thread scores one cell of the chunk, then each thread folds the
// chunk into its share of the output dimensions. Scores are scale * cap(q . k),
// cap(s) = softcap * tanh(s / softcap) when softcap > 0. One group per (token, head). Heads
// of any even width: the query is held 256 dimensions at a time (a wider one is reloaded
// chunk by chunk for each chunk of cells), and the output is made 256 dimensions a pass, each
// pass scoring the cells again (latent attention's heads are 576 and 512 wide).
// With sinks (gpt-oss), each head's sink logit joins the softmax's denominator and no value.
// With ALiBi (jina-bert-v2), binding 5 holds each head's slope instead, and a score gains
// -slope * |its cell - the token's own| after the scale.
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer Tokens { uint tokens[]; };
layout(std430, binding = 1) readonly buffer Queries { float q[]; };
layout(std430, binding = 2) readonly buffer Keys { uint k[]; };
layout(std430, binding = 3) readonly buffer Values { uint v[]; };
layout(std430, binding = 4) writeonly buffer Output { float o[]; };
layout(std430, binding = 5) readonly buffer Heads { float per_head[]; }; // sink or slope
layout(push_constant) uniform Params {
    uint n_head, n_head_kv, head_dim_k, head_dim_v, n_cells, f16;
    float scale, softcap;
    uint window, last_at;
    uint has_sinks, first_at;
    uint around, alibi;
} p;

shared float query[256];
shared float weights[64];
shared float reduce[64];

float cached(uint index, bool is_key)
{
    uint word = is_key ? k[p.f16 != 0u ? index / 2u : index] : v[p.f16 != 0u ? index / 2u : index];
    if (p.f16 == 0u)
        return uintBitsToFloat(word);
    return unpackHalf2x16(word >> ((index & 1u) * 16u)).x;
}

void main()
{
    uint t = gl_WorkGroupID.x, h = gl_WorkGroupID.y, tid = gl_LocalInvocationID.x;
    uint kv_head = h / (p.n_head / p.n_head_kv);
    uint seq = tokens[2u * t], own = tokens[2u * t + 1u];
    uint n_visible = (p.last_at != 0u ? tokens[p.last_at + t] : own) + 1u;
    uint begin = p.window != 0u && own + 1u > p.window ? own + 1u - p.window : 0u;
    if (p.first_at != 0u)
        begin = tokens[p.first_at + t];
    if (p.around != 0u) { // written so that no sum passes own + around
        if (own + 1u > p.around)
            begin = max(begin, own + 1u - p.around);
        if (n_visible - own > p.around)
            n_visible = own + p.around;
    }
    float slope = p.alibi != 0u ? per_head[h] : 0.0;
    uint first = (seq * p.n_head_kv + kv_head) * p.n_cells;
    uint q_base = (t * p.n_head + h) * p.head_dim_k;
    uint n_query_chunks = (p.head_dim_k + 255u) / 256u;
    if (n_query_chunks == 1u) {
        for (uint i = tid; i < p.head_dim_k; i += 64u)
            query[i] = q[q_base + i];
        barrier();
    }

    for (uint d0 = 0u; d0 < p.head_dim_v; d0 += 256u) {
        float acc[4] = float[4](0.0, 0.0, 0.0, 0.0); // dims d0 + tid, d0 + tid + 64, ...
        float running_max = -1.0 / 0.0, running_sum = 0.0;
        for (uint c0 = begin; c0 < n_visible; c0 += 64u) {
            uint cell = c0 + tid;
            float dot = 0.0;
            for (uint i0 = 0u; i0 < p.head_dim_k; i0 += 256u) {
                uint width = min(256u, p.head_dim_k - i0);
                if (n_query_chunks > 1u) {
                    barrier(); // the previous chunk's dot products are done with query
                    for (uint i = tid; i < width; i += 64u)
                        query[i] = q[q_base + i0 + i];
                    barrier();
                }
                if (cell < n_visible)
                    for (uint i = 0u; i < width; i++)
                        dot += query[i] * cached((first + cell) * p.head_dim_k + i0 + i, true);
            }
            float s = -1.0 / 0.0;
            if (cell < n_visible) {
                if (p.softcap > 0.0)
                    dot = p.softcap * tanh(dot / p.softcap);
                s = p.scale * dot;
                if (p.alibi != 0u) // as the CPU's: the scaled score, then the distance's term
                    s += slope * -float(cell > own ? cell - own : own - cell);
            }
            reduce[tid] = s;
            barrier();
            float chunk_max = -1.0 / 0.0; // every thread alike: one barrier (see matmul.glsl)
            for (uint j = 0u; j < 64u; j++)
                chunk_max = max(chunk_max, reduce[j]);
            float new_max = max(running_max, chunk_max);
            weights[tid] = cell < n_visible ? exp(s - new_max) : 0.0;
            barrier();
            float rescale = exp(running_max - new_max), chunk_sum = 0.0;
            uint n = min(64u, n_visible - c0);
            for (uint j = 0u; j < n; j++)
                chunk_sum += weights[j];
            running_sum = running_sum * rescale + chunk_sum;
            for (uint a = 0u; a < 4u; a++) {
                uint d = d0 + tid + 64u * a;
                if (d >= p.head_dim_v)
                    break;
                float sum = 0.0;
                for (uint j = 0u; j < n; j++)
                    sum += weights[j] * cached((first + c0 + j) * p.head_dim_v + d, false);
                acc[a] = acc[a] * rescale + sum;
            }
            running_max = new_max;
            barrier(); // weights and reduce are rewritten by the next chunk
        }
        if (p.has_sinks != 0u) {
            // both relative to the larger of the scores' maximum and the sink, as the CPU's
            float sink = per_head[h], top = max(sink, running_max), keep = exp(running_max - top);
            float inv = keep / (running_sum * keep + exp(sink - top));
            for (uint a = 0u; a < 4u; a++)
                acc[a] *= inv;
            running_sum = 1.0;
        }
        for (uint a = 0u; a < 4u; a++) {
            uint d = d0 + tid + 64u * a;
            if (d < p.head_dim_v)
                o[(t * p.n_head + h) * p.head_dim_v + d] = acc[a] / running_sum;
        }
    }
}

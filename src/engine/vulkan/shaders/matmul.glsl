// y[t][row] = W[row] . x[t]: one workgroup per row and group of up to TOKENS tokens, its
// threads over the row's elements (or runs of 8 of a quantized row), each weight read once
// for all the group's tokens and the sums added in shared memory. F32 weights take x as it
// is, F16 and BF16 weights x rounded to their type, Q4_0, Q5_0, Q8_0, MXFP4 and IQ4_NL
// weights x quantized to Q8_0 (quantize_q8_0.comp), Q4_1 and Q5_1 weights to Q8_1 (the
// same, with each block's scaled sum for the weights' minimum), the K-quants Q2_K..Q6_K,
// IQ4_XS and the lattice IQ types x quantized to Q8_K (quantize_q8_k.comp): the partners the
// CPU kernels use, so both sides multiply the same numbers. Quantized types sum integer products per
// (sub-)block and scale them, as the CPU's dot products do; the integer products go four at
// a time (dot4), through the device's integer dot product instruction in the variant built
// with INT_DOT.
// It makes generation's and short batches' products; a prompt's past vk_ops.c's threshold
// take matmul_tiled.glsl, which unpacks each weight once for a tile of 64 tokens.
// An expert product (pairs_per_x > 0, vk_moe.c) takes one (token, expert) pair a group:
// the pair's expert (ids) picks its rows among the experts this buffer holds, its input is
// row pair / pairs_per_x of x, and its output row the pair's. A tiled one (tiled != 0)
// takes a tile of moe_group.comp a group (ids: its expert, first slot and count): up to
// TOKENS slots of one expert, whose input and output rows are the slots'.
#extension GL_GOOGLE_include_directive : require
#if defined(INT_DOT)
#extension GL_EXT_spirv_intrinsics : require
#endif

layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer Weights { uint w[]; };
layout(std430, binding = 1) readonly buffer Input { float x[]; };
layout(std430, binding = 2) readonly buffer InputQuants { int xq[]; }; // 4 quants a word
// a block's scale; Q8_1 blocks take two floats, the scale and the scaled sum
layout(std430, binding = 3) readonly buffer InputScales { float xd[]; };
layout(std430, binding = 4) writeonly buffer Output { float y[]; };
layout(std430, binding = 5) readonly buffer ExpertIds { uint ids[]; };
// n_out rows of W (a part of a matrix split across buffers, maybe), written at columns
// row0.. of y's rows of ldy; for an expert product n_out rows an expert, experts
// [expert0, expert0 + n_experts) in this buffer
layout(push_constant) uniform Params {
    uint n_in, n_out, n_tokens, row_bytes, rows_per_z, row0, ldy, pairs_per_x, expert0, n_experts;
    uint tiled;
} p;

#include "common.glsl"
#include "matmul_runs.glsl"

// tokens a workgroup takes (vk_ops.c dispatches by the same number)
#define TOKENS 8u

shared float partial[TOKENS][64];

void main()
{
    uint row = gl_WorkGroupID.x + gl_WorkGroupID.z * p.rows_per_z;
    uint t0 = gl_WorkGroupID.y * TOKENS;
    if (row >= p.n_out) // the whole group leaves together
        return;
    uint n_tok = min(TOKENS, p.n_tokens - t0);
    uint tid = gl_LocalInvocationID.x;
    uint base = row * p.row_bytes;
    uint x0 = t0; // the input row of the group's first token
    if (p.pairs_per_x > 0u) {
        uint expert;
        if (p.tiled != 0u) {
            uint tile = 3u * gl_WorkGroupID.y;
            n_tok = ids[tile + 2u];
            if (n_tok == 0u)
                return; // beyond the tiles the grouping made
            expert = ids[tile];
            t0 = ids[tile + 1u];
            x0 = t0;
        } else {
            t0 = gl_WorkGroupID.y;
            expert = ids[t0];
            n_tok = 1u;
            x0 = t0 / p.pairs_per_x;
        }
        if (expert < p.expert0 || expert - p.expert0 >= p.n_experts)
            return; // another buffer's expert
        base = ((expert - p.expert0) * p.n_out + row) * p.row_bytes;
    }
    float sum[TOKENS];
    for (uint k = 0u; k < TOKENS; k++)
        sum[k] = 0.0;
#if defined(WEIGHT_F32) || defined(WEIGHT_F16) || defined(WEIGHT_BF16)
    for (uint i = tid; i < p.n_in; i += 64u) {
#if defined(WEIGHT_F32)
        float wi = uintBitsToFloat(w[(base >> 2) + i]);
#elif defined(WEIGHT_F16)
        float wi = half_at(base + 2u * i);
#else
        float wi = bfloat_at(base + 2u * i);
#endif
        for (uint k = 0u; k < n_tok; k++) {
#if defined(WEIGHT_F32)
            sum[k] += wi * x[(x0 + k) * p.n_in + i];
#elif defined(WEIGHT_F16)
            sum[k] += wi * round_half(x[(x0 + k) * p.n_in + i]);
#else
            sum[k] += wi * round_bfloat(x[(x0 + k) * p.n_in + i]);
#endif
        }
    }
#else
    // runs of 8 elements, one run a thread at a time (weight_run): a run lies in one
    // (sub-)block; its weights are packed as signed bytes into two words, q0 and q1, to meet
    // the two words of activation quants, whose integer products are summed (dot4) and then
    // scaled. A lattice type's grid stays in its buffer here (stage_tables copies IQ4's
    // values only): a workgroup of one row looks up about as many entries as a copy of the
    // grid would read
    stage_tables(tid, 64u);
    uint n_blocks = p.n_in / BLOCK_ELEMS;
    for (uint run = tid; run < p.n_in / 8u; run += 64u) {
        uint b = run / (BLOCK_ELEMS / 8u);
        uint e0 = (run % (BLOCK_ELEMS / 8u)) * 8u; // the run's first element in its block
        WeightRun r = weight_run(base, run);
        for (uint k = 0u; k < n_tok; k++) {
            uint ab = (x0 + k) * n_blocks + b;
            // the run's two words of activation quants
            uint aw = ab * (BLOCK_ELEMS / 4u) + e0 / 4u;
            int a0 = xq[aw], a1 = xq[aw + 1u];
            int sumi = dot4(int(r.q0), a0) + dot4(int(r.q1), a1);
#if defined(WEIGHT_Q4_0) || defined(WEIGHT_Q5_0) || defined(WEIGHT_Q8_0) || \
    defined(WEIGHT_MXFP4) || defined(WEIGHT_IQ4_NL)
            sum[k] += float(sumi) * r.scale * xd[ab];
#elif defined(WEIGHT_Q4_1) || defined(WEIGHT_Q5_1)
            sum[k] += float(sumi) * r.scale * xd[2u * ab] + r.low * xd[2u * ab + 1u];
#elif defined(WEIGHT_Q2_K) || defined(WEIGHT_Q4_K) || defined(WEIGHT_Q5_K)
            int suma = dot4(ONES, a0) + dot4(ONES, a1);
            sum[k] += xd[ab] * (r.scale * float(r.sc * sumi) - r.low * float(r.m * suma));
#else
            sum[k] += xd[ab] * r.scale * float(r.sc * sumi);
#endif
        }
    }
#endif
    // one barrier, then a thread per token adds the 64 partial sums: a tree of barriers
    // costs more than it saves on CPU implementations (lavapipe runs each barrier as a
    // switch between all 64 invocations)
    for (uint k = 0u; k < TOKENS; k++)
        partial[k][tid] = sum[k];
    barrier();
    if (tid < n_tok) {
        float total = 0.0;
        for (uint i = 0u; i < 64u; i++)
            total += partial[tid][i];
        y[(t0 + tid) * p.ldy + p.row0 + row] = total;
    }
}

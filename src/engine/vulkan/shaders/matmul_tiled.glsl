// y[t][row] = W[row] . x[t] for prompts: a workgroup takes a tile of TILE_ROWS rows by
// TILE_TOKENS tokens, so each weight is read and unpacked once for all the tile's tokens
// (matmul.glsl unpacks each row again for every 8 tokens). The tile's rows and tokens go
// through the inner dimension a chunk at a time: the invocations stage the chunk's weights
// and activations in shared memory, wait, then each multiplies BLOCK_ROWS rows by
// BLOCK_TOKENS tokens of the chunk into sums it keeps in registers.
// The numbers multiplied are matmul.glsl's, the CPU's partners: F16 and BF16 weights meet x
// rounded to their type; quantized weights meet x quantized as vk_ops.c quantized it, a run
// of 8 weights (matmul_runs.glsl) staged as two words of signed bytes and the floats that
// scale its integer sum (scale) and add its minimum's part (low), a run of 8 activation
// quants as two words and their block's scale and the run's part of that minimum term.
// vk_ops.c dispatches a group per tile (rows beyond the device's group count in further z
// layers) and chooses this kernel past a number of tokens where the device's limits allow
// TILE_THREADS invocations and the shared memory below.
// An expert product (experts != 0, vk_moe.c) takes a tile of moe_group.comp a group
// (tiles: its expert, first slot and count): up to TILE_TOKENS slots of one expert, whose
// input and output rows are the slots', its rows those of the expert among the experts
// this buffer holds.
#extension GL_GOOGLE_include_directive : require
#if defined(INT_DOT)
#extension GL_EXT_spirv_intrinsics : require
#endif

#define TILE_ROWS 64u
#define TILE_TOKENS 64u
#define TILE_THREADS 256u
// each invocation's block of the tile: rows tr, tr + 16, .. and tokens tt, tt + 16, ..
#define BLOCK_ROWS 4u
#define BLOCK_TOKENS 4u
#define ROW_THREADS (TILE_ROWS / BLOCK_ROWS)

layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer Weights { uint w[]; };
layout(std430, binding = 1) readonly buffer Input { float x[]; };
layout(std430, binding = 2) readonly buffer InputQuants { int xq[]; }; // 4 quants a word
// a block's scale; Q8_1 blocks take two floats, the scale and the scaled sum
layout(std430, binding = 3) readonly buffer InputScales { float xd[]; };
layout(std430, binding = 4) writeonly buffer Output { float y[]; };
layout(std430, binding = 5) readonly buffer ExpertTiles { uint tiles[]; };
// n_out rows of W, written at columns row0.. of y's rows of ldy; tiles_per_z row tiles a
// z layer of the dispatch; for an expert product n_out rows an expert, experts
// [expert0, expert0 + n_experts) in this buffer
layout(push_constant) uniform Params {
    uint n_in, n_out, n_tokens, row_bytes, tiles_per_z, row0, ldy, expert0, n_experts, experts;
} p;

#if defined(LATTICE_TYPE)
// a tile's 64 rows look each entry of the grid up many times: a copy in shared memory
#define GRIDS_SHARED
#endif
#include "common.glsl"
#include "matmul_runs.glsl"

#if defined(WEIGHT_F32) || defined(WEIGHT_F16) || defined(WEIGHT_BF16)
// elements of the inner dimension a chunk; each side padded by one column, so that the
// stores of consecutive invocations (consecutive elements of a row) fall in distinct banks
#define CHUNK 16u
shared float w_tile[CHUNK][TILE_ROWS + 1u];
shared float x_tile[CHUNK][TILE_TOKENS + 1u];
#else
// runs of 8 a chunk: with TILE_ROWS * RUNS == TILE_THREADS each invocation stages one run
// of weights and one of activations
#define RUNS 4u
shared uvec2 w_quants[RUNS][TILE_ROWS];
shared float w_scale[RUNS][TILE_ROWS];
shared ivec2 x_quants[RUNS][TILE_TOKENS];
shared float x_scale[RUNS][TILE_TOKENS];
#if defined(WEIGHT_Q4_1) || defined(WEIGHT_Q5_1) || defined(WEIGHT_Q2_K) || \
    defined(WEIGHT_Q4_K) || defined(WEIGHT_Q5_K)
#define HAS_MIN
shared float w_low[RUNS][TILE_ROWS];
shared float x_low[RUNS][TILE_TOKENS];
#endif
#endif

void main()
{
    uint first_row = (gl_WorkGroupID.x + gl_WorkGroupID.z * p.tiles_per_z) * TILE_ROWS;
    if (first_row >= p.n_out) // the whole group leaves together
        return;
    // the tile's tokens [first_token, end_token), and the byte of W where its rows start
    uint first_token = gl_WorkGroupID.y * TILE_TOKENS, end_token = p.n_tokens;
    uint base = 0u;
    if (p.experts != 0u) {
        uint tile = 3u * gl_WorkGroupID.y;
        uint count = tiles[tile + 2u], expert = tiles[tile];
        if (count == 0u)
            return; // beyond the tiles the grouping made
        if (expert < p.expert0 || expert - p.expert0 >= p.n_experts)
            return; // another buffer's expert
        first_token = tiles[tile + 1u];
        end_token = first_token + count;
        base = (expert - p.expert0) * p.n_out * p.row_bytes;
    }
    uint tid = gl_LocalInvocationID.x;
    uint tr = tid % ROW_THREADS, tt = tid / ROW_THREADS;
    float acc[BLOCK_ROWS][BLOCK_TOKENS];
    for (uint i = 0u; i < BLOCK_ROWS; i++)
        for (uint j = 0u; j < BLOCK_TOKENS; j++)
            acc[i][j] = 0.0;

#if defined(WEIGHT_F32) || defined(WEIGHT_F16) || defined(WEIGHT_BF16)
    for (uint c0 = 0u; c0 < p.n_in; c0 += CHUNK) {
        // each invocation stages TILE_ROWS * CHUNK / TILE_THREADS weights and as many
        // activations, elements of a row side by side; zeros past the matrix's edges
        for (uint at = tid; at < TILE_ROWS * CHUNK; at += TILE_THREADS) {
            uint r = at / CHUNK, k = at % CHUNK, row = first_row + r, i = c0 + k;
            float wi = 0.0;
            if (row < p.n_out && i < p.n_in) {
#if defined(WEIGHT_F32)
                wi = uintBitsToFloat(w[((base + row * p.row_bytes) >> 2) + i]);
#elif defined(WEIGHT_F16)
                wi = half_at(base + row * p.row_bytes + 2u * i);
#else
                wi = bfloat_at(base + row * p.row_bytes + 2u * i);
#endif
            }
            w_tile[k][r] = wi;
        }
        for (uint at = tid; at < TILE_TOKENS * CHUNK; at += TILE_THREADS) {
            uint t = at / CHUNK, k = at % CHUNK, token = first_token + t, i = c0 + k;
            float xi = 0.0;
            if (token < end_token && i < p.n_in) {
                xi = x[token * p.n_in + i];
#if defined(WEIGHT_F16)
                xi = round_half(xi);
#elif defined(WEIGHT_BF16)
                xi = round_bfloat(xi);
#endif
            }
            x_tile[k][t] = xi;
        }
        barrier();
        for (uint k = 0u; k < CHUNK; k++) {
            float wk[BLOCK_ROWS], xk[BLOCK_TOKENS];
            for (uint i = 0u; i < BLOCK_ROWS; i++)
                wk[i] = w_tile[k][tr + i * ROW_THREADS];
            for (uint j = 0u; j < BLOCK_TOKENS; j++)
                xk[j] = x_tile[k][tt + j * ROW_THREADS];
            for (uint i = 0u; i < BLOCK_ROWS; i++)
                for (uint j = 0u; j < BLOCK_TOKENS; j++)
                    acc[i][j] += wk[i] * xk[j];
        }
        barrier();
    }
#else
    stage_tables(tid, TILE_THREADS);
    uint n_runs = p.n_in / 8u, n_blocks = p.n_in / BLOCK_ELEMS;
    // the run (of the chunk) and the row and token this invocation stages
    uint stage_run = tid % RUNS, stage_row = first_row + tid / RUNS;
    uint stage_token = first_token + tid / RUNS;
    for (uint r0 = 0u; r0 < n_runs; r0 += RUNS) {
        uint run = r0 + stage_run;
        // a run of weights, as signed bytes and the floats that scale their integer sums;
        // past the matrix's edges zeros, which add nothing
        uvec2 q = uvec2(0u);
        float scale = 0.0, low = 0.0;
        if (stage_row < p.n_out && run < n_runs) {
            WeightRun wr = weight_run(base + stage_row * p.row_bytes, run);
            q = uvec2(wr.q0, wr.q1);
#if defined(WEIGHT_Q4_0) || defined(WEIGHT_Q5_0) || defined(WEIGHT_Q8_0) || \
    defined(WEIGHT_MXFP4) || defined(WEIGHT_Q4_1) || defined(WEIGHT_Q5_1) || \
    defined(WEIGHT_IQ4_NL)
            scale = wr.scale;
            low = wr.low;
#elif defined(WEIGHT_Q2_K) || defined(WEIGHT_Q4_K) || defined(WEIGHT_Q5_K)
            scale = wr.scale * float(wr.sc);
            low = -wr.low * float(wr.m);
#else
            scale = wr.scale * float(wr.sc);
#endif
        }
        w_quants[stage_run][tid / RUNS] = q;
        w_scale[stage_run][tid / RUNS] = scale;
        // a run of activation quants and its block's scale; for the weights' minimum the
        // block's scaled sum (Q8_1) or the run's quants' sum times the block's scale (Q8_K)
        ivec2 a = ivec2(0);
        float a_scale = 0.0, a_low = 0.0;
        if (stage_token < end_token && run < n_runs) {
            uint aw = stage_token * (p.n_in / 4u) + 2u * run;
            uint ab = stage_token * n_blocks + run / (BLOCK_ELEMS / 8u);
            a = ivec2(xq[aw], xq[aw + 1u]);
#if defined(WEIGHT_Q4_1) || defined(WEIGHT_Q5_1)
            a_scale = xd[2u * ab];
            a_low = xd[2u * ab + 1u];
#elif defined(WEIGHT_Q2_K) || defined(WEIGHT_Q4_K) || defined(WEIGHT_Q5_K)
            a_scale = xd[ab];
            a_low = a_scale * float(dot4(ONES, a.x) + dot4(ONES, a.y));
#else
            a_scale = xd[ab];
#endif
        }
        x_quants[stage_run][tid / RUNS] = a;
        x_scale[stage_run][tid / RUNS] = a_scale;
#if defined(HAS_MIN)
        w_low[stage_run][tid / RUNS] = low;
        x_low[stage_run][tid / RUNS] = a_low;
#endif
        barrier();
        for (uint k = 0u; k < RUNS; k++) {
            uvec2 wq[BLOCK_ROWS];
            ivec2 xa[BLOCK_TOKENS];
            float ws[BLOCK_ROWS], xs[BLOCK_TOKENS];
            for (uint i = 0u; i < BLOCK_ROWS; i++) {
                wq[i] = w_quants[k][tr + i * ROW_THREADS];
                ws[i] = w_scale[k][tr + i * ROW_THREADS];
            }
            for (uint j = 0u; j < BLOCK_TOKENS; j++) {
                xa[j] = x_quants[k][tt + j * ROW_THREADS];
                xs[j] = x_scale[k][tt + j * ROW_THREADS];
            }
            for (uint i = 0u; i < BLOCK_ROWS; i++) {
                for (uint j = 0u; j < BLOCK_TOKENS; j++) {
                    int sumi = dot4(int(wq[i].x), xa[j].x) + dot4(int(wq[i].y), xa[j].y);
#if defined(HAS_MIN)
                    acc[i][j] += xs[j] * (ws[i] * float(sumi)) +
                                 w_low[k][tr + i * ROW_THREADS] * x_low[k][tt + j * ROW_THREADS];
#else
                    acc[i][j] += xs[j] * (ws[i] * float(sumi));
#endif
                }
            }
        }
        barrier();
    }
#endif
    for (uint i = 0u; i < BLOCK_ROWS; i++) {
        uint row = first_row + tr + i * ROW_THREADS;
        for (uint j = 0u; j < BLOCK_TOKENS; j++) {
            uint token = first_token + tt + j * ROW_THREADS;
            if (row < p.n_out && token < end_token)
                y[token * p.ldy + p.row0 + row] = acc[i][j];
        }
    }
}

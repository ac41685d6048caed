// y[t][row] = W[row] . x[t]: one workgroup per row and group of up to TOKENS tokens, its
// threads over the row's elements (or runs of 8 of a quantized row), each weight read once
// for all the group's tokens and the sums added in shared memory. F32 weights take x as it
// is, F16 and BF16 weights x rounded to their type, Q4_0, Q5_0, Q8_0 and MXFP4 weights x
// quantized to Q8_0 (quantize_q8_0.comp), Q4_1 and Q5_1 weights to Q8_1 (the same, with
// each block's scaled sum for the weights' minimum), the K-quants Q2_K..Q6_K x quantized to
// Q8_K (quantize_q8_k.comp): the partners the CPU kernels use, so both sides multiply the
// same numbers. Quantized types sum integer products per (sub-)block and scale them, as the
// CPU's dot products do; the integer products go four at a time (dot4), through the
// device's integer dot product instruction in the variant built with INT_DOT.
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

// tokens a workgroup takes (vk_ops.c dispatches by the same number)
#define TOKENS 8u

// elements of a weight block (and of its activation partner's)
#if defined(WEIGHT_Q2_K) || defined(WEIGHT_Q3_K) || defined(WEIGHT_Q4_K) || \
    defined(WEIGHT_Q5_K) || defined(WEIGHT_Q6_K)
#define BLOCK_ELEMS 256u
#else
#define BLOCK_ELEMS 32u
#endif

shared float partial[TOKENS][64];

// the 32-bit word of the four bytes from byte offset `at`, whatever its alignment (only
// words holding one of the four bytes are read)
uint word_at(uint at)
{
    uint i = at >> 2, shift = (at & 3u) * 8u;
    return shift == 0u ? w[i] : (w[i] >> shift) | (w[i + 1u] << (32u - shift));
}

// each byte of v, a value 0..2k - 1, minus k as a signed byte: adding 128 - k keeps each
// byte below 256 (no carry into the next), and flipping its top bit takes the 128 off
uint minus_bytes(uint v, uint k)
{
    return (v + (128u - k) * 0x01010101u) ^ 0x80808080u;
}

// bits 0..3 of h at bit 0 of bytes 0..3
uint spread_bits(uint h)
{
    return (h & 1u) | ((h & 2u) << 7) | ((h & 4u) << 14) | ((h & 8u) << 21);
}

// four signed bytes of ones: dot4(ONES, a) is the sum of a's bytes
const int ONES = 0x01010101;

// the sum of the products of the four signed bytes of a and b: the device's instruction
// (OpSDot) where it has one (INT_DOT, matmul_*_dot.spv), else the bytes one by one. Both
// give the same integer, so the two variants give the same bits.
#if defined(INT_DOT)
spirv_instruction(extensions = ["SPV_KHR_integer_dot_product"],
                  capabilities = [6019, 6018], id = 4450) // DotProduct, ...4x8BitPacked; OpSDot
int sdot_packed(int a, int b, spirv_literal int format);

int dot4(int a, int b)
{
    return sdot_packed(a, b, 0); // 0: PackedVectorFormat4x8Bit
}
#else
int dot4(int a, int b)
{
    return bitfieldExtract(a, 0, 8) * bitfieldExtract(b, 0, 8) +
           bitfieldExtract(a, 8, 8) * bitfieldExtract(b, 8, 8) +
           bitfieldExtract(a, 16, 8) * bitfieldExtract(b, 16, 8) + (a >> 24) * (b >> 24);
}
#endif

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
    // runs of 8 elements, one run a thread at a time: a run lies in one (sub-)block; its
    // weights are packed as signed bytes into two words, q0 and q1, to meet the two words
    // of activation quants, whose integer products are summed (dot4) and then scaled
    uint n_blocks = p.n_in / BLOCK_ELEMS;
    for (uint run = tid; run < p.n_in / 8u; run += 64u) {
        uint b = run / (BLOCK_ELEMS / 8u);
        uint e0 = (run % (BLOCK_ELEMS / 8u)) * 8u; // the run's first element in its block
        uint q0, q1;
        float scale;
#if defined(WEIGHT_Q4_0)
        // 18-byte blocks of 32: d (f16), then elements j and j + 16 in the low and high
        // nibbles of byte j; values q - 8
        uint at = base + b * 18u, shift = e0 < 16u ? 0u : 4u;
        q0 = minus_bytes((word_at(at + 2u + (e0 & 15u)) >> shift) & 0x0f0f0f0fu, 8u);
        q1 = minus_bytes((word_at(at + 6u + (e0 & 15u)) >> shift) & 0x0f0f0f0fu, 8u);
        scale = half_at(at);
#elif defined(WEIGHT_Q5_0)
        // 22-byte blocks of 32: d (f16), 32 high bits (element j's at bit j), then the low
        // four bits as Q4_0's; values q - 16
        uint at = base + b * 22u, shift = e0 < 16u ? 0u : 4u, high = word_at(at + 2u) >> e0;
        q0 = (word_at(at + 6u + (e0 & 15u)) >> shift) & 0x0f0f0f0fu;
        q1 = (word_at(at + 10u + (e0 & 15u)) >> shift) & 0x0f0f0f0fu;
        q0 = minus_bytes(q0 | (spread_bits(high) << 4), 16u);
        q1 = minus_bytes(q1 | (spread_bits(high >> 4) << 4), 16u);
        scale = half_at(at);
#elif defined(WEIGHT_Q8_0)
        // 34-byte blocks of 32: d (f16), then 32 int8
        uint at = base + b * 34u;
        q0 = word_at(at + 2u + e0);
        q1 = word_at(at + 6u + e0);
        scale = half_at(at);
#elif defined(WEIGHT_Q4_1)
        // 20-byte blocks of 32: d and the minimum m (f16), then Q4_0's nibbles; values
        // d q + m. The minimum times the block's activation sum is added once, by its first
        // run
        uint at = base + b * 20u, shift = e0 < 16u ? 0u : 4u;
        q0 = (word_at(at + 4u + (e0 & 15u)) >> shift) & 0x0f0f0f0fu;
        q1 = (word_at(at + 8u + (e0 & 15u)) >> shift) & 0x0f0f0f0fu;
        scale = half_at(at);
        float min_value = e0 == 0u ? half_at(at + 2u) : 0.0;
#elif defined(WEIGHT_Q5_1)
        // 24-byte blocks of 32: d and m (f16), Q5_0's 32 high bits, then its nibbles; values
        // d q + m, the minimum as for Q4_1
        uint at = base + b * 24u, shift = e0 < 16u ? 0u : 4u, high = word_at(at + 4u) >> e0;
        q0 = (word_at(at + 8u + (e0 & 15u)) >> shift) & 0x0f0f0f0fu;
        q1 = (word_at(at + 12u + (e0 & 15u)) >> shift) & 0x0f0f0f0fu;
        q0 |= spread_bits(high) << 4;
        q1 |= spread_bits(high >> 4) << 4;
        scale = half_at(at);
        float min_value = e0 == 0u ? half_at(at + 2u) : 0.0;
#elif defined(WEIGHT_MXFP4)
        // 17-byte blocks of 32: an exponent byte, then 4-bit codes as Q4_0's nibbles; a
        // code's value doubled is an integer (mxfp4_value), the scale halved to make up
        uint at = base + b * 17u, shift = e0 < 16u ? 0u : 4u;
        uint c0 = word_at(at + 1u + (e0 & 15u)) >> shift, c1 = word_at(at + 5u + (e0 & 15u)) >> shift;
        q0 = 0u;
        q1 = 0u;
        for (uint e = 0u; e < 4u; e++) {
            q0 |= (uint(mxfp4_value((c0 >> (8u * e)) & 15u)) & 0xffu) << (8u * e);
            q1 |= (uint(mxfp4_value((c1 >> (8u * e)) & 15u)) & 0xffu) << (8u * e);
        }
        scale = mxfp4_scale(byte_at(at));
#elif defined(WEIGHT_Q2_K)
        // 84-byte blocks of 256: 16 bytes of 4-bit scales (low nibble) and mins (high) of
        // sub-blocks of 16, 64 bytes of 2-bit quants, then d and dmin (f16); each half of
        // 128 elements takes 32 quant bytes, its quarter q of 32 bits 2q of qs[l]
        uint at = base + b * 84u, sub = byte_at(at + e0 / 16u);
        uint sc = sub & 15u, m = sub >> 4, shift = 2u * ((e0 % 128u) / 32u);
        uint qs = at + 16u + 32u * (e0 / 128u) + e0 % 32u;
        q0 = (word_at(qs) >> shift) & 0x03030303u;
        q1 = (word_at(qs + 4u) >> shift) & 0x03030303u;
        scale = half_at(at + 80u);
        float min_scale = half_at(at + 82u);
#elif defined(WEIGHT_Q3_K)
        // 110-byte blocks of 256: hmask[32] (the third bit of element l of quarter q of half
        // h at bit 4h + q of hmask[l]), Q2_K's 64 bytes of 2-bit quants, 12 bytes of 6-bit
        // scales of sub-blocks of 16 (biased by 32: low 4 bits from nibbles of bytes 0..7,
        // high 2 from bytes 8..11), then d (f16); values (low | third << 2) - 4
        uint at = base + b * 110u, h = e0 / 128u, quarter = (e0 % 128u) / 32u, l0 = e0 % 32u;
        uint qs = at + 32u + 32u * h + l0, low_shift = 2u * quarter, third_shift = 4u * h + quarter;
        q0 = ((word_at(qs) >> low_shift) & 0x03030303u) |
             (((word_at(at + l0) >> third_shift) & 0x01010101u) << 2);
        q1 = ((word_at(qs + 4u) >> low_shift) & 0x03030303u) |
             (((word_at(at + l0 + 4u) >> third_shift) & 0x01010101u) << 2);
        q0 = minus_bytes(q0, 4u);
        q1 = minus_bytes(q1, 4u);
        uint s = e0 / 16u;
        uint sc_low = s < 8u ? byte_at(at + 96u + s) & 15u : byte_at(at + 88u + s) >> 4;
        uint sc_high = (byte_at(at + 104u + s % 4u) >> (2u * (s / 4u))) & 3u;
        int sub_scale = int(sc_low | (sc_high << 4)) - 32;
        scale = half_at(at + 108u);
#elif defined(WEIGHT_Q4_K)
        // 144-byte blocks of 256: d, dmin (f16), 12 bytes of 6-bit scales and mins for 8
        // sub-blocks of 32, then 128 bytes: sub-blocks 2i and 2i + 1 in the low and high
        // nibbles of bytes 32i..32i + 31
        uint at = base + b * 144u, s = e0 / 32u, sc, m;
        if (s < 4u) {
            sc = byte_at(at + 4u + s) & 63u;
            m = byte_at(at + 8u + s) & 63u;
        } else {
            sc = (byte_at(at + 8u + s) & 15u) | ((byte_at(at + s) >> 6) << 4);
            m = (byte_at(at + 8u + s) >> 4) | ((byte_at(at + 4u + s) >> 6) << 4);
        }
        uint qs = at + 16u + (s / 2u) * 32u + e0 % 32u, shift = (s & 1u) * 4u;
        q0 = (word_at(qs) >> shift) & 0x0f0f0f0fu;
        q1 = (word_at(qs + 4u) >> shift) & 0x0f0f0f0fu;
        scale = half_at(at);
        float min_scale = half_at(at + 2u);
#elif defined(WEIGHT_Q5_K)
        // 176-byte blocks of 256: Q4_K's d, dmin and 12 scale bytes, then qh[32] (element l
        // of sub-block s has its fifth bit at bit s of qh[l]), then Q4_K's 128 nibble bytes
        uint at = base + b * 176u, s = e0 / 32u, sc, m;
        if (s < 4u) {
            sc = byte_at(at + 4u + s) & 63u;
            m = byte_at(at + 8u + s) & 63u;
        } else {
            sc = (byte_at(at + 8u + s) & 15u) | ((byte_at(at + s) >> 6) << 4);
            m = (byte_at(at + 8u + s) >> 4) | ((byte_at(at + 4u + s) >> 6) << 4);
        }
        uint l0 = e0 % 32u, qs = at + 48u + (s / 2u) * 32u + l0, shift = (s & 1u) * 4u;
        q0 = ((word_at(qs) >> shift) & 0x0f0f0f0fu) |
             (((word_at(at + 16u + l0) >> s) & 0x01010101u) << 4);
        q1 = ((word_at(qs + 4u) >> shift) & 0x0f0f0f0fu) |
             (((word_at(at + 20u + l0) >> s) & 0x01010101u) << 4);
        scale = half_at(at);
        float min_scale = half_at(at + 2u);
#elif defined(WEIGHT_Q6_K)
        // 210-byte blocks of 256: ql[128] (low 4 bits), qh[64] (high 2 bits), 16 int8 scales
        // of sub-blocks of 16, d (f16); each half of 128 elements takes 64 ql and 32 qh
        // bytes, its quarter q of 32 the low (q < 2) or high nibbles of ql[32 (q % 2) + l]
        // and bits 2q of qh[l]; values q - 32
        uint at = base + b * 210u, h = e0 / 128u, quarter = (e0 % 128u) / 32u, l0 = e0 % 32u;
        uint ql = at + 64u * h + (quarter & 1u) * 32u + l0, qh = at + 128u + 32u * h + l0;
        uint low_shift = quarter < 2u ? 0u : 4u, high_shift = 2u * quarter;
        q0 = ((word_at(ql) >> low_shift) & 0x0f0f0f0fu) |
             (((word_at(qh) >> high_shift) & 0x03030303u) << 4);
        q1 = ((word_at(ql + 4u) >> low_shift) & 0x0f0f0f0fu) |
             (((word_at(qh + 4u) >> high_shift) & 0x03030303u) << 4);
        q0 = minus_bytes(q0, 32u);
        q1 = minus_bytes(q1, 32u);
        int sub_scale = sbyte_at(at + 192u + 8u * h + l0 / 16u + 2u * quarter);
        scale = half_at(at + 208u);
#endif
        for (uint k = 0u; k < n_tok; k++) {
            uint ab = (x0 + k) * n_blocks + b;
            // the run's two words of activation quants
            uint aw = ab * (BLOCK_ELEMS / 4u) + e0 / 4u;
            int a0 = xq[aw], a1 = xq[aw + 1u];
            int sumi = dot4(int(q0), a0) + dot4(int(q1), a1);
#if defined(WEIGHT_Q4_0) || defined(WEIGHT_Q5_0) || defined(WEIGHT_Q8_0) || \
    defined(WEIGHT_MXFP4)
            sum[k] += float(sumi) * scale * xd[ab];
#elif defined(WEIGHT_Q4_1) || defined(WEIGHT_Q5_1)
            sum[k] += float(sumi) * scale * xd[2u * ab] + min_value * xd[2u * ab + 1u];
#elif defined(WEIGHT_Q2_K) || defined(WEIGHT_Q4_K) || defined(WEIGHT_Q5_K)
            int suma = dot4(ONES, a0) + dot4(ONES, a1);
            sum[k] += xd[ab] * (scale * float(int(sc) * sumi) - min_scale * float(int(m) * suma));
#else
            sum[k] += xd[ab] * scale * float(sub_scale * sumi);
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

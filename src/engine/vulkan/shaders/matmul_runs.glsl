// The matrix products' shared parts (matmul.glsl, matmul_tiled.glsl): reading a run of 8
// elements of a quantized weight row as signed bytes and its scales, and multiplying bytes
// four at a time. The including shader declares the weights `uint w[]` and, for INT_DOT,
// enables GL_EXT_spirv_intrinsics.

// elements of a weight block (and of its activation partner's)
#if defined(WEIGHT_Q2_K) || defined(WEIGHT_Q3_K) || defined(WEIGHT_Q4_K) || \
    defined(WEIGHT_Q5_K) || defined(WEIGHT_Q6_K) || defined(WEIGHT_IQ4_XS) || \
    defined(LATTICE_TYPE)
#define BLOCK_ELEMS 256u
#else
#define BLOCK_ELEMS 32u
#endif

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

#if defined(WEIGHT_IQ4_NL) || defined(WEIGHT_IQ4_XS)
// the IQ4 table (iq4_value's) in shared memory: each invocation looks up codes of its own,
// which a constant array may serve one address at a time, and shared memory at once
shared int iq4_shared[16];

// the IQ4 codes of the four nibbles at bits 0..3 of v's bytes as their values, signed bytes
// again
uint iq4_bytes(uint v)
{
    uint values = 0u;
    for (uint e = 0u; e < 4u; e++)
        values |= (uint(iq4_shared[(v >> (8u * e)) & 15u]) & 0xffu) << (8u * e);
    return values;
}
#endif

// The tables a run's decoding looks up, copied into shared memory by the workgroup's
// `threads` invocations (tid one of them) and waited for, where that pays: IQ4's 16 values
// always, a lattice type's grid where the kernel defines GRIDS_SHARED (lattice.glsl). Every
// invocation calls it, in uniform control flow, before its first weight_run.
void stage_tables(uint tid, uint threads)
{
#if defined(WEIGHT_IQ4_NL) || defined(WEIGHT_IQ4_XS)
    if (tid < 16u)
        iq4_shared[tid] = iq4_value(tid);
    barrier();
#elif defined(GRIDS_SHARED)
    stage_grids(tid, threads);
#endif
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

// a run of 8 weights of a quantized row: the quants as signed bytes in two words, the
// block's scale and, by type, the (sub-)block's integer scale sc and minimum m (K-quants), or
// the minimum itself (Q4_1, Q5_1: in the block's first run only, so that it is added once)
// or the minimums' scale (K-quants with minimums) in low
struct WeightRun {
    uint q0, q1;
    float scale, low;
    int sc, m;
};

#if !defined(WEIGHT_F32) && !defined(WEIGHT_F16) && !defined(WEIGHT_BF16)
// run `run` (elements 8 run.. 8 run + 7) of the row at byte offset `base`; a run lies in one
// (sub-)block
WeightRun weight_run(uint base, uint run)
{
    uint b = run / (BLOCK_ELEMS / 8u);
    uint e0 = (run % (BLOCK_ELEMS / 8u)) * 8u; // the run's first element in its block
    WeightRun r = WeightRun(0u, 0u, 0.0, 0.0, 0, 0);
#if defined(WEIGHT_Q4_0)
    // 18-byte blocks of 32: d (f16), then elements j and j + 16 in the low and high
    // nibbles of byte j; values q - 8
    uint at = base + b * 18u, shift = e0 < 16u ? 0u : 4u;
    r.q0 = minus_bytes((word_at(at + 2u + (e0 & 15u)) >> shift) & 0x0f0f0f0fu, 8u);
    r.q1 = minus_bytes((word_at(at + 6u + (e0 & 15u)) >> shift) & 0x0f0f0f0fu, 8u);
    r.scale = half_at(at);
#elif defined(WEIGHT_Q5_0)
    // 22-byte blocks of 32: d (f16), 32 high bits (element j's at bit j), then the low
    // four bits as Q4_0's; values q - 16
    uint at = base + b * 22u, shift = e0 < 16u ? 0u : 4u, high = word_at(at + 2u) >> e0;
    r.q0 = (word_at(at + 6u + (e0 & 15u)) >> shift) & 0x0f0f0f0fu;
    r.q1 = (word_at(at + 10u + (e0 & 15u)) >> shift) & 0x0f0f0f0fu;
    r.q0 = minus_bytes(r.q0 | (spread_bits(high) << 4), 16u);
    r.q1 = minus_bytes(r.q1 | (spread_bits(high >> 4) << 4), 16u);
    r.scale = half_at(at);
#elif defined(WEIGHT_Q8_0)
    // 34-byte blocks of 32: d (f16), then 32 int8
    uint at = base + b * 34u;
    r.q0 = word_at(at + 2u + e0);
    r.q1 = word_at(at + 6u + e0);
    r.scale = half_at(at);
#elif defined(WEIGHT_Q4_1)
    // 20-byte blocks of 32: d and the minimum m (f16), then Q4_0's nibbles; values
    // d q + m. The minimum times the block's activation sum is added once, by its first
    // run
    uint at = base + b * 20u, shift = e0 < 16u ? 0u : 4u;
    r.q0 = (word_at(at + 4u + (e0 & 15u)) >> shift) & 0x0f0f0f0fu;
    r.q1 = (word_at(at + 8u + (e0 & 15u)) >> shift) & 0x0f0f0f0fu;
    r.scale = half_at(at);
    r.low = e0 == 0u ? half_at(at + 2u) : 0.0;
#elif defined(WEIGHT_Q5_1)
    // 24-byte blocks of 32: d and m (f16), Q5_0's 32 high bits, then its nibbles; values
    // d q + m, the minimum as for Q4_1
    uint at = base + b * 24u, shift = e0 < 16u ? 0u : 4u, high = word_at(at + 4u) >> e0;
    r.q0 = (word_at(at + 8u + (e0 & 15u)) >> shift) & 0x0f0f0f0fu;
    r.q1 = (word_at(at + 12u + (e0 & 15u)) >> shift) & 0x0f0f0f0fu;
    r.q0 |= spread_bits(high) << 4;
    r.q1 |= spread_bits(high >> 4) << 4;
    r.scale = half_at(at);
    r.low = e0 == 0u ? half_at(at + 2u) : 0.0;
#elif defined(WEIGHT_MXFP4)
    // 17-byte blocks of 32: an exponent byte, then 4-bit codes as Q4_0's nibbles; a
    // code's value doubled is an integer (mxfp4_value), the scale halved to make up
    uint at = base + b * 17u, shift = e0 < 16u ? 0u : 4u;
    uint c0 = word_at(at + 1u + (e0 & 15u)) >> shift, c1 = word_at(at + 5u + (e0 & 15u)) >> shift;
    r.q0 = 0u;
    r.q1 = 0u;
    for (uint e = 0u; e < 4u; e++) {
        r.q0 |= (uint(mxfp4_value((c0 >> (8u * e)) & 15u)) & 0xffu) << (8u * e);
        r.q1 |= (uint(mxfp4_value((c1 >> (8u * e)) & 15u)) & 0xffu) << (8u * e);
    }
    r.scale = mxfp4_scale(byte_at(at));
#elif defined(WEIGHT_IQ4_NL)
    // 18-byte blocks of 32: d (f16), then Q4_0's nibbles, each a code of the IQ4 table
    uint at = base + b * 18u, shift = e0 < 16u ? 0u : 4u;
    r.q0 = iq4_bytes((word_at(at + 2u + (e0 & 15u)) >> shift) & 0x0f0f0f0fu);
    r.q1 = iq4_bytes((word_at(at + 6u + (e0 & 15u)) >> shift) & 0x0f0f0f0fu);
    r.scale = half_at(at);
#elif defined(WEIGHT_IQ4_XS)
    // 136-byte blocks of 256: d (f16), scales_h (u16), scales_l[4], then 16 bytes of
    // codes a sub-block of 32, laid out as IQ4_NL's; sub-block s's 6-bit scale, biased by
    // 32, has its low 4 bits in nibble s % 2 of scales_l[s / 2] and its high 2 at bit 2s
    // of scales_h
    uint at = base + b * 136u, s = e0 / 32u, l0 = e0 % 32u, shift = l0 < 16u ? 0u : 4u;
    uint qs = at + 8u + 16u * s + (l0 & 15u);
    r.q0 = iq4_bytes((word_at(qs) >> shift) & 0x0f0f0f0fu);
    r.q1 = iq4_bytes((word_at(qs + 4u) >> shift) & 0x0f0f0f0fu);
    uint sc_low = (byte_at(at + 4u + s / 2u) >> (4u * (s & 1u))) & 15u;
    uint sc_high = ((byte_at(at + 2u) | (byte_at(at + 3u) << 8)) >> (2u * s)) & 3u;
    r.sc = int(sc_low | (sc_high << 4)) - 32;
    r.scale = half_at(at);
#elif defined(LATTICE_TYPE)
    // a run is one group of a lattice IQ super-block (common.glsl's lattice_group); its
    // integer scale sc as the K-quants' sub-block scales
    LatticeGroup lg = lattice_group(LATTICE_TYPE, base + b * lattice_block_bytes(LATTICE_TYPE),
                                    e0 / 8u);
    r.q0 = lg.q0;
    r.q1 = lg.q1;
    r.scale = lg.scale;
    r.sc = lg.sc;
#elif defined(WEIGHT_Q2_K)
    // 84-byte blocks of 256: 16 bytes of 4-bit scales (low nibble) and mins (high) of
    // sub-blocks of 16, 64 bytes of 2-bit quants, then d and dmin (f16); each half of
    // 128 elements takes 32 quant bytes, its quarter q of 32 bits 2q of qs[l]
    uint at = base + b * 84u, sub = byte_at(at + e0 / 16u);
    uint sc = sub & 15u, m = sub >> 4, shift = 2u * ((e0 % 128u) / 32u);
    uint qs = at + 16u + 32u * (e0 / 128u) + e0 % 32u;
    r.q0 = (word_at(qs) >> shift) & 0x03030303u;
    r.q1 = (word_at(qs + 4u) >> shift) & 0x03030303u;
    r.scale = half_at(at + 80u);
    r.low = half_at(at + 82u);
    r.sc = int(sc);
    r.m = int(m);
#elif defined(WEIGHT_Q3_K)
    // 110-byte blocks of 256: hmask[32] (the third bit of element l of quarter q of half
    // h at bit 4h + q of hmask[l]), Q2_K's 64 bytes of 2-bit quants, 12 bytes of 6-bit
    // scales of sub-blocks of 16 (biased by 32: low 4 bits from nibbles of bytes 0..7,
    // high 2 from bytes 8..11), then d (f16); values (low | third << 2) - 4
    uint at = base + b * 110u, h = e0 / 128u, quarter = (e0 % 128u) / 32u, l0 = e0 % 32u;
    uint qs = at + 32u + 32u * h + l0, low_shift = 2u * quarter, third_shift = 4u * h + quarter;
    r.q0 = ((word_at(qs) >> low_shift) & 0x03030303u) |
         (((word_at(at + l0) >> third_shift) & 0x01010101u) << 2);
    r.q1 = ((word_at(qs + 4u) >> low_shift) & 0x03030303u) |
         (((word_at(at + l0 + 4u) >> third_shift) & 0x01010101u) << 2);
    r.q0 = minus_bytes(r.q0, 4u);
    r.q1 = minus_bytes(r.q1, 4u);
    uint s = e0 / 16u;
    uint sc_low = s < 8u ? byte_at(at + 96u + s) & 15u : byte_at(at + 88u + s) >> 4;
    uint sc_high = (byte_at(at + 104u + s % 4u) >> (2u * (s / 4u))) & 3u;
    r.sc = int(sc_low | (sc_high << 4)) - 32;
    r.scale = half_at(at + 108u);
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
    r.q0 = (word_at(qs) >> shift) & 0x0f0f0f0fu;
    r.q1 = (word_at(qs + 4u) >> shift) & 0x0f0f0f0fu;
    r.scale = half_at(at);
    r.low = half_at(at + 2u);
    r.sc = int(sc);
    r.m = int(m);
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
    r.q0 = ((word_at(qs) >> shift) & 0x0f0f0f0fu) |
         (((word_at(at + 16u + l0) >> s) & 0x01010101u) << 4);
    r.q1 = ((word_at(qs + 4u) >> shift) & 0x0f0f0f0fu) |
         (((word_at(at + 20u + l0) >> s) & 0x01010101u) << 4);
    r.scale = half_at(at);
    r.low = half_at(at + 2u);
    r.sc = int(sc);
    r.m = int(m);
#elif defined(WEIGHT_Q6_K)
    // 210-byte blocks of 256: ql[128] (low 4 bits), qh[64] (high 2 bits), 16 int8 scales
    // of sub-blocks of 16, d (f16); each half of 128 elements takes 64 ql and 32 qh
    // bytes, its quarter q of 32 the low (q < 2) or high nibbles of ql[32 (q % 2) + l]
    // and bits 2q of qh[l]; values q - 32
    uint at = base + b * 210u, h = e0 / 128u, quarter = (e0 % 128u) / 32u, l0 = e0 % 32u;
    uint ql = at + 64u * h + (quarter & 1u) * 32u + l0, qh = at + 128u + 32u * h + l0;
    uint low_shift = quarter < 2u ? 0u : 4u, high_shift = 2u * quarter;
    r.q0 = ((word_at(ql) >> low_shift) & 0x0f0f0f0fu) |
         (((word_at(qh) >> high_shift) & 0x03030303u) << 4);
    r.q1 = ((word_at(ql + 4u) >> low_shift) & 0x0f0f0f0fu) |
         (((word_at(qh + 4u) >> high_shift) & 0x03030303u) << 4);
    r.q0 = minus_bytes(r.q0, 32u);
    r.q1 = minus_bytes(r.q1, 32u);
    r.sc = sbyte_at(at + 192u + 8u * h + l0 / 16u + 2u * quarter);
    r.scale = half_at(at + 208u);
#endif
    return r;
}
#endif

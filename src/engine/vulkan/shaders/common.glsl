// Shared by the shaders: weights are read as 32-bit words whatever their type, so that
// ggml's blocks (18 bytes for Q4_0, 34 for Q8_0) need no 8- or 16-bit storage feature;
// a weight buffer is declared `uint w[]` at binding 0 by every shader that includes this.

#include "half.glsl"

// the byte at byte offset `at`
uint byte_at(uint at)
{
    return (w[at >> 2] >> ((at & 3u) * 8u)) & 0xffu;
}

// the signed byte at `at`
int sbyte_at(uint at)
{
    return bitfieldExtract(int(w[at >> 2]), int((at & 3u) * 8u), 8);
}

// the little-endian u16 at byte offset `at`
uint u16_at(uint at)
{
    return byte_at(at) | (byte_at(at + 1u) << 8);
}

// bits 0..3 of h at bit 0 of bytes 0..3
uint spread_bits(uint h)
{
    return (h & 1u) | ((h & 2u) << 7) | ((h & 4u) << 14) | ((h & 8u) << 21);
}

// the f16 at an even byte offset, as a float
float half_at(uint at)
{
    return unpackHalf2x16(w[at >> 2] >> ((at & 2u) * 8u)).x;
}

// the bfloat16 at an even byte offset, as a float
float bfloat_at(uint at)
{
    return uintBitsToFloat(((w[at >> 2] >> ((at & 2u) * 8u)) & 0xffffu) << 16);
}

// x rounded to the nearest bfloat16 (ties to even; a NaN stays a NaN) and back
float round_bfloat(float x)
{
    uint bits = floatBitsToUint(x);
    if ((bits & 0x7fffffffu) > 0x7f800000u)
        return uintBitsToFloat((bits | 0x00400000u) & 0xffff0000u);
    return uintBitsToFloat((bits + 0x7fffu + ((bits >> 16) & 1u)) & 0xffff0000u);
}


// MXFP4's E2M1 code c as an integer: the magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6 doubled, the
// sign in bit 3
int mxfp4_value(uint c)
{
    const int doubled[8] = int[8](0, 1, 2, 3, 4, 6, 8, 12);
    int v = doubled[c & 7u];
    return (c & 8u) != 0u ? -v : v;
}

// IQ4_NL's and IQ4_XS's code c as the value it stands for (the formats' table)
int iq4_value(uint c)
{
    const int values[16] = int[16](-127, -104, -83, -65, -49, -35, -22, -10,
                                   1, 13, 25, 38, 53, 69, 89, 113);
    return values[c];
}

// MXFP4's block scale 2^(e - 127) halved (for the doubled values), from its exponent byte:
// the float with exponent bits e - 1, or the subnormals 2^-127 and 2^-128 below
float mxfp4_scale(uint e)
{
    return uintBitsToFloat(e >= 2u ? (e - 1u) << 23 : e == 1u ? 0x00400000u : 0x00200000u);
}

// weight types, ggml's ids
const uint TYPE_F32 = 0u;
const uint TYPE_F16 = 1u;
const uint TYPE_Q4_0 = 2u;
const uint TYPE_Q4_1 = 3u;
const uint TYPE_Q5_0 = 6u;
const uint TYPE_Q5_1 = 7u;
const uint TYPE_Q8_0 = 8u;
const uint TYPE_BF16 = 30u;
const uint TYPE_Q2_K = 10u;
const uint TYPE_Q3_K = 11u;
const uint TYPE_Q4_K = 12u;
const uint TYPE_Q5_K = 13u;
const uint TYPE_Q6_K = 14u;
const uint TYPE_MXFP4 = 39u;
const uint TYPE_IQ4_NL = 20u;
const uint TYPE_IQ4_XS = 23u;
const uint TYPE_IQ2_XXS = 16u;
const uint TYPE_IQ2_XS = 17u;
const uint TYPE_IQ3_XXS = 18u;
const uint TYPE_IQ1_S = 19u;
const uint TYPE_IQ3_S = 21u;
const uint TYPE_IQ2_S = 22u;
const uint TYPE_IQ1_M = 29u;

// A shader of one lattice IQ type (LATTICE_TYPE) or of any (get_rows: READS_GRIDS) reads
// their grids, which lattice.glsl declares; no other shader has them in its layout
#if defined(LATTICE_TYPE) && !defined(READS_GRIDS)
#define READS_GRIDS
#endif
#if defined(READS_GRIDS)
#include "lattice.glsl"
#endif

// element i of a row of `type` beginning at byte offset `row`
float weight_at(uint type, uint row, uint i)
{
    if (type == TYPE_F32)
        return uintBitsToFloat(w[(row >> 2) + i]);
    if (type == TYPE_F16)
        return half_at(row + 2u * i);
    if (type == TYPE_BF16)
        return bfloat_at(row + 2u * i);
    if (type == TYPE_Q5_0) {
        uint at = row + (i / 32u) * 22u, j = i % 32u;
        uint pair = byte_at(at + 6u + (j & 15u)), low = j < 16u ? pair & 15u : pair >> 4;
        uint fifth = (byte_at(at + 2u + j / 8u) >> (j % 8u)) & 1u;
        return half_at(at) * float(int(low | (fifth << 4)) - 16);
    }
    if (type == TYPE_Q4_1 || type == TYPE_Q5_1) { // see matmul.glsl for the layouts
        bool five = type == TYPE_Q5_1;
        uint at = row + (i / 32u) * (five ? 24u : 20u), j = i % 32u;
        uint pair = byte_at(at + (five ? 8u : 4u) + (j & 15u));
        uint q = j < 16u ? pair & 15u : pair >> 4;
        if (five)
            q |= ((byte_at(at + 4u + j / 8u) >> (j % 8u)) & 1u) << 4;
        precise float scaled = half_at(at) * float(q);
        precise float value = scaled + half_at(at + 2u);
        return value;
    }
    if (type == TYPE_MXFP4) {
        uint at = row + (i / 32u) * 17u, j = i % 32u;
        uint pair = byte_at(at + 1u + (j & 15u));
        return float(mxfp4_value(j < 16u ? pair & 15u : pair >> 4)) * mxfp4_scale(byte_at(at));
    }
    if (type == TYPE_IQ4_NL) { // see matmul_runs.glsl for the layouts
        uint at = row + (i / 32u) * 18u, j = i % 32u;
        uint pair = byte_at(at + 2u + (j & 15u));
        return half_at(at) * float(iq4_value(j < 16u ? pair & 15u : pair >> 4));
    }
    if (type == TYPE_IQ4_XS) {
        uint at = row + (i / 256u) * 136u, s = (i % 256u) / 32u, j = i % 32u;
        uint sc_low = (byte_at(at + 4u + s / 2u) >> (4u * (s & 1u))) & 15u;
        uint sc_high = ((byte_at(at + 2u) | (byte_at(at + 3u) << 8)) >> (2u * s)) & 3u;
        uint pair = byte_at(at + 8u + 16u * s + (j & 15u));
        // the sub-block's scale rounded before it meets the value, as on the CPU
        precise float scale = half_at(at) * float(int(sc_low | (sc_high << 4)) - 32);
        precise float value = scale * float(iq4_value(j < 16u ? pair & 15u : pair >> 4));
        return value;
    }
#if defined(READS_GRIDS)
    if (type == TYPE_IQ2_XXS || type == TYPE_IQ2_XS || type == TYPE_IQ2_S ||
        type == TYPE_IQ3_XXS || type == TYPE_IQ3_S || type == TYPE_IQ1_S || type == TYPE_IQ1_M) {
        LatticeGroup r = lattice_group(type, row + (i / 256u) * lattice_block_bytes(type),
                                       (i % 256u) / 8u);
        uint j = i % 8u;
        int v = bitfieldExtract(int(j < 4u ? r.q0 : r.q1), int(8u * (j % 4u)), 8);
        // the CPU's bits: its scale d (2s + 1) times the fixed factor (a power of two, so
        // exact either way) times the signed grid value (IQ1's value plus its shift is v / 8)
        precise float unit = r.scale * float(r.sc);
        precise float value = unit * float(v);
        return value;
    }
#endif
    if (type == TYPE_Q2_K) {
        uint at = row + (i / 256u) * 84u, e = i % 256u, sub = byte_at(at + e / 16u);
        uint q = (byte_at(at + 16u + 32u * (e / 128u) + e % 32u) >> (2u * ((e % 128u) / 32u))) & 3u;
        precise float scaled = half_at(at + 80u) * float(sub & 15u) * float(q);
        precise float value = scaled - half_at(at + 82u) * float(sub >> 4);
        return value;
    }
    if (type == TYPE_Q3_K) {
        uint at = row + (i / 256u) * 110u, e = i % 256u, h = e / 128u, quarter = (e % 128u) / 32u;
        uint l = e % 32u, s = e / 16u;
        uint low = (byte_at(at + 32u + 32u * h + l) >> (2u * quarter)) & 3u;
        uint third = (byte_at(at + l) >> (4u * h + quarter)) & 1u;
        uint sc_low = s < 8u ? byte_at(at + 96u + s) & 15u : byte_at(at + 88u + s) >> 4;
        uint sc_high = (byte_at(at + 104u + s % 4u) >> (2u * (s / 4u))) & 3u;
        precise float value = half_at(at + 108u) * float(int(sc_low | (sc_high << 4)) - 32) *
                              float(int(low | (third << 2)) - 4);
        return value;
    }
    if (type == TYPE_Q5_K) {
        uint at = row + (i / 256u) * 176u, s = (i % 256u) / 32u, l = i % 32u, sc, m;
        if (s < 4u) {
            sc = byte_at(at + 4u + s) & 63u;
            m = byte_at(at + 8u + s) & 63u;
        } else {
            sc = (byte_at(at + 8u + s) & 15u) | ((byte_at(at + s) >> 6) << 4);
            m = (byte_at(at + 8u + s) >> 4) | ((byte_at(at + 4u + s) >> 6) << 4);
        }
        uint pair = byte_at(at + 48u + (s / 2u) * 32u + l);
        uint fifth = (byte_at(at + 16u + l) >> s) & 1u;
        float q = float(((s & 1u) == 0u ? pair & 15u : pair >> 4) | (fifth << 4));
        precise float scaled = half_at(at) * float(sc) * q, offset = half_at(at + 2u) * float(m);
        precise float value = scaled - offset;
        return value;
    }
    if (type == TYPE_Q4_K) { // see matmul.glsl for the layouts
        uint at = row + (i / 256u) * 144u, s = (i % 256u) / 32u, j = i % 32u, sc, m;
        if (s < 4u) {
            sc = byte_at(at + 4u + s) & 63u;
            m = byte_at(at + 8u + s) & 63u;
        } else {
            sc = (byte_at(at + 8u + s) & 15u) | ((byte_at(at + s) >> 6) << 4);
            m = (byte_at(at + 8u + s) >> 4) | ((byte_at(at + 4u + s) >> 6) << 4);
        }
        uint pair = byte_at(at + 16u + (s / 2u) * 32u + j);
        float q = float((s & 1u) == 0u ? pair & 15u : pair >> 4);
        // precise: no fused multiply-add, so the value has the CPU's bits
        precise float scaled = half_at(at) * float(sc) * q, offset = half_at(at + 2u) * float(m);
        precise float value = scaled - offset;
        return value;
    }
    if (type == TYPE_Q6_K) {
        uint at = row + (i / 256u) * 210u, e = i % 256u, h = e / 128u, quarter = (e % 128u) / 32u;
        uint l = e % 32u;
        uint low = byte_at(at + 64u * h + l + (quarter & 1u) * 32u);
        low = quarter < 2u ? low & 15u : low >> 4;
        uint high = (byte_at(at + 128u + 32u * h + l) >> (2u * quarter)) & 3u;
        int q = int(low | (high << 4)) - 32;
        return half_at(at + 208u) * float(sbyte_at(at + 192u + 8u * h + l / 16u + 2u * quarter)) * float(q);
    }
    uint block = i / 32u, j = i % 32u;
    if (type == TYPE_Q8_0) {
        uint at = row + block * 34u;
        return half_at(at) * float(sbyte_at(at + 2u + j));
    }
    uint at = row + block * 18u; // Q4_0: low nibbles hold 0..15, high ones 16..31
    uint pair = byte_at(at + 2u + (j & 15u));
    int q = int(j < 16u ? pair & 15u : pair >> 4) - 8;
    return half_at(at) * float(q);
}

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

// The lattice IQ types' grids (src/engine/quant_iq_grids.c), uploaded by vk_device.c at
// device open into one buffer in this order: an entry of 8 elements is two words, of 4 one
// word, element j in byte j. The offsets (in words) are vk_device.c's.
layout(std430, binding = 6) readonly buffer Grids { uint grid[]; };
const uint GRID_IQ2_XXS = 0u;    // 256 entries of 8
const uint GRID_IQ2_XS = 512u;   // 512 of 8
const uint GRID_IQ2_S = 1536u;   // 1024 of 8
const uint GRID_IQ3_XXS = 3584u; // 256 of 4
const uint GRID_IQ3_S = 3840u;   // 512 of 4
const uint GRID_IQ1_S = 4352u;   // 2048 of 8 (IQ1_S and IQ1_M)

// bits 0..3 of h at bit 0 of bytes 0..3
uint spread_bits(uint h)
{
    return (h & 1u) | ((h & 2u) << 7) | ((h & 4u) << 14) | ((h & 8u) << 21);
}

// the 7-bit sign code c with its eighth bit, the parity of the seven, put back (every group
// has an even number of negatives): bit j set where element j is negative
uint iq_sign_byte(uint c)
{
    return c | ((uint(bitCount(c)) & 1u) << 7);
}

// the four grid bytes of v (each 1..127) negated as signed bytes where bits 0..3 of signs
// are set: ~v + 1 per byte, which carries into the next byte only for a zero byte
uint iq_signed_bytes(uint v, uint signs)
{
    uint s = spread_bits(signs & 15u);
    return (v ^ (s * 0xffu)) + s;
}

// IQ1_S's and IQ1_M's four grid bytes of v (int8 -1, 0, 1) plus the group's shift of
// delta / 8 (delta +-1), times 8 so that they are integers: 8 g + delta, as signed bytes
uint iq1_bytes(uint v, int delta)
{
    uint values = 0u;
    for (int e = 0; e < 4; e++)
        values |= (uint(8 * bitfieldExtract(int(v), 8 * e, 8) + delta) & 0xffu) << (8 * e);
    return values;
}

// A group of 8 elements of a lattice IQ super-block: the values as signed bytes in two
// words (q0 elements 0..3), and scale * sc, the scale of one unit of them: scale the
// super-block's d times the type's fixed factor (1/8 for IQ2's and IQ1's, 1/4 for IQ3_XXS),
// sc the (sub-)block's odd integer scale 2s + 1
struct LatticeGroup {
    uint q0, q1;
    float scale;
    int sc;
};

uint lattice_block_bytes(uint type)
{
    return type == TYPE_IQ2_XXS ? 66u : type == TYPE_IQ2_XS ? 74u : type == TYPE_IQ2_S ? 82u
         : type == TYPE_IQ3_XXS ? 98u : type == TYPE_IQ3_S ? 110u : type == TYPE_IQ1_S ? 50u
         : 56u;
}

// the little-endian u16 at byte offset `at`
uint u16_at(uint at)
{
    return byte_at(at) | (byte_at(at + 1u) << 8);
}

// group g (elements 8g..8g + 7) of the `type` super-block at byte offset `at`; the layouts
// are docs/formats.md's (and quant_iq_lattice.h's)
LatticeGroup lattice_group(uint type, uint at, uint g)
{
    LatticeGroup r = LatticeGroup(0u, 0u, 0.0, 0);
    uint k = g / 4u, l = g % 4u; // sub-block of 32, group in it
    if (type == TYPE_IQ2_XXS || type == TYPE_IQ3_XXS) {
        // per sub-block: grid indices (4 bytes, IQ3_XXS's 8 in the first 64 bytes), and a
        // u32 of four 7-bit sign codes and the scale in bits 28..31
        bool iq3 = type == TYPE_IQ3_XXS;
        uint aux = u16_at(at + (iq3 ? 66u + 4u * k : 6u + 8u * k)) |
                   (u16_at(at + (iq3 ? 68u + 4u * k : 8u + 8u * k)) << 16);
        uint signs = iq_sign_byte((aux >> (7u * l)) & 127u);
        if (iq3) {
            uint idx = at + 2u + 8u * k + 2u * l;
            r.q0 = iq_signed_bytes(grid[GRID_IQ3_XXS + byte_at(idx)], signs);
            r.q1 = iq_signed_bytes(grid[GRID_IQ3_XXS + byte_at(idx + 1u)], signs >> 4);
        } else {
            uint e = GRID_IQ2_XXS + 2u * byte_at(at + 2u + 8u * k + l);
            r.q0 = iq_signed_bytes(grid[e], signs);
            r.q1 = iq_signed_bytes(grid[e + 1u], signs >> 4);
        }
        r.scale = half_at(at) * (iq3 ? 0.25 : 0.125);
        r.sc = int(2u * (aux >> 28) + 1u);
    } else if (type == TYPE_IQ2_XS || type == TYPE_IQ2_S) {
        // IQ2_XS: a u16 a group, a 9-bit index and a sign code; IQ2_S: a 10-bit index
        // (qs[g], two bits of qh[g / 4] on top) and a sign byte qs[32 + g]. Two 4-bit scales
        // a sub-block, one for each half
        uint e, signs, scales;
        if (type == TYPE_IQ2_XS) {
            uint q = u16_at(at + 2u + 2u * g);
            e = GRID_IQ2_XS + 2u * (q & 511u);
            signs = iq_sign_byte(q >> 9);
            scales = at + 66u;
        } else {
            uint high = (byte_at(at + 66u + g / 4u) >> (2u * (g % 4u))) & 3u;
            e = GRID_IQ2_S + 2u * (byte_at(at + 2u + g) | (high << 8));
            signs = byte_at(at + 34u + g);
            scales = at + 74u;
        }
        r.q0 = iq_signed_bytes(grid[e], signs);
        r.q1 = iq_signed_bytes(grid[e + 1u], signs >> 4);
        r.scale = half_at(at) * 0.125;
        r.sc = int(2u * ((byte_at(scales + k) >> (4u * (l / 2u))) & 15u) + 1u);
    } else if (type == TYPE_IQ3_S) {
        // two 9-bit indices 2g, 2g + 1 (qs[i], bit i % 8 of qh[i / 8] on top), a sign byte
        // signs[g], a 4-bit scale a sub-block
        uint i0 = 2u * g, i1 = i0 + 1u;
        uint idx0 = byte_at(at + 2u + i0) | (((byte_at(at + 66u + i0 / 8u) >> (i0 % 8u)) & 1u) << 8);
        uint idx1 = byte_at(at + 2u + i1) | (((byte_at(at + 66u + i1 / 8u) >> (i1 % 8u)) & 1u) << 8);
        uint signs = byte_at(at + 74u + g);
        r.q0 = iq_signed_bytes(grid[GRID_IQ3_S + idx0], signs);
        r.q1 = iq_signed_bytes(grid[GRID_IQ3_S + idx1], signs >> 4);
        r.scale = half_at(at);
        r.sc = int(2u * ((byte_at(at + 106u + k / 2u) >> (4u * (k % 2u))) & 15u) + 1u);
    } else if (type == TYPE_IQ1_S) {
        // an 11-bit index (qs[g], three bits of the sub-block's u16 qh on top); qh's bits
        // 12..14 the sub-block's scale, bit 15 its shift's sign
        uint qh = u16_at(at + 34u + 2u * k);
        uint e = GRID_IQ1_S + 2u * (byte_at(at + 2u + g) | (((qh >> (3u * l)) & 7u) << 8));
        int delta = (qh & 0x8000u) != 0u ? -1 : 1;
        r.q0 = iq1_bytes(grid[e], delta);
        r.q1 = iq1_bytes(grid[e + 1u], delta);
        r.scale = half_at(at) * 0.125;
        r.sc = int(2u * ((qh >> 12) & 7u) + 1u);
    } else { // IQ1_M
        // no d field: the f16 d is the top nibbles of the four u16 scale words; the index's
        // three high bits and the shift's sign in a nibble of qh[g / 2]; 3-bit scales of each
        // half of a sub-block
        uint nibble = (byte_at(at + 32u + g / 2u) >> (4u * (g % 2u))) & 15u;
        uint e = GRID_IQ1_S + 2u * (byte_at(at + g) | ((nibble & 7u) << 8));
        int delta = (nibble & 8u) != 0u ? -1 : 1;
        uint d = (u16_at(at + 48u) >> 12) | ((u16_at(at + 50u) >> 8) & 0xf0u) |
                 ((u16_at(at + 52u) >> 4) & 0xf00u) | (u16_at(at + 54u) & 0xf000u);
        r.q0 = iq1_bytes(grid[e], delta);
        r.q1 = iq1_bytes(grid[e + 1u], delta);
        r.scale = unpackHalf2x16(d).x * 0.125;
        r.sc = int(2u * ((u16_at(at + 48u + 2u * (k / 2u)) >> (6u * (k % 2u) + 3u * (l / 2u))) & 7u) + 1u);
    }
    return r;
}

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

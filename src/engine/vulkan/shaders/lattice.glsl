// The lattice IQ types' grids (src/engine/quant_iq_grids.c) and their groups' decoding,
// for the shaders that read them (common.glsl includes this where READS_GRIDS): vk_device.c
// uploads the grids at device open into one buffer, bound as the only binding of descriptor
// set 1 (VK_GRIDS_SET), which only these shaders' pipelines have. The tables follow one
// another at the word offsets below (vk_device.c's): an IQ2 entry of 8 elements is two
// words and an IQ3 entry of 4 one word, element j in byte j; an IQ1 entry of 8 elements
// (-1, 0 or 1 each) is one word of nibbles holding each plus one, element j in the low
// nibble of byte j and element j + 4 in its high nibble.
// A shader that defines GRIDS_SHARED (the tiled products, whose workgroups look each entry
// up many times) copies its LATTICE_TYPE's table into shared memory (stage_grids) and looks
// it up there; the others read the buffer.
layout(std430, set = 1, binding = 0) readonly buffer Grids { uint grid[]; };
const uint GRID_IQ2_XXS = 0u;    // 256 entries of 8
const uint GRID_IQ2_XS = 512u;   // 512 of 8
const uint GRID_IQ2_S = 1536u;   // 1024 of 8
const uint GRID_IQ3_XXS = 3584u; // 256 of 4
const uint GRID_IQ3_S = 3840u;   // 512 of 4
const uint GRID_IQ1_S = 4352u;   // 2048 of 8 in nibbles (IQ1_S and IQ1_M)

#if defined(GRIDS_SHARED)
// LATTICE_TYPE's table: where it begins in grid[] and its words (at most 2048: 8 KiB)
const uint GRID_TABLE = LATTICE_TYPE == TYPE_IQ2_XXS ? GRID_IQ2_XXS
                      : LATTICE_TYPE == TYPE_IQ2_XS ? GRID_IQ2_XS
                      : LATTICE_TYPE == TYPE_IQ2_S ? GRID_IQ2_S
                      : LATTICE_TYPE == TYPE_IQ3_XXS ? GRID_IQ3_XXS
                      : LATTICE_TYPE == TYPE_IQ3_S ? GRID_IQ3_S : GRID_IQ1_S;
const uint GRID_WORDS = LATTICE_TYPE == TYPE_IQ2_XXS ? 512u
                      : LATTICE_TYPE == TYPE_IQ2_XS ? 1024u
                      : LATTICE_TYPE == TYPE_IQ3_XXS ? 256u
                      : LATTICE_TYPE == TYPE_IQ3_S ? 512u : 2048u;
shared uint grid_shared[GRID_WORDS];

// the workgroup's copy of the table, made by its `threads` invocations (tid one of them)
// and waited for: every invocation calls it, in uniform control flow, before a lookup
void stage_grids(uint tid, uint threads)
{
    for (uint i = tid; i < GRID_WORDS; i += threads)
        grid_shared[i] = grid[GRID_TABLE + i];
    barrier();
}

// word i of the table that begins at `table` (LATTICE_TYPE's)
uint grid_word(uint table, uint i)
{
    return grid_shared[i];
}
#else
uint grid_word(uint table, uint i)
{
    return grid[table + i];
}
#endif

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

// IQ1_S's and IQ1_M's four grid values of n (a nibble each at bits 0..3 of its bytes: the
// value plus one) plus the group's shift of delta / 8 (delta +-1), times 8 so that they are
// integers: 8 g + delta, as signed bytes. Per byte 8 n + delta + 8 (7..25) then 16 off: 112
// added keeps it below 256, and flipping the top bit takes 128 off
uint iq1_bytes(uint n, int delta)
{
    uint biased = (n << 3) + uint(delta + 8) * 0x01010101u;
    return (biased + 112u * 0x01010101u) ^ 0x80808080u;
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
            r.q0 = iq_signed_bytes(grid_word(GRID_IQ3_XXS, byte_at(idx)), signs);
            r.q1 = iq_signed_bytes(grid_word(GRID_IQ3_XXS, byte_at(idx + 1u)), signs >> 4);
        } else {
            uint e = 2u * byte_at(at + 2u + 8u * k + l);
            r.q0 = iq_signed_bytes(grid_word(GRID_IQ2_XXS, e), signs);
            r.q1 = iq_signed_bytes(grid_word(GRID_IQ2_XXS, e + 1u), signs >> 4);
        }
        r.scale = half_at(at) * (iq3 ? 0.25 : 0.125);
        r.sc = int(2u * (aux >> 28) + 1u);
    } else if (type == TYPE_IQ2_XS || type == TYPE_IQ2_S) {
        // IQ2_XS: a u16 a group, a 9-bit index and a sign code; IQ2_S: a 10-bit index
        // (qs[g], two bits of qh[g / 4] on top) and a sign byte qs[32 + g]. Two 4-bit scales
        // a sub-block, one for each half
        uint table, e, signs, scales;
        if (type == TYPE_IQ2_XS) {
            uint q = u16_at(at + 2u + 2u * g);
            table = GRID_IQ2_XS;
            e = 2u * (q & 511u);
            signs = iq_sign_byte(q >> 9);
            scales = at + 66u;
        } else {
            uint high = (byte_at(at + 66u + g / 4u) >> (2u * (g % 4u))) & 3u;
            table = GRID_IQ2_S;
            e = 2u * (byte_at(at + 2u + g) | (high << 8));
            signs = byte_at(at + 34u + g);
            scales = at + 74u;
        }
        r.q0 = iq_signed_bytes(grid_word(table, e), signs);
        r.q1 = iq_signed_bytes(grid_word(table, e + 1u), signs >> 4);
        r.scale = half_at(at) * 0.125;
        r.sc = int(2u * ((byte_at(scales + k) >> (4u * (l / 2u))) & 15u) + 1u);
    } else if (type == TYPE_IQ3_S) {
        // two 9-bit indices 2g, 2g + 1 (qs[i], bit i % 8 of qh[i / 8] on top), a sign byte
        // signs[g], a 4-bit scale a sub-block
        uint i0 = 2u * g, i1 = i0 + 1u;
        uint idx0 = byte_at(at + 2u + i0) | (((byte_at(at + 66u + i0 / 8u) >> (i0 % 8u)) & 1u) << 8);
        uint idx1 = byte_at(at + 2u + i1) | (((byte_at(at + 66u + i1 / 8u) >> (i1 % 8u)) & 1u) << 8);
        uint signs = byte_at(at + 74u + g);
        r.q0 = iq_signed_bytes(grid_word(GRID_IQ3_S, idx0), signs);
        r.q1 = iq_signed_bytes(grid_word(GRID_IQ3_S, idx1), signs >> 4);
        r.scale = half_at(at);
        r.sc = int(2u * ((byte_at(at + 106u + k / 2u) >> (4u * (k % 2u))) & 15u) + 1u);
    } else if (type == TYPE_IQ1_S) {
        // an 11-bit index (qs[g], three bits of the sub-block's u16 qh on top); qh's bits
        // 12..14 the sub-block's scale, bit 15 its shift's sign
        uint qh = u16_at(at + 34u + 2u * k);
        uint v = grid_word(GRID_IQ1_S, byte_at(at + 2u + g) | (((qh >> (3u * l)) & 7u) << 8));
        int delta = (qh & 0x8000u) != 0u ? -1 : 1;
        r.q0 = iq1_bytes(v & 0x0f0f0f0fu, delta);
        r.q1 = iq1_bytes((v >> 4) & 0x0f0f0f0fu, delta);
        r.scale = half_at(at) * 0.125;
        r.sc = int(2u * ((qh >> 12) & 7u) + 1u);
    } else { // IQ1_M
        // no d field: the f16 d is the top nibbles of the four u16 scale words; the index's
        // three high bits and the shift's sign in a nibble of qh[g / 2]; 3-bit scales of each
        // half of a sub-block
        uint nibble = (byte_at(at + 32u + g / 2u) >> (4u * (g % 2u))) & 15u;
        uint v = grid_word(GRID_IQ1_S, byte_at(at + g) | ((nibble & 7u) << 8));
        int delta = (nibble & 8u) != 0u ? -1 : 1;
        uint d = (u16_at(at + 48u) >> 12) | ((u16_at(at + 50u) >> 8) & 0xf0u) |
                 ((u16_at(at + 52u) >> 4) & 0xf00u) | (u16_at(at + 54u) & 0xf000u);
        r.q0 = iq1_bytes(v & 0x0f0f0f0fu, delta);
        r.q1 = iq1_bytes((v >> 4) & 0x0f0f0f0fu, delta);
        r.scale = unpackHalf2x16(d).x * 0.125;
        r.sc = int(2u * ((u16_at(at + 48u + 2u * (k / 2u)) >> (6u * (k % 2u) + 3u * (l / 2u))) & 7u) + 1u);
    }
    return r;
}


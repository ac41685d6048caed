// Shared by the shaders: weights are read as 32-bit words whatever their type, so that
// ggml's blocks (18 bytes for Q4_0, 34 for Q8_0) need no 8- or 16-bit storage feature;
// a weight buffer is declared `uint w[]` at binding 0 by every shader that includes this.

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

// x rounded to the nearest f16 and back
float round_half(float x)
{
    return unpackHalf2x16(packHalf2x16(vec2(x, 0.0))).x;
}

// weight types, ggml's ids
const uint TYPE_F32 = 0u;
const uint TYPE_F16 = 1u;
const uint TYPE_Q4_0 = 2u;
const uint TYPE_Q8_0 = 8u;

// element i of a row of `type` beginning at byte offset `row`
float weight_at(uint type, uint row, uint i)
{
    if (type == TYPE_F32)
        return uintBitsToFloat(w[(row >> 2) + i]);
    if (type == TYPE_F16)
        return half_at(row + 2u * i);
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

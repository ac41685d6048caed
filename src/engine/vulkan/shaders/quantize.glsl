// One block of activations quantized as the CPU quantizes them for a product (quantize_q8_0,
// quantize_q8_k, and the operations that quantize their output: rmsnorm_quantize,
// swiglu_quantize). The includer defines QUANTIZE_INPUT(i), the float at index i, declares
// q[] (quants, four to a word) and d[] (scales), and includes half.glsl first.

// Q8_0 block b: the scale amax / 127 (kept as the f16 it is stored as) and each value times
// 127 / amax rounded to nearest even. With sums (Q8_1, the partner of Q4_1 and Q5_1), scales
// take two floats a block: the scale, and the f16 value of the unrounded scale times the
// block's quant sum.
void quantize_q8_0_block(uint b, bool sums)
{
    float amax = 0.0;
    for (uint j = 0u; j < 32u; j++)
        amax = max(amax, abs(QUANTIZE_INPUT(b * 32u + j)));
    float id = amax != 0.0 ? 127.0 / amax : 0.0;
    int sum = 0;
    for (uint k = 0u; k < 8u; k++) {
        int word = 0;
        for (uint j = 0u; j < 4u; j++) {
            int v = int(roundEven(QUANTIZE_INPUT(b * 32u + k * 4u + j) * id));
            word |= (v & 0xff) << (8u * j);
            sum += v;
        }
        q[b * 8u + k] = word;
    }
    float scale = amax / 127.0;
    float rounded = round_half(scale);
    if (sums) {
        d[2u * b] = rounded;
        d[2u * b + 1u] = round_half(scale * float(sum));
    } else {
        d[b] = rounded;
    }
}

// Q8_K block b of 256: the scale -127 / (the first value of the largest magnitude), values
// times it rounded to nearest even (at most 127), the block's scale 1 / that (a float); an
// all-zero block is all zeros.
void quantize_q8_k_block(uint b)
{
    float amax = 0.0, top = 0.0;
    for (uint j = 0u; j < 256u; j++) {
        float v = QUANTIZE_INPUT(b * 256u + j);
        if (abs(v) > amax) {
            amax = abs(v);
            top = v;
        }
    }
    float iscale = amax != 0.0 ? -127.0 / top : 0.0;
    for (uint k = 0u; k < 64u; k++) {
        int word = 0;
        for (uint j = 0u; j < 4u; j++) {
            int v = min(int(roundEven(iscale * QUANTIZE_INPUT(b * 256u + k * 4u + j))), 127);
            word |= (v & 0xff) << (8u * j);
        }
        q[b * 64u + k] = word;
    }
    d[b] = amax != 0.0 ? 1.0 / iscale : 0.0;
}

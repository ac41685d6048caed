#version 450
// A recurrent layer's causal short conv, in place on each token's row of the batch. Gated
// DeltaNet's and Mamba2's (delta_net.c's delta_net_conv_token): `channels` floats at `offset`
// of the row, the conv, plus the bias where there is one, then silu. LFM2's gated short conv
// (gated: delta_net.c's delta_net_gated_conv_token): [b | c | x] of `channels` each, the conv
// over b * x, and c times it written where b was. A channel's sum runs over its taps from the
// oldest input of the window its token's sequence keeps to the token's own, which then joins
// the window. One invocation per channel takes the batch's tokens in order, so each
// sequence's window moves on token by token, as on the CPU.
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer Kernels { float w[]; };     // per channel its taps
layout(std430, binding = 1) readonly buffer Tokens { uint tokens[]; };  // (sequence, cell)
layout(std430, binding = 2) buffer Window { float window[]; };  // [sequence][taps - 1][channel]
layout(std430, binding = 3) readonly buffer Bias { float bias[]; };  // per channel
layout(std430, binding = 4) buffer X { float x[]; };            // `stride` floats a token
layout(push_constant) uniform Params {
    uint channels, taps, n_tokens, stride, offset, gated, has_bias;
} p;

void main()
{
    uint c = gl_GlobalInvocationID.x, C = p.channels, taps = p.taps;
    if (c >= C)
        return;
    bool gated = p.gated != 0u;
    uint span = (taps - 1u) * C;
    for (uint t = 0u; t < p.n_tokens; t++) {
        uint base = tokens[2u * t] * span + c, row = t * p.stride + p.offset;
        float value = x[row + c], sum = 0.0;
        if (gated)
            value *= x[row + 2u * C + c];
        for (uint k = 0u; k + 1u < taps; k++)
            sum += window[base + k * C] * w[c * taps + k];
        sum += value * w[c * taps + taps - 1u];
        for (uint k = 0u; k + 2u < taps; k++)
            window[base + k * C] = window[base + (k + 1u) * C];
        if (taps > 1u)
            window[base + (taps - 2u) * C] = value;
        if (p.has_bias != 0u)
            sum += bias[c];
        x[row + c] = gated ? x[row + C + c] * sum : sum / (1.0 + exp(-sum));
    }
}

#version 450
// A recurrent layer's causal short conv, each token's row in place. Gated DeltaNet's
// (delta_net.c's delta_net_conv_token): a row of channels, the conv then silu. LFM2's gated
// short conv (gated: delta_net.c's delta_net_gated_conv_token): a row [b | c | x] of 3 x
// channels, the conv over b * x, and c times it written where b was. A channel's sum runs
// over its taps from the oldest input of the window its token's sequence keeps to the
// token's own, which then joins the window. One invocation per channel takes the batch's
// tokens in order, so each sequence's window moves on token by token, as on the CPU.
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer Kernels { float w[]; };     // per channel its taps
layout(std430, binding = 1) readonly buffer Tokens { uint tokens[]; };  // (sequence, cell)
layout(std430, binding = 2) buffer Window { float window[]; };  // [sequence][taps - 1][channel]
layout(std430, binding = 4) buffer X { float x[]; };            // a row a token
layout(push_constant) uniform Params { uint channels, taps, n_tokens, gated; } p;

void main()
{
    uint c = gl_GlobalInvocationID.x, C = p.channels, taps = p.taps;
    if (c >= C)
        return;
    bool gated = p.gated != 0u;
    uint span = (taps - 1u) * C, stride = gated ? 3u * C : C;
    for (uint t = 0u; t < p.n_tokens; t++) {
        uint base = tokens[2u * t] * span + c, row = t * stride;
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
        x[row + c] = gated ? x[row + C + c] * sum : sum / (1.0 + exp(-sum));
    }
}

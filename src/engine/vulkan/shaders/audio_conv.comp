#version 450
// Gemma 4's audio tower's convolution module after its first product (audio_gemma4.c's
// conv_step): each row's gated linear unit, a / (1 + exp(-b)) of its halves [a | b] of
// 2 x channels floats, through a causal depthwise convolution: row r's channel c sums
// kernel[c][t] times the unit's row r - (taps - 1 - t), the rows before the first counting
// as zeros. One thread per (row, channel), the taps oldest first as the CPU sums them.
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer In { float x[]; };
layout(std430, binding = 1) readonly buffer Kernel { float w[]; };
layout(std430, binding = 4) writeonly buffer Out { float y[]; };
layout(push_constant) uniform Params { uint n_rows, channels, taps; } p;

void main()
{
    uint at = gl_GlobalInvocationID.x;
    if (at >= p.n_rows * p.channels)
        return;
    uint r = at / p.channels, c = at % p.channels;
    float s = 0.0;
    for (uint t = 0u; t < p.taps; t++) {
        uint back = p.taps - 1u - t;
        if (back <= r) {
            uint row = (r - back) * 2u * p.channels;
            float g = x[row + c] / (1.0 + exp(-x[row + p.channels + c]));
            s += w[c * p.taps + t] * g;
        }
    }
    y[at] = s;
}

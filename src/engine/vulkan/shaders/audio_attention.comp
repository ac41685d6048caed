#version 450
// Gemma 4's audio tower's local attention (audio_gemma4.c's attn_task): query row i of a
// head sees keys i, i - 1, .. i - past (fewer at the start); the logit of distance d is
// q . (k[i - d] + rel[d]), capped by cap * tanh(logit / cap); softmax over those in reach;
// out = the values weighted by it. q and k come scaled. One thread per (row, head), the sums
// in the CPU's order.
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer Q { float q[]; };
layout(std430, binding = 1) readonly buffer K { float k[]; };
layout(std430, binding = 2) readonly buffer V { float v[]; };
layout(std430, binding = 3) readonly buffer Rel { float rel[]; };
layout(std430, binding = 4) writeonly buffer Out { float o[]; };
layout(push_constant) uniform Params { uint n_rows, n_head, head_dim, past; float cap; } p;

const uint MAX_REACH = 32u;

void main()
{
    uint at = gl_GlobalInvocationID.x;
    if (at >= p.n_rows * p.n_head)
        return;
    uint i = at / p.n_head, h = at % p.n_head, E = p.n_head * p.head_dim;
    uint reach = min(i, p.past) + 1u;
    uint qo = i * E + h * p.head_dim;
    float logit[MAX_REACH];
    float top = -1.0 / 0.0;
    for (uint d = 0u; d < reach; d++) {
        uint ko = (i - d) * E + h * p.head_dim, ro = d * E + h * p.head_dim;
        float s = 0.0;
        for (uint c = 0u; c < p.head_dim; c++)
            s += q[qo + c] * (k[ko + c] + rel[ro + c]);
        // tanh of 10 is 1 in floats: the bound keeps tanh's exp(2x) finite
        s = p.cap * tanh(clamp(s / p.cap, -10.0, 10.0));
        logit[d] = s;
        top = max(top, s);
    }
    float sum = 0.0;
    for (uint d = 0u; d < reach; d++) {
        logit[d] = exp(logit[d] - top);
        sum += logit[d];
    }
    for (uint d = 0u; d < reach; d++)
        logit[d] /= sum;
    // each output summed over the distances in the CPU's order, then written once
    for (uint c = 0u; c < p.head_dim; c++) {
        float acc = 0.0;
        for (uint d = 0u; d < reach; d++)
            acc += logit[d] * v[(i - d) * E + h * p.head_dim + c];
        o[qo + c] = acc;
    }
}

#version 450
// Gated DeltaNet's recurrence (delta_net.c's delta_net_step): each value head's state, S rows
// of S per sequence, taken through the batch's tokens of its sequence in order. Per token the
// state decays, takes strength * (v - S k) k^T, and out = S q / sqrt(S). A row's update
// reads that row alone, so invocation j of workgroup (., h, sequence) owns row j of value
// head h, its sums in the CPU's order. Value head h reads key head h mod key heads, or
// h / (heads / key heads) where the heads are grouped by key head (Qwen3-Next).
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer Tokens { uint tokens[]; }; // (sequence, cell)
layout(std430, binding = 1) readonly buffer Qkv { float qkv[]; }; // q, k, v heads a row
layout(std430, binding = 2) readonly buffer Decay { float decay[]; };     // [token][head]
layout(std430, binding = 3) readonly buffer Strength { float strength[]; };
layout(std430, binding = 4) writeonly buffer Out { float outs[]; };     // [token][head][S]
layout(std430, binding = 5) buffer State { float state[]; };  // [sequence][head][row][S]
layout(push_constant) uniform Params {
    uint head_dim, n_heads, n_key_heads, channels, n_tokens;
    float scale;
    uint grouped;
} p;

void main()
{
    uint S = p.head_dim, j = gl_GlobalInvocationID.x, h = gl_WorkGroupID.y;
    uint seq = gl_WorkGroupID.z;
    if (j >= S)
        return;
    uint key_width = p.n_key_heads * S;
    uint kh = p.grouped != 0u ? h / (p.n_heads / p.n_key_heads) : h % p.n_key_heads;
    uint row = ((seq * p.n_heads + h) * S + j) * S;
    for (uint t = 0u; t < p.n_tokens; t++) {
        if (tokens[2u * t] != seq)
            continue;
        uint q = t * p.channels + kh * S, k = q + key_width;
        float v = qkv[t * p.channels + 2u * key_width + h * S + j];
        float d = decay[t * p.n_heads + h], sk = 0.0, sq = 0.0;
        for (uint i = 0u; i < S; i++) {
            float s = state[row + i] * d;
            state[row + i] = s;
            sk += s * qkv[k + i];
        }
        float delta = (v - sk) * strength[t * p.n_heads + h];
        for (uint i = 0u; i < S; i++) {
            float s = state[row + i] + qkv[k + i] * delta;
            state[row + i] = s;
            sq += s * qkv[q + i];
        }
        outs[(t * p.n_heads + h) * S + j] = sq * p.scale;
    }
}

#version 450
// Mamba2's selective scan (mamba2.c's scan_task): each head's state, P rows of N per
// sequence, taken through the batch's tokens of its sequence in order. Per token, with
// step = softplus(dt + dt_bias) and decay = exp(step * A): row i becomes decay * S[i] +
// (x[i] * step) * B, and y[i] = S[i] . C + D * x[i]. A row's update reads that row alone,
// so invocation i of workgroup (., h, sequence) owns row i of head h, its sums in the CPU's
// order. Head h reads group h / (heads / groups) of B and C.
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer Tokens { uint tokens[]; }; // (sequence, cell)
// a row a token: z (heads x P), then the conv's output x (heads x P), B and C (groups x N
// each), then dt (a value per head)
layout(std430, binding = 1) readonly buffer Proj { float proj[]; };
layout(std430, binding = 2) readonly buffer Heads { float heads[]; }; // dt_bias, A, D: H each
layout(std430, binding = 4) writeonly buffer Out { float outs[]; };    // [token][head][P]
layout(std430, binding = 5) buffer State { float state[]; };  // [sequence][head][P][N]
layout(push_constant) uniform Params {
    uint head_dim, n_heads, n_groups, state_size, channels, n_tokens;
} p;

void main()
{
    uint P = p.head_dim, H = p.n_heads, N = p.state_size, G = p.n_groups;
    uint i = gl_GlobalInvocationID.x, h = gl_WorkGroupID.y, seq = gl_WorkGroupID.z;
    if (i >= P)
        return;
    uint value_width = H * P, row_width = value_width + p.channels + H, g = h / (H / G);
    float dt_bias = heads[h], a = heads[H + h], skip = heads[2u * H + h];
    uint at = ((seq * H + h) * P + i) * N;
    for (uint t = 0u; t < p.n_tokens; t++) {
        if (tokens[2u * t] != seq)
            continue;
        uint row = t * row_width, b = row + 2u * value_width + g * N, c = b + G * N;
        float x = proj[row + value_width + h * P + i];
        float dt = proj[row + value_width + p.channels + h] + dt_bias;
        float step = dt > 20.0 ? dt : log(1.0 + exp(dt));
        float decay = exp(step * a), x_step = x * step, sum = 0.0;
        for (uint j = 0u; j < N; j++) {
            float s = state[at + j] * decay + proj[b + j] * x_step;
            state[at + j] = s;
            sum += s * proj[c + j];
        }
        outs[(t * H + h) * P + i] = sum + x * skip;
    }
}

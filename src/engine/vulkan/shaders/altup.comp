#version 450
// gemma3n's AltUp mixing (arch_gemma3n.c's gemma3n_altup_predict_rows and _correct_rows), a
// thread per (token, element) for all the streams, each sum in the CPU's order and without
// fused multiply-adds so that the values are the CPU's bits. Streams: a_n blocks of
// n_tokens rows of n floats, `stride` floats apart.
// op 0, predict: out[j] = in[j] + sum over i of in[i] * coef[t][j * a_n + i] (in: binding 1).
// op 1, correct: out[j] = (x - in[0]) * (coef[t][j] + 1) + in[j] (in: the predictions, x:
// binding 2, the block's output).
// op 2, the per-layer branch: out[j] += x for every stream but the active one (j > 0).
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer Coef { float coef[]; };
layout(std430, binding = 1) readonly buffer In { float s_in[]; };
layout(std430, binding = 2) readonly buffer X { float x[]; };
layout(std430, binding = 4) buffer Out { float s_out[]; };
layout(push_constant) uniform Params { uint n, a_n, n_tokens, stride, op; } p;

void main()
{
    uint count = p.n * p.n_tokens;
    for (uint e = gl_GlobalInvocationID.x; e < count; e += gl_NumWorkGroups.x * 256u) {
        uint t = e / p.n;
        if (p.op == 0u) {
            uint c = t * p.a_n * p.a_n;
            for (uint j = 0u; j < p.a_n; j++) {
                precise float sum = 0.0;
                for (uint i = 0u; i < p.a_n; i++)
                    sum += s_in[i * p.stride + e] * coef[c + j * p.a_n + i];
                precise float value = sum + s_in[j * p.stride + e];
                s_out[j * p.stride + e] = value;
            }
        } else if (p.op == 2u) {
            for (uint j = 1u; j < p.a_n; j++)
                s_out[j * p.stride + e] += x[e];
        } else {
            precise float innovation = x[e] - s_in[e];
            for (uint j = 0u; j < p.a_n; j++) {
                precise float scale = coef[t * p.a_n + j] + 1.0;
                precise float value = innovation * scale + s_in[j * p.stride + e];
                s_out[j * p.stride + e] = value;
            }
        }
    }
}

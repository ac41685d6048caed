#version 450
// out[r] = (x[r] - mean) / sqrt(var + eps) * w + b (b only when has_bias): one workgroup per
// row, the mean first and then the variance of the deviations, as the CPU's LayerNorm does.
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer Weight { float w[]; };
layout(std430, binding = 1) readonly buffer Input { float x[]; };
layout(std430, binding = 2) readonly buffer Bias { float b[]; };
layout(std430, binding = 4) writeonly buffer Output { float y[]; };
layout(push_constant) uniform Params { uint n; float eps; uint has_bias; } p;

shared float partial[64];

// the sum over the row of every thread's share: each thread adds the 64 partial sums alike
// (one barrier, see matmul.glsl), the second barrier lets partial be written again
float row_sum(float mine)
{
    partial[gl_LocalInvocationID.x] = mine;
    barrier();
    float sum = 0.0;
    for (uint i = 0u; i < 64u; i++)
        sum += partial[i];
    barrier();
    return sum;
}

void main()
{
    uint tid = gl_LocalInvocationID.x, row = gl_WorkGroupID.x * p.n;
    float sum = 0.0;
    for (uint i = tid; i < p.n; i += 64u)
        sum += x[row + i];
    float mean = row_sum(sum) / float(p.n);
    float sum2 = 0.0;
    for (uint i = tid; i < p.n; i += 64u) {
        float d = x[row + i] - mean;
        sum2 += d * d;
    }
    float scale = 1.0 / sqrt(row_sum(sum2) / float(p.n) + p.eps);
    for (uint i = tid; i < p.n; i += 64u) {
        float v = (x[row + i] - mean) * scale * w[i];
        y[row + i] = p.has_bias != 0u ? v + b[i] : v;
    }
}

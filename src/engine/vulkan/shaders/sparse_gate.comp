#version 450
// In place per row of n floats, gemma3n's sparse FFN gate (arch_gemma3n.c's
// gemma3n_sparse_gate): x = max(x - (mean + std_mul * std), 0), the standard deviation
// unbiased. One workgroup per row; the sums in float (the CPU's in double), so the cutoff is
// the CPU's within a float's rounding of the row's sums.
layout(local_size_x = 64) in;
layout(std430, binding = 4) buffer X { float x[]; };
layout(push_constant) uniform Params { uint n; float std_mul; } p;

shared float partial[64];

// the sum of every thread's v (all threads take the same value, as rmsnorm.comp's)
float row_sum(float v)
{
    uint tid = gl_LocalInvocationID.x;
    partial[tid] = v;
    barrier();
    float sum = 0.0;
    for (uint i = 0u; i < 64u; i++)
        sum += partial[i];
    barrier(); // every thread has read partial before it is written again
    return sum;
}

void main()
{
    uint tid = gl_LocalInvocationID.x, row = gl_WorkGroupID.x * p.n;
    float sum = 0.0;
    for (uint i = tid; i < p.n; i += 64u)
        sum += x[row + i];
    float mean = row_sum(sum) / float(p.n);
    float squares = 0.0;
    for (uint i = tid; i < p.n; i += 64u) {
        float d = x[row + i] - mean;
        squares += d * d;
    }
    float cutoff = mean + sqrt(row_sum(squares) * (1.0 / float(p.n - 1u))) * p.std_mul;
    for (uint i = tid; i < p.n; i += 64u)
        x[row + i] = max(x[row + i] - cutoff, 0.0);
}

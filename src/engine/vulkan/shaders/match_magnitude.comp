#version 450
// y[r] = y[r] * |target[r]| / |y[r]| for rows of n floats (arch_gemma3n.c's
// gemma3n_match_magnitude: AltUp's extra streams kept at the active one's length). One
// workgroup per row; the sums in float (the CPU's in double).
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer Target { float target[]; };
layout(std430, binding = 4) buffer Y { float y[]; };
layout(push_constant) uniform Params { uint n; } p;

shared float partial[128];

void main()
{
    uint tid = gl_LocalInvocationID.x, row = gl_WorkGroupID.x * p.n;
    float want = 0.0, now = 0.0;
    for (uint i = tid; i < p.n; i += 64u) {
        want += target[row + i] * target[row + i];
        now += y[row + i] * y[row + i];
    }
    partial[tid] = want;
    partial[64u + tid] = now;
    barrier();
    want = 0.0;
    now = 0.0;
    for (uint i = 0u; i < 64u; i++) {
        want += partial[i];
        now += partial[64u + i];
    }
    want = sqrt(want);
    now = sqrt(now);
    for (uint i = tid; i < p.n; i += 64u)
        y[row + i] = y[row + i] * want / now;
}

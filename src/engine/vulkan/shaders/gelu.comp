#version 450
// In place over n elements (grid-stride): gated != 0, x = gelu(x) * up (GeGLU); else
// x = gelu(x). GELU's tanh form read as the CPU reads it: x rounded to fp16 indexes a table
// of fp16 results (blocks.c's, two to a word); below -10 it is 0 and from 10 on x itself.
// The table keeps the CPU's bits: a device's own tanh differs in the last places, enough
// to move values on an fp16 rounding boundary by a step.
#extension GL_GOOGLE_include_directive : require
layout(local_size_x = 256) in;
layout(std430, binding = 0) buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer Up { float u[]; };
layout(std430, binding = 2) readonly buffer Table { uint table[]; };
layout(push_constant) uniform Params { uint n, gated; } p;

#include "half.glsl"

float gelu(float v)
{
    if (v <= -10.0)
        return 0.0;
    if (v >= 10.0)
        return v;
    uint h = half_bits(v);
    return unpackHalf2x16(table[h >> 1] >> ((h & 1u) * 16u)).x;
}

void main()
{
    for (uint i = gl_GlobalInvocationID.x; i < p.n; i += gl_NumWorkGroups.x * 256u)
        x[i] = p.gated != 0u ? gelu(x[i]) * u[i] : gelu(x[i]);
}

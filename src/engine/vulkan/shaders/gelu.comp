#version 450
// In place over n elements (grid-stride): gated != 0, x = gelu(x) * up (GeGLU); else
// x = gelu(x). GELU read as the CPU reads it: x rounded to fp16 indexes a table of fp16
// results (two to a word). The tanh form's table (blocks.c's) is not read below -10 (0) and
// from 10 on (x itself); with whole != 0 the table is read for every x, as the CPU reads its
// quick GELU's (vision.c's). The table keeps the CPU's bits: a device's own tanh or exp
// differs in the last places, enough to move values on an fp16 rounding boundary by a step.
#extension GL_GOOGLE_include_directive : require
layout(local_size_x = 256) in;
layout(std430, binding = 0) buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer Up { float u[]; };
layout(std430, binding = 2) readonly buffer Table { uint table[]; };
layout(push_constant) uniform Params { uint n, gated, whole; } p;

#include "half.glsl"

float gelu(float v)
{
    if (p.whole == 0u && v <= -10.0)
        return 0.0;
    if (p.whole == 0u && v >= 10.0)
        return v;
    uint h = half_bits(v);
    return unpackHalf2x16(table[h >> 1] >> ((h & 1u) * 16u)).x;
}

void main()
{
    for (uint i = gl_GlobalInvocationID.x; i < p.n; i += gl_NumWorkGroups.x * 256u)
        x[i] = p.gated != 0u ? gelu(x[i]) * u[i] : gelu(x[i]);
}

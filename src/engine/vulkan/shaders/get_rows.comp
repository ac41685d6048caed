#version 450
// out[k] = row ids[k] of a weight matrix of any type weight_at reads, dequantized. One group
// per id.
#extension GL_GOOGLE_include_directive : require
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer Weights { uint w[]; };
layout(std430, binding = 1) readonly buffer Ids { uint ids[]; };
layout(std430, binding = 4) writeonly buffer Output { float y[]; };
layout(push_constant) uniform Params { uint n, row_bytes, type; } p;

// weight_at takes the lattice IQ types too, whose grids it reads (lattice.glsl)
#define READS_GRIDS
#include "common.glsl"

void main()
{
    uint k = gl_WorkGroupID.x, row = ids[k] * p.row_bytes;
    for (uint i = gl_LocalInvocationID.x; i < p.n; i += 64u)
        y[k * p.n + i] = weight_at(p.type, row, i);
}

#version 450
// The matrix product of matmul.glsl for F32 weights.
#define WEIGHT_F32
#include "matmul.glsl"

#version 450
// The matrix product of matmul.glsl for Q4_0 weights.
#define WEIGHT_Q4_0
#include "matmul.glsl"

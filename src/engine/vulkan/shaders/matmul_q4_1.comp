#version 450
// The matrix product of matmul.glsl for Q4_1 weights.
#define WEIGHT_Q4_1
#include "matmul.glsl"

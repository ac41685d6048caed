#version 450
// The matrix product of matmul.glsl for Q5_1 weights.
#define WEIGHT_Q5_1
#include "matmul.glsl"

#version 450
// The matrix product of matmul.glsl for Q8_0 weights.
#define WEIGHT_Q8_0
#include "matmul.glsl"

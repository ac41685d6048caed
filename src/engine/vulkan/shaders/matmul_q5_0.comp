#version 450
// The matrix product of matmul.glsl for Q5_0 weights.
#define WEIGHT_Q5_0
#include "matmul.glsl"

#version 450
// The matrix product of matmul.glsl for Q4_K weights.
#define WEIGHT_Q4_K
#include "matmul.glsl"

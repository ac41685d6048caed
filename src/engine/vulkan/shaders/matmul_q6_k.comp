#version 450
// The matrix product of matmul.glsl for Q6_K weights.
#define WEIGHT_Q6_K
#include "matmul.glsl"

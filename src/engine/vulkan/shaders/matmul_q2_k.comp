#version 450
// The matrix product of matmul.glsl for Q2_K weights.
#define WEIGHT_Q2_K
#include "matmul.glsl"

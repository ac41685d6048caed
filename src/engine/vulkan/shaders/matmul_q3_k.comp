#version 450
// The matrix product of matmul.glsl for Q3_K weights.
#define WEIGHT_Q3_K
#include "matmul.glsl"

#version 450
// The matrix product of matmul.glsl for Q5_K weights.
#define WEIGHT_Q5_K
#include "matmul.glsl"

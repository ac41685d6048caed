#version 450
// The matrix product of matmul.glsl for BF16 weights.
#define WEIGHT_BF16
#include "matmul.glsl"

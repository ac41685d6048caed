#version 450
// The matrix product of matmul.glsl for F16 weights.
#define WEIGHT_F16
#include "matmul.glsl"

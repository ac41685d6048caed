#version 450
// The matrix product of matmul.glsl for IQ1_M weights.
#define WEIGHT_IQ1_M
#include "matmul.glsl"

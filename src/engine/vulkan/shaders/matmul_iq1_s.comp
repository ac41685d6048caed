#version 450
// The matrix product of matmul.glsl for IQ1_S weights.
#define WEIGHT_IQ1_S
#include "matmul.glsl"

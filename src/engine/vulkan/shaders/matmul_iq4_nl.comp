#version 450
// The matrix product of matmul.glsl for IQ4_NL weights.
#define WEIGHT_IQ4_NL
#include "matmul.glsl"

#version 450
// The matrix product of matmul.glsl for IQ3_S weights.
#define WEIGHT_IQ3_S
#include "matmul.glsl"

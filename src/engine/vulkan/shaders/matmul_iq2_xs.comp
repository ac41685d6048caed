#version 450
// The matrix product of matmul.glsl for IQ2_XS weights.
#define WEIGHT_IQ2_XS
#include "matmul.glsl"

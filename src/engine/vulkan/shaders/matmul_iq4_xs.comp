#version 450
// The matrix product of matmul.glsl for IQ4_XS weights.
#define WEIGHT_IQ4_XS
#include "matmul.glsl"

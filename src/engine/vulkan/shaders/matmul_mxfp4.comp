#version 450
// The matrix product of matmul.glsl for MXFP4 weights.
#define WEIGHT_MXFP4
#include "matmul.glsl"

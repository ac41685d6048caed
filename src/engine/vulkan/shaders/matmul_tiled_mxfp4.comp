#version 450
// The tiled matrix product of matmul_tiled.glsl for MXFP4 weights.
#define WEIGHT_MXFP4
#include "matmul_tiled.glsl"

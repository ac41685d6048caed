#version 450
// The tiled matrix product of matmul_tiled.glsl for Q4_0 weights.
#define WEIGHT_Q4_0
#include "matmul_tiled.glsl"

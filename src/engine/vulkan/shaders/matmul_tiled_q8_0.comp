#version 450
// The tiled matrix product of matmul_tiled.glsl for Q8_0 weights.
#define WEIGHT_Q8_0
#include "matmul_tiled.glsl"

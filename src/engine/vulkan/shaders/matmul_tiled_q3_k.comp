#version 450
// The tiled matrix product of matmul_tiled.glsl for Q3_K weights.
#define WEIGHT_Q3_K
#include "matmul_tiled.glsl"

#version 450
// The tiled matrix product of matmul_tiled.glsl for Q4_K weights.
#define WEIGHT_Q4_K
#include "matmul_tiled.glsl"

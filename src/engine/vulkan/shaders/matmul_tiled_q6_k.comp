#version 450
// The tiled matrix product of matmul_tiled.glsl for Q6_K weights.
#define WEIGHT_Q6_K
#include "matmul_tiled.glsl"

#version 450
// The tiled matrix product of matmul_tiled.glsl for Q2_K weights.
#define WEIGHT_Q2_K
#include "matmul_tiled.glsl"

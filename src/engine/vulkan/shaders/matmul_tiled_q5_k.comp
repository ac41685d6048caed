#version 450
// The tiled matrix product of matmul_tiled.glsl for Q5_K weights.
#define WEIGHT_Q5_K
#include "matmul_tiled.glsl"

#version 450
// The tiled matrix product of matmul_tiled.glsl for BF16 weights.
#define WEIGHT_BF16
#include "matmul_tiled.glsl"

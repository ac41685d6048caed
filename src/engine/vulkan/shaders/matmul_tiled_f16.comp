#version 450
// The tiled matrix product of matmul_tiled.glsl for F16 weights.
#define WEIGHT_F16
#include "matmul_tiled.glsl"

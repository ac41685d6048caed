#version 450
// The tiled matrix product of matmul_tiled.glsl for F32 weights.
#define WEIGHT_F32
#include "matmul_tiled.glsl"

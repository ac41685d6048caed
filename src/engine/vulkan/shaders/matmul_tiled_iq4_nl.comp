#version 450
// The tiled matrix product of matmul_tiled.glsl for IQ4_NL weights.
#define WEIGHT_IQ4_NL
#include "matmul_tiled.glsl"

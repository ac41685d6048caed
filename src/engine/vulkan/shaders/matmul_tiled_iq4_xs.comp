#version 450
// The tiled matrix product of matmul_tiled.glsl for IQ4_XS weights.
#define WEIGHT_IQ4_XS
#include "matmul_tiled.glsl"

#version 450
// The tiled matrix product of matmul_tiled.glsl for IQ1_M weights.
#define LATTICE_TYPE TYPE_IQ1_M
#include "matmul_tiled.glsl"

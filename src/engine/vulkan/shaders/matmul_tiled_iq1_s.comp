#version 450
// The tiled matrix product of matmul_tiled.glsl for IQ1_S weights.
#define LATTICE_TYPE TYPE_IQ1_S
#include "matmul_tiled.glsl"

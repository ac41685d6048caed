#version 450
// The tiled matrix product of matmul_tiled.glsl for IQ2_S weights.
#define LATTICE_TYPE TYPE_IQ2_S
#include "matmul_tiled.glsl"

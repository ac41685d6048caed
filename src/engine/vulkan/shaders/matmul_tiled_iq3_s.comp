#version 450
// The tiled matrix product of matmul_tiled.glsl for IQ3_S weights.
#define LATTICE_TYPE TYPE_IQ3_S
#include "matmul_tiled.glsl"

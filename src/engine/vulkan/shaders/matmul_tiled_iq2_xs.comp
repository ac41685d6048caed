#version 450
// The tiled matrix product of matmul_tiled.glsl for IQ2_XS weights.
#define LATTICE_TYPE TYPE_IQ2_XS
#include "matmul_tiled.glsl"

#version 450
// The tiled matrix product of matmul_tiled.glsl for IQ2_XXS weights.
#define LATTICE_TYPE TYPE_IQ2_XXS
#include "matmul_tiled.glsl"

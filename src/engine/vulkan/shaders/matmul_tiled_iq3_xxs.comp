#version 450
// The tiled matrix product of matmul_tiled.glsl for IQ3_XXS weights.
#define LATTICE_TYPE TYPE_IQ3_XXS
#include "matmul_tiled.glsl"

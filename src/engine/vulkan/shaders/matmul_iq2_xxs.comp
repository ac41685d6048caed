#version 450
// The matrix product of matmul.glsl for IQ2_XXS weights.
#define LATTICE_TYPE TYPE_IQ2_XXS
#include "matmul.glsl"

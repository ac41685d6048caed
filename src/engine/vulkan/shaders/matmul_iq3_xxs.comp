#version 450
// The matrix product of matmul.glsl for IQ3_XXS weights.
#define LATTICE_TYPE TYPE_IQ3_XXS
#include "matmul.glsl"

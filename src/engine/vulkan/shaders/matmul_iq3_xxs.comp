#version 450
// The matrix product of matmul.glsl for IQ3_XXS weights.
#define WEIGHT_IQ3_XXS
#include "matmul.glsl"

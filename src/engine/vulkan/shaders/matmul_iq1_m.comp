#version 450
// The matrix product of matmul.glsl for IQ1_M weights.
#define LATTICE_TYPE TYPE_IQ1_M
#include "matmul.glsl"

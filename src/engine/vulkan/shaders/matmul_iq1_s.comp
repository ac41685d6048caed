#version 450
// The matrix product of matmul.glsl for IQ1_S weights.
#define LATTICE_TYPE TYPE_IQ1_S
#include "matmul.glsl"

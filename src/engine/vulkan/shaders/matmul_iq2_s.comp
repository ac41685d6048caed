#version 450
// The matrix product of matmul.glsl for IQ2_S weights.
#define LATTICE_TYPE TYPE_IQ2_S
#include "matmul.glsl"

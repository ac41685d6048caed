#version 450
// The matrix product of matmul.glsl for IQ3_S weights.
#define LATTICE_TYPE TYPE_IQ3_S
#include "matmul.glsl"

#version 450
// The matrix product of matmul.glsl for IQ2_XS weights.
#define LATTICE_TYPE TYPE_IQ2_XS
#include "matmul.glsl"

#version 450
#define WEIGHT_Q4_K
#include "matmul.glsl"

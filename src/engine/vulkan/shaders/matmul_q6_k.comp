#version 450
#define WEIGHT_Q6_K
#include "matmul.glsl"

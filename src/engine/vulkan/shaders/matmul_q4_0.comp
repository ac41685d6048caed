#version 450
#define WEIGHT_Q4_0
#include "matmul.glsl"

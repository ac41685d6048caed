#version 450
#define WEIGHT_Q8_0
#include "matmul.glsl"

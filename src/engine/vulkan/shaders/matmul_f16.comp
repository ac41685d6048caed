#version 450
#define WEIGHT_F16
#include "matmul.glsl"

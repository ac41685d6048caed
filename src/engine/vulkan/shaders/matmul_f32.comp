#version 450
#define WEIGHT_F32
#include "matmul.glsl"

/* The compute shaders' SPIR-V embedded at build time (vulkan.cmake), by file name. */
#ifndef CORRAL_ENGINE_VK_SHADERS_H
#define CORRAL_ENGINE_VK_SHADERS_H

#include <stddef.h>

typedef struct vk_shader_code {
    const char *name;          /* "matmul_q4_0.spv" */
    const unsigned char *code; /* 4-byte aligned */
    size_t size;
} vk_shader_code;

extern const vk_shader_code vk_shader_table[];
extern const size_t vk_shader_count;

#endif

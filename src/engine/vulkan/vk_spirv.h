/*
 * What a compute shader's SPIR-V says of the storage buffers it binds: which descriptor sets
 * it declares them in, and which bindings of set 0 it may write (those not declared
 * readonly). The recording of dispatches (vk_ops.c) orders a dispatch after an earlier one
 * only where one writes what the other reads or writes, and learns which bindings are
 * written here, from the shaders themselves; the device (vk_device.c) gives a pipeline the
 * lattice IQ types' grids (set 1) where its shader declares that set.
 */
#ifndef CORRAL_ENGINE_VK_SPIRV_H
#define CORRAL_ENGINE_VK_SPIRV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct vk_spirv_buffers {
    uint32_t written; /* bit b: set 0's binding b (b < 32) is not read-only */
    uint32_t sets;    /* bit s: a storage buffer is declared in descriptor set s */
} vk_spirv_buffers;

/* The module's storage buffers into *out. False when code is not a well-formed SPIR-V module
 * or names a descriptor set past 31. */
bool vk_spirv_read_buffers(const unsigned char *code, size_t size, vk_spirv_buffers *out);

#endif

/*
 * What a compute shader's SPIR-V says of the storage buffers it binds: which bindings it may
 * write (those not declared readonly). The recording of dispatches (vk_ops.c) orders a
 * dispatch after an earlier one only where one writes what the other reads or writes, and
 * learns which bindings are written here, from the shaders themselves.
 */
#ifndef CORRAL_ENGINE_VK_SPIRV_H
#define CORRAL_ENGINE_VK_SPIRV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Bit b of *written set when the module's storage buffer at binding b (set 0, b < 32) is
 * not read-only. False when code is not a well-formed SPIR-V module. */
bool vk_spirv_written_bindings(const unsigned char *code, size_t size, uint32_t *written);

#endif

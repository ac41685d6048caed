/*
 * The seam between the ops table (quant.c) and the K-quant kernels (quant_k*.c): Q2_K..Q6_K
 * weights and their Q8_K activations. quant.c owns the table and the level clamping; the
 * K-quant files own every function behind the pointers returned here.
 */
#ifndef CORRAL_ENGINE_QUANT_K_H
#define CORRAL_ENGINE_QUANT_K_H

#include <stdint.h>

#include "cpu.h"
#include "quant.h"

/*
 * Ops of K-quant type `type` (TENSOR_TYPE_Q2_K..TENSOR_TYPE_Q8_K) at `level`, or NULL when
 * that type has no kernels. `level` is already clamped to what the CPU runs; an
 * implementation without kernels at that level returns its best lower level's ops.
 * Q8_K's entry is the activation type itself: dequantize, quantize, and act_type Q8_K.
 */
const quant_ops *quant_k_ops(uint32_t type, enum cpu_level level);

#endif

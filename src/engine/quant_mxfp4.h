/*
 * The seam between the ops table (quant.c) and the kernels of MXFP4 (ggml type 39, gpt-oss's
 * expert weights): blocks of 32 values, each a 4-bit E2M1 code, sharing one E8M0 exponent
 * byte. quant_mxfp4.c owns the scalar code, the packed layout and the per-level tables,
 * quant_mxfp4_avx2.c and quant_mxfp4_avx512.c only the kernels declared here.
 */
#ifndef CORRAL_ENGINE_QUANT_MXFP4_H
#define CORRAL_ENGINE_QUANT_MXFP4_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "cpu.h"
#include "quant.h"

typedef struct block_mxfp4 {
    uint8_t e;      /* E8M0 exponent: the block's scale is 2^(e - 128) (see below) */
    uint8_t qs[16]; /* element j in the low nibble of qs[j], element j + 16 in the high one */
} block_mxfp4;

_Static_assert(sizeof(block_mxfp4) == 17, "mxfp4 block");

/*
 * E2M1's eight magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6 doubled so they are integers, the sign
 * in the code's top bit; the scale is halved to make up for it. Integer values let a dot
 * product sum code values times Q8_0 quants exactly.
 */
extern const int8_t quant_mxfp4_values[16];

/* 2^(e - 128) as ggml computes it from the exponent byte: float bits (e - 1) << 23 for
 * e >= 2, the subnormals 2^-127 and 2^-128 below. Inline: the dots take one per block. */
static inline float quant_mxfp4_scale(uint8_t e)
{
    uint32_t bits = e >= 2 ? (uint32_t)(e - 1) << 23 : e == 1 ? 0x00400000u : 0x00200000u;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return scale;
}

/* Ops of MXFP4 at `level` (already clamped to the CPU), or NULL for another type. */
const quant_ops *quant_mxfp4_ops(uint32_t type, enum cpu_level level);

/* MXFP4 rows packed in groups of QUANT_PACK_ROWS for the packed kernel: per block, the 16
 * rows' exponent bytes, then the nibble bytes as four 64-byte vectors, vector j holding
 * bytes 4j..4j+3 of each row in turn (the packed Q4_0 layout's words); a group takes exactly
 * the bytes of its rows. */
void quant_pack_mxfp4(const void *w, size_t n, size_t n_rows, void *packed);

/* The packed kernels (quant_ops.matmul_packed): maddubs at avx2 and at avx512 without VNNI,
 * vpdpbusd with it. */
void quant_matmul_packed_mxfp4_avx2(size_t n, const void *packed, size_t n_groups,
                                    const void *act, size_t act_row_bytes, const void *sums,
                                    size_t n_tokens, float *y, size_t ldy);
void quant_matmul_packed_mxfp4_avx512(size_t n, const void *packed, size_t n_groups,
                                      const void *act, size_t act_row_bytes, const void *sums,
                                      size_t n_tokens, float *y, size_t ldy);

/* MXFP4 . Q8_0 with AVX2 (also the AVX-512 levels'): each block's integer sum exact, the
 * blocks added in order with one fused multiply-add each. */
float quant_dot_mxfp4_avx2(size_t n, const void *w, const void *a);

#endif

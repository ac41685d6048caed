/*
 * Arithmetic on every tensor type, bit-exact with ggml's block layouts and dot products:
 * dequantize, the reference quantizers, activation quantization to each weight type's
 * partner (Q8_0 / Q8_1 / Q8_K / F16 / BF16 / F32), and dot products of a weight row with an
 * activation row, per CPU dispatch level. The matrix entry points are what the forward pass
 * calls; they take a row range so a thread pool can split the work.
 *
 * Invariant: dequantize and quantize give the same bytes/values at every level; dot products
 * at a SIMD level agree with the scalar level within the tolerance documented in
 * tests/test_quant.c.
 */
#ifndef CORRAL_ENGINE_QUANT_H
#define CORRAL_ENGINE_QUANT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cpu.h"
#include "tensor_type.h"

/* n is a multiple of the type's block size in all of these. */
typedef void (*quant_dequantize_fn)(const void *blocks, float *out, size_t n);
typedef void (*quant_quantize_fn)(const float *in, void *blocks, size_t n);
/* Sum over n elements of weight row w times activation row a (a in the partner type). */
typedef float (*quant_dot_fn)(size_t n, const void *w, const void *a);
/* y[t * ldy + r] = dot(row r, activation row t) for r < n_rows, t < n_tokens: rows are
 * w_row_bytes apart, activation rows act_row_bytes apart. Each result has the bits of the
 * level's dot; the kernel reuses each weight vector across tokens, and works on the rows as
 * they are in the file. */
typedef void (*quant_matmul_fn)(size_t n, const void *w, size_t w_row_bytes, size_t n_rows,
                                const void *act, size_t act_row_bytes, size_t n_tokens,
                                float *y, size_t ldy);
/* Packed layout (see quant_pack_rows): rows interleaved in groups of QUANT_PACK_ROWS. */
enum { QUANT_PACK_ROWS = 16 };
typedef void (*quant_pack_fn)(const void *w, size_t n, size_t n_rows, void *packed);
/* Per activation row, what a packed kernel needs besides the quants (quant_prepare_packed_act). */
typedef void (*quant_act_sums_fn)(const void *act, size_t n, void *sums);
/* y[t * ldy + r] for the n_groups * QUANT_PACK_ROWS rows of packed and n_tokens activation
 * rows; sums rows are quant_packed_sums_bytes(n) apart. Bits of the level's dot. */
typedef void (*quant_matmul_packed_fn)(size_t n, const void *packed, size_t n_groups,
                                       const void *act, size_t act_row_bytes, const void *sums,
                                       size_t n_tokens, float *y, size_t ldy);

typedef struct quant_ops {
    uint32_t type;
    quant_dequantize_fn dequantize;   /* exact; NULL for activation-only types without one */
    quant_quantize_fn quantize;       /* ggml's quantize_row_*_ref, bit for bit */
    uint32_t act_type;                /* partner type activations are converted to */
    quant_quantize_fn quantize_act;   /* F32 -> act_type, as ggml's CPU backend does it */
    quant_dot_fn dot;                 /* weight row . activation row (act_type); NULL for the
                                         activation-only types Q8_1 and Q8_K */
    quant_matmul_fn matmul;           /* optional (NULL: dot per row and token) */
    quant_pack_fn pack;               /* the layout of matmul_packed (may be set without it) */
    quant_act_sums_fn act_sums;       /* NULL when the packed kernel needs no sums */
    quant_matmul_packed_fn matmul_packed; /* NULL when the level has no packed kernel */
} quant_ops;

/* The ops of a weight type at a level (the level is clamped to what the CPU has); NULL if
 * the type has no kernels. quant_ops_active uses cpu_active_level(). */
const quant_ops *quant_ops_get(uint32_t type, enum cpu_level level);
const quant_ops *quant_ops_active(uint32_t type);

/* IEEE half / bfloat16 conversions with ggml's rounding:
 * quant_f16_to_f32, quant_f32_to_f16, quant_bf16_to_f32, quant_f32_to_bf16. */
#include "quant_half.h"

/* Bytes of one activation row of n_in values in the partner type of weight type `type`
 * (0 when the type has no ops, a size overflows or n_in is not a whole number of blocks). */
size_t quant_act_row_bytes(uint32_t type, size_t n_in);

/* Convert n_tokens rows of n_in floats (row stride n_in) to the partner type of `type`,
 * rows packed at quant_act_row_bytes(type, n_in) apart. */
void quant_quantize_activations(const quant_ops *ops, const float *x, size_t n_in,
                                size_t n_tokens, void *act);

/*
 * y[t * ldy + r] = dot(row r of w, activation row t) for r in [row_begin, row_end) and
 * t in [0, n_tokens). w holds rows of n_in elements of ops->type; act comes from
 * quant_quantize_activations. n_tokens == 1 is the matrix x vector case.
 */
void quant_matmul_rows(const quant_ops *ops, const void *w, size_t n_in, size_t row_begin,
                       size_t row_end, const void *act, size_t n_tokens, float *y, size_t ldy);

/*
 * Packed weights: the level's packed kernel wants rows interleaved in groups of
 * QUANT_PACK_ROWS (one vector lane per row), repacked once at load. A packed matrix has the
 * bytes of the original and its row groups sit at the same offsets, so a row range of
 * whole groups can be packed or multiplied on its own.
 */
bool quant_packable(const quant_ops *ops, size_t n_in, size_t n_rows);
/* Rows [row_begin, row_end) of w (multiples of QUANT_PACK_ROWS) into the same range of packed. */
void quant_pack_rows(const quant_ops *ops, const void *w, size_t n_in, size_t row_begin,
                     size_t row_end, void *packed);
/* Bytes per activation row of the sums a packed kernel reads (quant_prepare_packed_act
 * writes nothing for kernels that need none). */
size_t quant_packed_sums_bytes(size_t n_in);
void quant_prepare_packed_act(const quant_ops *ops, const void *act, size_t n_in,
                              size_t n_tokens, void *sums);
/* quant_matmul_rows on packed weights; row_begin and row_end are multiples of QUANT_PACK_ROWS. */
void quant_matmul_packed_rows(const quant_ops *ops, const void *packed, size_t n_in,
                              size_t row_begin, size_t row_end, const void *act,
                              const void *sums, size_t n_tokens, float *y, size_t ldy);

#endif

/*
 * The seam between the ops table (quant.c) and the kernels of the plain and 32-element
 * types: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 and the activation type Q8_1.
 * quant_legacy.c owns the scalar code and the per-level tables; quant_legacy_avx2.c and
 * quant_legacy_avx512.c own only the kernels declared here.
 */
#ifndef CORRAL_ENGINE_QUANT_LEGACY_H
#define CORRAL_ENGINE_QUANT_LEGACY_H

#include <stddef.h>
#include <stdint.h>

#include "cpu.h"
#include "quant.h"

/* Ops of a non-K type at `level` (already clamped to the CPU), or NULL for other types. */
const quant_ops *quant_legacy_ops(uint32_t type, enum cpu_level level);

/* Block layouts of the 32-element types; scale fields are f16 bit patterns. */
enum { QUANT_QK32 = 32 };

typedef struct block_q4_0 {
    uint16_t d;
    uint8_t qs[16];
} block_q4_0;

typedef struct block_q4_1 {
    uint16_t d, m;
    uint8_t qs[16];
} block_q4_1;

typedef struct block_q5_0 {
    uint16_t d;
    uint8_t qh[4];
    uint8_t qs[16];
} block_q5_0;

typedef struct block_q5_1 {
    uint16_t d, m;
    uint8_t qh[4];
    uint8_t qs[16];
} block_q5_1;

typedef struct block_q8_0 {
    uint16_t d;
    int8_t qs[32];
} block_q8_0;

typedef struct block_q8_1 {
    uint16_t d, s;
    int8_t qs[32];
} block_q8_1;

/* Blocks pack back to back with no padding; every block size is even, so a 2-byte aligned
 * row (GGUF data is 32-aligned) keeps every f16 field aligned. */
_Static_assert(sizeof(block_q4_0) == 18, "q4_0 block");
_Static_assert(sizeof(block_q4_1) == 20, "q4_1 block");
_Static_assert(sizeof(block_q5_0) == 22, "q5_0 block");
_Static_assert(sizeof(block_q5_1) == 24, "q5_1 block");
_Static_assert(sizeof(block_q8_0) == 34, "q8_0 block");
_Static_assert(sizeof(block_q8_1) == 36, "q8_1 block");

/* The packed layout of F32 / F16 / BF16 matrices (quant_legacy.c): each run of four rows
 * interleaved in chunks of 16 elements, the rows taking turns, so that a kernel's tile of
 * four rows reads one stream. */
enum { QUANT_FLOAT_TILE_ROWS = 4, QUANT_FLOAT_CHUNK = 16 };

/* Q4_0 / Q4_1 / Q5_0 / Q5_1 / Q8_0 rows into the packed layout every level's packed kernels
 * read (plain C). */
void quant_pack_q4_0(const void *w, size_t n, size_t n_rows, void *packed);
void quant_pack_q4_1(const void *w, size_t n, size_t n_rows, void *packed);
void quant_pack_q5_0(const void *w, size_t n, size_t n_rows, void *packed);
void quant_pack_q5_1(const void *w, size_t n, size_t n_rows, void *packed);
void quant_pack_q8_0(const void *w, size_t n, size_t n_rows, void *packed);

/* F32 -> Q8_0 activations, ggml's x86 recipe (the scalar level's; other types whose partner
 * is Q8_0 share it). */
void quant_quantize_act_q8_0(const float *in, void *blocks, size_t n);

/* F16C conversion of F16 rows: the same bits as the scalar code (quant_half.h). */
void quant_dequantize_f16_avx2(const void *blocks, float *out, size_t n);
void quant_quantize_f16_avx2(const float *in, void *blocks, size_t n);

/* Dot products per instruction set: weight type . partner activation type. */
/* F32 / F16 / BF16 matrices in tiles of rows and tokens (quant_ops.matmul), and on rows
 * packed in interleaved tiles of four (quant_ops.matmul_packed); their dots are the tiles of
 * one row and one token. */
void quant_matmul_f32_avx2(size_t n, const void *w, size_t w_row_bytes, size_t n_rows,
                           const void *act, size_t act_row_bytes, size_t n_tokens, float *y,
                           size_t ldy);
void quant_matmul_f16_avx2(size_t n, const void *w, size_t w_row_bytes, size_t n_rows,
                           const void *act, size_t act_row_bytes, size_t n_tokens, float *y,
                           size_t ldy);
void quant_matmul_bf16_avx2(size_t n, const void *w, size_t w_row_bytes, size_t n_rows,
                            const void *act, size_t act_row_bytes, size_t n_tokens, float *y,
                            size_t ldy);
void quant_matmul_packed_f32_avx2(size_t n, const void *packed, size_t n_groups,
                                  const void *act, size_t act_row_bytes, const void *sums,
                                  size_t n_tokens, float *y, size_t ldy);
void quant_matmul_packed_f16_avx2(size_t n, const void *packed, size_t n_groups,
                                  const void *act, size_t act_row_bytes, const void *sums,
                                  size_t n_tokens, float *y, size_t ldy);
void quant_matmul_packed_bf16_avx2(size_t n, const void *packed, size_t n_groups,
                                   const void *act, size_t act_row_bytes, const void *sums,
                                   size_t n_tokens, float *y, size_t ldy);
float quant_dot_f32_avx2(size_t n, const void *w, const void *a);
float quant_dot_f16_avx2(size_t n, const void *w, const void *a);
float quant_dot_bf16_avx2(size_t n, const void *w, const void *a);
float quant_dot_q4_0_avx2(size_t n, const void *w, const void *a);
float quant_dot_q4_1_avx2(size_t n, const void *w, const void *a);
float quant_dot_q5_0_avx2(size_t n, const void *w, const void *a);
float quant_dot_q5_1_avx2(size_t n, const void *w, const void *a);
float quant_dot_q8_0_avx2(size_t n, const void *w, const void *a);
/* F32 -> Q8_0 activations, the same bytes as the scalar quantizer. */
void quant_quantize_act_q8_0_avx2(const float *in, void *blocks, size_t n);
/* The packed Q4_0 / Q5_0 / Q8_0 kernels' activation sums (quant_ops.act_sums), at every level;
 * packed kernels with maddubs, 8 rows per vector, also the AVX-512 level's without VNNI
 * (Q4_1 and Q5_1 take their Q8_1 sums from quant_legacy.c). */
void quant_prepare_packed_act_avx2(const void *act, size_t n, void *sums);
void quant_matmul_packed_q4_0_avx2(size_t n, const void *packed, size_t n_groups,
                                   const void *act, size_t act_row_bytes, const void *sums,
                                   size_t n_tokens, float *y, size_t ldy);
void quant_matmul_packed_q8_0_avx2(size_t n, const void *packed, size_t n_groups,
                                   const void *act, size_t act_row_bytes, const void *sums,
                                   size_t n_tokens, float *y, size_t ldy);
void quant_matmul_packed_q5_0_avx2(size_t n, const void *packed, size_t n_groups,
                                   const void *act, size_t act_row_bytes, const void *sums,
                                   size_t n_tokens, float *y, size_t ldy);
void quant_matmul_packed_q4_1_avx2(size_t n, const void *packed, size_t n_groups,
                                   const void *act, size_t act_row_bytes, const void *sums,
                                   size_t n_tokens, float *y, size_t ldy);
void quant_matmul_packed_q5_1_avx2(size_t n, const void *packed, size_t n_groups,
                                   const void *act, size_t act_row_bytes, const void *sums,
                                   size_t n_tokens, float *y, size_t ldy);

/* F32 / F16 / BF16 matrices in tiles of rows and tokens (quant_ops.matmul); their dots are
 * the tiles of one row and one token. */
void quant_matmul_f32_avx512(size_t n, const void *w, size_t w_row_bytes, size_t n_rows,
                             const void *act, size_t act_row_bytes, size_t n_tokens, float *y,
                             size_t ldy);
void quant_matmul_f16_avx512(size_t n, const void *w, size_t w_row_bytes, size_t n_rows,
                             const void *act, size_t act_row_bytes, size_t n_tokens, float *y,
                             size_t ldy);
void quant_matmul_bf16_avx512(size_t n, const void *w, size_t w_row_bytes, size_t n_rows,
                              const void *act, size_t act_row_bytes, size_t n_tokens, float *y,
                              size_t ldy);
/* The same on rows packed in interleaved tiles of four (quant_ops.matmul_packed). */
void quant_matmul_packed_f32_avx512(size_t n, const void *packed, size_t n_groups,
                                    const void *act, size_t act_row_bytes, const void *sums,
                                    size_t n_tokens, float *y, size_t ldy);
void quant_matmul_packed_f16_avx512(size_t n, const void *packed, size_t n_groups,
                                    const void *act, size_t act_row_bytes, const void *sums,
                                    size_t n_tokens, float *y, size_t ldy);
void quant_matmul_packed_bf16_avx512(size_t n, const void *packed, size_t n_groups,
                                     const void *act, size_t act_row_bytes, const void *sums,
                                     size_t n_tokens, float *y, size_t ldy);
/* BF16 with vdpbf16ps; only when cpu_has_avx512_bf16() (dispatched when
 * cpu_prefers_vdpbf16ps()). */
float quant_dot_bf16_avx512_bf16(size_t n, const void *w, const void *a);
void quant_matmul_bf16_avx512_bf16(size_t n, const void *w, size_t w_row_bytes, size_t n_rows,
                                   const void *act, size_t act_row_bytes, size_t n_tokens,
                                   float *y, size_t ldy);
void quant_matmul_packed_bf16_avx512_bf16(size_t n, const void *packed, size_t n_groups,
                                          const void *act, size_t act_row_bytes,
                                          const void *sums, size_t n_tokens, float *y,
                                          size_t ldy);
float quant_dot_f32_avx512(size_t n, const void *w, const void *a);
float quant_dot_f16_avx512(size_t n, const void *w, const void *a);
float quant_dot_bf16_avx512(size_t n, const void *w, const void *a);
float quant_dot_q4_0_avx512(size_t n, const void *w, const void *a);
float quant_dot_q4_1_avx512(size_t n, const void *w, const void *a);
float quant_dot_q5_0_avx512(size_t n, const void *w, const void *a);
float quant_dot_q5_1_avx512(size_t n, const void *w, const void *a);
float quant_dot_q8_0_avx512(size_t n, const void *w, const void *a);
/* The same with vpdpbusd; only when cpu_has_avx512_vnni(). */
float quant_dot_q4_0_avx512_vnni(size_t n, const void *w, const void *a);
float quant_dot_q4_1_avx512_vnni(size_t n, const void *w, const void *a);
float quant_dot_q5_0_avx512_vnni(size_t n, const void *w, const void *a);
float quant_dot_q5_1_avx512_vnni(size_t n, const void *w, const void *a);
float quant_dot_q8_0_avx512_vnni(size_t n, const void *w, const void *a);
/* Packed VNNI kernels for Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0 (quant_ops.pack / act_sums /
 * matmul_packed). */
void quant_matmul_packed_q4_0_avx512(size_t n, const void *packed, size_t n_groups,
                                     const void *act, size_t act_row_bytes, const void *sums,
                                     size_t n_tokens, float *y, size_t ldy);
void quant_matmul_packed_q8_0_avx512(size_t n, const void *packed, size_t n_groups,
                                     const void *act, size_t act_row_bytes, const void *sums,
                                     size_t n_tokens, float *y, size_t ldy);
void quant_matmul_packed_q5_0_avx512(size_t n, const void *packed, size_t n_groups,
                                     const void *act, size_t act_row_bytes, const void *sums,
                                     size_t n_tokens, float *y, size_t ldy);
void quant_matmul_packed_q4_1_avx512(size_t n, const void *packed, size_t n_groups,
                                     const void *act, size_t act_row_bytes, const void *sums,
                                     size_t n_tokens, float *y, size_t ldy);
void quant_matmul_packed_q5_1_avx512(size_t n, const void *packed, size_t n_groups,
                                     const void *act, size_t act_row_bytes, const void *sums,
                                     size_t n_tokens, float *y, size_t ldy);

#endif

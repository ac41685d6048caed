/*
 * The seam between the ops table (quant.c) and the kernels of the lattice IQ types: IQ2_XXS
 * (ggml type 16), IQ2_XS (17), IQ3_XXS (18), IQ1_S (19), IQ3_S (21), IQ2_S (22) and IQ1_M (29).
 * Each names groups of 8 (or 4) elements by an index into a fixed grid of lattice points
 * (quant_iq_grids.h), with signs and scales beside. quant_iq_lattice.c owns the scalar code
 * and the per-level tables, quant_iq_lattice_avx2.c and quant_iq_lattice_avx512.c the dots and
 * tiles declared here (what those two share is in quant_iq_lattice_x86.h).
 * None has a quantizer: the engine reads them, ggml's tools write them. All pair with Q8_K
 * activations.
 *
 * Every block is made of bytes only (multi-byte fields are read little-endian by helpers), so
 * a block may sit at any address. Byte layouts are in docs/formats.md.
 */
#ifndef CORRAL_ENGINE_QUANT_IQ_LATTICE_H
#define CORRAL_ENGINE_QUANT_IQ_LATTICE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "cpu.h"
#include "quant.h"

/* 256 elements, 8 sub-blocks of 32; sub-block k in qs[8k .. 8k + 7]: bytes 0-3 are four grid
 * indices, bytes 4-7 a u32 of four 7-bit sign codes (bits 7l..7l + 6 for group l) and a 4-bit
 * scale s (bits 28-31): element = d * (2s + 1) / 8 * grid value * sign. */
typedef struct block_iq2_xxs {
    uint8_t d[2];
    uint8_t qs[64];
} block_iq2_xxs;

/* 256 elements; qs holds 32 u16, one per group of 8: a 9-bit grid index and a 7-bit sign code
 * (bits 9-15). scales[k] holds sub-block k's two 4-bit scales, low nibble for its first 16
 * elements: element = d * (2s + 1) / 8 * grid value * sign. */
typedef struct block_iq2_xs {
    uint8_t d[2];
    uint8_t qs[64];
    uint8_t scales[8];
} block_iq2_xs;

/* 256 elements; group g's 10-bit grid index is qs[g] plus bits 2(g % 4)..+1 of qh[g / 4] on
 * top, its signs the whole byte qs[32 + g] (bit j: element j negative). Scales as IQ2_XS. */
typedef struct block_iq2_s {
    uint8_t d[2];
    uint8_t qs[64];
    uint8_t qh[8];
    uint8_t scales[8];
} block_iq2_s;

/* 256 elements; qs[0..63] are grid indices of 4 elements, two per group of 8; then per
 * sub-block k a u32 at qs[64 + 4k]: four 7-bit sign codes and a 4-bit scale s (bits 28-31):
 * element = d * (2s + 1) / 4 * grid value * sign. */
typedef struct block_iq3_xxs {
    uint8_t d[2];
    uint8_t qs[96];
} block_iq3_xxs;

/* 256 elements; grid index i (4 elements, 64 of them) is qs[i] plus bit i % 8 of qh[i / 8] as
 * its ninth bit; signs[4k + l] is group l of sub-block k's sign byte; scales[k / 2] holds
 * sub-block k's 4-bit scale s (low nibble for even k): element = d * (2s + 1) * grid value *
 * sign. */
typedef struct block_iq3_s {
    uint8_t d[2];
    uint8_t qs[64];
    uint8_t qh[8];
    uint8_t signs[32];
    uint8_t scales[4];
} block_iq3_s;

/* 256 elements; group g's 11-bit grid index is qs[g] plus bits 3(g % 4)..+2 of the u16 qh[g / 4]
 * on top; qh's bits 12-14 are the sub-block's scale s and bit 15 the sign of its shift:
 * element = d * (2s + 1) * (grid value +- 1/8). */
typedef struct block_iq1_s {
    uint8_t d[2];
    uint8_t qs[32];
    uint8_t qh[16];
} block_iq1_s;

/* 256 elements and no d field: the f16 super-block scale is the top nibbles of the four u16
 * words of scales, the first word's lowest. Group g's 11-bit index is qs[g] plus three bits
 * of qh[g / 2] (bits 0-2 for even g, 4-6 for odd), bit 3 (or 7) the sign of its shift; word
 * k / 2 of scales holds 3-bit scales of sub-block k's two halves at bits 6(k % 2) and
 * 6(k % 2) + 3: element = d * (2s + 1) * (grid value +- 1/8). */
typedef struct block_iq1_m {
    uint8_t qs[32];
    uint8_t qh[16];
    uint8_t scales[8];
} block_iq1_m;

_Static_assert(sizeof(block_iq2_xxs) == 66, "iq2_xxs block");
_Static_assert(sizeof(block_iq2_xs) == 74, "iq2_xs block");
_Static_assert(sizeof(block_iq2_s) == 82, "iq2_s block");
_Static_assert(sizeof(block_iq3_xxs) == 98, "iq3_xxs block");
_Static_assert(sizeof(block_iq3_s) == 110, "iq3_s block");
_Static_assert(sizeof(block_iq1_s) == 50, "iq1_s block");
_Static_assert(sizeof(block_iq1_m) == 56, "iq1_m block");

static inline uint16_t iq_u16(const uint8_t *p)
{
    return (uint16_t)(p[0] | p[1] << 8);
}

static inline uint32_t iq_u32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline uint64_t iq_u64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* IQ1_M's f16 super-block scale, gathered from the top nibbles of its four scale words. */
static inline uint16_t iq1_m_scale_bits(const block_iq1_m *b)
{
    return (uint16_t)(iq_u16(b->scales) >> 12 | (iq_u16(b->scales + 2) >> 8 & 0x00f0) |
                      (iq_u16(b->scales + 4) >> 4 & 0x0f00) | (iq_u16(b->scales + 6) & 0xf000));
}

/* Ops of a lattice IQ type at `level` (already clamped to the CPU), or NULL for another type. */
const quant_ops *quant_iq_lattice_ops(uint32_t type, enum cpu_level level);

/*
 * The AVX2 dots and matrix tiles (quant_matmul_fn) against Q8_K.
 * Each super-block's integer sum is exact in i32 at every level, and the f32 steps after it
 * are the scalar's, so each result has the scalar dot's bits. A tile decodes each weight
 * super-block once for up to 8 activation rows.
 */
#define IQ_LATTICE_AVX2_KERNELS(name) \
    float quant_dot_##name##_avx2(size_t n, const void *w, const void *a); \
    void quant_matmul_##name##_avx2(size_t n, const void *w, size_t w_row_bytes, size_t n_rows, \
                                    const void *act, size_t act_row_bytes, size_t n_tokens, \
                                    float *y, size_t ldy);
IQ_LATTICE_AVX2_KERNELS(iq2_xxs)
IQ_LATTICE_AVX2_KERNELS(iq2_xs)
IQ_LATTICE_AVX2_KERNELS(iq2_s)
IQ_LATTICE_AVX2_KERNELS(iq3_xxs)
IQ_LATTICE_AVX2_KERNELS(iq3_s)
IQ_LATTICE_AVX2_KERNELS(iq1_s)
IQ_LATTICE_AVX2_KERNELS(iq1_m)
#undef IQ_LATTICE_AVX2_KERNELS

/* The AVX-512 ones (quant_iq_lattice_avx512.c): the same results, two sub-blocks a vector;
 * the _vnni tiles add the scaled sums with vpdpwssd, for CPUs with AVX-512 VNNI. */
#define IQ_LATTICE_AVX512_KERNELS(name) \
    float quant_dot_##name##_avx512(size_t n, const void *w, const void *a); \
    void quant_matmul_##name##_avx512(size_t n, const void *w, size_t w_row_bytes, \
                                      size_t n_rows, const void *act, size_t act_row_bytes, \
                                      size_t n_tokens, float *y, size_t ldy); \
    void quant_matmul_##name##_avx512_vnni(size_t n, const void *w, size_t w_row_bytes, \
                                           size_t n_rows, const void *act, \
                                           size_t act_row_bytes, size_t n_tokens, float *y, \
                                           size_t ldy);
IQ_LATTICE_AVX512_KERNELS(iq2_xxs)
IQ_LATTICE_AVX512_KERNELS(iq2_xs)
IQ_LATTICE_AVX512_KERNELS(iq2_s)
IQ_LATTICE_AVX512_KERNELS(iq3_xxs)
IQ_LATTICE_AVX512_KERNELS(iq3_s)
IQ_LATTICE_AVX512_KERNELS(iq1_s)
IQ_LATTICE_AVX512_KERNELS(iq1_m)
#undef IQ_LATTICE_AVX512_KERNELS

/* The f32 steps of every level after an IQ2 / IQ3 super-block's exact integer sum. */
static inline float iq_add_super_block(float sumf, float d, int32_t bsum)
{
    return sumf + d * (float)bsum;
}

#endif

/*
 * The seam between the ops table (quant.c) and the kernels of the two 4-bit non-linear types,
 * IQ4_NL (ggml type 20) and IQ4_XS (type 23): every 4-bit code indexes one fixed table of 16
 * int8 values, spaced closer near zero than at the ends. quant_iq4.c owns the scalar code and
 * the per-level tables, quant_iq4_avx2.c only the kernels declared here. Neither type has a
 * quantizer: the engine reads them, ggml's tools write them.
 */
#ifndef CORRAL_ENGINE_QUANT_IQ4_H
#define CORRAL_ENGINE_QUANT_IQ4_H

#include <stddef.h>
#include <stdint.h>

#include "cpu.h"
#include "quant.h"

/* 32 elements: element j in the low nibble of qs[j], element j + 16 in the high one. */
typedef struct block_iq4_nl {
    uint16_t d; /* f16 scale */
    uint8_t qs[16];
} block_iq4_nl;

/*
 * 256 elements in eight sub-blocks of 32, each laid out as an IQ4_NL block's nibbles. Sub-block
 * k's scale is d * (s_k - 32) with the 6-bit s_k: its low four bits in nibble k % 2 of
 * scales_l[k / 2], its high two bits at bit 2k of scales_h.
 */
typedef struct block_iq4_xs {
    uint16_t d;
    uint16_t scales_h;
    uint8_t scales_l[4];
    uint8_t qs[128];
} block_iq4_xs;

_Static_assert(sizeof(block_iq4_nl) == 18, "iq4_nl block");
_Static_assert(sizeof(block_iq4_xs) == 136, "iq4_xs block");

/* The codebook: the values the 16 codes stand for, before the scale. */
extern const int8_t quant_iq4_values[16];

/* 6-bit sub-block scale s_k of an IQ4_XS block (k < 8), before the -32 offset. */
static inline int quant_iq4_xs_sub_scale(const block_iq4_xs *b, int k)
{
    return ((b->scales_l[k / 2] >> (4 * (k % 2))) & 0x0f) | (((b->scales_h >> (2 * k)) & 3) << 4);
}

/* Ops of IQ4_NL or IQ4_XS at `level` (already clamped to the CPU), or NULL for another type. */
const quant_ops *quant_iq4_ops(uint32_t type, enum cpu_level level);

/* The AVX2 dots (also the AVX-512 levels'): IQ4_NL . Q8_0 and IQ4_XS . Q8_K. Codes become
 * values with one byte shuffle, integer sums are exact, and the blocks (IQ4_NL) or
 * super-blocks (IQ4_XS) are added in order with one fused multiply-add each. */
float quant_dot_iq4_nl_avx2(size_t n, const void *w, const void *a);
float quant_dot_iq4_xs_avx2(size_t n, const void *w, const void *a);

#endif

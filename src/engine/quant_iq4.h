/*
 * The seam between the ops table (quant.c) and the kernels of the two 4-bit non-linear types,
 * IQ4_NL (ggml type 20) and IQ4_XS (type 23): every 4-bit code indexes one fixed table of 16
 * int8 values, spaced closer near zero than at the ends. quant_iq4.c owns the scalar code, the
 * packed layouts and the per-level tables, quant_iq4_avx2.c and quant_iq4_avx512.c only the
 * kernels declared here. Neither type has a
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

/*
 * IQ4_NL rows repacked in groups of QUANT_PACK_ROWS = 16 as packed Q4_0 rows are: per block
 * the 16 d (f16), then the nibble bytes as four vectors, vector j holding bytes 4j..4j + 3 of
 * each row in turn. A group has exactly the bytes of its 16 rows. Plain C, at load.
 */
enum { IQ4NL_QS_AT = 32 };
_Static_assert(IQ4NL_QS_AT + 4 * 64 == QUANT_PACK_ROWS * sizeof(block_iq4_nl),
               "packed IQ4_NL group");
void quant_iq4_pack_nl(const void *w, size_t n, size_t n_rows, void *packed);

/*
 * IQ4_XS rows repacked in groups of QUANT_PACK_ROWS = 16, one 4-byte lane per row (a 256-bit
 * vector holds 8 rows): per super-block the 16 d (f16), the 16 scales_h (u16), the 16
 * scales_l words, then qs word w (bytes 4w..4w + 3: sub-block w / 4) of every row in vector
 * w. A group has exactly the bytes of its 16 rows. Plain C, at load.
 */
enum { IQ4XS_SCALES_H_AT = 32, IQ4XS_SCALES_L_AT = 64, IQ4XS_QS_AT = 128 };
_Static_assert(IQ4XS_QS_AT + 32 * 64 == QUANT_PACK_ROWS * sizeof(block_iq4_xs),
               "packed IQ4_XS group");
void quant_iq4_pack_xs(const void *w, size_t n, size_t n_rows, void *packed);

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
/* Packed IQ4_NL (quant_iq4_pack_nl) against Q8_0, reading quant_prepare_packed_act_avx2's
 * sums: 8 rows per vector (avx2, avx512 without VNNI) or 16 (VNNI). Each result has the bits
 * of quant_dot_iq4_nl_avx2. */
void quant_iq4_matmul_packed_nl_avx2(size_t n, const void *packed, size_t n_groups,
                                     const void *act, size_t act_row_bytes, const void *sums,
                                     size_t n_tokens, float *y, size_t ldy);
void quant_iq4_matmul_packed_nl_avx512(size_t n, const void *packed, size_t n_groups,
                                       const void *act, size_t act_row_bytes, const void *sums,
                                       size_t n_tokens, float *y, size_t ldy);
/* Packed IQ4_XS (quant_iq4_pack_xs) against Q8_K, 8 rows per vector; each result has the
 * bits of quant_dot_iq4_xs_avx2. Reads no sums. */
void quant_iq4_matmul_packed_xs_avx2(size_t n, const void *packed, size_t n_groups,
                                     const void *act, size_t act_row_bytes, const void *sums,
                                     size_t n_tokens, float *y, size_t ldy);
/* The same at level avx512 with VNNI, 16 rows per vector; reads quant_k_sub_block_sums. */
void quant_iq4_matmul_packed_xs_avx512(size_t n, const void *packed, size_t n_groups,
                                       const void *act, size_t act_row_bytes, const void *sums,
                                       size_t n_tokens, float *y, size_t ldy);

#endif

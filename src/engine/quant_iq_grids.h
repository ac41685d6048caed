/*
 * The codebooks of the lattice IQ types (quant_iq_lattice.h): which point of a lattice each
 * grid index names, and the 7-bit sign codes. They are the formats' definitions; the tables
 * (quant_iq_grids.c) are generated from ggml by tools/iqref/iqgen.c. Entry i of a grid holds
 * one byte per element, element j in byte j (the least significant first), so that a vector
 * load of an entry puts the elements in order.
 */
#ifndef CORRAL_ENGINE_QUANT_IQ_GRIDS_H
#define CORRAL_ENGINE_QUANT_IQ_GRIDS_H

#include <stdint.h>

/* A 7-bit sign code of 8 elements with its eighth bit, the parity of the seven, put back:
 * bit j set when element j is negative (every group has an even number of negatives). */
extern const uint8_t quant_iq_sign_bytes[128];
/* The same signs as 8 bytes of +1 (0x01) or -1 (0xff), element j in byte j: what a vector
 * multiplies a group's activation quants by (sign_epi8). */
extern const uint64_t quant_iq_sign_multipliers[128];

/* 8 elements each, every one 8, 25 or 43 (times 1/8 of the group's scale). */
extern const uint64_t quant_iq2xxs_grid[256]; /* IQ2_XXS */
extern const uint64_t quant_iq2xs_grid[512];  /* IQ2_XS */
extern const uint64_t quant_iq2s_grid[1024];  /* IQ2_S */
/* 4 elements each: IQ3_XXS's from {4, 12, ..., 52, 62}, IQ3_S's the odd numbers 1 to 15. */
extern const uint32_t quant_iq3xxs_grid[256];
extern const uint32_t quant_iq3s_grid[512];
/* 8 elements each, every one -1, 0 or +1 (int8): IQ1_S and IQ1_M. */
extern const uint64_t quant_iq1s_grid[2048];

#endif

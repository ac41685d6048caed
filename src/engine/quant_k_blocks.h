/*
 * K-quant super-block layouts (Q2_K..Q6_K and the Q8_K activations) and the kernels the scalar,
 * AVX2 and AVX-512 files share. Private to quant_k*.c. Every struct is made of bytes only,
 * so a block may sit at any address (GGUF data, test buffers); multi-byte fields are read
 * with the helpers below, never through a cast.
 */
#ifndef CORRAL_ENGINE_QUANT_K_BLOCKS_H
#define CORRAL_ENGINE_QUANT_K_BLOCKS_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "quant.h"

#define QK_K 256

typedef struct {
    uint8_t scales[16]; /* low nibble scale, high nibble min, per 16 elements */
    uint8_t qs[64];
    uint8_t d[2];
    uint8_t dmin[2];
} block_q2_k;

typedef struct {
    uint8_t hmask[32];
    uint8_t qs[64];
    uint8_t scales[12]; /* sixteen 6-bit scales biased by 32 */
    uint8_t d[2];
} block_q3_k;

typedef struct {
    uint8_t d[2];
    uint8_t dmin[2];
    uint8_t scales[12]; /* eight 6-bit scales and eight 6-bit mins */
    uint8_t qs[128];
} block_q4_k;

typedef struct {
    uint8_t d[2];
    uint8_t dmin[2];
    uint8_t scales[12];
    uint8_t qh[32];
    uint8_t qs[128];
} block_q5_k;

typedef struct {
    uint8_t ql[128];
    uint8_t qh[64];
    int8_t scales[16];
    uint8_t d[2];
} block_q6_k;

typedef struct {
    uint8_t d[4]; /* f32 */
    int8_t qs[QK_K];
    uint8_t bsums[32]; /* 16 x i16: sums of qs over each 16 elements */
} block_q8_k;

_Static_assert(sizeof(block_q2_k) == 84, "Q2_K block is 84 bytes");
_Static_assert(sizeof(block_q3_k) == 110, "Q3_K block is 110 bytes");
_Static_assert(sizeof(block_q4_k) == 144, "Q4_K block is 144 bytes");
_Static_assert(sizeof(block_q5_k) == 176, "Q5_K block is 176 bytes");
_Static_assert(sizeof(block_q6_k) == 210, "Q6_K block is 210 bytes");
_Static_assert(sizeof(block_q8_k) == 292, "Q8_K block is 292 bytes");

static inline uint16_t kq_read_u16(const uint8_t *p)
{
    return (uint16_t)(p[0] | (p[1] << 8));
}

static inline void kq_write_u16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static inline float q8k_d(const block_q8_k *b)
{
    float d;
    memcpy(&d, b->d, sizeof d);
    return d;
}

static inline int16_t q8k_bsum(const block_q8_k *b, int group)
{
    int16_t s;
    memcpy(&s, b->bsums + 2 * group, sizeof s);
    return s;
}

/*
 * The 12 bytes of Q4_K / Q5_K scales as four u32 words of bytes: words 0-1 hold the scales
 * sc_0..sc_7 and words 2-3 the mins m_0..m_7 (ggml's 6-bit packing of Q4_K/Q5_K). Words, not bytes,
 * so SIMD code can move them straight into a register.
 */
static inline void kq_scales_k4_words(const uint8_t packed[12], uint32_t out[4])
{
    uint32_t w[3];
    memcpy(w, packed, sizeof w);
    out[0] = w[0] & 0x3f3f3f3fu;
    out[1] = (w[2] & 0x0f0f0f0fu) | (((w[0] >> 6) & 0x03030303u) << 4);
    out[2] = w[1] & 0x3f3f3f3fu;
    out[3] = ((w[2] >> 4) & 0x0f0f0f0fu) | (((w[1] >> 6) & 0x03030303u) << 4);
}

/* The same as bytes: sc_m[0..7] = scales, sc_m[8..15] = mins. */
static inline void kq_unpack_scales_k4(const uint8_t packed[12], uint8_t sc_m[16])
{
    uint32_t words[4];
    kq_scales_k4_words(packed, words);
    memcpy(sc_m, words, sizeof words);
}

/*
 * The sixteen Q3_K scales plus 32 (0..63) as four u32 words of bytes:
 * low nibbles of j < 8 in bytes 0..7, of j >= 8 in their high halves; the two high bits of
 * j in byte 8 + j % 4 at bit 2 * (j / 4).
 */
static inline void kq_scales_q3_words(const uint8_t packed[12], uint32_t out[4])
{
    uint32_t w[3];
    memcpy(w, packed, sizeof w);
    out[0] = (w[0] & 0x0f0f0f0fu) | ((w[2] & 0x03030303u) << 4);
    out[1] = (w[1] & 0x0f0f0f0fu) | (((w[2] >> 2) & 0x03030303u) << 4);
    out[2] = ((w[0] >> 4) & 0x0f0f0f0fu) | (((w[2] >> 4) & 0x03030303u) << 4);
    out[3] = ((w[1] >> 4) & 0x0f0f0f0fu) | (((w[2] >> 6) & 0x03030303u) << 4);
}

/* The sixteen Q3_K scales S_j in -32..31. */
static inline void kq_unpack_scales_q3(const uint8_t packed[12], int8_t scales[16])
{
    uint32_t words[4];
    uint8_t biased[16];
    kq_scales_q3_words(packed, words);
    memcpy(biased, words, sizeof biased);
    for (int j = 0; j < 16; j++)
        scales[j] = (int8_t)(biased[j] - 32);
}

/* Dot products of n elements (a multiple of QK_K) of weights against Q8_K activations. */
float quant_k_dot_q2_k_avx2(size_t n, const void *w, const void *a);
float quant_k_dot_q3_k_avx2(size_t n, const void *w, const void *a);
float quant_k_dot_q4_k_avx2(size_t n, const void *w, const void *a);
float quant_k_dot_q5_k_avx2(size_t n, const void *w, const void *a);
float quant_k_dot_q6_k_avx2(size_t n, const void *w, const void *a);

float quant_k_dot_q4_k_avx512(size_t n, const void *w, const void *a);
float quant_k_dot_q5_k_avx512(size_t n, const void *w, const void *a);
/* Q8_K activations (ggml's quantize_row_q8_K), portable and AVX-512: the same bytes. */
void quant_k_quantize_q8_k(const float *in, void *blocks, size_t n);
void quant_k_quantize_q8_k_avx512(const float *in, void *blocks, size_t n);
float quant_k_dot_q6_k_avx512(size_t n, const void *w, const void *a);
/*
 * Q2_K rows repacked in groups of QUANT_PACK_ROWS = 16, one 4-byte lane per row: per
 * super-block the 16 d (f16), the 16 dmin (f16), the 16 scale bytes as four vectors of
 * 4-byte words and the 16 words of qs, word w of every row in one vector, in the block's
 * order (which is the order the kernels read them). A group has exactly the bytes of its
 * 16 rows.
 */
enum { Q2K_DMIN_AT = 32, Q2K_SCALES_AT = 64, Q2K_QS_AT = 64 + 4 * 64 };
_Static_assert(Q2K_QS_AT + 16 * 64 == QUANT_PACK_ROWS * sizeof(block_q2_k), "packed Q2_K group");
void quant_k_pack_q2_k(const void *w, size_t n, size_t n_rows, void *packed);
/*
 * Q3_K rows repacked in groups of QUANT_PACK_ROWS = 16, one 4-byte lane per row, in the
 * order the kernels stream them: per super-block the 16 d (f16), the 12 scale bytes as three
 * vectors of 4-byte words, then eight triples of quant vectors. Quarter k (0..7) holds the
 * 32 elements 32k..32k + 31; triple (p, v) (p, v = 0..3) holds elements l = 16p + 4v + i
 * (i = 0..3, byte i of a word) of all eight quarters, sub-block 2k + p of quarter k. A
 * quant is stored as u = q + 4 (0..7, the block's low2 + 4 * high bit), in the triple's
 * words X, Y, Z: quarters 0, 2, 4 in bits 5-7 of X, Y, Z (32 u in place), quarters 1, 3, 5
 * in bits 2-4 (4 u in place), and the two left over split: bits 0-1 of X / Y the low two
 * bits of quarter 6 / 7, bits 0 / 1 of Z their third. Six quarters take one AND each, the
 * other two three operations. A group has exactly the bytes of its 16 rows.
 */
enum { Q3K_SCALES_AT = 32, Q3K_QS_AT = 32 + 3 * 64 };
#define Q3K_TRIPLE_AT(p, v) (Q3K_QS_AT + 3 * 64 * (4 * (p) + (v)))
_Static_assert(Q3K_TRIPLE_AT(2, 0) == QUANT_PACK_ROWS * sizeof(block_q3_k), "packed Q3_K group");
void quant_k_pack_q3_k(const void *w, size_t n, size_t n_rows, void *packed);
/*
 * Q4_K rows repacked in groups of QUANT_PACK_ROWS = 16, one vector lane per row (a 512-bit
 * vector holds all 16 rows, a 256-bit one 8). Per super-block: the 16 d (f16), the 16 dmin
 * (f16), the 12 scale bytes as three vectors of 4-byte words (word k of every row in one
 * vector), then the quants: word j of 32-byte chunk c (bytes 4j..4j+3, sub-block 2c in the
 * low nibbles and 2c + 1 in the high ones) of every row in vector 8c + j. A group has exactly
 * the bytes of its 16 rows. Plain C, at load, for every level's packed Q4_K kernel.
 */
enum { Q4K_SCALES_AT = 64, Q4K_QS_AT = 64 + 3 * 64 };
_Static_assert(Q4K_QS_AT + 32 * 64 == QUANT_PACK_ROWS * sizeof(block_q4_k), "packed Q4_K group");
void quant_k_pack_q4_k(const void *w, size_t n, size_t n_rows, void *packed);
/*
 * Q5_K rows repacked in groups of 16 as Q4_K, with the high bits between the scales and the
 * quants as in the block: per super-block the 16 d, the 16 dmin, the three scale vectors,
 * qh as 8 vectors (word u, bytes 4u..4u+3, of every row in vector u), then the 32 quant
 * vectors as Q4_K's. Byte k of a row's qh word u holds the 5th bits of byte k of its word u
 * of every chunk c (quant vector 8c + u): bit 2c that of the low nibble (sub-block 2c), bit
 * 2c + 1 that of the high one.
 */
enum { Q5K_SCALES_AT = 64, Q5K_QH_AT = 64 + 3 * 64, Q5K_QS_AT = Q5K_QH_AT + 8 * 64 };
_Static_assert(Q5K_QS_AT + 32 * 64 == QUANT_PACK_ROWS * sizeof(block_q5_k), "packed Q5_K group");
void quant_k_pack_q5_k(const void *w, size_t n, size_t n_rows, void *packed);
/*
 * Q6_K rows repacked in groups of 16 the same way: per super-block the 16 d (f16), the 16
 * scale bytes as four vectors of 4-byte words, then the quants in the order the kernels read
 * them, one stream: for half h and word v (0..7) a triple of word vectors X, Y, Z at
 * Q6K_TRIPLE_AT(h, v), whose byte j of a row holds the four values q + 32 (6 bits) of
 * quarters k = 0..3 (elements 128h + 32k + 4v + j): bits 0-5 of X, Y, Z quarters 0, 1, 2,
 * bits 6-7 of X, Y, Z bit pairs 0, 1, 2 of quarter 3. Three quarters come out with one AND,
 * the fourth with three shifts; the block's own ql / qh split took two or three operations
 * more per vector. One stream, because ql and qh read as two runs 2 KiB apart streamed
 * from memory well below Q4_K's single run.
 */
enum { Q6K_SCALES_AT = 32, Q6K_QUANTS_AT = 32 + 4 * 64 };
#define Q6K_TRIPLE_AT(h, v) (Q6K_QUANTS_AT + 3 * 64 * (8 * (h) + (v)))
_Static_assert(Q6K_TRIPLE_AT(1, 8) == QUANT_PACK_ROWS * sizeof(block_q6_k), "packed Q6_K group");
void quant_k_pack_q6_k(const void *w, size_t n, size_t n_rows, void *packed);
/* Packed Q2_K / Q3_K / Q4_K / Q5_K / Q6_K for AVX2 (maddubs, 8 rows per vector); their dots
 * add super-blocks in order. */
void quant_k_matmul_packed_q2_k_avx2(size_t n, const void *packed, size_t n_groups,
                                     const void *act, size_t act_row_bytes, const void *sums,
                                     size_t n_tokens, float *y, size_t ldy);
void quant_k_matmul_packed_q3_k_avx2(size_t n, const void *packed, size_t n_groups,
                                     const void *act, size_t act_row_bytes, const void *sums,
                                     size_t n_tokens, float *y, size_t ldy);
void quant_k_matmul_packed_q4_k_avx2(size_t n, const void *packed, size_t n_groups,
                                     const void *act, size_t act_row_bytes, const void *sums,
                                     size_t n_tokens, float *y, size_t ldy);
void quant_k_matmul_packed_q5_k_avx2(size_t n, const void *packed, size_t n_groups,
                                     const void *act, size_t act_row_bytes, const void *sums,
                                     size_t n_tokens, float *y, size_t ldy);
void quant_k_matmul_packed_q6_k_avx2(size_t n, const void *packed, size_t n_groups,
                                     const void *act, size_t act_row_bytes, const void *sums,
                                     size_t n_tokens, float *y, size_t ldy);
/*
 * The act_sums of the packed Q4_K / Q5_K kernels: per Q8_K block of an activation row, the
 * sums of its eight 32-element sub-blocks, bsums[2k] + bsums[2k + 1] (at most 32 * 128 in
 * magnitude) as i16 k = 0..7, 16 bytes a block. A kernel then takes a row's mins two
 * sub-blocks at a time (one vpdpwssd per pair) instead of one.
 */
void quant_k_sub_block_sums(const void *act, size_t n, void *sums);

/* The activation rows of a packed K kernel's tile of up to QUANT_K_TILE_TOKENS tokens (the
 * widest tile, AVX-512 Q6_K prompts; the others take 4): their Q8_K blocks and
 * sub-block sums (quant_k_sub_block_sums), quant_k_tile_init from the arguments of a
 * matmul_packed call. */
enum { QUANT_K_TILE_TOKENS = 8 };
typedef struct quant_k_tile {
    const block_q8_k *y[QUANT_K_TILE_TOKENS];
    const uint8_t *sub_sums[QUANT_K_TILE_TOKENS];
} quant_k_tile;

/* Tokens [t, t + n_tok) of act (rows act_row_bytes apart) and of sums (rows
 * quant_packed_sums_bytes(n) apart, from quant_prepare_packed_act). */
static inline void quant_k_tile_init(quant_k_tile *tile, const void *act, size_t act_row_bytes,
                                     const void *sums, size_t n, size_t t, size_t n_tok)
{
    for (size_t k = 0; k < n_tok; k++) {
        tile->y[k] = (const block_q8_k *)((const char *)act + (t + k) * act_row_bytes);
        tile->sub_sums[k] = (const uint8_t *)sums + (t + k) * quant_packed_sums_bytes(n);
    }
}
/* Packed VNNI kernels of Q2_K, Q3_K, Q4_K, Q5_K and Q6_K (quant_ops.pack / matmul_packed;
 * Q4_K's and Q5_K's read quant_k_sub_block_sums). */
void quant_k_matmul_packed_q2_k_avx512(size_t n, const void *packed, size_t n_groups,
                                       const void *act, size_t act_row_bytes, const void *sums,
                                       size_t n_tokens, float *y, size_t ldy);
void quant_k_matmul_packed_q3_k_avx512(size_t n, const void *packed, size_t n_groups,
                                       const void *act, size_t act_row_bytes, const void *sums,
                                       size_t n_tokens, float *y, size_t ldy);
void quant_k_matmul_packed_q6_k_avx512(size_t n, const void *packed, size_t n_groups,
                                       const void *act, size_t act_row_bytes, const void *sums,
                                       size_t n_tokens, float *y, size_t ldy);
void quant_k_matmul_packed_q4_k_avx512(size_t n, const void *packed, size_t n_groups,
                                       const void *act, size_t act_row_bytes, const void *sums,
                                       size_t n_tokens, float *y, size_t ldy);
void quant_k_matmul_packed_q5_k_avx512(size_t n, const void *packed, size_t n_groups,
                                       const void *act, size_t act_row_bytes, const void *sums,
                                       size_t n_tokens, float *y, size_t ldy);

#endif

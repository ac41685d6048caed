/*
 * AVX-512 (F/BW/VL/DQ) dot products of F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0 rows,
 * two 32-element blocks per 512-bit register, with a VNNI (vpdpbusd) variant of each block
 * kernel, and packed VNNI matrix kernels for the 32-element types. Chosen only at run time
 * (quant_legacy.c); never called on a CPU without AVX-512. Float sums run in f32 lanes with
 * FMA (the 32-element types: one per block, and one more for a min, in order): results
 * differ from scalar by rounding only.
 */
#include <stdbool.h>
#include <string.h>

#include "cpu.h"
#include "quant_legacy.h"
#include "quant_x86.h"

#define ALWAYS_INLINE static inline __attribute__((always_inline))

/* ---- float types ---------------------------------------------------------------------- */

ALWAYS_INLINE __m512 load_f16x16(const uint16_t *p, __mmask16 keep)
{
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(keep, p));
}

ALWAYS_INLINE __m512 load_bf16x16(const uint16_t *p, __mmask16 keep)
{
    __m512i wide = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(keep, p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(wide, 16));
}

ALWAYS_INLINE __m512 load_f32x16(const float *p, __mmask16 keep)
{
    return _mm512_maskz_loadu_ps(keep, p);
}

/* Lanes [0, n - i) of the last, partial group of 16. */
static __mmask16 tail_mask(size_t remaining)
{
    return (__mmask16)((1u << remaining) - 1);
}


/* Sixteen elements from i on (the lanes of `keep`) as f32. */
ALWAYS_INLINE __m512 load_float16(enum x86_float_kind kind, const void *row, size_t i,
                                  __mmask16 keep)
{
    switch (kind) {
    case X86_F16: return load_f16x16((const uint16_t *)row + i, keep);
    case X86_BF16: return load_bf16x16((const uint16_t *)row + i, keep);
    default: return load_f32x16((const float *)row + i, keep);
    }
}

/* Rows and tokens of one float tile: the kernel keeps TILE_ROWS * TILE_TOKENS accumulators
 * and TILE_ROWS weight vectors in the 32 registers (4 x 5 + 4 + one activation; at 4 x 6 the
 * compiler spills and the tile runs at a third of its speed). A block of up to
 * FLOAT_TOKEN_BLOCK tokens goes through a tile's rows before the next tile: the rows come
 * from memory once per block, and the block's activation rows stay in cache. */
enum { FLOAT_TILE_ROWS = QUANT_FLOAT_TILE_ROWS, FLOAT_TILE_TOKENS = 5, FLOAT_TOKEN_BLOCK = 20 };

/*
 * How far ahead a packed tile of several tokens asks for its weights: into L2 from
 * FLOAT_PREFETCH_FAR_BYTES on, and into L1 from FLOAT_PREFETCH_NEAR_BYTES on. Such a tile
 * issues 16-20 FMAs per 256 bytes of weights, so the scheduler holds only a few steps of them:
 * a weight load that misses L1 and waits on L2 stalls the loads of the steps behind it, and
 * the stream stops while the core computes (an F32 batch of 4 or 5 rows took the time of its
 * reads plus that of its arithmetic). Lines already in L1 when their step comes let the reads
 * and the arithmetic overlap; the far requests keep enough lines coming from memory.
 */
enum { FLOAT_PREFETCH_NEAR_BYTES = 4096, FLOAT_PREFETCH_FAR_BYTES = 32768 };

/* The requests of a packed tile's chunk at p of `bytes` (see above). */
ALWAYS_INLINE void float_tile_prefetch(const char *p, size_t bytes)
{
    x86_prefetch_ahead(p, bytes, FLOAT_PREFETCH_FAR_BYTES);
    /* integer arithmetic, as x86_prefetch_ahead: the address may lie past the matrix */
    uintptr_t near = (uintptr_t)p + FLOAT_PREFETCH_NEAR_BYTES;
    for (size_t offset = 0; offset < bytes; offset += 64)
        __builtin_prefetch((const void *)(near + offset), 0, 3);
}

/*
 * An F32 tile of 4 or 5 tokens that streams its weights alone (the block's only tile) goes
 * through them FLOAT_SPLIT_ELEMS at a time, twice: its first n_tok - 2 tokens, then the last 2
 * on the same lines, now in L1. A single pass of 16-20 FMAs per step kept reading and
 * computing apart (an F32 batch of 4 or 5 rows cost about as much as 9); the light first pass
 * keeps the stream going and the second computes from L1 while the prefetches run ahead.
 * Every accumulator still takes its FMAs in element order, so the bits do not change. F16 and
 * BF16 would convert each weight twice: their tiles stay whole.
 */
enum { FLOAT_SPLIT_ELEMS = 128, FLOAT_SPLIT_MIN_TOKENS = 4, FLOAT_SPLIT_LAST_TOKENS = 2 };

/* The steps [i_begin, i_end) (whole chunks of 16) of tokens [t_begin, t_end) of a tile. */
ALWAYS_INLINE void float_steps(enum x86_float_kind kind, bool interleaved, bool prefetch,
                               const char *w, size_t w_row_bytes, size_t n_rows, const char *act,
                               size_t act_row_bytes, size_t i_begin, size_t i_end, size_t t_begin,
                               size_t t_end, __m512 acc[FLOAT_TILE_ROWS][FLOAT_TILE_TOKENS])
{
    for (size_t i = i_begin; i < i_end; i += 16) {
        if (prefetch) /* a packed tile's chunks follow each other: the stream ahead */
            float_tile_prefetch(x86_tile_row_at(kind, true, w, 0, 0, i, 16),
                                FLOAT_TILE_ROWS * 16 * x86_float_bytes(kind));
        __m512 wv[FLOAT_TILE_ROWS];
        for (size_t r = 0; r < n_rows; r++)
            wv[r] = load_float16(kind, x86_tile_row_at(kind, interleaved, w, w_row_bytes, r, i, 16),
                                 0, 0xffff);
        for (size_t t = t_begin; t < t_end; t++) {
            __m512 av = load_float16(kind, act + t * act_row_bytes, i, 0xffff);
            for (size_t r = 0; r < n_rows; r++)
                acc[r][t] = _mm512_fmadd_ps(wv[r], av, acc[r][t]);
        }
    }
}

/*
 * y[t * ldy + r] for n_rows (<= 4) weight rows times n_tok (<= 5) activation rows, each pair
 * in one accumulator of 16 lanes: one FMA per 16 elements in order, the masked tail, then
 * _mm512_reduce_add_ps. Every pair takes the same steps whatever the tile and layout, and the
 * dot is the tile of one row and one token, so a result does not depend on its batch. A tile
 * loads each weight vector once for all its tokens (twice when split: see above); in the
 * 1-token case its rows are independent chains of FMAs. Interleaved tiles always have 4 rows.
 */
ALWAYS_INLINE void float_tile(enum x86_float_kind kind, bool interleaved, bool prefetch,
                              bool alone, size_t n, const char *w, size_t w_row_bytes,
                              size_t n_rows, const char *act, size_t act_row_bytes, size_t n_tok,
                              float *y, size_t ldy)
{
    __m512 acc[FLOAT_TILE_ROWS][FLOAT_TILE_TOKENS];
    for (size_t r = 0; r < n_rows; r++)
        for (size_t t = 0; t < n_tok; t++)
            acc[r][t] = _mm512_setzero_ps();
    size_t steps_end = n - n % 16;
    if (kind == X86_F32 && interleaved && alone && n_tok >= FLOAT_SPLIT_MIN_TOKENS) {
        size_t first = n_tok - FLOAT_SPLIT_LAST_TOKENS;
        for (size_t i = 0; i < steps_end; i += FLOAT_SPLIT_ELEMS) {
            size_t end = steps_end - i < FLOAT_SPLIT_ELEMS ? steps_end : i + FLOAT_SPLIT_ELEMS;
            float_steps(kind, true, prefetch, w, 0, n_rows, act, act_row_bytes, i, end, 0, first,
                        acc);
            float_steps(kind, true, false, w, 0, n_rows, act, act_row_bytes, i, end, first, n_tok,
                        acc);
        }
    } else {
        float_steps(kind, interleaved, prefetch, w, w_row_bytes, n_rows, act, act_row_bytes, 0,
                    steps_end, 0, n_tok, acc);
    }
    size_t i = steps_end;
    if (i < n) {
        __mmask16 keep = tail_mask(n - i);
        for (size_t t = 0; t < n_tok; t++) {
            __m512 av = load_float16(kind, act + t * act_row_bytes, i, keep);
            for (size_t r = 0; r < n_rows; r++) {
                const char *at = x86_tile_row_at(kind, interleaved, w, w_row_bytes, r, i, n - i);
                acc[r][t] = _mm512_fmadd_ps(load_float16(kind, at, 0, keep), av, acc[r][t]);
            }
        }
    }
    for (size_t r = 0; r < n_rows; r++)
        for (size_t t = 0; t < n_tok; t++)
            y[t * ldy + r] = _mm512_reduce_add_ps(acc[r][t]);
}

/*
 * BF16 with AVX512_BF16: vdpbf16ps multiplies 32 pairs of bf16 at once and adds each lane's
 * two products to its f32 accumulator (the products are exact, the adds round to nearest,
 * denormals flush), one instruction for what takes two conversions and two FMAs above. The
 * same tiles, 32 elements a step: two 16-element chunks in the low and high halves, which is
 * how a row-major load holds them too, so results keep their bits in any batch and layout.
 */

/* Elements [i, i + 32) of a tile's row r (those below n; zeros past it) in dpbf16ps order. */
ALWAYS_INLINE __m512i load_bf16_pairs(bool interleaved, const char *w, size_t w_row_bytes,
                                      size_t r, size_t i, size_t n)
{
    size_t low_len = n - i < 16 ? n - i : 16;
    __m256i low = _mm256_maskz_loadu_epi16(
        tail_mask(low_len), x86_tile_row_at(X86_BF16, interleaved, w, w_row_bytes, r, i, low_len));
    __m256i high = _mm256_setzero_si256();
    if (n - i > 16) {
        size_t high_len = n - i - 16 < 16 ? n - i - 16 : 16;
        high = _mm256_maskz_loadu_epi16(
            tail_mask(high_len),
            x86_tile_row_at(X86_BF16, interleaved, w, w_row_bytes, r, i + 16, high_len));
    }
    return _mm512_inserti64x4(_mm512_castsi256_si512(low), high, 1);
}

/* Row r's pairs at [i, i + 32) when all 32 lie below n (load_bf16_pairs without the tail). */
ALWAYS_INLINE __m512i load_bf16_pairs_whole(bool interleaved, const char *w, size_t w_row_bytes,
                                            size_t r, size_t i)
{
    if (!interleaved)
        return _mm512_loadu_si512(x86_tile_row_at(X86_BF16, false, w, w_row_bytes, r, i, 32));
    __m256i low = _mm256_loadu_si256(
        (const __m256i *)x86_tile_row_at(X86_BF16, true, w, 0, r, i, 16));
    __m256i high = _mm256_loadu_si256(
        (const __m256i *)x86_tile_row_at(X86_BF16, true, w, 0, r, i + 16, 16));
    return _mm512_inserti64x4(_mm512_castsi256_si512(low), high, 1);
}

/* The same for a row-major row (activations): one load holds its 32 elements in that order. */
ALWAYS_INLINE __m512i load_bf16_row_pairs(const char *row, size_t i, size_t n)
{
    size_t len = n - i < 32 ? n - i : 32;
    __mmask32 keep = len == 32 ? 0xffffffffu : (__mmask32)((1u << len) - 1);
    return _mm512_maskz_loadu_epi16(keep, (const uint16_t *)row + i);
}

ALWAYS_INLINE __m512 dpbf16(__m512 acc, __m512i x, __m512i y)
{
    return _mm512_dpbf16_ps(acc, (__m512bh)x, (__m512bh)y);
}

/* float_tile for BF16 with vdpbf16ps; the last step takes the partial pairs. Whole steps load
 * without masks: a masked load in every step left a 1-token stream from memory far below the
 * read rate on a Zen 5 (the values, and so the bits, are the same either way). */
ALWAYS_INLINE void bf16_dp_tile(bool interleaved, bool prefetch, size_t n, const char *w,
                                size_t w_row_bytes, size_t n_rows, const char *act,
                                size_t act_row_bytes, size_t n_tok, float *y, size_t ldy)
{
    __m512 acc[FLOAT_TILE_ROWS][FLOAT_TILE_TOKENS];
    for (size_t r = 0; r < n_rows; r++)
        for (size_t t = 0; t < n_tok; t++)
            acc[r][t] = _mm512_setzero_ps();
    for (size_t i = 0; i < n; i += 32) {
        if (prefetch)
            float_tile_prefetch(x86_tile_row_at(X86_BF16, true, w, 0, 0, i, 16),
                                FLOAT_TILE_ROWS * 32 * sizeof(uint16_t));
        bool whole = i + 32 <= n;
        __m512i wv[FLOAT_TILE_ROWS];
        for (size_t r = 0; r < n_rows; r++)
            wv[r] = whole ? load_bf16_pairs_whole(interleaved, w, w_row_bytes, r, i)
                          : load_bf16_pairs(interleaved, w, w_row_bytes, r, i, n);
        for (size_t t = 0; t < n_tok; t++) {
            const char *a = act + t * act_row_bytes;
            __m512i av = whole ? _mm512_loadu_si512(a + i * sizeof(uint16_t))
                               : load_bf16_row_pairs(a, i, n);
            for (size_t r = 0; r < n_rows; r++)
                acc[r][t] = dpbf16(acc[r][t], wv[r], av);
        }
    }
    for (size_t r = 0; r < n_rows; r++)
        for (size_t t = 0; t < n_tok; t++)
            y[t * ldy + r] = _mm512_reduce_add_ps(acc[r][t]);
}

/* One tile, by FMA (float_tile) or by vdpbf16ps (dp, BF16 only); alone when it is its
 * block's only tile, which reads the weights from memory by itself. A packed tile of several
 * tokens requests its weights ahead (float_tile_prefetch): it computes long enough per line
 * that the hardware prefetchers alone leave the stream waiting (an F16 batch of 5 rows took
 * the time of its arithmetic plus that of its reads). A 1-token packed stream asks too where
 * cpu_prefetch_float_stream says (on Intel the hardware prefetchers alone kept an F16 or
 * BF16 row group's read well below the memory's rate). */
ALWAYS_INLINE void any_tile(bool dp, enum x86_float_kind kind, bool interleaved, bool alone,
                            size_t n, const char *w, size_t w_row_bytes, size_t n_rows,
                            const char *act, size_t act_row_bytes, size_t n_tok, float *y,
                            size_t ldy)
{
    bool prefetch = interleaved && (n_tok > 1 || cpu_prefetch_float_stream());
    if (dp)
        bf16_dp_tile(interleaved, prefetch, n, w, w_row_bytes, n_rows, act, act_row_bytes, n_tok,
                     y, ldy);
    else
        float_tile(kind, interleaved, prefetch, alone, n, w, w_row_bytes, n_rows, act,
                   act_row_bytes, n_tok, y, ldy);
}

/* A tile with its sizes as constants in each call, so that its loops unroll. */
#define TILE_CASE(layout, rows, toks)                                                        \
    case (rows - 1) * FLOAT_TILE_TOKENS + toks - 1:                                          \
        any_tile(dp, kind, layout, alone, n, w, w_row_bytes, rows, act, act_row_bytes, toks, y, \
                 ldy);                                                                       \
        break;
#define TILE_CASES(layout, rows)                                                             \
    TILE_CASE(layout, rows, 1) TILE_CASE(layout, rows, 2) TILE_CASE(layout, rows, 3)         \
    TILE_CASE(layout, rows, 4) TILE_CASE(layout, rows, 5)

/* Tokens of the next tile of a block that has `left` tokens to go: 4, or 5 where 4 would
 * leave a tile of one token (9 as 5 + 4); a 1-token tile converts and loads its weights for
 * a quarter of the work, and F32's 2- and 3-token tiles take as long as its 4-token one. */
static inline size_t tile_tokens(size_t left)
{
    return left % 4 == 1 && left >= FLOAT_TILE_TOKENS ? FLOAT_TILE_TOKENS : left < 4 ? left : 4;
}

/* Every tile of a matrix: row-major rows, or packed ones (whole tiles, tile_bytes apart). */
ALWAYS_INLINE void tile_matmul(bool dp, enum x86_float_kind kind, bool interleaved, size_t n,
                               const void *weights, size_t w_row_bytes, size_t n_rows,
                               const void *activations, size_t act_row_bytes, size_t n_tokens,
                               float *out, size_t ldy)
{
    size_t tile_bytes = FLOAT_TILE_ROWS * (interleaved ? n * x86_float_bytes(kind) : w_row_bytes);
    for (size_t block = 0; block < n_tokens; block += FLOAT_TOKEN_BLOCK) {
        size_t block_end = n_tokens - block < FLOAT_TOKEN_BLOCK ? n_tokens : block + FLOAT_TOKEN_BLOCK;
        for (size_t r = 0; r < n_rows; r += FLOAT_TILE_ROWS) {
            size_t rows = n_rows - r < FLOAT_TILE_ROWS ? n_rows - r : FLOAT_TILE_ROWS;
            const char *w = (const char *)weights + r / FLOAT_TILE_ROWS * tile_bytes;
            for (size_t t = block, n_tok; t < block_end; t += n_tok) {
                n_tok = tile_tokens(block_end - t);
                bool alone = n_tok == block_end - block;
                const char *act = (const char *)activations + t * act_row_bytes;
                float *y = out + t * ldy + r;
                if (interleaved) {
                    switch ((rows - 1) * FLOAT_TILE_TOKENS + n_tok - 1) {
                        TILE_CASES(true, 4)
                    default: break;
                    }
                } else {
                    switch ((rows - 1) * FLOAT_TILE_TOKENS + n_tok - 1) {
                        TILE_CASES(false, 1)
                        TILE_CASES(false, 2)
                        TILE_CASES(false, 3)
                        TILE_CASES(false, 4)
                    default: break;
                    }
                }
            }
        }
    }
}

/*
 * Prompts of F16 and BF16 rows by FMA: the activations converted to f32 once per group of
 * rows instead of once per tile. On Intel a 512-bit vcvtph2ps takes two uops on the two ports
 * of the FMAs it feeds (the BF16 widening, a vpmovzxwd and a shift, the same), so float_tile's
 * 4 x 5 tile, converting 4 weight and 5 activation vectors a step for 20 FMAs, leaves the
 * FMAs little more than half the slots. Here a tile of WIDE_TILE_ROWS x WIDE_TILE_TOKENS
 * converts only its 4 weight vectors and reads the activations as f32 from the scratch: 24
 * FMAs for 4 conversions a step.
 *
 * A block of WIDE_BLOCK_TOKENS tokens goes through the matrix WIDE_GROUP_ROWS rows at a time,
 * and a group through the elements WIDE_SEGMENT at a time: the block's activations of one
 * segment are converted into the scratch (zeros past n), then every tile of the group takes
 * its steps of the segment (a token tile at a time, so that its activations stay in L1),
 * its accumulators kept in the scratch between segments. The scratch (120 KiB of stack) is
 * bounded whatever n, and a segment's conversions serve the group's 64 rows; each weight is
 * read from memory once per block. The first token tile asks for the next segment's weights
 * ahead: a group's tiles are separate streams, which the hardware prefetchers alone follow
 * poorly.
 *
 * The bits are float_tile's: each accumulator takes one FMA per 16 elements in element
 * order (f32 of an f16 or bf16 value is exact, wherever it is made), the last partial chunk
 * as masked weights times zeros past n, then _mm512_reduce_add_ps.
 */
enum {
    WIDE_TILE_ROWS = 4,
    WIDE_TILE_TOKENS = 6, /* 24 accumulators, 4 weight vectors and an activation: 29 of 32 */
    WIDE_BLOCK_TOKENS = 24,
    WIDE_GROUP_ROWS = 64,
    WIDE_SEGMENT = 256,
    /* fewer tokens take tile_matmul, whose 4 x 5 tile converts as it goes */
    WIDE_MIN_TOKENS = 8,
};
_Static_assert(WIDE_GROUP_ROWS % FLOAT_TILE_ROWS == 0 && WIDE_SEGMENT % 16 == 0,
               "a group holds whole packed tiles, a segment whole chunks");

_Static_assert(WIDE_SEGMENT % 32 == 0, "a segment holds whole vdpbf16ps steps");

/* The activations of a segment: f32 for the FMA tiles, bf16 as they come for vdpbf16ps. */
typedef struct wide_scratch {
    union {
        float f32[WIDE_BLOCK_TOKENS][WIDE_SEGMENT];
        uint16_t bf16[WIDE_BLOCK_TOKENS][WIDE_SEGMENT];
    } act;
    __m512 acc[WIDE_GROUP_ROWS][WIDE_BLOCK_TOKENS];
} wide_scratch;

/* Where row r's chunk at element i starts (chunks of 16, or the n - i left at the end). */
ALWAYS_INLINE const char *wide_row_at(enum x86_float_kind kind, bool interleaved, const char *w,
                                      size_t w_row_bytes, size_t r, size_t i, size_t n)
{
    size_t len = n - i < 16 ? n - i : 16;
    if (interleaved)
        return x86_tile_row_at(kind, true,
                               w + r / FLOAT_TILE_ROWS * FLOAT_TILE_ROWS * n * x86_float_bytes(kind),
                               0, r % FLOAT_TILE_ROWS, i, len);
    return x86_tile_row_at(kind, false, w, w_row_bytes, r, i, len);
}

/*
 * Rows [r0, r0 + n_rows) of the weights times the n_tok tokens of act (rows WIDE_SEGMENT
 * floats apart, the segment [i0, i0 + len) converted, zeros past n): the accumulators come
 * from acc_rows[r][t0 + t] (zeros in the first segment) and go back there, or in the last
 * segment their sums go to y[t * ldy + r]. With `prefetch` each packed tile whose first row
 * is here asks for its next segment's lines, one step at a time.
 */
ALWAYS_INLINE void wide_tile(enum x86_float_kind kind, bool interleaved, size_t n, const char *w,
                             size_t w_row_bytes, size_t r0, size_t n_rows, size_t i0, size_t len,
                             const float *act, size_t n_tok, bool prefetch,
                             __m512 (*acc_rows)[WIDE_BLOCK_TOKENS], size_t t0, float *y,
                             size_t ldy)
{
    __m512 acc[WIDE_TILE_ROWS][WIDE_TILE_TOKENS];
#pragma GCC unroll 4
    for (size_t r = 0; r < n_rows; r++)
#pragma GCC unroll 6
        for (size_t t = 0; t < n_tok; t++)
            acc[r][t] = i0 == 0 ? _mm512_setzero_ps() : acc_rows[r][t0 + t];
    size_t elem = x86_float_bytes(kind), steps_end = len - len % 16;
    for (size_t i = 0; i < len; i += 16) {
        /* whole chunks, then the masked one at the end of a row */
        __mmask16 keep = i < steps_end ? 0xffff : tail_mask(len - i);
        __m512 wv[WIDE_TILE_ROWS];
#pragma GCC unroll 4
        for (size_t r = 0; r < n_rows; r++) {
            const char *at = wide_row_at(kind, interleaved, w, w_row_bytes, r0 + r, i0 + i, n);
            if (prefetch && (!interleaved || (r0 + r) % FLOAT_TILE_ROWS == 0))
                x86_prefetch_ahead(at, (interleaved ? FLOAT_TILE_ROWS : 1) * 16 * elem,
                                   (interleaved ? FLOAT_TILE_ROWS : 1) * WIDE_SEGMENT * elem);
            wv[r] = load_float16(kind, at, 0, keep);
        }
#pragma GCC unroll 6
        for (size_t t = 0; t < n_tok; t++) {
            __m512 av = _mm512_load_ps(act + t * WIDE_SEGMENT + i);
#pragma GCC unroll 4
            for (size_t r = 0; r < n_rows; r++)
                acc[r][t] = _mm512_fmadd_ps(wv[r], av, acc[r][t]);
        }
    }
    bool last = i0 + len == n;
#pragma GCC unroll 4
    for (size_t r = 0; r < n_rows; r++)
#pragma GCC unroll 6
        for (size_t t = 0; t < n_tok; t++) {
            if (last)
                y[t * ldy + r] = _mm512_reduce_add_ps(acc[r][t]);
            else
                acc_rows[r][t0 + t] = acc[r][t];
        }
}

/* Elements [i0, i0 + len) of n_tok activation rows as f32 rows of the scratch, zeros after
 * the last element up to the next 16. */
ALWAYS_INLINE void wide_convert_act(enum x86_float_kind kind, const char *act,
                                    size_t act_row_bytes, size_t n_tok, size_t i0, size_t len,
                                    float (*out)[WIDE_SEGMENT])
{
    for (size_t t = 0; t < n_tok; t++)
        for (size_t i = 0; i < len; i += 16) {
            __mmask16 keep = len - i < 16 ? tail_mask(len - i) : 0xffff;
            _mm512_store_ps(out[t] + i, load_float16(kind, act + t * act_row_bytes, i0 + i, keep));
        }
}

/*
 * BF16 prompts with vdpbf16ps: the same blocks, groups, segments and tiles, the activations
 * copied into the scratch as they are (bf16, zeros past n up to the next 32), each step 32
 * elements. A 4 x 6 tile issues 24 vdpbf16ps for 4 weight and 6 activation loads and no
 * conversion at all, where bf16_dp_tile's 4 x 5 tile reloads its activations for every
 * group of 4 rows. The bits are bf16_dp_tile's: each accumulator takes one vdpbf16ps per 32
 * elements in element order, on the same pairs (weights read by load_bf16_pairs, zeros past
 * n in both operands), then _mm512_reduce_add_ps.
 */

/* wide_tile with vdpbf16ps on a segment of bf16 activations (see above). */
ALWAYS_INLINE void wide_dp_tile(bool interleaved, size_t n, const char *w, size_t w_row_bytes,
                                size_t r0, size_t n_rows, size_t i0, size_t len,
                                const uint16_t *act, size_t n_tok, bool prefetch,
                                __m512 (*acc_rows)[WIDE_BLOCK_TOKENS], size_t t0, float *y,
                                size_t ldy)
{
    __m512 acc[WIDE_TILE_ROWS][WIDE_TILE_TOKENS];
#pragma GCC unroll 4
    for (size_t r = 0; r < n_rows; r++)
#pragma GCC unroll 6
        for (size_t t = 0; t < n_tok; t++)
            acc[r][t] = i0 == 0 ? _mm512_setzero_ps() : acc_rows[r][t0 + t];
    size_t elem = sizeof(uint16_t);
    for (size_t i = 0; i < len; i += 32) {
        bool whole = i0 + i + 32 <= n;
        __m512i wv[WIDE_TILE_ROWS];
#pragma GCC unroll 4
        for (size_t r = 0; r < n_rows; r++) {
            /* the packed tile that holds the row, and the row in it */
            size_t row = r0 + r;
            const char *tile =
                interleaved ? w + row / FLOAT_TILE_ROWS * FLOAT_TILE_ROWS * n * elem : w;
            size_t tile_row = interleaved ? row % FLOAT_TILE_ROWS : row;
            if (prefetch && (!interleaved || tile_row == 0))
                x86_prefetch_ahead(x86_tile_row_at(X86_BF16, interleaved, tile, w_row_bytes,
                                                   tile_row, i0 + i, 16),
                                   (interleaved ? FLOAT_TILE_ROWS : 1) * 32 * elem,
                                   (interleaved ? FLOAT_TILE_ROWS : 1) * WIDE_SEGMENT * elem);
            wv[r] = whole ? load_bf16_pairs_whole(interleaved, tile, w_row_bytes, tile_row, i0 + i)
                          : load_bf16_pairs(interleaved, tile, w_row_bytes, tile_row, i0 + i, n);
        }
#pragma GCC unroll 6
        for (size_t t = 0; t < n_tok; t++) {
            __m512i av = _mm512_load_si512(act + t * WIDE_SEGMENT + i);
#pragma GCC unroll 4
            for (size_t r = 0; r < n_rows; r++)
                acc[r][t] = dpbf16(acc[r][t], wv[r], av);
        }
    }
    bool last = i0 + len == n;
#pragma GCC unroll 4
    for (size_t r = 0; r < n_rows; r++)
#pragma GCC unroll 6
        for (size_t t = 0; t < n_tok; t++) {
            if (last)
                y[t * ldy + r] = _mm512_reduce_add_ps(acc[r][t]);
            else
                acc_rows[r][t0 + t] = acc[r][t];
        }
}

/* Elements [i0, i0 + len) of n_tok bf16 activation rows into the scratch, zeros after the
 * last element up to the next 32. */
ALWAYS_INLINE void wide_copy_bf16_act(const char *act, size_t act_row_bytes, size_t n_tok,
                                      size_t i0, size_t len, uint16_t (*out)[WIDE_SEGMENT])
{
    for (size_t t = 0; t < n_tok; t++) {
        const uint16_t *row = (const uint16_t *)(act + t * act_row_bytes) + i0;
        for (size_t i = 0; i < len; i += 32) {
            __mmask32 keep = len - i < 32 ? (__mmask32)((1u << (len - i)) - 1) : 0xffffffffu;
            _mm512_store_si512(out[t] + i, _mm512_maskz_loadu_epi16(keep, row + i));
        }
    }
}

/* A wide tile with its sizes as constants in each call, so that its loops unroll. */
#define WIDE_CASE(rows, toks)                                                                 \
    case (rows - 1) * WIDE_TILE_TOKENS + toks - 1:                                            \
        if (dp)                                                                               \
            wide_dp_tile(interleaved, n, weights, w_row_bytes, r, rows, i0, len,              \
                         s.act.bf16[t], toks, t == 0, s.acc + (r - g), t,                     \
                         out + (block + t) * ldy + r, ldy);                                   \
        else                                                                                  \
            wide_tile(kind, interleaved, n, weights, w_row_bytes, r, rows, i0, len,           \
                      s.act.f32[t], toks, t == 0, s.acc + (r - g), t,                         \
                      out + (block + t) * ldy + r, ldy);                                      \
        break;
#define WIDE_CASES(rows)                                                                      \
    WIDE_CASE(rows, 1) WIDE_CASE(rows, 2) WIDE_CASE(rows, 3) WIDE_CASE(rows, 4)               \
    WIDE_CASE(rows, 5) WIDE_CASE(rows, 6)

/* tile_matmul's product for F16 / BF16 with WIDE_MIN_TOKENS tokens or more (see above), by
 * FMA or by vdpbf16ps (dp, BF16 only). */
ALWAYS_INLINE void wide_matmul(bool dp, enum x86_float_kind kind, bool interleaved, size_t n,
                               const void *weights, size_t w_row_bytes, size_t n_rows,
                               const void *activations, size_t act_row_bytes, size_t n_tokens,
                               float *out, size_t ldy)
{
    wide_scratch s;
    for (size_t block = 0; block < n_tokens; block += WIDE_BLOCK_TOKENS) {
        size_t n_block = n_tokens - block < WIDE_BLOCK_TOKENS ? n_tokens - block : WIDE_BLOCK_TOKENS;
        const char *act = (const char *)activations + block * act_row_bytes;
        for (size_t g = 0; g < n_rows; g += WIDE_GROUP_ROWS) {
            size_t g_end = n_rows - g < WIDE_GROUP_ROWS ? n_rows : g + WIDE_GROUP_ROWS;
            for (size_t i0 = 0; i0 < n; i0 += WIDE_SEGMENT) {
                size_t len = n - i0 < WIDE_SEGMENT ? n - i0 : WIDE_SEGMENT;
                if (dp)
                    wide_copy_bf16_act(act, act_row_bytes, n_block, i0, len, s.act.bf16);
                else
                    wide_convert_act(kind, act, act_row_bytes, n_block, i0, len, s.act.f32);
                for (size_t t = 0, n_tok; t < n_block; t += n_tok) {
                    n_tok = n_block - t < WIDE_TILE_TOKENS ? n_block - t : WIDE_TILE_TOKENS;
                    for (size_t r = g, rows; r < g_end; r += rows) {
                        rows = g_end - r < WIDE_TILE_ROWS ? g_end - r : WIDE_TILE_ROWS;
                        switch ((rows - 1) * WIDE_TILE_TOKENS + n_tok - 1) {
                            WIDE_CASES(1)
                            WIDE_CASES(2)
                            WIDE_CASES(3)
                            WIDE_CASES(4)
                        default: break;
                        }
                    }
                }
            }
        }
    }
}

/* A float kind's dot (the tile of one row and one token), tile kernel and packed kernel. */
#define DEFINE_FLOAT_KERNELS(type, kind)                                                     \
    float quant_dot_##type##_avx512(size_t n, const void *w, const void *a)                   \
    {                                                                                         \
        float y;                                                                              \
        float_tile(kind, false, false, false, n, w, 0, 1, a, 0, 1, &y, 0);                    \
        return y;                                                                             \
    }                                                                                         \
    void quant_matmul_##type##_avx512(size_t n, const void *w, size_t w_row_bytes,            \
                                      size_t n_rows, const void *act, size_t act_row_bytes,   \
                                      size_t n_tokens, float *y, size_t ldy)                  \
    {                                                                                         \
        if (kind != X86_F32 && n_tokens >= WIDE_MIN_TOKENS)                                   \
            wide_matmul(false, kind, false, n, w, w_row_bytes, n_rows, act, act_row_bytes,    \
                        n_tokens, y, ldy);                                                    \
        else                                                                                  \
            tile_matmul(false, kind, false, n, w, w_row_bytes, n_rows, act, act_row_bytes,   \
                        n_tokens, y, ldy);                                                    \
    }                                                                                         \
    void quant_matmul_packed_##type##_avx512(size_t n, const void *packed, size_t n_groups,   \
                                             const void *act, size_t act_row_bytes,           \
                                             const void *sums, size_t n_tokens, float *y,     \
                                             size_t ldy)                                      \
    {                                                                                         \
        (void)sums;                                                                           \
        if (kind != X86_F32 && n_tokens >= WIDE_MIN_TOKENS)                                   \
            wide_matmul(false, kind, true, n, packed, 0, n_groups * QUANT_PACK_ROWS, act,     \
                        act_row_bytes, n_tokens, y, ldy);                                     \
        else                                                                                  \
            tile_matmul(false, kind, true, n, packed, 0, n_groups * QUANT_PACK_ROWS, act,     \
                        act_row_bytes, n_tokens, y, ldy);                                     \
    }

DEFINE_FLOAT_KERNELS(f32, X86_F32)
DEFINE_FLOAT_KERNELS(f16, X86_F16)
DEFINE_FLOAT_KERNELS(bf16, X86_BF16)

float quant_dot_bf16_avx512_bf16(size_t n, const void *w, const void *a)
{
    float y;
    bf16_dp_tile(false, false, n, w, 0, 1, a, 0, 1, &y, 0);
    return y;
}

void quant_matmul_bf16_avx512_bf16(size_t n, const void *w, size_t w_row_bytes, size_t n_rows,
                                   const void *act, size_t act_row_bytes, size_t n_tokens,
                                   float *y, size_t ldy)
{
    if (n_tokens >= WIDE_MIN_TOKENS)
        wide_matmul(true, X86_BF16, false, n, w, w_row_bytes, n_rows, act, act_row_bytes,
                    n_tokens, y, ldy);
    else
        tile_matmul(true, X86_BF16, false, n, w, w_row_bytes, n_rows, act, act_row_bytes,
                    n_tokens, y, ldy);
}

void quant_matmul_packed_bf16_avx512_bf16(size_t n, const void *packed, size_t n_groups,
                                          const void *act, size_t act_row_bytes,
                                          const void *sums, size_t n_tokens, float *y,
                                          size_t ldy)
{
    (void)sums;
    if (n_tokens >= WIDE_MIN_TOKENS)
        wide_matmul(true, X86_BF16, true, n, packed, 0, n_groups * QUANT_PACK_ROWS, act,
                    act_row_bytes, n_tokens, y, ldy);
    else
        tile_matmul(true, X86_BF16, true, n, packed, 0, n_groups * QUANT_PACK_ROWS, act,
                    act_row_bytes, n_tokens, y, ldy);
}

/* ---- 32-element block types, two blocks per register ---------------------------------- */

ALWAYS_INLINE __m512i join(__m256i low, __m256i high)
{
    return _mm512_inserti64x4(_mm512_castsi256_si512(low), high, 1);
}

ALWAYS_INLINE __m512i load_pair_q8(const int8_t *qs0, const int8_t *qs1)
{
    return join(_mm256_loadu_si256((const __m256i *)qs0), _mm256_loadu_si256((const __m256i *)qs1));
}

ALWAYS_INLINE __m512i unpack_pair_nibbles(const uint8_t *qs0, const uint8_t *qs1)
{
    return join(x86_unpack_nibbles(qs0), x86_unpack_nibbles(qs1));
}

/* Bit j of the result is bit j of block 0's qh, bit 32 + j that of block 1. */
ALWAYS_INLINE __mmask64 pair_high_bits(const uint8_t *qh0, const uint8_t *qh1)
{
    uint32_t bits0, bits1;
    memcpy(&bits0, qh0, sizeof bits0);
    memcpy(&bits1, qh1, sizeof bits1);
    return (__mmask64)((uint64_t)bits0 | (uint64_t)bits1 << 32);
}

/* Sixteen i32 sums of unsigned x (<= 128) times signed y, four bytes per lane. */
ALWAYS_INLINE __m512i dot_u8_i8(__m512i x, __m512i y, bool vnni)
{
    if (vnni)
        return _mm512_dpbusd_epi32(_mm512_setzero_si512(), x, y);
    return _mm512_madd_epi16(_mm512_maddubs_epi16(x, y), _mm512_set1_epi16(1));
}

/* The same for signed x: move x's sign onto y (y is never -128). */
ALWAYS_INLINE __m512i dot_i8(__m512i x, __m512i y, bool vnni)
{
    __mmask64 negative = _mm512_movepi8_mask(x);
    __m512i signed_y = _mm512_mask_sub_epi8(y, negative, _mm512_setzero_si512(), y);
    return dot_u8_i8(_mm512_abs_epi8(x), signed_y, vnni);
}

/*
 * The 32-element types add their blocks in order into one f32 sum, acc = fma(f32(dx * dy),
 * isum, acc), the isum of a block being exact, then for Q4_1 / Q5_1 acc = fma(m, s, acc):
 * the order of the packed kernels below, where each lane of a vector follows one weight row;
 * x86_fused_add and x86_fused_madd are those steps on one lane.
 */

/* Four blocks' integer sums reduced together (isum[k] for block k), to be added in order. */
ALWAYS_INLINE void reduce_four_blocks(__m512i sums01, __m512i sums23, int32_t isum[4])
{
    /* lanes 0-7 / 8-15 of sums01 belong to blocks 0 / 1, of sums23 to blocks 2 / 3 */
    __m256i low = _mm256_hadd_epi32(_mm512_castsi512_si256(sums01),
                                    _mm512_extracti64x4_epi64(sums01, 1));
    __m256i high = _mm256_hadd_epi32(_mm512_castsi512_si256(sums23),
                                     _mm512_extracti64x4_epi64(sums23, 1));
    __m256i quads = _mm256_hadd_epi32(low, high);
    _mm_storeu_si128((__m128i *)isum, _mm_add_epi32(_mm256_castsi256_si128(quads),
                                                    _mm256_extracti128_si256(quads, 1)));
}

/* The integer sums of blocks 0 and 1 in lanes 0-7 and 8-15. */
ALWAYS_INLINE __m512i pair_sums_q4_0(const block_q4_0 *x0, const block_q4_0 *x1,
                                     const block_q8_0 *y0, const block_q8_0 *y1, bool vnni)
{
    __m512i qx = _mm512_sub_epi8(unpack_pair_nibbles(x0->qs, x1->qs), _mm512_set1_epi8(8));
    return dot_i8(qx, load_pair_q8(y0->qs, y1->qs), vnni);
}

ALWAYS_INLINE __m512i pair_sums_q4_1(const block_q4_1 *x0, const block_q4_1 *x1,
                                     const block_q8_1 *y0, const block_q8_1 *y1, bool vnni)
{
    return dot_u8_i8(unpack_pair_nibbles(x0->qs, x1->qs), load_pair_q8(y0->qs, y1->qs), vnni);
}

ALWAYS_INLINE __m512i pair_sums_q5_0(const block_q5_0 *x0, const block_q5_0 *x1,
                                     const block_q8_0 *y0, const block_q8_0 *y1, bool vnni)
{
    /* q - 16: the nibble where bit 4 is set, nibble - 16 where it is not. */
    __m512i nibbles = unpack_pair_nibbles(x0->qs, x1->qs);
    __mmask64 bit4 = pair_high_bits(x0->qh, x1->qh);
    __m512i qx = _mm512_mask_sub_epi8(nibbles, ~bit4, nibbles, _mm512_set1_epi8(16));
    return dot_i8(qx, load_pair_q8(y0->qs, y1->qs), vnni);
}

ALWAYS_INLINE __m512i pair_sums_q5_1(const block_q5_1 *x0, const block_q5_1 *x1,
                                     const block_q8_1 *y0, const block_q8_1 *y1, bool vnni)
{
    __m512i nibbles = unpack_pair_nibbles(x0->qs, x1->qs);
    __mmask64 bit4 = pair_high_bits(x0->qh, x1->qh);
    __m512i qx = _mm512_mask_add_epi8(nibbles, bit4, nibbles, _mm512_set1_epi8(16));
    return dot_u8_i8(qx, load_pair_q8(y0->qs, y1->qs), vnni);
}

ALWAYS_INLINE __m512i pair_sums_q8_0(const block_q8_0 *x0, const block_q8_0 *x1,
                                     const block_q8_0 *y0, const block_q8_0 *y1, bool vnni)
{
    return dot_i8(load_pair_q8(x0->qs, x1->qs), load_pair_q8(y0->qs, y1->qs), vnni);
}

/* Four blocks per step, then the last n_blocks % 4 one at a time. */
#define SEQUENTIAL_DOT_BODY(pair_sums, min_term, vnni)                                      \
    size_t n_blocks = n / QUANT_QK32, i = 0;                                                \
    float acc = 0.0f;                                                                       \
    for (; i + 4 <= n_blocks; i += 4) {                                                     \
        int32_t isum[4];                                                                    \
        reduce_four_blocks(pair_sums(x + i, x + i + 1, y + i, y + i + 1, vnni),             \
                           pair_sums(x + i + 2, x + i + 3, y + i + 2, y + i + 3, vnni), isum); \
        for (int k = 0; k < 4; k++) {                                                       \
            acc = x86_fused_add(x86_half(x[i + k].d) * x86_half(y[i + k].d), isum[k], acc); \
            acc = min_term(x[i + k], y[i + k], acc);                                        \
        }                                                                                   \
    }                                                                                       \
    for (; i < n_blocks; i++) {                                                             \
        /* the block paired with itself, only lanes 0-7 kept: nothing past the row is read */ \
        __m512i sums = _mm512_maskz_mov_epi32(0x00ff, pair_sums(x + i, x + i, y + i, y + i, vnni)); \
        __m256i s = _mm256_add_epi32(_mm512_castsi512_si256(sums),                          \
                                     _mm512_extracti64x4_epi64(sums, 1));                   \
        float d = x86_half(x[i].d) * x86_half(y[i].d);                                     \
        acc = x86_fused_add(d, x86_hsum_epi32(s), acc);                                     \
        acc = min_term(x[i], y[i], acc);                                                    \
    }                                                                                       \
    return acc;

ALWAYS_INLINE float dot_q4_0(size_t n, const void *w, const void *a, bool vnni)
{
    const block_q4_0 *x = w;
    const block_q8_0 *y = a;
    SEQUENTIAL_DOT_BODY(pair_sums_q4_0, X86_NO_MIN_TERM, vnni)
}

ALWAYS_INLINE float dot_q4_1(size_t n, const void *w, const void *a, bool vnni)
{
    const block_q4_1 *x = w;
    const block_q8_1 *y = a;
    SEQUENTIAL_DOT_BODY(pair_sums_q4_1, X86_MIN_TERM, vnni)
}

ALWAYS_INLINE float dot_q5_0(size_t n, const void *w, const void *a, bool vnni)
{
    const block_q5_0 *x = w;
    const block_q8_0 *y = a;
    SEQUENTIAL_DOT_BODY(pair_sums_q5_0, X86_NO_MIN_TERM, vnni)
}

ALWAYS_INLINE float dot_q5_1(size_t n, const void *w, const void *a, bool vnni)
{
    const block_q5_1 *x = w;
    const block_q8_1 *y = a;
    SEQUENTIAL_DOT_BODY(pair_sums_q5_1, X86_MIN_TERM, vnni)
}

ALWAYS_INLINE float dot_q8_0(size_t n, const void *w, const void *a, bool vnni)
{
    const block_q8_0 *x = w;
    const block_q8_0 *y = a;
    SEQUENTIAL_DOT_BODY(pair_sums_q8_0, X86_NO_MIN_TERM, vnni)
}

float quant_dot_q4_0_avx512(size_t n, const void *w, const void *a)
{
    return dot_q4_0(n, w, a, false);
}

float quant_dot_q4_1_avx512(size_t n, const void *w, const void *a)
{
    return dot_q4_1(n, w, a, false);
}

float quant_dot_q5_0_avx512(size_t n, const void *w, const void *a)
{
    return dot_q5_0(n, w, a, false);
}

float quant_dot_q5_1_avx512(size_t n, const void *w, const void *a)
{
    return dot_q5_1(n, w, a, false);
}

float quant_dot_q8_0_avx512(size_t n, const void *w, const void *a)
{
    return dot_q8_0(n, w, a, false);
}


float quant_dot_q4_0_avx512_vnni(size_t n, const void *w, const void *a)
{
    return dot_q4_0(n, w, a, true);
}

float quant_dot_q4_1_avx512_vnni(size_t n, const void *w, const void *a)
{
    return dot_q4_1(n, w, a, true);
}

float quant_dot_q5_0_avx512_vnni(size_t n, const void *w, const void *a)
{
    return dot_q5_0(n, w, a, true);
}

float quant_dot_q5_1_avx512_vnni(size_t n, const void *w, const void *a)
{
    return dot_q5_1(n, w, a, true);
}

float quant_dot_q8_0_avx512_vnni(size_t n, const void *w, const void *a)
{
    return dot_q8_0(n, w, a, true);
}


/* ---- packed matrix kernels (VNNI) ----------------------------------------------------- */

/* Rows packed by quant_pack_q4_0 / _q4_1 / _q5_0 / _q5_1 / _q8_0: one 512-bit lane follows
 * one row. */
enum { PACK_ROWS = QUANT_PACK_ROWS, SCALE_BYTES = PACK_ROWS * 2 };

/* Up to TILE_TOKENS activation rows pass over a packed group together. */
enum { TILE_TOKENS = 4 };

/* Q8_0 activation rows with dy and start values for Q4_0 / Q5_0 / Q8_0, Q8_1 rows with dy
 * and sy for Q4_1 / Q5_1 (see the AVX2 kernels' tile). */
typedef struct packed_tile {
    const void *y[TILE_TOKENS];
    const float *dy[TILE_TOKENS];
    const int32_t *start[TILE_TOKENS]; /* per block: -offset * sum(qy) */
    const float *sy[TILE_TOKENS];
} packed_tile;

/*
 * One packed block against n_tok tokens: words q[0..8) (unsigned quants of 16 rows) times
 * the broadcast activation words, in two partial sums per token so that consecutive
 * vpdpbusd do not wait on each other. Words 4..7 hold 2^high_shift times their quants (the
 * 4-bit types keep their high nibbles in place), so that half's exact sum is shifted back
 * once. With mins (mx, Q4_1 / Q5_1) the quants are the values themselves and each token
 * adds m * s after the scaled sum; without, the sum starts at the token's start value.
 */
ALWAYS_INLINE void packed_block_step(const __m512i q[8], __m512 dx, const __m512 *mx,
                                     const packed_tile *tile, size_t b, int high_shift,
                                     size_t n_tok, __m512 *acc)
{
    for (size_t t = 0; t < n_tok; t++) {
        const int8_t *qy = mx ? ((const block_q8_1 *)tile->y[t])[b].qs
                              : ((const block_q8_0 *)tile->y[t])[b].qs;
        __m512i low = mx ? _mm512_setzero_si512() : _mm512_set1_epi32(tile->start[t][b]);
        __m512i high = _mm512_setzero_si512();
        for (int j = 0; j < 4; j++) {
            low = x86_dpbusd_word(low, q[j], qy + 4 * j);
            high = x86_dpbusd_word(high, q[j + 4], qy + 16 + 4 * j);
        }
        __m512i isum = _mm512_add_epi32(low, _mm512_srai_epi32(high, high_shift));
        __m512 d = _mm512_mul_ps(dx, _mm512_set1_ps(tile->dy[t][b]));
        acc[t] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(isum), acc[t]);
        if (mx)
            acc[t] = _mm512_fmadd_ps(*mx, _mm512_set1_ps(tile->sy[t][b]), acc[t]);
    }
}

/* Q4_0 and Q4_1 (with_min), whose nibble words follow the scales. */
ALWAYS_INLINE void group_4bit(size_t n_blocks, const uint8_t *group, const packed_tile *tile,
                              size_t n_tok, bool prefetch, bool with_min, __m512 *acc)
{
    const __m512i low4 = _mm512_set1_epi8(0x0f), high4 = _mm512_set1_epi8((char)0xf0);
    size_t block_bytes = PACK_ROWS * (with_min ? sizeof(block_q4_1) : sizeof(block_q4_0));
    const uint8_t *words = group + SCALE_BYTES * (with_min ? 2 : 1);
    for (size_t b = 0; b < n_blocks; b++, group += block_bytes, words += block_bytes) {
        if (prefetch)
            x86_prefetch_ahead(group, block_bytes, X86_PREFETCH_BYTES);
        __m512 dx = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)group));
        __m512 mx = _mm512_setzero_ps();
        if (with_min)
            mx = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(group + SCALE_BYTES)));
        __m512i q[8];
        for (int j = 0; j < 4; j++) {
            __m512i bytes = _mm512_loadu_si512(words + 64 * j);
            q[j] = _mm512_and_si512(bytes, low4);
            q[4 + j] = _mm512_and_si512(bytes, high4); /* 16 * q, one op instead of two */
        }
        packed_block_step(q, dx, with_min ? &mx : NULL, tile, b, 4, n_tok, acc);
    }
}

/* Q5_0 and Q5_1 (quant_pack_q5_0 / _q5_1): bit j of each byte of the high-bit word is bit 4
 * of nibble vector j's byte (x86_add_fifth_bit), making the 5-bit values (Q5_0's q + 16); no
 * half needs shifting back. */
ALWAYS_INLINE void group_5bit(size_t n_blocks, const uint8_t *group, const packed_tile *tile,
                              size_t n_tok, bool prefetch, bool with_min, __m512 *acc)
{
    const __m512i low4 = _mm512_set1_epi8(0x0f);
    size_t block_bytes = PACK_ROWS * (with_min ? sizeof(block_q5_1) : sizeof(block_q5_0));
    const uint8_t *words = group + SCALE_BYTES * (with_min ? 2 : 1);
    for (size_t b = 0; b < n_blocks; b++, group += block_bytes, words += block_bytes) {
        if (prefetch)
            x86_prefetch_ahead(group, block_bytes, X86_PREFETCH_BYTES);
        __m512 dx = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)group));
        __m512 mx = _mm512_setzero_ps();
        if (with_min)
            mx = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(group + SCALE_BYTES)));
        __m512i high_bits = _mm512_loadu_si512(words);
        __m512i q[8];
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++) {
            __m512i bytes = _mm512_loadu_si512(words + 64 * (j + 1));
            q[j] = x86_add_fifth_bit(_mm512_and_si512(bytes, low4), high_bits, j);
            q[4 + j] = x86_add_fifth_bit(_mm512_and_si512(_mm512_srli_epi16(bytes, 4), low4),
                                         high_bits, 4 + j);
        }
        packed_block_step(q, dx, with_min ? &mx : NULL, tile, b, 0, n_tok, acc);
    }
}

ALWAYS_INLINE void group_q4_0(size_t n_blocks, const uint8_t *group, const packed_tile *tile,
                              size_t n_tok, bool prefetch, __m512 *acc)
{
    group_4bit(n_blocks, group, tile, n_tok, prefetch, false, acc);
}

ALWAYS_INLINE void group_q4_1(size_t n_blocks, const uint8_t *group, const packed_tile *tile,
                              size_t n_tok, bool prefetch, __m512 *acc)
{
    group_4bit(n_blocks, group, tile, n_tok, prefetch, true, acc);
}

ALWAYS_INLINE void group_q5_0(size_t n_blocks, const uint8_t *group, const packed_tile *tile,
                              size_t n_tok, bool prefetch, __m512 *acc)
{
    group_5bit(n_blocks, group, tile, n_tok, prefetch, false, acc);
}

ALWAYS_INLINE void group_q5_1(size_t n_blocks, const uint8_t *group, const packed_tile *tile,
                              size_t n_tok, bool prefetch, __m512 *acc)
{
    group_5bit(n_blocks, group, tile, n_tok, prefetch, true, acc);
}

ALWAYS_INLINE void group_q8_0(size_t n_blocks, const uint8_t *group, const packed_tile *tile,
                              size_t n_tok, bool prefetch, __m512 *acc)
{
    for (size_t b = 0; b < n_blocks; b++, group += PACK_ROWS * sizeof(block_q8_0)) {
        if (prefetch)
            x86_prefetch_ahead(group, PACK_ROWS * sizeof(block_q8_0), X86_PREFETCH_BYTES);
        __m512 dx = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)group));
        __m512i q[8];
        for (int j = 0; j < 8; j++)
            q[j] = _mm512_loadu_si512(group + SCALE_BYTES + 64 * j);
        packed_block_step(q, dx, NULL, tile, b, 0, n_tok, acc);
    }
}

/* The 32-element types as group_pair reads them. */
enum pair_kind { PAIR_Q8_0, PAIR_4BIT, PAIR_5BIT };

/*
 * Word j (0..3) of half `half` of a packed block (at `group`) as unsigned quants: elements
 * 0..15 of each row, then 16..31. Q4_0 / Q4_1 shift their high nibbles down first, Q5_0 /
 * Q5_1 take bit 4 from their high-bit word as group_5bit does, Q8_0 is read as it is.
 */
ALWAYS_INLINE __m512i pair_quants(enum pair_kind kind, bool with_min, const uint8_t *group,
                                  int half, int j)
{
    const __m512i low4 = _mm512_set1_epi8(0x0f);
    const uint8_t *words = group + SCALE_BYTES * (with_min ? 2 : 1);
    if (kind == PAIR_Q8_0)
        return _mm512_loadu_si512(words + 64 * (4 * half + j));
    if (kind == PAIR_4BIT) {
        __m512i bytes = _mm512_loadu_si512(words + 64 * j);
        return _mm512_and_si512(half ? _mm512_srli_epi16(bytes, 4) : bytes, low4);
    }
    __m512i high_bits = _mm512_loadu_si512(words);
    __m512i bytes = _mm512_loadu_si512(words + 64 * (j + 1));
    __m512i nibble = _mm512_and_si512(half ? _mm512_srli_epi16(bytes, 4) : bytes, low4);
    return x86_add_fifth_bit(nibble, high_bits, 4 * half + j);
}

/*
 * Two groups (32 rows) of a 32-element type against a tile of TILE_TOKENS tokens, for
 * prompts: each activation word broadcast once serves both groups' products, half a block's
 * words at a time (8 quant vectors, 8 integer sums, 8 float sums in registers). A token's
 * integer sum per block starts at its start value (none with mins) and takes all 8 words,
 * the integer packed_block_step makes (the 4-bit types' high nibbles shifted down before
 * the products rather than their sum after), and the float steps are its own, so the bits
 * are the same. With one group per broadcast the tile issued a load per product and ran
 * well short of what its vector ports allow; two halve the loads.
 */
ALWAYS_INLINE void group_pair(enum pair_kind kind, bool with_min, size_t block_bytes,
                              size_t n_blocks, const uint8_t *group, size_t group_bytes,
                              const packed_tile *tile, bool prefetch, __m512 acc[2][TILE_TOKENS])
{
    const uint8_t *other = group + group_bytes;
    for (size_t b = 0; b < n_blocks; b++, group += block_bytes, other += block_bytes) {
        if (prefetch) {
            x86_prefetch_ahead(group, block_bytes, X86_PREFETCH_BYTES);
            x86_prefetch_ahead(other, block_bytes, X86_PREFETCH_BYTES);
        }
        __m512 dx[2] = {_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)group)),
                        _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)other))};
        __m512i isum[2][TILE_TOKENS];
        for (size_t t = 0; t < TILE_TOKENS; t++)
            isum[0][t] = isum[1][t] =
                with_min ? _mm512_setzero_si512() : _mm512_set1_epi32(tile->start[t][b]);
        for (int half = 0; half < 2; half++) {
            __m512i q[2][4];
            for (int j = 0; j < 4; j++) {
                q[0][j] = pair_quants(kind, with_min, group, half, j);
                q[1][j] = pair_quants(kind, with_min, other, half, j);
            }
            for (size_t t = 0; t < TILE_TOKENS; t++) {
                const int8_t *qy = (with_min ? ((const block_q8_1 *)tile->y[t])[b].qs
                                             : ((const block_q8_0 *)tile->y[t])[b].qs) +
                                   16 * half;
                for (int j = 0; j < 4; j++) {
                    int32_t word;
                    memcpy(&word, qy + 4 * j, sizeof word);
                    __m512i a = _mm512_set1_epi32(word);
                    isum[0][t] = _mm512_dpbusd_epi32(isum[0][t], q[0][j], a);
                    isum[1][t] = _mm512_dpbusd_epi32(isum[1][t], q[1][j], a);
                }
            }
        }
        __m512 mx[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
        if (with_min) {
            mx[0] = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(group + SCALE_BYTES)));
            mx[1] = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(other + SCALE_BYTES)));
        }
        for (size_t t = 0; t < TILE_TOKENS; t++) {
            __m512 dy = _mm512_set1_ps(tile->dy[t][b]);
            for (int k = 0; k < 2; k++) {
                acc[k][t] = _mm512_fmadd_ps(_mm512_mul_ps(dx[k], dy),
                                            _mm512_cvtepi32_ps(isum[k][t]), acc[k][t]);
                if (with_min)
                    acc[k][t] = _mm512_fmadd_ps(mx[k], _mm512_set1_ps(tile->sy[t][b]), acc[k][t]);
            }
        }
    }
}

#define DEFINE_GROUP_PAIR(name, kind, with_min, block_type)                                   \
    ALWAYS_INLINE void name(size_t n_blocks, const uint8_t *group, size_t group_bytes,       \
                            const packed_tile *tile, bool prefetch, __m512 acc[2][TILE_TOKENS]) \
    {                                                                                         \
        group_pair(kind, with_min, PACK_ROWS * sizeof(block_type), n_blocks, group,           \
                   group_bytes, tile, prefetch, acc);                                         \
    }

DEFINE_GROUP_PAIR(group_pair_q4_0, PAIR_4BIT, false, block_q4_0)
DEFINE_GROUP_PAIR(group_pair_q4_1, PAIR_4BIT, true, block_q4_1)
DEFINE_GROUP_PAIR(group_pair_q5_0, PAIR_5BIT, false, block_q5_0)
DEFINE_GROUP_PAIR(group_pair_q5_1, PAIR_5BIT, true, block_q5_1)
DEFINE_GROUP_PAIR(group_pair_q8_0, PAIR_Q8_0, false, block_q8_0)

/* The tile width is a compile-time constant in each call, so the token loops unroll. A tile
 * of several tokens streaming from memory prefetches: it computes longer per byte, and the
 * hardware prefetchers alone fall behind (PACKED_TILE_SWITCH says when it does). */
#define PACKED_TILE_CALL(group_fn, n_tok, prefetch)                                           \
    do {                                                                                      \
        __m512 acc[TILE_TOKENS];                                                              \
        for (size_t k = 0; k < (n_tok); k++)                                                  \
            acc[k] = _mm512_setzero_ps();                                                     \
        group_fn(n_blocks, group, &tile, (n_tok), (prefetch), acc);                           \
        for (size_t k = 0; k < (n_tok); k++)                                                  \
            _mm512_storeu_ps(out + k * ldy, acc[k]);                                          \
    } while (0)

/* start_array: which start values (quant_prepare_packed_act_avx2): 0 Q4_0, 1 Q8_0, 2 Q5_0;
 * unused by Q4_1 and Q5_1, whose tiles read sy. A prompt's full tiles (more tokens in the
 * call than a tile) take two groups at a time while two are left (pair_fn, group_pair). */
#define DEFINE_PACKED_MATMUL(name, group_fn, pair_fn, block_type, start_array)                \
    void name(size_t n, const void *packed, size_t n_groups, const void *act,                 \
              size_t act_row_bytes, const void *act_sums, size_t n_tokens, float *y,          \
              size_t ldy)                                                                     \
    {                                                                                         \
        size_t n_blocks = n / QUANT_QK32;                                                     \
        size_t group_bytes = PACK_ROWS * n_blocks * sizeof(block_type);                       \
        size_t sums_bytes = quant_packed_sums_bytes(n);                                       \
        bool prefetch_one = cpu_prefetch_single_stream();                                     \
        bool refetch = n_tokens > TILE_TOKENS && cpu_outgrows_l2(n_groups * group_bytes);     \
        for (size_t t = 0; t < n_tokens; t += TILE_TOKENS) {                                  \
            size_t n_tok = n_tokens - t < TILE_TOKENS ? n_tokens - t : TILE_TOKENS;           \
            bool prefetch_tile = t == 0 || refetch;                                           \
            packed_tile tile;                                                                 \
            for (size_t k = 0; k < n_tok; k++) {                                              \
                tile.y[k] = (const char *)act + (t + k) * act_row_bytes;                      \
                tile.dy[k] = (const float *)((const char *)act_sums + (t + k) * sums_bytes);  \
                tile.start[k] = (const int32_t *)(tile.dy[k] + n_blocks) + start_array * n_blocks; \
                tile.sy[k] = tile.dy[k] + n_blocks;                                           \
            }                                                                                 \
            for (size_t g = 0; g < n_groups; g++) {                                           \
                const uint8_t *group = (const uint8_t *)packed + g * group_bytes;             \
                float *out = y + t * ldy + g * PACK_ROWS;                                     \
                if (n_tok == TILE_TOKENS && n_tokens > TILE_TOKENS && g + 1 < n_groups) {    \
                    __m512 acc[2][TILE_TOKENS];                                               \
                    for (size_t k = 0; k < TILE_TOKENS; k++)                                  \
                        acc[0][k] = acc[1][k] = _mm512_setzero_ps();                          \
                    pair_fn(n_blocks, group, group_bytes, &tile, prefetch_tile, acc);         \
                    for (size_t k = 0; k < TILE_TOKENS; k++) {                                \
                        _mm512_storeu_ps(out + k * ldy, acc[0][k]);                           \
                        _mm512_storeu_ps(out + k * ldy + PACK_ROWS, acc[1][k]);               \
                    }                                                                         \
                    g++;                                                                      \
                    continue;                                                                 \
                }                                                                             \
                PACKED_TILE_SWITCH(group_fn, n_tok, prefetch_tile, prefetch_one);             \
            }                                                                                 \
        }                                                                                     \
    }

DEFINE_PACKED_MATMUL(quant_matmul_packed_q4_0_avx512, group_q4_0, group_pair_q4_0, block_q4_0, 0)
DEFINE_PACKED_MATMUL(quant_matmul_packed_q8_0_avx512, group_q8_0, group_pair_q8_0, block_q8_0, 1)
DEFINE_PACKED_MATMUL(quant_matmul_packed_q5_0_avx512, group_q5_0, group_pair_q5_0, block_q5_0, 2)
DEFINE_PACKED_MATMUL(quant_matmul_packed_q4_1_avx512, group_q4_1, group_pair_q4_1, block_q4_1, 0)
DEFINE_PACKED_MATMUL(quant_matmul_packed_q5_1_avx512, group_q5_1, group_pair_q5_1, block_q5_1, 0)

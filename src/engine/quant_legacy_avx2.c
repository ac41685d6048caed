/*
 * AVX2 + FMA + F16C dot products of F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0 rows
 * with their partner activations, packed matrix kernels for the 32-element types that give
 * each result the bits of its dot, and the Q8_0 activation quantizer. The integer sums are
 * exact; the float sums run in eight f32 lanes with FMA (the 32-element types: one FMA per
 * block, and one more for a min, in order), so results differ from the scalar order by
 * rounding only.
 */
#include <stdbool.h>
#include <string.h>

#include "cpu.h"
#include "quant_legacy.h"
#include "quant_x86.h"

/* ---- float types ---------------------------------------------------------------------- */

static inline __m256 load_f16x8(const uint16_t *p)
{
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}

static inline __m256 load_bf16x8(const uint16_t *p)
{
    __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
}

void quant_dequantize_f16_avx2(const void *blocks, float *out, size_t n)
{
    const uint16_t *h = blocks;
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(out + i, load_f16x8(h + i));
    for (; i < n; i++)
        out[i] = x86_half(h[i]);
}

/* F16C rounds to nearest even as quant_f32_to_f16 does; only NaN differs (F16C keeps part of
 * the payload, ggml does not), so groups holding one take the scalar path. Attention rounds
 * every probability to F16, a visible share of a long-context token done one at a time. */
void quant_quantize_f16_avx2(const float *in, void *blocks, size_t n)
{
    uint16_t *h = blocks;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 x = _mm256_loadu_ps(in + i);
        __m256 nan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
        if (_mm256_testz_ps(nan, nan)) {
            _mm_storeu_si128((__m128i *)(h + i),
                             _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
            continue;
        }
        for (size_t k = i; k < i + 8; k++)
            h[k] = quant_f32_to_f16(in[k]);
    }
    for (; i < n; i++)
        h[i] = quant_f32_to_f16(in[i]);
}


/* Eight elements at p as f32. */
static inline __attribute__((always_inline)) __m256 load_float8(enum x86_float_kind kind,
                                                                const void *p)
{
    switch (kind) {
    case X86_F16: return load_f16x8(p);
    case X86_BF16: return load_bf16x8(p);
    default: return _mm256_loadu_ps(p);
    }
}

/*
 * Tiles of 4 rows (the packed layout's, quant_legacy.h) by 2 tokens: 8 accumulators and 4
 * weight vectors of the 16 registers. Chunks are 16 elements, as in that layout.
 */
enum {
    FLOAT_TILE_ROWS = QUANT_FLOAT_TILE_ROWS,
    FLOAT_TILE_TOKENS = 2,
    FLOAT_CHUNK = QUANT_FLOAT_CHUNK
};

/* A partial last chunk of len elements, zero-padded to a whole one (AVX2 has no masked
 * 16-bit loads). */
static inline __attribute__((always_inline)) const void *
padded_chunk(enum x86_float_kind kind, const char *at, size_t len, float pad[FLOAT_CHUNK])
{
    memset(pad, 0, FLOAT_CHUNK * sizeof(float));
    memcpy(pad, at, len * x86_float_bytes(kind));
    return pad;
}

/*
 * y[t * ldy + r] for n_rows (<= 4) weight rows times n_tok (<= 2) activation rows, each pair
 * in one accumulator of 8 lanes: two FMAs per 16-element chunk in order (the last chunk
 * zero-padded), then x86_hsum_ps. Every pair takes the same steps whatever the tile and
 * layout, and the dot is the tile of one row and one token, so a result does not depend on
 * its batch.
 */
static inline __attribute__((always_inline)) void
float_tile(enum x86_float_kind kind, bool interleaved, size_t n, const char *w, size_t w_row_bytes,
           size_t n_rows, const char *act, size_t act_row_bytes, size_t n_tok, float *y,
           size_t ldy)
{
    __m256 acc[FLOAT_TILE_ROWS][FLOAT_TILE_TOKENS];
    for (size_t r = 0; r < n_rows; r++)
        for (size_t t = 0; t < n_tok; t++)
            acc[r][t] = _mm256_setzero_ps();
    for (size_t i = 0; i < n; i += FLOAT_CHUNK) {
        size_t len = n - i < FLOAT_CHUNK ? n - i : FLOAT_CHUNK;
        float w_pad[FLOAT_TILE_ROWS][FLOAT_CHUNK], a_pad[FLOAT_TILE_TOKENS][FLOAT_CHUNK];
        const void *w_at[FLOAT_TILE_ROWS], *a_at[FLOAT_TILE_TOKENS];
        for (size_t r = 0; r < n_rows; r++) {
            w_at[r] = x86_tile_row_at(kind, interleaved, w, w_row_bytes, r, i, len);
            if (len < FLOAT_CHUNK)
                w_at[r] = padded_chunk(kind, w_at[r], len, w_pad[r]);
        }
        for (size_t t = 0; t < n_tok; t++) {
            a_at[t] = act + t * act_row_bytes + i * x86_float_bytes(kind);
            if (len < FLOAT_CHUNK)
                a_at[t] = padded_chunk(kind, a_at[t], len, a_pad[t]);
        }
        for (size_t half = 0; half < 2; half++) {
            size_t offset = 8 * half * x86_float_bytes(kind);
            __m256 wv[FLOAT_TILE_ROWS];
            for (size_t r = 0; r < n_rows; r++)
                wv[r] = load_float8(kind, (const char *)w_at[r] + offset);
            for (size_t t = 0; t < n_tok; t++) {
                __m256 av = load_float8(kind, (const char *)a_at[t] + offset);
                for (size_t r = 0; r < n_rows; r++)
                    acc[r][t] = _mm256_fmadd_ps(wv[r], av, acc[r][t]);
            }
        }
    }
    for (size_t r = 0; r < n_rows; r++)
        for (size_t t = 0; t < n_tok; t++)
            y[t * ldy + r] = x86_hsum_ps(acc[r][t]);
}

/* One tile with its sizes as constants in each call, so that its loops unroll. */
#define FLOAT_TILE_CASE(interleaved, rows, toks)                                             \
    case (rows - 1) * FLOAT_TILE_TOKENS + toks - 1:                                          \
        float_tile(kind, interleaved, n, w, w_row_bytes, rows, act, act_row_bytes, toks, y,  \
                   ldy);                                                                     \
        break;

static inline __attribute__((always_inline)) void
float_tile_any(enum x86_float_kind kind, bool interleaved, size_t n, const char *w,
               size_t w_row_bytes, size_t n_rows, const char *act, size_t act_row_bytes,
               size_t n_tok, float *y, size_t ldy)
{
    switch ((n_rows - 1) * FLOAT_TILE_TOKENS + n_tok - 1) {
        FLOAT_TILE_CASE(interleaved, 1, 1)
        FLOAT_TILE_CASE(interleaved, 1, 2)
        FLOAT_TILE_CASE(interleaved, 2, 1)
        FLOAT_TILE_CASE(interleaved, 2, 2)
        FLOAT_TILE_CASE(interleaved, 3, 1)
        FLOAT_TILE_CASE(interleaved, 3, 2)
        FLOAT_TILE_CASE(interleaved, 4, 1)
        FLOAT_TILE_CASE(interleaved, 4, 2)
    default: break;
    }
}

/* Every tile of a matrix: row-major rows, or packed ones (whole tiles, tile_bytes apart). */
static inline __attribute__((always_inline)) void
float_matmul(enum x86_float_kind kind, bool interleaved, size_t n, const void *w,
             size_t w_row_bytes, size_t n_rows, const void *act, size_t act_row_bytes,
             size_t n_tokens, float *y, size_t ldy)
{
    size_t tile_bytes = interleaved ? FLOAT_TILE_ROWS * n * x86_float_bytes(kind)
                                    : FLOAT_TILE_ROWS * w_row_bytes;
    for (size_t t = 0; t < n_tokens; t += FLOAT_TILE_TOKENS) {
        size_t n_tok = n_tokens - t < FLOAT_TILE_TOKENS ? n_tokens - t : FLOAT_TILE_TOKENS;
        for (size_t r = 0; r < n_rows; r += FLOAT_TILE_ROWS) {
            size_t rows = n_rows - r < FLOAT_TILE_ROWS ? n_rows - r : FLOAT_TILE_ROWS;
            float_tile_any(kind, interleaved, n, (const char *)w + r / FLOAT_TILE_ROWS * tile_bytes,
                           w_row_bytes, rows, (const char *)act + t * act_row_bytes,
                           act_row_bytes, n_tok, y + t * ldy + r, ldy);
        }
    }
}

/*
 * Prompts of F16 and BF16 rows: the activations converted to f32 once per group of rows
 * instead of once per tile. float_tile converts 4 weight and 2 activation vectors for every
 * 8 FMAs; a wide tile of WIDE_TILE_ROWS x WIDE_TILE_TOKENS converts only its 2 weight vectors
 * and reads the activations as f32 from the scratch: 12 FMAs for 2 conversions and 8 loads
 * (a 4 x 3 tile, its activations read by every FMA, took 16 loads and ran slower).
 *
 * A block of WIDE_BLOCK_TOKENS tokens goes through the matrix WIDE_GROUP_ROWS rows at a time,
 * and a group through the elements WIDE_SEGMENT at a time: the block's activations of one
 * segment are converted into the scratch (zeros past n up to the next chunk), then every tile
 * of the group takes its steps of the segment, its accumulators kept in the scratch between
 * segments; each weight is read from memory once per block.
 *
 * The bits are float_tile's: each accumulator takes two FMAs per 16-element chunk in element
 * order (f32 of an f16 or bf16 value is exact, wherever it is made), the last chunk as
 * zero-padded weights times zeros past n, then x86_hsum_ps.
 */
enum {
    WIDE_TILE_ROWS = 2,
    WIDE_TILE_TOKENS = 6, /* 12 accumulators, 2 weight vectors and an activation: 15 of 16 */
    WIDE_BLOCK_TOKENS = 24,
    WIDE_GROUP_ROWS = 64,
    WIDE_SEGMENT = 256,
    /* fewer tokens take float_matmul, whose 4 x 2 tile converts as it goes */
    WIDE_MIN_TOKENS = 4,
};
_Static_assert(WIDE_GROUP_ROWS % FLOAT_TILE_ROWS == 0 && WIDE_SEGMENT % FLOAT_CHUNK == 0,
               "a group holds whole packed tiles, a segment whole chunks");

typedef struct wide_scratch {
    float act[WIDE_BLOCK_TOKENS][WIDE_SEGMENT];
    __m256 acc[WIDE_GROUP_ROWS][WIDE_BLOCK_TOKENS];
} wide_scratch;

/* The two FMA steps of one 16-element chunk (weights of row r at w_at[r]) for a wide tile. */
static inline __attribute__((always_inline)) void
wide_chunk(enum x86_float_kind kind, const char *const w_at[WIDE_TILE_ROWS], size_t n_rows,
           const float *act, size_t n_tok, __m256 acc[WIDE_TILE_ROWS][WIDE_TILE_TOKENS])
{
    for (size_t half = 0; half < 2; half++) {
        __m256 wv[WIDE_TILE_ROWS];
#pragma GCC unroll 4
        for (size_t r = 0; r < n_rows; r++)
            wv[r] = load_float8(kind, w_at[r] + 8 * half * x86_float_bytes(kind));
#pragma GCC unroll 6
        for (size_t t = 0; t < n_tok; t++) {
            __m256 av = _mm256_load_ps(act + t * WIDE_SEGMENT + 8 * half);
#pragma GCC unroll 4
            for (size_t r = 0; r < n_rows; r++)
                acc[r][t] = _mm256_fmadd_ps(wv[r], av, acc[r][t]);
        }
    }
}

/*
 * Rows [r0, r0 + n_rows) of the weights times the n_tok tokens of act (rows WIDE_SEGMENT
 * floats apart, the segment [i0, i0 + len) converted, zeros past n): the accumulators come
 * from acc_rows[r][t0 + t] (zeros in the first segment) and go back there, or in the last
 * segment their sums go to y[t * ldy + r].
 */
static inline __attribute__((always_inline)) void
wide_tile(enum x86_float_kind kind, bool interleaved, size_t n, const char *w, size_t w_row_bytes,
          size_t r0, size_t n_rows, size_t i0, size_t len, const float *act, size_t n_tok,
          __m256 (*acc_rows)[WIDE_BLOCK_TOKENS], size_t t0, float *y, size_t ldy)
{
    __m256 acc[WIDE_TILE_ROWS][WIDE_TILE_TOKENS];
#pragma GCC unroll 4
    for (size_t r = 0; r < n_rows; r++)
#pragma GCC unroll 6
        for (size_t t = 0; t < n_tok; t++)
            acc[r][t] = i0 == 0 ? _mm256_setzero_ps() : acc_rows[r][t0 + t];
    size_t elem = x86_float_bytes(kind), whole_end = len - len % FLOAT_CHUNK;
    /* whole chunks follow each other stride bytes apart in a row, in either layout */
    size_t stride = (interleaved ? FLOAT_TILE_ROWS : 1) * FLOAT_CHUNK * elem;
    const char *tile[WIDE_TILE_ROWS], *w_at[WIDE_TILE_ROWS];
    size_t tile_row[WIDE_TILE_ROWS];
#pragma GCC unroll 4
    for (size_t r = 0; r < n_rows; r++) {
        /* the packed tile that holds the row, and the row in it */
        size_t row = r0 + r;
        tile[r] = interleaved ? w + row / FLOAT_TILE_ROWS * FLOAT_TILE_ROWS * n * elem : w;
        tile_row[r] = interleaved ? row % FLOAT_TILE_ROWS : row;
        w_at[r] = x86_tile_row_at(kind, interleaved, tile[r], w_row_bytes, tile_row[r], i0,
                                  FLOAT_CHUNK);
    }
    for (size_t i = 0; i < whole_end; i += FLOAT_CHUNK) {
        wide_chunk(kind, w_at, n_rows, act + i, n_tok, acc);
#pragma GCC unroll 4
        for (size_t r = 0; r < n_rows; r++)
            w_at[r] += stride;
    }
    if (whole_end < len) { /* the partial chunk at the end of a row, zero-padded */
        float w_pad[WIDE_TILE_ROWS][FLOAT_CHUNK];
        size_t chunk = len - whole_end;
#pragma GCC unroll 4
        for (size_t r = 0; r < n_rows; r++)
            w_at[r] = padded_chunk(kind,
                                   x86_tile_row_at(kind, interleaved, tile[r], w_row_bytes,
                                                   tile_row[r], i0 + whole_end, chunk),
                                   chunk, w_pad[r]);
        wide_chunk(kind, w_at, n_rows, act + whole_end, n_tok, acc);
    }
    bool last = i0 + len == n;
#pragma GCC unroll 4
    for (size_t r = 0; r < n_rows; r++)
#pragma GCC unroll 6
        for (size_t t = 0; t < n_tok; t++) {
            if (last)
                y[t * ldy + r] = x86_hsum_ps(acc[r][t]);
            else
                acc_rows[r][t0 + t] = acc[r][t];
        }
}

/* Elements [i0, i0 + len) of n_tok activation rows as f32 rows of the scratch, zeros after
 * the last element up to the next chunk. */
static inline __attribute__((always_inline)) void
wide_convert_act(enum x86_float_kind kind, const char *act, size_t act_row_bytes, size_t n_tok,
                 size_t i0, size_t len, float (*out)[WIDE_SEGMENT])
{
    size_t elem = x86_float_bytes(kind);
    for (size_t t = 0; t < n_tok; t++)
        for (size_t i = 0; i < len; i += FLOAT_CHUNK) {
            size_t chunk = len - i < FLOAT_CHUNK ? len - i : FLOAT_CHUNK;
            float pad[FLOAT_CHUNK];
            const char *at = act + t * act_row_bytes + (i0 + i) * elem;
            if (chunk < FLOAT_CHUNK)
                at = padded_chunk(kind, at, chunk, pad);
            _mm256_store_ps(out[t] + i, load_float8(kind, at));
            _mm256_store_ps(out[t] + i + 8, load_float8(kind, at + 8 * elem));
        }
}

/* A wide tile with its sizes as constants in each call, so that its loops unroll. */
#define WIDE_CASE(rows, toks)                                                                 \
    case (rows - 1) * WIDE_TILE_TOKENS + toks - 1:                                            \
        wide_tile(kind, interleaved, n, w, w_row_bytes, r, rows, i0, len, s.act[t], toks,     \
                  s.acc + (r - g), t, y + (block + t) * ldy + r, ldy);                        \
        break;
#define WIDE_CASES(rows)                                                                      \
    WIDE_CASE(rows, 1) WIDE_CASE(rows, 2) WIDE_CASE(rows, 3) WIDE_CASE(rows, 4)               \
    WIDE_CASE(rows, 5) WIDE_CASE(rows, 6)

/* float_matmul's product for F16 / BF16 with WIDE_MIN_TOKENS tokens or more (see above). */
static inline __attribute__((always_inline)) void
wide_matmul(enum x86_float_kind kind, bool interleaved, size_t n, const void *w,
            size_t w_row_bytes, size_t n_rows, const void *activations, size_t act_row_bytes,
            size_t n_tokens, float *y, size_t ldy)
{
    wide_scratch s;
    for (size_t block = 0; block < n_tokens; block += WIDE_BLOCK_TOKENS) {
        size_t n_block = n_tokens - block < WIDE_BLOCK_TOKENS ? n_tokens - block : WIDE_BLOCK_TOKENS;
        const char *act = (const char *)activations + block * act_row_bytes;
        for (size_t g = 0; g < n_rows; g += WIDE_GROUP_ROWS) {
            size_t g_end = n_rows - g < WIDE_GROUP_ROWS ? n_rows : g + WIDE_GROUP_ROWS;
            for (size_t i0 = 0; i0 < n; i0 += WIDE_SEGMENT) {
                size_t len = n - i0 < WIDE_SEGMENT ? n - i0 : WIDE_SEGMENT;
                wide_convert_act(kind, act, act_row_bytes, n_block, i0, len, s.act);
                for (size_t t = 0, n_tok; t < n_block; t += n_tok) {
                    n_tok = n_block - t < WIDE_TILE_TOKENS ? n_block - t : WIDE_TILE_TOKENS;
                    for (size_t r = g, rows; r < g_end; r += rows) {
                        rows = g_end - r < WIDE_TILE_ROWS ? g_end - r : WIDE_TILE_ROWS;
                        switch ((rows - 1) * WIDE_TILE_TOKENS + n_tok - 1) {
                            WIDE_CASES(1)
                            WIDE_CASES(2)
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
    float quant_dot_##type##_avx2(size_t n, const void *w, const void *a)                     \
    {                                                                                         \
        float y;                                                                              \
        float_tile(kind, false, n, w, 0, 1, a, 0, 1, &y, 0);                                  \
        return y;                                                                             \
    }                                                                                         \
    void quant_matmul_##type##_avx2(size_t n, const void *w, size_t w_row_bytes,              \
                                    size_t n_rows, const void *act, size_t act_row_bytes,     \
                                    size_t n_tokens, float *y, size_t ldy)                    \
    {                                                                                         \
        if (kind != X86_F32 && n_tokens >= WIDE_MIN_TOKENS)                                   \
            wide_matmul(kind, false, n, w, w_row_bytes, n_rows, act, act_row_bytes, n_tokens, \
                        y, ldy);                                                              \
        else                                                                                  \
            float_matmul(kind, false, n, w, w_row_bytes, n_rows, act, act_row_bytes,          \
                         n_tokens, y, ldy);                                                   \
    }                                                                                         \
    void quant_matmul_packed_##type##_avx2(size_t n, const void *packed, size_t n_groups,     \
                                           const void *act, size_t act_row_bytes,             \
                                           const void *sums, size_t n_tokens, float *y,       \
                                           size_t ldy)                                        \
    {                                                                                         \
        (void)sums;                                                                           \
        if (kind != X86_F32 && n_tokens >= WIDE_MIN_TOKENS)                                   \
            wide_matmul(kind, true, n, packed, 0, n_groups * QUANT_PACK_ROWS, act,            \
                        act_row_bytes, n_tokens, y, ldy);                                     \
        else                                                                                  \
            float_matmul(kind, true, n, packed, 0, n_groups * QUANT_PACK_ROWS, act,           \
                         act_row_bytes, n_tokens, y, ldy);                                    \
    }

DEFINE_FLOAT_KERNELS(f32, X86_F32)
DEFINE_FLOAT_KERNELS(f16, X86_F16)
DEFINE_FLOAT_KERNELS(bf16, X86_BF16)

/* ---- 32-element block types ----------------------------------------------------------- */

/* The integer sums of one block, weight quants times activation quants, in 8 lanes. */
static inline __m256i block_sums_q4_0(const block_q4_0 *x, const block_q8_0 *y)
{
    __m256i qx = _mm256_sub_epi8(x86_unpack_nibbles(x->qs), _mm256_set1_epi8(8));
    return x86_dot_i8(qx, _mm256_loadu_si256((const __m256i *)y->qs));
}

static inline __m256i block_sums_q4_1(const block_q4_1 *x, const block_q8_1 *y)
{
    return x86_dot_u8_i8(x86_unpack_nibbles(x->qs), _mm256_loadu_si256((const __m256i *)y->qs));
}

/* q - 16: the nibble where bit 4 is set, nibble - 16 where it is not. */
static inline __m256i block_sums_q5_0(const block_q5_0 *x, const block_q8_0 *y)
{
    __m256i minus_16 = _mm256_andnot_si256(x86_high_bit_mask(x->qh), _mm256_set1_epi8(16));
    __m256i qx = _mm256_sub_epi8(x86_unpack_nibbles(x->qs), minus_16);
    return x86_dot_i8(qx, _mm256_loadu_si256((const __m256i *)y->qs));
}

static inline __m256i block_sums_q5_1(const block_q5_1 *x, const block_q8_1 *y)
{
    __m256i high = _mm256_and_si256(x86_high_bit_mask(x->qh), _mm256_set1_epi8(16));
    __m256i qx = _mm256_or_si256(x86_unpack_nibbles(x->qs), high);
    return x86_dot_u8_i8(qx, _mm256_loadu_si256((const __m256i *)y->qs));
}

static inline __m256i block_sums_q8_0(const block_q8_0 *x, const block_q8_0 *y)
{
    return x86_dot_i8(_mm256_loadu_si256((const __m256i *)x->qs),
                      _mm256_loadu_si256((const __m256i *)y->qs));
}

/*
 * The 32-element types add their blocks in order into one f32 sum, acc = fma(f32(dx * dy),
 * isum, acc), each block's isum exact, then for Q4_1 / Q5_1 acc = fma(m, s, acc): the order
 * of the packed kernels below, where each lane follows one row, and of the AVX-512 levels.
 * Four blocks' lane sums are reduced together.
 */
#define SEQUENTIAL_DOT_BODY(block_sums, min_term)                                           \
    size_t n_blocks = n / QUANT_QK32, i = 0;                                                \
    float acc = 0.0f;                                                                       \
    for (; i + 4 <= n_blocks; i += 4) {                                                     \
        __m256i s[4];                                                                       \
        for (int k = 0; k < 4; k++)                                                         \
            s[k] = block_sums(x + i + k, y + i + k);                                        \
        __m256i quads = _mm256_hadd_epi32(_mm256_hadd_epi32(s[0], s[1]),                    \
                                          _mm256_hadd_epi32(s[2], s[3]));                   \
        int32_t isum[4];                                                                    \
        _mm_storeu_si128((__m128i *)isum, _mm_add_epi32(_mm256_castsi256_si128(quads),      \
                                                        _mm256_extracti128_si256(quads, 1))); \
        for (int k = 0; k < 4; k++) {                                                       \
            acc = x86_fused_add(x86_half(x[i + k].d) * x86_half(y[i + k].d), isum[k], acc); \
            acc = min_term(x[i + k], y[i + k], acc);                                        \
        }                                                                                   \
    }                                                                                       \
    for (; i < n_blocks; i++) {                                                             \
        __m256i s = block_sums(x + i, y + i);                                               \
        acc = x86_fused_add(x86_half(x[i].d) * x86_half(y[i].d), x86_hsum_epi32(s), acc);  \
        acc = min_term(x[i], y[i], acc);                                                    \
    }                                                                                       \
    return acc;

float quant_dot_q4_0_avx2(size_t n, const void *w, const void *a)
{
    const block_q4_0 *x = w;
    const block_q8_0 *y = a;
    SEQUENTIAL_DOT_BODY(block_sums_q4_0, X86_NO_MIN_TERM)
}

float quant_dot_q4_1_avx2(size_t n, const void *w, const void *a)
{
    const block_q4_1 *x = w;
    const block_q8_1 *y = a;
    SEQUENTIAL_DOT_BODY(block_sums_q4_1, X86_MIN_TERM)
}

float quant_dot_q5_0_avx2(size_t n, const void *w, const void *a)
{
    const block_q5_0 *x = w;
    const block_q8_0 *y = a;
    SEQUENTIAL_DOT_BODY(block_sums_q5_0, X86_NO_MIN_TERM)
}

float quant_dot_q5_1_avx2(size_t n, const void *w, const void *a)
{
    const block_q5_1 *x = w;
    const block_q8_1 *y = a;
    SEQUENTIAL_DOT_BODY(block_sums_q5_1, X86_MIN_TERM)
}

float quant_dot_q8_0_avx2(size_t n, const void *w, const void *a)
{
    const block_q8_0 *x = w;
    const block_q8_0 *y = a;
    SEQUENTIAL_DOT_BODY(block_sums_q8_0, X86_NO_MIN_TERM)
}

/* ---- packed Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0 ----------------------------------------------------------- */

/*
 * Rows packed by quant_pack_q4_0 (16 per group, a 64-byte vector per quant word), read as two
 * halves of 8 rows, one 256-bit lane per row. maddubs multiplies the unsigned nibbles by the
 * signed activations; its pair sums are at most 2 * 15 * 128 = 3840, so the 8 of a block
 * add up in i16 without saturating (30720) and one madd per block and token widens them.
 */
enum { PACK_ROWS = QUANT_PACK_ROWS, HALF_ROWS = PACK_ROWS / 2, SCALE_BYTES = 2 * PACK_ROWS };
enum { TILE_TOKENS = 4 };

/*
 * What the packed Q4_0 / Q8_0 / Q5_0 kernels (every level's) need of each activation block
 * besides its quants: its scale as f32, and the start value of its integer sum: the packed
 * quants are q + 8 for Q4_0, q + 128 for Q8_0 and q + 16 for Q5_0, so the sum starts at
 * -8, -128 or -16 times sum(qy), one array each (in that order), which the kernels broadcast
 * straight from memory. Computed once per row, for all the weight groups that row meets.
 */
void quant_prepare_packed_act_avx2(const void *act, size_t n, void *sums)
{
    const block_q8_0 *y = act;
    size_t n_blocks = n / QUANT_QK32;
    float *dy = sums;
    int32_t *start_q4_0 = (int32_t *)(dy + n_blocks), *start_q8_0 = start_q4_0 + n_blocks;
    int32_t *start_q5_0 = start_q8_0 + n_blocks;
    for (size_t b = 0; b < n_blocks; b++) {
        __m256i qy = _mm256_loadu_si256((const __m256i *)y[b].qs);
        int32_t sum = x86_hsum_epi32(x86_dot_u8_i8(_mm256_set1_epi8(1), qy));
        dy[b] = x86_half(y[b].d);
        start_q4_0[b] = -8 * sum;
        start_q8_0[b] = -128 * sum;
        start_q5_0[b] = -16 * sum;
    }
}

/*
 * The activation rows of a tile: Q8_0 blocks for Q4_0 / Q5_0 / Q8_0, whose sums rows hold
 * dy and then the start arrays above; Q8_1 blocks for Q4_1 / Q5_1, whose sums rows hold dy
 * and then sy (quant_legacy.c).
 */
typedef struct packed_tile {
    const void *y[TILE_TOKENS];
    const float *dy[TILE_TOKENS];
    const int32_t *start[TILE_TOKENS]; /* per block: -8, -128 or -16 times sum(qy) */
    const float *sy[TILE_TOKENS];
} packed_tile;

/* Token t's quants of block b: Q8_1 blocks when the weights have mins, else Q8_0. */
static inline const int8_t *tile_quants(const packed_tile *tile, size_t t, size_t b, bool with_min)
{
    return with_min ? ((const block_q8_1 *)tile->y[t])[b].qs : ((const block_q8_0 *)tile->y[t])[b].qs;
}

/*
 * The float step of one block for token t: acc + f32(dx * dy) * isum, and then for Q4_1 /
 * Q5_1 + m * s. Their quants are unsigned as packed, so only the other types' integer sums
 * take a start value. The dots of every level add blocks in this order.
 */
static inline __attribute__((always_inline)) __m256
block_float_step(__m256 dx, __m256 mx, __m256i isum, const packed_tile *tile, size_t t, size_t b,
                 bool with_min, __m256 acc)
{
    if (!with_min)
        isum = _mm256_add_epi32(isum, _mm256_set1_epi32(tile->start[t][b]));
    __m256 d = _mm256_mul_ps(dx, _mm256_set1_ps(tile->dy[t][b]));
    acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(isum), acc);
    if (with_min)
        acc = _mm256_fmadd_ps(mx, _mm256_set1_ps(tile->sy[t][b]), acc);
    return acc;
}

/* The scales of rows 8 * half .. 8 * half + 7: d, and m for the types that have one. */
static inline __attribute__((always_inline)) void
half_block_scales(const uint8_t *block, size_t half, bool with_min, __m256 *dx, __m256 *mx)
{
    *dx = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(block + 2 * HALF_ROWS * half)));
    *mx = with_min ? _mm256_cvtph_ps(_mm_loadu_si128(
                         (const __m128i *)(block + SCALE_BYTES + 2 * HALF_ROWS * half)))
                   : _mm256_setzero_ps();
}

/* Low and high nibbles of 4 packed quant words of 8 rows, 64 bytes apart from `at`. */
static inline void unpack_words(const uint8_t *at, __m256i lo[4], __m256i hi[4])
{
    const __m256i low4 = _mm256_set1_epi8(0x0f);
    for (int j = 0; j < 4; j++) {
        __m256i bytes = _mm256_loadu_si256((const __m256i *)(at + 64 * j));
        lo[j] = _mm256_and_si256(bytes, low4);
        hi[j] = _mm256_and_si256(_mm256_srli_epi16(bytes, 4), low4);
    }
}

/*
 * Q5_0 and Q5_1 are packed as Q4_0 / Q4_1 plus a word of high bits (quant_pack_q5_0) whose bit
 * j of byte k belongs to byte k of nibble vector j (low nibbles j < 4, high nibbles j - 4): a
 * 16-bit shift by a constant brings it to bit 4 without crossing a byte, and the quants become
 * their 5-bit values (0..31; Q5_0's q + 16). maddubs pairs are then at most 2 * 31 * 128 =
 * 7936 and four of them 31744, so each half's sum over four words is exact in i16 but two are
 * not: each widens on its own.
 */
static inline __attribute__((always_inline)) void
half_block_5bit(const uint8_t *block, size_t b, size_t half, const packed_tile *tile,
                size_t n_tok, size_t prefetch, bool with_min, __m256 *acc)
{
    x86_prefetch_slice(block, PACK_ROWS * (with_min ? sizeof(block_q5_1) : sizeof(block_q5_0)),
                       prefetch, 0, 1);
    __m256 dx, mx;
    half_block_scales(block, half, with_min, &dx, &mx);
    const uint8_t *high_word = block + SCALE_BYTES * (with_min ? 2 : 1);
    __m256i high_bits = _mm256_loadu_si256((const __m256i *)(high_word + 32 * half));
    __m256i lo[4], hi[4];
    unpack_words(high_word + 64 + 32 * half, lo, hi);
    const __m256i bit4 = _mm256_set1_epi8(0x10);
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++) {
        lo[j] = _mm256_or_si256(lo[j], _mm256_and_si256(_mm256_slli_epi16(high_bits, 4 - j), bit4));
        hi[j] = _mm256_or_si256(hi[j], _mm256_and_si256(_mm256_srli_epi16(high_bits, j), bit4));
    }
    for (size_t t = 0; t < n_tok; t++) {
        const int8_t *qy = tile_quants(tile, t, b, with_min);
        const __m256i ones = _mm256_set1_epi16(1);
        __m256i isum = _mm256_add_epi32(_mm256_madd_epi16(x86_maddubs_words4(lo, qy), ones),
                                        _mm256_madd_epi16(x86_maddubs_words4(hi, qy + 16), ones));
        acc[t] = block_float_step(dx, mx, isum, tile, t, b, with_min, acc[t]);
    }
}

/*
 * All 16 rows of a Q4_0 or Q4_1 block b (at `block`) against a tile of n_tok (1..4) tokens,
 * word by word: each activation broadcast serves both halves, and each half and token sums its
 * 8 products in i16 (at most 30720) before one madd widens them. The empty asm ties each
 * sum to its register at the end of a word: without it GCC 12 reassociated the i16 adds
 * into one tree per sum, computing every product first and spilling them to the stack.
 */
static inline __attribute__((always_inline)) void
tile_block_4bit(const uint8_t *block, size_t b, const packed_tile *tile, size_t n_tok,
                size_t prefetch, bool with_min, __m256 acc[2][TILE_TOKENS])
{
    /* 4.5 lines (Q4_1: 5) at once: asked in two slices, the stream was no faster */
    x86_prefetch_slice(block, PACK_ROWS * (with_min ? sizeof(block_q4_1) : sizeof(block_q4_0)),
                       prefetch, 0, 1);
    const __m256i low4 = _mm256_set1_epi8(0x0f);
    const uint8_t *words = block + SCALE_BYTES * (with_min ? 2 : 1);
    const int8_t *qy0 = tile_quants(tile, 0, b, with_min);
    __m256i lanes_low = n_tok == 1 ? x86_lane_words(qy0) : _mm256_setzero_si256();
    __m256i lanes_high = n_tok == 1 ? x86_lane_words(qy0 + 16) : _mm256_setzero_si256();
    __m256i sum[2][TILE_TOKENS];
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++) {
        __m256i bytes[2], q[2];
        for (int half = 0; half < 2; half++) {
            bytes[half] = _mm256_loadu_si256((const __m256i *)(words + 64 * j + 32 * half));
            q[half] = _mm256_and_si256(bytes[half], low4);
        }
        for (size_t t = 0; t < n_tok; t++) {
            __m256i y = n_tok == 1 ? x86_lane_word(lanes_low, j)
                                   : x86_set1_word(tile_quants(tile, t, b, with_min) + 4 * j);
            for (int half = 0; half < 2; half++) {
                __m256i p = _mm256_maddubs_epi16(q[half], y);
                sum[half][t] = j == 0 ? p : _mm256_add_epi16(sum[half][t], p);
            }
        }
        for (int half = 0; half < 2; half++)
            q[half] = _mm256_and_si256(_mm256_srli_epi16(bytes[half], 4), low4);
        for (size_t t = 0; t < n_tok; t++) {
            __m256i y = n_tok == 1 ? x86_lane_word(lanes_high, j)
                                   : x86_set1_word(tile_quants(tile, t, b, with_min) + 16 + 4 * j);
            for (int half = 0; half < 2; half++)
                sum[half][t] = _mm256_add_epi16(sum[half][t], _mm256_maddubs_epi16(q[half], y));
            __asm__("" : "+x"(sum[0][t]), "+x"(sum[1][t]));
        }
    }
    for (size_t half = 0; half < 2; half++) {
        __m256 dx, mx;
        half_block_scales(block, half, with_min, &dx, &mx);
        for (size_t t = 0; t < n_tok; t++) {
            __m256i isum = _mm256_madd_epi16(sum[half][t], _mm256_set1_epi16(1));
            acc[half][t] = block_float_step(dx, mx, isum, tile, t, b, with_min, acc[half][t]);
        }
    }
}

static inline __attribute__((always_inline)) void
tile_block_q4_0(const uint8_t *block, size_t b, const packed_tile *tile, size_t n_tok,
                size_t prefetch, __m256 acc[2][TILE_TOKENS])
{
    tile_block_4bit(block, b, tile, n_tok, prefetch, false, acc);
}

static inline __attribute__((always_inline)) void
tile_block_q4_1(const uint8_t *block, size_t b, const packed_tile *tile, size_t n_tok,
                size_t prefetch, __m256 acc[2][TILE_TOKENS])
{
    tile_block_4bit(block, b, tile, n_tok, prefetch, true, acc);
}

static inline __attribute__((always_inline)) void
half_block_q5_0(const uint8_t *block, size_t b, size_t half, const packed_tile *tile,
                size_t n_tok, size_t prefetch, __m256 *acc)
{
    half_block_5bit(block, b, half, tile, n_tok, prefetch, false, acc);
}

static inline __attribute__((always_inline)) void
half_block_q5_1(const uint8_t *block, size_t b, size_t half, const packed_tile *tile,
                size_t n_tok, size_t prefetch, __m256 *acc)
{
    half_block_5bit(block, b, half, tile, n_tok, prefetch, true, acc);
}

/*
 * All 16 rows of a Q8_0 block b against a tile of n_tok (1..4) tokens. Q8_0 is packed as
 * u = q + 128, which maddubs cannot take whole (255 * 127 * 2 saturates), so each word goes
 * back to q (one xor) and through maddubs as |q| times qy with q's sign: pairs of at most
 * 2 * 128 * 127 = 32512, each word widened by one madd. The magnitudes and signs serve every
 * token; each broadcast serves both halves. Against the nibble split this replaced (two
 * maddubs per word, the sum starting at -128 * sum(qy)) it has a quarter fewer vector ops.
 * The empty asm does what it does in tile_block_4bit (without it GCC spills the sums).
 */
static inline __attribute__((always_inline)) void
tile_block_q8_0(const uint8_t *block, size_t b, const packed_tile *tile, size_t n_tok,
                size_t prefetch, __m256 acc[2][TILE_TOKENS])
{
    /* 8.5 lines at once: asked in two slices, the stream was no faster */
    x86_prefetch_slice(block, PACK_ROWS * sizeof(block_q8_0), prefetch, 0, 1);
    const __m256i offset = _mm256_set1_epi8((char)0x80);
    const __m256i ones = _mm256_set1_epi16(1);
    const int8_t *qy0 = tile_quants(tile, 0, b, false);
    __m256i lanes[2] = {n_tok == 1 ? x86_lane_words(qy0) : _mm256_setzero_si256(),
                        n_tok == 1 ? x86_lane_words(qy0 + 16) : _mm256_setzero_si256()};
    __m256i isum[2][TILE_TOKENS];
#pragma GCC unroll 8
    for (int j = 0; j < 8; j++) {
        __m256i q[2], magnitude[2];
        for (int half = 0; half < 2; half++) {
            __m256i bytes = _mm256_loadu_si256(
                (const __m256i *)(block + SCALE_BYTES + 64 * j + 32 * half));
            q[half] = _mm256_xor_si256(bytes, offset);
            magnitude[half] = _mm256_sign_epi8(q[half], q[half]);
        }
        for (size_t t = 0; t < n_tok; t++) {
            __m256i y = n_tok == 1 ? x86_lane_word(lanes[j / 4], j % 4)
                                   : x86_set1_word(tile_quants(tile, t, b, false) + 4 * j);
            for (int half = 0; half < 2; half++) {
                __m256i signed_y = _mm256_sign_epi8(y, q[half]);
                __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(magnitude[half], signed_y),
                                              ones);
                isum[half][t] = j == 0 ? p : _mm256_add_epi32(isum[half][t], p);
            }
            __asm__("" : "+x"(isum[0][t]), "+x"(isum[1][t]));
        }
    }
    for (size_t half = 0; half < 2; half++) {
        const __m128i *d_half = (const __m128i *)(block + 2 * HALF_ROWS * half);
        __m256 dx = _mm256_cvtph_ps(_mm_loadu_si128(d_half));
        for (size_t t = 0; t < n_tok; t++) {
            __m256 d = _mm256_mul_ps(dx, _mm256_set1_ps(tile->dy[t][b]));
            acc[half][t] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(isum[half][t]), acc[half][t]);
        }
    }
}

X86_DEFINE_PACKED_GROUP_WIDE(group_q4_0, tile_block_q4_0,
                             PACK_ROWS * sizeof(block_q4_0), const packed_tile *)
X86_DEFINE_PACKED_GROUP_WIDE(group_q8_0, tile_block_q8_0,
                             PACK_ROWS * sizeof(block_q8_0), const packed_tile *)
X86_DEFINE_PACKED_GROUP(group_q5_0, half_block_q5_0, PACK_ROWS * sizeof(block_q5_0),
                        const packed_tile *)
X86_DEFINE_PACKED_GROUP_WIDE(group_q4_1, tile_block_q4_1,
                             PACK_ROWS * sizeof(block_q4_1), const packed_tile *)
X86_DEFINE_PACKED_GROUP(group_q5_1, half_block_q5_1, PACK_ROWS * sizeof(block_q5_1),
                        const packed_tile *)

/* start_array: which start values (quant_prepare_packed_act_avx2): 0 Q4_0, 1 Q8_0 (read by
 * the AVX-512 Q8_0 tile, not this file's), 2 Q5_0; unused by Q4_1 and Q5_1, whose tiles read
 * sy. */
#define DEFINE_PACKED_MATMUL(name, group_fn, block_type, start_array)                         \
    void name(size_t n, const void *packed, size_t n_groups, const void *act,                 \
              size_t act_row_bytes, const void *act_sums, size_t n_tokens, float *y,          \
              size_t ldy)                                                                     \
    {                                                                                         \
        size_t n_blocks = n / QUANT_QK32;                                                     \
        size_t group_bytes = PACK_ROWS * n_blocks * sizeof(block_type);                       \
        size_t sums_bytes = quant_packed_sums_bytes(n);                                       \
        size_t prefetch_one =                                                                 \
            cpu_prefetch_single_stream() ? cpu_one_token_prefetch_bytes() : 0;                \
        for (size_t t = 0; t < n_tokens; t += TILE_TOKENS) {                                  \
            size_t n_tok = n_tokens - t < TILE_TOKENS ? n_tokens - t : TILE_TOKENS;           \
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
                X86_PACKED_GROUP_SWITCH(group_fn, n_tok, &tile);                              \
            }                                                                                 \
        }                                                                                     \
    }

DEFINE_PACKED_MATMUL(quant_matmul_packed_q4_0_avx2, group_q4_0, block_q4_0, 0)
DEFINE_PACKED_MATMUL(quant_matmul_packed_q8_0_avx2, group_q8_0, block_q8_0, 1)
DEFINE_PACKED_MATMUL(quant_matmul_packed_q5_0_avx2, group_q5_0, block_q5_0, 2)
DEFINE_PACKED_MATMUL(quant_matmul_packed_q4_1_avx2, group_q4_1, block_q4_1, 0)
DEFINE_PACKED_MATMUL(quant_matmul_packed_q5_1_avx2, group_q5_1, block_q5_1, 0)

/* ---- activation quantizer ------------------------------------------------------------- */

/*
 * F32 -> Q8_0 as the scalar quantize_act_q8_0 does it, the same bytes: amax ignoring NaN
 * (max_ps returns its second operand when the first is NaN), id = 127 / amax, products
 * rounded to nearest even, and the scale through the same f16 conversion.
 */
void quant_quantize_act_q8_0_avx2(const float *in, void *blocks, size_t n)
{
    block_q8_0 *b = blocks;
    const __m256 sign_bit = _mm256_set1_ps(-0.0f);
    for (size_t i = 0; i < n / QUANT_QK32; i++, in += QUANT_QK32) {
        __m256 v[4], amax = _mm256_setzero_ps();
        for (int k = 0; k < 4; k++) {
            v[k] = _mm256_loadu_ps(in + 8 * k);
            amax = _mm256_max_ps(_mm256_andnot_ps(sign_bit, v[k]), amax);
        }
        __m128 m = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
        m = _mm_max_ps(m, _mm_movehl_ps(m, m));
        m = _mm_max_ss(m, _mm_movehdup_ps(m));
        float max_abs = _mm_cvtss_f32(m);
        __m256 id = _mm256_set1_ps(max_abs != 0.0f ? 127.0f / max_abs : 0.0f);
        __m256i q[4];
        for (int k = 0; k < 4; k++)
            q[k] = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v[k], id),
                                                      _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        /* The packs interleave 128-bit lanes; one permute puts the bytes back in order. */
        __m256i bytes = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]),
                                           _mm256_packs_epi32(q[2], q[3]));
        bytes = _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
        _mm256_storeu_si256((__m256i *)b[i].qs, bytes);
        b[i].d = quant_f32_to_f16(max_abs / 127.0f);
    }
}

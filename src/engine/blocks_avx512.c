/*
 * AVX-512 versions of the blocks attention and the FFN spend their time in: attention's
 * scores over key tiles, its softmax over a chunk of cells and its weighted values, and the
 * SwiGLU of every FFN (blocks.h chooses them at the avx512 level). Never called on a CPU
 * without AVX-512.
 */
#include <immintrin.h>
#include <math.h>

#include "blocks.h"

/* the kernels' head counts, tile pairing and cache type must be constants in their loops */
#define ALWAYS_INLINE static inline __attribute__((always_inline))

/*
 * e^x: x = n ln2 + r with |r| <= ln2 / 2, e^r from Cephes' degree-6 polynomial (within 2 ulp
 * of expf), then 2^n by vscalefps, which gives 0 or infinity rather than a wrong power once n
 * leaves the float range. x is clamped at -88 (e^-88 is under the smallest normal float: the
 * softmax's largest term is 1, and silu's 1 + e^-x is 1 there).
 */
static inline __m512 exp_ps(__m512 x)
{
    x = _mm512_max_ps(x, _mm512_set1_ps(-88.0f));
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    /* ln 2 in two parts, so that n * ln2_high is exact */
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    return _mm512_scalef_ps(p, n);
}

static inline __mmask16 lanes(size_t left)
{
    return left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1);
}

double block_softmax_exp_avx512(float *x, size_t n, float scale, float *max_out)
{
    __m512 vscale = _mm512_set1_ps(scale), vmax = _mm512_set1_ps(-INFINITY);
    for (size_t i = 0; i < n; i += 16) {
        __mmask16 m = lanes(n - i);
        __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), vscale);
        _mm512_mask_storeu_ps(x + i, m, v);
        vmax = _mm512_mask_max_ps(vmax, m, vmax, v);
    }
    *max_out = _mm512_reduce_max_ps(vmax);
    __m512 max = _mm512_set1_ps(*max_out);
    /* the sum in double, as ggml's softmax keeps it */
    __m512d sum_low = _mm512_setzero_pd(), sum_high = _mm512_setzero_pd();
    for (size_t i = 0; i < n; i += 16) {
        __mmask16 m = lanes(n - i);
        __m512 shifted = _mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + i), max);
        __m512 e = _mm512_maskz_mov_ps(m, exp_ps(shifted)); /* lanes past n add nothing */
        _mm512_mask_storeu_ps(x + i, m, e);
        sum_low = _mm512_add_pd(sum_low, _mm512_cvtps_pd(_mm512_castps512_ps256(e)));
        __m256 high = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(e), 1));
        sum_high = _mm512_add_pd(sum_high, _mm512_cvtps_pd(high));
    }
    return _mm512_reduce_add_pd(_mm512_add_pd(sum_low, sum_high));
}

void block_swiglu_avx512(float *x, const float *y, size_t n)
{
    const __m512 one = _mm512_set1_ps(1.0f);
    for (size_t i = 0; i < n; i += 16) {
        __mmask16 m = lanes(n - i);
        __m512 g = _mm512_maskz_loadu_ps(m, x + i);
        __m512 e = exp_ps(_mm512_sub_ps(_mm512_setzero_ps(), g));
        __m512 silu = _mm512_div_ps(g, _mm512_add_ps(one, e));
        _mm512_mask_storeu_ps(x + i, m, _mm512_mul_ps(silu, _mm512_maskz_loadu_ps(m, y + i)));
    }
}

/*
 * *acc = fma(v, *w in every lane, *acc), the broadcast inside the multiply-add (an embedded
 * broadcast of a memory operand). The compiler would broadcast *w into a register once for
 * all the vectors it multiplies, and on Zen 4 that broadcast takes a slot of the pipes the
 * multiply-adds need; inline asm, since the compiler shares one broadcast among them.
 */
ALWAYS_INLINE void fma_broadcast(__m512 *acc, __m512 v, const float *w)
{
    __asm__("vfmadd231ps %[w]%{1to16%}, %[v], %[acc]"
            : [acc] "+v"(*acc)
            : [v] "v"(v), [w] "m"(*w));
}

/* Component d of an F32 or F16 tile's 16 cells. */
ALWAYS_INLINE __m512 load_key_row(corral_kv_type type, const uint8_t *tile, size_t d)
{
    if (type == CORRAL_KV_F32)
        return _mm512_loadu_ps((const float *)tile + d * KV_KEY_TILE);
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(tile + d * 2 * KV_KEY_TILE)));
}

/* Heads per pass over a key tile: with two tiles at a time, 16 independent chains of fused
 * multiply-adds, enough to keep both FMA ports busy through their latency. */
enum { SCORE_HEADS = 8 };
/* Tiles per pass: two, or four where a pass has at most 4 heads (a decoding token's group of
 * query heads), so that each query broadcast and each step of the loop serve 16
 * multiply-adds there too. */
enum { SCORE_MAX_TILES = 4 };

/* Tiles ahead of the pass being read that the score kernel asks the caches for: the first
 * tile of the pass after next (the hardware prefetchers follow from there; asking for every
 * tile was slower). */
enum { SCORE_PREFETCH_PASSES = 2 };

/* The n_heads (<= SCORE_HEADS) heads of q against tiles [t, t + n_pass) (n_pass <=
 * SCORE_MAX_TILES). */
ALWAYS_INLINE void score_tiles(corral_kv_type type, const void *tiles, size_t t, size_t n_pass,
                               size_t ahead_tiles, size_t head_dim, const float *q,
                               size_t n_heads, float *scores, size_t ld_scores,
                               attention_next_stream *next)
{
    __m512 acc[SCORE_MAX_TILES][SCORE_HEADS];
    for (size_t j = 0; j < n_pass; j++)
        for (size_t h = 0; h < n_heads; h++)
            acc[j][h] = _mm512_setzero_ps();
    /* a tile spends per_d bytes on each component: 64 (F32) or 32 (F16) */
    size_t per_d = kv_key_bytes_per_component(type), tile_bytes = per_d * head_dim;
    const uint8_t *tile0 = (const uint8_t *)tiles + t * tile_bytes;
    const uint8_t *ahead = tile0 + ahead_tiles * tile_bytes;
    for (size_t d = 0; d < head_dim; d++) {
        /* a line each time the tile's bytes reach one: a line per two F16 rows left the
         * kernel waiting on its key tiles */
        if (d * per_d % 64 < per_d)
            _mm_prefetch((const char *)ahead + d * per_d, _MM_HINT_T0);
        attention_next_step(next);
        __m512 k[SCORE_MAX_TILES];
        for (size_t j = 0; j < n_pass; j++)
            k[j] = load_key_row(type, tile0 + j * tile_bytes, d);
        for (size_t h = 0; h < n_heads; h++)
            for (size_t j = 0; j < n_pass; j++)
                fma_broadcast(&acc[j][h], k[j], &q[h * head_dim + d]);
    }
    for (size_t h = 0; h < n_heads; h++)
        for (size_t j = 0; j < n_pass; j++)
            _mm512_storeu_ps(scores + h * ld_scores + (t + j) * KV_KEY_TILE, acc[j][h]);
}

/* All tiles for n_heads heads, a constant after inlining. */
ALWAYS_INLINE void score_all_tiles(corral_kv_type type, const void *tiles, size_t n_tiles,
                                   size_t head_dim, const float *q, size_t n_heads,
                                   float *scores, size_t ld_scores, attention_next next)
{
    size_t per_pass = n_heads <= 4 ? 4 : 2, ahead = SCORE_PREFETCH_PASSES * per_pass;
    attention_next_stream stream =
        attention_next_start(next, (n_tiles + per_pass - 1) / per_pass * head_dim);
    size_t t = 0;
    if (per_pass == 4)
        for (; t + 4 <= n_tiles; t += 4)
            score_tiles(type, tiles, t, 4, ahead, head_dim, q, n_heads, scores, ld_scores,
                        &stream);
    for (; t + 2 <= n_tiles; t += 2)
        score_tiles(type, tiles, t, 2, ahead, head_dim, q, n_heads, scores, ld_scores, &stream);
    if (t < n_tiles)
        score_tiles(type, tiles, t, 1, ahead, head_dim, q, n_heads, scores, ld_scores, &stream);
}

/* F32 and F16 only: blocks.c scores quantized tiles with attention_q8.h */
#define SCORE_CASE(k)                                                                      \
    case k:                                                                                \
        if (type == CORRAL_KV_F32)                                                         \
            score_all_tiles(CORRAL_KV_F32, tiles, n_tiles, head_dim, q_part, k, part,      \
                            ld_scores, next);                                              \
        else                                                                               \
            score_all_tiles(CORRAL_KV_F16, tiles, n_tiles, head_dim, q_part, k, part,      \
                            ld_scores, next);                                              \
        break;

void block_attention_scores_avx512(corral_kv_type type, const void *tiles, size_t n_tiles,
                                   size_t head_dim, const float *q, size_t n_heads,
                                   float *scores, size_t ld_scores, attention_next next)
{
    for (size_t h0 = 0; h0 < n_heads; h0 += SCORE_HEADS, next.n_bytes = 0) {
        size_t n = n_heads - h0 < SCORE_HEADS ? n_heads - h0 : SCORE_HEADS;
        const float *q_part = q + h0 * head_dim;
        float *part = scores + h0 * ld_scores;
        switch (n) {
            SCORE_CASE(1) SCORE_CASE(2) SCORE_CASE(3) SCORE_CASE(4)
            SCORE_CASE(5) SCORE_CASE(6) SCORE_CASE(7) SCORE_CASE(8)
        }
    }
}

/* Heads per pass over the values, four vectors of outputs each: 16 accumulators. */
enum { VALUE_HEADS = 4, VALUE_OUTPUTS = 64 };
/* Cells per block: a block's value rows (at most 128 KiB of F32 rows of 256) are read once
 * from memory, then from cache for every further group of heads and outputs. */
enum { VALUE_CELLS = 128 };
/* Rows ahead the value kernel asks the caches for: a chunk's values follow its keys, and
 * the hardware prefetchers, which had followed the keys, would meet each run of value rows
 * cold. */
enum { VALUE_PREFETCH_ROWS = 16 };
/* Rows ahead it asks L2 for, besides: with L1 asked alone, `perf annotate` found the
 * arithmetic waiting on the first load of each row, most of all on 256-wide rows (MQA1B);
 * fewer rows ahead gained less, more gained nothing. */
enum { VALUE_PREFETCH_L2_ROWS = 64 };

/* The scale of the quantized block of a value row holding component i, in every lane. */
ALWAYS_INLINE __m512 value_scale(corral_kv_type type, const uint8_t *row, size_t i)
{
    const uint8_t *block = row + kv_value_row_bytes(type, i - i % 32);
    return _mm512_cvtph_ps(_mm256_set1_epi16((short)(block[0] | block[1] << 8)));
}

/* Components [i, i + 16) of a value row (i a multiple of 16), those under m, exactly; scale:
 * value_scale of i where the type is quantized. */
ALWAYS_INLINE __m512 load_value(corral_kv_type type, const uint8_t *row, size_t i, __mmask16 m,
                                __m512 scale)
{
    if (type == CORRAL_KV_F32)
        return _mm512_maskz_loadu_ps(m, (const float *)row + i);
    if (type == CORRAL_KV_F16)
        return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, (const uint16_t *)row + i));
    if (!m)
        return _mm512_setzero_ps(); /* past the row, where no block begins */
    const uint8_t *block = row + kv_value_row_bytes(type, i - i % 32);
    __m512i q;
    if (type == CORRAL_KV_Q8_0) {
        q = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(block + 2 + i % 32)));
    } else { /* Q4_0: the low nibbles are components 0..15 of the block, the high 16..31 */
        q = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(block + 2)));
        q = i % 32 < 16 ? _mm512_and_si512(q, _mm512_set1_epi32(0x0f)) : _mm512_srli_epi32(q, 4);
        q = _mm512_sub_epi32(q, _mm512_set1_epi32(8));
    }
    return _mm512_mul_ps(scale, _mm512_cvtepi32_ps(q));
}

/* Outputs [i0, i0 + 64) of n_heads (<= VALUE_HEADS) heads over cells [c0, c1), added to out. */
ALWAYS_INLINE void value_chunk(corral_kv_type type, bool converted, const void *values,
                               size_t n, size_t i0, size_t c0, size_t c1, const float *p,
                               size_t ld_p, size_t n_heads, float *out,
                               attention_next_stream *next)
{
    __mmask16 m[4];
    __m512 acc[VALUE_HEADS][4];
    for (int k = 0; k < 4; k++)
        m[k] = i0 + 16 * k < n ? lanes(n - i0 - 16 * k) : 0;
    for (size_t h = 0; h < n_heads; h++)
        for (int k = 0; k < 4; k++)
            acc[h][k] = _mm512_maskz_loadu_ps(m[k], out + h * n + i0 + 16 * k);
    size_t row_bytes = kv_value_row_bytes(type, n), at = kv_value_row_bytes(type, i0);
    size_t end = kv_value_row_bytes(type, n - i0 > VALUE_OUTPUTS ? i0 + VALUE_OUTPUTS : n);
    bool second_line = end - at > 64;
    for (size_t c = c0; c < c1; c++) {
        const uint8_t *row = (const uint8_t *)values + c * row_bytes;
        /* integer arithmetic: the rows ahead may lie past the cache */
        uintptr_t ahead = (uintptr_t)row + VALUE_PREFETCH_ROWS * row_bytes + at;
        uintptr_t far = (uintptr_t)row + VALUE_PREFETCH_L2_ROWS * row_bytes + at;
        for (size_t line = 0; !converted && line < (second_line ? 2u : 1u); line++) {
            _mm_prefetch((const char *)(ahead + 64 * line), _MM_HINT_T0);
            _mm_prefetch((const char *)(far + 64 * line), _MM_HINT_T1);
        }
        attention_next_step(next);
        /* a quantized row's two blocks here: each scale read once for its two vectors */
        __m512 scales[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
        for (int j = 0; kv_type_quantized(type) && j < 2; j++)
            if (m[2 * j])
                scales[j] = value_scale(type, row, i0 + 32 * j);
        __m512 v[4];
        for (int k = 0; k < 4; k++)
            v[k] = load_value(type, row, i0 + 16 * k, m[k], scales[k / 2]);
        for (size_t h = 0; h < n_heads; h++)
            for (int k = 0; k < 4; k++)
                fma_broadcast(&acc[h][k], v[k], &p[h * ld_p + c]);
    }
    for (size_t h = 0; h < n_heads; h++)
        for (int k = 0; k < 4; k++)
            _mm512_mask_storeu_ps(out + h * n + i0 + 16 * k, m[k], acc[h][k]);
}

/* The first pass over a block, which reads its rows from memory, walks next's stream too.
 * converted: the rows are value_rows_f32's, in L1, asked for nothing ahead. */
ALWAYS_INLINE void value_block(corral_kv_type type, bool converted, const void *values,
                               size_t n, size_t c0, size_t c1, const float *p, size_t ld_p,
                               size_t n_heads, float *out, attention_next_stream *next)
{
    attention_next_stream none = attention_next_start((attention_next){NULL, 0}, 0);
    for (size_t h0 = 0; h0 < n_heads; h0 += VALUE_HEADS) {
        size_t heads = n_heads - h0 < VALUE_HEADS ? n_heads - h0 : VALUE_HEADS;
        const float *p_part = p + h0 * ld_p;
        float *out_part = out + h0 * n;
        for (size_t i0 = 0; i0 < n; i0 += VALUE_OUTPUTS) {
            attention_next_stream *s = h0 == 0 && i0 == 0 ? next : &none;
            switch (heads) {
            case 1:
                value_chunk(type, converted, values, n, i0, c0, c1, p_part, ld_p, 1, out_part, s);
                break;
            case 2:
                value_chunk(type, converted, values, n, i0, c0, c1, p_part, ld_p, 2, out_part, s);
                break;
            case 3:
                value_chunk(type, converted, values, n, i0, c0, c1, p_part, ld_p, 3, out_part, s);
                break;
            default:
                value_chunk(type, converted, values, n, i0, c0, c1, p_part, ld_p, 4, out_part, s);
                break;
            }
        }
    }
}

/* Floats of value rows made F32 once for the passes of a call with more heads than two
 * passes take (a prompt's queries): 32 KiB, read from L1 and L2 by the passes (half that
 * was no faster for 64-wide heads and slower for 256-wide ones). With two passes,
 * converting first read slower than converting twice (decoding with Q05B's 7 heads). */
enum { VALUE_F32_FLOATS = 8192 };

/* Rows [c0, c1) of n components as F32 rows, exactly (an F16 value is an F32, and so is a
 * quantized one's f16 scale times its q of at most 8 bits), one conversion for all passes. */
ALWAYS_INLINE void value_rows_f32(corral_kv_type type, const void *values, size_t n, size_t c0,
                                  size_t c1, float *rows)
{
    size_t row_bytes = kv_value_row_bytes(type, n);
    for (size_t c = c0; c < c1; c++, rows += n) {
        const uint8_t *row = (const uint8_t *)values + c * row_bytes;
        for (size_t i = 0; i < n; i += 16) {
            __mmask16 m = lanes(n - i);
            __m512 scale = _mm512_setzero_ps();
            if (kv_type_quantized(type))
                scale = value_scale(type, row, i);
            _mm512_mask_storeu_ps(rows + i, m, load_value(type, row, i, m, scale));
        }
    }
}

/* Each block's rows made F32 first where the heads take more than two passes. */
ALWAYS_INLINE void values_all_blocks(corral_kv_type type, const void *values, size_t n,
                                     size_t n_cells, const float *p, size_t ld_p,
                                     size_t n_heads, float *out, attention_next next)
{
    attention_next_stream stream = attention_next_start(next, n_cells);
    /* rows per converted block; rows wider than 512 would leave fewer than a key tile's 16
     * cells a block, and go unconverted */
    size_t convert_cells = VALUE_F32_FLOATS / n;
    if (type == CORRAL_KV_F32 || n_heads <= 2 * VALUE_HEADS || convert_cells < KV_KEY_TILE) {
        for (size_t c0 = 0; c0 < n_cells; c0 += VALUE_CELLS) {
            size_t c1 = n_cells - c0 < VALUE_CELLS ? n_cells : c0 + VALUE_CELLS;
            value_block(type, false, values, n, c0, c1, p, ld_p, n_heads, out, &stream);
        }
        return;
    }
    float rows[VALUE_F32_FLOATS] __attribute__((aligned(64)));
    for (size_t c0 = 0; c0 < n_cells; c0 += convert_cells) {
        size_t c1 = n_cells - c0 < convert_cells ? n_cells : c0 + convert_cells;
        value_rows_f32(type, values, n, c0, c1, rows);
        value_block(CORRAL_KV_F32, true, rows, n, 0, c1 - c0, p + c0, ld_p, n_heads, out,
                    &stream);
    }
}

void block_attention_values_avx512(corral_kv_type type, const void *values, size_t n,
                                   size_t n_cells, const float *p, size_t ld_p, size_t n_heads,
                                   float *out, attention_next next)
{
    KV_TYPE_SWITCH(type, kv,
                   values_all_blocks(kv, values, n, n_cells, p, ld_p, n_heads, out, next))
}

/*
 * AVX2 versions of the blocks attention and the FFN spend their time in (blocks.h chooses
 * them at the avx2 level): attention's two products, the scores over key tiles (a tile row of
 * 16 cells as two 8-lane vectors) and the values (every head of the group against each value
 * row as it is read), its softmax, and SwiGLU. Never called on a CPU without AVX2, FMA and
 * F16C.
 */
#include <immintrin.h>
#include <math.h>

#include "blocks.h"

/* the kernels' head counts and cache type must be constants in their loops */
#define ALWAYS_INLINE static inline __attribute__((always_inline))

/*
 * e^x as blocks_avx512.c computes it (Cephes' degree-6 polynomial on x - n ln2, within 2 ulp
 * of expf), with 2^n built in the exponent field: x is clamped to [-88, 88], so n stays in
 * [-127, 127] and e^x is 0 below about -87.7 (under the smallest normal float) and finite
 * above. The softmax's terms are at most 1; silu(g) = g / (1 + e^-g) is within 1e-36 of -0
 * when g < -88.
 */
static inline __m256 exp_ps(__m256 x)
{
    x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-88.0f)), _mm256_set1_ps(88.0f));
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    /* ln 2 in two parts, so that n * ln2_high is exact */
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    __m256i biased = _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127));
    return _mm256_mul_ps(p, _mm256_castsi256_ps(_mm256_slli_epi32(biased, 23)));
}

/* All-ones in the lanes below `left` (of 8). */
static inline __m256i lanes(size_t left)
{
    const __m256i index = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(left < 8 ? left : 8)), index);
}

/*
 * The element-wise blocks go over whole vectors with plain loads and stores, and over the last
 * n % 8 values with masked ones: a masked store (vmaskmovps) costs tens of cycles on AMD Zen,
 * which made the softmax a large part of attention while every vector was masked.
 */
ALWAYS_INLINE __m256 scaled(__m256 x, __m256 scale, __m256 *max, __m256 valid)
{
    __m256 v = _mm256_mul_ps(x, scale);
    *max = _mm256_blendv_ps(*max, _mm256_max_ps(*max, v), valid);
    return v;
}

/* e^(x - max) of the valid lanes, 0 in the others, added to the double sums. */
ALWAYS_INLINE __m256 exp_term(__m256 x, __m256 max, __m256 valid, __m256d *low, __m256d *high)
{
    __m256 e = _mm256_and_ps(exp_ps(_mm256_sub_ps(x, max)), valid);
    *low = _mm256_add_pd(*low, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
    *high = _mm256_add_pd(*high, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
    return e;
}

double block_softmax_exp_avx2(float *x, size_t n, float scale, float *max_out)
{
    const __m256 all = _mm256_castsi256_ps(_mm256_set1_epi32(-1));
    size_t whole = n / 8 * 8;
    __m256i tail = lanes(n - whole);
    __m256 vscale = _mm256_set1_ps(scale), vmax = _mm256_set1_ps(-INFINITY);
    for (size_t i = 0; i < whole; i += 8)
        _mm256_storeu_ps(x + i, scaled(_mm256_loadu_ps(x + i), vscale, &vmax, all));
    if (whole < n)
        _mm256_maskstore_ps(x + whole, tail,
                            scaled(_mm256_maskload_ps(x + whole, tail), vscale, &vmax,
                                   _mm256_castsi256_ps(tail)));
    __m128 max4 = _mm_max_ps(_mm256_castps256_ps128(vmax), _mm256_extractf128_ps(vmax, 1));
    max4 = _mm_max_ps(max4, _mm_movehl_ps(max4, max4));
    max4 = _mm_max_ss(max4, _mm_movehdup_ps(max4));
    *max_out = _mm_cvtss_f32(max4);
    __m256 max = _mm256_set1_ps(*max_out);
    /* the sum in double, as ggml's softmax keeps it */
    __m256d sum_low = _mm256_setzero_pd(), sum_high = _mm256_setzero_pd();
    for (size_t i = 0; i < whole; i += 8)
        _mm256_storeu_ps(x + i, exp_term(_mm256_loadu_ps(x + i), max, all, &sum_low, &sum_high));
    if (whole < n)
        _mm256_maskstore_ps(x + whole, tail,
                            exp_term(_mm256_maskload_ps(x + whole, tail), max,
                                     _mm256_castsi256_ps(tail), &sum_low, &sum_high));
    __m256d sum4 = _mm256_add_pd(sum_low, sum_high);
    __m128d sum2 = _mm_add_pd(_mm256_castpd256_pd128(sum4), _mm256_extractf128_pd(sum4, 1));
    return _mm_cvtsd_f64(_mm_add_sd(sum2, _mm_unpackhi_pd(sum2, sum2)));
}

ALWAYS_INLINE __m256 swiglu8(__m256 g, __m256 y)
{
    __m256 e = exp_ps(_mm256_sub_ps(_mm256_setzero_ps(), g));
    return _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(_mm256_set1_ps(1.0f), e)), y);
}

void block_swiglu_avx2(float *x, const float *y, size_t n)
{
    size_t whole = n / 8 * 8;
    for (size_t i = 0; i < whole; i += 8)
        _mm256_storeu_ps(x + i, swiglu8(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
    if (whole < n) {
        __m256i tail = lanes(n - whole);
        _mm256_maskstore_ps(x + whole, tail, swiglu8(_mm256_maskload_ps(x + whole, tail),
                                                     _mm256_maskload_ps(y + whole, tail)));
    }
}

/* Component d of 8 cells of an F32 or F16 tile from lane `lane` on. */
ALWAYS_INLINE __m256 load_key_row(corral_kv_type type, const uint8_t *tile, size_t d, size_t lane)
{
    if (type == CORRAL_KV_F32)
        return _mm256_loadu_ps((const float *)tile + d * KV_KEY_TILE + lane);
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(tile + (d * KV_KEY_TILE + lane) * 2)));
}

/* Heads per pass over a tile: two vectors each, 8 chains in 16 registers. */
enum { SCORE_HEADS = 4 };

ALWAYS_INLINE void score_tile(corral_kv_type type, const void *tiles, size_t t, size_t head_dim,
                              const float *q, size_t n_heads, float *scores, size_t ld_scores,
                              attention_next_stream *next)
{
    __m256 low[SCORE_HEADS], high[SCORE_HEADS];
    for (size_t h = 0; h < n_heads; h++)
        low[h] = high[h] = _mm256_setzero_ps();
    const uint8_t *tile = (const uint8_t *)tiles + t * kv_key_tile_bytes(type, head_dim);
    for (size_t d = 0; d < head_dim; d++) {
        attention_next_step(next);
        __m256 k_low = load_key_row(type, tile, d, 0);
        __m256 k_high = load_key_row(type, tile, d, 8);
        for (size_t h = 0; h < n_heads; h++) {
            __m256 qd = _mm256_broadcast_ss(q + h * head_dim + d);
            low[h] = _mm256_fmadd_ps(k_low, qd, low[h]);
            high[h] = _mm256_fmadd_ps(k_high, qd, high[h]);
        }
    }
    for (size_t h = 0; h < n_heads; h++) {
        _mm256_storeu_ps(scores + h * ld_scores + t * KV_KEY_TILE, low[h]);
        _mm256_storeu_ps(scores + h * ld_scores + t * KV_KEY_TILE + 8, high[h]);
    }
}

ALWAYS_INLINE void score_all_tiles(corral_kv_type type, const void *tiles, size_t n_tiles,
                                   size_t head_dim, const float *q, size_t n_heads,
                                   float *scores, size_t ld_scores, attention_next next)
{
    attention_next_stream stream = attention_next_start(next, n_tiles * head_dim);
    for (size_t t = 0; t < n_tiles; t++)
        score_tile(type, tiles, t, head_dim, q, n_heads, scores, ld_scores, &stream);
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

void block_attention_scores_avx2(corral_kv_type type, const void *tiles, size_t n_tiles,
                                 size_t head_dim, const float *q, size_t n_heads, float *scores,
                                 size_t ld_scores, attention_next next)
{
    for (size_t h0 = 0; h0 < n_heads; h0 += SCORE_HEADS, next.n_bytes = 0) {
        size_t n = n_heads - h0 < SCORE_HEADS ? n_heads - h0 : SCORE_HEADS;
        const float *q_part = q + h0 * head_dim;
        float *part = scores + h0 * ld_scores;
        switch (n) {
            SCORE_CASE(1) SCORE_CASE(2) SCORE_CASE(3) SCORE_CASE(4)
        }
    }
}

/* Heads per pass over the values, two vectors of outputs each: 8 accumulators. */
enum { VALUE_HEADS = 4, VALUE_OUTPUTS = 16 };
/* Cells per block: a block's value rows are read once from memory, then from cache for every
 * further group of heads and outputs. */
enum { VALUE_CELLS = 128 };

/* The scale of the quantized block of a value row holding component i, in every lane. */
ALWAYS_INLINE __m256 value_scale(corral_kv_type type, const uint8_t *row, size_t i)
{
    const uint8_t *block = row + kv_value_row_bytes(type, i - i % 32);
    return _mm256_set1_ps(_cvtsh_ss((unsigned short)(block[0] | block[1] << 8)));
}

/* Components [i, i + 8) of a value row (i a multiple of 8), exactly; scale: value_scale of i
 * where the type is quantized. */
ALWAYS_INLINE __m256 load_value(corral_kv_type type, const uint8_t *row, size_t i, __m256 scale)
{
    if (type == CORRAL_KV_F32)
        return _mm256_loadu_ps((const float *)row + i);
    if (type == CORRAL_KV_F16)
        return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)row + i)));
    const uint8_t *block = row + kv_value_row_bytes(type, i - i % 32);
    __m256i q;
    if (type == CORRAL_KV_Q8_0) {
        q = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(block + 2 + i % 32)));
    } else { /* Q4_0: the low nibbles are components 0..15 of the block, the high 16..31 */
        q = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(block + 2 + i % 16)));
        q = i % 32 < 16 ? _mm256_and_si256(q, _mm256_set1_epi32(0x0f)) : _mm256_srli_epi32(q, 4);
        q = _mm256_sub_epi32(q, _mm256_set1_epi32(8));
    }
    return _mm256_mul_ps(scale, _mm256_cvtepi32_ps(q));
}

/* Rows ahead the value kernel asks the caches for: a chunk's values follow its keys, and the
 * hardware prefetchers, which had followed the keys, met each run of value rows cold. */
enum { VALUE_PREFETCH_ROWS = 16 };

ALWAYS_INLINE void prefetch_row_ahead(const char *row, size_t row_bytes)
{
    /* integer arithmetic: the rows ahead may lie past the cache */
    uintptr_t ahead = (uintptr_t)row + VALUE_PREFETCH_ROWS * row_bytes;
    for (size_t offset = 0; offset < row_bytes; offset += 64)
        _mm_prefetch((const char *)(ahead + offset), _MM_HINT_T0);
}

/* Outputs [i0, i0 + 16) of n_heads (<= VALUE_HEADS) heads over cells [c0, c1), added to out. */
ALWAYS_INLINE void value_chunk(corral_kv_type type, const void *values, size_t n, size_t i0,
                               size_t c0, size_t c1, const float *p, size_t ld_p,
                               size_t n_heads, float *out, attention_next_stream *next)
{
    __m256 low[VALUE_HEADS], high[VALUE_HEADS];
    for (size_t h = 0; h < n_heads; h++) {
        low[h] = _mm256_loadu_ps(out + h * n + i0);
        high[h] = _mm256_loadu_ps(out + h * n + i0 + 8);
    }
    size_t row_bytes = kv_value_row_bytes(type, n);
    for (size_t c = c0; c < c1; c++) {
        const uint8_t *row = (const uint8_t *)values + c * row_bytes;
        if (i0 == 0) /* the first pass over a block brings its rows in for the others */
            prefetch_row_ahead((const char *)row, row_bytes);
        attention_next_step(next);
        /* both halves in one quantized block: its scale read once */
        __m256 scale = kv_type_quantized(type) ? value_scale(type, row, i0) : _mm256_setzero_ps();
        __m256 v_low = load_value(type, row, i0, scale);
        __m256 v_high = load_value(type, row, i0 + 8, scale);
        for (size_t h = 0; h < n_heads; h++) {
            __m256 weight = _mm256_broadcast_ss(p + h * ld_p + c);
            low[h] = _mm256_fmadd_ps(v_low, weight, low[h]);
            high[h] = _mm256_fmadd_ps(v_high, weight, high[h]);
        }
    }
    for (size_t h = 0; h < n_heads; h++) {
        _mm256_storeu_ps(out + h * n + i0, low[h]);
        _mm256_storeu_ps(out + h * n + i0 + 8, high[h]);
    }
}

/* Outputs past the last whole chunk, one at a time (F32 and F16 rows: quantized ones are
 * whole blocks of 32). */
static void value_tail(corral_kv_type type, const void *values, size_t n, size_t i0, size_t c0,
                       size_t c1, const float *p, size_t ld_p, size_t n_heads, float *out)
{
    size_t row_bytes = kv_value_row_bytes(type, n);
    for (size_t c = c0; c < c1; c++)
        for (size_t h = 0; h < n_heads; h++)
            for (size_t i = i0; i < n; i++)
                out[h * n + i] =
                    fmaf(p[h * ld_p + c],
                         kv_value_at(type, (const uint8_t *)values + c * row_bytes, i),
                         out[h * n + i]);
}

/* The first pass over a block, which reads its rows from memory, walks next's stream too. */
ALWAYS_INLINE void value_block(corral_kv_type type, const void *values, size_t n, size_t c0,
                               size_t c1, const float *p, size_t ld_p, size_t n_heads,
                               float *out, attention_next_stream *next)
{
    size_t whole = n / VALUE_OUTPUTS * VALUE_OUTPUTS;
    attention_next_stream none = attention_next_start((attention_next){NULL, 0}, 0);
    for (size_t h0 = 0; h0 < n_heads; h0 += VALUE_HEADS) {
        size_t heads = n_heads - h0 < VALUE_HEADS ? n_heads - h0 : VALUE_HEADS;
        const float *p_part = p + h0 * ld_p;
        float *out_part = out + h0 * n;
        for (size_t i0 = 0; i0 < whole; i0 += VALUE_OUTPUTS) {
            attention_next_stream *s = h0 == 0 && i0 == 0 ? next : &none;
            switch (heads) {
            case 1: value_chunk(type, values, n, i0, c0, c1, p_part, ld_p, 1, out_part, s); break;
            case 2: value_chunk(type, values, n, i0, c0, c1, p_part, ld_p, 2, out_part, s); break;
            case 3: value_chunk(type, values, n, i0, c0, c1, p_part, ld_p, 3, out_part, s); break;
            default: value_chunk(type, values, n, i0, c0, c1, p_part, ld_p, 4, out_part, s); break;
            }
        }
    }
    if (whole < n)
        value_tail(type, values, n, whole, c0, c1, p, ld_p, n_heads, out);
}

void block_attention_values_avx2(corral_kv_type type, const void *values, size_t n,
                                 size_t n_cells, const float *p, size_t ld_p, size_t n_heads,
                                 float *out, attention_next next)
{
    attention_next_stream stream = attention_next_start(next, n_cells);
    for (size_t c0 = 0; c0 < n_cells; c0 += VALUE_CELLS) {
        size_t c1 = n_cells - c0 < VALUE_CELLS ? n_cells : c0 + VALUE_CELLS;
        KV_TYPE_SWITCH(type, kv,
                       value_block(kv, values, n, c0, c1, p, ld_p, n_heads, out, &stream))
    }
}

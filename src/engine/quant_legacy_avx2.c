/*
 * AVX2 + FMA + F16C dot products of F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0 rows
 * with their partner activations. The integer sums are exact; the float sums run in eight
 * f32 lanes with FMA, so results differ from the scalar order by rounding only.
 */
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

static inline float bf16_value(uint16_t h)
{
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
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

float quant_dot_f32_avx2(size_t n, const void *w, const void *a)
{
    const float *x = w, *y = a;
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                     _mm256_setzero_ps()};
    size_t i = 0;
    for (; i + 32 <= n; i += 32)
        for (int k = 0; k < 4; k++)
            acc[k] = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 8 * k),
                                     _mm256_loadu_ps(y + i + 8 * k), acc[k]);
    for (; i + 8 <= n; i += 8)
        acc[0] = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i), acc[0]);
    float sum = x86_hsum_ps(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]),
                                          _mm256_add_ps(acc[2], acc[3])));
    for (; i < n; i++)
        sum += x[i] * y[i];
    return sum;
}

float quant_dot_f16_avx2(size_t n, const void *w, const void *a)
{
    const uint16_t *x = w, *y = a;
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                     _mm256_setzero_ps()};
    size_t i = 0;
    for (; i + 32 <= n; i += 32)
        for (int k = 0; k < 4; k++)
            acc[k] = _mm256_fmadd_ps(load_f16x8(x + i + 8 * k), load_f16x8(y + i + 8 * k),
                                     acc[k]);
    for (; i + 8 <= n; i += 8)
        acc[0] = _mm256_fmadd_ps(load_f16x8(x + i), load_f16x8(y + i), acc[0]);
    float sum = x86_hsum_ps(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]),
                                          _mm256_add_ps(acc[2], acc[3])));
    for (; i < n; i++)
        sum += x86_half(x[i]) * x86_half(y[i]);
    return sum;
}

float quant_dot_bf16_avx2(size_t n, const void *w, const void *a)
{
    const uint16_t *x = w, *y = a;
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                     _mm256_setzero_ps()};
    size_t i = 0;
    for (; i + 32 <= n; i += 32)
        for (int k = 0; k < 4; k++)
            acc[k] = _mm256_fmadd_ps(load_bf16x8(x + i + 8 * k), load_bf16x8(y + i + 8 * k),
                                     acc[k]);
    for (; i + 8 <= n; i += 8)
        acc[0] = _mm256_fmadd_ps(load_bf16x8(x + i), load_bf16x8(y + i), acc[0]);
    float sum = x86_hsum_ps(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]),
                                          _mm256_add_ps(acc[2], acc[3])));
    for (; i < n; i++)
        sum += bf16_value(x[i]) * bf16_value(y[i]);
    return sum;
}

/* ---- 32-element block types ----------------------------------------------------------- */

/* acc + d * (integer sums as floats): the per-block step of every block kernel. d holds the
 * block's f32(dx * dy) in every lane. */
static inline __m256 scale_add(__m256 d, __m256i sums, __m256 acc)
{
    return _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sums), acc);
}

static inline __m256 block_q4_0_step(const block_q4_0 *x, const block_q8_0 *y, __m256 d,
                                     __m256 acc)
{
    __m256i qx = _mm256_sub_epi8(x86_unpack_nibbles(x->qs), _mm256_set1_epi8(8));
    __m256i qy = _mm256_loadu_si256((const __m256i *)y->qs);
    return scale_add(d, x86_dot_i8(qx, qy), acc);
}

static inline __m256 block_q4_1_step(const block_q4_1 *x, const block_q8_1 *y, __m256 d,
                                     __m256 acc)
{
    __m256i qy = _mm256_loadu_si256((const __m256i *)y->qs);
    return scale_add(d, x86_dot_u8_i8(x86_unpack_nibbles(x->qs), qy), acc);
}

static inline __m256 block_q5_0_step(const block_q5_0 *x, const block_q8_0 *y, __m256 d,
                                     __m256 acc)
{
    /* q - 16 is the nibble where bit 4 is set and nibble - 16 where it is not. */
    __m256i minus_16 = _mm256_andnot_si256(x86_high_bit_mask(x->qh), _mm256_set1_epi8(16));
    __m256i qx = _mm256_sub_epi8(x86_unpack_nibbles(x->qs), minus_16);
    __m256i qy = _mm256_loadu_si256((const __m256i *)y->qs);
    return scale_add(d, x86_dot_i8(qx, qy), acc);
}

static inline __m256 block_q5_1_step(const block_q5_1 *x, const block_q8_1 *y, __m256 d,
                                     __m256 acc)
{
    __m256i high = _mm256_and_si256(x86_high_bit_mask(x->qh), _mm256_set1_epi8(16));
    __m256i qx = _mm256_or_si256(x86_unpack_nibbles(x->qs), high);
    __m256i qy = _mm256_loadu_si256((const __m256i *)y->qs);
    return scale_add(d, x86_dot_u8_i8(qx, qy), acc);
}

static inline __m256 block_q8_0_step(const block_q8_0 *x, const block_q8_0 *y, __m256 d,
                                     __m256 acc)
{
    __m256i qx = _mm256_loadu_si256((const __m256i *)x->qs);
    __m256i qy = _mm256_loadu_si256((const __m256i *)y->qs);
    return scale_add(d, x86_dot_i8(qx, qy), acc);
}

/*
 * Four blocks per iteration: their scales are converted and multiplied in one go, and two
 * accumulators keep consecutive blocks' FMAs from waiting on each other.
 */
#define BLOCK_DOT_BODY(step)                                                                \
    size_t n_blocks = n / QUANT_QK32, i = 0;                                                \
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();                         \
    for (; i + 4 <= n_blocks; i += 4) {                                                     \
        __m128 d = _mm_mul_ps(x86_halves4(x[i].d, x[i + 1].d, x[i + 2].d, x[i + 3].d),      \
                              x86_halves4(y[i].d, y[i + 1].d, y[i + 2].d, y[i + 3].d));     \
        acc0 = step(x + i, y + i, x86_broadcast_lane(d, 0), acc0);                          \
        acc1 = step(x + i + 1, y + i + 1, x86_broadcast_lane(d, 1), acc1);                  \
        acc0 = step(x + i + 2, y + i + 2, x86_broadcast_lane(d, 2), acc0);                  \
        acc1 = step(x + i + 3, y + i + 3, x86_broadcast_lane(d, 3), acc1);                  \
    }                                                                                       \
    for (; i < n_blocks; i++)                                                               \
        acc0 = step(x + i, y + i, _mm256_set1_ps(x86_half(x[i].d) * x86_half(y[i].d)), acc0);

float quant_dot_q4_0_avx2(size_t n, const void *w, const void *a)
{
    const block_q4_0 *x = w;
    const block_q8_0 *y = a;
    BLOCK_DOT_BODY(block_q4_0_step)
    return x86_hsum_ps(_mm256_add_ps(acc0, acc1));
}

float quant_dot_q5_0_avx2(size_t n, const void *w, const void *a)
{
    const block_q5_0 *x = w;
    const block_q8_0 *y = a;
    BLOCK_DOT_BODY(block_q5_0_step)
    return x86_hsum_ps(_mm256_add_ps(acc0, acc1));
}

float quant_dot_q8_0_avx2(size_t n, const void *w, const void *a)
{
    const block_q8_0 *x = w;
    const block_q8_0 *y = a;
    BLOCK_DOT_BODY(block_q8_0_step)
    return x86_hsum_ps(_mm256_add_ps(acc0, acc1));
}

/* Q4_1 and Q5_1 add each block's min term m * s (formats.md §4.3). */
float quant_dot_q4_1_avx2(size_t n, const void *w, const void *a)
{
    const block_q4_1 *x = w;
    const block_q8_1 *y = a;
    BLOCK_DOT_BODY(block_q4_1_step)
    float min_terms = 0.0f;
    for (size_t b = 0; b < n_blocks; b++)
        min_terms += x86_half(x[b].m) * x86_half(y[b].s);
    return x86_hsum_ps(_mm256_add_ps(acc0, acc1)) + min_terms;
}

float quant_dot_q5_1_avx2(size_t n, const void *w, const void *a)
{
    const block_q5_1 *x = w;
    const block_q8_1 *y = a;
    BLOCK_DOT_BODY(block_q5_1_step)
    float min_terms = 0.0f;
    for (size_t b = 0; b < n_blocks; b++)
        min_terms += x86_half(x[b].m) * x86_half(y[b].s);
    return x86_hsum_ps(_mm256_add_ps(acc0, acc1)) + min_terms;
}

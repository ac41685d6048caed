/*
 * AVX-512 (F/BW/VL/DQ) dot products of F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0 rows,
 * two 32-element blocks per 512-bit register, with a VNNI (vpdpbusd) variant of each block
 * kernel. Chosen only at run time (quant_legacy.c); never called on a CPU without AVX-512.
 * Float sums run in sixteen f32 lanes with FMA: results differ from scalar by rounding only.
 */
#include <stdbool.h>

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

/* The three float kernels share one shape: four accumulators, then a masked tail. */
#define FLOAT_DOT_BODY(elem_type, load)                                                  \
    const elem_type *x = w, *y = a;                                                      \
    __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(),      \
                     _mm512_setzero_ps()};                                               \
    size_t i = 0;                                                                        \
    for (; i + 64 <= n; i += 64)                                                         \
        for (int k = 0; k < 4; k++)                                                      \
            acc[k] = _mm512_fmadd_ps(load(x + i + 16 * k, 0xffff),                       \
                                     load(y + i + 16 * k, 0xffff), acc[k]);              \
    for (; i + 16 <= n; i += 16)                                                         \
        acc[0] = _mm512_fmadd_ps(load(x + i, 0xffff), load(y + i, 0xffff), acc[0]);      \
    if (i < n)                                                                           \
        acc[1] = _mm512_fmadd_ps(load(x + i, tail_mask(n - i)), load(y + i, tail_mask(n - i)), \
                                 acc[1]);                                                \
    return _mm512_reduce_add_ps(                                                         \
        _mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3])));

float quant_dot_f32_avx512(size_t n, const void *w, const void *a)
{
    FLOAT_DOT_BODY(float, load_f32x16)
}

float quant_dot_f16_avx512(size_t n, const void *w, const void *a)
{
    FLOAT_DOT_BODY(uint16_t, load_f16x16)
}

float quant_dot_bf16_avx512(size_t n, const void *w, const void *a)
{
    FLOAT_DOT_BODY(uint16_t, load_bf16x16)
}

/* ---- 32-element block types, two blocks per register ---------------------------------- */

ALWAYS_INLINE __m512i join(__m256i low, __m256i high)
{
    return _mm512_inserti64x4(_mm512_castsi256_si512(low), high, 1);
}

/* Lanes 0-7 scaled by d0 (block i), lanes 8-15 by d1 (block i + 1). */
ALWAYS_INLINE __m512 pair_scale(float d0, float d1)
{
    return _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_set1_ps(d0)), _mm256_set1_ps(d1),
                              1);
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

ALWAYS_INLINE __m512 scale_add(__m512 d, __m512i sums, __m512 acc)
{
    return _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(sums), acc);
}

ALWAYS_INLINE __m512 pair_q4_0(const block_q4_0 *x0, const block_q4_0 *x1,
                                const block_q8_0 *y0, const block_q8_0 *y1, __m512 acc, bool vnni)
{
    __m512i qx = _mm512_sub_epi8(unpack_pair_nibbles(x0->qs, x1->qs), _mm512_set1_epi8(8));
    __m512i qy = load_pair_q8(y0->qs, y1->qs);
    __m512 d = pair_scale(x86_half(x0->d) * x86_half(y0->d), x86_half(x1->d) * x86_half(y1->d));
    return scale_add(d, dot_i8(qx, qy, vnni), acc);
}

ALWAYS_INLINE __m512 pair_q4_1(const block_q4_1 *x0, const block_q4_1 *x1,
                                const block_q8_1 *y0, const block_q8_1 *y1, __m512 acc, bool vnni)
{
    __m512i qx = unpack_pair_nibbles(x0->qs, x1->qs);
    __m512i qy = load_pair_q8(y0->qs, y1->qs);
    __m512 d = pair_scale(x86_half(x0->d) * x86_half(y0->d), x86_half(x1->d) * x86_half(y1->d));
    return scale_add(d, dot_u8_i8(qx, qy, vnni), acc);
}

ALWAYS_INLINE __m512 pair_q5_0(const block_q5_0 *x0, const block_q5_0 *x1,
                                const block_q8_0 *y0, const block_q8_0 *y1, __m512 acc, bool vnni)
{
    /* q - 16: the nibble where bit 4 is set, nibble - 16 where it is not. */
    __m512i nibbles = unpack_pair_nibbles(x0->qs, x1->qs);
    __mmask64 bit4 = pair_high_bits(x0->qh, x1->qh);
    __m512i qx = _mm512_mask_sub_epi8(nibbles, ~bit4, nibbles, _mm512_set1_epi8(16));
    __m512i qy = load_pair_q8(y0->qs, y1->qs);
    __m512 d = pair_scale(x86_half(x0->d) * x86_half(y0->d), x86_half(x1->d) * x86_half(y1->d));
    return scale_add(d, dot_i8(qx, qy, vnni), acc);
}

ALWAYS_INLINE __m512 pair_q5_1(const block_q5_1 *x0, const block_q5_1 *x1,
                                const block_q8_1 *y0, const block_q8_1 *y1, __m512 acc, bool vnni)
{
    __m512i nibbles = unpack_pair_nibbles(x0->qs, x1->qs);
    __mmask64 bit4 = pair_high_bits(x0->qh, x1->qh);
    __m512i qx = _mm512_mask_add_epi8(nibbles, bit4, nibbles, _mm512_set1_epi8(16));
    __m512i qy = load_pair_q8(y0->qs, y1->qs);
    __m512 d = pair_scale(x86_half(x0->d) * x86_half(y0->d), x86_half(x1->d) * x86_half(y1->d));
    return scale_add(d, dot_u8_i8(qx, qy, vnni), acc);
}

ALWAYS_INLINE __m512 pair_q8_0(const block_q8_0 *x0, const block_q8_0 *x1,
                                const block_q8_0 *y0, const block_q8_0 *y1, __m512 acc, bool vnni)
{
    __m512i qx = load_pair_q8(x0->qs, x1->qs);
    __m512i qy = load_pair_q8(y0->qs, y1->qs);
    __m512 d = pair_scale(x86_half(x0->d) * x86_half(y0->d), x86_half(x1->d) * x86_half(y1->d));
    return scale_add(d, dot_i8(qx, qy, vnni), acc);
}

/*
 * Four blocks per iteration in two accumulators. An odd last block is paired with itself and
 * the duplicate's lanes dropped, so no block past the row is read.
 */
#define PAIR_DOT_BODY(pair, vnni)                                                          \
    size_t n_blocks = n / QUANT_QK32, i = 0;                                               \
    __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();                        \
    for (; i + 4 <= n_blocks; i += 4) {                                                    \
        acc0 = pair(x + i, x + i + 1, y + i, y + i + 1, acc0, vnni);                       \
        acc1 = pair(x + i + 2, x + i + 3, y + i + 2, y + i + 3, acc1, vnni);               \
    }                                                                                      \
    for (; i + 2 <= n_blocks; i += 2)                                                      \
        acc0 = pair(x + i, x + i + 1, y + i, y + i + 1, acc0, vnni);                       \
    if (i < n_blocks) {                                                                    \
        __m512 last = pair(x + i, x + i, y + i, y + i, _mm512_setzero_ps(), vnni);         \
        acc1 = _mm512_add_ps(acc1, _mm512_maskz_mov_ps(0x00ff, last));                     \
    }

/* Pairs of Q4_1/Q5_1 blocks add their min terms m * s after the integer part. */
ALWAYS_INLINE float min_terms_q4_1(const block_q4_1 *x, const block_q8_1 *y, size_t n_blocks)
{
    float sum = 0.0f;
    for (size_t b = 0; b < n_blocks; b++)
        sum += x86_half(x[b].m) * x86_half(y[b].s);
    return sum;
}

ALWAYS_INLINE float min_terms_q5_1(const block_q5_1 *x, const block_q8_1 *y, size_t n_blocks)
{
    float sum = 0.0f;
    for (size_t b = 0; b < n_blocks; b++)
        sum += x86_half(x[b].m) * x86_half(y[b].s);
    return sum;
}

ALWAYS_INLINE float dot_q4_0(size_t n, const void *w, const void *a, bool vnni)
{
    const block_q4_0 *x = w;
    const block_q8_0 *y = a;
    PAIR_DOT_BODY(pair_q4_0, vnni)
    return _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
}

ALWAYS_INLINE float dot_q4_1(size_t n, const void *w, const void *a, bool vnni)
{
    const block_q4_1 *x = w;
    const block_q8_1 *y = a;
    PAIR_DOT_BODY(pair_q4_1, vnni)
    return _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1)) + min_terms_q4_1(x, y, n_blocks);
}

ALWAYS_INLINE float dot_q5_0(size_t n, const void *w, const void *a, bool vnni)
{
    const block_q5_0 *x = w;
    const block_q8_0 *y = a;
    PAIR_DOT_BODY(pair_q5_0, vnni)
    return _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
}

ALWAYS_INLINE float dot_q5_1(size_t n, const void *w, const void *a, bool vnni)
{
    const block_q5_1 *x = w;
    const block_q8_1 *y = a;
    PAIR_DOT_BODY(pair_q5_1, vnni)
    return _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1)) + min_terms_q5_1(x, y, n_blocks);
}

ALWAYS_INLINE float dot_q8_0(size_t n, const void *w, const void *a, bool vnni)
{
    const block_q8_0 *x = w;
    const block_q8_0 *y = a;
    PAIR_DOT_BODY(pair_q8_0, vnni)
    return _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
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


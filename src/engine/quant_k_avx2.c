/*
 * AVX2 dot products of the K-quants against Q8_K activations. Integer
 * sums are exact and equal the scalar ones; only the float accumulation order differs
 * (one FMA per super-block into 8 lanes, reduced at the end; the types with packed kernels
 * add super-blocks in order into one sum, as those kernels do). Quants are made unsigned
 * for vpmaddubsw; any bias (Q3_K's -4, Q6_K's -32) is taken back out through the Q8_K
 * block sums, as are the Q2_K/Q4_K/Q5_K mins.
 */
#include <immintrin.h>

#include "cpu.h"
#include "quant_k_blocks.h"
#include "quant_x86.h"

static inline float f16_field(const uint8_t *p)
{
    return _cvtsh_ss(kq_read_u16(p));
}

static inline __m256i load256(const void *p)
{
    return _mm256_loadu_si256((const __m256i *)p);
}

/* The 8 d of a half super-block (16 f16 at `block`: the half's are 16 bytes in) as floats. */
static inline __m256 half_d(const uint8_t *block, size_t half)
{
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(block + 16 * half)));
}

/*
 * For types with one scale per 16 elements: byte-shuffle controls that, from eight i16
 * scales repeated in both 128-bit lanes, broadcast scale 2k over the low lane and 2k+1 over
 * the high lane, matching a 32-element vector whose halves are two 16-element groups.
 */
static const uint8_t scale_pair_shuffle[4][32] = {
    {0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1,
     2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3},
    {4, 5, 4, 5, 4, 5, 4, 5, 4, 5, 4, 5, 4, 5, 4, 5,
     6, 7, 6, 7, 6, 7, 6, 7, 6, 7, 6, 7, 6, 7, 6, 7},
    {8, 9, 8, 9, 8, 9, 8, 9, 8, 9, 8, 9, 8, 9, 8, 9,
     10, 11, 10, 11, 10, 11, 10, 11, 10, 11, 10, 11, 10, 11, 10, 11},
    {12, 13, 12, 13, 12, 13, 12, 13, 12, 13, 12, 13, 12, 13, 12, 13,
     14, 15, 14, 15, 14, 15, 14, 15, 14, 15, 14, 15, 14, 15, 14, 15},
};

static inline __m256i scale_pair(__m256i scales16x2, int k)
{
    return _mm256_shuffle_epi8(scales16x2, load256(scale_pair_shuffle[k]));
}

static inline __m128i scales_from_words(const uint32_t words[4])
{
    return _mm_setr_epi32((int)words[0], (int)words[1], (int)words[2], (int)words[3]);
}

/* All 16 words of a 256-bit vector = word j of a 128-bit lane repeated in both lanes. */
static inline __m256i broadcast_word(__m256i words8x2, int j)
{
    return _mm256_shuffle_epi8(words8x2, _mm256_set1_epi16((short)(0x0100 + 0x0202 * j)));
}

/* The high 8 bytes of v moved down when `upper`, else v (an immediate shift needs a constant). */
static inline __m128i upper_if(__m128i v, int upper)
{
    return upper ? _mm_unpackhi_epi64(v, v) : v;
}

/* Eight i16 scales of one 128-element half, repeated in both lanes. */
static inline __m256i half_scales(__m128i scales8_i16)
{
    return _mm256_broadcastsi128_si256(scales8_i16);
}

/* Sum over 16 groups of bsums[g] * weights[g] (16 i16 each), as 8 i32 partial sums. */
static inline __m256i bsums_dot(const block_q8_k *y, __m256i weights16)
{
    return _mm256_madd_epi16(load256(y->bsums), weights16);
}

/*
 * Q2_K, Q4_K and Q5_K add their super-blocks in order into one f32 sum, two steps each, as
 * the packed kernels below and the AVX-512 level do: acc = fma(f32(dx * dy), isum, acc), then
 * acc = fma(f32(dmin * -dy), summs, acc), with isum and summs exact.
 */
static inline float add_block_with_min(float acc, const uint8_t d[2], const uint8_t dmin[2],
                                       float dy, __m256i isum, __m256i summs)
{
    acc = x86_fused_add(f16_field(d) * dy, x86_hsum_epi32(isum), acc);
    return x86_fused_add(f16_field(dmin) * -dy, x86_hsum_epi32(summs), acc);
}

float quant_k_dot_q2_k_avx2(size_t n, const void *w, const void *a)
{
    const block_q2_k *x = w;
    const block_q8_k *y = a;
    const __m256i mask2 = _mm256_set1_epi8(3);
    float acc = 0.0f;
    for (size_t i = 0; i < n / QK_K; i++, x++, y++) {
        __m128i packed = _mm_loadu_si128((const __m128i *)x->scales);
        __m128i sc = _mm_and_si128(packed, _mm_set1_epi8(15));
        __m128i mins = _mm_and_si128(_mm_srli_epi16(packed, 4), _mm_set1_epi8(15));
        __m256i summs = bsums_dot(y, _mm256_cvtepu8_epi16(mins));

        __m256i sumi = _mm256_setzero_si256();
        for (int h = 0; h < 2; h++) {
            __m256i scales = half_scales(_mm_cvtepu8_epi16(upper_if(sc, h)));
            __m256i bits = load256(x->qs + 32 * h);
            for (int k = 0; k < 4; k++) {
                __m256i q = _mm256_and_si256(bits, mask2);
                __m256i p = _mm256_maddubs_epi16(q, load256(y->qs + 128 * h + 32 * k));
                sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p, scale_pair(scales, k)));
                bits = _mm256_srli_epi16(bits, 2);
            }
        }
        acc = add_block_with_min(acc, x->d, x->dmin, q8k_d(y), sumi, summs);
    }
    return acc;
}

/* Q3_K adds its super-blocks in order, as the packed kernels do (and Q6_K below):
 * acc = fma(f32(dy * dx), isum, acc), isum exact. */
float quant_k_dot_q3_k_avx2(size_t n, const void *w, const void *a)
{
    const block_q3_k *x = w;
    const block_q8_k *y = a;
    const __m256i mask2 = _mm256_set1_epi8(3), one = _mm256_set1_epi8(1);
    float acc = 0.0f;
    for (size_t i = 0; i < n / QK_K; i++, x++, y++) {
        uint32_t words[4];
        kq_scales_q3_words(x->scales, words);
        __m128i sc = _mm_sub_epi8(scales_from_words(words), _mm_set1_epi8(32));
        /* q = stored (0..7) - 4, so subtract 4 * sum_g S_g * bsums[g] */
        __m256i bias = bsums_dot(y, _mm256_cvtepi8_epi16(sc));

        __m256i sumi = _mm256_setzero_si256();
        __m256i hbits = load256(x->hmask);
        for (int h = 0; h < 2; h++) {
            __m256i scales = half_scales(_mm_cvtepi8_epi16(upper_if(sc, h)));
            __m256i bits = load256(x->qs + 32 * h);
            for (int k = 0; k < 4; k++) {
                __m256i high = _mm256_slli_epi16(_mm256_and_si256(hbits, one), 2);
                __m256i q = _mm256_or_si256(_mm256_and_si256(bits, mask2), high);
                __m256i p = _mm256_maddubs_epi16(q, load256(y->qs + 128 * h + 32 * k));
                sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p, scale_pair(scales, k)));
                bits = _mm256_srli_epi16(bits, 2);
                hbits = _mm256_srli_epi16(hbits, 1);
            }
        }
        sumi = _mm256_sub_epi32(sumi, _mm256_slli_epi32(bias, 2));
        acc = x86_fused_add(q8k_d(y) * f16_field(x->d), x86_hsum_epi32(sumi), acc);
    }
    return acc;
}

/* Mins of a Q4_K/Q5_K block (bytes 8..15 of sc_m), each repeated for its two 16-element
 * groups (16 i16). */
static inline __m256i k4_mins_per_group(__m128i sc_m)
{
    __m128i mins = _mm_cvtepu8_epi16(_mm_unpackhi_epi64(sc_m, sc_m));
    return _mm256_set_m128i(_mm_unpackhi_epi16(mins, mins), _mm_unpacklo_epi16(mins, mins));
}

/*
 * A Q4_K / Q5_K block's eight scales as i16 words repeated in both lanes (broadcast_word's
 * source), and summs = sum_g bsums[g] * m_(g/2) as 8 exact i32 partial sums.
 */
static inline __m256i k4_scales(const uint8_t packed[12], const block_q8_k *y, __m256i *summs)
{
    uint32_t words[4];
    kq_scales_k4_words(packed, words);
    __m128i sc_m = scales_from_words(words);
    *summs = bsums_dot(y, k4_mins_per_group(sc_m));
    return _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(sc_m));
}

float quant_k_dot_q4_k_avx2(size_t n, const void *w, const void *a)
{
    const block_q4_k *x = w;
    const block_q8_k *y = a;
    const __m256i mask4 = _mm256_set1_epi8(15);
    float acc = 0.0f;
    for (size_t i = 0; i < n / QK_K; i++, x++, y++) {
        __m256i summs;
        __m256i scales = k4_scales(x->scales, y, &summs);
        __m256i sumi = _mm256_setzero_si256();
        for (int c = 0; c < 4; c++) {
            __m256i bytes = load256(x->qs + 32 * c);
            __m256i lo = _mm256_and_si256(bytes, mask4);
            __m256i hi = _mm256_and_si256(_mm256_srli_epi16(bytes, 4), mask4);
            __m256i p_lo = _mm256_maddubs_epi16(lo, load256(y->qs + 64 * c));
            __m256i p_hi = _mm256_maddubs_epi16(hi, load256(y->qs + 64 * c + 32));
            p_lo = _mm256_madd_epi16(p_lo, broadcast_word(scales, 2 * c));
            p_hi = _mm256_madd_epi16(p_hi, broadcast_word(scales, 2 * c + 1));
            sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(p_lo, p_hi));
        }
        acc = add_block_with_min(acc, x->d, x->dmin, q8k_d(y), sumi, summs);
    }
    return acc;
}

/* Q5_K as Q4_K, with the 5th bit of element l of sub-block j in bit j of qh[l]. A maddubs
 * pair is at most 2 * 31 * 128 = 7936, one pair per i16, widened at once by its madd. */
float quant_k_dot_q5_k_avx2(size_t n, const void *w, const void *a)
{
    const block_q5_k *x = w;
    const block_q8_k *y = a;
    const __m256i mask4 = _mm256_set1_epi8(15), one = _mm256_set1_epi8(1);
    float acc = 0.0f;
    for (size_t i = 0; i < n / QK_K; i++, x++, y++) {
        __m256i summs;
        __m256i scales = k4_scales(x->scales, y, &summs);
        __m256i sumi = _mm256_setzero_si256();
        __m256i hbits = load256(x->qh);
        for (int c = 0; c < 4; c++) {
            __m256i bytes = load256(x->qs + 32 * c);
            __m256i h_lo = _mm256_and_si256(hbits, one);
            __m256i h_hi = _mm256_and_si256(_mm256_srli_epi16(hbits, 1), one);
            __m256i lo = _mm256_and_si256(bytes, mask4);
            __m256i hi = _mm256_and_si256(_mm256_srli_epi16(bytes, 4), mask4);
            lo = _mm256_or_si256(lo, _mm256_slli_epi16(h_lo, 4));
            hi = _mm256_or_si256(hi, _mm256_slli_epi16(h_hi, 4));
            __m256i p_lo = _mm256_maddubs_epi16(lo, load256(y->qs + 64 * c));
            __m256i p_hi = _mm256_maddubs_epi16(hi, load256(y->qs + 64 * c + 32));
            p_lo = _mm256_madd_epi16(p_lo, broadcast_word(scales, 2 * c));
            p_hi = _mm256_madd_epi16(p_hi, broadcast_word(scales, 2 * c + 1));
            sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(p_lo, p_hi));
            hbits = _mm256_srli_epi16(hbits, 2);
        }
        acc = add_block_with_min(acc, x->d, x->dmin, q8k_d(y), sumi, summs);
    }
    return acc;
}

/* Q6_K likewise: acc = fma(f32(dy * dx), isum, acc) per super-block, isum exact. */
float quant_k_dot_q6_k_avx2(size_t n, const void *w, const void *a)
{
    const block_q6_k *x = w;
    const block_q8_k *y = a;
    const __m256i mask4 = _mm256_set1_epi8(15), mask2 = _mm256_set1_epi8(3);
    float acc = 0.0f;
    for (size_t i = 0; i < n / QK_K; i++, x++, y++) {
        __m128i sc = _mm_loadu_si128((const __m128i *)x->scales);
        /* q = stored (0..63) - 32, so subtract 32 * sum_g scale_g * bsums[g] */
        __m256i bias = bsums_dot(y, _mm256_cvtepi8_epi16(sc));

        __m256i sumi = _mm256_setzero_si256();
        for (int h = 0; h < 2; h++) {
            __m256i scales = half_scales(_mm_cvtepi8_epi16(upper_if(sc, h)));
            __m256i ql0 = load256(x->ql + 64 * h), ql1 = load256(x->ql + 64 * h + 32);
            __m256i qh = load256(x->qh + 32 * h);
            __m256i q[4] = {
                _mm256_and_si256(ql0, mask4),
                _mm256_and_si256(ql1, mask4),
                _mm256_and_si256(_mm256_srli_epi16(ql0, 4), mask4),
                _mm256_and_si256(_mm256_srli_epi16(ql1, 4), mask4),
            };
            for (int k = 0; k < 4; k++) {
                __m256i high = _mm256_slli_epi16(_mm256_and_si256(qh, mask2), 4);
                __m256i qk = _mm256_or_si256(q[k], high);
                __m256i p = _mm256_maddubs_epi16(qk, load256(y->qs + 128 * h + 32 * k));
                sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p, scale_pair(scales, k)));
                qh = _mm256_srli_epi16(qh, 2);
            }
        }
        sumi = _mm256_sub_epi32(sumi, _mm256_slli_epi32(bias, 5));
        acc = x86_fused_add(q8k_d(y) * f16_field(x->d), x86_hsum_epi32(sumi), acc);
    }
    return acc;
}

/* ---- packed Q4_K and Q5_K ------------------------------------------------------------- */

/*
 * Rows packed by quant_k_pack_q4_k / quant_k_pack_q5_k, read as two halves of 8 rows, one
 * 256-bit lane per row. The layouts differ only in Q5_K's qh vectors, so the two share their
 * scales and mins (k4_half_scales, k4_summs). A Q4_K sub-block's 8 maddubs products (pair
 * sums of at most 2 * 15 * 128 = 3840) add up in i16 without saturating (30720); madd
 * against the row's scale in both i16 halves of its lane then widens and scales them in one
 * exact step. Q5_K's pairs reach 2 * 31 * 128 = 7936: four of them (x86_maddubs_words4) at
 * most 31744, still exact, but eight would not be, so each four are widened by their own madd.
 */
enum { PACK_ROWS = QUANT_PACK_ROWS, HALF_ROWS = PACK_ROWS / 2, TILE_TOKENS = 4 };
_Static_assert((int)TILE_TOKENS <= (int)QUANT_K_TILE_TOKENS, "a tile's rows fit quant_k_tile");

/* Byte k (0..3) of every 32-bit lane in both of its i16 halves. k must be a constant where it
 * is inlined (hence the unroll pragmas of the loops that pass it): GCC 12 left those loops
 * rolled and built each index with 16 vpinsrb, which made the Q4_K / Q6_K kernels
 * compute-bound even in cache. */
static inline __m256i lane_byte_pair(__m256i words, int k)
{
    const __m128i index = _mm_setr_epi8((char)k, -1, (char)k, -1, (char)(4 + k), -1,
                                        (char)(4 + k), -1, (char)(8 + k), -1, (char)(8 + k), -1,
                                        (char)(12 + k), -1, (char)(12 + k), -1);
    return _mm256_shuffle_epi8(words, _mm256_broadcastsi128_si256(index));
}

/*
 * Bit `bit` (0..7, a constant where it is inlined) of every byte of qh at bit 4, the others
 * clear: a Q5_K 5th bit at its place in a byte of quants. A 16-bit shift up by at most 4 or
 * down by at most 3 keeps it in its byte.
 */
static inline __m256i fifth_bit(__m256i qh, int bit)
{
    __m256i at4 = bit < 4 ? _mm256_slli_epi16(qh, 4 - bit) : _mm256_srli_epi16(qh, bit - 4);
    return _mm256_and_si256(at4, _mm256_set1_epi8(0x10));
}

/*
 * The Q5_K quants of sub-block 2c + high of 8 rows, one word per row in each q[j]: the low
 * (high = 0) or high nibbles of chunk c's 8 words, with the 5th bits from qh word j (bit
 * 2c + high of each byte).
 */
static inline __attribute__((always_inline)) void
q5_k_sub_block(const uint8_t *lanes, int c, int high, __m256i q[8])
{
    const __m256i low4 = _mm256_set1_epi8(0x0f);
    const uint8_t *chunk = lanes + Q5K_QS_AT + 64 * 8 * c;
    for (int j = 0; j < 8; j++) {
        __m256i bytes = load256(chunk + 64 * j);
        q[j] = _mm256_or_si256(_mm256_and_si256(high ? _mm256_srli_epi16(bytes, 4) : bytes, low4),
                               fifth_bit(load256(lanes + Q5K_QH_AT + 64 * j), 2 * c + high));
    }
}

/* isum[t] += scale * (sum over one Q5_K sub-block of q . qy), q the 8 words of the sub-block,
 * each four words' products widened by their own madd (see above). */
static inline __attribute__((always_inline)) void
add_q5_k_sub_block(const __m256i q[8], __m256i scale, const block_q8_k *const *y, size_t b,
                   int at, size_t n_tok, __m256i *isum)
{
    for (size_t t = 0; t < n_tok; t++) {
        const int8_t *qy = y[t][b].qs + at;
        __m256i p0 = x86_maddubs_words4(q, qy), p1 = x86_maddubs_words4(q + 4, qy + 16);
        isum[t] = _mm256_add_epi32(isum[t], _mm256_add_epi32(_mm256_madd_epi16(p0, scale),
                                                             _mm256_madd_epi16(p1, scale)));
    }
}

_Static_assert((int)Q4K_SCALES_AT == (int)Q5K_SCALES_AT, "Q4_K and Q5_K scales at one place");

/*
 * The float steps of a half super-block of the types with mins (Q2_K, Q4_K, Q5_K; 16 d then
 * 16 dmin, f16, at `block`), the order of their dots: acc[t] = fma(f32(dx * dy), isum[t],
 * acc[t]), then acc[t] = fma(f32(dmin * -dy), summs[t], acc[t]).
 */
static inline __attribute__((always_inline)) void
add_half_block_with_min(const uint8_t *block, size_t half, const __m256i *isum,
                        const __m256i *summs, const block_q8_k *const *y, size_t b,
                        size_t n_tok, __m256 *acc)
{
    __m256 dx = half_d(block, half), dmin = half_d(block + 32, half);
    for (size_t t = 0; t < n_tok; t++) {
        float dy = q8k_d(&y[t][b]);
        acc[t] = _mm256_fmadd_ps(_mm256_mul_ps(dx, _mm256_set1_ps(dy)),
                                 _mm256_cvtepi32_ps(isum[t]), acc[t]);
        acc[t] = _mm256_fmadd_ps(_mm256_mul_ps(dmin, _mm256_set1_ps(-dy)),
                                 _mm256_cvtepi32_ps(summs[t]), acc[t]);
    }
}

/* kq_scales_k4_words on the 8 rows of one half at once (lanes = block + 32 * half): scales
 * 0..3 / 4..7 in sc[0] / sc[1], mins likewise in m. */
static inline __attribute__((always_inline)) void
k4_half_scales(const uint8_t *lanes, __m256i sc[2], __m256i m[2])
{
    const __m256i low4 = _mm256_set1_epi8(0x0f), low6 = _mm256_set1_epi8(0x3f);
    const __m256i low2 = _mm256_set1_epi8(0x03);
    __m256i w0 = load256(lanes + Q4K_SCALES_AT), w1 = load256(lanes + Q4K_SCALES_AT + 64);
    __m256i w2 = load256(lanes + Q4K_SCALES_AT + 128);
    sc[0] = _mm256_and_si256(w0, low6);
    sc[1] = _mm256_or_si256(_mm256_and_si256(w2, low4),
                            _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(w0, 6), low2), 4));
    m[0] = _mm256_and_si256(w1, low6);
    m[1] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(w2, 4), low4),
                           _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(w1, 6), low2), 4));
}

/* vpshufb indices of bytes 2 * odd and 2 * odd + 1 of every 32-bit lane, each widened to an
 * i16 (a row's mins 2j and 2j + 1, j % 2 = odd, of its word j / 2). */
static inline __m256i min_pair_index(int odd)
{
    const unsigned o = 0x20002u * (unsigned)odd;
    __m128i lane = _mm_setr_epi32((int)(0x80018000u + o), (int)(0x80058004u + o),
                                  (int)(0x80098008u + o), (int)(0x800d800cu + o));
    return _mm256_broadcastsi128_si256(lane);
}

/* summs[t] = sum over the 8 sub-blocks of min_k times the sub-block's sum: the mins of
 * sub-blocks 2j and 2j + 1 as an i16 pair in each lane against their two sums
 * (quant_k_sub_block_sums), one madd per pair. The sums' address is hidden from GCC, which
 * otherwise kept a tile's first-half broadcasts for its second half and spilled them to the
 * stack (llvm-mca shows the extra stack accesses and cycles). */
static inline __attribute__((always_inline)) void
k4_summs(const __m256i m[2], const quant_k_tile *tile, size_t b, size_t n_tok, __m256i *summs)
{
    for (size_t t = 0; t < n_tok; t++)
        summs[t] = _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++) {
        __m256i mins = _mm256_shuffle_epi8(m[j / 2], min_pair_index(j % 2));
        for (size_t t = 0; t < n_tok; t++) {
            const uint8_t *sums = tile->sub_sums[t] + 16 * b + 4 * j;
            __asm__ volatile("" : "+r"(sums));
            summs[t] = _mm256_add_epi32(summs[t], _mm256_madd_epi16(mins, x86_set1_word(sums)));
        }
    }
}

/* Rows 8 * half .. 8 * half + 7 of Q5_K super-block b of one group (at `block`) against a
 * tile of n_tok (2..4) tokens. */
static inline __attribute__((always_inline)) void
half_block_q5_k(const uint8_t *block, size_t b, size_t half, const quant_k_tile *tile,
                size_t n_tok, size_t prefetch, __m256 *acc)
{
    const block_q8_k *const *y = tile->y;
    x86_prefetch_slice(block, PACK_ROWS * sizeof(block_q5_k), prefetch, 0, 1);
    const uint8_t *lanes = block + 32 * half;
    __m256i sc[2], m[2];
    k4_half_scales(lanes, sc, m);
    __m256i isum[TILE_TOKENS], summs[TILE_TOKENS];
    for (size_t t = 0; t < n_tok; t++)
        isum[t] = _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int c = 0; c < 4; c++) {
        __m256i q[8];
        q5_k_sub_block(lanes, c, 0, q);
        add_q5_k_sub_block(q, lane_byte_pair(sc[c / 2], 2 * (c % 2)), y, b, 64 * c, n_tok, isum);
        q5_k_sub_block(lanes, c, 1, q);
        add_q5_k_sub_block(q, lane_byte_pair(sc[c / 2], 2 * (c % 2) + 1), y, b, 64 * c + 32,
                           n_tok, isum);
    }
    k4_summs(m, tile, b, n_tok, summs);
    add_half_block_with_min(block, half, isum, summs, y, b, n_tok, acc);
}

/*
 * All 16 rows of Q4_K or Q5_K (q5) super-block b (at `block`) against a tile of n_tok (1..4)
 * tokens, word by word: each activation broadcast serves both halves, and each half and token
 * sums its products in i16 before a madd by the sub-block's scale widens them: a Q4_K
 * sub-block's 8 words at once (at most 8 * 2 * 15 * 128 = 30720), a Q5_K one's four at a time
 * (4 * 2 * 31 * 128 = 31744; eight would not fit). Q5_K's 5th bits come from qh word j, bit
 * s of each byte. The empty asm keeps GCC 12 from reassociating the i16 adds into a tree
 * over all products, which spilled them (as in the legacy tiles). Q5_K comes here for one
 * token only (X86_DEFINE_PACKED_GROUP_WIDE_ONE): its half-block kernel takes a sub-block's 8
 * words into registers first, which GCC spilled with one token, while with several tokens
 * this tile spilled more.
 */
static inline __attribute__((always_inline)) void
tile_block_k4(const uint8_t *block, size_t b, const quant_k_tile *tile, size_t n_tok,
              size_t prefetch, bool q5, __m256 acc[2][TILE_TOKENS])
{
    const block_q8_k *const *y = tile->y;
    const __m256i low4 = _mm256_set1_epi8(0x0f);
    const int words_per_madd = q5 ? 4 : 8;
    __m256i isum[2][TILE_TOKENS], lanes = _mm256_setzero_si256();
    for (int half = 0; half < 2; half++)
        for (size_t t = 0; t < n_tok; t++)
            isum[half][t] = _mm256_setzero_si256();
    /* the mins' sums first (GCC keeps them on the stack until the float steps): computed
     * after the products, they made the end of each block wait on them */
    __m256i summs[2][TILE_TOKENS];
    for (int half = 0; half < 2; half++) {
        __m256i sc[2], m[2];
        k4_half_scales(block + 32 * half, sc, m);
        k4_summs(m, tile, b, n_tok, summs[half]);
    }
#pragma GCC unroll 8
    for (int s = 0; s < 8; s++) {
        x86_prefetch_slice(block, PACK_ROWS * (q5 ? sizeof(block_q5_k) : sizeof(block_q4_k)),
                           prefetch, s, 8);
        const uint8_t *chunk = block + (q5 ? Q5K_QS_AT : Q4K_QS_AT) + 64 * 8 * (s / 2);
        __m256i sum[2][TILE_TOKENS];
#pragma GCC unroll 8
        for (int j = 0; j < 8; j++) {
            __m256i q[2];
            for (int half = 0; half < 2; half++) {
                __m256i bytes = load256(chunk + 64 * j + 32 * half);
                q[half] = _mm256_and_si256(s % 2 ? _mm256_srli_epi16(bytes, 4) : bytes, low4);
                if (q5)
                    q[half] = _mm256_or_si256(
                        q[half], fifth_bit(load256(block + Q5K_QH_AT + 64 * j + 32 * half), s));
            }
            if (n_tok == 1 && j % 4 == 0)
                lanes = x86_lane_words(y[0][b].qs + 32 * s + 4 * j);
            for (size_t t = 0; t < n_tok; t++) {
                __m256i w = n_tok == 1 ? x86_lane_word(lanes, j % 4)
                                       : x86_set1_word(y[t][b].qs + 32 * s + 4 * j);
                for (int half = 0; half < 2; half++) {
                    __m256i p = _mm256_maddubs_epi16(q[half], w);
                    sum[half][t] = j % words_per_madd == 0 ? p : _mm256_add_epi16(sum[half][t], p);
                }
                __asm__("" : "+x"(sum[0][t]), "+x"(sum[1][t]));
            }
            if (j % words_per_madd != words_per_madd - 1)
                continue;
            for (int half = 0; half < 2; half++) {
                __m256i sc[2], m[2];
                k4_half_scales(block + 32 * half, sc, m);
                __m256i scale = lane_byte_pair(sc[s / 4], s % 4);
                for (size_t t = 0; t < n_tok; t++) {
                    isum[half][t] =
                        _mm256_add_epi32(isum[half][t], _mm256_madd_epi16(sum[half][t], scale));
                    __asm__("" : "+x"(isum[half][t]));
                }
            }
        }
    }
    for (int half = 0; half < 2; half++)
        add_half_block_with_min(block, half, isum[half], summs[half], y, b, n_tok, acc[half]);
}

static inline __attribute__((always_inline)) void
tile_block_q4_k(const uint8_t *block, size_t b, const quant_k_tile *tile, size_t n_tok,
                size_t prefetch, __m256 acc[2][TILE_TOKENS])
{
    tile_block_k4(block, b, tile, n_tok, prefetch, false, acc);
}

static inline __attribute__((always_inline)) void
tile_block_q5_k(const uint8_t *block, size_t b, const quant_k_tile *tile, size_t n_tok,
                size_t prefetch, __m256 acc[2][TILE_TOKENS])
{
    tile_block_k4(block, b, tile, n_tok, prefetch, true, acc);
}

/* ---- packed Q6_K ---------------------------------------------------------------------- */

/* Signed byte k (0..3) of every 32-bit lane in both of its i16 halves. */
static inline __m256i lane_sbyte_pair(__m256i words, int k)
{
    const __m128i index = _mm_setr_epi8(-1, (char)k, -1, (char)k, -1, (char)(4 + k), -1,
                                        (char)(4 + k), -1, (char)(8 + k), -1, (char)(8 + k), -1,
                                        (char)(12 + k), -1, (char)(12 + k));
    return _mm256_srai_epi16(_mm256_shuffle_epi8(words, _mm256_broadcastsi128_si256(index)), 8);
}

/*
 * out[t] = sum_g scale_g * bsums[g] of token t for 16 scale bytes per row in -128..127 (or
 * 0..127) of 8 rows, word k (scales 4k..4k + 3) of every row in sw[k]: the Q3_K / Q6_K
 * offsets' share of a sum and the Q2_K mins. Scales go as i16 pairs (2j, 2j + 1) into madd.
 */
static inline __attribute__((always_inline)) void
scales_dot_bsums(const __m256i sw[4], const block_q8_k *const *y, size_t b, size_t n_tok,
                 __m256i *out)
{
    for (size_t t = 0; t < n_tok; t++)
        out[t] = _mm256_setzero_si256();
    for (int k = 0; k < 4; k++) {
        __m256i even = _mm256_srai_epi16(_mm256_slli_epi16(sw[k], 8), 8); /* s0, s2 */
        __m256i odd = _mm256_srai_epi16(sw[k], 8);                         /* s1, s3 */
        __m256i pair01 = _mm256_blend_epi16(even, _mm256_slli_epi32(odd, 16), 0xaa);
        __m256i pair23 = _mm256_blend_epi16(_mm256_srli_epi32(even, 16), odd, 0xaa);
        for (size_t t = 0; t < n_tok; t++) {
            const uint8_t *bs = y[t][b].bsums + 8 * k;
            out[t] = _mm256_add_epi32(out[t], _mm256_madd_epi16(pair01, x86_set1_word(bs)));
            out[t] = _mm256_add_epi32(out[t], _mm256_madd_epi16(pair23, x86_set1_word(bs + 4)));
        }
    }
}

/*
 * One half super-block's float step for the types whose kernels read q + 2^offset_log2 (Q3_K:
 * 4, Q6_K: 32) and that have 16 signed scale bytes per row in sw[] (scales_dot_bsums):
 * acc[t] = fma(f32(dx * dy), isum[t] - 2^offset_log2 * sum_g scale_g * bsums[g], acc[t]),
 * the order of their dots.
 */
static inline __attribute__((always_inline)) void
add_offset_block(const uint8_t *block, size_t half, const __m256i sw[4], const __m256i *isum,
                 int offset_log2, const block_q8_k *const *y, size_t b, size_t n_tok,
                 __m256 *acc)
{
    __m256i bias[TILE_TOKENS];
    scales_dot_bsums(sw, y, b, n_tok, bias);
    __m256 dx = half_d(block, half);
    for (size_t t = 0; t < n_tok; t++) {
        __m256i total = _mm256_sub_epi32(isum[t], _mm256_slli_epi32(bias[t], offset_log2));
        acc[t] = _mm256_fmadd_ps(_mm256_mul_ps(dx, _mm256_set1_ps(q8k_d(&y[t][b]))),
                                 _mm256_cvtepi32_ps(total), acc[t]);
    }
}

/* Quarter k (q + 32, 0..63) of the 8 rows' words v of half h, from triple (h, v) of
 * quant_k_pack_q6_k: bits 0-5 of X, Y, Z for k = 0, 1, 2; k = 3 gathers bits 6-7 of all
 * three. */
static inline __m256i q6_quarter(const uint8_t *lanes, int h, int v, int k)
{
    const uint8_t *triple = lanes + Q6K_TRIPLE_AT(h, v);
    if (k < 3)
        return _mm256_and_si256(load256(triple + 64 * k), _mm256_set1_epi8(0x3f));
    __m256i x = _mm256_and_si256(_mm256_srli_epi16(load256(triple), 6), _mm256_set1_epi8(0x03));
    __m256i y = _mm256_and_si256(_mm256_srli_epi16(load256(triple + 64), 4),
                                 _mm256_set1_epi8(0x0c));
    __m256i z = _mm256_and_si256(_mm256_srli_epi16(load256(triple + 128), 2),
                                 _mm256_set1_epi8(0x30));
    return _mm256_or_si256(_mm256_or_si256(x, y), z);
}

/* Group g's scale of 8 rows (lanes = block + 32 * half) in both i16 halves of each lane. The
 * word's address is hidden from GCC, so that each group reloads it from L1 (see below). */
static inline __attribute__((always_inline)) __m256i q6_group_scale(const uint8_t *lanes, int g)
{
    const uint8_t *scale_word = lanes + Q6K_SCALES_AT + 64 * (g / 4);
    __asm__ volatile("" : "+r"(scale_word));
    return lane_sbyte_pair(load256(scale_word), g % 4);
}

/* The offset step of rows 8 * half .. 8 * half + 7 (add_offset_block with Q6_K's 32). */
static inline __attribute__((always_inline)) void
q6_add_offset(const uint8_t *block, size_t half, const __m256i *isum,
              const block_q8_k *const *y, size_t b, size_t n_tok, __m256 *acc)
{
    __m256i sw[4];
    for (int k = 0; k < 4; k++)
        sw[k] = load256(block + 32 * half + Q6K_SCALES_AT + 64 * k);
    add_offset_block(block, half, sw, isum, 5, y, b, n_tok, acc);
}

/*
 * Rows 8 * half .. 8 * half + 7 of one group against n_tok tokens. A 16-element group's
 * products: maddubs pair sums of at most 2 * 63 * 128 = 16128, two of them added in i16
 * (32256), then madd against the group's scale in both i16 halves, exact in i32.
 * Registers are short here, so two empty asms steer GCC 12: one hides the scale words'
 * address, so that each group reloads its word from L1 instead of holding all four from
 * the start to the offset step; one ties isum to its register at each step, which GCC
 * otherwise reassociated into a tree of spilled partial sums.
 */
static inline __attribute__((always_inline)) void
half_block_q6_k(const uint8_t *block, size_t b, size_t half, const block_q8_k *const *y,
                size_t n_tok, size_t prefetch, __m256 *acc)
{
    const uint8_t *lanes = block + 32 * half;
    __m256i isum[TILE_TOKENS];
    for (size_t t = 0; t < n_tok; t++)
        isum[t] = _mm256_setzero_si256();
    /* quad outside k: each quad's four triples are read whole, in address order, which the
     * hardware prefetchers follow better than k outside */
    for (int h = 0; h < 2; h++)
#pragma GCC unroll 2
        for (int quad = 0; quad < 2; quad++)
#pragma GCC unroll 4
            for (int k = 0; k < 4; k++) {
                x86_prefetch_slice(block, PACK_ROWS * sizeof(block_q6_k), prefetch,
                                   8 * h + 4 * quad + k, 16);
                int g = 8 * h + 2 * k + quad; /* the 16-element group of words 4quad.. */
                __m256i q[4];
                for (int i = 0; i < 4; i++)
                    q[i] = q6_quarter(lanes, h, 4 * quad + i, k);
                __m256i scale = q6_group_scale(lanes, g);
                for (size_t t = 0; t < n_tok; t++) {
                    const int8_t *qy = y[t][b].qs + 128 * h + 32 * k + 16 * quad;
                    __m256i p01 = _mm256_add_epi16(
                        _mm256_maddubs_epi16(q[0], x86_set1_word(qy)),
                        _mm256_maddubs_epi16(q[1], x86_set1_word(qy + 4)));
                    __m256i p23 = _mm256_add_epi16(
                        _mm256_maddubs_epi16(q[2], x86_set1_word(qy + 8)),
                        _mm256_maddubs_epi16(q[3], x86_set1_word(qy + 12)));
                    isum[t] = _mm256_add_epi32(
                        isum[t], _mm256_add_epi32(_mm256_madd_epi16(p01, scale),
                                                  _mm256_madd_epi16(p23, scale)));
                    __asm__("" : "+x"(isum[t]));
                }
            }
    q6_add_offset(block, half, isum, y, b, n_tok, acc);
}

/*
 * All 16 rows of Q6_K super-block b against one token (X86_DEFINE_PACKED_GROUP_WIDE_ONE): the
 * steps of half_block_q6_k with both halves at once, so that each activation broadcast
 * serves two products and each triple's line is read whole. Its sums are those of the half
 * blocks, in the same order.
 */
static inline __attribute__((always_inline)) void
tile_block_q6_k(const uint8_t *block, size_t b, const block_q8_k *const *y, size_t n_tok,
                size_t prefetch, __m256 acc[2][TILE_TOKENS])
{
    (void)n_tok; /* 1: the macro passes it for its tile types' signature */
    __m256i isum[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
    for (int h = 0; h < 2; h++)
#pragma GCC unroll 2
        for (int quad = 0; quad < 2; quad++)
#pragma GCC unroll 4
            for (int k = 0; k < 4; k++) {
                x86_prefetch_slice(block, PACK_ROWS * sizeof(block_q6_k), prefetch,
                                   8 * h + 4 * quad + k, 16);
                int g = 8 * h + 2 * k + quad;
                __m256i lanes = x86_lane_words(y[0][b].qs + 128 * h + 32 * k + 16 * quad);
                __m256i p[2][2];
#pragma GCC unroll 4
                for (int i = 0; i < 4; i++) {
                    __m256i w = x86_lane_word(lanes, i);
                    for (int half = 0; half < 2; half++) {
                        __m256i q = q6_quarter(block + 32 * half, h, 4 * quad + i, k);
                        __m256i prod = _mm256_maddubs_epi16(q, w);
                        p[half][i / 2] = i % 2 == 0 ? prod : _mm256_add_epi16(p[half][i / 2], prod);
                    }
                }
                for (int half = 0; half < 2; half++) {
                    __m256i scale = q6_group_scale(block + 32 * half, g);
                    isum[half] = _mm256_add_epi32(
                        isum[half], _mm256_add_epi32(_mm256_madd_epi16(p[half][0], scale),
                                                     _mm256_madd_epi16(p[half][1], scale)));
                    __asm__("" : "+x"(isum[half]));
                }
            }
    for (int half = 0; half < 2; half++)
        q6_add_offset(block, half, &isum[half], y, b, 1, acc[half]);
}

/* ---- packed Q2_K ---------------------------------------------------------------------- */

_Static_assert(Q2K_DMIN_AT == 32, "Q2_K's d and dmin where Q4_K has them");

/*
 * Rows 8 * half .. 8 * half + 7 of one group against n_tok tokens, one 16-element sub-block
 * g = 8h + 2k + p at a time: bits 2k..2k + 1 of qs words 8h + 4p .. 8h + 4p + 3. Its maddubs
 * pairs are at most 2 * 3 * 128 = 768, the four words' 3072 in i16, then madd against the
 * sub-block's scale in both i16 halves, exact in i32; the mins go against the bsums.
 */
static inline __attribute__((always_inline)) void
half_block_q2_k(const uint8_t *block, size_t b, size_t half, const block_q8_k *const *y,
                size_t n_tok, size_t prefetch, __m256 *acc)
{
    x86_prefetch_slice(block, PACK_ROWS * sizeof(block_q2_k), prefetch, 0, 1);
    const __m256i low4 = _mm256_set1_epi8(0x0f), low2 = _mm256_set1_epi8(0x03);
    const uint8_t *lanes = block + 32 * half;
    __m256i sc[4], m[4];
    for (int k = 0; k < 4; k++) {
        __m256i words = load256(lanes + Q2K_SCALES_AT + 64 * k);
        sc[k] = _mm256_and_si256(words, low4);
        m[k] = _mm256_and_si256(_mm256_srli_epi16(words, 4), low4);
    }
    __m256i isum[TILE_TOKENS], summs[TILE_TOKENS];
    for (size_t t = 0; t < n_tok; t++)
        isum[t] = _mm256_setzero_si256();
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++)
#pragma GCC unroll 2
        for (int p = 0; p < 2; p++)
#pragma GCC unroll 4
            for (int k = 0; k < 4; k++) {
                int g = 8 * h + 2 * k + p;
                __m256i q[4];
                for (int v = 0; v < 4; v++) {
                    __m256i bytes = load256(lanes + Q2K_QS_AT + 64 * (8 * h + 4 * p + v));
                    q[v] = _mm256_and_si256(_mm256_srli_epi16(bytes, 2 * k), low2);
                }
                __m256i scale = lane_byte_pair(sc[g / 4], g % 4);
                for (size_t t = 0; t < n_tok; t++) {
                    const int8_t *qy = y[t][b].qs + 128 * h + 32 * k + 16 * p;
                    isum[t] = _mm256_add_epi32(
                        isum[t], _mm256_madd_epi16(x86_maddubs_words4(q, qy), scale));
                }
            }
    scales_dot_bsums(m, y, b, n_tok, summs);
    add_half_block_with_min(block, half, isum, summs, y, b, n_tok, acc);
}

/* ---- packed Q3_K ---------------------------------------------------------------------- */

/*
 * The sixteen signed scales S_j of 8 rows, kq_scales_q3_words on every row at once minus 32:
 * word k of every row in sw[k], its byte j S_(4k + j), the order of Q6_K's scale vectors.
 */
static inline __attribute__((always_inline)) void q3_scales(const uint8_t *lanes, __m256i sw[4])
{
    const __m256i low4 = _mm256_set1_epi8(0x0f), low2 = _mm256_set1_epi8(0x03);
    __m256i w[3];
    for (int k = 0; k < 3; k++)
        w[k] = load256(lanes + Q3K_SCALES_AT + 64 * k);
#pragma GCC unroll 4
    for (int k = 0; k < 4; k++) {
        __m256i low = k < 2 ? w[k % 2] : _mm256_srli_epi32(w[k % 2], 4);
        __m256i high = _mm256_and_si256(_mm256_srli_epi32(w[2], 2 * k), low2);
        sw[k] = _mm256_or_si256(_mm256_and_si256(low, low4), _mm256_slli_epi32(high, 4));
        sw[k] = _mm256_sub_epi8(sw[k], _mm256_set1_epi8(32));
    }
}

/* Quarter k's quants u = q + 4 (0..7) from the words of a triple (quant_k_blocks.h), k a
 * constant where it is inlined: quarters 0..5 sit in bits 5-7 or 2-4 of word k / 2, 6 and 7
 * take their third bit from word 2. */
static inline __m256i q3_quarter(const uint8_t *triple, int k)
{
    const __m256i low3 = _mm256_set1_epi8(0x07);
    if (k < 6)
        return _mm256_and_si256(_mm256_srli_epi16(load256(triple + 64 * (k / 2)), k % 2 ? 2 : 5),
                                low3);
    __m256i low = _mm256_and_si256(load256(triple + 64 * (k - 6)), _mm256_set1_epi8(0x03));
    __m256i z = _mm256_slli_epi16(load256(triple + 128), k == 6 ? 2 : 1);
    return _mm256_or_si256(low, _mm256_and_si256(z, _mm256_set1_epi8(0x04)));
}

/*
 * Rows 8 * half .. 8 * half + 7 of one group against n_tok tokens, one 16-element sub-block
 * 2k + p at a time (quarter k, elements l = 16p..16p + 15 in triples (p, 0..3)). Its maddubs
 * pairs are at most 2 * 7 * 128 = 1792, the four words' 7168 in i16, then madd against the
 * sub-block's scale in both i16 halves, exact in i32.
 */
static inline __attribute__((always_inline)) void
half_block_q3_k(const uint8_t *block, size_t b, size_t half, const block_q8_k *const *y,
                size_t n_tok, size_t prefetch, __m256 *acc)
{
    x86_prefetch_slice(block, PACK_ROWS * sizeof(block_q3_k), prefetch, 0, 1);
    const uint8_t *lanes = block + 32 * half;
    __m256i sw[4];
    q3_scales(lanes, sw);
    __m256i isum[TILE_TOKENS];
    for (size_t t = 0; t < n_tok; t++)
        isum[t] = _mm256_setzero_si256();
    for (int p = 0; p < 2; p++)
#pragma GCC unroll 8
        for (int k = 0; k < 8; k++) {
            int g = 2 * k + p;
            __m256i q[4];
            for (int v = 0; v < 4; v++)
                q[v] = q3_quarter(lanes + Q3K_TRIPLE_AT(p, v), k);
            __m256i scale = lane_sbyte_pair(sw[g / 4], g % 4);
            for (size_t t = 0; t < n_tok; t++) {
                const int8_t *qy = y[t][b].qs + 32 * k + 16 * p;
                isum[t] = _mm256_add_epi32(isum[t],
                                           _mm256_madd_epi16(x86_maddubs_words4(q, qy), scale));
            }
        }
    add_offset_block(block, half, sw, isum, 2, y, b, n_tok, acc);
}

X86_DEFINE_PACKED_GROUP(group_q2_k, half_block_q2_k, PACK_ROWS * sizeof(block_q2_k),
                        const block_q8_k *const *)
X86_DEFINE_PACKED_GROUP(group_q3_k, half_block_q3_k, PACK_ROWS * sizeof(block_q3_k),
                        const block_q8_k *const *)
X86_DEFINE_PACKED_GROUP_WIDE(group_q4_k, tile_block_q4_k,
                             PACK_ROWS * sizeof(block_q4_k), const quant_k_tile *)
X86_DEFINE_PACKED_GROUP_WIDE_ONE(group_q5_k, tile_block_q5_k, half_block_q5_k,
                                 PACK_ROWS * sizeof(block_q5_k), const quant_k_tile *)
X86_DEFINE_PACKED_GROUP_WIDE_ONE(group_q6_k, tile_block_q6_k, half_block_q6_k,
                                 PACK_ROWS * sizeof(block_q6_k), const block_q8_k *const *)

/* Q8_K blocks carry their f32 scale and bsums; Q4_K's and Q5_K's groups also read the
 * sub-block sums (tile_arg: &tile for those, tile.y for the others). One token
 * prefetches in software on every CPU (cpu_one_token_prefetch_bytes ahead), unlike Q4_0 /
 * Q8_0 (cpu_prefetch_single_stream): these kernels compute long enough per line that even
 * Zen 4's hardware prefetchers fall behind without the help. */
#define DEFINE_PACKED_MATMUL(name, group_fn, block_type, tile_arg)                            \
    void name(size_t n, const void *packed, size_t n_groups, const void *act,                 \
              size_t act_row_bytes, const void *sums, size_t n_tokens, float *y, size_t ldy)  \
    {                                                                                         \
        size_t n_blocks = n / QK_K;                                                           \
        size_t group_bytes = PACK_ROWS * n_blocks * sizeof(block_type);                       \
        const size_t prefetch_one = cpu_one_token_prefetch_bytes();                           \
        for (size_t t = 0; t < n_tokens; t += TILE_TOKENS) {                                  \
            size_t n_tok = n_tokens - t < TILE_TOKENS ? n_tokens - t : TILE_TOKENS;           \
            quant_k_tile tile;                                                                \
            quant_k_tile_init(&tile, act, act_row_bytes, sums, n, t, n_tok);                  \
            for (size_t g = 0; g < n_groups; g++) {                                           \
                const uint8_t *group = (const uint8_t *)packed + g * group_bytes;             \
                float *out = y + t * ldy + g * PACK_ROWS;                                     \
                X86_PACKED_GROUP_SWITCH(group_fn, n_tok, tile_arg);                           \
            }                                                                                 \
        }                                                                                     \
    }

DEFINE_PACKED_MATMUL(quant_k_matmul_packed_q2_k_avx2, group_q2_k, block_q2_k, tile.y)
DEFINE_PACKED_MATMUL(quant_k_matmul_packed_q3_k_avx2, group_q3_k, block_q3_k, tile.y)
DEFINE_PACKED_MATMUL(quant_k_matmul_packed_q4_k_avx2, group_q4_k, block_q4_k, &tile)
DEFINE_PACKED_MATMUL(quant_k_matmul_packed_q5_k_avx2, group_q5_k, block_q5_k, &tile)
DEFINE_PACKED_MATMUL(quant_k_matmul_packed_q6_k_avx2, group_q6_k, block_q6_k, tile.y)

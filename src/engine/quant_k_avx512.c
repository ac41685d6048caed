/*
 * AVX-512 (F/BW/VL) dot products of the weight types Q4_K_M and Q5_K_M models are made of,
 * Q4_K, Q5_K and Q6_K, against Q8_K activations. Each 512-bit step covers 64 contiguous
 * activation bytes, with the weight quants rebuilt in the same element order. Integer sums
 * equal the scalar ones; the float order differs as in the AVX2 kernels. The other K types
 * use AVX2 code at this level (see quant_k.c). With VNNI, Q2_K..Q6_K also have packed
 * matrix kernels, Q2_K's and Q3_K's in the float order of their AVX2 dots.
 */
#include <immintrin.h>
#include <math.h>
#include <stdbool.h>
#include <stddef.h>

#include "cpu.h"
#include "quant.h"
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

static inline __m512i join256(__m256i lo, __m256i hi)
{
    return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

/* vpermw indices putting i16 scale `first` over words 0..15 and `first + 1` over 16..31. */
static inline __m512i scale_index_pairs(int first)
{
    return join256(_mm256_set1_epi16((short)first), _mm256_set1_epi16((short)(first + 1)));
}

/* vpermw indices putting i16 scale `first + w / 8` over word w (four 16-element groups). */
static inline __m512i scale_index_quads(int first)
{
    __m128i a = _mm_set1_epi16((short)first), b = _mm_set1_epi16((short)(first + 1));
    __m128i c = _mm_set1_epi16((short)(first + 2)), d = _mm_set1_epi16((short)(first + 3));
    return join256(_mm256_set_m128i(b, a), _mm256_set_m128i(d, c));
}

static inline int32_t hsum_epi32_512(__m512i v)
{
    return _mm512_reduce_add_epi32(v);
}

/*
 * A Q4_K / Q5_K block's eight scales as i16 words 0..7 of a vector (vpermw reads no others),
 * and summs = sum_g bsums[g] * m_(g/2), exact.
 */
static inline __m512i k4_scales(const uint8_t packed[12], const block_q8_k *y, int32_t *summs)
{
    uint32_t words[4];
    kq_scales_k4_words(packed, words);
    __m128i sc_m = _mm_setr_epi32((int)words[0], (int)words[1], (int)words[2], (int)words[3]);
    __m128i mins = _mm_cvtepu8_epi16(_mm_unpackhi_epi64(sc_m, sc_m));
    __m256i mins_per_group =
        _mm256_set_m128i(_mm_unpackhi_epi16(mins, mins), _mm_unpacklo_epi16(mins, mins));
    __m256i products = _mm256_madd_epi16(load256(y->bsums), mins_per_group);
    *summs = hsum_epi32_512(_mm512_zextsi256_si512(products));
    return _mm512_castsi128_si512(_mm_cvtepu8_epi16(sc_m));
}

/*
 * Q4_K and Q5_K add their super-blocks in order into one f32 sum, two steps each:
 * acc = fma(f32(dx * dy), isum, acc), then acc = fma(f32(dmin * -dy), summs, acc), where
 * isum = sum_j sc_j * (q . qy over sub-block j) and summs = sum_g bsums[g] * m_(g/2) are
 * exact: the order of the packed kernels, where each lane follows one weight row.
 */
static inline float k4_add_block(float acc, const uint8_t d[2], const uint8_t dmin[2], float dy,
                                 int32_t isum, int32_t summs)
{
    acc = x86_fused_add(f16_field(d) * dy, isum, acc);
    return x86_fused_add(f16_field(dmin) * -dy, summs, acc);
}

_Static_assert(offsetof(block_q4_k, scales) == offsetof(block_q5_k, scales),
               "Q4_K and Q5_K share d, dmin and scales");

/*
 * The Q4_K and Q5_K dots (five_bits a constant where inlined). Q5_K's 5th bit of element l
 * of sub-block j is bit j of qh[l]; a maddubs pair is then at most 2 * 31 * 128 = 7936, one
 * pair per i16, widened at once by its madd.
 */
static inline __attribute__((always_inline)) float dot_k4(size_t n, const void *w,
                                                          const void *a, bool five_bits)
{
    const uint8_t *x = w;
    const block_q8_k *y = a;
    size_t block_bytes = five_bits ? sizeof(block_q5_k) : sizeof(block_q4_k);
    const __m256i mask4 = _mm256_set1_epi8(15);
    __m512i index[4];
    for (int c = 0; c < 4; c++)
        index[c] = scale_index_pairs(2 * c);
    float acc = 0.0f;
    for (size_t i = 0; i < n / QK_K; i++, x += block_bytes, y++) {
        const block_q4_k *head = (const block_q4_k *)x; /* d, dmin and scales of either */
        const uint8_t *qs = five_bits ? ((const block_q5_k *)x)->qs : head->qs;
        int32_t summs;
        __m512i scales = k4_scales(head->scales, y, &summs);
        /* bit 2c of a byte: the 5th bit of sub-block 2c in the low half, of 2c + 1 in the high */
        __m512i high = _mm512_setzero_si512();
        if (five_bits) {
            __m256i qh = load256(((const block_q5_k *)x)->qh);
            high = join256(qh, _mm256_srli_epi16(qh, 1));
        }
        __m512i sumi = _mm512_setzero_si512();
        for (int c = 0; c < 4; c++) {
            /* 64 elements: sub-block 2c in the low nibbles, 2c + 1 in the high ones */
            __m256i bytes = load256(qs + 32 * c);
            __m512i q = join256(_mm256_and_si256(bytes, mask4),
                                _mm256_and_si256(_mm256_srli_epi16(bytes, 4), mask4));
            if (five_bits)
                q = x86_add_fifth_bit(q, high, 2 * c);
            __m512i p = _mm512_maddubs_epi16(q, _mm512_loadu_si512(y->qs + 64 * c));
            p = _mm512_madd_epi16(p, _mm512_permutexvar_epi16(index[c], scales));
            sumi = _mm512_add_epi32(sumi, p);
        }
        acc = k4_add_block(acc, head->d, head->dmin, q8k_d(y), hsum_epi32_512(sumi), summs);
    }
    return acc;
}

float quant_k_dot_q4_k_avx512(size_t n, const void *w, const void *a)
{
    return dot_k4(n, w, a, false);
}

float quant_k_dot_q5_k_avx512(size_t n, const void *w, const void *a)
{
    return dot_k4(n, w, a, true);
}

/* Q6_K likewise: acc = fma(f32(dy * dx), isum, acc) per super-block, isum exact. */
float quant_k_dot_q6_k_avx512(size_t n, const void *w, const void *a)
{
    const block_q6_k *x = w;
    const block_q8_k *y = a;
    const __m512i mask4 = _mm512_set1_epi8(15), mask2 = _mm512_set1_epi8(3);
    __m512i index[4];
    for (int quad = 0; quad < 4; quad++)
        index[quad] = scale_index_quads(4 * quad);
    float acc = 0.0f;
    for (size_t i = 0; i < n / QK_K; i++, x++, y++) {
        __m256i scales16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)x->scales));
        /* q = stored (0..63) - 32, so subtract 32 * sum_g scale_g * bsums[g] */
        __m256i bias = _mm256_madd_epi16(load256(y->bsums), scales16);
        __m512i scales = _mm512_castsi256_si512(scales16); /* vpermw reads words 0..15 only */

        __m512i sumi = _mm512_setzero_si512();
        for (int h = 0; h < 2; h++) {
            /* ql = [ql0 | ql1] and qh = [qh | qh >> 2] give elements k = 0,1 in the low bits
             * and k = 2,3 after shifting by 4: 64 contiguous elements each */
            __m512i ql = _mm512_loadu_si512(x->ql + 64 * h);
            __m256i qh256 = load256(x->qh + 32 * h);
            __m512i qh = join256(qh256, _mm256_srli_epi16(qh256, 2));
            __m512i q01 = _mm512_or_si512(_mm512_and_si512(ql, mask4),
                                          _mm512_slli_epi16(_mm512_and_si512(qh, mask2), 4));
            __m512i q23 = _mm512_or_si512(
                _mm512_and_si512(_mm512_srli_epi16(ql, 4), mask4),
                _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(qh, 4), mask2), 4));
            __m512i p01 = _mm512_maddubs_epi16(q01, _mm512_loadu_si512(y->qs + 128 * h));
            __m512i p23 = _mm512_maddubs_epi16(q23, _mm512_loadu_si512(y->qs + 128 * h + 64));
            p01 = _mm512_madd_epi16(p01, _mm512_permutexvar_epi16(index[2 * h], scales));
            p23 = _mm512_madd_epi16(p23, _mm512_permutexvar_epi16(index[2 * h + 1], scales));
            sumi = _mm512_add_epi32(sumi, _mm512_add_epi32(p01, p23));
        }
        sumi = _mm512_sub_epi32(sumi, _mm512_zextsi256_si512(_mm256_slli_epi32(bias, 5)));
        acc = x86_fused_add(q8k_d(y) * f16_field(x->d), hsum_epi32_512(sumi), acc);
    }
    return acc;
}

/* ---- packed Q4_K and Q5_K (VNNI) ------------------------------------------------------- */

/*
 * Rows packed by quant_k_pack_q4_k / quant_k_pack_q5_k (quant_k_blocks.h): one 512-bit lane
 * per row. The two layouts differ only in Q5_K's qh vectors before the quants, so one kernel
 * serves both, `five_bits` (a constant where it is inlined) choosing how a quant vector
 * becomes the bytes of its two sub-blocks.
 */
enum { PACK_ROWS = QUANT_PACK_ROWS };

/* Tiles of 4 tokens, and of WIDE_TOKENS for Q6_K, whose quants and scales take more
 * operations to rebuild than Q4_K's, so sharing them among 8 tokens pays; for Q4_K the
 * wider tile's register pressure cost more than it saved, for Q5_K it gained nothing. */
enum { TILE_TOKENS = 4, WIDE_TOKENS = QUANT_K_TILE_TOKENS };

/* Byte k (0..3) of every lane as an i32. */
static inline __m512i lane_byte(__m512i words, int k)
{
    return _mm512_and_si512(_mm512_srli_epi32(words, 8 * k), _mm512_set1_epi32(0xff));
}

/* (a & low) | (b & ~low) per byte, low a mask of low bits: a's low bits under b's others. */
static inline __m512i join_low_bits(__m512i a, __m512i b, char low)
{
    /* b ^ ((a ^ b) & low) as one vpternlogd, written into b (the temporary in every use) */
    return _mm512_ternarylogic_epi32(b, a, _mm512_set1_epi8(low), 0xd8);
}

/*
 * The unsigned bytes for vpdpbusd of quant vector v of chunk c: those of sub-block 2c (the low
 * nibbles) returned, those of 2c + 1 (the high ones) in *hi. Q4_K uses its high nibbles in
 * place (byte & 0xf0 = 16 * q), and k4_high_sum shifts their sum back once per sub-block
 * instead of each vector. Q5_K's 16 * q would not fit a byte, so its high nibbles are shifted
 * down, and both sub-blocks take their 5th bit from qh vector v (bits 2c and 2c + 1) through
 * x86_add_fifth_bit (7 operations a vector where shifting each bit into place took 9).
 */
static inline __m512i k4_quants(const uint8_t *group, bool five_bits, int c, int v,
                                bool in_register, __m512i *hi)
{
    if (!five_bits) {
        __m512i bytes = _mm512_loadu_si512(group + Q4K_QS_AT + 64 * (8 * c + v));
        /* in_register (one token): GCC otherwise loads the vector again as each AND's
         * memory operand, twice the loads, which held one token at 34 ns a super-block in
         * cache on Zen 4 where once takes 30; tiles of several tokens streamed from memory
         * a little faster with the second load */
        if (in_register)
            __asm__("" : "+v"(bytes));
        *hi = _mm512_and_si512(bytes, _mm512_set1_epi8((char)0xf0));
        return _mm512_and_si512(bytes, _mm512_set1_epi8(0x0f));
    }
    __m512i bytes = _mm512_loadu_si512(group + Q5K_QS_AT + 64 * (8 * c + v));
    __m512i qh = _mm512_loadu_si512(group + Q5K_QH_AT + 64 * v);
    const __m512i low4 = _mm512_set1_epi8(0x0f);
    __m512i high = _mm512_and_si512(_mm512_srli_epi16(bytes, 4), low4);
    *hi = x86_add_fifth_bit(high, qh, 2 * c + 1);
    return x86_add_fifth_bit(_mm512_and_si512(bytes, low4), qh, 2 * c);
}

/* Bit 0 of the kernels' prefetch distance (bytes ahead, a multiple of 64 otherwise): ask
 * into L1 rather than L2 (cpu_k_quant_prefetch_l1). A call passes it as a constant, so each
 * form inlines with its own instruction. */
enum { K_PREFETCH_L1 = 1 };

static inline __attribute__((always_inline)) void k_prefetch_ahead(const uint8_t *p, size_t bytes,
                                                                   size_t prefetch)
{
    if (prefetch & K_PREFETCH_L1)
        x86_prefetch_ahead_l1(p, bytes, prefetch & ~(size_t)K_PREFETCH_L1);
    else
        x86_prefetch_ahead(p, bytes, prefetch);
}

/* The sum of q * qy over a high sub-block from the sum over k4_quants' bytes. */
static inline __m512i k4_high_sum(__m512i sum, bool five_bits)
{
    return five_bits ? sum : _mm512_srai_epi32(sum, 4);
}

/*
 * The integer sum sum_j sc_j * (q . qy over sub-block j) of one super-block for a single
 * token, each quant vector loaded once for both of its sub-blocks. Integer sums are exact,
 * so this equals the tiled order.
 */
static inline __attribute__((always_inline)) __m512i
isum_k4_one(const uint8_t *group, bool five_bits, const __m512i sc[2], const int8_t *qs,
            size_t prefetch)
{
    size_t block_bytes = five_bits ? sizeof(block_q5_k) : sizeof(block_q4_k);
    __m512i isum = _mm512_setzero_si512();
    for (int c = 0; c < 4; c++) {
        const int8_t *qy = qs + 64 * c;
        /* a quarter of the block's lines ahead per chunk: one burst per block stalled loads */
        if (prefetch)
            k_prefetch_ahead(group + c * 4 * block_bytes, 4 * block_bytes, prefetch);
        /* two partial sums per sub-block so that consecutive vpdpbusd do not wait */
        __m512i lo[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
        __m512i hi[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
#pragma GCC unroll 8
        for (int v = 0; v < 8; v++) {
            __m512i q_hi, q_lo = k4_quants(group, five_bits, c, v, true, &q_hi);
            lo[v % 2] = x86_dpbusd_word(lo[v % 2], q_lo, qy + 4 * v);
            hi[v % 2] = x86_dpbusd_word(hi[v % 2], q_hi, qy + 32 + 4 * v);
        }
        __m512i sum_lo = _mm512_add_epi32(lo[0], lo[1]);
        __m512i sum_hi = k4_high_sum(_mm512_add_epi32(hi[0], hi[1]), five_bits);
        __m512i scale_lo = lane_byte(sc[c / 2], 2 * (c % 2));
        __m512i scale_hi = lane_byte(sc[c / 2], 2 * (c % 2) + 1);
        isum = _mm512_add_epi32(isum, _mm512_mullo_epi32(sum_lo, scale_lo));
        isum = _mm512_add_epi32(isum, _mm512_mullo_epi32(sum_hi, scale_hi));
    }
    return isum;
}

/*
 * Two sums of 16 products, each an exact multiple of 2^shift, as the low and high i16 of
 * every lane for vpdpwssd against a scale pair: (lo >> lo_shift) and (hi >> hi_shift), which
 * must fit i16. The shifts drop what lies above a sum's 16 bits.
 */
static inline __m512i pair_sums_i16(__m512i lo, int lo_shift, __m512i hi, int hi_shift)
{
    __m512i low = _mm512_srli_epi32(lo, lo_shift);
    __m512i high = _mm512_slli_epi32(hi, 16 - hi_shift);
    return _mm512_ternarylogic_epi32(high, low, _mm512_set1_epi32(0xffff), 0xd8);
}

/*
 * The integer sums of one super-block for 2..4 tokens, each quant vector loaded and made
 * bytes once for both of its sub-blocks and every token (as in isum_k4_one).
 */
static inline __attribute__((always_inline)) void
isum_k4_tile(const uint8_t *group, bool five_bits, const __m512i sc[2],
             const block_q8_k *const *y, size_t b, size_t n_tok, size_t prefetch, __m512i *isum)
{
    size_t block_bytes = five_bits ? sizeof(block_q5_k) : sizeof(block_q4_k);
    for (int c = 0; c < 4; c++) {
        /* a quarter of the block's lines ahead per chunk, as isum_k4_one asks */
        if (prefetch)
            k_prefetch_ahead(group + c * 4 * block_bytes, 4 * block_bytes, prefetch);
        __m512i lo[8], hi[8];
        for (int v = 0; v < 8; v++)
            lo[v] = k4_quants(group, five_bits, c, v, false, &hi[v]);
        __m512i scale_lo = lane_byte(sc[c / 2], 2 * (c % 2));
        __m512i scale_hi = lane_byte(sc[c / 2], 2 * (c % 2) + 1);
        __m512i scales = _mm512_or_si512(scale_lo, _mm512_slli_epi32(scale_hi, 16));
        for (size_t t = 0; t < n_tok; t++) {
            const int8_t *qy = y[t][b].qs + 64 * c;
            __m512i l[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
            __m512i h[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
            for (int v = 0; v < 8; v++) {
                l[v % 2] = x86_dpbusd_word(l[v % 2], lo[v], qy + 4 * v);
                h[v % 2] = x86_dpbusd_word(h[v % 2], hi[v], qy + 32 + 4 * v);
            }
            if (!five_bits) {
                /* each partial sum is 16 products: at most 16 * 15 * 128 = 30720 in
                 * magnitude, the high ones 16 times that before the shift, so they go as
                 * i16 pairs into vpdpwssd, one uop where two vpmulld take four */
                isum[t] = _mm512_dpwssd_epi32(isum[t], pair_sums_i16(l[0], 0, h[0], 4), scales);
                isum[t] = _mm512_dpwssd_epi32(isum[t], pair_sums_i16(l[1], 0, h[1], 4), scales);
                continue;
            }
            __m512i sum_lo = _mm512_add_epi32(l[0], l[1]);
            __m512i sum_hi = k4_high_sum(_mm512_add_epi32(h[0], h[1]), five_bits);
            isum[t] = _mm512_add_epi32(isum[t], _mm512_add_epi32(_mm512_mullo_epi32(sum_lo, scale_lo),
                                                                 _mm512_mullo_epi32(sum_hi, scale_hi)));
        }
    }
}

_Static_assert((int)Q4K_SCALES_AT == (int)Q5K_SCALES_AT, "Q4_K and Q5_K scales at one place");

/*
 * The float steps of a super-block of the types with mins (Q2_K, Q4_K, Q5_K; 16 d then 16
 * dmin, f16, at `group`), the order of their dots: acc[t] = fma(f32(dx * dy), isum[t],
 * acc[t]), then acc[t] = fma(f32(dmin * -dy), summs[t], acc[t]).
 */
static inline __attribute__((always_inline)) void
add_block_with_min(const uint8_t *group, const __m512i *isum, const __m512i *summs,
                   const block_q8_k *const *y, size_t b, size_t n_tok, __m512 *acc)
{
    __m512 dx = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)group));
    __m512 dmin = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(group + 32)));
    for (size_t t = 0; t < n_tok; t++) {
        float dy = q8k_d(&y[t][b]);
        acc[t] = _mm512_fmadd_ps(_mm512_mul_ps(dx, _mm512_set1_ps(dy)),
                                 _mm512_cvtepi32_ps(isum[t]), acc[t]);
        acc[t] = _mm512_fmadd_ps(_mm512_mul_ps(dmin, _mm512_set1_ps(-dy)),
                                 _mm512_cvtepi32_ps(summs[t]), acc[t]);
    }
}

/*
 * Reads again, for one token, what block o of the activations holds for the Q4_K / Q5_K
 * kernels (its d and quants, and its sub-block sums), each line once, the values unused. A
 * 16-row group of 9 to 16 super-blocks streams 21-45 KiB of weights through L1 (32 KiB)
 * between two reads of the same activation block, enough to evict it from L1; touched half a
 * group after its use, a block stays in L1 until the next group reads it. Longer rows would
 * need several touches per block, which cost more than the misses they save.
 */
static inline __attribute__((always_inline)) void
k4_touch_activations(const block_q8_k *y, const uint8_t *sub_sums, size_t o)
{
    const uint8_t *block = (const uint8_t *)&y[o];
    /* offsets 0..192 and the quants' last word: every line d and qs span */
    static const size_t at[5] = {0, 64, 128, 192, offsetof(block_q8_k, qs) + QK_K - 4};
    for (int l = 0; l < 5; l++)
        __asm__ volatile("" ::"r"(*(const volatile int32_t *)(block + at[l])));
    __asm__ volatile("" ::"r"(*(const volatile int32_t *)(sub_sums + 16 * o)));
}

static inline __attribute__((always_inline)) void
group_k4(size_t n_blocks, const uint8_t *group, bool five_bits, const quant_k_tile *tile,
         size_t n_tok, size_t prefetch, __m512 *acc)
{
    const block_q8_k *const *y = tile->y;
    /* vpshufb indices of a row's mins 2j and 2j + 1 (bytes 2 * (j % 2) and the next of its
     * word m[j / 2]), each widened to an i16; vpshufb reads within 128-bit lanes */
    const __m512i min_pair[2] = {_mm512_set4_epi32(0x800d800c, 0x80098008, 0x80058004, 0x80018000),
                                 _mm512_set4_epi32(0x800f800e, 0x800b800a, 0x80078006, 0x80038002)};
    const __m512i low4 = _mm512_set1_epi8(0x0f), low6 = _mm512_set1_epi8(0x3f);
    const __m512i low2 = _mm512_set1_epi8(0x03);
    size_t group_block_bytes = PACK_ROWS * (five_bits ? sizeof(block_q5_k) : sizeof(block_q4_k));
    for (size_t b = 0; b < n_blocks; b++, group += group_block_bytes) {
        /* kq_scales_k4_words, on every row at once */
        __m512i w0 = _mm512_loadu_si512(group + Q4K_SCALES_AT);
        __m512i w1 = _mm512_loadu_si512(group + Q4K_SCALES_AT + 64);
        __m512i w2 = _mm512_loadu_si512(group + Q4K_SCALES_AT + 128);
        __m512i sc[2] = {
            _mm512_and_si512(w0, low6),
            _mm512_or_si512(_mm512_and_si512(w2, low4),
                            _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(w0, 6), low2), 4))};
        __m512i m[2] = {
            _mm512_and_si512(w1, low6),
            _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(w2, 4), low4),
                            _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(w1, 6), low2), 4))};
        __m512i isum[WIDE_TOKENS], summs[WIDE_TOKENS];
        for (size_t t = 0; t < n_tok; t++)
            isum[t] = summs[t] = _mm512_setzero_si512();
        if (n_tok == 1 && n_blocks > 8 && n_blocks <= 16)
            k4_touch_activations(y[0], tile->sub_sums[0], (b + n_blocks / 2) % n_blocks);
        if (n_tok == 1)
            isum[0] = isum_k4_one(group, five_bits, sc, y[0][b].qs, prefetch);
        else
            isum_k4_tile(group, five_bits, sc, y, b, n_tok, prefetch, isum);
        /* summs: the mins of sub-blocks 2j and 2j + 1 as an i16 pair times their sums */
        for (int j = 0; j < 4; j++) {
            __m512i mins = _mm512_shuffle_epi8(m[j / 2], min_pair[j % 2]);
            for (size_t t = 0; t < n_tok; t++)
                summs[t] = x86_dpwssd_word(summs[t], mins, tile->sub_sums[t] + 16 * b + 4 * j);
        }
        add_block_with_min(group, isum, summs, y, b, n_tok, acc);
    }
}

static inline __attribute__((always_inline)) void
group_q4_k(size_t n_blocks, const uint8_t *group, const quant_k_tile *tile, size_t n_tok,
           size_t prefetch, __m512 *acc)
{
    group_k4(n_blocks, group, false, tile, n_tok, prefetch, acc);
}

static inline __attribute__((always_inline)) void
group_q5_k(size_t n_blocks, const uint8_t *group, const quant_k_tile *tile, size_t n_tok,
           size_t prefetch, __m512 *acc)
{
    group_k4(n_blocks, group, true, tile, n_tok, prefetch, acc);
}

/* ---- Q8_K activations ------------------------------------------------------------------ */

/*
 * quant_k_quantize_q8_k in vectors, byte for byte: the first element of largest magnitude
 * sets iscale = -127 / x, vcvtps2dq rounds half to even as the portable magic-number
 * rounding does, and each 16-element sum is one vector's. A block holding a NaN or an
 * infinity takes the portable path, whose bytes there are ggml's arithmetic, not a rule.
 */
void quant_k_quantize_q8_k_avx512(const float *in, void *blocks, size_t n)
{
    block_q8_k *b = blocks;
    const __m512 magnitude = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff));
    for (size_t i = 0; i < n / QK_K; i++, b++, in += QK_K) {
        __m512 x[QK_K / 16], vmax = _mm512_setzero_ps();
        __mmask16 nan = 0;
        for (int v = 0; v < QK_K / 16; v++) {
            x[v] = _mm512_loadu_ps(in + 16 * v);
            nan |= _mm512_cmp_ps_mask(x[v], x[v], _CMP_UNORD_Q);
            vmax = _mm512_max_ps(vmax, _mm512_and_ps(x[v], magnitude));
        }
        float amax = _mm512_reduce_max_ps(vmax);
        if (nan || amax == INFINITY) {
            quant_k_quantize_q8_k(in, b, QK_K);
            continue;
        }
        if (amax == 0.f) {
            memset(b, 0, sizeof *b);
            continue;
        }
        int at = -1;
        for (int v = 0; v < QK_K / 16 && at < 0; v++) {
            __mmask16 m = _mm512_cmp_ps_mask(_mm512_and_ps(x[v], magnitude),
                                             _mm512_set1_ps(amax), _CMP_EQ_OQ);
            if (m)
                at = 16 * v + __builtin_ctz(m);
        }
        float iscale = -127.f / in[at];
        __m512 scale = _mm512_set1_ps(iscale);
        for (int v = 0; v < QK_K / 16; v++) {
            __m512i q = _mm512_cvt_roundps_epi32(_mm512_mul_ps(scale, x[v]),
                                                 _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
            q = _mm512_min_epi32(q, _mm512_set1_epi32(127));
            _mm_storeu_si128((__m128i *)(b->qs + 16 * v), _mm512_cvtepi32_epi8(q));
            int16_t sum = (int16_t)_mm512_reduce_add_epi32(q);
            memcpy(b->bsums + 2 * v, &sum, sizeof sum);
        }
        float d = 1.f / iscale;
        memcpy(b->d, &d, sizeof d);
    }
}

/* ---- packed Q6_K (VNNI) ---------------------------------------------------------------- */

/* Rows packed by quant_k_pack_q6_k (quant_k_blocks.h): one 512-bit lane per row. The kernel
 * rebuilds q + 32 (0..63, unsigned) for vpdpbusd and takes 32 * sum_g scale_g * bsums[g]
 * back out. */

/* Signed byte k (0..3) of every lane as an i32. */
static inline __m512i lane_sbyte(__m512i words, int k)
{
    return _mm512_srai_epi32(_mm512_slli_epi32(words, 24 - 8 * k), 24);
}

/* The four quarters k = 0..3 (q + 32, 0..63) of one word triple X, Y, Z (quant_k_pack_q6_k):
 * bits 0-5 of X, Y, Z for k = 0, 1, 2; k = 3 gathers bits 6-7 of all three. */
static inline __attribute__((always_inline)) void q6_quarters(__m512i x, __m512i y, __m512i z,
                                                              __m512i q[4])
{
    const __m512i low6 = _mm512_set1_epi8(0x3f);
    q[0] = _mm512_and_si512(x, low6);
    q[1] = _mm512_and_si512(y, low6);
    q[2] = _mm512_and_si512(z, low6);
    __m512i high = _mm512_and_si512(_mm512_srli_epi16(z, 2), _mm512_set1_epi8(0x30));
    high = join_low_bits(_mm512_srli_epi16(y, 4), high, 0x0f); /* its bits 0-1 go next */
    q[3] = join_low_bits(_mm512_srli_epi16(x, 6), high, 0x03);
}

/*
 * out[t] = sum_g scale_g * bsums[g] of token t for 16 scale bytes per row in -128..127 (or
 * 0..127), word k (scales 4k..4k + 3) of every row in sw[k]: the Q3_K / Q6_K offsets' share
 * of a sum and the Q2_K mins. Scales go as i16 pairs (2j, 2j + 1) into vpdpwssd.
 */
static inline __attribute__((always_inline)) void
scales_dot_bsums(const __m512i sw[4], const block_q8_k *const *y, size_t b, size_t n_tok,
                 __m512i *out)
{
    for (size_t t = 0; t < n_tok; t++)
        out[t] = _mm512_setzero_si512();
    for (int k = 0; k < 4; k++) {
        __m512i even = _mm512_srai_epi16(_mm512_slli_epi16(sw[k], 8), 8); /* s0, s2 */
        __m512i odd = _mm512_srai_epi16(sw[k], 8);                         /* s1, s3 */
        __m512i pair01 = _mm512_mask_blend_epi16(0xaaaaaaaa, even, _mm512_slli_epi32(odd, 16));
        __m512i pair23 = _mm512_mask_blend_epi16(0xaaaaaaaa, _mm512_srli_epi32(even, 16), odd);
        for (size_t t = 0; t < n_tok; t++) {
            const uint8_t *bs = y[t][b].bsums + 8 * k;
            out[t] = x86_dpwssd_word(out[t], pair01, bs);
            out[t] = x86_dpwssd_word(out[t], pair23, bs + 4);
        }
    }
}

/*
 * One super-block's float step for the types whose kernels read q + 2^offset_log2 (Q3_K: 4,
 * Q6_K: 32) and that have 16 signed scale bytes per row in sw[] (scales_dot_bsums):
 * acc[t] = fma(f32(dx * dy), isum[t] - 2^offset_log2 * sum_g scale_g * bsums[g], acc[t]),
 * the order of their dots.
 */
static inline __attribute__((always_inline)) void
add_offset_block(const uint8_t *group, const __m512i sw[4], const __m512i *isum,
                 int offset_log2, const block_q8_k *const *y, size_t b, size_t n_tok,
                 __m512 *acc)
{
    __m512i bias[WIDE_TOKENS];
    scales_dot_bsums(sw, y, b, n_tok, bias);
    __m512 dx = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)group));
    for (size_t t = 0; t < n_tok; t++) {
        __m512i total = _mm512_sub_epi32(isum[t], _mm512_slli_epi32(bias[t], offset_log2));
        acc[t] = _mm512_fmadd_ps(_mm512_mul_ps(dx, _mm512_set1_ps(q8k_d(&y[t][b]))),
                                 _mm512_cvtepi32_ps(total), acc[t]);
    }
}

/* Bytes p and p + 2 (p = 0, 1) of every lane of words, sign-extended, as an i16 pair. */
static inline __m512i scale_pair_i16(__m512i words, int p)
{
    return _mm512_srai_epi16(p ? words : _mm512_slli_epi16(words, 8), 8);
}

/*
 * The integer sum of one super-block for a single token (isum of group_q6_k before the
 * bias). One token leaves registers for all four quarters k of a half at once, so each word
 * triple is loaded and split once instead of once per k. Integer sums are exact, so this
 * equals the tiled order.
 */
static inline __attribute__((always_inline)) __m512i
isum_q6_k_one(const uint8_t *group, const __m512i sw[4], const int8_t *qs, size_t prefetch)
{
    __m512i isum = _mm512_setzero_si512();
    for (int h = 0; h < 2; h++) {
        /* s[2k + v / 4]: quarter k, 16-element group 8h + 2k + v / 4 */
        __m512i s[8];
        for (int i = 0; i < 8; i++)
            s[i] = _mm512_setzero_si512();
        const int8_t *qy = qs + 128 * h;
        /* unrolled, so that s[] lives in registers: GCC 12 kept the loop and s[] on the
         * stack, a load and a store around every vpdpbusd */
#pragma GCC unroll 8
        for (int v = 0; v < 8; v++) {
            /* a sixteenth of the block's lines ahead per step, as in isum_q4_k_one */
            if (prefetch)
                k_prefetch_ahead(group + (8 * h + v) * sizeof(block_q6_k), sizeof(block_q6_k),
                                   prefetch);
            const uint8_t *triple = group + Q6K_TRIPLE_AT(h, v);
            __m512i q[4];
            q6_quarters(_mm512_loadu_si512(triple), _mm512_loadu_si512(triple + 64),
                        _mm512_loadu_si512(triple + 128), q);
            for (int k = 0; k < 4; k++)
                s[2 * k + v / 4] = x86_dpbusd_word(s[2 * k + v / 4], q[k], qy + 32 * k + 4 * v);
        }
#pragma GCC unroll 8
        for (int i = 0; i < 8; i++) {
            int g = 8 * h + i;
            isum = _mm512_add_epi32(isum, _mm512_mullo_epi32(s[i], lane_sbyte(sw[g / 4], g % 4)));
        }
    }
    return isum;
}

/*
 * The integer sums of one super-block for 2..4 tokens, each word triple loaded and split
 * once for every token (as in isum_q6_k_one; splitting them again per quarter k and per
 * token had made 4 tokens cost 2.3 times one). Per half h and v / 4, the groups
 * 8h + 2k + v / 4 of the four quarters k are summed together: 4 * n_tok partial sums.
 */
static inline __attribute__((always_inline)) void
isum_q6_k_tile(const uint8_t *group, const __m512i sw[4], const block_q8_k *const *y, size_t b,
               size_t n_tok, size_t prefetch, __m512i *isum)
{
    for (int h = 0; h < 2; h++)
        for (int quarter = 0; quarter < 2; quarter++) {
            __m512i s[WIDE_TOKENS][4];
            for (size_t t = 0; t < n_tok; t++)
                for (int k = 0; k < 4; k++)
                    s[t][k] = _mm512_setzero_si512();
            for (int v = 4 * quarter; v < 4 * quarter + 4; v++) {
                /* a sixteenth of the block's lines ahead per step, as isum_q6_k_one asks */
                if (prefetch)
                    k_prefetch_ahead(group + (8 * h + v) * sizeof(block_q6_k),
                                       sizeof(block_q6_k), prefetch);
                const uint8_t *triple = group + Q6K_TRIPLE_AT(h, v);
                __m512i q[4];
                q6_quarters(_mm512_loadu_si512(triple), _mm512_loadu_si512(triple + 64),
                            _mm512_loadu_si512(triple + 128), q);
                for (size_t t = 0; t < n_tok; t++) {
                    const int8_t *qy = y[t][b].qs + 128 * h + 4 * v;
                    for (int k = 0; k < 4; k++)
                        s[t][k] = x86_dpbusd_word(s[t][k], q[k], qy + 32 * k);
                }
            }
            for (int k = 0; k < 4; k++) {
                int g = 8 * h + 2 * k + quarter;
                __m512i scale = lane_sbyte(sw[g / 4], g % 4);
                for (size_t t = 0; t < n_tok; t++)
                    isum[t] = _mm512_add_epi32(isum[t], _mm512_mullo_epi32(s[t][k], scale));
            }
        }
}

/* ---- packed Q3_K (VNNI) ---------------------------------------------------------------- */

/*
 * The sixteen signed scales S_j of 16 rows, kq_scales_q3_words on every row at once minus
 * 32: word k of every row in sw[k], its byte j S_(4k + j), the order of Q6_K's scale vectors.
 */
static inline __attribute__((always_inline)) void q3_scales(const uint8_t *group, __m512i sw[4])
{
    const __m512i low4 = _mm512_set1_epi8(0x0f), low2 = _mm512_set1_epi8(0x03);
    __m512i w[3];
    for (int k = 0; k < 3; k++)
        w[k] = _mm512_loadu_si512(group + Q3K_SCALES_AT + 64 * k);
#pragma GCC unroll 4
    for (int k = 0; k < 4; k++) {
        __m512i low = k < 2 ? w[k % 2] : _mm512_srli_epi32(w[k % 2], 4);
        __m512i high = _mm512_and_si512(_mm512_srli_epi32(w[2], 2 * k), low2);
        sw[k] = _mm512_or_si512(_mm512_and_si512(low, low4), _mm512_slli_epi32(high, 4));
        sw[k] = _mm512_sub_epi8(sw[k], _mm512_set1_epi8(32));
    }
}

/*
 * The eight quarters' bytes for vpdpbusd from the words x, y, z of one triple
 * (quant_k_blocks.h): quarters 0, 2, 4 as 32 u and 1, 3, 5 as 4 u, in place (q3_sum_shift
 * takes the factor out of their sums), 6 and 7 as u with their third bit moved from z.
 */
static inline __attribute__((always_inline)) void q3_quarters(const uint8_t *triple, __m512i q[8])
{
    const __m512i top3 = _mm512_set1_epi8((char)0xe0), mid3 = _mm512_set1_epi8(0x1c);
    const __m512i bit2 = _mm512_set1_epi8(0x04);
    __m512i w[3];
    for (int z = 0; z < 3; z++) {
        w[z] = _mm512_loadu_si512(triple + 64 * z);
        q[2 * z] = _mm512_and_si512(w[z], top3);
        q[2 * z + 1] = _mm512_and_si512(w[z], mid3);
    }
    q[6] = join_low_bits(w[0], _mm512_and_si512(_mm512_slli_epi16(w[2], 2), bit2), 0x03);
    q[7] = join_low_bits(w[1], _mm512_and_si512(_mm512_slli_epi16(w[2], 1), bit2), 0x03);
}

/* log2 of the factor quarter k's bytes carry (q3_quarters): their sums are exact multiples. */
static inline int q3_sum_shift(int k)
{
    return k < 6 ? (k % 2 ? 2 : 5) : 0;
}

/*
 * The integer sums sum_g S_g * (u . qy over sub-block g) of one super-block for n_tok tokens,
 * sub-block g = 2k + p the elements 16p..16p + 15 of quarter k. Per half p the triples
 * (p, 0..3) are read in order and each made bytes once for every token: one or two tokens sum
 * all eight quarters in that pass, wider tiles four at a time (3 or 4 tokens x 8 partial sums
 * and the quarters would not fit the 32 registers), reading each triple twice from cache. The scales
 * multiply two quarters' sums at once (q3_sum_pair).
 */
static inline __attribute__((always_inline)) void
isum_q3_k(const uint8_t *group, const __m512i sw[4], const block_q8_k *const *y, size_t b,
          size_t n_tok, size_t prefetch, __m512i *isum)
{
    const int per_pass = n_tok <= 2 ? 8 : 4;
    for (int p = 0; p < 2; p++)
#pragma GCC unroll 4
        for (int first = 0; first < 8; first += per_pass) {
            __m512i s[TILE_TOKENS][8];
            for (size_t t = 0; t < n_tok; t++)
                for (int k = first; k < first + per_pass; k++)
                    s[t][k] = _mm512_setzero_si512();
#pragma GCC unroll 4
            for (int v = 0; v < 4; v++) {
                /* an eighth of the block's lines ahead per triple, as in isum_q6_k_one (on
                 * the first of a tile's two passes) */
                if (prefetch && first == 0)
                    k_prefetch_ahead(group + (4 * p + v) * 2 * sizeof(block_q3_k),
                                       2 * sizeof(block_q3_k), prefetch);
                __m512i q[8];
                q3_quarters(group + Q3K_TRIPLE_AT(p, v), q);
                for (size_t t = 0; t < n_tok; t++) {
                    const int8_t *qy = y[t][b].qs + 16 * p + 4 * v;
#pragma GCC unroll 8
                    for (int k = first; k < first + per_pass; k++)
                        s[t][k] = x86_dpbusd_word(s[t][k], q[k], qy + 32 * k);
                }
            }
#pragma GCC unroll 4
            for (int k = first; k < first + per_pass; k += 2) {
                /* quarters k, k + 1: scales 2k + p and 2k + 2 + p, bytes p, p + 2 of word k / 2;
                 * a quarter's 16 products are at most 16 * 7 * 128 = 14336 in magnitude */
                __m512i scales = scale_pair_i16(sw[k / 2], p);
                for (size_t t = 0; t < n_tok; t++) {
                    __m512i sums = pair_sums_i16(s[t][k], q3_sum_shift(k), s[t][k + 1],
                                                 q3_sum_shift(k + 1));
                    isum[t] = _mm512_dpwssd_epi32(isum[t], sums, scales);
                }
            }
        }
}

/*
 * The group loop of Q3_K and Q6_K, whose kernels read q + 4 / q + 32 and whose rows have 16
 * signed scales each: `three_bits` (a constant where it is inlined) says which.
 */
static inline __attribute__((always_inline)) void
group_offset_k(size_t n_blocks, const uint8_t *group, bool three_bits, const block_q8_k *const *y,
               size_t n_tok, size_t prefetch, __m512 *acc)
{
    size_t block_bytes = PACK_ROWS * (three_bits ? sizeof(block_q3_k) : sizeof(block_q6_k));
    for (size_t b = 0; b < n_blocks; b++, group += block_bytes) {
        __m512i sw[4];
        if (three_bits)
            q3_scales(group, sw);
        else
            for (int k = 0; k < 4; k++)
                sw[k] = _mm512_loadu_si512(group + Q6K_SCALES_AT + 64 * k);
        __m512i isum[WIDE_TOKENS];
        for (size_t t = 0; t < n_tok; t++)
            isum[t] = _mm512_setzero_si512();
        if (three_bits)
            isum_q3_k(group, sw, y, b, n_tok, prefetch, isum);
        else if (n_tok == 1)
            isum[0] = isum_q6_k_one(group, sw, y[0][b].qs, prefetch);
        else
            isum_q6_k_tile(group, sw, y, b, n_tok, prefetch, isum);
        add_offset_block(group, sw, isum, three_bits ? 2 : 5, y, b, n_tok, acc);
    }
}

static inline __attribute__((always_inline)) void
group_q3_k(size_t n_blocks, const uint8_t *group, const quant_k_tile *tile, size_t n_tok,
           size_t prefetch, __m512 *acc)
{
    group_offset_k(n_blocks, group, true, tile->y, n_tok, prefetch, acc);
}

static inline __attribute__((always_inline)) void
group_q6_k(size_t n_blocks, const uint8_t *group, const quant_k_tile *tile, size_t n_tok,
           size_t prefetch, __m512 *acc)
{
    group_offset_k(n_blocks, group, false, tile->y, n_tok, prefetch, acc);
}

/* ---- packed Q2_K (VNNI) ---------------------------------------------------------------- */

/*
 * The integer sums sum_g sc_g * (q . qy over sub-block g) of one super-block for n_tok tokens
 * (sc in sc[], 0..15), sub-block g = 8h + 2k + p the bits 2k..2k + 1 of qs words
 * 8h + 4p .. 8h + 4p + 3, read in order. The quants stay in place (4^k q, at most 192, one AND
 * each); the shift of pair_sums_i16 takes the factor out of the sums, at most 16 * 3 * 128 =
 * 6144 after it.
 */
static inline __attribute__((always_inline)) void
isum_q2_k(const uint8_t *group, const __m512i sc[4], const block_q8_k *const *y, size_t b,
          size_t n_tok, size_t prefetch, __m512i *isum)
{
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++)
#pragma GCC unroll 2
        for (int p = 0; p < 2; p++) {
            __m512i s[TILE_TOKENS][4];
            for (size_t t = 0; t < n_tok; t++)
                for (int k = 0; k < 4; k++)
                    s[t][k] = _mm512_setzero_si512();
#pragma GCC unroll 4
            for (int v = 0; v < 4; v++) {
                int word = 8 * h + 4 * p + v;
                /* a sixteenth of the block's lines ahead per word, as in isum_q6_k_one */
                if (prefetch)
                    k_prefetch_ahead(group + word * sizeof(block_q2_k), sizeof(block_q2_k),
                                       prefetch);
                __m512i bytes = _mm512_loadu_si512(group + Q2K_QS_AT + 64 * word);
                __m512i q[4];
                for (int k = 0; k < 4; k++)
                    q[k] = _mm512_and_si512(bytes, _mm512_set1_epi8((char)(3 << (2 * k))));
                for (size_t t = 0; t < n_tok; t++) {
                    const int8_t *qy = y[t][b].qs + 128 * h + 16 * p + 4 * v;
                    for (int k = 0; k < 4; k++)
                        s[t][k] = x86_dpbusd_word(s[t][k], q[k], qy + 32 * k);
                }
            }
            /* quarters k, k + 1 (k even): scales g and g + 2, bytes p, p + 2 of word 2h + k / 2 */
            for (int k = 0; k < 4; k += 2) {
                __m512i scales = scale_pair_i16(sc[2 * h + k / 2], p);
                for (size_t t = 0; t < n_tok; t++) {
                    __m512i sums = pair_sums_i16(s[t][k], 2 * k, s[t][k + 1], 2 * k + 2);
                    isum[t] = _mm512_dpwssd_epi32(isum[t], sums, scales);
                }
            }
        }
}

_Static_assert(Q2K_DMIN_AT == 32, "Q2_K's d and dmin where Q4_K has them");

static inline __attribute__((always_inline)) void
group_q2_k(size_t n_blocks, const uint8_t *group, const quant_k_tile *tile, size_t n_tok,
           size_t prefetch, __m512 *acc)
{
    const block_q8_k *const *y = tile->y;
    const __m512i low4 = _mm512_set1_epi8(0x0f);
    for (size_t b = 0; b < n_blocks; b++, group += PACK_ROWS * sizeof(block_q2_k)) {
        __m512i sc[4], m[4];
        for (int k = 0; k < 4; k++) {
            __m512i words = _mm512_loadu_si512(group + Q2K_SCALES_AT + 64 * k);
            sc[k] = _mm512_and_si512(words, low4);
            m[k] = _mm512_and_si512(_mm512_srli_epi16(words, 4), low4);
        }
        __m512i isum[TILE_TOKENS], summs[TILE_TOKENS];
        for (size_t t = 0; t < n_tok; t++)
            isum[t] = _mm512_setzero_si512();
        isum_q2_k(group, sc, y, b, n_tok, prefetch, isum);
        scales_dot_bsums(m, y, b, n_tok, summs);
        add_block_with_min(group, isum, summs, y, b, n_tok, acc);
    }
}

#define PACKED_TILE_CALL(group_fn, n_tok, prefetch)                                           \
    do {                                                                                      \
        __m512 acc[WIDE_TOKENS];                                                              \
        for (size_t k = 0; k < (n_tok); k++)                                                  \
            acc[k] = _mm512_setzero_ps();                                                     \
        group_fn(n_blocks, group, &tile, (n_tok), (prefetch), acc);                           \
        for (size_t k = 0; k < (n_tok); k++)                                                  \
            _mm512_storeu_ps(out + k * ldy, acc[k]);                                          \
    } while (0)

/* Q8_K blocks carry their f32 scale and bsums; Q4_K and Q5_K also read their rows' sub-block
 * sums (quant_k_sub_block_sums). The tile width is a compile-time constant in each call, so
 * the token loops unroll; which tiles prefetch, PACKED_TILE_SWITCH says (as in
 * quant_legacy_avx512.c). The group functions take how far ahead to ask (bytes, 0: not at
 * all; K_PREFETCH_L1 set: into L1): tiles X86_PREFETCH_BYTES into L2, one token
 * cpu_k_quant_prefetch_bytes into the cache cpu_k_quant_prefetch_l1 says. */
#define DEFINE_PACKED_MATMUL(name, group_fn, block_type, prefetch_one, wide)                  \
    void name(size_t n, const void *packed, size_t n_groups, const void *act,                 \
              size_t act_row_bytes, const void *sums, size_t n_tokens, float *y, size_t ldy)  \
    {                                                                                         \
        size_t n_blocks = n / QK_K;                                                           \
        size_t group_bytes = PACK_ROWS * n_blocks * sizeof(block_type);                       \
        size_t widest = (wide) ? WIDE_TOKENS : TILE_TOKENS;                                   \
        size_t one_token = (prefetch_one) ? cpu_k_quant_prefetch_bytes() : 0;                 \
        if (one_token && cpu_k_quant_prefetch_l1())                                           \
            one_token |= K_PREFETCH_L1;                                                       \
        bool refetch = n_tokens > TILE_TOKENS && cpu_outgrows_l2(n_groups * group_bytes);     \
        for (size_t t = 0, n_tok; t < n_tokens; t += n_tok) {                                 \
            n_tok = n_tokens - t < widest ? n_tokens - t : widest;                            \
            if (n_tok > TILE_TOKENS && n_tok < WIDE_TOKENS)                                   \
                n_tok = TILE_TOKENS;                                                          \
            quant_k_tile tile;                                                                \
            quant_k_tile_init(&tile, act, act_row_bytes, sums, n, t, n_tok);                  \
            for (size_t g = 0; g < n_groups; g++) {                                           \
                const uint8_t *group = (const uint8_t *)packed + g * group_bytes;             \
                float *out = y + t * ldy + g * PACK_ROWS;                                     \
                size_t ahead = t == 0 || refetch ? X86_PREFETCH_BYTES : 0;                    \
                if ((wide) && n_tok == WIDE_TOKENS)                                           \
                    PACKED_TILE_CALL(group_fn, WIDE_TOKENS, ahead);                           \
                else if (n_tok == 1 && ahead && (one_token & K_PREFETCH_L1))                  \
                    PACKED_TILE_CALL(group_fn, 1, one_token | K_PREFETCH_L1);                 \
                else                                                                          \
                    PACKED_TILE_SWITCH(group_fn, n_tok, ahead,                                \
                                       one_token & ~(size_t)K_PREFETCH_L1);                   \
            }                                                                                 \
        }                                                                                     \
    }

DEFINE_PACKED_MATMUL(quant_k_matmul_packed_q2_k_avx512, group_q2_k, block_q2_k,
                     cpu_prefetch_single_stream(), false)
DEFINE_PACKED_MATMUL(quant_k_matmul_packed_q3_k_avx512, group_q3_k, block_q3_k,
                     cpu_prefetch_single_stream(), false)
DEFINE_PACKED_MATMUL(quant_k_matmul_packed_q4_k_avx512, group_q4_k, block_q4_k,
                     cpu_prefetch_single_stream(), false)
DEFINE_PACKED_MATMUL(quant_k_matmul_packed_q5_k_avx512, group_q5_k, block_q5_k,
                     cpu_prefetch_single_stream(), false)
/* Q6_K in the layout of quant_k_pack_q6_k, one stream per super-block: the earlier layout's
 * three interleaved runs (two of ql, one of qh) defeated the hardware prefetchers, so it
 * needed software prefetch everywhere, which in turn held it below plain loads where the
 * hardware alone streams faster (Zen 4 at 2 threads). */
DEFINE_PACKED_MATMUL(quant_k_matmul_packed_q6_k_avx512, group_q6_k, block_q6_k,
                     cpu_prefetch_single_stream(), true)

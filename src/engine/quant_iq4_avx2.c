/*
 * AVX2 IQ4_NL . Q8_0 and IQ4_XS . Q8_K dot products (quant_iq4.h): 32 codes become their
 * codebook values with one byte shuffle, the products with the activation quants are summed
 * exactly in i16 / i32, and the blocks (IQ4_NL) or super-blocks (IQ4_XS) are added in order
 * into one f32 sum with a fused multiply-add each, so results differ from the scalar level by
 * rounding only. Also the packed IQ4_XS and IQ4_NL kernels, which keep those steps for 8 rows
 * a vector and so give each row its dot's bits.
 */
#include "cpu.h"
#include "quant_iq4.h"
#include "quant_k_blocks.h"
#include "quant_legacy.h"
#include "quant_x86.h"

/* The codebook in both 128-bit lanes, for _mm256_shuffle_epi8. */
static inline __m256i codebook(void)
{
    return _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)quant_iq4_values));
}

/* maddubs's pair sums of 32 codes' values times 32 activation quants: values are at most 127
 * in magnitude and quants never -128 (Q8_0 and Q8_K scale by the largest magnitude over 127),
 * so a pair is at most 2 * 127 * 127 and cannot saturate. */
static inline __m256i pair_sums(const uint8_t qs[16], const int8_t q8[32], __m256i table)
{
    __m256i values = _mm256_shuffle_epi8(table, x86_unpack_nibbles(qs));
    __m256i quants = _mm256_loadu_si256((const __m256i *)q8);
    return _mm256_maddubs_epi16(_mm256_sign_epi8(values, values),
                                _mm256_sign_epi8(quants, values));
}

float quant_dot_iq4_nl_avx2(size_t n, const void *w, const void *a)
{
    const block_iq4_nl *x = w;
    const block_q8_0 *y = a;
    const __m256i table = codebook(), ones = _mm256_set1_epi16(1);
    size_t n_blocks = n / QUANT_QK32, i = 0;
    float acc = 0.0f;
    for (; i + 4 <= n_blocks; i += 4) {
        __m256i s[4];
        for (int k = 0; k < 4; k++)
            s[k] = _mm256_madd_epi16(pair_sums(x[i + k].qs, y[i + k].qs, table), ones);
        __m256i quads =
            _mm256_hadd_epi32(_mm256_hadd_epi32(s[0], s[1]), _mm256_hadd_epi32(s[2], s[3]));
        int32_t isum[4];
        _mm_storeu_si128((__m128i *)isum, _mm_add_epi32(_mm256_castsi256_si128(quads),
                                                        _mm256_extracti128_si256(quads, 1)));
        for (int k = 0; k < 4; k++)
            acc = x86_fused_add(x86_half(y[i + k].d) * x86_half(x[i + k].d), isum[k], acc);
    }
    for (; i < n_blocks; i++)
        acc = x86_fused_add(
            x86_half(y[i].d) * x86_half(x[i].d),
            x86_hsum_epi32(_mm256_madd_epi16(pair_sums(x[i].qs, y[i].qs, table), ones)), acc);
    return acc;
}

/* A super-block's eight sub-block pair sums each times its s - 32 (|s - 32| <= 32) in the
 * i16 x i16 madd, added in i32: the whole sum is at most 256 * 127 * 127 * 32 < 2^31 in
 * magnitude, so it is exact. */
float quant_dot_iq4_xs_avx2(size_t n, const void *w, const void *a)
{
    const block_iq4_xs *x = w;
    const block_q8_k *y = a;
    const __m256i table = codebook();
    float acc = 0.0f;
    for (size_t i = 0; i < n / QK_K; i++) {
        __m256i isum = _mm256_setzero_si256();
        for (int k = 0; k < QK_K / 32; k++) {
            __m256i scale = _mm256_set1_epi16((int16_t)(quant_iq4_xs_sub_scale(&x[i], k) - 32));
            __m256i pairs = pair_sums(x[i].qs + 16 * k, y[i].qs + 32 * k, table);
            isum = _mm256_add_epi32(isum, _mm256_madd_epi16(pairs, scale));
        }
        acc = x86_fused_add(x86_half(x[i].d) * q8k_d(&y[i]), x86_hsum_epi32(isum), acc);
    }
    return acc;
}

/* ---- packed IQ4_XS ---------------------------------------------------------------------- */

enum { PACK_ROWS = QUANT_PACK_ROWS, TILE_TOKENS = 4 };

static inline __m256i load256(const void *p)
{
    return _mm256_loadu_si256((const __m256i *)p);
}

/* s_k - 32 of sub-block k (a constant where it is inlined) of 8 rows, in both i16 halves of
 * each row's lane: low holds the rows' scales_l words, high their scales_h widened to i32. */
static inline __m256i half_sub_scale(__m256i low, __m256i high, int k)
{
    __m256i s = _mm256_or_si256(
        _mm256_and_si256(_mm256_srli_epi32(low, 4 * k), _mm256_set1_epi32(0x0f)),
        _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(high, 2 * k), _mm256_set1_epi32(3)),
                          4));
    s = _mm256_sub_epi32(s, _mm256_set1_epi32(32));
    return _mm256_or_si256(_mm256_and_si256(s, _mm256_set1_epi32(0xffff)),
                           _mm256_slli_epi32(s, 16));
}

/* isum[t] += scale * (values . the 4 activation bytes at qy[t] + at), per row lane: a row's
 * four products as two maddubs pairs (|value| times the quant carrying the value's sign, each
 * at most 2 * 127 * 127, so exact) widened and scaled by one madd each, since two such pairs
 * would not fit an i16. */
static inline __attribute__((always_inline)) void
add_word(__m256i values, __m256i magnitudes, __m256i scale, const block_q8_k *const *y,
         size_t b, int at, size_t n_tok, __m256i *isum)
{
    for (size_t t = 0; t < n_tok; t++) {
        __m256i quants = x86_set1_word(y[t][b].qs + at);
        __m256i pairs = _mm256_maddubs_epi16(magnitudes, _mm256_sign_epi8(quants, values));
        isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(pairs, scale));
    }
}

/*
 * Rows 8 * half .. 8 * half + 7 of super-block b (at `block`) against n_tok (1..4) tokens:
 * the whole super-block's sum in i32 per row and token (exact: see quant_dot_iq4_xs_avx2),
 * then acc[t] = fma(f32(d_x * d_y), isum[t], acc[t]), the dot's float step.
 */
static inline __attribute__((always_inline)) void
half_block_iq4_xs(const uint8_t *block, size_t b, size_t half, const block_q8_k *const *y,
                  size_t n_tok, size_t prefetch, __m256 *acc)
{
    const __m256i table = codebook(), low4 = _mm256_set1_epi8(0x0f);
    const uint8_t *lanes = block + 32 * half;
    __m256i low = load256(lanes + IQ4XS_SCALES_L_AT);
    __m256i high = _mm256_cvtepu16_epi32(
        _mm_loadu_si128((const __m128i *)(block + IQ4XS_SCALES_H_AT + 16 * half)));
    __m256i isum[TILE_TOKENS];
    for (size_t t = 0; t < n_tok; t++)
        isum[t] = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int k = 0; k < QK_K / 32; k++) {
        x86_prefetch_slice(block, PACK_ROWS * sizeof(block_iq4_xs), prefetch, (size_t)k, 8);
        __m256i scale = half_sub_scale(low, high, k);
#pragma GCC unroll 4
        for (int i = 0; i < 4; i++) {
            __m256i bytes = load256(lanes + IQ4XS_QS_AT + 64 * (4 * k + i));
            __m256i v0 = _mm256_shuffle_epi8(table, _mm256_and_si256(bytes, low4));
            __m256i v1 =
                _mm256_shuffle_epi8(table, _mm256_and_si256(_mm256_srli_epi16(bytes, 4), low4));
            add_word(v0, _mm256_abs_epi8(v0), scale, y, b, 32 * k + 4 * i, n_tok, isum);
            add_word(v1, _mm256_abs_epi8(v1), scale, y, b, 32 * k + 16 + 4 * i, n_tok, isum);
        }
    }
    __m256 dx = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(block + 16 * half)));
    for (size_t t = 0; t < n_tok; t++)
        acc[t] = _mm256_fmadd_ps(_mm256_mul_ps(dx, _mm256_set1_ps(q8k_d(&y[t][b]))),
                                 _mm256_cvtepi32_ps(isum[t]), acc[t]);
}

X86_DEFINE_PACKED_GROUP(group_iq4_xs, half_block_iq4_xs, PACK_ROWS * sizeof(block_iq4_xs),
                        const block_q8_k *const *)

void quant_iq4_matmul_packed_xs_avx2(size_t n, const void *packed, size_t n_groups,
                                     const void *act, size_t act_row_bytes, const void *sums,
                                     size_t n_tokens, float *y, size_t ldy)
{
    (void)sums;
    size_t n_blocks = n / QK_K;
    size_t group_bytes = PACK_ROWS * n_blocks * sizeof(block_iq4_xs);
    const size_t prefetch_one = cpu_one_token_prefetch_bytes();
    for (size_t t = 0; t < n_tokens; t += TILE_TOKENS) {
        size_t n_tok = n_tokens - t < TILE_TOKENS ? n_tokens - t : TILE_TOKENS;
        const block_q8_k *rows[TILE_TOKENS];
        for (size_t k = 0; k < n_tok; k++)
            rows[k] = (const block_q8_k *)((const char *)act + (t + k) * act_row_bytes);
        for (size_t g = 0; g < n_groups; g++) {
            const uint8_t *group = (const uint8_t *)packed + g * group_bytes;
            float *out = y + t * ldy + g * PACK_ROWS;
            X86_PACKED_GROUP_SWITCH(group_iq4_xs, n_tok, rows);
        }
    }
}

/* ---- packed IQ4_NL ---------------------------------------------------------------------- */

enum { NL_BLOCK_BYTES = PACK_ROWS * sizeof(block_iq4_nl) };

/*
 * Half `half` (8 rows) of a group against n_tok tokens, block by block: word m of the
 * block's codes (m < 4 the low nibbles of bytes 4m..4m + 3, else the high ones of bytes
 * 4(m - 4)..) meets activation bytes 4m..4m + 3; each word's pair sums are widened on their
 * own, as in the IQ4_XS kernel, then one fused multiply-add per block: the dot's steps.
 * dy holds each token's block scales as f32 (quant_prepare_packed_act_avx2).
 */
static inline __attribute__((always_inline)) void
half_iq4_nl(size_t n_blocks, const uint8_t *group, int half, const block_q8_0 *const *y,
            const float *const *dy, size_t n_tok, __m256 *acc)
{
    const __m256i table = codebook(), low4 = _mm256_set1_epi8(0x0f), ones = _mm256_set1_epi16(1);
    for (size_t b = 0; b < n_blocks; b++, group += NL_BLOCK_BYTES) {
        __m256i isum[TILE_TOKENS];
        for (size_t t = 0; t < n_tok; t++)
            isum[t] = _mm256_setzero_si256();
#pragma GCC unroll 8
        for (int m = 0; m < 8; m++) {
            __m256i bytes = load256(group + IQ4NL_QS_AT + 64 * (m % 4) + 32 * half);
            __m256i values = _mm256_shuffle_epi8(
                table, _mm256_and_si256(m < 4 ? bytes : _mm256_srli_epi16(bytes, 4), low4));
            __m256i magnitudes = _mm256_abs_epi8(values);
            for (size_t t = 0; t < n_tok; t++) {
                __m256i quants = x86_set1_word(y[t][b].qs + 4 * m);
                __m256i pairs = _mm256_maddubs_epi16(magnitudes, _mm256_sign_epi8(quants, values));
                isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(pairs, ones));
            }
        }
        __m256 dx = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(group + 16 * half)));
        for (size_t t = 0; t < n_tok; t++)
            acc[t] = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_set1_ps(dy[t][b]), dx),
                                     _mm256_cvtepi32_ps(isum[t]), acc[t]);
    }
}

void quant_iq4_matmul_packed_nl_avx2(size_t n, const void *packed, size_t n_groups,
                                     const void *act, size_t act_row_bytes, const void *sums,
                                     size_t n_tokens, float *y, size_t ldy)
{
    size_t n_blocks = n / QUANT_QK32, group_bytes = n_blocks * NL_BLOCK_BYTES;
    size_t sums_bytes = quant_packed_sums_bytes(n);
    for (size_t t = 0; t < n_tokens; t += TILE_TOKENS) {
        size_t n_tok = n_tokens - t < TILE_TOKENS ? n_tokens - t : TILE_TOKENS;
        const block_q8_0 *rows[TILE_TOKENS];
        const float *dy[TILE_TOKENS];
        for (size_t k = 0; k < n_tok; k++) {
            rows[k] = (const block_q8_0 *)((const char *)act + (t + k) * act_row_bytes);
            dy[k] = (const float *)((const char *)sums + (t + k) * sums_bytes);
        }
        for (size_t g = 0; g < n_groups; g++)
            for (int half = 0; half < 2; half++) {
                __m256 acc[TILE_TOKENS];
                for (size_t k = 0; k < TILE_TOKENS; k++)
                    acc[k] = _mm256_setzero_ps();
                const uint8_t *group = (const uint8_t *)packed + g * group_bytes;
                switch (n_tok) {
                case 4: half_iq4_nl(n_blocks, group, half, rows, dy, 4, acc); break;
                case 3: half_iq4_nl(n_blocks, group, half, rows, dy, 3, acc); break;
                case 2: half_iq4_nl(n_blocks, group, half, rows, dy, 2, acc); break;
                default: half_iq4_nl(n_blocks, group, half, rows, dy, 1, acc); break;
                }
                for (size_t k = 0; k < n_tok; k++)
                    _mm256_storeu_ps(y + (t + k) * ldy + g * PACK_ROWS + 8 * half, acc[k]);
            }
    }
}

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

/* ---- packed kernels ---------------------------------------------------------------------- */

/*
 * Both packed kernels read a group as two halves of 8 rows, a 32-bit lane per row, and keep
 * the dots' integer steps: each word of 4 codes per row meets one activation word q, its
 * products summed by maddubs in i16 pairs and widened by madd into the row's i32 sum (two
 * words' pairs would not fit an i16). maddubs takes one unsigned operand: |q|, with the
 * values carrying both signs (vpsignb by q). Each activation block's magnitudes are computed
 * once and stored, and every word of them is read back by a broadcast from memory, a load
 * and no vector operation: |value| instead would cost an abs per word of 8 rows. A pair is at
 * most 2 * 127 * 127 (values down to -127, quants never -128).
 */
enum { PACK_ROWS = QUANT_PACK_ROWS, TILE_TOKENS = 4 };

static inline __m256i load256(const void *p)
{
    return _mm256_loadu_si256((const __m256i *)p);
}

typedef int32_t iq4_word __attribute__((may_alias, aligned(1)));

/* The 4 bytes at p in every lane, read by the broadcast itself: from a plain
 * _mm256_set1_epi32 of bytes stored just before, GCC 12 keeps the stored vector in a register
 * and extracts each word with vector operations. */
static inline __m256i broadcast_word_from_memory(const void *p)
{
    __m256i v;
    __asm__("vpbroadcastd %1, %0" : "=x"(v) : "m"(*(const iq4_word *)p));
    return v;
}

/* magnitudes[j] = |q[j]| for the 32 * n_vectors activation quants at q. */
static inline __attribute__((always_inline)) void
store_magnitudes(const int8_t *q, int n_vectors, int8_t *magnitudes)
{
    for (int k = 0; k < n_vectors; k++)
        _mm256_store_si256((__m256i *)(magnitudes + 32 * k),
                           _mm256_abs_epi8(load256(q + 32 * k)));
}

/* The i16 pair sums of one word of 8 rows' values times the activation word at q, whose
 * magnitudes are at q_magnitudes. */
static inline __attribute__((always_inline)) __m256i
word_pairs(__m256i values, const int8_t *q, const int8_t *q_magnitudes)
{
    return _mm256_maddubs_epi16(broadcast_word_from_memory(q_magnitudes),
                                _mm256_sign_epi8(values, x86_set1_word(q)));
}

/* ---- packed IQ4_XS ---------------------------------------------------------------------- */

/*
 * The eight 6-bit sub-block scales of 8 rows, less 32, as bytes: even[r][j] is s_2j - 32 of
 * row r (byte j of its lane), odd[r][j] s_2j+1 - 32. Byte j of a row's scales_l word holds
 * the low four bits of both, and nibble j of its scales_h their high two bits: a byte shuffle
 * brings that nibble to byte j (scales_h and scales_h >> 4 side by side in each 128-bit
 * lane, a lane's four rows in each), and a table per parity turns it into 16 times the high
 * bits less 32.
 */
static inline __attribute__((always_inline)) void
half_sub_scales(const uint8_t *block, size_t half, __m256i *even, __m256i *odd)
{
    const __m256i low4 = _mm256_set1_epi8(0x0f);
    __m256i low = load256(block + IQ4XS_SCALES_L_AT + 32 * half);
    __m256i high = _mm256_permute4x64_epi64(
        _mm256_castsi128_si256(
            _mm_loadu_si128((const __m128i *)(block + IQ4XS_SCALES_H_AT + 16 * half))),
        0x50);
    high = _mm256_blend_epi32(high, _mm256_srli_epi16(high, 4), 0xcc);
    /* row r of a lane: scales_h byte 0, its high nibble, byte 1, its high nibble */
    const __m256i spread = _mm256_setr_epi32(0x09010800, 0x0b030a02, 0x0d050c04, 0x0f070e06,
                                             0x09010800, 0x0b030a02, 0x0d050c04, 0x0f070e06);
    __m256i nibble = _mm256_and_si256(_mm256_shuffle_epi8(high, spread), low4);
    const __m256i high_even = _mm256_setr_epi8(
        -32, -16, 0, 16, -32, -16, 0, 16, -32, -16, 0, 16, -32, -16, 0, 16,
        -32, -16, 0, 16, -32, -16, 0, 16, -32, -16, 0, 16, -32, -16, 0, 16);
    const __m256i high_odd = _mm256_setr_epi8(
        -32, -32, -32, -32, -16, -16, -16, -16, 0, 0, 0, 0, 16, 16, 16, 16,
        -32, -32, -32, -32, -16, -16, -16, -16, 0, 0, 0, 0, 16, 16, 16, 16);
    *even = _mm256_add_epi8(_mm256_and_si256(low, low4), _mm256_shuffle_epi8(high_even, nibble));
    *odd = _mm256_add_epi8(_mm256_and_si256(_mm256_srli_epi16(low, 4), low4),
                           _mm256_shuffle_epi8(high_odd, nibble));
}

/* Byte j (0..3, a constant where it is inlined) of each lane of scales, sign-extended into
 * both i16 halves of the lane: the madd operand of a sub-block's scale. */
static inline __attribute__((always_inline)) __m256i lane_scale(__m256i scales, int j)
{
    int32_t b = 0x80 | (j << 8) | (0x80 << 16) | (j << 24), step = 0x04000400;
    __m256i at = _mm256_setr_epi32(b, b + step, b + 2 * step, b + 3 * step, b, b + step,
                                   b + 2 * step, b + 3 * step);
    return _mm256_srai_epi16(_mm256_shuffle_epi8(scales, at), 8);
}

/*
 * All 16 rows of super-block b (at `block`) against n_tok (1..4) tokens, each activation word
 * serving both halves: each half's sum in i32 per row and token, every word's pairs
 * times its sub-block's s - 32 in the madd (exact: see quant_dot_iq4_xs_avx2), then
 * acc[h][t] = fma(f32(d_x * d_y), isum, acc[h][t]), the dot's float step. The block's lines
 * are asked for `prefetch` bytes ahead, an eighth before each sub-block. The empty asm ties
 * each sum to its register after each word: without it GCC 12 reassociated the adds into a
 * tree per sum and spilled the products to the stack.
 */
static inline __attribute__((always_inline)) void
tile_block_iq4_xs(const uint8_t *block, size_t b, const block_q8_k *const *y, size_t n_tok,
                  size_t prefetch, __m256 acc[2][TILE_TOKENS])
{
    const __m256i table = codebook(), low4 = _mm256_set1_epi8(0x0f);
    __m256i even[2], odd[2], isum[2][TILE_TOKENS];
    int8_t q_magnitudes[TILE_TOKENS][QK_K] __attribute__((aligned(32)));
    for (size_t t = 0; t < n_tok; t++)
        store_magnitudes(y[t][b].qs, QK_K / 32, q_magnitudes[t]);
    for (size_t h = 0; h < 2; h++) {
        half_sub_scales(block, h, &even[h], &odd[h]);
        for (size_t t = 0; t < n_tok; t++)
            isum[h][t] = _mm256_setzero_si256();
    }
#pragma GCC unroll 8
    for (int k = 0; k < QK_K / 32; k++) {
        x86_prefetch_slice(block, PACK_ROWS * sizeof(block_iq4_xs), prefetch, (size_t)k, 8);
        __m256i scale[2];
        for (size_t h = 0; h < 2; h++)
            scale[h] = lane_scale(k % 2 ? odd[h] : even[h], k / 2);
#pragma GCC unroll 4
        for (int i = 0; i < 4; i++) {
            __m256i values[2][2];
            for (size_t h = 0; h < 2; h++) {
                __m256i bytes = load256(block + IQ4XS_QS_AT + 64 * (4 * k + i) + 32 * h);
                values[h][0] = _mm256_shuffle_epi8(table, _mm256_and_si256(bytes, low4));
                values[h][1] = _mm256_shuffle_epi8(
                    table, _mm256_and_si256(_mm256_srli_epi16(bytes, 4), low4));
            }
            for (size_t t = 0; t < n_tok; t++)
                for (int nib = 0; nib < 2; nib++) {
                    int at = 32 * k + 16 * nib + 4 * i;
                    for (size_t h = 0; h < 2; h++) {
                        __m256i pairs =
                            word_pairs(values[h][nib], y[t][b].qs + at, q_magnitudes[t] + at);
                        isum[h][t] = _mm256_add_epi32(isum[h][t],
                                                      _mm256_madd_epi16(pairs, scale[h]));
                        __asm__("" : "+x"(isum[h][t]));
                    }
                }
        }
    }
    for (size_t h = 0; h < 2; h++) {
        __m256 dx = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(block + 16 * h)));
        for (size_t t = 0; t < n_tok; t++)
            acc[h][t] = _mm256_fmadd_ps(_mm256_mul_ps(dx, _mm256_set1_ps(q8k_d(&y[t][b]))),
                                        _mm256_cvtepi32_ps(isum[h][t]), acc[h][t]);
    }
}

X86_DEFINE_PACKED_GROUP_WIDE(group_iq4_xs, tile_block_iq4_xs, PACK_ROWS * sizeof(block_iq4_xs),
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

/* A tile's activation rows: Q8_0 blocks, and their scales as f32
 * (quant_prepare_packed_act_avx2). */
typedef struct nl_tile {
    const block_q8_0 *y[TILE_TOKENS];
    const float *dy[TILE_TOKENS];
} nl_tile;

/*
 * All 16 rows of block b (at `block`) against n_tok (1..4) tokens, each activation word
 * serving both halves: word m of a row's codes (m < 4 the low nibbles of bytes 4m..4m + 3,
 * else the high ones of bytes 4(m - 4)..) meets activation bytes 4m..4m + 3, each word
 * widened on its own, then one fused multiply-add per block and token: the dot's steps. The
 * block's 4.5 lines are asked for `prefetch` bytes ahead, a quarter before each pair of
 * words. The empty asm is tile_block_iq4_xs's.
 */
static inline __attribute__((always_inline)) void
tile_block_iq4_nl(const uint8_t *block, size_t b, const nl_tile *tile, size_t n_tok,
                  size_t prefetch, __m256 acc[2][TILE_TOKENS])
{
    const __m256i table = codebook(), low4 = _mm256_set1_epi8(0x0f), ones = _mm256_set1_epi16(1);
    __m256i isum[2][TILE_TOKENS];
    int8_t q_magnitudes[TILE_TOKENS][QUANT_QK32] __attribute__((aligned(32)));
    for (size_t t = 0; t < n_tok; t++)
        store_magnitudes(tile->y[t][b].qs, 1, q_magnitudes[t]);
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++) {
        x86_prefetch_slice(block, NL_BLOCK_BYTES, prefetch, (size_t)j, 4);
        __m256i bytes[2];
        for (size_t h = 0; h < 2; h++)
            bytes[h] = load256(block + IQ4NL_QS_AT + 64 * j + 32 * h);
        for (int nib = 0; nib < 2; nib++) {
            __m256i values[2];
            for (size_t h = 0; h < 2; h++) {
                __m256i codes = nib ? _mm256_srli_epi16(bytes[h], 4) : bytes[h];
                values[h] = _mm256_shuffle_epi8(table, _mm256_and_si256(codes, low4));
            }
            for (size_t t = 0; t < n_tok; t++) {
                int at = 16 * nib + 4 * j;
                for (size_t h = 0; h < 2; h++) {
                    __m256i p = _mm256_madd_epi16(
                        word_pairs(values[h], tile->y[t][b].qs + at, q_magnitudes[t] + at),
                        ones);
                    isum[h][t] = j == 0 && nib == 0 ? p : _mm256_add_epi32(isum[h][t], p);
                    __asm__("" : "+x"(isum[h][t]));
                }
            }
        }
    }
    for (size_t h = 0; h < 2; h++) {
        __m256 dx = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(block + 16 * h)));
        for (size_t t = 0; t < n_tok; t++)
            acc[h][t] = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_set1_ps(tile->dy[t][b]), dx),
                                        _mm256_cvtepi32_ps(isum[h][t]), acc[h][t]);
    }
}

X86_DEFINE_PACKED_GROUP_WIDE(group_iq4_nl, tile_block_iq4_nl, NL_BLOCK_BYTES, const nl_tile *)

void quant_iq4_matmul_packed_nl_avx2(size_t n, const void *packed, size_t n_groups,
                                     const void *act, size_t act_row_bytes, const void *sums,
                                     size_t n_tokens, float *y, size_t ldy)
{
    size_t n_blocks = n / QUANT_QK32, group_bytes = n_blocks * NL_BLOCK_BYTES;
    size_t sums_bytes = quant_packed_sums_bytes(n);
    const size_t prefetch_one = cpu_one_token_prefetch_bytes();
    for (size_t t = 0; t < n_tokens; t += TILE_TOKENS) {
        size_t n_tok = n_tokens - t < TILE_TOKENS ? n_tokens - t : TILE_TOKENS;
        nl_tile tile;
        for (size_t k = 0; k < n_tok; k++) {
            tile.y[k] = (const block_q8_0 *)((const char *)act + (t + k) * act_row_bytes);
            tile.dy[k] = (const float *)((const char *)sums + (t + k) * sums_bytes);
        }
        for (size_t g = 0; g < n_groups; g++) {
            const uint8_t *group = (const uint8_t *)packed + g * group_bytes;
            float *out = y + t * ldy + g * PACK_ROWS;
            X86_PACKED_GROUP_SWITCH(group_iq4_nl, n_tok, &tile);
        }
    }
}

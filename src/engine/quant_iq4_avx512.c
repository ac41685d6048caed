/*
 * The AVX-512 VNNI packed IQ4_XS and IQ4_NL kernels (quant_iq4.h): the 16 rows of a group in
 * one 512-bit vector, against tiles of 1..4 tokens. Codes become their codebook values plus
 * 128 with one byte shuffle (unsigned, as vpdpbusd wants them); each IQ4_XS sub-block's
 * products start from -128 times its activation sum (quant_k_sub_block_sums), so its i32 sum
 * is the exact signed one, then times the sub-block's scale; an IQ4_NL block's start from
 * the -128 start values of the packed Q8_0 sums. The float steps are the AVX2 dots', so every
 * product has the bits of quant_dot_iq4_xs_avx2 / quant_dot_iq4_nl_avx2.
 */
#include <immintrin.h>
#include <string.h>

#include "cpu.h"
#include "quant_iq4.h"
#include "quant_k_blocks.h"
#include "quant_legacy.h"
#include "quant_x86.h"

enum { PACK_ROWS = QUANT_PACK_ROWS, TILE_TOKENS = 4 };
_Static_assert((int)TILE_TOKENS <= (int)QUANT_K_TILE_TOKENS, "a tile's rows fit quant_k_tile");

/* The codebook plus 128 (1..241, as bytes: the value with its top bit flipped) in every
 * 128-bit lane. */
static inline __m512i shifted_codebook(void)
{
    __m128i values = _mm_loadu_si128((const __m128i *)quant_iq4_values);
    return _mm512_broadcast_i32x4(_mm_xor_si128(values, _mm_set1_epi8((char)0x80)));
}

/* s_k - 32 of sub-block k (a constant where it is inlined) of the 16 rows, an i32 per row:
 * low holds their scales_l words, high their scales_h widened to i32. */
static inline __m512i sub_scale(__m512i low, __m512i high, int k)
{
    __m512i s = _mm512_or_si512(
        _mm512_and_si512(_mm512_srli_epi32(low, 4 * k), _mm512_set1_epi32(0x0f)),
        _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(high, 2 * k), _mm512_set1_epi32(3)),
                          4));
    return _mm512_sub_epi32(s, _mm512_set1_epi32(32));
}

/*
 * Super-block b (at `block`) of the 16 rows against n_tok tokens. A sub-block's sum is at
 * most 32 * 127 * 127 in magnitude and its partial sums (from -128 * S, |S| <= 32 * 127) stay
 * well inside i32; times |s - 32| <= 32 and over eight sub-blocks the whole is below 2^31, as
 * in the AVX2 dot, so isum is exact.
 */
static inline __attribute__((always_inline)) void
super_block(const uint8_t *block, size_t b, const quant_k_tile *tile, size_t n_tok,
             size_t prefetch, __m512 *acc)
{
    const __m512i table = shifted_codebook(), low4 = _mm512_set1_epi8(0x0f);
    __m512i low = _mm512_loadu_si512(block + IQ4XS_SCALES_L_AT);
    __m512i high = _mm512_cvtepu16_epi32(
        _mm256_loadu_si256((const __m256i *)(block + IQ4XS_SCALES_H_AT)));
    __m512i isum[TILE_TOKENS];
    for (size_t t = 0; t < n_tok; t++)
        isum[t] = _mm512_setzero_si512();
#pragma GCC unroll 8
    for (int k = 0; k < QK_K / 32; k++) {
        x86_prefetch_slice(block, PACK_ROWS * sizeof(block_iq4_xs), prefetch, (size_t)k, 8);
        __m512i sum[TILE_TOKENS];
        for (size_t t = 0; t < n_tok; t++) {
            int16_t s;
            memcpy(&s, tile->sub_sums[t] + 16 * b + 2 * k, sizeof s);
            sum[t] = _mm512_set1_epi32(-128 * (int32_t)s);
        }
#pragma GCC unroll 4
        for (int i = 0; i < 4; i++) {
            __m512i bytes = _mm512_loadu_si512(block + IQ4XS_QS_AT + 64 * (4 * k + i));
            __m512i u0 = _mm512_shuffle_epi8(table, _mm512_and_si512(bytes, low4));
            __m512i u1 =
                _mm512_shuffle_epi8(table, _mm512_and_si512(_mm512_srli_epi16(bytes, 4), low4));
            for (size_t t = 0; t < n_tok; t++) {
                const int8_t *qy = tile->y[t][b].qs + 32 * k + 4 * i;
                sum[t] = x86_dpbusd_word(sum[t], u0, qy);
                sum[t] = x86_dpbusd_word(sum[t], u1, qy + 16);
            }
        }
        __m512i scale = sub_scale(low, high, k);
        for (size_t t = 0; t < n_tok; t++)
            isum[t] = _mm512_add_epi32(isum[t], _mm512_mullo_epi32(sum[t], scale));
    }
    __m512 dx = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)block));
    for (size_t t = 0; t < n_tok; t++)
        acc[t] = _mm512_fmadd_ps(_mm512_mul_ps(dx, _mm512_set1_ps(q8k_d(&tile->y[t][b]))),
                                 _mm512_cvtepi32_ps(isum[t]), acc[t]);
}

/* One group for n_tok tokens (a constant in each call, so the token loops unroll). */
#define GROUP_CALL(n_tok)                                                                     \
    do {                                                                                      \
        __m512 acc[TILE_TOKENS];                                                              \
        for (size_t k = 0; k < (n_tok); k++)                                                  \
            acc[k] = _mm512_setzero_ps();                                                     \
        for (size_t b = 0; b < n_blocks; b++)                                                 \
            super_block(group + b * PACK_ROWS * sizeof(block_iq4_xs), b, &tile, (n_tok),      \
                         prefetch, acc);                                                      \
        for (size_t k = 0; k < (n_tok); k++)                                                  \
            _mm512_storeu_ps(out + k * ldy, acc[k]);                                          \
    } while (0)

/* The first tile streams the rows and asks for them ahead (one token only where the CPU
 * streams better so, cpu_prefetch_single_stream); later tiles find them in cache, or ask
 * again where the rows outgrow L2. */
void quant_iq4_matmul_packed_xs_avx512(size_t n, const void *packed, size_t n_groups,
                                       const void *act, size_t act_row_bytes, const void *sums,
                                       size_t n_tokens, float *y, size_t ldy)
{
    size_t n_blocks = n / QK_K;
    size_t group_bytes = PACK_ROWS * n_blocks * sizeof(block_iq4_xs);
    bool refetch = n_tokens > TILE_TOKENS && cpu_outgrows_l2(n_groups * group_bytes);
    bool single = cpu_prefetch_single_stream();
    for (size_t t = 0; t < n_tokens; t += TILE_TOKENS) {
        size_t n_tok = n_tokens - t < TILE_TOKENS ? n_tokens - t : TILE_TOKENS;
        bool ask = (t == 0 || refetch) && (n_tok > 1 || single);
        size_t prefetch = ask ? X86_PREFETCH_BYTES : 0;
        quant_k_tile tile;
        quant_k_tile_init(&tile, act, act_row_bytes, sums, n, t, n_tok);
        for (size_t g = 0; g < n_groups; g++) {
            const uint8_t *group = (const uint8_t *)packed + g * group_bytes;
            float *out = y + t * ldy + g * PACK_ROWS;
            switch (n_tok) {
            case 4: GROUP_CALL(4); break;
            case 3: GROUP_CALL(3); break;
            case 2: GROUP_CALL(2); break;
            default: GROUP_CALL(1); break;
            }
        }
    }
}

/* ---- packed IQ4_NL ---------------------------------------------------------------------- */

enum { NL_BLOCK_BYTES = PACK_ROWS * sizeof(block_iq4_nl) };
/* where quant_prepare_packed_act_avx2's -128 * sum(qy) start values sit: after dy and the
 * -8 ones */
enum { START_128_ARRAY = 1 };

/* The 16 rows of a group against n_tok tokens, block by block: codes as value + 128 through
 * vpdpbusd from -128 times the block's quant sum (the exact signed sum: at most 32 * 241 *
 * 127 on the way), one fused multiply-add per block, the dot's float step. */
static inline __attribute__((always_inline)) void
group_iq4_nl(size_t n_blocks, const uint8_t *group, const block_q8_0 *const *y,
             const float *const *dy, const int32_t *const *start, size_t n_tok, bool prefetch,
             __m512 *acc)
{
    const __m512i table = shifted_codebook(), low4 = _mm512_set1_epi8(0x0f);
    for (size_t b = 0; b < n_blocks; b++, group += NL_BLOCK_BYTES) {
        if (prefetch)
            x86_prefetch_ahead(group, NL_BLOCK_BYTES, X86_PREFETCH_BYTES);
        __m512i u[8];
        for (int j = 0; j < 4; j++) {
            __m512i bytes = _mm512_loadu_si512(group + IQ4NL_QS_AT + 64 * j);
            u[j] = _mm512_shuffle_epi8(table, _mm512_and_si512(bytes, low4));
            u[4 + j] =
                _mm512_shuffle_epi8(table, _mm512_and_si512(_mm512_srli_epi16(bytes, 4), low4));
        }
        __m512 dx = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)group));
        for (size_t t = 0; t < n_tok; t++) {
            const int8_t *qy = y[t][b].qs;
            __m512i low = _mm512_set1_epi32(start[t][b]), high = _mm512_setzero_si512();
            for (int j = 0; j < 4; j++) {
                low = x86_dpbusd_word(low, u[j], qy + 4 * j);
                high = x86_dpbusd_word(high, u[4 + j], qy + 16 + 4 * j);
            }
            __m512 d = _mm512_mul_ps(_mm512_set1_ps(dy[t][b]), dx);
            acc[t] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(_mm512_add_epi32(low, high)), acc[t]);
        }
    }
}

void quant_iq4_matmul_packed_nl_avx512(size_t n, const void *packed, size_t n_groups,
                                       const void *act, size_t act_row_bytes, const void *sums,
                                       size_t n_tokens, float *y, size_t ldy)
{
    size_t n_blocks = n / QUANT_QK32, group_bytes = n_blocks * NL_BLOCK_BYTES;
    size_t sums_bytes = quant_packed_sums_bytes(n);
    bool prefetch_one = cpu_prefetch_single_stream();
    for (size_t t = 0; t < n_tokens; t += TILE_TOKENS) {
        size_t n_tok = n_tokens - t < TILE_TOKENS ? n_tokens - t : TILE_TOKENS;
        const block_q8_0 *rows[TILE_TOKENS];
        const float *dy[TILE_TOKENS];
        const int32_t *start[TILE_TOKENS];
        for (size_t k = 0; k < n_tok; k++) {
            rows[k] = (const block_q8_0 *)((const char *)act + (t + k) * act_row_bytes);
            dy[k] = (const float *)((const char *)sums + (t + k) * sums_bytes);
            start[k] = (const int32_t *)(dy[k] + n_blocks) + START_128_ARRAY * n_blocks;
        }
        for (size_t g = 0; g < n_groups; g++) {
            __m512 acc[TILE_TOKENS];
            for (size_t k = 0; k < TILE_TOKENS; k++)
                acc[k] = _mm512_setzero_ps();
            group_iq4_nl(n_blocks, (const uint8_t *)packed + g * group_bytes, rows, dy, start,
                         n_tok, n_tok > 1 || prefetch_one, acc);
            for (size_t k = 0; k < n_tok; k++)
                _mm512_storeu_ps(y + (t + k) * ldy + g * PACK_ROWS, acc[k]);
        }
    }
}

/*
 * AVX2 MXFP4 . Q8_0 dot product (quant_mxfp4.h): a block's 32 codes become their integer
 * values with one byte shuffle from the value table, are multiplied by the activation quants
 * exactly in i16 / i32, and the blocks are added in order into one f32 sum with a fused
 * multiply-add each, so results differ from the scalar level by rounding only.
 */
#include "quant_legacy.h"
#include "quant_mxfp4.h"
#include "quant_x86.h"

/* Eight i32 partial sums of a block's values times its activation quants. Values are at
 * most 12 in magnitude, so maddubs's pair sums (24 * 128) cannot saturate. */
static inline __m256i block_sums_mxfp4(const block_mxfp4 *x, const block_q8_0 *y, __m256i table)
{
    __m256i values = _mm256_shuffle_epi8(table, x86_unpack_nibbles(x->qs));
    __m256i quants = _mm256_loadu_si256((const __m256i *)y->qs);
    return x86_dot_i8(values, quants);
}

float quant_dot_mxfp4_avx2(size_t n, const void *w, const void *a)
{
    const block_mxfp4 *x = w;
    const block_q8_0 *y = a;
    const __m256i table =
        _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)quant_mxfp4_values));
    size_t n_blocks = n / QUANT_QK32, i = 0;
    float acc = 0.0f;
    for (; i + 4 <= n_blocks; i += 4) {
        __m256i s[4];
        for (int k = 0; k < 4; k++)
            s[k] = block_sums_mxfp4(x + i + k, y + i + k, table);
        __m256i quads =
            _mm256_hadd_epi32(_mm256_hadd_epi32(s[0], s[1]), _mm256_hadd_epi32(s[2], s[3]));
        int32_t isum[4];
        _mm_storeu_si128((__m128i *)isum, _mm_add_epi32(_mm256_castsi256_si128(quads),
                                                        _mm256_extracti128_si256(quads, 1)));
        for (int k = 0; k < 4; k++)
            acc = x86_fused_add(x86_half(y[i + k].d) * quant_mxfp4_scale(x[i + k].e), isum[k],
                                acc);
    }
    for (; i < n_blocks; i++)
        acc = x86_fused_add(x86_half(y[i].d) * quant_mxfp4_scale(x[i].e),
                            x86_hsum_epi32(block_sums_mxfp4(x + i, y + i, table)), acc);
    return acc;
}

/* ---- packed: 16 rows as two halves of 8, one 32-bit lane per row ---- */

enum { PACK_ROWS = QUANT_PACK_ROWS, TILE_TOKENS = 4 };
enum { BLOCK_BYTES = PACK_ROWS * sizeof(block_mxfp4), EXPONENT_BYTES = PACK_ROWS };
/* the -16 * sum(qy) start values of quant_prepare_packed_act_avx2 */
enum { START_ARRAY = 2 };

/* Eight rows' scales 2^(e - 128) from their exponent bytes, as quant_mxfp4_scale. */
static inline __m256 half_scales(const uint8_t *exponents)
{
    __m256i e = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)exponents));
    const __m256i one = _mm256_set1_epi32(1);
    __m256i normal = _mm256_slli_epi32(_mm256_sub_epi32(e, one), 23);
    __m256i tiny = _mm256_srlv_epi32(_mm256_set1_epi32(0x00400000), _mm256_sub_epi32(one, e));
    __m256i is_normal = _mm256_cmpgt_epi32(e, one);
    return _mm256_castsi256_ps(_mm256_blendv_epi8(tiny, normal, is_normal));
}

/*
 * Half `half` of a group against n_tok tokens: codes looked up as value + 16 (at most 28, so
 * maddubs's pair sums and four words of them fit i16), the integer sum started at
 * -16 * sum(qy), one fused multiply-add per block: the bits of quant_dot_mxfp4_avx2.
 */
static inline __attribute__((always_inline)) void
half_mxfp4(size_t n_blocks, const uint8_t *group, int half, const void *const *y,
           const float *const *dy, const int32_t *const *start, size_t n_tok, __m256 *acc)
{
    const __m256i table = _mm256_broadcastsi128_si256(_mm_add_epi8(
        _mm_loadu_si128((const __m128i *)quant_mxfp4_values), _mm_set1_epi8(16)));
    const __m256i low4 = _mm256_set1_epi8(0x0f), ones = _mm256_set1_epi16(1);
    for (size_t b = 0; b < n_blocks; b++, group += BLOCK_BYTES) {
        __m256 dx = half_scales(group + 8 * half);
        __m256i lo[4], hi[4];
        for (int j = 0; j < 4; j++) {
            __m256i bytes =
                _mm256_loadu_si256((const __m256i *)(group + EXPONENT_BYTES + 64 * j + 32 * half));
            lo[j] = _mm256_shuffle_epi8(table, _mm256_and_si256(bytes, low4));
            hi[j] = _mm256_shuffle_epi8(table, _mm256_and_si256(_mm256_srli_epi16(bytes, 4), low4));
        }
        for (size_t t = 0; t < n_tok; t++) {
            const int8_t *qy = ((const block_q8_0 *)y[t])[b].qs;
            __m256i isum = _mm256_add_epi32(_mm256_madd_epi16(x86_maddubs_words4(lo, qy), ones),
                                            _mm256_madd_epi16(x86_maddubs_words4(hi, qy + 16), ones));
            isum = _mm256_add_epi32(isum, _mm256_set1_epi32(start[t][b]));
            __m256 d = _mm256_mul_ps(_mm256_set1_ps(dy[t][b]), dx);
            acc[t] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(isum), acc[t]);
        }
    }
}

void quant_matmul_packed_mxfp4_avx2(size_t n, const void *packed, size_t n_groups,
                                    const void *act, size_t act_row_bytes, const void *sums,
                                    size_t n_tokens, float *y, size_t ldy)
{
    size_t n_blocks = n / QUANT_QK32, group_bytes = n_blocks * BLOCK_BYTES;
    size_t sums_bytes = quant_packed_sums_bytes(n);
    for (size_t t = 0; t < n_tokens; t += TILE_TOKENS) {
        size_t n_tok = n_tokens - t < TILE_TOKENS ? n_tokens - t : TILE_TOKENS;
        const void *rows[TILE_TOKENS];
        const float *dy[TILE_TOKENS];
        const int32_t *start[TILE_TOKENS];
        for (size_t k = 0; k < n_tok; k++) {
            rows[k] = (const char *)act + (t + k) * act_row_bytes;
            dy[k] = (const float *)((const char *)sums + (t + k) * sums_bytes);
            start[k] = (const int32_t *)(dy[k] + n_blocks) + START_ARRAY * n_blocks;
        }
        for (size_t g = 0; g < n_groups; g++)
            for (int half = 0; half < 2; half++) {
                __m256 acc[TILE_TOKENS];
                for (size_t k = 0; k < TILE_TOKENS; k++)
                    acc[k] = _mm256_setzero_ps();
                half_mxfp4(n_blocks, (const uint8_t *)packed + g * group_bytes, half, rows, dy,
                           start, n_tok, acc);
                for (size_t k = 0; k < n_tok; k++)
                    _mm256_storeu_ps(y + (t + k) * ldy + g * PACK_ROWS + 8 * half, acc[k]);
            }
    }
}

/*
 * The packed MXFP4 kernel of the AVX-512 level with VNNI (quant_mxfp4.h): 16 rows in the
 * 16 lanes of a vector, as the packed Q4_0 kernels hold them. A block's codes become their
 * values plus 16 (4..28, unsigned) with one byte shuffle per nibble vector, vpdpbusd
 * multiplies them by the signed activation quants starting from -16 times the quants' sum
 * (the same start Q5_0's kernel takes), and each token's f32 sum takes one fused
 * multiply-add per block in order: every result has the bits of quant_dot_mxfp4_avx2.
 */
#include "quant_legacy.h"
#include "quant_mxfp4.h"
#include "quant_x86.h"

enum { PACK_ROWS = QUANT_PACK_ROWS, TILE_TOKENS = 4 };
enum { BLOCK_BYTES = PACK_ROWS * sizeof(block_mxfp4), EXPONENT_BYTES = PACK_ROWS };
/* where quant_prepare_packed_act_avx2's -16 * sum(qy) start values sit: after dy and the
 * -8 and -128 ones */
enum { START_ARRAY = 2 };

/* The 16 rows' scales 2^(e - 128) from their exponent bytes, as quant_mxfp4_scale. */
static inline __m512 block_scales(const uint8_t *exponents)
{
    __m512i e = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)exponents));
    const __m512i one = _mm512_set1_epi32(1);
    __m512i normal = _mm512_slli_epi32(_mm512_sub_epi32(e, one), 23);
    /* e = 1 and 0: 2^-127 and 2^-128, the subnormals 0x00400000 >> (1 - e) */
    __m512i tiny = _mm512_srlv_epi32(_mm512_set1_epi32(0x00400000), _mm512_sub_epi32(one, e));
    __mmask16 is_normal = _mm512_cmpge_epu32_mask(e, _mm512_set1_epi32(2));
    return _mm512_castsi512_ps(_mm512_mask_blend_epi32(is_normal, tiny, normal));
}

static inline __attribute__((always_inline)) void
group_mxfp4(size_t n_blocks, const uint8_t *group, const void *const *y,
            const float *const *dy, const int32_t *const *start, size_t n_tok, bool prefetch,
            __m512 *acc)
{
    const __m512i table = _mm512_broadcast_i32x4(_mm_add_epi8(
        _mm_loadu_si128((const __m128i *)quant_mxfp4_values), _mm_set1_epi8(16)));
    const __m512i low4 = _mm512_set1_epi8(0x0f);
    for (size_t b = 0; b < n_blocks; b++, group += BLOCK_BYTES) {
        if (prefetch)
            x86_prefetch_ahead(group, BLOCK_BYTES, X86_PREFETCH_BYTES);
        __m512 dx = block_scales(group);
        __m512i q[8];
        for (int j = 0; j < 4; j++) {
            __m512i bytes = _mm512_loadu_si512(group + EXPONENT_BYTES + 64 * j);
            q[j] = _mm512_shuffle_epi8(table, _mm512_and_si512(bytes, low4));
            q[4 + j] = _mm512_shuffle_epi8(table, _mm512_and_si512(_mm512_srli_epi16(bytes, 4), low4));
        }
        for (size_t t = 0; t < n_tok; t++) {
            const int8_t *qy = ((const block_q8_0 *)y[t])[b].qs;
            __m512i low = _mm512_set1_epi32(start[t][b]), high = _mm512_setzero_si512();
            for (int j = 0; j < 4; j++) {
                low = x86_dpbusd_word(low, q[j], qy + 4 * j);
                high = x86_dpbusd_word(high, q[4 + j], qy + 16 + 4 * j);
            }
            __m512 d = _mm512_mul_ps(_mm512_set1_ps(dy[t][b]), dx);
            acc[t] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(_mm512_add_epi32(low, high)), acc[t]);
        }
    }
}

void quant_matmul_packed_mxfp4_avx512(size_t n, const void *packed, size_t n_groups,
                                      const void *act, size_t act_row_bytes, const void *sums,
                                      size_t n_tokens, float *y, size_t ldy)
{
    size_t n_blocks = n / QUANT_QK32, group_bytes = n_blocks * BLOCK_BYTES;
    size_t sums_bytes = quant_packed_sums_bytes(n);
    bool prefetch_one = cpu_prefetch_single_stream();
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
        for (size_t g = 0; g < n_groups; g++) {
            __m512 acc[TILE_TOKENS];
            for (size_t k = 0; k < TILE_TOKENS; k++)
                acc[k] = _mm512_setzero_ps();
            group_mxfp4(n_blocks, (const uint8_t *)packed + g * group_bytes, rows, dy, start,
                        n_tok, n_tok > 1 || prefetch_one, acc);
            for (size_t k = 0; k < n_tok; k++)
                _mm512_storeu_ps(y + (t + k) * ldy + g * PACK_ROWS, acc[k]);
        }
    }
}

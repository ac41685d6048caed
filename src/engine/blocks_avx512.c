/*
 * AVX-512 versions of the element-wise blocks with an exp in them: attention's softmax over
 * every cached position and the SwiGLU of every FFN (blocks.h chooses them at the avx512
 * level). Never called on a CPU without AVX-512.
 */
#include <immintrin.h>
#include <math.h>

#include "blocks.h"

/*
 * e^x: x = n ln2 + r with |r| <= ln2 / 2, e^r from Cephes' degree-6 polynomial (within 2 ulp
 * of expf), then 2^n by vscalefps, which gives 0 or infinity rather than a wrong power once n
 * leaves the float range. x is clamped at -88 (e^-88 is under the smallest normal float: the
 * softmax's largest term is 1, and silu's 1 + e^-x is 1 there).
 */
static inline __m512 exp_ps(__m512 x)
{
    x = _mm512_max_ps(x, _mm512_set1_ps(-88.0f));
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    /* ln 2 in two parts, so that n * ln2_high is exact */
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    return _mm512_scalef_ps(p, n);
}

static inline __mmask16 lanes(size_t left)
{
    return left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1);
}

void block_softmax_avx512(float *x, size_t n, float scale)
{
    __m512 vscale = _mm512_set1_ps(scale), vmax = _mm512_set1_ps(-INFINITY);
    for (size_t i = 0; i < n; i += 16) {
        __mmask16 m = lanes(n - i);
        __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), vscale);
        _mm512_mask_storeu_ps(x + i, m, v);
        vmax = _mm512_mask_max_ps(vmax, m, vmax, v);
    }
    __m512 max = _mm512_set1_ps(_mm512_reduce_max_ps(vmax));
    /* the sum in double, as ggml's softmax keeps it */
    __m512d sum_low = _mm512_setzero_pd(), sum_high = _mm512_setzero_pd();
    for (size_t i = 0; i < n; i += 16) {
        __mmask16 m = lanes(n - i);
        __m512 shifted = _mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + i), max);
        __m512 e = _mm512_maskz_mov_ps(m, exp_ps(shifted)); /* lanes past n add nothing */
        _mm512_mask_storeu_ps(x + i, m, e);
        sum_low = _mm512_add_pd(sum_low, _mm512_cvtps_pd(_mm512_castps512_ps256(e)));
        __m256 high = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(e), 1));
        sum_high = _mm512_add_pd(sum_high, _mm512_cvtps_pd(high));
    }
    double sum = _mm512_reduce_add_pd(_mm512_add_pd(sum_low, sum_high));
    __m512 inv = _mm512_set1_ps((float)(1.0 / sum));
    for (size_t i = 0; i < n; i += 16) {
        __mmask16 m = lanes(n - i);
        _mm512_mask_storeu_ps(x + i, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), inv));
    }
}

void block_swiglu_avx512(float *x, const float *y, size_t n)
{
    const __m512 one = _mm512_set1_ps(1.0f);
    for (size_t i = 0; i < n; i += 16) {
        __mmask16 m = lanes(n - i);
        __m512 g = _mm512_maskz_loadu_ps(m, x + i);
        __m512 e = exp_ps(_mm512_sub_ps(_mm512_setzero_ps(), g));
        __m512 silu = _mm512_div_ps(g, _mm512_add_ps(one, e));
        _mm512_mask_storeu_ps(x + i, m, _mm512_mul_ps(silu, _mm512_maskz_loadu_ps(m, y + i)));
    }
}

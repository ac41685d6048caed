/*
 * The vision tower's float arithmetic in llama.cpp's CPU order, as its x86 AVX-512 build
 * computes it, the same at every level of ours. The tower's embeddings go through table
 * lookups on fp16-rounded values (ggml's GELU), where one float rounding can pick the
 * neighbouring table entry and move an embedding by a table step; only the same operations
 * in the same order keep every value on the same side of those steps. So each step below
 * does what ggml does: its products of two F32 rows as 16 FMA lanes summed by a fixed tree
 * (its matrix kernel) or as its vector dot (64 elements at a time in four 16-lane sums, the
 * rest one product at a time), its norms' sums, its softmax and SiLU with its vector
 * exponential.
 */
#include <math.h>

#include "cpu.h"
#include "vision_order.h"

float vision_sum16(const float lanes[16])
{
    /* the tree of _mm512_reduce_add_ps: halves, quarters, then pairs */
    float t[8], u[4];
    for (size_t i = 0; i < 8; i++)
        t[i] = lanes[i + 8] + lanes[i];
    for (size_t i = 0; i < 4; i++)
        u[i] = t[i + 4] + t[i];
    return (u[0] + u[2]) + (u[1] + u[3]);
}

float vision_dot16(const float *x, const float *y, size_t n)
{
    float lanes[16] = {0};
    for (size_t i = 0; i < n; i += 16)
        for (size_t l = 0; l < 16; l++)
            lanes[l] = fmaf(x[i + l], y[i + l], lanes[l]);
    return vision_sum16(lanes);
}

static float vec_dot(const float *x, const float *y, size_t stride, size_t n)
{
    size_t whole = n & ~(size_t)63;
    float sum[4][16] = {{0}};
    /* the first block's FMAs into zero are its products (+ 0 turns a -0 into the FMA's +0) */
    for (size_t i = 0; i < whole; i += 64)
        for (size_t j = 0; j < 4; j++)
            for (size_t l = 0; l < 16; l++) {
                size_t e = i + 16 * j + l;
                sum[j][l] = i == 0 ? x[e] * y[e * stride] + 0.0f
                                   : fmaf(x[e], y[e * stride], sum[j][l]);
            }
    for (size_t l = 0; l < 16; l++) {
        sum[0][l] = sum[0][l] + sum[2][l];
        sum[1][l] = sum[1][l] + sum[3][l];
        sum[0][l] = sum[0][l] + sum[1][l];
    }
    float s = vision_sum16(sum[0]);
    /* The rest as the compiler built ggml's loop over them: products rounded and added in
     * order while 8 or more remain (its vectorised part), the last ones (fewer than 8) as
     * FMAs. */
    size_t rest = n - whole, plain = whole + (rest & ~(size_t)7);
    for (size_t i = whole; i < plain; i++)
        s = s + x[i] * y[i * stride];
    for (size_t i = plain; i < n; i++)
        s = fmaf(x[i], y[i * stride], s);
    return s;
}

float vision_vec_dot(const float *x, const float *y, size_t n)
{
    return vec_dot(x, y, 1, n);
}

void vision_layernorm_row(const float *x, const float *w, const float *b, size_t n, float eps,
                          float *out)
{
    double sum = 0.0;
    for (size_t i = 0; i < n; i++)
        sum += (double)x[i];
    float mean = (float)sum / (float)n;
    double sum2 = 0.0;
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        float sq[16];
        for (size_t l = 0; l < 16; l++) {
            out[i + l] = x[i + l] - mean;
            sq[l] = out[i + l] * out[i + l];
        }
        sum2 += (double)vision_sum16(sq);
    }
    for (; i < n; i++) {
        out[i] = x[i] - mean;
        sum2 += (double)(out[i] * out[i]);
    }
    float scale = 1.0f / sqrtf((float)(sum2 / (double)n) + eps);
    for (i = 0; i < n; i++) {
        out[i] = out[i] * scale * w[i];
        if (b)
            out[i] = out[i] + b[i];
    }
}

void vision_rmsnorm_row(const float *x, const float *w, size_t n, float eps, float *out)
{
    double sum = 0.0;
    for (size_t i = 0; i < n; i++)
        sum += (double)(x[i] * x[i]);
    float mean = (float)(sum / (double)n);
    float scale = 1.0f / sqrtf(mean + eps);
    for (size_t i = 0; i < n; i++)
        out[i] = x[i] * scale * w[i];
}

/* One lane of ggml's AVX-512 exponential: 2^n times a polynomial in the remainder, every
 * step one float operation or FMA as there; 0 or infinity once |n| passes 192. */
static float vector_expf(float x)
{
    const float shifter = 0x1.8p23f;
    float z = fmaf(x, 0x1.715476p+0f, shifter);
    float n = z - shifter;
    if (isnan(n))
        return n;
    float b = fmaf(-n, 0x1.7f7d1cp-20f, fmaf(-n, 0x1.62e4p-1f, x));
    if (fabsf(n) > 192.0f)
        return n <= 0.0f ? 0.0f : INFINITY;
    float u = b * b;
    float j = fmaf(fmaf(fmaf(0x1.0e4020p-7f, b, 0x1.573e2ep-5f), u,
                        fmaf(0x1.555e66p-3f, b, 0x1.fffdb6p-2f)),
                   u, fmaf(0x1.ffffecp-1f, b, 1.0f));
    return scalbnf(j, (int)n);
}

static double softmax_row(float *x, size_t n, float scale)
{
    float max = -INFINITY;
    for (size_t i = 0; i < n; i++) {
        x[i] = x[i] * scale;
        max = x[i] > max ? x[i] : max;
    }
    double sum = 0.0;
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        for (size_t l = 0; l < 16; l++)
            x[i + l] = vector_expf(x[i + l] - max);
        sum += (double)vision_sum16(x + i);
    }
    for (; i < n; i++) {
        x[i] = expf(x[i] - max);
        sum += (double)x[i];
    }
    return sum;
}

static void swiglu_row(float *x, const float *g, size_t n)
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (size_t l = 0; l < 16; l++)
            x[i + l] = x[i + l] / (1.0f + vector_expf(0.0f - x[i + l])) * g[i + l];
    for (; i < n; i++)
        x[i] = x[i] / (1.0f + expf(-x[i])) * g[i];
}

float vision_vec_dot_strided(const float *x, const float *y, size_t stride, size_t n)
{
    return vec_dot(x, y, stride, n);
}

double vision_softmax_row(float *x, size_t n, float scale)
{
    enum cpu_level level = cpu_active_level();
    if (level >= CPU_LEVEL_AVX512)
        return vision_softmax_row_avx512(x, n, scale);
    if (level >= CPU_LEVEL_AVX2)
        return vision_softmax_row_avx2(x, n, scale);
    return softmax_row(x, n, scale);
}

void vision_swiglu_row(float *x, const float *g, size_t n)
{
    enum cpu_level level = cpu_active_level();
    if (level >= CPU_LEVEL_AVX512)
        vision_swiglu_row_avx512(x, g, n);
    else if (level >= CPU_LEVEL_AVX2)
        vision_swiglu_row_avx2(x, g, n);
    else
        swiglu_row(x, g, n);
}

void vision_scores(const float *q, size_t nq, const float *tiles, size_t n, size_t d,
                   float *scores)
{
    enum cpu_level level = cpu_active_level();
    if (level >= CPU_LEVEL_AVX512) {
        vision_scores_avx512(q, nq, tiles, n, d, scores);
        return;
    }
    if (level >= CPU_LEVEL_AVX2) {
        vision_scores_avx2(q, nq, tiles, n, d, scores);
        return;
    }
    for (size_t j = 0; j < n; j++) {
        const float *key = tiles + j / VISION_KEY_TILE * VISION_KEY_TILE * d + j % VISION_KEY_TILE;
        for (size_t i = 0; i < nq; i++)
            scores[i * n + j] = vision_vec_dot_strided(q + i * d, key, VISION_KEY_TILE, d);
    }
}

void vision_matmul_rows(const float *w, size_t n_in, size_t row_begin, size_t row_end,
                        const float *x, size_t n_tokens, float *y, size_t ldy, bool matrix_order)
{
    enum cpu_level level = cpu_active_level();
    if (level >= CPU_LEVEL_AVX512) {
        vision_matmul_rows_avx512(w, n_in, row_begin, row_end, x, n_tokens, y, ldy, matrix_order);
        return;
    }
    if (level >= CPU_LEVEL_AVX2) {
        vision_matmul_rows_avx2(w, n_in, row_begin, row_end, x, n_tokens, y, ldy, matrix_order);
        return;
    }
    for (size_t t = 0; t < n_tokens; t++)
        for (size_t r = row_begin; r < row_end; r++)
            y[t * ldy + r] = matrix_order ? vision_dot16(w + r * n_in, x + t * n_in, n_in)
                                          : vision_vec_dot(w + r * n_in, x + t * n_in, n_in);
}

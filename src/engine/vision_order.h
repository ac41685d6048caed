/*
 * The vision tower's float steps in llama.cpp's CPU order (vision_order.c): every result is
 * the same at every CPU level.
 */
#ifndef CORRAL_ENGINE_VISION_ORDER_H
#define CORRAL_ENGINE_VISION_ORDER_H

#include <stdbool.h>
#include <stddef.h>

/* Sixteen lanes summed by the tree of a 512-bit reduction. */
float vision_sum16(const float lanes[16]);
/* ggml's matrix-kernel dot: n (a multiple of 16) elements in 16 FMA lanes, then the tree. */
float vision_dot16(const float *x, const float *y, size_t n);
/* ggml's vector dot: 64-element steps in four 16-lane FMA sums folded into one and summed
 * by the tree, then the rest: rounded products added in order, the last (fewer than 8)
 * as FMAs. */
float vision_vec_dot(const float *x, const float *y, size_t n);
/* y[t * ldy + r] = row r of w (n_in wide) . token t of x, rows [row_begin, row_end): in the
 * matrix kernel's order when matrix_order, else the vector dot's. */
void vision_matmul_rows(const float *w, size_t n_in, size_t row_begin, size_t row_end,
                        const float *x, size_t n_tokens, float *y, size_t ldy, bool matrix_order);
/* vision_vec_dot with y's elements stride apart. */
float vision_vec_dot_strided(const float *x, const float *y, size_t stride, size_t n);
/* Keys for vision_scores come in tiles of VISION_KEY_TILE keys: tile k holds keys
 * [16k, 16k + 16) as d rows of 16 (a key per column); the last tile is padded. */
enum { VISION_KEY_TILE = 16 };
static inline size_t vision_key_tiles(size_t n)
{
    return (n + VISION_KEY_TILE - 1) / VISION_KEY_TILE;
}
/* scores[i * n + j] = vision_vec_dot(query i, key j) for nq queries (rows of d) and n keys
 * in tiles. */
void vision_scores(const float *q, size_t nq, const float *tiles, size_t n, size_t d,
                   float *scores);
/* out = LayerNorm(x) * w (+ b); out may be x. */
void vision_layernorm_row(const float *x, const float *w, const float *b, size_t n, float eps,
                          float *out);
/* out = RMSNorm(x) * w; out may be x. */
void vision_rmsnorm_row(const float *x, const float *w, size_t n, float eps, float *out);
/* x = exp(x * scale - max) over the row, the exponential of ggml's softmax; returns the sum
 * (not yet normalised). Masked entries are -INFINITY. */
double vision_softmax_row(float *x, size_t n, float scale);
/* x = silu(x) * g over one row of n. */
void vision_swiglu_row(float *x, const float *g, size_t n);


/* The level kernels behind vision_softmax_row, vision_swiglu_row, vision_scores and
 * vision_matmul_rows (vision_order_avx2.c, vision_order_avx512.c): the same results. */
double vision_softmax_row_avx2(float *x, size_t n, float scale);
double vision_softmax_row_avx512(float *x, size_t n, float scale);
void vision_swiglu_row_avx2(float *x, const float *g, size_t n);
void vision_swiglu_row_avx512(float *x, const float *g, size_t n);
void vision_scores_avx2(const float *q, size_t nq, const float *tiles, size_t n, size_t d,
                        float *scores);
void vision_scores_avx512(const float *q, size_t nq, const float *tiles, size_t n, size_t d,
                          float *scores);
/* vision_dot8 (mmproj.h) with AVX2's 8-lane FMAs: the same sums. */
float vision_dot8_avx2(const float *a, const float *b, size_t n);
void vision_matmul_rows_avx2(const float *w, size_t n_in, size_t row_begin, size_t row_end,
                             const float *x, size_t n_tokens, float *y, size_t ldy,
                             bool matrix_order);
void vision_matmul_rows_avx512(const float *w, size_t n_in, size_t row_begin, size_t row_end,
                               const float *x, size_t n_tokens, float *y, size_t ldy,
                               bool matrix_order);

#endif

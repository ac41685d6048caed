/*
 * The shared building blocks of every forward pass, on plain float arrays: RMSNorm, RoPE,
 * softmax, SwiGLU, GeGLU, soft-capping, and attention of one query head over a cached
 * sequence. Their arithmetic follows ggml's CPU kernels (double accumulators where ggml has
 * them, the same RoPE angle recurrence, GELU through fp16) so logits match llama.cpp closely.
 */
#ifndef CORRAL_ENGINE_BLOCKS_H
#define CORRAL_ENGINE_BLOCKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model.h"

/* out[i] = x[i] / rms(x) * weight[i]; out may alias x. */
void block_rmsnorm(const float *x, const float *weight, size_t n, float eps, float *out);

/* Per-pair cos/sin for position pos (n_rot/2 pairs), ggml's angle recurrence. */
typedef struct rope_params {
    enum rope_mode mode;
    uint32_t n_rot;
    float theta_scale;       /* base^(-2/n_rot) */
    float freq_scale;
    const float *freq_factors; /* NULL or n_rot/2 divisors */
} rope_params;

rope_params rope_params_make(const corral_model *model, uint32_t variant);
void rope_cache(const rope_params *rp, float pos, float *cos_sin /* n_rot floats */);
/* Rotate n_heads heads of width head_dim (laid out back to back) with a rope_cache row. */
void rope_apply(const rope_params *rp, const float *cos_sin, float *x, size_t n_heads,
                size_t head_dim);

/* In place: x = silu(x) * y. At the avx512 level through block_swiglu_avx512 (the softmax's
 * vector exp): results differ from the scalar level by rounding only. */
void block_swiglu(float *x, const float *y, size_t n);
void block_swiglu_avx512(float *x, const float *y, size_t n);

/* Build the fp16 GELU table block_geglu reads (idempotent, thread-safe). */
void block_geglu_prepare(void);
/* In place: x = gelu_tanh(x) * y, with ggml's CPU arithmetic: x rounded to fp16 and its GELU
 * read from a table of fp16 results (|x| >= 10 short-cuts to 0 or x). */
void block_geglu(float *x, const float *y, size_t n);

/* In place: x = cap * tanh(x / cap) (gemma2's logit soft-capping). */
void block_softcap(float *x, size_t n, float cap);

/* In place x = softmax(scale * x) over n values (ggml's soft_max_ext: max subtraction, double
 * sum). At the avx512 level through block_softmax_avx512, whose vector exp is within 2 ulp of
 * expf: results differ from the scalar level by rounding only. */
void block_softmax(float *x, size_t n, float scale);
void block_softmax_avx512(float *x, size_t n, float scale);

/* One attention call: a group of query heads that share one KV head. */
typedef struct attention_shape {
    size_t n_heads;            /* query heads of the group, consecutive in q and out */
    size_t n_cells;            /* cached positions the query sees */
    size_t head_dim_k, head_dim_v;
    size_t k_stride, v_stride; /* bytes between key rows / between transposed value rows */
    float scale, softcap;
} attention_shape;

/*
 * The attention of a group of query heads sharing one KV head (grouped-query attention): per
 * head, out = softmax(scale * cap(K.q)) . V, cap being the soft-cap when softcap > 0, with
 * keys as n_cells rows and values transposed, head_dim_v rows of cells, as llama.cpp stores
 * them. Both products run on the dot kernels of the cache type (kv_ops: F32 or F16), which
 * round q and the probabilities to that type first, exactly as ggml's matmul does. Each head
 * gets the result it would alone; the group only shares the reads: keys go through all its
 * heads a block at a time, so they are streamed once per group, not once per head. Both
 * products take all rows in one quant_dot_rows call (scores: every key; output: every value
 * row against one head's probabilities).
 * Scratch: scores n_heads * n_cells floats; q_act and p_act n_heads activations of head_dim_k
 * and n_cells values of the cache type (4 bytes each is enough).
 */
void block_attention(const quant_ops *kv_ops, const attention_shape *shape, const float *q,
                     const uint8_t *keys, const uint8_t *values_t, float *scores,
                     uint8_t *q_act, uint8_t *p_act, float *out);

#endif

/*
 * The forward pass as the model families see it: the context's state for one micro-batch
 * (activations planned once, the KV cache of every layer) and the batch-level steps a
 * decoder block is made of (norm, self-attention, FFN, residual), plus the two block shapes
 * the families use. context.c owns creation, decoding and sequence operations; this header is
 * internal to the engine.
 */
#ifndef CORRAL_ENGINE_FORWARD_H
#define CORRAL_ENGINE_FORWARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "blocks.h"
#include "model.h"
#include "threadpool.h"

#define CONTEXT_MAX_SEQ 64

/*
 * One layer's cache, F16 or F32: keys [seq][cell][n_head_kv * head_dim_k], values
 * [seq][n_head_kv * head_dim_v][cell] (transposed, as llama.cpp stores them, so both
 * attention products are dot products). Cell c of a sequence holds position base + c, where
 * base is 0 on full layers and the sequence's swa_base on sliding ones.
 */
typedef struct kv_layer {
    uint8_t *k, *v;
    uint32_t n_cells;  /* per sequence */
    uint32_t window;   /* keys visible from a query: the last `window` positions; 0: all */
} kv_layer;

/* The matrices of a layer the forward pass multiplies, in the order of context.packed. */
enum layer_matrix { LM_WQ, LM_WK, LM_WV, LM_WO, LM_GATE, LM_UP, LM_DOWN, LM_COUNT };

struct corral_context {
    const corral_model *model;
    uint32_t n_ctx, n_seq, n_batch;
    bool kv_f16;
    const quant_ops *kv_ops; /* F16 or F32 kernels for the cache */
    threadpool *pool;
    rope_params rope[MODEL_MAX_ROPE_VARIANTS];

    kv_layer *kv;           /* n_layer */
    uint8_t *k_cache, *v_cache; /* the allocations kv[] points into */
    size_t k_row_bytes;     /* one cell of one layer */
    size_t v_width;         /* n_head_kv * head_dim_v */
    uint32_t swa_cells;     /* cells per sequence on sliding layers (n_ctx when unbounded) */
    uint32_t *seq_len;
    uint32_t *swa_base;     /* per sequence: first position held by the sliding layers */

    /* the micro-batch being evaluated: n_tokens of up to n_batch, and its scratch */
    size_t n_tokens;
    float *x, *xn, *q, *k, *v, *attn, *gate, *up;
    float *rope_cs[MODEL_MAX_ROPE_VARIANTS]; /* per token, n_rot floats per variant */
    void *act;
    void *act_sums;     /* per token, quant_packed_sums_bytes of the widest input */
    /* Copies of the matrices the level has packed kernels for, repacked at creation: per
     * layer LM_COUNT entries, then the output matrix; NULL where the model's rows are used. */
    const void **packed;
    void *packed_memory;
    float *scores;      /* per thread, n_ctx for each query head of a KV head */
    uint8_t *kv_act;    /* per thread, kv_act_bytes each: the group's q and probabilities */
    size_t kv_act_bytes;
    uint32_t *tok_seq, *tok_pos;

    /* outputs of the last corral_decode */
    float *logits;
    size_t logits_cap_rows;
    int32_t *logit_row; /* per batch token: row in logits, or -1 */
    size_t logit_row_cap;
    size_t n_last_batch; /* tokens of the last successful decode */
};

static inline size_t kv_elem_bytes(const corral_context *ctx)
{
    return ctx->kv_f16 ? 2 : 4;
}

/* First position a layer's cells hold for a sequence. */
static inline uint32_t kv_base(const corral_context *ctx, uint32_t layer, uint32_t seq)
{
    return ctx->model->layers[layer].sliding ? ctx->swa_base[seq] : 0;
}

static inline uint8_t *kv_key(const corral_context *ctx, uint32_t layer, uint32_t seq,
                              uint32_t cell)
{
    const kv_layer *kv = &ctx->kv[layer];
    return kv->k + ((size_t)seq * kv->n_cells + cell) * ctx->k_row_bytes;
}

/* Row j (one value channel over all cells) of a sequence's transposed values. */
static inline uint8_t *kv_value_row(const corral_context *ctx, uint32_t layer, uint32_t seq,
                                    size_t j)
{
    const kv_layer *kv = &ctx->kv[layer];
    return kv->v + ((size_t)seq * ctx->v_width + j) * kv->n_cells * kv_elem_bytes(ctx);
}

/* One product of a forward_matmul: w (or its packed copy, when not NULL) into y. */
typedef struct matrix_product {
    const weight *w;
    const void *packed;
    float *y;
} matrix_product;

/* y[t][0..n_out) = W . x[t] for every product and n_tokens rows of x (stride n_in), on the
 * pool. Products that share an activation type quantize x once and run as one job. */
void forward_matmul(corral_context *ctx, const matrix_product *products, size_t n_products,
                    const float *x, size_t n_tokens);

/* out[t] = rmsnorm(in[t]) * w for the batch; out may be in. */
void forward_rmsnorm(corral_context *ctx, const weight *w, const float *in, float *out);
/* ctx->xn becomes the self-attention of layer il over ctx->xn (projections, RoPE, cache,
 * attention and the output projection). */
void forward_attention(corral_context *ctx, uint32_t il);
/* ctx->xn becomes the gated FFN of layer il over ctx->xn. */
void forward_ffn(corral_context *ctx, uint32_t il);
/* ctx->x += ctx->xn: the residual connection. */
void forward_residual(corral_context *ctx);

/* x += attn(norm(x)); x += ffn(norm(x)): llama, qwen2, qwen3, phi3. */
void layer_pre_norm(corral_context *ctx, uint32_t il);
/* The same with the branch outputs normed before the residual: gemma2, gemma3. */
void layer_sandwich_norm(corral_context *ctx, uint32_t il);

#endif

/*
 * The forward pass as the model families see it: the context's state for one micro-batch
 * (activations planned once, the KV cache of every layer) and the batch-level steps a
 * block is made of (norm, self-attention, FFN, residual), plus the block shapes the
 * families use. context.c owns creation, decoding and sequence operations; this header is
 * internal to the engine.
 */
#ifndef CORRAL_ENGINE_FORWARD_H
#define CORRAL_ENGINE_FORWARD_H

#include <stdalign.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "blocks.h"
#include "model.h"
#include "threadpool.h"

#define CONTEXT_MAX_SEQ 64

/*
 * One layer's cache (of ctx->kv_type), per sequence and KV head so that a query streams its head's
 * keys and values in order: keys as n_key_tiles key tiles of KV_KEY_TILE cells (blocks.h),
 * values as n_cells rows of head_dim_v. Cell c of a sequence holds position base + c, where
 * base is 0 on full layers and the sequence's swa_base on sliding ones.
 */
/* An anonymous mapping: where it starts and how long it is, to unmap it. */
typedef struct lazy_mapping {
    void *base;
    size_t bytes;
} lazy_mapping;

typedef struct kv_layer {
    uint8_t *k, *v;
    uint32_t n_cells;     /* per sequence */
    uint32_t n_key_tiles; /* per sequence and KV head: n_cells in whole tiles */
    uint32_t window;      /* keys visible from a query: the last `window` positions; 0: all */
    /* the layer's heads (layer_weights' shape): KV heads, and the bytes of a key tile
     * (kv_key_tile_bytes of its head_dim_k) and of a value row (of its head_dim_v) */
    uint32_t n_head_kv;
    size_t key_tile_bytes, value_row_bytes;
} kv_layer;

/* The matrices of a layer the forward pass multiplies, in the order of context.packed. */
enum layer_matrix { LM_WQ, LM_WK, LM_WV, LM_WO, LM_GATE, LM_UP, LM_DOWN, LM_COUNT };

/* Rows of a matrix job's task: four packed groups. With 16 rows a task, the two threads of a
 * 1-token step alternated groups and claimed a task every few microseconds, which cost more
 * than the rows; 128 rows were no better than 64. The packed copies are laid out in blocks
 * of these rows (corral_context.packed_block_bytes). */
enum { MATMUL_TASK_ROWS = 64 };

/*
 * Batches of up to THREAD_ACT_TOKENS tokens: every thread of a matrix job quantizes the
 * input into its own copy instead of the caller quantizing it for all: the others would
 * wait while it did, and on a machine whose two cores sit on two chiplets each activation
 * line that one core wrote and the other read crossed between the chiplets twice a job.
 * When the cores share an L3 the two ways cost the same.
 */
enum { THREAD_ACT_TOKENS = 8 };

/*
 * Tokens of a prompt that one attention call takes at most (forward_attention): consecutive
 * tokens of a sequence share every key tile and value row they read, where each token alone
 * read the layer's whole cache from L3 or memory. Most of the gain comes with the first few
 * tokens shared; past 8 the call's working set grows with no further gain.
 */
enum { ATTENTION_GROUP_TOKENS = 8 };

typedef struct thread_act {
    alignas(64) uint64_t job; /* the act_jobs number act and sums hold; 0: none yet */
    void *act, *sums;
} thread_act;

struct corral_context {
    const corral_model *model;
    uint32_t n_ctx, n_seq, n_batch;
    /* a recurrent model's checkpoints per sequence (corral_checkpoint): 1, the prompt's; 2
     * with the steps' (corral_context_params.step_checkpoints) */
    uint32_t n_checkpoints;
    corral_kv_type kv_type;
    threadpool *pool;
    rope_params rope[MODEL_MAX_ROPE_VARIANTS];

    kv_layer *kv;           /* n_layer */
    uint8_t *k_cache, *v_cache; /* the allocations kv[] points into */
    lazy_mapping k_mapping, v_mapping; /* ... and their mappings (context.c) */
    uint32_t swa_cells;     /* cells per sequence on sliding layers (n_ctx when unbounded) */
    uint32_t cpu_layers_min; /* the first layers that stay on the CPU whatever the GPU takes */
    /* the rows of an image the context expects for its cross-attention layers (images asked
     * for, and the model's file holds its tower: cross_image_rows), which a GPU's fitting
     * counts; 0: none expected */
    uint32_t image_rows;
    /* device memory a GPU's fitting leaves to others (corral_context_params) */
    uint64_t gpu_reserve_bytes;
    uint32_t *seq_len;
    uint32_t *swa_base;     /* per sequence: first position held by the sliding layers */

    /* the micro-batch being evaluated: n_tokens of up to n_batch, and its scratch */
    size_t n_tokens;
    float *x, *xn, *q, *k, *v, *attn, *gate, *up;
    /* ARCH_PARALLEL: the normed input the second branch reads; ARCH_DENSE_AND_EXPERTS with
     * experts: two rows of n_embd per token for the block (arch_gemma4.c); else NULL */
    float *branch;
    float *rope_cs[MODEL_MAX_ROPE_VARIANTS]; /* per token, n_rot floats per variant */
    void *act;
    void *act_sums;     /* per token, quant_packed_sums_bytes of the widest input */
    /* Per pool thread, its own quantized copy of a small batch's input (forward_matmul);
     * act_jobs numbers the matrix jobs that use them. */
    thread_act *thread_acts;
    void *thread_act_memory;
    uint64_t act_jobs;
    /* Copies of the matrices the level has packed kernels for, repacked at creation: per
     * layer LM_COUNT entries, then the output matrix; NULL where the model's rows are used.
     * A copy is cut in blocks of MATMUL_TASK_ROWS rows, packed_block_bytes apart: the rows'
     * own bytes, or twice them where a layer's gate and up interleave block by block, so
     * that a thread's tasks of the gated job (forward_ffn) read one run of memory, not two,
     * which the hardware prefetchers follow better. */
    const void **packed;
    size_t *packed_block_bytes;
    void *packed_memory;
    float *attn_scratch;      /* per thread, attn_scratch_floats for block_attention */
    size_t attn_scratch_floats;
    /* When a model has fewer KV heads than the pool has threads, a token's attention chunks
     * are shared among threads (forward_attention): per (token, KV head) of such a batch, the
     * softmax state of each of up to attn_max_chunks chunks. NULL otherwise. */
    float *attn_parts;
    size_t attn_max_chunks;
    uint32_t *tok_seq, *tok_pos;
    /* Per batch token the last cell it sees: its own position, or with bidirectional set
     * (an image's tokens on gemma3) the batch's last. */
    uint32_t *tok_last;
    bool bidirectional;
    /* M-RoPE models (hp.mrope_sections): per sequence and cell, the rotary position the
     * token after that cell takes (an image advances it by its grid's longer side, not its
     * token count); scratch for a token's three rotary caches. NULL otherwise. */
    uint32_t *mrope_next;
    float *mrope_cs;
    /* A layer's attention calls (forward_attention): the first token of each run of tokens
     * one call takes, then n_tokens; up to n_batch + 1 entries. */
    uint32_t *attn_groups;
    /* gemma4's and gemma3n's per-layer token inputs (hp.n_embd_per_layer > 0; NULL otherwise):
     * the batch's ids (0 for an image's rows), per token and layer its n_embd_per_layer
     * inputs, and per token the gate's n_embd_per_layer values */
    corral_token *tok_id;
    float *per_layer_in, *per_layer_gate;
    /* gemma3n (hp.n_altup > 0; NULL otherwise): the AltUp streams and their predictions, each
     * n_altup blocks of n_batch rows of n_embd, stream s's block at s * n_batch * n_embd; per
     * token the router's n_altup outputs and the n_altup^2 coefficients made of them; per
     * token the laurel branch's low-rank values */
    float *altup, *altup_pred, *altup_coef, *laurel;

    struct moe_context *moe; /* the mixture-of-experts FFN's state (moe.h); NULL without one */
    struct mla_context *mla; /* latent attention's state (mla.h); NULL without it */
    struct delta_net_context *delta; /* recurrent layers' state (delta_net.h); NULL without */
    struct cross_context *cross; /* images' cross-attention state (cross_attn.h); NULL without */
    struct gpu_layers *gpu;  /* the last layers on a GPU (gpu.h); NULL: all on the CPU */

    /* outputs of the last corral_decode */
    float *logits;
    size_t logits_cap_rows;
    int32_t *logit_row; /* per batch token: row in logits, or -1 */
    size_t logit_row_cap;
    size_t n_last_batch; /* tokens of the last successful decode */
};

/* First position a layer's cells hold for a sequence. */
static inline uint32_t kv_base(const corral_context *ctx, uint32_t layer, uint32_t seq)
{
    return ctx->model->layers[layer].sliding ? ctx->swa_base[seq] : 0;
}

/* The key tile of KV head `head` holding `cell` of a sequence, at lane cell % KV_KEY_TILE. */
static inline uint8_t *kv_key_tile(const corral_context *ctx, uint32_t layer, uint32_t seq,
                                   size_t head, uint32_t cell)
{
    const kv_layer *kv = &ctx->kv[layer];
    size_t tile = ((size_t)seq * kv->n_head_kv + head) * kv->n_key_tiles + cell / KV_KEY_TILE;
    return kv->k + tile * kv->key_tile_bytes;
}

/* The values of KV head `head` from `cell` of a sequence on, a row of head_dim_v per cell. */
static inline uint8_t *kv_value(const corral_context *ctx, uint32_t layer, uint32_t seq,
                                size_t head, uint32_t cell)
{
    const kv_layer *kv = &ctx->kv[layer];
    size_t row = ((size_t)seq * kv->n_head_kv + head) * kv->n_cells + cell;
    return kv->v + row * kv->value_row_bytes;
}

/* One cell's keys (the layer's n_head_kv * head_dim_k floats) into or out of its tiles, and
 * its values (n_head_kv * head_dim_v) into their rows. */
void kv_write_key(const corral_context *ctx, uint32_t layer, uint32_t seq, uint32_t cell,
                  const float *k);
void kv_read_key(const corral_context *ctx, uint32_t layer, uint32_t seq, uint32_t cell, float *k);
void kv_write_value(const corral_context *ctx, uint32_t layer, uint32_t seq, uint32_t cell,
                    const float *v);
/* The keys and values of cells [src, src + n) to [dst, dst + n), dst <= src: cells move down. */
void kv_move_cells(const corral_context *ctx, uint32_t layer, uint32_t seq, uint32_t dst,
                   uint32_t src, uint32_t n);

/* Memory for repacked weights, on huge pages where the kernel gives them; *bytes is rounded
 * up to whole huge pages. */
void *alloc_huge(size_t *bytes);
/* Drop the process's pages of a repacked matrix's rows from the model's file mapping. */
void release_file_pages(const void *data, size_t bytes);

/* One product of a forward_matmul: w (or its packed copy, when not NULL, in blocks of
 * MATMUL_TASK_ROWS rows block_bytes apart) into y. */
typedef struct matrix_product {
    const weight *w;
    const void *packed;
    size_t block_bytes;
    float *y;
} matrix_product;

/* y[t][0..n_out) = W . x[t] for every product and n_tokens rows of x (stride n_in), on the
 * pool. Products that share an activation type quantize x once and run as one job. */
void forward_matmul(corral_context *ctx, const matrix_product *products, size_t n_products,
                    const float *x, size_t n_tokens);

/* The product of layer il's matrix `which` (w, bound to that slot) into y, through its
 * packed copy when the context has one. */
matrix_product forward_layer_product(const corral_context *ctx, uint32_t il,
                                     enum layer_matrix which, const weight *w, float *y);

/* out[t] = rmsnorm(in[t]) * w for the batch; out may be in. */
void forward_rmsnorm(corral_context *ctx, const weight *w, const float *in, float *out);
/* ctx->xn becomes the self-attention of layer il over ctx->xn (projections, RoPE, cache,
 * attention and the output projection). */
void forward_attention(corral_context *ctx, uint32_t il);
/* Layer il's attention of the batch's queries in ctx->q (rotated and scaled) over the cache,
 * after writing the batch's keys and values from ctx->k and ctx->v into it (not on a layer
 * that shares another's cache, whose writes are done): into ctx->attn. */
void forward_attend(corral_context *ctx, uint32_t il);
/* The factor q takes at a position under mistral3's attention temperature
 * (hp->attn_temp_scale not 0). */
float attention_temperature(const hparams *hp, uint32_t pos);
/* ctx->xn becomes the FFN of layer il over ctx->xn (gated, bert's GELU, or a mixture of
 * experts). */
void forward_ffn(corral_context *ctx, uint32_t il);
/* ctx->xn becomes layer il's gated dense FFN over ctx->xn (its experts aside). */
void forward_ffn_dense(corral_context *ctx, uint32_t il);
/* out[t] = layernorm(in[t]) * w + b for the batch; out may be in. */
void forward_layernorm(corral_context *ctx, const weight *w, const weight *b, const float *in,
                       float *out);
/* The family's block norm: forward_layernorm (b may be empty) for ARCH_LAYER_NORM, else
 * forward_rmsnorm. */
void forward_norm(corral_context *ctx, const weight *w, const weight *b, const float *in,
                  float *out);
/* ctx->x += ctx->xn: the residual connection. */
void forward_residual(corral_context *ctx);

/* x += attn(norm(x)); x += ffn(norm(x)): llama, qwen2, qwen3, phi3; starcoder2 with
 * LayerNorms. */
void layer_pre_norm(corral_context *ctx, uint32_t il);
/* The same with the branch outputs normed before the residual: gemma2, gemma3. */
void layer_sandwich_norm(corral_context *ctx, uint32_t il);
/* x = norm(x + attn(x)); x = norm(x + ffn(x)) with LayerNorms: the encoders (bert). */
void layer_post_norm(corral_context *ctx, uint32_t il);
/* h = norm(x); x += ffn(h) + attn(h): cohere2 (ARCH_PARALLEL keeps h in ctx->branch); the
 * attention on attn_norm_2(x) where the layer has it (falcon-40b). */
void layer_parallel(corral_context *ctx, uint32_t il);
/* x += norm(attn(x)); x += norm(ffn(x)): no input norms, the branch outputs normed: exaone4. */
void layer_normed_branches(corral_context *ctx, uint32_t il);
/* A layer's token mixer: reads ctx->xn, leaves its output in ctx->xn. */
typedef void (*layer_mixer)(corral_context *ctx, uint32_t il);
/* layer_pre_norm with the mixer chosen per layer: `recurrent` on the layers marked recurrent,
 * `attention` on the others (the hybrid families: qwen35, granitehybrid, lfm2). */
void layer_pre_norm_hybrid(corral_context *ctx, uint32_t il, layer_mixer recurrent,
                           layer_mixer attention);
/* gemma4's steps that gemma3n shares (arch_gemma4.c). gemma4_attention: ctx->xn becomes layer
 * il's attention over ctx->xn, q and k normed per head with weights, v without, q . k
 * unscaled, a shared KV layer projecting q only. gemma4_per_layer_inputs: before the first
 * layer, from the scaled embeddings in ctx->x, every layer's token inputs into
 * ctx->per_layer_in. gemma4_per_layer_branch: ctx->xn becomes norm(per_layer_proj .
 * (gelu(inp_gate . in) * layer il's inputs)); in may be ctx->xn. */
void gemma4_attention(corral_context *ctx, uint32_t il);
void gemma4_per_layer_inputs(corral_context *ctx);
void gemma4_per_layer_branch(corral_context *ctx, uint32_t il, const float *in);
/* gemma3n's arithmetic between its products (arch_gemma3n.c), the reference of the device's
 * ops. Streams are A blocks of n tokens' rows of E floats, `stride` floats apart.
 * gemma3n_altup_predict_rows: pred[j] = stream j + the sum over streams i of stream i times
 * coef[t][j * A + i] (coef: a row of A * A per token). gemma3n_altup_correct_rows: stream j =
 * (x - pred[0]) * (coef[t][j] + 1) + pred[j] (coef: a row of A per token).
 * gemma3n_match_magnitude: y rescaled to target's Euclidean length. gemma3n_sparse_gate: in
 * place, relu(x - (mean + std_mul * std)) over a row of n, the standard deviation unbiased. */
void gemma3n_altup_predict_rows(const float *streams, size_t stride, const float *coef,
                                size_t A, size_t E, size_t n, float *pred);
void gemma3n_altup_correct_rows(const float *x, const float *pred, size_t stride,
                                const float *coef, size_t A, size_t E, size_t n, float *streams);
void gemma3n_match_magnitude(const float *target, float *y, size_t n);
void gemma3n_sparse_gate(float *x, size_t n, float std_mul);
/* Before gemma3n's first layer: ctx->altup's stream 0 the scaled embeddings in ctx->x, stream
 * s their product with altup_proj's slab s - 1 rescaled to their length (the device's layers
 * take the streams so made). */
void gemma3n_altup_streams(corral_context *ctx);
/* layer_pre_norm where the layer has an ffn_norm; else h = norm(x); x += attn(h); x += ffn(h)
 * (stablelm 2 12B's parallel residual; ARCH_FFN_NORM_OPTIONAL keeps h in ctx->branch). */
void layer_pre_norm_or_parallel(corral_context *ctx, uint32_t il);

#endif

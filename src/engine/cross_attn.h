/*
 * Cross-attention to an image (mllama's text model, arch_mllama.c): per sequence, the keys and
 * values every cross-attention layer computes once from the image's projected states, where
 * the image's token is, and which of its rows the text after it attends to; and the layer
 * that reads them. Internal to the engine.
 */
#ifndef CORRAL_ENGINE_CROSS_ATTN_H
#define CORRAL_ENGINE_CROSS_ATTN_H

#include <stdbool.h>
#include <stdint.h>

#include "corral/error.h"
#include "model.h"

typedef struct corral_context corral_context;
typedef struct cross_context cross_context;

/* The most rows one image's states may have (llama3.2-vision's: 4 tiles of 1601). */
#define CROSS_MAX_ROWS 65536u

/* State for n_seq sequences of a model with cross-attention layers, those from first_gpu on
 * on the context's GPU (gpu.h); NULL (ok) for a model without, NULL with err when memory
 * runs out. */
cross_context *cross_context_create(const corral_model *m, uint32_t n_seq, uint32_t first_gpu,
                                    size_t n_threads, bool *ok, corral_error *err);
void cross_context_free(cross_context *c);

/* The rows of states the tower in m's file makes an image (max_num_tiles tiles of
 * (image_size / patch_size)^2 + 1 rows, under <arch>.vision), or 0 when the file says
 * nothing of a tower or more than CROSS_MAX_ROWS, which no image may have. */
uint32_t cross_image_rows(const corral_model *m);

/* Sequence seq's image from position at on: the keys and values of every cross-attention
 * layer from rows (n_rows of n_embd), of which the tokens from at on see the first n_attended
 * (the real tiles'; a padding tile's rows are kept with them, unread); the GPU's layers'
 * go there. It replaces an image the sequence had, which goes also when this fails. */
bool cross_seq_set_image(corral_context *ctx, uint32_t seq, const float *rows, uint32_t n_rows,
                         uint32_t n_attended, uint32_t at, corral_error *err);
/* The sequence's image goes when its token does: truncated to n_keep, or shifted (n_discard
 * positions from n_keep on dropped, those after moving down). */
void cross_seq_truncate(cross_context *c, uint32_t seq, uint32_t n_keep);
void cross_seq_shift(cross_context *c, uint32_t seq, uint32_t n_keep, uint32_t n_discard);
/* Whether token t of ctx's batch reads its sequence's image (it has one, at or before t),
 * and the image's attended rows (*n_attended). */
bool cross_token_sees_image(const corral_context *ctx, size_t t, uint32_t *n_attended);

/*
 * Layer il, a cross-attention layer, over the batch in ctx->x: for each token at or after its
 * sequence's image, x += tanh(attn_gate) * o . attention(q_norm(q . rmsnorm(x))) over the
 * image's attended rows, then x += tanh(mlp_gate) * mlp(rmsnorm(x)). The other tokens pass
 * unchanged: a sequence without an image skips the layer (as transformers and ollama's engine
 * do), and the text before the image is masked whole, attention and MLP, as Meta's reference
 * implementation masks it (transformers' port masks only the MLP's output there).
 */
void cross_attention_layer(corral_context *ctx, uint32_t il);

#endif

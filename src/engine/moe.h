/*
 * The mixture-of-experts FFN (qwen3moe, granitemoe, deepseek2, llama files with experts such
 * as Mixtral, gpt-oss, gemma4's 26B-A4B, nemotron_h_moe, lfm2moe): a router picks each
 * token's experts, and the token's output is the weighted sum of those experts' SwiGLU
 * (gemma4: GEGLU; experts without a gate: ReLU² of up, or GELU of up for nomic-bert-moe) FFNs. The context's state for it: routing scratch for a
 * micro-batch and the experts' repacked copies. Internal to the engine.
 */
#ifndef CORRAL_ENGINE_MOE_H
#define CORRAL_ENGINE_MOE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "corral/engine.h"

typedef struct moe_context moe_context;

/* ctx->moe for a model with experts (left NULL for a dense one): scratch for ctx->n_batch
 * tokens, and the expert matrices the level has packed kernels for, repacked on the pool
 * (their file pages are then released, as context.c does for dense matrices). */
bool moe_context_init(corral_context *ctx, corral_error *err);
void moe_context_free(moe_context *moe);

/* ctx->xn becomes layer il's mixture of experts over ctx->xn. */
void forward_moe(corral_context *ctx, uint32_t il);
/* The same with the router reading router_in (n_tokens rows of n_embd) instead of ctx->xn
 * (gemma4 routes on a differently normed input than its experts take). */
void forward_moe_routed(corral_context *ctx, uint32_t il, const float *router_in);

/* ---- one token's routing: its n_used experts (chosen, the lower index first among equals)
 * and their weights (w) from its n router logits ---- */

/* Softmax (the sum in double, as ggml keeps it; p is replaced by it), the n_used most
 * probable, their probabilities divided by their sum: the common router. */
void moe_route_softmax(float *p, size_t n, size_t n_used, uint32_t *chosen, float *w);

/* gpt-oss's: the n_used largest (biased) logits, weighted by the softmax over those alone. */
void moe_route_softmax_chosen(const float *logits, size_t n, size_t n_used, uint32_t *chosen,
                              float *w);

/* deepseek2's: sigmoid or softmax scores (p is replaced by them); the selection adds bias (or
 * NULL) and, with n_groups > 1, keeps only the experts of the n_group_used groups whose two
 * best selection scores sum highest; the n_used best selections win, weighted by their
 * unbiased scores, divided by their sum (kept at least 2^-14, as llama.cpp keeps it) when
 * norm, then times scale. n_expert is at most MODEL_MAX_EXPERTS and a multiple of n_groups. */
typedef struct moe_scored_router {
    size_t n_expert, n_used;
    uint32_t n_groups, n_group_used;
    bool sigmoid, norm;
    float scale;
} moe_scored_router;
void moe_route_scored(const moe_scored_router *r, float *p, const float *bias, uint32_t *chosen,
                      float *w);

#endif

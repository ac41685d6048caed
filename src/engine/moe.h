/*
 * The mixture-of-experts FFN (qwen3moe, granitemoe, deepseek2, llama files with experts such
 * as Mixtral, gpt-oss): a router picks each token's experts, and the token's output is the
 * weighted sum of those experts' SwiGLU FFNs. The context's state for it: routing scratch for a
 * micro-batch and the experts' repacked copies. Internal to the engine.
 */
#ifndef CORRAL_ENGINE_MOE_H
#define CORRAL_ENGINE_MOE_H

#include <stdbool.h>
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

#endif

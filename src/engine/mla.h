/*
 * Multi-head latent attention (deepseek2): keys and values of every head come from one
 * compressed latent per position, so the cache holds that latent and the rotated key part
 * shared by all heads instead of every head's keys and values. The context's state for it:
 * the batch's projections and each thread's scratch for the per-head products. Internal to
 * the engine.
 */
#ifndef CORRAL_ENGINE_MLA_H
#define CORRAL_ENGINE_MLA_H

#include <stdbool.h>
#include <stdint.h>

#include "corral/engine.h"

typedef struct mla_context mla_context;

/* ctx->mla for a model with latent attention (left NULL otherwise). */
bool mla_context_init(corral_context *ctx, corral_error *err);
void mla_context_free(mla_context *mla);

/* ctx->xn becomes layer il's latent attention over ctx->xn. */
void forward_mla_attention(corral_context *ctx, uint32_t il);

#endif

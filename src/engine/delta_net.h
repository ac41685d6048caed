/*
 * Gated DeltaNet layers (qwen35's linear attention): instead of a KV cache that grows with the
 * sequence, each sequence keeps, per such layer, a fixed-size recurrent state: the last
 * (conv taps - 1) inputs of the causal conv over q/k/v, and per value head a head_dim x
 * head_dim matrix that every token decays and updates by the delta rule. The state holds
 * the whole sequence so far and cannot be cut back to an earlier position: a sequence is
 * continued or cleared, never truncated part way or shifted. The context's part of it: the
 * states of every sequence and the batch's scratch. Internal to the engine.
 */
#ifndef CORRAL_ENGINE_DELTA_NET_H
#define CORRAL_ENGINE_DELTA_NET_H

#include <stdbool.h>
#include <stdint.h>

#include "corral/engine.h"

typedef struct delta_net_context delta_net_context;

/* ctx->delta for a model with recurrent layers (left NULL otherwise). */
bool delta_net_context_init(corral_context *ctx, corral_error *err);
void delta_net_context_free(delta_net_context *delta);

/* Zero a sequence's states: it holds no tokens. */
void delta_net_seq_clear(corral_context *ctx, uint32_t seq);

/* ctx->xn becomes layer il's Gated DeltaNet over ctx->xn, the batch's tokens taken in order
 * per sequence, each updating its sequence's state. */
void forward_delta_net(corral_context *ctx, uint32_t il);

#endif

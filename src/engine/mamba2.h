/*
 * Mamba2 layers (granitehybrid's state-space mixer): in place of attention, each sequence
 * keeps per layer a causal conv's window and, per head, a matrix that every token decays and
 * adds its input to. The states live in the recurrent storage the Gated DeltaNet layers use
 * (delta_net.h), with the same rules: a sequence is continued or cleared, never cut back.
 * Internal to the engine.
 */
#ifndef CORRAL_ENGINE_MAMBA2_H
#define CORRAL_ENGINE_MAMBA2_H

#include <stdint.h>

#include "corral/engine.h"

/* ctx->xn becomes layer il's Mamba2 mixer over ctx->xn, the batch's tokens taken in order per
 * sequence, each updating its sequence's state. */
void forward_mamba2(corral_context *ctx, uint32_t il);

#endif

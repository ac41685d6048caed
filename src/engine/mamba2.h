/*
 * Mamba2 layers (granitehybrid's state-space mixer): in place of attention, each sequence
 * keeps per layer a causal conv's window and, per head, a matrix that every token decays and
 * adds its input to. The states live in the recurrent storage the Gated DeltaNet layers use
 * (delta_net.h), with the same rules: a sequence is continued or cleared, never cut back.
 * Internal to the engine.
 */
#ifndef CORRAL_ENGINE_MAMBA2_H
#define CORRAL_ENGINE_MAMBA2_H

#include <stddef.h>
#include <stdint.h>

#include "corral/engine.h"

/* One token through one head's state (P rows of N): with decay = exp(step * a), row i
 * becomes decay * S[i] + (x[i] * step) * B, and out[i] = S[i] . C + skip * x[i]. */
void mamba2_head_step(float *state, const float *x, const float *B, const float *C, float step,
                      float a, float skip, size_t P, size_t N, float *out);

/* ctx->xn becomes layer il's Mamba2 mixer over ctx->xn, the batch's tokens taken in order per
 * sequence, each updating its sequence's state. */
void forward_mamba2(corral_context *ctx, uint32_t il);

#endif

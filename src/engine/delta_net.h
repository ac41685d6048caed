/*
 * Gated DeltaNet layers (qwen35's linear attention): instead of a KV cache that grows with the
 * sequence, each sequence keeps, per such layer, a fixed-size recurrent state: the last
 * (conv taps - 1) inputs of the causal conv over q/k/v, and per value head a head_dim x
 * head_dim matrix that every token decays and updates by the delta rule. The state holds
 * the whole sequence so far and cannot be cut back to an earlier position: a sequence is
 * continued or cleared, never truncated part way or shifted, except back to a checkpoint: a
 * copy of the states taken at one length, of one of two kinds (corral_checkpoint): near a
 * prompt's end (a chat's next turn repeats the last prompt, not the answer's thinking), and,
 * where the context was asked for it, before a speculative draft's verification (the
 * accepted tokens are then evaluated again from it). The context's part of it: the states
 * and checkpoints of every sequence and the batch's scratch. Mamba2 layers (mamba2.h) keep the same
 * two states (a conv window and a matrix per head) in the same storage, sized by the model's
 * ssm_* sizes (model.h). Internal to the engine.
 */
#ifndef CORRAL_ENGINE_DELTA_NET_H
#define CORRAL_ENGINE_DELTA_NET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "corral/engine.h"

/* The checkpoint kinds (corral_checkpoint) a context may keep. */
#define DELTA_NET_CHECKPOINTS 2

typedef struct delta_net_context {
    uint32_t n_recurrent;    /* recurrent layers */
    uint32_t *slot;          /* per layer: its index among the recurrent layers */
    size_t channels;         /* the conv's: value width + 2 * groups x state columns */
    size_t conv_floats;      /* a sequence's conv state of one layer: (taps - 1) x channels */
    size_t state_floats;     /* ... and its matrices: value width x state columns */
    float *conv_state;       /* per sequence and recurrent layer */
    float *state;
    bool *dirty;             /* per sequence: its states may be other than zero */
    /* per kind (corral_checkpoint) up to n_checkpoints and per sequence, a checkpoint: both
     * states as they were when the sequence held checkpoint_len[kind][seq] tokens (0: none),
     * laid out as conv_state and state */
    uint32_t n_checkpoints;
    float *checkpoint_conv[DELTA_NET_CHECKPOINTS], *checkpoint_state[DELTA_NET_CHECKPOINTS];
    uint32_t *checkpoint_len[DELTA_NET_CHECKPOINTS];
    float *kernels;          /* per recurrent layer, per channel its taps, oldest first (F32) */
    /* the batch's scratch, per token. Gated DeltaNet: the projection then the conv's output
     * (channels), the gate z and the heads' outputs (value width), the decay and strength
     * (value heads). Mamba2: the input projection (proj: z, x B C, dt) and the heads'
     * outputs */
    float *qkv, *z, *out, *decay, *strength, *proj;
} delta_net_context;

/* ctx->delta for a model with recurrent layers (left NULL otherwise). */
bool delta_net_context_init(corral_context *ctx, corral_error *err);
void delta_net_context_free(delta_net_context *delta);

/* Zero a sequence's states: it holds no tokens. Its checkpoints go too. */
void delta_net_seq_clear(corral_context *ctx, uint32_t seq);

/* Copy sequence seq's states, which stand for its first len tokens, to its checkpoint of
 * that kind (below n_checkpoints). */
void delta_net_seq_checkpoint(corral_context *ctx, uint32_t seq, corral_checkpoint kind,
                              uint32_t len);

/* The length of sequence seq's longest checkpoint of at most n_keep tokens; 0: none. */
uint32_t delta_net_seq_checkpoint_len(const delta_net_context *d, uint32_t seq, uint32_t n_keep);

/* Put sequence seq's longest checkpoint of at most n_keep tokens back as its states, dropping
 * the longer ones; that checkpoint stays. Returns the tokens it stands for (0: there was
 * none, and the states are cleared). */
uint32_t delta_net_seq_restore(corral_context *ctx, uint32_t seq, uint32_t n_keep);

/* Sequence seq's conv window and state matrices of recurrent layer il. */
static inline float *delta_net_conv_state(const delta_net_context *d, uint32_t seq, uint32_t il)
{
    return d->conv_state + ((size_t)seq * d->n_recurrent + d->slot[il]) * d->conv_floats;
}

static inline float *delta_net_state(const delta_net_context *d, uint32_t seq, uint32_t il)
{
    return d->state + ((size_t)seq * d->n_recurrent + d->slot[il]) * d->state_floats;
}

/* Token x's channels (in place) through layer il's causal conv over the window of its
 * sequence's previous inputs, plus bias (NULL: none), then silu; x joins the window. */
void delta_net_conv_token(const delta_net_context *d, uint32_t il, size_t taps, float *window,
                          const float *bias, float *x);

/* LFM2's gated short conv of one token (arch_lfm2.c): row holds in_proj's [b | c | x] of
 * d->channels each; y = c * conv(b * x), b * x joining the window (b is overwritten). */
void delta_net_gated_conv_token(const delta_net_context *d, uint32_t il, size_t taps,
                                float *window, float *row, float *y);

float delta_net_silu(float x);
float delta_net_softplus(float x);

/* x / |x| over n values (a key head's q or k). */
void delta_net_l2_normalize(float *x, size_t n, float eps);

/* A value head's decay, exp(softplus(logit + dt) * a), and its update's strength,
 * sigmoid(logit), from their projections' logits. */
float delta_net_decay(float logit, float dt, float a);
float delta_net_strength(float logit);

/* The key head value head h of n_heads reads: h / (n_heads / n_key_heads) where the heads
 * are grouped by key head (Qwen3-Next, ARCH_SSM_GROUPED), else h mod n_key_heads (qwen35). */
static inline size_t delta_net_key_head(size_t h, size_t n_heads, size_t n_key_heads,
                                        bool grouped)
{
    return grouped ? h / (n_heads / n_key_heads) : h % n_key_heads;
}

/* One token through one value head's state (S rows of S, a row per value component): the
 * state decays, takes strength * (v - S k) k^T, and out = S q / sqrt(S). */
void delta_net_step(float *state, const float *q, const float *k, const float *v, float decay,
                    float strength, size_t S, float *out);

/* ctx->xn becomes layer il's Gated DeltaNet over ctx->xn, the batch's tokens taken in order
 * per sequence, each updating its sequence's state. */
void forward_delta_net(corral_context *ctx, uint32_t il);

#endif

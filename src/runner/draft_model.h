/*
 * A draft model for speculative decoding: a small model sharing the target's vocabulary
 * guesses the next few tokens of each sequence, greedily, and the target verifies the guess
 * in one batch (slots.c). The draft keeps a KV-cache sequence per slot in step with the
 * target's: before each guess it catches up on what the target accepted since the last one,
 * reusing the longest prefix it still holds.
 */
#ifndef CORRAL_RUNNER_DRAFT_MODEL_H
#define CORRAL_RUNNER_DRAFT_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "corral/engine.h"

typedef struct draft_model draft_model;

/* What one sequence asks for: history[0..n_history) is its sequence, the last token the one
 * the target decodes next; up to max_draft guesses come back in draft[0..n_draft). */
typedef struct draft_request {
    int32_t seq;
    const corral_token *history;
    size_t n_history;
    size_t max_draft;
    corral_token *draft;
    size_t n_draft;
} draft_request;

/* Is draft's vocabulary the target's, token for token? false with err naming the first
 * difference. */
bool draft_model_vocab_matches(const corral_model *target, const corral_model *draft,
                               corral_error *err);

/* Load the draft from path with a context of n_seq sequences of n_ctx tokens. */
draft_model *draft_model_create(const char *path, uint32_t n_ctx, uint32_t n_seq, uint32_t n_batch,
                                int n_threads, corral_error *err);
void draft_model_free(draft_model *d);
const corral_model *draft_model_model(const draft_model *d);

/* Guess for every request at once: one batch catches every sequence up, then one batch per
 * guessed token. A request whose sequence cannot be caught up gets no guess. */
bool draft_model_propose(draft_model *d, draft_request *reqs, size_t n_reqs, corral_error *err);

#endif

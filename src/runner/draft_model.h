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
 * the target decodes next; up to max_draft guesses come back in draft[0..n_draft). With
 * max_draft 0 the draft only catches up on the history (a prompt, ahead of its answer). */
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

/* How a sequence's guesses have fared: guesses kept and refused, older steps weighing less
 * (each step scales both by DRAFT_RATE_DECAY before adding its own). */
typedef struct draft_rate {
    double kept, refused;
} draft_rate;

#define DRAFT_RATE_DECAY 0.8
/* Draft a k-th guess while the estimated chance that all k are kept is at least this. */
#define DRAFT_KEEP_CHANCE 0.45

/*
 * After a step that verified `drafted` guesses and kept the first `accepted` (a refusal when
 * accepted < drafted): update rate and return the next draft length, from 1 to cap. With a
 * the estimated chance that a guess is kept, a draft of k yields (1 - a^(k+1)) / (1 - a)
 * tokens a step for a cost of 1 + c k target steps, c being a guess's cost (a draft model
 * step and a verify row: from 0.15 to 0.4 of a target step for a lower-bit copy on a CPU).
 * For that range the best k is about where a^k falls to DRAFT_KEEP_CHANCE: 2 at a = 0.7,
 * 3 at 0.8, 7 at 0.9. Doubling on full acceptance instead (prompt lookup's rule) runs to
 * the cap at a = 0.9 and swings between 4 and 8 at a = 0.8, 10-20% slower at such costs.
 */
size_t draft_model_next_length(draft_rate *rate, size_t drafted, size_t accepted, size_t cap);

/* Guess for every request at once: one batch catches every sequence up, then one batch per
 * guessed token. A request whose sequence cannot be caught up gets no guess. */
bool draft_model_propose(draft_model *d, draft_request *reqs, size_t n_reqs, corral_error *err);

#endif

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
#include "draft_costs.h"
#include "draft_length.h"

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

/* Without costs to go by: a k-th guess while the estimated chance that all k are kept is at
 * least this. */
#define DRAFT_KEEP_CHANCE 0.45

/*
 * After a step that verified `drafted` guesses and kept the first `accepted` (a refusal when
 * accepted < drafted): update rate and return the next draft length, from 1 to cap (0 when
 * cap is 0). With a the estimated chance that a guess is kept, a draft of k yields
 * (1 - a^(k+1)) / (1 - a) tokens a step were guesses kept independently; they are not (a
 * draft that has held a while tends to hold on), so the chooser multiplies the positions' own
 * keep chances instead, each drawn toward a. The step costs a verify batch of k + 1 rows and
 * k draft model steps. How that batch's cost grows with its rows depends on the target: an
 * F32 one on a CPU verifies 5 rows for little more than one, an F16 one past 3 rows is bound
 * by its arithmetic, and a draft step costs 0.1-0.4 of a target step. So the length is the k
 * with the most tokens per second by costs measured as the runner goes (draft_costs.h,
 * draft_length_by_costs, a draft step's time per guess). With
 * n_seqs sequences generating in one batch, each is taken to draft as long: the batch then
 * has n_seqs (k + 1) rows, and its time and the draft steps' are shared alike.
 *
 * Without costs (NULL), before any are measured, or while the ones in play are noisy, the
 * length is the keep-chance rule's: the largest k with a^k >= DRAFT_KEEP_CHANCE (2 at a =
 * 0.7, 3 at 0.8, 7 at 0.9), near the best when a guess costs 0.15-0.4 of a target step
 * whatever the rows. The costs' choice replaces it only when they promise DRAFT_COST_MARGIN
 * more, and every DRAFT_PROBE_EVERY-th choice is the rule's.
 */
size_t draft_model_next_length(draft_rate *rate, const draft_costs *costs, size_t n_seqs,
                               size_t drafted, size_t accepted, size_t cap);

/* Guess for every request at once: one batch catches every sequence up, then one batch per
 * guessed token. A request whose sequence cannot be caught up gets no guess. */
bool draft_model_propose(draft_model *d, draft_request *reqs, size_t n_reqs, corral_error *err);

#endif

/*
 * How long a speculative draft should be: a record of how a sequence's guesses have fared
 * (overall and per position in the draft) and the length that, by the verify costs the
 * runner measures (draft_costs.h), yields the most tokens per second. Both ways of drafting
 * choose by it: a draft model, whose guesses cost a step each (draft_model_next_length), and
 * prompt lookup, whose guesses cost nothing to make (prompt_lookup_next_length).
 */
#ifndef CORRAL_RUNNER_DRAFT_LENGTH_H
#define CORRAL_RUNNER_DRAFT_LENGTH_H

#include <stddef.h>

#include "draft_costs.h"

/* Guess positions whose own keep chances a record follows. */
#define DRAFT_RATE_POSITIONS 16

/* How a sequence's guesses have fared: guesses kept and refused, and per position i (the
 * (i + 1)-th guess of a draft) how often it was tried (every guess before it held) and held,
 * older steps weighing less (each step scales every count by DRAFT_RATE_DECAY before adding
 * its own); choices counts the lengths chosen by costs. */
typedef struct draft_rate {
    double kept, refused;
    double tried[DRAFT_RATE_POSITIONS], held[DRAFT_RATE_POSITIONS];
    unsigned choices;
} draft_rate;

#define DRAFT_RATE_DECAY 0.8
/* The costs must promise this much more than the usual length to be followed. */
#define DRAFT_COST_MARGIN 0.03
/* Every this many choices the usual length is taken regardless, so its batch's time stays
 * measured while the costs favour another. */
#define DRAFT_PROBE_EVERY 16

/* A step verified `drafted` guesses and kept the first `accepted` (a refusal when accepted <
 * drafted); a step without a draft tells nothing. */
void draft_rate_record(draft_rate *rate, size_t drafted, size_t accepted);

/* The estimated chance that a guess is kept, with one kept and one refused guess as a prior:
 * a fresh sequence estimates 1/2 (never 1). */
double draft_rate_keep_chance(const draft_rate *rate);

/*
 * The draft length, from shortest to cap, with the most tokens per second by costs, for each
 * of n_seqs sequences drafting alike (a batch of n_seqs (k + 1) rows whose time they share).
 * A step with a draft of k yields 1 plus the sum over j <= k of the chance that guesses 1..j
 * all hold, each position's chance its record's drawn toward the overall keep chance (a
 * draft that has held a while tends to hold on, so this favours longer drafts than the
 * overall chance alone would). It costs the verify batch, k guesses of `guess`'s time (NULL:
 * guesses cost nothing to make) and, for a recurrent target (a measured step checkpoint),
 * the checkpoint's copy (when k > 0) and the rows a refusal feeds again in the next batch.
 * A length of 0 is a plain step: no guesses, no copy.
 *
 * `usual` is the length the caller's own rule gives; it stands without costs (NULL), before
 * the costs in play are measured (guess's too, when given), while they are noisy, unless the
 * costs promise DRAFT_COST_MARGIN more, and every DRAFT_PROBE_EVERY-th choice.
 */
size_t draft_length_by_costs(draft_rate *rate, const draft_costs *costs, const draft_timing *guess,
                             size_t n_seqs, size_t usual, size_t shortest, size_t cap);

#endif

/*
 * Prompt lookup: drafts for speculative decoding taken from the sequence itself. When the
 * last few tokens occurred before (in the prompt or the answer so far), the tokens that
 * followed them then are a cheap guess at what follows now: code edits, summaries and
 * answers that quote their source repeat long runs. The engine verifies a draft in the same
 * batch as the next token, so a right guess yields several tokens for one pass over the
 * weights and a wrong one costs only the extra rows of that batch.
 */
#ifndef CORRAL_RUNNER_PROMPT_LOOKUP_H
#define CORRAL_RUNNER_PROMPT_LOOKUP_H

#include <stdbool.h>
#include <stddef.h>

#include "corral/engine.h"
#include "draft_costs.h"
#include "draft_length.h"

#define PROMPT_LOOKUP_MIN_NGRAM 2 /* a one-token match guesses too often to pay */
#define PROMPT_LOOKUP_MAX_NGRAM 4

/*
 * history[0..n) is the sequence so far, its last token the one to be decoded next. Find the
 * latest earlier occurrence of its longest suffix of PROMPT_LOOKUP_MAX_NGRAM down to
 * PROMPT_LOOKUP_MIN_NGRAM tokens, and copy up to max_draft of the tokens that followed it
 * into draft. Returns how many were copied (0: no match).
 */
size_t prompt_lookup_draft(const corral_token *history, size_t n, corral_token *draft,
                           size_t max_draft);

/*
 * How many tokens to draft next (0: none, drafting does not pay now), after a step that
 * drafted `drafted` tokens of a length of `current` and kept the first `accepted`; rate
 * records how the sequence's drafts fare. The rule of thumb: all of a draft accepted doubles
 * the length (up to cap), none of it halves it (down to 1), a part keeps it. With costs
 * measured (draft_costs.h), the length is instead the one with the most tokens per second
 * by them (draft_length_by_costs, guesses free to make), 0 among the choices: where verify
 * rows cost their arithmetic (F32 and F16 targets, many slots) and few guesses hold, a long
 * draft costs more than it yields, while where a batch of 8 rows costs about one (a
 * quantized target, bandwidth-bound) drafts that hold grow to cap. n_seqs sequences
 * generate in the batch.
 */
size_t prompt_lookup_next_length(draft_rate *rate, const draft_costs *costs, size_t n_seqs,
                                 size_t current, size_t drafted, size_t accepted, size_t cap);

#define PROMPT_LOOKUP_MAX_PAUSE 32

/*
 * How many steps to go without a draft after this one, from how the last draft did and the
 * next length (`next`, 0 when drafting does not pay), and the next pause in *backoff (0
 * before the first): a next length of 0 or a draft of one token (the least length) rejected
 * pauses drafting, 2 steps the first time and twice as long each time after, up to
 * PROMPT_LOOKUP_MAX_PAUSE; an accepted token with a next length above 0 ends the backing off.
 * A draft that is never right still costs its verification rows and, from a draft model, its
 * guesses: paused, it costs them once per pause. A recurrent target (rollback) pays more for
 * it, a copy of the sequence's states before the step and the pending token evaluated again
 * after it, so there a draft of any length with nothing accepted pauses.
 */
size_t prompt_lookup_next_pause(size_t *backoff, size_t length, size_t next, size_t drafted,
                                size_t accepted, bool rollback);

#endif

/*
 * Prompt lookup (see prompt_lookup.h). A backwards scan per step: the history is at most the
 * context (thousands of tokens), which costs microseconds beside a forward pass.
 */
#include "prompt_lookup.h"

#include <string.h>

size_t prompt_lookup_draft(const corral_token *history, size_t n, corral_token *draft,
                           size_t max_draft)
{
    if (max_draft == 0)
        return 0;
    for (size_t g = PROMPT_LOOKUP_MAX_NGRAM; g >= PROMPT_LOOKUP_MIN_NGRAM; g--) {
        if (n <= g)
            continue;
        const corral_token *suffix = history + n - g;
        /* the latest start i < n - g whose g tokens equal the suffix and that has a follower */
        for (size_t i = n - g; i-- > 0;) {
            if (memcmp(history + i, suffix, g * sizeof *suffix) != 0)
                continue;
            size_t from = i + g, k = n - from;
            k = k < max_draft ? k : max_draft;
            memcpy(draft, history + from, k * sizeof *draft);
            return k;
        }
    }
    return 0;
}

/* The rule of thumb, while no costs are measured: doubles, halves or keeps current. */
static size_t length_by_rule(size_t current, size_t drafted, size_t accepted, size_t cap)
{
    if (drafted == 0)
        return current;
    if (accepted == drafted)
        return current * 2 < cap ? current * 2 : cap;
    if (accepted == 0)
        return current / 2 > 1 ? current / 2 : 1;
    return current;
}

size_t prompt_lookup_next_length(draft_rate *rate, const draft_costs *costs, size_t n_seqs,
                                 size_t current, size_t drafted, size_t accepted, size_t cap)
{
    if (cap == 0)
        return 0;
    if (drafted == 0) /* no news */
        return current;
    draft_rate_record(rate, drafted, accepted);
    size_t usual = length_by_rule(current, drafted, accepted, cap);
    return draft_length_by_costs(rate, costs, NULL, n_seqs, usual, 0, cap);
}

size_t prompt_lookup_next_pause(size_t *backoff, size_t length, size_t next, size_t drafted,
                                size_t accepted, bool rollback)
{
    if (drafted == 0)
        return 0;
    if (next > 0 && accepted > 0) {
        *backoff = 0;
        return 0;
    }
    if (next > 0 && length > 1 && !rollback)
        return 0;
    *backoff = *backoff == 0 ? 2 : *backoff * 2 < PROMPT_LOOKUP_MAX_PAUSE ? *backoff * 2
                                                                       : PROMPT_LOOKUP_MAX_PAUSE;
    return *backoff;
}

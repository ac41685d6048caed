/*
 * The draft length from keep chances and measured costs (see draft_length.h).
 */
#include "draft_length.h"

#include <math.h>
#include <stdbool.h>

void draft_rate_record(draft_rate *rate, size_t drafted, size_t accepted)
{
    if (drafted == 0)
        return;
    rate->kept = rate->kept * DRAFT_RATE_DECAY + (double)accepted;
    rate->refused = rate->refused * DRAFT_RATE_DECAY + (accepted < drafted ? 1.0 : 0.0);
    /* guess i was tried when every one before it held */
    for (size_t i = 0; i < DRAFT_RATE_POSITIONS; i++) {
        rate->tried[i] = rate->tried[i] * DRAFT_RATE_DECAY + (i <= accepted && i < drafted);
        rate->held[i] = rate->held[i] * DRAFT_RATE_DECAY + (i < accepted);
    }
}

double draft_rate_keep_chance(const draft_rate *rate)
{
    return (rate->kept + 1.0) / (rate->kept + rate->refused + 2.0);
}

/* Guess i's chance to hold once those before it have: its position's record drawn toward a
 * by one guess's weight (a where the position has no record). */
static double position_chance(const draft_rate *rate, double a, size_t i)
{
    if (i < DRAFT_RATE_POSITIONS && rate->tried[i] > 0)
        return (rate->held[i] + a) / (rate->tried[i] + 1.0);
    return a;
}

static double expected_tokens(const draft_rate *rate, double a, size_t k)
{
    double tokens = 1.0, all_held = 1.0;
    for (size_t i = 0; i < k; i++) {
        all_held *= position_chance(rate, a, i);
        tokens += all_held;
    }
    return tokens;
}

/* A recurrent target's rows evaluated again after a draft of k: when guess i + 1 is the first
 * refused, the pending token and the i guesses kept before it; none when all k hold. */
static double expected_refed_rows(const draft_rate *rate, double a, size_t k)
{
    double rows = 0.0, all_held = 1.0;
    for (size_t i = 0; i < k; i++) {
        double p = position_chance(rate, a, i);
        rows += all_held * (1.0 - p) * (double)(i + 1);
        all_held *= p;
    }
    return rows;
}

/* Tokens per second of a draft of k for each of n_seqs sequences drafting alike; 0 when the
 * costs in play are unknown or too noisy to go by. */
static double tokens_per_second(const draft_rate *rate, double a, const draft_costs *costs,
                                const draft_timing *guess, size_t n_seqs, size_t k)
{
    bool steady;
    double rows = (double)(k + 1), copy = k > 0 ? costs->checkpoint.seconds : 0.0;
    if (copy > 0)
        rows += expected_refed_rows(rate, a, k);
    double verify = draft_costs_verify(costs, (size_t)lround((double)n_seqs * rows), &steady);
    if (verify <= 0 || !steady)
        return 0;
    double guesses = 0.0;
    if (guess && k > 0) {
        if (guess->seconds <= 0 || guess->spread >= DRAFT_COSTS_MAX_SPREAD)
            return 0;
        guesses = (double)k * guess->seconds;
    }
    return expected_tokens(rate, a, k) / (verify + guesses + (double)n_seqs * copy);
}

size_t draft_length_by_costs(draft_rate *rate, const draft_costs *costs, const draft_timing *guess,
                             size_t n_seqs, size_t usual, size_t shortest, size_t cap)
{
    if (!costs || n_seqs == 0 || ++rate->choices % DRAFT_PROBE_EVERY == 0)
        return usual;
    double a = draft_rate_keep_chance(rate);
    double base = tokens_per_second(rate, a, costs, guess, n_seqs, usual);
    if (base <= 0)
        return usual;
    size_t best = usual;
    double best_rate = base * (1.0 + DRAFT_COST_MARGIN);
    for (size_t k = shortest; k <= cap; k++) {
        double r = tokens_per_second(rate, a, costs, guess, n_seqs, k);
        if (r > best_rate) {
            best = k;
            best_rate = r;
        }
    }
    return best;
}

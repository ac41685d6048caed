/*
 * Prompt lookup's drafts (src/runner/prompt_lookup.c): the longest suffix n-gram's latest
 * earlier occurrence, its followers up to the limit, no draft without a match of two tokens,
 * and the draft length's adaptation to what was accepted.
 */
#include <setjmp.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "runner/prompt_lookup.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))

static void test_draft_follows_the_latest_longest_match(void **state)
{
    (void)state;
    /* "5 6" occurs at 1 (then 7 8 9) and at 6 (then 1 2): the latest wins */
    const corral_token h[] = {4, 5, 6, 7, 8, 9, 5, 6, 1, 2, 0, 5, 6};
    corral_token d[8];
    assert_int_equal(prompt_lookup_draft(h, N(h), d, 8), 5);
    const corral_token want[] = {1, 2, 0, 5, 6};
    assert_memory_equal(d, want, sizeof want);
    /* a longer suffix match beats a later shorter one: "3 5 6" only at 0 */
    const corral_token g[] = {3, 5, 6, 11, 12, 9, 5, 6, 13, 3, 5, 6};
    assert_int_equal(prompt_lookup_draft(g, N(g), d, 2), 2);
    assert_int_equal(d[0], 11);
    assert_int_equal(d[1], 12);
}

static void test_no_draft_without_a_two_token_match(void **state)
{
    (void)state;
    corral_token d[4];
    const corral_token one[] = {7, 1, 2, 3, 7}; /* only "7" repeats */
    assert_int_equal(prompt_lookup_draft(one, N(one), d, 4), 0);
    const corral_token short_history[] = {1, 2};
    assert_int_equal(prompt_lookup_draft(short_history, N(short_history), d, 4), 0);
    const corral_token loop[] = {1, 2, 1, 2};
    assert_int_equal(prompt_lookup_draft(loop, N(loop), d, 0), 0);
    /* a loop drafts its own continuation, overlapping the suffix */
    assert_int_equal(prompt_lookup_draft(loop, N(loop), d, 4), 2);
    assert_int_equal(d[0], 1);
    assert_int_equal(d[1], 2);
}

/* Without measured costs, the rule of thumb: all accepted doubles, none halves, a part keeps. */
static void test_length_adapts_to_acceptance(void **state)
{
    (void)state;
    static const struct {
        size_t current, drafted, accepted, cap, next;
    } table[] = {
        {4, 4, 4, 16, 8}, {8, 8, 8, 10, 10}, {8, 8, 0, 16, 4},
        {1, 1, 0, 16, 1}, {6, 6, 3, 16, 6},  {6, 0, 0, 16, 6},
    };
    for (size_t i = 0; i < N(table); i++) {
        draft_rate rate = {0};
        draft_costs none = {0};
        assert_int_equal(prompt_lookup_next_length(&rate, NULL, 1, table[i].current,
                                                   table[i].drafted, table[i].accepted,
                                                   table[i].cap),
                         table[i].next);
        assert_int_equal(prompt_lookup_next_length(&rate, &none, 1, table[i].current,
                                                   table[i].drafted, table[i].accepted,
                                                   table[i].cap),
                         table[i].next);
    }
    draft_rate rate = {0};
    assert_int_equal(prompt_lookup_next_length(&rate, NULL, 1, 4, 4, 4, 0), 0); /* no cap */
}

/* Verify batch costs by rows, in units of one row's. */
static double compute_bound(size_t rows) /* an F32 target: each row past the first 0.34 */
{
    return 1.0 + 0.34 * (double)(rows - 1);
}

static double bandwidth_bound(size_t rows) /* a quantized one: 8 rows for about one */
{
    return rows <= 9 ? 1.0 + 0.01 * (double)(rows - 1) : 1.08 * (double)rows / 9.0;
}

/* Costs measured once for every row count up to 17 (0.01 s a row's unit); a recurrent
 * target's also a step checkpoint's copy, 0.035 of a row. */
static draft_costs measured(double (*verify)(size_t), bool recurrent)
{
    draft_costs c = {0};
    for (size_t rows = 1; rows <= 17; rows++)
        draft_costs_record_verify(&c, rows, 0.01 * verify(rows));
    if (recurrent)
        draft_costs_record_checkpoint(&c, 0.01 * 0.035);
    return c;
}

/* The runner's loop for one slot over 320 steps with matches everywhere (slots.c): a step not
 * paused drafts its length (cap 8) and keeps keep(step, length) of it. Returns the length
 * most drafts had and in *speed its tokens per unit of time against plain
 * decoding's, time counted by `verify` (rows, in one row's units) and, on a recurrent target,
 * a copy of 0.035 per draft and the rows a refusal feeds again in the next step. */
static size_t run_steps(const draft_costs *costs, double (*verify)(size_t), bool recurrent,
                        size_t (*keep)(int, size_t), double *speed)
{
    draft_rate rate = {0};
    size_t length = 4, pause = 0, backoff = 0, refed = 0;
    double tokens = 0, time = 0;
    size_t drafts_of[9] = {0};
    for (int step = 0; step < 320; step++) {
        size_t drafted = pause > 0 ? 0 : length;
        drafts_of[drafted]++;
        size_t accepted = drafted > 0 ? keep(step, length) : 0;
        time += verify(refed + 1 + drafted) + (recurrent && drafted > 0 ? 0.035 : 0.0);
        tokens += (double)(1 + accepted);
        refed = recurrent && accepted < drafted ? accepted + 1 : 0;
        if (pause > 0) {
            pause--;
            continue;
        }
        size_t next = prompt_lookup_next_length(&rate, costs, 1, length, drafted, accepted, 8);
        pause = prompt_lookup_next_pause(&backoff, length, next, drafted, accepted, recurrent);
        length = next > 0 ? next : 1;
    }
    *speed = tokens / time;
    size_t most = 1;
    for (size_t k = 2; k <= 8; k++)
        most = drafts_of[k] > drafts_of[most] ? k : most;
    return most;
}

/* Each draft's first token holds, its second never: a quarter of the guesses of a draft of
 * 4 kept. */
static size_t keep_first(int step, size_t length)
{
    (void)step;
    return length > 0;
}

/* A third of the drafts, spread without a period, keep their first token; the rest nothing. */
static size_t keep_few(int step, size_t length)
{
    (void)length;
    return ((uint32_t)step * 2654435761u >> 13) % 3 == 0;
}

/* All or nothing, as when a quoted passage goes on or the answer turns away from it: one
 * draft in three holds whole, the others fail at their first token. */
static size_t keep_all_or_none(int step, size_t length)
{
    return step % 3 == 0 ? length : 0;
}

/* Where verify rows cost their arithmetic (each row 0.34 of one more) and few guesses hold,
 * long drafts cost more than they yield: a draft whose first token alone holds drafts one
 * token (the rule kept drafting 4, slower than plain decoding), and where a third of the drafts keep one
 * token, drafting pauses, within 3% of plain decoding. On a recurrent target, which pays a
 * copy and re-fed rows as well, the same. */
static void test_compute_bound_rows_and_few_kept_shorten_drafts(void **state)
{
    (void)state;
    for (int recurrent = 0; recurrent <= 1; recurrent++) {
        draft_costs c = measured(compute_bound, recurrent);
        double speed, rule;
        size_t length = run_steps(&c, compute_bound, recurrent, keep_first, &speed);
        size_t rule_length = run_steps(NULL, compute_bound, recurrent, keep_first, &rule);
        assert_int_equal(length, 1);
        assert_true(rule_length > length);
        assert_true(speed > (recurrent ? 1.25 : 1.35) && speed > 1.5 * rule);
        run_steps(&c, compute_bound, recurrent, keep_few, &speed);
        run_steps(NULL, compute_bound, recurrent, keep_few, &rule);
        assert_true(speed >= 0.97 && speed > rule);
    }
}

/* Where a batch of 9 rows costs about one, drafts that hold whole one time in three grow to
 * the cap (the rule halves the length after each failure and falls to 1 or 2); on a
 * recurrent target, whose failures pause drafting, nearly. */
static void test_bandwidth_bound_rows_grow_drafts_to_the_cap(void **state)
{
    (void)state;
    for (int recurrent = 0; recurrent <= 1; recurrent++) {
        draft_costs c = measured(bandwidth_bound, recurrent);
        double speed, rule;
        size_t length = run_steps(&c, bandwidth_bound, recurrent, keep_all_or_none, &speed);
        size_t rule_length = run_steps(NULL, bandwidth_bound, recurrent, keep_all_or_none, &rule);
        /* a recurrent target's refusals feed rows again, which takes a batch of 8 past the
         * 9 rows that cost one */
        assert_in_range(length, recurrent ? 6 : 8, 8);
        assert_true(rule_length < length);
        assert_true(speed > 1.4 * rule);
    }
}

/* Drafts of one token that keep failing pause drafting for longer and longer, as do drafts
 * that do not pay; a kept token, with drafting worth it, ends the pauses. */
static void test_failing_drafts_pause(void **state)
{
    (void)state;
    size_t backoff = 0;
    assert_int_equal(prompt_lookup_next_pause(&backoff, 4, 2, 4, 0, false), 0); /* halving first */
    assert_int_equal(prompt_lookup_next_pause(&backoff, 1, 1, 0, 0, false), 0); /* no draft: no news */
    assert_int_equal(prompt_lookup_next_pause(&backoff, 1, 1, 1, 0, false), 2);
    assert_int_equal(prompt_lookup_next_pause(&backoff, 1, 1, 1, 0, false), 4);
    for (int i = 0; i < 8; i++)
        prompt_lookup_next_pause(&backoff, 1, 1, 1, 0, false);
    assert_int_equal(prompt_lookup_next_pause(&backoff, 1, 1, 1, 0, false), PROMPT_LOOKUP_MAX_PAUSE);
    assert_int_equal(prompt_lookup_next_pause(&backoff, 1, 1, 1, 1, false), 0);
    assert_int_equal(backoff, 0);
    assert_int_equal(prompt_lookup_next_pause(&backoff, 1, 1, 1, 0, false), 2);
    /* drafts that the costs say do not pay (next length 0) pause too, kept tokens or not */
    backoff = 0;
    assert_int_equal(prompt_lookup_next_pause(&backoff, 4, 0, 4, 1, false), 2);
    assert_int_equal(prompt_lookup_next_pause(&backoff, 1, 0, 1, 1, false), 4);
    assert_int_equal(prompt_lookup_next_pause(&backoff, 1, 1, 1, 1, false), 0);
    assert_int_equal(backoff, 0);
}

/* On a recurrent target, whose rejected drafts cost a state copy and a re-fed token, a draft
 * with nothing accepted pauses at any length; one with a token accepted does not. */
static void test_failing_drafts_of_a_recurrent_target_pause_at_once(void **state)
{
    (void)state;
    size_t backoff = 0;
    assert_int_equal(prompt_lookup_next_pause(&backoff, 4, 4, 4, 1, true), 0);
    assert_int_equal(prompt_lookup_next_pause(&backoff, 4, 4, 4, 0, true), 2);
    assert_int_equal(prompt_lookup_next_pause(&backoff, 2, 2, 2, 0, true), 4);
    assert_int_equal(prompt_lookup_next_pause(&backoff, 8, 8, 8, 3, true), 0);
    assert_int_equal(backoff, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_draft_follows_the_latest_longest_match),
        cmocka_unit_test(test_no_draft_without_a_two_token_match),
        cmocka_unit_test(test_length_adapts_to_acceptance),
        cmocka_unit_test(test_compute_bound_rows_and_few_kept_shorten_drafts),
        cmocka_unit_test(test_bandwidth_bound_rows_grow_drafts_to_the_cap),
        cmocka_unit_test(test_failing_drafts_pause),
        cmocka_unit_test(test_failing_drafts_of_a_recurrent_target_pause_at_once),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * Prompt lookup's drafts (src/runner/prompt_lookup.c): the longest suffix n-gram's latest
 * earlier occurrence, its followers up to the limit, no draft without a match of two tokens,
 * and the draft length's adaptation to what was accepted.
 */
#include <setjmp.h>
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

static void test_length_adapts_to_acceptance(void **state)
{
    (void)state;
    assert_int_equal(prompt_lookup_next_length(4, 4, 4, 16), 8);
    assert_int_equal(prompt_lookup_next_length(8, 8, 8, 10), 10);
    assert_int_equal(prompt_lookup_next_length(8, 8, 0, 16), 4);
    assert_int_equal(prompt_lookup_next_length(1, 1, 0, 16), 1);
    assert_int_equal(prompt_lookup_next_length(6, 6, 3, 16), 6);
    assert_int_equal(prompt_lookup_next_length(6, 0, 0, 16), 6);
}

/* Drafts of one token that keep failing pause drafting for longer and longer; a kept token
 * ends the pauses. */
static void test_failing_drafts_pause(void **state)
{
    (void)state;
    size_t backoff = 0;
    assert_int_equal(prompt_lookup_next_pause(&backoff, 4, 4, 0, false), 0); /* halving first */
    assert_int_equal(prompt_lookup_next_pause(&backoff, 1, 0, 0, false), 0); /* no draft: no news */
    assert_int_equal(prompt_lookup_next_pause(&backoff, 1, 1, 0, false), 2);
    assert_int_equal(prompt_lookup_next_pause(&backoff, 1, 1, 0, false), 4);
    for (int i = 0; i < 8; i++)
        prompt_lookup_next_pause(&backoff, 1, 1, 0, false);
    assert_int_equal(prompt_lookup_next_pause(&backoff, 1, 1, 0, false), PROMPT_LOOKUP_MAX_PAUSE);
    assert_int_equal(prompt_lookup_next_pause(&backoff, 1, 1, 1, false), 0);
    assert_int_equal(backoff, 0);
    assert_int_equal(prompt_lookup_next_pause(&backoff, 1, 1, 0, false), 2);
}

/* On a recurrent target, whose rejected drafts cost a state copy and a re-fed token, a draft
 * with nothing accepted pauses at any length; one with a token accepted does not. */
static void test_failing_drafts_of_a_recurrent_target_pause_at_once(void **state)
{
    (void)state;
    size_t backoff = 0;
    assert_int_equal(prompt_lookup_next_pause(&backoff, 4, 4, 1, true), 0);
    assert_int_equal(prompt_lookup_next_pause(&backoff, 4, 4, 0, true), 2);
    assert_int_equal(prompt_lookup_next_pause(&backoff, 2, 2, 0, true), 4);
    assert_int_equal(prompt_lookup_next_pause(&backoff, 8, 8, 3, true), 0);
    assert_int_equal(backoff, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_draft_follows_the_latest_longest_match),
        cmocka_unit_test(test_no_draft_without_a_two_token_match),
        cmocka_unit_test(test_length_adapts_to_acceptance),
        cmocka_unit_test(test_failing_drafts_pause),
        cmocka_unit_test(test_failing_drafts_of_a_recurrent_target_pause_at_once),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

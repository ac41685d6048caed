/*
 * A draft model's draft length (draft_model_next_length, src/runner/draft_model.c): it
 * follows the estimated chance that a guess is kept, drafting a k-th guess while the chance
 * that all k are kept stays at least DRAFT_KEEP_CHANCE, within 1 and the cap.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "runner/draft_model.h"

/* The length the rule settles on after many steps of 10 guesses keeping the first `kept`
 * (a refusal each time below 10). */
static size_t settled_length(size_t kept, size_t cap)
{
    draft_rate rate = {0};
    size_t k = 0;
    for (int step = 0; step < 200; step++)
        k = draft_model_next_length(&rate, 10, kept, cap);
    return k;
}

static void test_length_follows_the_keep_rate(void **state)
{
    (void)state;
    /* the estimate settles near kept / (kept + 1), the length at the largest k with
     * a^k >= 0.45: about 0.89 -> 6, 0.79 -> 3, 0.66 -> 1 or 2 */
    assert_in_range(settled_length(9, 16), 5, 7);
    assert_in_range(settled_length(4, 16), 2, 4);
    assert_in_range(settled_length(2, 16), 1, 2);
    assert_int_equal(settled_length(0, 16), 1);
    /* every guess kept: up to the cap, never past it */
    assert_int_equal(settled_length(10, 16), 16);
    assert_int_equal(settled_length(10, 5), 5);
    assert_int_equal(settled_length(10, 0), 0);
}

static void test_recent_steps_count_most(void **state)
{
    (void)state;
    draft_rate rate = {0};
    for (int step = 0; step < 50; step++)
        draft_model_next_length(&rate, 8, 8, 8);
    assert_int_equal(draft_model_next_length(&rate, 0, 0, 8), 8); /* no draft: no news */
    /* the draft stops agreeing: the length falls within a few steps */
    size_t k = 8;
    int steps = 0;
    while (k > 1 && steps < 20) {
        k = draft_model_next_length(&rate, k, 0, 8);
        steps++;
    }
    assert_int_equal(k, 1);
    assert_in_range(steps, 2, 10);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_length_follows_the_keep_rate),
        cmocka_unit_test(test_recent_steps_count_most),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * A draft model's draft length (draft_model_next_length, src/runner/draft_model.c): without
 * measured costs it follows the estimated chance that a guess is kept, drafting a k-th guess
 * while the chance that all k are kept stays at least DRAFT_KEEP_CHANCE, within 1 and the
 * cap; with them (draft_costs.c), the length that yields the most tokens per second.
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
        k = draft_model_next_length(&rate, NULL, 1, 10, kept, cap);
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
        draft_model_next_length(&rate, NULL, 1, 8, 8, 8);
    assert_int_equal(draft_model_next_length(&rate, NULL, 1, 0, 0, 8), 8); /* no draft: no news */
    /* the draft stops agreeing: the length falls within a few steps */
    size_t k = 8;
    int steps = 0;
    while (k > 1 && steps < 20) {
        k = draft_model_next_length(&rate, NULL, 1, k, 0, 8);
        steps++;
    }
    assert_int_equal(k, 1);
    assert_in_range(steps, 2, 10);
}

/* Verify batch costs by rows (in units of one row's), a draft step's, and the batch's
 * generating sequences. */
typedef struct cost_curve {
    const char *name;
    double (*verify)(size_t rows);
    double draft_step;
} cost_curve;

static double flat_rows(size_t rows)
{
    (void)rows;
    return 1.0;
}

static double linear_rows(size_t rows) /* each row past the first 0.4 of one */
{
    return 1.0 + 0.4 * (double)(rows - 1);
}

static double f32_rows(size_t rows) /* an F32 target at 1 thread: 5 rows the cheapest batch */
{
    static const double cost[] = {0, 1.0, 1.2, 1.3, 1.2, 1.1, 1.4, 1.5, 1.68, 1.6};
    return rows < 10 ? cost[rows] : 1.6 * (double)rows / 9.0;
}

static const cost_curve flat = {"flat", flat_rows, 0.15};
static const cost_curve linear = {"linear 0.4", linear_rows, 0.15};
static const cost_curve f32 = {"F32", f32_rows, 0.144};

/* Costs measured once for every row count up to max_rows (0.1 s a row's unit). */
static draft_costs measured(const cost_curve *curve, size_t max_rows)
{
    draft_costs c = {0};
    for (size_t rows = 1; rows <= max_rows; rows++)
        draft_costs_record_verify(&c, rows, 0.1 * curve->verify(rows));
    draft_costs_record_draft_step(&c, 0.1 * curve->draft_step);
    return c;
}

/* A record whose keep chance estimate is a (no refusals: (kept + 1) / (kept + 2)). */
static draft_rate rate_of(double a)
{
    return (draft_rate){.kept = (2.0 * a - 1.0) / (1.0 - a), .refused = 0.0};
}

static void test_length_by_measured_costs(void **state)
{
    (void)state;
    /* the lengths that yield the most tokens per second, as worked out by hand; ranges
     * where two lengths come within a percent */
    static const struct {
        const cost_curve *curve;
        size_t n_seqs;
        double a;
        size_t lo, hi;
    } table[] = {
        /* flat: longer drafts than the keep-chance rule (1, 2, 3, 7, 8) */
        {&flat, 1, 0.5, 2, 2},    {&flat, 1, 0.7, 3, 4},    {&flat, 1, 0.8, 4, 5},
        {&flat, 1, 0.9, 7, 8},    {&flat, 1, 0.96, 8, 8},
        /* each row 0.4 of a step: shorter ones */
        {&linear, 1, 0.5, 1, 1},  {&linear, 1, 0.7, 1, 1},  {&linear, 1, 0.9, 2, 3},
        /* 5 rows cheapest: 4 until the rule's 8 is as good */
        {&f32, 1, 0.5, 4, 4},     {&f32, 1, 0.7, 4, 4},     {&f32, 1, 0.8, 4, 4},
        {&f32, 1, 0.9, 4, 4},     {&f32, 1, 0.96, 8, 8},
        /* four sequences: a batch of 4 (k + 1) rows; flat stays flat, linear grows 4 times
         * as fast */
        {&flat, 4, 0.8, 4, 5},    {&linear, 4, 0.9, 1, 1},  {&linear, 4, 0.7, 1, 1},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        draft_costs c = measured(table[i].curve, table[i].n_seqs * 9);
        draft_rate rate = rate_of(table[i].a);
        size_t k = draft_model_next_length(&rate, &c, table[i].n_seqs, 0, 0, 8);
        if (k < table[i].lo || k > table[i].hi)
            fail_msg("%s, %zu sequences, a = %.2f: length %zu, expected %zu-%zu",
                     table[i].curve->name, table[i].n_seqs, table[i].a, k, table[i].lo,
                     table[i].hi);
    }
}

/* A recurrent target pays for a refused guess with the rows it feeds again (the pending
 * token and the guesses kept before it) and for every draft with a copy of its states: where
 * each row costs 0.4 of a step its drafts are no longer than a dense target's, and shorter
 * where a refusal after kept guesses is likely (0.8: 1 where a dense target takes 2; 0.96: 4
 * where it takes 8); where rows are free the copy alone does not shorten them. */
static void test_recurrent_target_counts_refed_rows(void **state)
{
    (void)state;
    static const double chances[] = {0.5, 0.7, 0.8, 0.9, 0.96};
    for (size_t i = 0; i < sizeof chances / sizeof chances[0]; i++) {
        draft_costs dense = measured(&linear, 20), recurrent = dense;
        draft_costs_record_checkpoint(&recurrent, 0.002);
        draft_rate r1 = rate_of(chances[i]), r2 = rate_of(chances[i]);
        size_t k_dense = draft_model_next_length(&r1, &dense, 1, 0, 0, 8);
        size_t k_recurrent = draft_model_next_length(&r2, &recurrent, 1, 0, 0, 8);
        assert_true(k_recurrent <= k_dense);
        if (chances[i] == 0.8 || chances[i] == 0.96) {
            assert_int_equal(k_dense, chances[i] == 0.8 ? 2 : 8);
            assert_int_equal(k_recurrent, chances[i] == 0.8 ? 1 : 4);
        }
        draft_costs flat_dense = measured(&flat, 20), flat_recurrent = flat_dense;
        draft_costs_record_checkpoint(&flat_recurrent, 0.002);
        r1 = rate_of(chances[i]);
        r2 = rate_of(chances[i]);
        assert_int_equal(draft_model_next_length(&r2, &flat_recurrent, 1, 0, 0, 8),
                         draft_model_next_length(&r1, &flat_dense, 1, 0, 0, 8));
    }
}

/* Until both kinds of cost are measured and steady, the keep-chance rule's length. */
static void test_without_steady_costs_the_rule(void **state)
{
    (void)state;
    draft_costs none = {0}, verify_only = measured(&flat, 9), noisy = measured(&flat, 9);
    verify_only.draft_step = (draft_timing){0};
    for (int i = 0; i < 8; i++) /* a batch of 4 rows sometimes three times as long */
        draft_costs_record_verify(&noisy, 4, i % 2 ? 0.3 : 0.1);
    const draft_costs *costs[] = {NULL, &none, &verify_only};
    for (size_t i = 0; i < 3; i++) {
        draft_rate rate = rate_of(0.8);
        assert_int_equal(draft_model_next_length(&rate, costs[i], 1, 0, 0, 8), 3);
    }
    draft_rate rate = rate_of(0.8); /* flat costs would say 4-5; the rule's 3 is noisy */
    assert_int_equal(draft_model_next_length(&rate, &noisy, 1, 0, 0, 8), 3);
    /* every DRAFT_PROBE_EVERY-th choice is the rule's, to keep its batch measured */
    draft_costs c = measured(&f32, 9);
    rate = rate_of(0.7);
    for (unsigned i = 1; i <= 2 * DRAFT_PROBE_EVERY; i++)
        assert_int_equal(draft_model_next_length(&rate, &c, 1, 0, 0, 8),
                         i % DRAFT_PROBE_EVERY ? 4 : 2);
    /* no cap, no draft */
    rate = rate_of(0.9);
    assert_int_equal(draft_model_next_length(&rate, &c, 1, 0, 0, 0), 0);
}

/* Drafts that fail at once or hold to the end (three of four steps keep all 8): the positions'
 * own keep chances make long drafts pay where guesses kept independently at the same overall
 * chance (about 0.93) would not. */
static void test_positions_keep_chances(void **state)
{
    (void)state;
    draft_rate rate = {0};
    for (int step = 0; step < 60; step++)
        draft_model_next_length(&rate, NULL, 1, 8, step % 4 == 3 ? 0 : 8, 8);
    draft_rate independent = {.kept = rate.kept, .refused = rate.refused};
    draft_costs c = measured(&f32, 9), lin = measured(&linear, 9);
    draft_rate r = rate;
    assert_int_equal(draft_model_next_length(&r, &c, 1, 0, 0, 8), 8);
    r = rate;
    assert_in_range(draft_model_next_length(&r, &lin, 1, 0, 0, 8), 5, 8);
    r = independent;
    assert_int_equal(draft_model_next_length(&r, &c, 1, 0, 0, 8), 4);
    r = independent;
    assert_int_equal(draft_model_next_length(&r, &lin, 1, 0, 0, 8), 3);
}

/* Prompt lookup's guesses cost nothing to make, and 0 (a plain step) is a choice: where each
 * row costs 0.4 of one more, drafts whose guesses hold a third of the time do not pay (0);
 * where rows are free, any draft does and the length is the cap; on the F32 curve 4 (5 rows
 * the cheapest batch) at a low chance, 8 at a high one. */
static void test_free_guesses_by_costs(void **state)
{
    (void)state;
    static const struct {
        const cost_curve *curve;
        double a;
        size_t usual, lo, hi;
    } table[] = {
        {&linear, 0.33, 4, 0, 0}, {&linear, 0.5, 4, 1, 1}, {&linear, 0.9, 1, 3, 5},
        {&flat, 0.33, 1, 8, 8},   {&flat, 0.9, 4, 8, 8},   {&flat, 0.96, 2, 8, 8},
        {&f32, 0.33, 8, 4, 4},    {&f32, 0.9, 1, 8, 8},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        draft_costs c = measured(table[i].curve, 9);
        draft_rate rate = rate_of(table[i].a);
        size_t k = draft_length_by_costs(&rate, &c, NULL, 1, table[i].usual, 0, 8);
        if (k < table[i].lo || k > table[i].hi)
            fail_msg("%s, a = %.2f: length %zu, expected %zu-%zu", table[i].curve->name,
                     table[i].a, k, table[i].lo, table[i].hi);
    }
}

static void test_cost_estimates(void **state)
{
    (void)state;
    draft_costs c = {0};
    bool steady;
    assert_true(draft_costs_verify(&c, 3, &steady) == 0.0);
    assert_false(steady);
    draft_costs_record_verify(&c, 1, 0.10);
    draft_costs_record_verify(&c, 5, 0.20);
    assert_float_equal(draft_costs_verify(&c, 3, &steady), 0.15, 1e-12); /* between */
    assert_true(steady);
    assert_float_equal(draft_costs_verify(&c, 9, &steady), 0.20, 1e-12); /* past: flat */
    assert_float_equal(draft_costs_verify(&c, 5, &steady), 0.20, 1e-12);
    assert_float_equal(draft_costs_verify(&c, 128, &steady), 0.40, 1e-12); /* 2 x 64 rows */
    draft_costs_record_verify(&c, 0, 1.0); /* neither 0 rows nor more than the table */
    draft_costs_record_verify(&c, DRAFT_COSTS_MAX_ROWS + 1, 1.0);
    assert_float_equal(draft_costs_verify(&c, 128, &steady), 0.40, 1e-12);
    /* a sample ten times the estimate counts as twice it, and shows as spread */
    draft_costs_record_verify(&c, 5, 2.0);
    assert_float_equal(draft_costs_verify(&c, 5, &steady),
                       0.20 + DRAFT_COSTS_SMOOTHING * 0.20, 1e-12);
    assert_true(c.verify[5].spread > DRAFT_COSTS_MAX_SPREAD - 1e-12);
    assert_false(steady);
    /* steady samples bring it back */
    for (int i = 0; i < 20; i++)
        draft_costs_record_verify(&c, 5, 0.20);
    assert_float_equal(draft_costs_verify(&c, 5, &steady), 0.20, 0.01);
    assert_true(steady);
    draft_costs_record_draft_step(&c, -1.0); /* nonsense times are not samples */
    assert_true(c.draft_step.seconds == 0.0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_length_follows_the_keep_rate),
        cmocka_unit_test(test_recent_steps_count_most),
        cmocka_unit_test(test_length_by_measured_costs),
        cmocka_unit_test(test_without_steady_costs_the_rule),
        cmocka_unit_test(test_recurrent_target_counts_refed_rows),
        cmocka_unit_test(test_positions_keep_chances),
        cmocka_unit_test(test_free_guesses_by_costs),
        cmocka_unit_test(test_cost_estimates),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * Element-wise blocks with a vector version per level (blocks.h): the attention softmax and
 * SwiGLU at the active level against double precision, on long rows, ragged tails, a single
 * value, equal values, underflowing terms and saturated gates.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "blocks.h"
#include "cpu.h"

/* Each probability within 1e-6 relative (or 1e-12 absolute, for terms near zero) of
 * softmax(scale * x) computed in double. */
static void check_softmax(const float *x, size_t n, float scale)
{
    float *got = malloc(n * sizeof *got);
    assert_non_null(got);
    for (size_t i = 0; i < n; i++)
        got[i] = x[i];
    block_softmax(got, n, scale);
    double max = -INFINITY, sum = 0.0;
    for (size_t i = 0; i < n; i++)
        max = fmax(max, (double)(x[i] * scale));
    for (size_t i = 0; i < n; i++)
        sum += exp((double)(x[i] * scale) - max);
    for (size_t i = 0; i < n; i++) {
        double want = exp((double)(x[i] * scale) - max) / sum;
        double err = fabs((double)got[i] - want);
        if (!(err <= 1e-6 * want || err <= 1e-12))
            fail_msg("%s: n=%zu, element %zu is %.9g, softmax %.9g", cpu_level_name(cpu_active_level()),
                     n, i, (double)got[i], want);
    }
    free(got);
}

static void test_softmax_matches_double_precision(void **state)
{
    (void)state;
    enum { N = 4099 };
    static float x[N];
    uint32_t rng = 5;
    for (size_t i = 0; i < N; i++) {
        rng = rng * 1664525u + 1013904223u;
        x[i] = (float)((int)(rng >> 8) % 200001 - 100000) / 1000.0f; /* -100..100 */
    }
    const size_t lengths[] = {1, 2, 15, 16, 17, 100, 1024, N};
    for (size_t k = 0; k < sizeof lengths / sizeof lengths[0]; k++) {
        check_softmax(x, lengths[k], 0.125f);
        check_softmax(x, lengths[k], 1.0f);
    }
    /* equal values: exactly uniform where 1/n is a float */
    float same[64];
    for (int i = 0; i < 64; i++)
        same[i] = 3.5f;
    block_softmax(same, 64, 0.5f);
    for (int i = 0; i < 64; i++)
        assert_true(same[i] == 1.0f / 64.0f);
    /* one term dominates: the others underflow to (near) zero, not NaN */
    float spread[33];
    for (int i = 0; i < 33; i++)
        spread[i] = i == 20 ? 1000.0f : -1000.0f;
    block_softmax(spread, 33, 1.0f);
    for (int i = 0; i < 33; i++)
        assert_true(i == 20 ? spread[i] == 1.0f : spread[i] >= 0.0f && spread[i] < 1e-30f);
}

static void test_swiglu_matches_double_precision(void **state)
{
    (void)state;
    enum { N = 1043 };
    static float gate[N], up[N], got[N];
    uint32_t rng = 11;
    for (size_t i = 0; i < N; i++) {
        rng = rng * 1664525u + 1013904223u;
        gate[i] = (float)((int)(rng >> 8) % 40001 - 20000) / 1000.0f; /* -20..20 */
        rng = rng * 1664525u + 1013904223u;
        up[i] = (float)((int)(rng >> 8) % 2001 - 1000) / 100.0f;
    }
    gate[0] = -200.0f; /* e^200 overflows: silu is -0 */
    gate[1] = 200.0f;
    gate[2] = 0.0f;
    for (size_t i = 0; i < N; i++)
        got[i] = gate[i];
    block_swiglu(got, up, N);
    for (size_t i = 0; i < N; i++) {
        double g = gate[i], want = g / (1.0 + exp(-g)) * up[i];
        double err = fabs((double)got[i] - want);
        if (!(err <= 2e-6 * fabs(want) || err <= 1e-30))
            fail_msg("%s: swiglu(%g, %g) is %.9g, want %.9g", cpu_level_name(cpu_active_level()),
                     g, (double)up[i], (double)got[i], want);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_softmax_matches_double_precision),
        cmocka_unit_test(test_swiglu_matches_double_precision),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * `corral bench` end to end on a fixture model: one table row per test and thread count with
 * positive speeds, the kernels line names the software-prefetch choice where it applies
 * (CORRAL_PREFETCH), and bad input gets a message and status 1/2.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "command_fixture.h"

/* `corral bench ARGS` in the fixtures directory, with ENV (assignments or "") before it. */
static char *bench(const char *env, const char *args, int *status)
{
    const char *bin = getenv("CORRAL_BIN"), *dir = getenv("CORRAL_FIXTURES");
    assert_non_null(bin);
    assert_non_null(dir);
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "cd '%s' && %s '%s' bench %s 2>&1", dir, env, bin, args);
    return command_fixture_run(cmd, status);
}

/* The rows "| NAME | THREADS | median | min | max | GB/s |" of the table whose NAME (which
 * may hold spaces: "tg4 x2") is name: count them, and check that every figure present is
 * positive and that tg rows carry a bandwidth. */
static int count_rows(const char *out, const char *name)
{
    int rows = 0;
    size_t name_len = strlen(name);
    for (const char *line = out; line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
        if (strncmp(line, "| ", 2) != 0 || strncmp(line + 2, name, name_len) != 0)
            continue;
        const char *rest = line + 2 + name_len;
        while (*rest == ' ')
            rest++;
        int threads;
        double median, low, high, gbps = 0.0;
        int fields = sscanf(rest, "| %d | %lf | %lf | %lf | %lf", &threads, &median, &low, &high,
                            &gbps);
        if (fields < 4)
            continue;
        assert_true(threads >= 1);
        assert_true(median > 0.0 && low > 0.0 && high >= median && median >= low);
        if (name[0] == 't')
            assert_true(fields == 5 && gbps > 0.0);
        rows++;
    }
    return rows;
}

static void test_bench_prints_a_row_per_test_and_thread_count(void **state)
{
    (void)state;
    int status;
    char *out = bench("", "tiny-tolstoy-f32.gguf -p 8 -n 4 -t 1,2 -r 2", &status);
    assert_int_equal(status, 0);
    assert_non_null(strstr(out, "model: tiny-tolstoy-f32.gguf"));
    assert_non_null(strstr(out, "\nkernels: "));
    assert_int_equal(count_rows(out, "pp8"), 2);
    assert_int_equal(count_rows(out, "tg4"), 2);
    free(out);
}

/* -s: tg rows for each sequence count, named "tgN xS" beyond one sequence, also at a depth
 * (each sequence holds it); pp is one sequence whatever -s says. */
static void test_bench_generates_several_sequences_together(void **state)
{
    (void)state;
    int status;
    char *out = bench("", "tiny-tolstoy-f32.gguf -p 4 -n 3 -s 1,2,5 -d 0,6 -t 1 -r 2", &status);
    assert_int_equal(status, 0);
    assert_int_equal(count_rows(out, "pp4"), 1);
    assert_int_equal(count_rows(out, "tg3"), 1);
    assert_int_equal(count_rows(out, "tg3 x2"), 1);
    assert_int_equal(count_rows(out, "tg3 x5"), 1);
    assert_int_equal(count_rows(out, "tg3 x5 @ d6"), 1);
    assert_int_equal(count_rows(out, "tg3 @ d6"), 1);
    assert_null(strstr(out, "pp4 x"));
    free(out);
}

/* --kv: the cache type named in the header, a row per test on it; a model that cannot take a
 * quantized cache (stories260K's heads are 8 wide) is an error, not a silent F16 run. */
static void test_bench_runs_on_a_quantized_cache(void **state)
{
    (void)state;
    int status;
    char *out = bench("", "tiny-tolstoy-f32.gguf -p 4 -n 3 -d 0,40 -t 1 -r 2 --kv q4_0", &status);
    assert_int_equal(status, 0);
    assert_non_null(strstr(out, "\nKV cache: q4_0\n"));
    assert_int_equal(count_rows(out, "tg3 @ d40"), 1);
    assert_int_equal(count_rows(out, "pp4"), 1);
    free(out);
    out = bench("", "stories260K.gguf -p 4 -n 0 -r 1 --kv q8_0", &status);
    assert_int_equal(status, 1);
    assert_non_null(strstr(out, "multiples of 32"));
    free(out);
}

static void test_bench_names_the_prefetch_choice(void **state)
{
    (void)state;
    const char *expect[2] = {"1-token software prefetch off", "1-token software prefetch on"};
    for (int prefetch = 0; prefetch < 2; prefetch++) {
        char env[64];
        snprintf(env, sizeof env, "CORRAL_CPU=avx2 CORRAL_PREFETCH=%d", prefetch);
        int status;
        char *out = bench(env, "tiny-tolstoy-f32.gguf -p 0 -n 2 -r 1", &status);
        assert_int_equal(status, 0);
        /* a CPU without AVX2 runs the portable kernels, which the choice does not concern */
        bool simd = strstr(out, "\nkernels: avx2 (") != NULL;
        bool named = strstr(out, simd ? expect[prefetch] : "prefetch") != NULL;
        free(out);
        assert_true(named == simd);
        if (!simd)
            skip();
    }
}

static void test_bench_rejects_bad_input(void **state)
{
    (void)state;
    static const struct {
        const char *args, *message;
        int status;
    } cases[] = {
        {"no-such-model.gguf", "corral bench: no-such-model.gguf", 1},
        {"tiny-tolstoy-f32.gguf -r 0", "-r expects", 2},
        {"tiny-tolstoy-f32.gguf -t 1,x", "expects numbers", 2},
        {"tiny-tolstoy-f32.gguf --no-such-option", "unknown option '--no-such-option'", 2},
        {"tiny-tolstoy-f32.gguf -n", "-n needs a value", 2},
        {"tiny-tolstoy-f32.gguf -s 0", "-s expects sequence counts 1..64", 2},
        {"tiny-tolstoy-f32.gguf -s 2,65", "-s expects sequence counts 1..64", 2},
        {"tiny-tolstoy-f32.gguf --kv q5_0", "--kv expects f16, f32, q8_0 or q4_0", 2},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int status;
        char *out = bench("", cases[i].args, &status);
        bool said = strstr(out, cases[i].message) != NULL;
        free(out);
        assert_int_equal(status, cases[i].status);
        assert_true(said);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bench_prints_a_row_per_test_and_thread_count),
        cmocka_unit_test(test_bench_generates_several_sequences_together),
        cmocka_unit_test(test_bench_runs_on_a_quantized_cache),
        cmocka_unit_test(test_bench_names_the_prefetch_choice),
        cmocka_unit_test(test_bench_rejects_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

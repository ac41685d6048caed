/*
 * `corral bench` end to end on a fixture model: one table row per test and thread count with
 * positive speeds, the kernels line names the software-prefetch choice where it applies
 * (CORRAL_PREFETCH), a token's CPU time fits in its threads' wall time, the GB/s column
 * counts the weights a step really reads (of a mixture of experts the used experts only, the
 * output where it is the tied embedding), and bad input gets a message and status 1/2.
 */
#include <math.h>
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
#include "corral/engine.h"

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

/* The last field of the table row at line, "| ... | FIGURE |": the CPU ms per token. */
static double last_field(const char *line)
{
    const char *end = strchr(line, '\n');
    if (!end)
        end = line + strlen(line);
    while (end > line && end[-1] != '|')
        end--;
    const char *start = end > line ? end - 1 : line;
    while (start > line && start[-1] != '|')
        start--;
    assert_true(end - start > 1);
    return strtod(start, NULL);
}

/* The rows "| NAME | THREADS | median | min | max | GB/s | CPU ms/t |" of the table whose
 * NAME (which may hold spaces: "tg4 x2") is name: count them, and check that every figure
 * present is positive, that tg rows carry a bandwidth, and that a token's CPU time is no more
 * than its threads could spend in the slowest run's wall time. */
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
        double cpu_ms = last_field(line);
        if (cpu_ms <= 0.0 || cpu_ms > threads * 1e3 / low * 1.01 + 1e-3)
            fail_msg("CPU ms/t %.3f out of (0, %d x %.3f ms]", cpu_ms, threads, 1e3 / low);
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

/* The median t/s and GB/s of the row named name. */
static void row_figures(const char *out, const char *name, double *median, double *gbps)
{
    char head[64];
    snprintf(head, sizeof head, "\n| %-12s |", name);
    const char *row = strstr(out, head);
    assert_non_null(row);
    int threads;
    double low, high;
    assert_int_equal(sscanf(row + strlen(head), " %d | %lf | %lf | %lf | %lf", &threads, median,
                            &low, &high, gbps),
                     5);
}

/* A printed GB/s (one decimal) against bytes per step times steps per second. */
static void assert_bandwidth(double gbps, double step_bytes, double steps_per_second)
{
    double want = step_bytes * steps_per_second / 1e9;
    if (fabs(gbps - want) > 0.05 + 0.01 * want)
        fail_msg("GB/s %.1f, expected %.3f (%.0f bytes a step)", gbps, want, step_bytes);
}

/*
 * arch/qwen3moe (F32; E 64, 3 layers, 8 experts of 64, 2 used, untied): a layer reads q, k, v,
 * o (64x128 + 2 x 64x64 + 128x64), its norms (64 + 32 + 32 + 64) and router (64x8) in full,
 * 24576 + 192 + 512 floats, and of its experts (3 x 64x64 x 8 = 98304 floats) those of 2 of 8;
 * then output_norm, output (64x304) and one embedding row: 64 + 19456 + 64. A token reads
 * (3 x 25280 + 19584) x 4 = 381696 bytes besides 3 x 98304 x 4 = 1179648 of experts, of which
 * a quarter: 676608 bytes in all, where the whole file but the embedding is 1.56 MB. A step of
 * 2 sequences reads the experts' 1 - (3/4)^2 = 7/16. arch/llama-tied has no output.weight, so
 * its embedding is read in full as the output: every tensor's bytes.
 */
static void test_bench_counts_the_weights_a_step_reads(void **state)
{
    (void)state;
    int status;
    char *out = bench("", "arch/qwen3moe.gguf -p 0 -n 8 -s 1,2 -t 1 -r 3", &status);
    assert_int_equal(status, 0);
    assert_non_null(strstr(out, "weights read per generated token 0.68 MB, 2 of 8 experts)"));
    double median, gbps;
    row_figures(out, "tg8", &median, &gbps);
    assert_bandwidth(gbps, 381696.0 + 1179648.0 / 4.0, median);
    row_figures(out, "tg8 x2", &median, &gbps);
    assert_bandwidth(gbps, 381696.0 + 1179648.0 * 7.0 / 16.0, median / 2.0);
    free(out);

    char path[4096];
    snprintf(path, sizeof path, "%s/arch/llama-tied.gguf", getenv("CORRAL_FIXTURES"));
    corral_error err;
    corral_model_file *file = corral_model_file_open(path, &err);
    assert_non_null(file);
    double total = 0.0;
    for (size_t i = 0; i < corral_model_file_n_tensors(file); i++)
        total += (double)corral_model_file_tensor_bytes(file, i);
    corral_model_file_close(file);
    out = bench("", "arch/llama-tied.gguf -p 0 -n 8 -t 1 -r 3", &status);
    assert_int_equal(status, 0);
    char want[128];
    snprintf(want, sizeof want, "weights read per generated token %.2f MB)", total / 1e6);
    if (!strstr(out, want))
        fail_msg("no '%s' in:\n%s", want, out);
    row_figures(out, "tg8", &median, &gbps);
    assert_bandwidth(gbps, total, median);
    free(out);
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
        cmocka_unit_test(test_bench_counts_the_weights_a_step_reads),
        cmocka_unit_test(test_bench_rejects_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

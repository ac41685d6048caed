/*
 * `corral infer --lora FILE[:SCALE]` end to end on every CPU level: each lora/ reference's
 * adapters given on the command line reproduce llama.cpp's greedy ids and last logits, and a
 * bad --lora (no file, a model instead of an adapter, a bad scale) is a message and status 1/2.
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
#include "reference_fixture.h"

/* lora/README's tolerances: float32 rounding for the F32 adapter; the F16 one is computed in
 * F32, without ggml's rounding of the activations to F16. */
#define F32_TOLERANCE 1e-4f
#define F16_TOLERANCE 3e-3f

#define INPUT_IDS "1,403,407,261,378,432,383,286,261,376,298,315,421"

/* corral infer ARGS in the fixtures folder; with_stderr keeps its messages in the output. */
static char *infer(const char *args, bool with_stderr, int *status)
{
    const char *bin = getenv("CORRAL_BIN"), *dir = getenv("CORRAL_FIXTURES");
    assert_non_null(bin);
    assert_non_null(dir);
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "cd '%s' && '%s' infer %s %s", dir, bin, args,
             with_stderr ? "2>&1" : "2>/dev/null");
    return command_fixture_run(cmd, status);
}

static char *read_reference(const char *name)
{
    char relative[256];
    snprintf(relative, sizeof relative, "lora/%s.ref.txt", name);
    return read_file(fixture(relative));
}

/* " --lora lora/FILE:SCALE" for each of the reference's lora lines, in order. */
static void lora_args(const char *text, char *out, size_t size)
{
    size_t used = 0;
    out[0] = '\0';
    for (const char *line = strstr(text, "\nlora "); line; line = strstr(line + 1, "\nlora ")) {
        char file[128], scale[32];
        assert_int_equal(sscanf(line, "\nlora %127s %31s", file, scale), 2);
        int n = snprintf(out + used, size - used, " --lora lora/%s:%s", file, scale);
        assert_true(n > 0 && (size_t)n < size - used);
        used += (size_t)n;
    }
    assert_true(used > 0);
}

static void check_case(const char *name, float tolerance)
{
    char *text = read_reference(name);
    char loras[512], args[1024];
    lora_args(text, loras, sizeof loras);
    int status;

    /* greedy ids: the reference line is "greedy_ids 16 ID..." */
    snprintf(args, sizeof args,
             "arch/llama-gqa.gguf --prompt-ids " INPUT_IDS " -n 16 --temperature 0 --ignore-eos --kv f32 --ids%s",
             loras);
    char *out = infer(args, false, &status);
    assert_int_equal(status, 0);
    const char *want = strstr(text, "\ngreedy_ids 16 ") + strlen("\ngreedy_ids 16 ");
    const char *got = strstr(out, "generated_ids: ");
    assert_non_null(got);
    got += strlen("generated_ids: ");
    size_t len = (size_t)(strchr(want, '\n') - want);
    if (strncmp(got, want, len) != 0 || got[len] != '\n')
        fail_msg("%s: generated %s, llama.cpp %.*s", name, got, (int)len, want);
    free(out);

    /* the prompt's last logits */
    snprintf(args, sizeof args,
             "arch/llama-gqa.gguf --prompt-ids " INPUT_IDS " -n 0 --kv f32 --logits%s", loras);
    out = infer(args, false, &status);
    assert_int_equal(status, 0);
    const char *p = out, *r = strstr(text, "\nlast_logits 512 ") + strlen("\nlast_logits 512 ");
    for (int i = 0; i < 512; i++) {
        char *end_p, *end_r;
        float g = strtof(p, &end_p), w = strtof(r, &end_r);
        assert_true(end_p != p && end_r != r);
        if (fabsf(g - w) > tolerance)
            fail_msg("%s: logit %d is %g, llama.cpp %g (tolerance %g)", name, i, g, w, tolerance);
        p = end_p;
        r = end_r;
    }
    free(out);
    free(text);
}

static void test_cli_lora_f32_adapter(void **state) { (void)state; check_case("f32-r4", F32_TOLERANCE); }
static void test_cli_lora_f32_adapter_at_half_scale(void **state) { (void)state; check_case("f32-r4-scale0.5", F32_TOLERANCE); }
static void test_cli_lora_f16_adapter(void **state) { (void)state; check_case("f16-qv", F16_TOLERANCE); }
static void test_cli_lora_two_adapters(void **state) { (void)state; check_case("two-adapters", F16_TOLERANCE); }

static void test_cli_lora_reports_bad_adapters(void **state)
{
    (void)state;
    int status;
    char *out = infer("arch/llama-gqa.gguf hello -n 1 --lora lora/missing.gguf", true, &status);
    assert_int_equal(status, 1);
    assert_non_null(strstr(out, "lora/missing.gguf"));
    free(out);
    out = infer("arch/llama-gqa.gguf hello -n 1 --lora arch/qwen2.gguf:0.5", true, &status);
    assert_int_equal(status, 1);
    assert_non_null(strstr(out, "arch/qwen2.gguf is not an adapter"));
    free(out);
    out = infer("arch/qwen2.gguf hello -n 1 --lora lora/adapter-f32-r4.gguf", true, &status);
    assert_int_equal(status, 1);
    assert_non_null(strstr(out, "the adapter is for architecture 'llama', the model is 'qwen2'"));
    free(out);
    out = infer("arch/llama-gqa.gguf hello -n 1 --lora :1", true, &status);
    assert_int_equal(status, 2);
    assert_non_null(strstr(out, "--lora expects FILE[:SCALE]"));
    free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cli_lora_f32_adapter),
        cmocka_unit_test(test_cli_lora_f32_adapter_at_half_scale),
        cmocka_unit_test(test_cli_lora_f16_adapter),
        cmocka_unit_test(test_cli_lora_two_adapters),
        cmocka_unit_test(test_cli_lora_reports_bad_adapters),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

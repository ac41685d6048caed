/*
 * `corral infer` end to end, as a user runs it: greedy text equals the tiny-tolstoy
 * reference text, --ids and --prompt-ids give the reference ids (one BOS however the prompt
 * was written), --logits prints the reference logits, the model families' (mixture-of-experts
 * ones too) greedy ids and logits equal llama.cpp's at every CPU level, a fixed seed repeats
 * itself, --grammar shapes the text, and bad input gets a message and status 1/2.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <regex.h>
#include <unistd.h>

#include "command_fixture.h"
#include "cpu.h"
#include "short_fixture.h"

static char *infer(const char *args, int *status)
{
    const char *bin = getenv("CORRAL_BIN"), *dir = getenv("CORRAL_FIXTURES");
    assert_non_null(bin);
    assert_non_null(dir);
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "cd '%s' && '%s' infer %s 2>/dev/null", dir, bin, args);
    return command_fixture_run(cmd, status);
}

/* The reference's "text" line of a case, JSON-unescaped. */
static void reference_text(int case_no, char *out, size_t size)
{
    char path[2048];
    snprintf(path, sizeof path, "%s/tiny-tolstoy-reference.txt", getenv("CORRAL_FIXTURES"));
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    static char buf[8192];
    size_t len = fread(buf, 1, sizeof buf - 1, f);
    buf[len] = '\0';
    fclose(f);
    char header[32];
    snprintf(header, sizeof header, "[case %d]", case_no);
    const char *p = strstr(strstr(buf, header), "\ntext: \"") + 8;
    size_t o = 0;
    for (; *p && *p != '"' && o + 1 < size; p++) {
        if (*p == '\\') {
            p++;
            out[o++] = *p == 'n' ? '\n' : *p;
        } else {
            out[o++] = *p;
        }
    }
    out[o] = '\0';
}

static void test_cli_infer_greedy_text_matches_reference(void **state)
{
    (void)state;
    int status;
    char *out = infer("tiny-tolstoy-f32.gguf 'Natasha looked at him and' -n 48 --temperature 0 "
                      "--kv f32", &status);
    assert_int_equal(status, 0);
    char want[4096];
    reference_text(4, want, sizeof want);
    strcat(want, "\n");
    assert_string_equal(out, want);
    free(out);
}

static void test_cli_infer_ids_and_prompt_ids(void **state)
{
    (void)state;
    int status;
    char *out = infer("tiny-tolstoy-f32.gguf Pierre -n 8 --temperature 0 --kv f32 --ids", &status);
    assert_int_equal(status, 0);
    assert_string_equal(out, "prompt_ids: 1 442\ngenerated_ids: 318 1595 1989 13 1992 1994 594 335\n");
    free(out);
    out = infer("tiny-tolstoy-f32.gguf --prompt-ids 1,442 -n 8 --temperature 0 --kv f32 --ids",
                &status);
    assert_int_equal(status, 0);
    assert_string_equal(out, "prompt_ids: 1 442\ngenerated_ids: 318 1595 1989 13 1992 1994 594 335\n");
    free(out);
    /* a prompt that writes the BOS itself starts with it once, as the server's prompts do */
    out = infer("tiny-tolstoy-f32.gguf '<s>Pierre' -n 0 --kv f32 --ids", &status);
    assert_int_equal(status, 0);
    assert_string_equal(out, "prompt_ids: 1 442\ngenerated_ids:\n");
    free(out);
}

static void test_cli_infer_logits_match_reference(void **state)
{
    (void)state;
    int status;
    char *out = infer("stories260K.gguf --prompt-ids 1,403,407,261,378 -n 0 --kv f32 --logits",
                      &status);
    assert_int_equal(status, 0);
    char path[2048];
    snprintf(path, sizeof path, "%s/stories260K-logits-case1.txt", getenv("CORRAL_FIXTURES"));
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char line[256];
    const char *p = out;
    int n = 0;
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#')
            continue;
        char *end;
        float got = strtof(p, &end);
        assert_true(end != p);
        p = end;
        assert_true(fabsf(got - strtof(line, NULL)) <= 1e-4f);
        n++;
    }
    fclose(f);
    assert_int_equal(n, 512);
    free(out);
}

static void test_cli_infer_fixed_seed_repeats(void **state)
{
    (void)state;
    int status;
    const char *args = "tiny-tolstoy-f16.gguf 'The prince' -n 40 --seed 42 --temperature 1.0";
    char *a = infer(args, &status);
    assert_int_equal(status, 0);
    char *b = infer(args, &status);
    assert_string_equal(a, b);
    assert_true(strlen(a) > 40);
    free(a);
    free(b);
}

/* ---- model families: arch/<name>.ref.txt (llama.cpp, F32 KV cache) through the CLI ---- */

/* The families checked here, one a line, with arch/README.md's tolerance on the logits:
 * float32 rounding only, but starcoder2's and gemma4's GELU goes through ggml's fp16 table. */
static const struct {
    const char *name;
    double tolerance;
} families[] = {
    {"granite", 1e-4},
    {"olmo2", 1e-4},
    {"smollm3", 1e-4},
    {"mistral3", 1e-4},
    {"starcoder2", 2e-3},
    {"cohere2", 1e-4},
    {"exaone4", 1e-4},
    {"glm4", 1e-4},
    {"qwen3moe", 1e-4},
    {"llama-moe", 1e-4},
    {"granitemoe", 1e-4},
    {"deepseek2", 1e-4},
    {"gpt-oss", 1e-4},
    {"gpt-oss-mxfp4", 1e-4},
    {"gemma4", 3e-3},
    {"gemma4-e", 3e-3},
    {"gemma4-moe", 3e-3},
    {"gemma", 3e-3},
    {"command-r", 1e-4},
    {"exaone", 1e-4},
    {"olmo3", 1e-4},
    {"command-r-plus", 1e-4},
    {"qwen35", 1e-4},
    {"phi2", 2e-3},
    {"stablelm", 1e-4},
    {"stablelm-parallel", 1e-4},
    {"qwen2moe", 1e-4},
    {"phi3-longrope", 1e-4}, /* infer's context of 4096 picks the long factors */
    {"qwen35moe", 1e-4},
    {"granitehybrid", 1e-4},
    {"granitehybrid-moe", 1e-4},
    {"glm4moe", 1e-4},
    {"qwen3next", 1e-4},
    {"nemotron-h", 1e-4},
    {"nemotron-h-moe", 1e-4},
    {"lfm2", 1e-4},
    {"qwen3vl", 1e-4},
    {"qwen3vlmoe", 1e-4},
    {"chatglm", 1e-4},
    {"internlm2", 1e-4},
    {"llama4", 1e-4},
    {"starcoder", 2e-3},
    {"falcon", 2e-3},
    {"falcon-40b", 2e-3},
    {"nemotron", 1e-4},
    {"lfm2moe", 1e-4},
    {"gemma3n", 3e-3},
    {"laguna", 1e-4},
    {"deepseek2-ocr", 1e-4},
};

/* The dispatch levels, each with the one the CPU must have to run it (a level it lacks would
 * run at a lower one, a repeat: skipped). */
static const struct {
    const char *name;
    enum cpu_level needs;
} cpu_levels[] = {{"scalar", CPU_LEVEL_SCALAR},
                  {"avx2", CPU_LEVEL_AVX2},
                  {"avx512-novnni", CPU_LEVEL_AVX512},
                  {"avx512", CPU_LEVEL_AVX512}};

/* The values of a one-line "key N v1 ... vN" record of a reference, N of at most max. */
static size_t reference_values(const char *text, const char *key, double *out, size_t max)
{
    char header[64];
    snprintf(header, sizeof header, "\n%s ", key);
    const char *p = strstr(text, header);
    if (!p)
        fail_msg("no '%s' line in the reference", key);
    char *end;
    size_t n = strtoul(p + strlen(header), &end, 10);
    assert_true(n <= max);
    p = end;
    for (size_t i = 0; i < n; i++) {
        out[i] = strtod(p, &end);
        assert_true(end != p);
        p = end;
    }
    return n;
}

/* `corral infer` at a CPU level, from the fixtures folder. */
static char *infer_at(const char *level, const char *args, int *status)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "cd '%s' && CORRAL_CPU=%s '%s' infer %s 2>/dev/null",
             getenv("CORRAL_FIXTURES"), level, getenv("CORRAL_BIN"), args);
    return command_fixture_run(cmd, status);
}

/* Greedy ids (--ids) and last-position logits (--logits) of each family's reference input
 * equal llama.cpp's, at every CPU level the CPU has. */
static void test_cli_infer_families_match_llama_cpp(void **state)
{
    (void)state;
    for (size_t f = 0; f < sizeof families / sizeof families[0]; f++) {
        char path[2048];
        snprintf(path, sizeof path, "%s/arch/%s.ref.txt", getenv("CORRAL_FIXTURES"), families[f].name);
        FILE *file = fopen(path, "r");
        assert_non_null(file);
        static char text[1 << 20];
        size_t len = fread(text, 1, sizeof text - 1, file);
        assert_true(len < sizeof text - 1);
        text[len] = '\0';
        fclose(file);
        int status;
        double input[64], greedy[16], logits[4096];
        size_t n_input = reference_values(text, "input_ids", input, 64);
        assert_int_equal(reference_values(text, "greedy_ids", greedy, 16), 16);
        size_t n_vocab = reference_values(text, "last_logits", logits, 4096);
        char ids[512] = "", want[512] = "";
        for (size_t i = 0; i < n_input; i++)
            snprintf(ids + strlen(ids), sizeof ids - strlen(ids), "%s%d", i ? "," : "",
                     (int)input[i]);
        snprintf(want, sizeof want, "prompt_ids:");
        for (size_t i = 0; i < n_input; i++)
            snprintf(want + strlen(want), sizeof want - strlen(want), " %d", (int)input[i]);
        snprintf(want + strlen(want), sizeof want - strlen(want), "\ngenerated_ids:");
        for (size_t i = 0; i < 16; i++)
            snprintf(want + strlen(want), sizeof want - strlen(want), " %d", (int)greedy[i]);
        strcat(want, "\n");
        /* short runs (short_fixture.h): at the CPU's own level only, since test_forward
         * checks each family at scalar too */
        size_t n_levels = 0;
        while (n_levels < sizeof cpu_levels / sizeof cpu_levels[0] &&
               cpu_levels[n_levels].needs <= cpu_detected_level())
            n_levels++;
        for (size_t l = short_fixture_on() ? n_levels - 1 : 0; l < n_levels; l++) {
            char args[1024];
            snprintf(args, sizeof args,
                     "arch/%s.gguf --prompt-ids %s -n 16 --temperature 0 --kv f32 --ids",
                     families[f].name, ids);
            char *out = infer_at(cpu_levels[l].name, args, &status);
            assert_int_equal(status, 0);
            if (strcmp(out, want) != 0)
                fail_msg("%s at %s: '%s', llama.cpp '%s'", families[f].name, cpu_levels[l].name, out, want);
            free(out);
            snprintf(args, sizeof args, "arch/%s.gguf --prompt-ids %s -n 0 --kv f32 --logits",
                     families[f].name, ids);
            out = infer_at(cpu_levels[l].name, args, &status);
            assert_int_equal(status, 0);
            const char *p = out;
            for (size_t i = 0; i < n_vocab; i++) {
                char *end;
                double got = strtod(p, &end);
                if (end == p)
                    fail_msg("%s at %s: %zu logits printed, %zu expected", families[f].name,
                             cpu_levels[l].name, i, n_vocab);
                if (fabs(got - logits[i]) > families[f].tolerance)
                    fail_msg("%s at %s: logit %zu is %.9g, llama.cpp %.9g", families[f].name,
                             cpu_levels[l].name, i, got, logits[i]);
                p = end;
            }
            char *end;
            strtod(p, &end);
            assert_true(end == p); /* nothing more */
            free(out);
        }
    }
}

/* A GBNF file with text; its path (static). */
static const char *grammar_file(const char *text)
{
    static char path[64];
    snprintf(path, sizeof path, "/tmp/corral-grammar-XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    return path;
}

static void test_cli_infer_grammar_shapes_the_text(void **state)
{
    (void)state;
    const char *path =
        grammar_file("root ::= \" \" (\"yes\" | \"no\") \", \" [a-z]{1,10} \" \" [a-z]{1,10}\n");
    regex_t shape;
    assert_int_equal(regcomp(&shape, "^ (yes|no), [a-z]{1,10} [a-z]{1,10}\n$", REG_EXTENDED), 0);
    const char *sampling[] = {"--temperature 0", "--temperature 1 --seed 5"};
    for (size_t i = 0; i < 2; i++) {
        char args[512];
        snprintf(args, sizeof args, "tiny-tolstoy-f16.gguf 'The prince' -n 60 %s --grammar %s",
                 sampling[i], path);
        int status;
        char *out = infer(args, &status);
        assert_int_equal(status, 0);
        if (regexec(&shape, out, 0, NULL, 0) != 0)
            fail_msg("not the grammar's text: '%s'", out);
        free(out);
    }
    regfree(&shape);
    unlink(path);
    path = grammar_file("root ::= \"a\" | b\n");
    char args[512];
    snprintf(args, sizeof args, "tiny-tolstoy-f16.gguf hi --grammar %s", path);
    int status;
    free(infer(args, &status));
    assert_int_equal(status, 1); /* undefined rule 'b' */
    unlink(path);
}

static void test_cli_infer_reports_bad_input(void **state)
{
    (void)state;
    int status;
    free(infer("missing.gguf hello", &status));
    assert_int_equal(status, 1);
    free(infer("stories260K.gguf hello --top-k many", &status));
    assert_int_equal(status, 2);
    free(infer("stories260K.gguf --prompt-ids 1,99999 -n 1", &status));
    assert_int_equal(status, 1);
    free(infer("stories260K.gguf hello --cpu quantum", &status));
    assert_int_equal(status, 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cli_infer_greedy_text_matches_reference),
        cmocka_unit_test(test_cli_infer_ids_and_prompt_ids),
        cmocka_unit_test(test_cli_infer_logits_match_reference),
        cmocka_unit_test(test_cli_infer_families_match_llama_cpp),
        cmocka_unit_test(test_cli_infer_fixed_seed_repeats),
        cmocka_unit_test(test_cli_infer_grammar_shapes_the_text),
        cmocka_unit_test(test_cli_infer_reports_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

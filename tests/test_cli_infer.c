/*
 * `corral infer` end to end, as a user runs it: greedy text equals the tiny-tolstoy
 * reference text, --ids and --prompt-ids give the reference ids, --logits prints the
 * reference logits (also llama.cpp's for the mixture-of-experts families), a fixed seed
 * repeats itself, --grammar shapes the text, and bad input
 * gets a message and status 1/2.
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

/* The numbers after "key N" on the line of an arch reference that starts with key. */
static size_t reference_numbers(const char *text, const char *key, double *out, size_t max)
{
    const char *line = strstr(text, key);
    while (line && line != text && line[-1] != '\n')
        line = strstr(line + 1, key);
    assert_non_null(line);
    char *p = (char *)line + strlen(key);
    size_t n = (size_t)strtoul(p, &p, 10);
    assert_true(n <= max);
    for (size_t i = 0; i < n; i++)
        out[i] = strtod(p, &p);
    return n;
}

/* The mixture-of-experts families through the command, as a user checks a model against
 * llama.cpp: the greedy ids of the reference input, and its last logits within the
 * references' float32 tolerance (1e-4). */
static void test_cli_infer_moe_families_match_llama_cpp(void **state)
{
    (void)state;
    const char *names[] = {"qwen3moe", "llama-moe", "granitemoe"};
    for (size_t m = 0; m < 3; m++) {
        char path[2048];
        snprintf(path, sizeof path, "%s/arch/%s.ref.txt", getenv("CORRAL_FIXTURES"), names[m]);
        FILE *f = fopen(path, "r");
        assert_non_null(f);
        static char text[1 << 20];
        text[fread(text, 1, sizeof text - 1, f)] = '\0';
        fclose(f);
        double input[64], greedy[16], logits[1024];
        size_t n_input = reference_numbers(text, "input_ids ", input, 64);
        assert_int_equal(reference_numbers(text, "greedy_ids ", greedy, 16), 16);
        size_t n_vocab = reference_numbers(text, "last_logits ", logits, 1024);
        char ids[512] = "", spaced[512] = "", want[1024];
        for (size_t i = 0; i < n_input; i++) {
            snprintf(ids + strlen(ids), sizeof ids - strlen(ids), "%s%d", i ? "," : "",
                     (int)input[i]);
            snprintf(spaced + strlen(spaced), sizeof spaced - strlen(spaced), " %d",
                     (int)input[i]);
        }
        int len = snprintf(want, sizeof want, "prompt_ids:%s\ngenerated_ids:", spaced);
        for (size_t i = 0; i < 16; i++)
            len += snprintf(want + len, sizeof want - (size_t)len, " %d", (int)greedy[i]);
        snprintf(want + len, sizeof want - (size_t)len, "\n");
        char args[1024];
        snprintf(args, sizeof args, "arch/%s.gguf --prompt-ids %s -n 16 --temperature 0 --kv f32 --ids",
                 names[m], ids);
        int status;
        char *out = infer(args, &status);
        assert_int_equal(status, 0);
        assert_string_equal(out, want);
        free(out);
        snprintf(args, sizeof args, "arch/%s.gguf --prompt-ids %s -n 0 --kv f32 --logits",
                 names[m], ids);
        out = infer(args, &status);
        assert_int_equal(status, 0);
        char *p = out;
        for (size_t i = 0; i < n_vocab; i++) {
            char *end;
            double got = strtod(p, &end);
            assert_true(end != p);
            p = end;
            if (fabs(got - logits[i]) > 1e-4)
                fail_msg("%s: logit %zu is %g, llama.cpp %g", names[m], i, got, logits[i]);
        }
        free(out);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cli_infer_greedy_text_matches_reference),
        cmocka_unit_test(test_cli_infer_ids_and_prompt_ids),
        cmocka_unit_test(test_cli_infer_logits_match_reference),
        cmocka_unit_test(test_cli_infer_fixed_seed_repeats),
        cmocka_unit_test(test_cli_infer_grammar_shapes_the_text),
        cmocka_unit_test(test_cli_infer_reports_bad_input),
        cmocka_unit_test(test_cli_infer_moe_families_match_llama_cpp),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

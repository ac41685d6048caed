/*
 * `corral infer` end to end, as a user runs it: greedy text equals the tiny-tolstoy
 * reference text, --ids and --prompt-ids give the reference ids, --logits prints the
 * reference logits (also llama.cpp's greedy ids and logits of the arch/ models of starcoder2,
 * cohere2, exaone4 and glm4 at every CPU level), a fixed seed repeats itself, --grammar shapes
 * the text, and bad input gets a message and status 1/2.
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

/* The line of an arch/ reference that starts with "key " (static), without the key. */
static const char *reference_line(const char *name, const char *key)
{
    char path[2048];
    snprintf(path, sizeof path, "%s/arch/%s.ref.txt", getenv("CORRAL_FIXTURES"), name);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    static char line[65536];
    size_t key_len = strlen(key);
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, key, key_len) == 0 && line[key_len] == ' ') {
            fclose(f);
            return line + key_len + 1;
        }
    }
    fclose(f);
    fail_msg("%s: no %s line", name, key);
    return NULL;
}

/* After the count that starts a reference line, the values as they are: "a b c". */
static const char *after_count(const char *values)
{
    const char *p = strchr(values, ' ');
    assert_non_null(p);
    return p + 1;
}

/*
 * The families added with their arch/ references: `corral infer --prompt-ids` on the
 * reference input gives llama.cpp's 16 greedy ids and its last-position logits, at every CPU
 * level (tolerances of arch/README.md: starcoder2's GELU goes through ggml's fp16 table).
 */
static void test_cli_infer_arch_families_match_llama_cpp(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        float tolerance;
    } families[] = {{"starcoder2", 2e-3f}, {"cohere2", 1e-4f}, {"exaone4", 1e-4f}, {"glm4", 1e-4f}};
    static const char *const levels[] = {"scalar", "avx2", "avx512-novnni", "avx512"};
    for (size_t f = 0; f < sizeof families / sizeof families[0]; f++) {
        const char *name = families[f].name;
        char prompt[1024];
        snprintf(prompt, sizeof prompt, "%s", after_count(reference_line(name, "input_ids")));
        prompt[strcspn(prompt, "\n")] = '\0';
        for (char *c = prompt; *c; c++)
            *c = *c == ' ' ? ',' : *c;
        char want_ids[1024];
        snprintf(want_ids, sizeof want_ids, "%s", after_count(reference_line(name, "greedy_ids")));
        for (size_t l = 0; l < sizeof levels / sizeof levels[0]; l++) {
            char args[2048];
            snprintf(args, sizeof args,
                     "arch/%s.gguf --prompt-ids %s -n 16 --temperature 0 --kv f32 --ids --cpu %s",
                     name, prompt, levels[l]);
            int status;
            char *out = infer(args, &status);
            assert_int_equal(status, 0);
            const char *got = strstr(out, "generated_ids: ");
            assert_non_null(got);
            got += strlen("generated_ids: ");
            if (strcmp(got, want_ids) != 0)
                fail_msg("%s at %s: generated_ids %s, llama.cpp %s", name, levels[l], got, want_ids);
            free(out);

            snprintf(args, sizeof args, "arch/%s.gguf --prompt-ids %s -n 0 --kv f32 --logits --cpu %s",
                     name, prompt, levels[l]);
            out = infer(args, &status);
            assert_int_equal(status, 0);
            const char *want = reference_line(name, "last_logits");
            size_t n_vocab = strtoul(want, NULL, 10), n = 0;
            want = after_count(want);
            const char *p = out;
            for (; n < n_vocab; n++) {
                char *end_got, *end_want;
                float g = strtof(p, &end_got), w = strtof(want, &end_want);
                assert_true(end_got != p && end_want != want);
                if (fabsf(g - w) > families[f].tolerance)
                    fail_msg("%s at %s: logit %zu is %g, llama.cpp %g", name, levels[l], n, g, w);
                p = end_got;
                want = end_want;
            }
            assert_int_equal(strspn(p, " \n"), strlen(p)); /* no more logits than the vocabulary */
            free(out);
        }
    }
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cli_infer_greedy_text_matches_reference),
        cmocka_unit_test(test_cli_infer_ids_and_prompt_ids),
        cmocka_unit_test(test_cli_infer_logits_match_reference),
        cmocka_unit_test(test_cli_infer_arch_families_match_llama_cpp),
        cmocka_unit_test(test_cli_infer_fixed_seed_repeats),
        cmocka_unit_test(test_cli_infer_grammar_shapes_the_text),
        cmocka_unit_test(test_cli_infer_reports_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

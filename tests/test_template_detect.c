/*
 * Built-in template auto-detection: every real Jinja template of
 * templates/testdata/templates.jsonl is detected as the built-in it is labelled with, using
 * templates/index.json and with the index embedded in the binary, the embedded built-ins
 * carry their stop strings, and unrelated or hostile input matches nothing, quickly.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "template/template.h"

static json_t *load_index(void)
{
    const char *dir = getenv("CORRAL_FIXTURES");
    char path[1024];
    snprintf(path, sizeof path, "%s/templates/index.json", dir ? dir : "tests/fixtures");
    json_t *index = json_load_file(path, 0, NULL);
    assert_non_null(index);
    return index;
}

static void test_every_real_template_is_detected_as_its_named_builtin(void **state)
{
    (void)state;
    json_t *index = load_index();
    const char *dir = getenv("CORRAL_FIXTURES");
    char path[1024];
    snprintf(path, sizeof path, "%s/templates/testdata/templates.jsonl",
             dir ? dir : "tests/fixtures");
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char *line = malloc(1 << 20);
    assert_non_null(line);
    int checked = 0;
    while (fgets(line, 1 << 20, f)) {
        json_t *entry = json_loads(line, 0, NULL);
        assert_non_null(entry);
        const char *want;
        json_t *src;
        json_object_foreach(entry, want, src)
        {
            const char *got =
                corral_template_detect(index, json_string_value(src), json_string_length(src));
            if (!got || strcmp(got, want) != 0)
                fail_msg("template %d: detected %s, want %s", checked + 1, got ? got : "(none)",
                         want);
            char builtin[64];
            assert_true(corral_builtin_template_detect(
                json_string_value(src), json_string_length(src), builtin, sizeof builtin));
            assert_string_equal(builtin, want);
            checked++;
        }
        json_decref(entry);
    }
    free(line);
    fclose(f);
    assert_int_equal(checked, 35);
    json_decref(index);
}

static void test_unrelated_or_huge_input_matches_nothing(void **state)
{
    (void)state;
    json_t *index = load_index();
    const char *other = "{% for m in messages %}<<{{ m.content }}>>{% endfor %}";
    assert_null(corral_template_detect(index, other, strlen(other)));
    assert_null(corral_template_detect(index, "", 0));
    size_t n = 4u << 20;
    char *huge = malloc(n);
    assert_non_null(huge);
    memset(huge, 'x', n);
    assert_null(corral_template_detect(index, huge, n));
    free(huge);
    json_decref(index);
}

static void test_embedded_builtins_carry_source_and_stop_strings(void **state)
{
    (void)state;
    const char *names[] = {"chatml", "llama3-instruct", "gemma3-instruct", "zephyr", "command-r"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const char *src;
        size_t len;
        json_t *params;
        assert_true(corral_builtin_template(names[i], &src, &len, &params));
        assert_int_equal(strlen(src), len);
        assert_true(json_array_size(json_object_get(params, "stop")) > 0);
        corral_error err = {{0}};
        corral_template *tmpl = corral_template_parse_ollama(src, len, &err);
        assert_non_null(tmpl);
        corral_template_free(tmpl);
        json_decref(params);
    }
    const char *src;
    size_t len;
    assert_false(corral_builtin_template("no-such-template", &src, &len, NULL));
    assert_false(corral_builtin_template("index", &src, &len, NULL));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_real_template_is_detected_as_its_named_builtin),
        cmocka_unit_test(test_unrelated_or_huge_input_matches_nothing),
        cmocka_unit_test(test_embedded_builtins_carry_source_and_stop_strings),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

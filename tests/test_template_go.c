/*
 * Go text/template engine and ollama's rendering rules: every built-in template of
 * fixtures/templates renders the README's three conversations byte for byte, and the
 * language features and sandbox limits behave as Go's text/template and ollama's renderer do.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <dirent.h>

#include "file_fixture.h"
#include "template/template.h"

static const char *fixtures(void)
{
    const char *dir = getenv("CORRAL_FIXTURES");
    return dir ? dir : "tests/fixtures";
}

static json_t *conversation(const char *roles)
{
    json_t *messages = json_array();
    if (strstr(roles, "system"))
        json_array_append_new(messages, json_pack("{ssss}", "role", "system", "content",
                                                  "You are a helpful assistant."));
    json_array_append_new(messages,
                          json_pack("{ssss}", "role", "user", "content", "Hello, how are you?"));
    if (strstr(roles, "assistant")) {
        json_array_append_new(messages, json_pack("{ssss}", "role", "assistant", "content",
                                                  "I'm doing great. How can I help you today?"));
        json_array_append_new(messages,
                              json_pack("{ssss}", "role", "user", "content",
                                        "I'd like to show off how chat templating works!"));
    }
    return json_pack("{so}", "messages", messages);
}

/* Render src over request through the chat path; NULL on error (message in err). */
static char *render_chat(const char *src, json_t *request, corral_error *err)
{
    corral_template *tmpl = corral_template_parse_ollama(src, strlen(src), err);
    if (!tmpl)
        return NULL;
    size_t len;
    char *out = corral_template_render_chat(tmpl, request, NULL, &len, err);
    corral_template_free(tmpl);
    return out;
}

/* Render src with data as the dot. */
static char *render(const char *src, const char *data_json, const corral_template_limits *limits,
                    corral_error *err)
{
    corral_template *tmpl = corral_template_parse(CORRAL_TEMPLATE_GO, src, strlen(src), err);
    if (!tmpl)
        return NULL;
    json_t *data = data_json ? json_loads(data_json, 0, NULL) : json_object();
    assert_non_null(data);
    size_t len;
    char *out = corral_template_render(tmpl, data, limits, &len, err);
    json_decref(data);
    corral_template_free(tmpl);
    return out;
}

static void expect_render(const char *src, const char *data_json, const char *expected)
{
    corral_error err = {{0}};
    char *out = render(src, data_json, NULL, &err);
    if (!out)
        fail_msg("render of %s failed: %s", src, err.message);
    assert_string_equal(out, expected);
    free(out);
}

static void expect_error(const char *src, const char *data_json, const char *fragment)
{
    corral_error err = {{0}};
    char *out = render(src, data_json, NULL, &err);
    if (out)
        fail_msg("render of %s should fail but gave '%s'", src, out);
    if (!strstr(err.message, fragment))
        fail_msg("error '%s' lacks '%s'", err.message, fragment);
}

static void test_builtin_templates_render_the_three_readme_cases_exactly(void **state)
{
    (void)state;
    char dir_path[1024];
    snprintf(dir_path, sizeof dir_path, "%s/templates", fixtures());
    DIR *dir = opendir(dir_path);
    assert_non_null(dir);
    static const char *const cases[] = {"user", "user-assistant-user",
                                        "system-user-assistant-user"};
    int checked = 0;
    struct dirent *entry;
    while ((entry = readdir(dir))) {
        size_t n = strlen(entry->d_name);
        if (n < 7 || strcmp(entry->d_name + n - 7, ".gotmpl") != 0)
            continue;
        char path[2048];
        size_t src_len;
        snprintf(path, sizeof path, "%s/%s", dir_path, entry->d_name);
        char *src = file_fixture_read(path, &src_len);
        for (size_t c = 0; c < 3; c++) {
            snprintf(path, sizeof path, "%s/testdata/%s/%s", dir_path, entry->d_name, cases[c]);
            size_t expected_len;
            char *expected = file_fixture_read(path, &expected_len);
            json_t *request = conversation(cases[c]);
            corral_error err = {{0}};
            char *out = render_chat(src, request, &err);
            if (!out)
                fail_msg("%s/%s: %s", entry->d_name, cases[c], err.message);
            if (strcmp(out, expected) != 0)
                fail_msg("%s/%s:\n--- got ---\n%s\n--- want ---\n%s", entry->d_name, cases[c], out,
                         expected);
            free(out);
            free(expected);
            json_decref(request);
            checked++;
        }
        free(src);
    }
    closedir(dir);
    assert_int_equal(checked, 20 * 3);
}

static void test_trim_markers_remove_whitespace_on_their_side_only(void **state)
{
    (void)state;
    expect_render("a  {{- \"b\" -}}  \n c", NULL, "abc");
    expect_render("a  {{ \"b\" -}}  c", NULL, "a  bc");
    expect_render("x {{- /* note */ -}} y", NULL, "xy");
    expect_render("{{/* only a comment */}}z", NULL, "z");
}

static void test_variables_declare_assign_and_scope_to_end(void **state)
{
    (void)state;
    expect_render("{{ $x := 1 }}{{ if true }}{{ $x = 2 }}{{ $y := 3 }}{{ end }}{{ $x }}", NULL,
                  "2");
    expect_error("{{ if true }}{{ $y := 3 }}{{ end }}{{ $y }}", NULL, "undefined variable");
    expect_render("{{ range $i, $m := .L }}{{ $i }}={{ $m }};{{ end }}", "{\"L\":[\"a\",\"b\"]}",
                  "0=a;1=b;");
    expect_render("{{ range .L }}{{ $.T }}{{ . }}{{ end }}", "{\"L\":[1,2],\"T\":\"t\"}", "t1t2");
}

static void test_range_walks_maps_in_key_order_and_runs_else_when_empty(void **state)
{
    (void)state;
    expect_render("{{ range $k, $v := .M }}{{ $k }}:{{ $v }} {{ end }}",
                  "{\"M\":{\"b\":2,\"a\":1}}", "a:1 b:2 ");
    expect_render("{{ range .L }}x{{ else }}empty{{ end }}", "{\"L\":[]}", "empty");
    expect_render("{{ range .Missing }}x{{ else }}none{{ end }}", NULL, "none");
    expect_render("{{ range .L }}{{ if eq . 2 }}{{ continue }}{{ end }}{{ if eq . 4 }}{{ break }}"
                  "{{ end }}{{ . }}{{ end }}",
                  "{\"L\":[1,2,3,4,5]}", "13");
}

static void test_if_else_if_with_and_logic_functions(void **state)
{
    (void)state;
    const char *src =
        "{{ if eq .R \"a\" }}A{{ else if eq .R \"b\" \"c\" }}BC{{ else }}other{{ end }}";
    expect_render(src, "{\"R\":\"a\"}", "A");
    expect_render(src, "{\"R\":\"c\"}", "BC");
    expect_render(src, "{\"R\":\"z\"}", "other");
    expect_render("{{ with .F }}{{ .Name }}{{ else }}no{{ end }}", "{\"F\":{\"Name\":\"n\"}}", "n");
    expect_render("{{ with .F }}{{ .Name }}{{ else }}no{{ end }}", NULL, "no");
    expect_render("{{ and 1 0 2 }} {{ or 0 \"\" \"x\" }} {{ not .Missing }}", NULL, "0 x true");
    /* and/or stop at the deciding operand: the index error is never evaluated */
    expect_render("{{ or true (index .L 9) }}", "{\"L\":[]}", "true");
    expect_render("{{ lt 1 2 }}{{ le 2 2 }}{{ gt 1 2 }}{{ ge \"b\" \"a\" }}{{ ne 1 2 }}", NULL,
                  "truetruefalsetruetrue");
}

static void test_len_index_slice_and_printing_functions(void **state)
{
    (void)state;
    const char *data = "{\"L\":[\"a\",\"b\",\"c\"],\"M\":{\"k\":\"v\"},\"S\":\"hello\"}";
    expect_render("{{ len .L }} {{ len .S }} {{ index .L 1 }} {{ index .M \"k\" }}", data,
                  "3 5 b v");
    expect_render("{{ len (slice .L 1) }} {{ slice .S 1 3 }}", data, "2 el");
    expect_render("{{ printf \"%s-%d-%v-%q|%5s|%-3d|\" \"a\" 7 true \"q\\n\" \"r\" 4 }}", NULL,
                  "a-7-true-\"q\\n\"|    r|4  |");
    expect_render("{{ print \"a\" 1 2 \"b\" }}", NULL, "a1 2b");
    expect_render("{{ .S | printf \"%s!\" }}", data, "hello!");
    expect_render("{{ json .M }} {{ json \"<&>\" }}", data,
                  "{\"k\":\"v\"} \"\\u003c\\u0026\\u003e\"");
    expect_render("{{ 1.5 }} {{ 1e6 }} {{ 0x10 }} {{ 'a' }}", NULL, "1.5 1e+06 16 97");
    expect_error("{{ index .L 5 }}", data, "index out of range");
}

static void test_missing_keys_render_as_zero_values(void **state)
{
    (void)state;
    expect_render("[{{ .Nope }}][{{ .A.B.C }}][{{ if .Nope }}x{{ end }}][{{ eq .Nope \"\" }}]",
                  NULL, "[][][][true]");
}

static void test_fields_fall_back_to_ollama_json_names(void **state)
{
    (void)state;
    expect_render("{{ range .Messages }}{{ .Role }}:{{ range .ToolCalls }}{{ .Function.Name }}"
                  "{{ .Function.Arguments }}{{ end }}{{ .ToolCallID }}{{ end }}",
                  "{\"Messages\":[{\"role\":\"assistant\",\"tool_calls\":[{\"function\":{\"name\":"
                  "\"f\",\"arguments\":{\"x\":1}}}]},{\"role\":\"tool\",\"tool_call_id\":\"c1\"}]}",
                  "assistant:f{\"x\":1}tool:c1");
}

static void test_define_and_template_run_named_templates(void **state)
{
    (void)state;
    expect_render("{{ define \"t\" }}<{{ . }}>{{ end }}{{ template \"t\" \"x\" }}", NULL, "<x>");
    expect_render("{{ block \"b\" . }}[{{ .V }}]{{ end }}", "{\"V\":1}", "[1]");
}

static void test_parse_errors_name_line_and_column(void **state)
{
    (void)state;
    corral_error err = {{0}};
    const char *bad[] = {"a\n{{ if .X }}",       "{{ nosuchfunc 1 }}", "{{ end }}",  "{{ .X ",
                         "{{ \"unterminated }}", "{{ else }}",         "{{ break }}"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        corral_template *t =
            corral_template_parse(CORRAL_TEMPLATE_GO, bad[i], strlen(bad[i]), &err);
        if (t)
            fail_msg("'%s' should not parse", bad[i]);
        assert_non_null(strstr(err.message, "line "));
    }
    corral_template_parse(CORRAL_TEMPLATE_GO, "a\n{{ if .X }}", 12, &err);
    assert_non_null(strstr(err.message, "line 2, column 1"));
}

static void test_legacy_template_runs_per_turn_and_leaves_last_turn_open(void **state)
{
    (void)state;
    const char *src = "{{ if .System }}S:{{ .System }}\n{{ end }}{{ if .Prompt }}U:{{ .Prompt }}\n"
                      "{{ end }}A:{{ .Response }}<end>\n";
    json_t *request = conversation("system-user-assistant-user");
    corral_error err = {{0}};
    char *out = render_chat(src, request, &err);
    assert_non_null(out);
    assert_string_equal(out, "S:You are a helpful assistant.\nU:Hello, how are you?\n"
                             "A:I'm doing great. How can I help you today?<end>\n"
                             "U:I'd like to show off how chat templating works!\nA:");
    free(out);
    json_decref(request);
}

static void test_template_without_response_gets_one_appended(void **state)
{
    (void)state;
    json_t *request = json_pack("{ss}", "prompt", "hi");
    corral_error err = {{0}};
    char *out = render_chat("Q: {{ .Prompt }} ", request, &err);
    assert_non_null(out);
    assert_string_equal(out, "Q: hi ");
    free(out);
    json_decref(request);
}

static void test_fill_in_the_middle_supplies_prompt_and_suffix(void **state)
{
    (void)state;
    json_t *request = json_pack("{ssss}", "prompt", "def f(", "suffix", "return x");
    corral_error err = {{0}};
    char *out = render_chat("<PRE>{{ .Prompt }}<SUF>{{ .Suffix }}<MID>", request, &err);
    assert_non_null(out);
    assert_string_equal(out, "<PRE>def f(<SUF>return x<MID>");
    free(out);
    json_decref(request);
}

static void test_consecutive_same_role_messages_are_merged_and_system_joined(void **state)
{
    (void)state;
    json_t *request = json_loads(
        "{\"messages\":[{\"role\":\"system\",\"content\":\"s1\"},{\"role\":\"system\",\"content\":"
        "\"s2\"},{\"role\":\"user\",\"content\":\"a\"},{\"role\":\"user\",\"content\":\"b\"},"
        "{\"role\":\"tool\",\"content\":\"t1\"},{\"role\":\"tool\",\"content\":\"t2\"}]}",
        0, NULL);
    corral_error err = {{0}};
    char *out = render_chat(
        "[{{ .System }}]{{ range .Messages }}({{ .Role }}:{{ .Content }}){{ end }}", request, &err);
    assert_non_null(out);
    assert_string_equal(out, "[s1\n\ns2](system:s1\n\ns2)(user:a\n\nb)(tool:t1)(tool:t2)");
    free(out);
    json_decref(request);
}

static void test_images_are_numbered_across_the_request(void **state)
{
    (void)state;
    json_t *request = json_loads(
        "{\"messages\":[{\"role\":\"user\",\"content\":\"look\",\"images\":[\"AA\",\"BB\"]},"
        "{\"role\":\"assistant\",\"content\":\"ok\"},{\"role\":\"user\",\"content\":"
        "\"and [img] here\",\"images\":[\"CC\"]}]}",
        0, NULL);
    assert_non_null(request);
    corral_error err = {{0}};
    char *out = render_chat("{{ range .Messages }}{{ .Content }}|{{ end }}", request, &err);
    assert_non_null(out);
    assert_string_equal(out, "[img-0][img-1]look|ok|and [img-2] here|");
    free(out);
    json_decref(request);
}

static void test_recursive_template_stops_at_the_depth_limit(void **state)
{
    (void)state;
    expect_error("{{ define \"r\" }}x{{ template \"r\" . }}{{ end }}{{ template \"r\" . }}", NULL,
                 "nesting deeper");
}

static void test_exponential_template_stops_at_the_output_or_step_limit(void **state)
{
    (void)state;
    /* each level calls the one below twice: 2^40 copies of "xxxxxxxx" */
    char src[8192] = "{{ define \"t0\" }}xxxxxxxx{{ end }}";
    for (int i = 1; i <= 40; i++) {
        char def[128];
        snprintf(def, sizeof def,
                 "{{ define \"t%d\" }}{{ template \"t%d\" }}{{ template \"t%d\" }}{{ end }}", i,
                 i - 1, i - 1);
        strcat(src, def);
    }
    strcat(src, "{{ template \"t40\" }}");
    corral_template_limits limits = corral_template_default_limits();
    limits.max_output_bytes = 1u << 20;
    corral_error err = {{0}};
    char *out = render(src, NULL, &limits, &err);
    assert_null(out);
    assert_true(strstr(err.message, "output exceeds") || strstr(err.message, "step limit"));
}

static void test_deeply_nested_template_is_rejected_at_parse(void **state)
{
    (void)state;
    size_t depth = 5000;
    char *src = malloc(depth * 24 + 1);
    assert_non_null(src);
    src[0] = '\0';
    size_t n = 0;
    for (size_t i = 0; i < depth; i++)
        n += (size_t)sprintf(src + n, "{{ if true }}");
    for (size_t i = 0; i < depth; i++)
        n += (size_t)sprintf(src + n, "{{ end }}");
    corral_error err = {{0}};
    corral_template *t = corral_template_parse(CORRAL_TEMPLATE_GO, src, n, &err);
    assert_null(t);
    assert_non_null(strstr(err.message, "nested too deeply"));
    free(src);
}

static void test_long_range_stops_at_the_step_limit(void **state)
{
    (void)state;
    corral_template_limits limits = corral_template_default_limits();
    limits.max_steps = 1000;
    corral_error err = {{0}};
    char *out =
        render("{{ range 1000000 }}{{ range 1000000 }}{{ end }}{{ end }}", NULL, &limits, &err);
    assert_null(out);
    assert_non_null(strstr(err.message, "step limit"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_builtin_templates_render_the_three_readme_cases_exactly),
        cmocka_unit_test(test_trim_markers_remove_whitespace_on_their_side_only),
        cmocka_unit_test(test_variables_declare_assign_and_scope_to_end),
        cmocka_unit_test(test_range_walks_maps_in_key_order_and_runs_else_when_empty),
        cmocka_unit_test(test_if_else_if_with_and_logic_functions),
        cmocka_unit_test(test_len_index_slice_and_printing_functions),
        cmocka_unit_test(test_missing_keys_render_as_zero_values),
        cmocka_unit_test(test_fields_fall_back_to_ollama_json_names),
        cmocka_unit_test(test_define_and_template_run_named_templates),
        cmocka_unit_test(test_parse_errors_name_line_and_column),
        cmocka_unit_test(test_legacy_template_runs_per_turn_and_leaves_last_turn_open),
        cmocka_unit_test(test_template_without_response_gets_one_appended),
        cmocka_unit_test(test_fill_in_the_middle_supplies_prompt_and_suffix),
        cmocka_unit_test(test_consecutive_same_role_messages_are_merged_and_system_joined),
        cmocka_unit_test(test_images_are_numbered_across_the_request),
        cmocka_unit_test(test_recursive_template_stops_at_the_depth_limit),
        cmocka_unit_test(test_exponential_template_stops_at_the_output_or_step_limit),
        cmocka_unit_test(test_deeply_nested_template_is_rejected_at_parse),
        cmocka_unit_test(test_long_range_stops_at_the_step_limit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

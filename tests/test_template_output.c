/*
 * Output parsing: thinking and tool calls come out the same however the model's output is
 * chunked (every split point, and byte by byte), text before a tool tag stays content, and
 * the tags are inferred from a Go template as ollama infers them.
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

typedef struct parsed {
    char content[4096];
    char thinking[4096];
    json_t *calls;
} parsed;

static void append(char *dst, const char *src, size_t n)
{
    size_t len = strlen(dst);
    assert_true(len + n < 4096);
    memcpy(dst + len, src, n);
    dst[len + n] = '\0';
}

/* Feed text split at the given points (ascending, 0 and len implied). */
static void run(const corral_output_tags *tags, bool in_thinking, const char *text,
                const size_t *splits, size_t n_splits, parsed *out)
{
    memset(out, 0, sizeof *out);
    out->calls = json_array();
    corral_output_parser *p = corral_output_parser_create(tags, in_thinking, 1 << 16);
    assert_non_null(p);
    size_t len = strlen(text), at = 0;
    for (size_t i = 0; i <= n_splits; i++) {
        size_t end = i < n_splits ? splits[i] : len;
        corral_output_delta d;
        corral_error err = {{0}};
        assert_true(corral_output_parser_feed(p, text + at, end - at, i == n_splits, &d, &err));
        append(out->content, d.content, d.content_len);
        append(out->thinking, d.thinking, d.thinking_len);
        json_array_extend(out->calls, (json_t *)d.tool_calls);
        at = end;
    }
    corral_output_parser_free(p);
}

/* The same result for one chunk, every two-chunk split, and one byte at a time. */
static void expect_parse(const corral_output_tags *tags, bool in_thinking, const char *text,
                         const char *content, const char *thinking, const char *calls_json)
{
    size_t len = strlen(text);
    json_t *want_calls = json_loads(calls_json, 0, NULL);
    assert_non_null(want_calls);
    size_t *bytes = malloc((len + 1) * sizeof *bytes);
    assert_non_null(bytes);
    for (size_t i = 0; i < len; i++)
        bytes[i] = i + 1;
    for (size_t split = 0; split <= len + 1; split++) {
        parsed got;
        if (split <= len)
            run(tags, in_thinking, text, &split, 1, &got);
        else
            run(tags, in_thinking, text, bytes, len ? len - 1 : 0, &got);
        if (strcmp(got.content, content) || strcmp(got.thinking, thinking) ||
            !json_equal(got.calls, want_calls)) {
            char *calls = json_dumps(got.calls, JSON_COMPACT);
            fail_msg("split %zu of [%s]: content [%s] thinking [%s] calls %s", split, text,
                     got.content, got.thinking, calls);
        }
        json_decref(got.calls);
    }
    free(bytes);
    json_decref(want_calls);
}

static const corral_output_tags qwen = {"<think>", "</think>", "<tool_call>", false};

static void test_thinking_content_and_tool_calls_split_at_every_byte(void **state)
{
    (void)state;
    expect_parse(
        &qwen, false,
        "<think>\nweather?\n</think>\n\nLet me check.<tool_call>\n{\"name\": \"get_weather\", "
        "\"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
        "Let me check.", "weather?",
        "[{\"function\":{\"index\":0,\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\"}}}"
        "]");
}

static void test_two_tool_calls_in_a_row_are_both_parsed(void **state)
{
    (void)state;
    expect_parse(
        &qwen, false,
        "<tool_call>{\"name\":\"a\",\"arguments\":{}}</tool_call>\n<tool_call>{\"name\":\"b\","
        "\"arguments\":\"{\\\"x\\\": 1}\"}</tool_call>",
        "", "",
        "[{\"function\":{\"index\":0,\"name\":\"a\",\"arguments\":{}}},"
        "{\"function\":{\"index\":1,\"name\":\"b\",\"arguments\":{\"x\":1}}}]");
}

static void test_output_starts_in_thinking_when_prompt_ended_with_open_tag(void **state)
{
    (void)state;
    expect_parse(&qwen, true, "I should greet.</think>\n\nHello!", "Hello!", "I should greet.",
                 "[]");
}

static void test_text_that_only_looks_like_a_tag_stays_content(void **state)
{
    (void)state;
    expect_parse(&qwen, false, "a <tool b <thin c", "a <tool b <thin c", "", "[]");
    expect_parse(&qwen, false, "x<tool_call>not json", "x<tool_call>not json", "", "[]");
}

static void test_brace_tag_parses_json_only_at_the_start(void **state)
{
    (void)state;
    const corral_output_tags brace = {"", "", "{", false};
    expect_parse(&brace, false, " {\"name\": \"f\", \"parameters\": {\"q\": \"x\"}}", "", "",
                 "[{\"function\":{\"index\":0,\"name\":\"f\",\"arguments\":{\"q\":\"x\"}}}]");
    expect_parse(&brace, false, "Sure: {\"name\": \"f\"}", "Sure: {\"name\": \"f\"}", "", "[]");
    expect_parse(&brace, false, "{\"not\": \"a call\"}", "{\"not\": \"a call\"}", "", "[]");
}

static void test_tags_are_inferred_from_a_go_template(void **state)
{
    (void)state;
    const char *src =
        "{{- range .Messages }}<|im_start|>{{ .Role }}\n"
        "{{- if .Thinking }}<think>{{ .Thinking }}</think>\n{{ end }}"
        "{{ .Content }}{{- if .ToolCalls }}<tool_call>\n{{ range .ToolCalls }}"
        "{\"name\": \"{{ .Function.Name }}\"}{{ end }}</tool_call>{{ end }}<|im_end|>\n{{ end }}";
    corral_error err = {{0}};
    corral_template *tmpl = corral_template_parse(CORRAL_TEMPLATE_GO, src, strlen(src), &err);
    assert_non_null(tmpl);
    corral_output_tags tags;
    corral_template_output_tags(tmpl, &tags);
    assert_string_equal(tags.tool_open, "<tool_call>");
    assert_string_equal(tags.think_open, "<think>");
    assert_string_equal(tags.think_close, "</think>");
    corral_template_free(tmpl);

    const char *plain = "{{ range .Messages }}{{ .Content }}{{ end }}";
    tmpl = corral_template_parse(CORRAL_TEMPLATE_GO, plain, strlen(plain), &err);
    assert_non_null(tmpl);
    corral_template_output_tags(tmpl, &tags);
    assert_string_equal(tags.tool_open, "{");
    assert_string_equal(tags.think_open, "");
    corral_template_free(tmpl);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_thinking_content_and_tool_calls_split_at_every_byte),
        cmocka_unit_test(test_two_tool_calls_in_a_row_are_both_parsed),
        cmocka_unit_test(test_output_starts_in_thinking_when_prompt_ended_with_open_tag),
        cmocka_unit_test(test_text_that_only_looks_like_a_tag_stays_content),
        cmocka_unit_test(test_brace_tag_parses_json_only_at_the_start),
        cmocka_unit_test(test_tags_are_inferred_from_a_go_template),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

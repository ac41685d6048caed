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

#include "output_parse_fixture.h"
#include "template/template.h"

/* The tags parser of one expect_parse: its tags and whether the prompt left it thinking. */
typedef struct tags_parser {
    const corral_output_tags *tags;
    bool in_thinking;
} tags_parser;

static corral_output_parser *make_tags_parser(void *ctx)
{
    const tags_parser *t = ctx;
    return corral_output_parser_create(t->tags, t->in_thinking, 1 << 16);
}

/* The same result for one chunk, every two-chunk split, and one byte at a time. */
static void expect_parse(const corral_output_tags *tags, bool in_thinking, const char *text,
                         const char *content, const char *thinking, const char *calls_json)
{
    tags_parser t = {tags, in_thinking};
    output_parse_expect(make_tags_parser, &t, text, content, thinking, calls_json);
}

static const corral_output_tags qwen = {"<think>", "</think>", "<tool_call>", false, ""};

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
    const corral_output_tags brace = {"", "", "{", false, ""};
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
    assert_string_equal(tags.tool_arguments, "");
    corral_template_free(tmpl);
}

/* The key a template writes a call's arguments under, for a forced call in its shape. */
static void test_the_arguments_key_is_read_from_the_calls_a_template_writes(void **state)
{
    (void)state;
    const char *go = "{{ .System }} \"arguments\" {{ range .Messages }}{{ if .ToolCalls }}"
                     "{{ range .ToolCalls }}{\"name\": \"{{ .Function.Name }}\", \"parameters\": "
                     "{{ .Function.Arguments }}}{{ end }}{{ end }}{{ end }}";
    corral_error err = {{0}};
    corral_template *tmpl = corral_template_parse(CORRAL_TEMPLATE_GO, go, strlen(go), &err);
    assert_non_null(tmpl);
    corral_output_tags tags;
    corral_template_output_tags(tmpl, &tags);
    assert_string_equal(tags.tool_open, "{");
    assert_string_equal(tags.tool_arguments, "parameters"); /* the calls', not the system's */
    corral_template_free(tmpl);

    static const char qwen[] = "{{- '<tool_call>\\n{\"name\": \"' }}{{ tool_call.name }}"
                               "{{- '\", \"arguments\": ' }}{{ tool_call.arguments | tojson }}";
    corral_template_jinja_output_tags(qwen, sizeof qwen - 1, &tags);
    assert_string_equal(tags.tool_open, "<tool_call>");
    assert_string_equal(tags.tool_arguments, "arguments");
    static const char llama[] = "{{- '{\"name\": \"' + tool_call.name + '\", ' }}"
                                "{{- '\"parameters\": ' }}{{- tool_call.arguments | tojson }}";
    corral_template_jinja_output_tags(llama, sizeof llama - 1, &tags);
    assert_string_equal(tags.tool_arguments, "parameters");
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
        cmocka_unit_test(test_the_arguments_key_is_read_from_the_calls_a_template_writes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

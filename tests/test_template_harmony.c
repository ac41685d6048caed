/*
 * Harmony (gpt-oss): the prompt laid out as ollama lays it out for these models (the system
 * message at each reasoning level, tools as TypeScript-like types, thinking, calls and
 * results in the history, a prefilled answer), tool names made identifiers, and the answer
 * split into thinking, content and calls the same way wherever the stream is cut.
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
#include "template/harmony.h"

#define SYSTEM_HEAD                                                                              \
    "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\n"    \
    "Knowledge cutoff: 2024-06\nCurrent date: 2026-11-28"
#define CHANNELS                                                                                 \
    "\n\n# Valid channels: analysis, commentary, final. Channel must be included for every "    \
    "message."
#define TOOLS_LINE "\nCalls to these tools must go to the commentary channel: 'functions'."

static json_t *parse_json(const char *text)
{
    json_error_t jerr;
    json_t *v = json_loads(text, JSON_DECODE_ANY, &jerr);
    if (!v)
        fail_msg("bad JSON in test: %s: %s", jerr.text, text);
    return v;
}

/* Render messages/tools/think (JSON texts; NULL: absent) on the fixed date. */
static void expect_render(const char *messages, const char *tools, const char *think,
                          const char *want)
{
    json_t *m = parse_json(messages);
    json_t *t = tools ? parse_json(tools) : NULL;
    json_t *k = think ? parse_json(think) : NULL;
    size_t len;
    corral_error err = {{0}};
    char *got = harmony_render(m, t, k, "2026-11-28", NULL, &len, &err);
    assert_non_null(got);
    assert_int_equal(len, strlen(got));
    if (strcmp(got, want) != 0)
        fail_msg("rendered\n[%s]\nwanted\n[%s]", got, want);
    free(got);
    json_decref(m);
    json_decref(t);
    json_decref(k);
}

static const char *const question = "[{\"role\":\"user\",\"content\":\"Hi\"}]";

static void test_reasoning_level_follows_think(void **state)
{
    (void)state;
    static const char *const cases[][2] = {
        {NULL, "\n\nReasoning: medium"},      {"true", "\n\nReasoning: medium"},
        {"\"low\"", "\n\nReasoning: low"},    {"\"medium\"", "\n\nReasoning: medium"},
        {"\"high\"", "\n\nReasoning: high"},  {"\"max\"", "\n\nReasoning: high"},
        {"null", "\n\nReasoning: medium"},    {"false", ""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char want[1024];
        snprintf(want, sizeof want,
                 SYSTEM_HEAD "%s" CHANNELS
                             "<|end|><|start|>user<|message|>Hi<|end|><|start|>assistant",
                 cases[i][1]);
        expect_render(question, NULL, cases[i][0], want);
    }
}

static void test_tools_and_system_make_the_developer_message(void **state)
{
    (void)state;
    const char *tools =
        "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"description\":"
        "\"Current weather in a city.\",\"parameters\":{\"type\":\"object\",\"properties\":{"
        "\"unit\":{\"type\":[\"string\",\"null\"],\"enum\":[\"c\",\"f\"]},"
        "\"city\":{\"type\":\"string\",\"description\":\"The city\"}},\"required\":[\"city\"]}}},"
        "{\"type\":\"function\",\"function\":{\"name\":\"get-time\"}}]";
    const char *messages = "[{\"role\":\"system\",\"content\":\"Be brief.\"},"
                           "{\"role\":\"system\",\"content\":\"Use metric.\"},"
                           "{\"role\":\"user\",\"content\":\"Weather?\"}]";
    expect_render(messages, tools, "\"high\"",
                  SYSTEM_HEAD "\n\nReasoning: high" CHANNELS TOOLS_LINE
                  "<|end|><|start|>developer<|message|># Tools\n\n## functions\n\n"
                  "namespace functions {\n\n// Current weather in a city.\n"
                  "type get_weather = (_: {\n  // The city\n  city: string,\n"
                  "  unit: string | null,\n}) => any;\n\n"
                  "type get_time = () => any;\n\n} // namespace functions\n\n"
                  "# Instructions\n\nBe brief.\n\nUse metric.<|end|>"
                  "<|start|>user<|message|>Weather?<|end|><|start|>assistant");
    /* a system message alone still gets its developer message */
    expect_render("[{\"role\":\"system\",\"content\":\"Be brief.\"},"
                  "{\"role\":\"user\",\"content\":\"Hi\"}]",
                  "[]", "false",
                  SYSTEM_HEAD CHANNELS "<|end|><|start|>developer<|message|>\n\n# Instructions"
                                       "\n\nBe brief.<|end|><|start|>user<|message|>Hi<|end|>"
                                       "<|start|>assistant");
}

static void test_history_has_thinking_calls_and_results(void **state)
{
    (void)state;
    const char *tools = "[{\"type\":\"function\",\"function\":{\"name\":\"get-weather\","
                        "\"parameters\":{\"properties\":{\"city\":{\"type\":\"string\"}}}}}]";
    /* The first turn's thinking is gone (it came before the last user message); the current
     * turn's stays. A result without tool_name answers the call before it. */
    const char *messages =
        "[{\"role\":\"user\",\"content\":\"Hello\"},"
        "{\"role\":\"assistant\",\"thinking\":\"Greet.\",\"content\":\"Hi there.\"},"
        "{\"role\":\"user\",\"content\":\"Weather in Paris & Rome?\"},"
        "{\"role\":\"assistant\",\"thinking\":\"Need the weather.\",\"content\":\"\","
        "\"tool_calls\":[{\"function\":{\"name\":\"get-weather\",\"arguments\":{\"city\":\"Paris & "
        "Rome\",\"a\":1}}}]},"
        "{\"role\":\"tool\",\"tool_name\":\"get-weather\",\"content\":\"18 C\"},"
        "{\"role\":\"tool\",\"content\":\"20 C\"}]";
    expect_render(
        messages, tools, NULL,
        SYSTEM_HEAD "\n\nReasoning: medium" CHANNELS TOOLS_LINE
        "<|end|><|start|>developer<|message|># Tools\n\n## functions\n\nnamespace functions {\n\n"
        "type get_weather = (_: {\n  city: string,\n}) => any;\n\n} // namespace functions<|end|>"
        "<|start|>user<|message|>Hello<|end|>"
        "<|start|>assistant<|channel|>final<|message|>Hi there.<|end|>"
        "<|start|>user<|message|>Weather in Paris & Rome?<|end|>"
        "<|start|>assistant<|channel|>analysis<|message|>Need the weather.<|end|>"
        "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json"
        "<|message|>{\"a\":1,\"city\":\"Paris \\u0026 Rome\"}<|call|>"
        "<|start|>functions.get_weather to=assistant<|message|>18 C<|end|>"
        "<|start|>functions.get_weather to=assistant<|message|>20 C<|end|>"
        "<|start|>assistant");
}

static void test_a_last_assistant_message_is_continued(void **state)
{
    (void)state;
    expect_render("[{\"role\":\"user\",\"content\":\"Hi\"},"
                  "{\"role\":\"assistant\",\"thinking\":\"Greet.\",\"content\":\"Hel\"}]",
                  NULL, NULL,
                  SYSTEM_HEAD "\n\nReasoning: medium" CHANNELS
                  "<|end|><|start|>user<|message|>Hi<|end|>"
                  "<|start|>assistant<|channel|>analysis<|message|>Greet.<|end|>"
                  "<|start|>assistant<|channel|>final<|message|>Hel");
    expect_render("[{\"role\":\"user\",\"content\":\"Hi\"},"
                  "{\"role\":\"assistant\",\"thinking\":\"Gre\"}]",
                  NULL, NULL,
                  SYSTEM_HEAD "\n\nReasoning: medium" CHANNELS
                  "<|end|><|start|>user<|message|>Hi<|end|>"
                  "<|start|>assistant<|channel|>analysis<|message|>Gre");
}

static void test_tool_names_become_distinct_identifiers(void **state)
{
    (void)state;
    json_t *tools = parse_json(
        "[{\"function\":{\"name\":\"get-weather\"}},{\"function\":{\"name\":\"get weather\"}},"
        "{\"function\":{\"name\":\"1st\"}},{\"function\":{\"name\":\"!?\"}},"
        "{\"function\":{\"name\":\"get_weather\"}},{\"function\":{\"name\":\"caf\xc3\xa9.v$2\"}}]");
    json_t *names = harmony_tool_names(tools);
    json_t *want = parse_json("[\"get_weather\",\"get_weather_2\",\"_1st\",\"unnamed\","
                              "\"get_weather_3\",\"caf\xc3\xa9_v$2\"]");
    assert_true(json_equal(names, want));
    json_decref(tools);
    json_decref(names);
    json_decref(want);
}

static void test_render_stops_at_the_output_limit(void **state)
{
    (void)state;
    json_t *m = parse_json(question);
    corral_template_limits limits = corral_template_default_limits();
    limits.max_output_bytes = 64;
    size_t len;
    corral_error err = {{0}};
    assert_null(harmony_render(m, NULL, NULL, "2026-11-28", &limits, &len, &err));
    assert_non_null(strstr(err.message, "64 bytes"));
    json_decref(m);
}

/* ---- parsing ---- */

/* The harmony parser of one expect_parse_after: the prompt it answers and its tools. */
typedef struct harmony_parser {
    const char *prompt;
    const json_t *tools;
} harmony_parser;

static corral_output_parser *make_harmony_parser(void *ctx)
{
    const harmony_parser *h = ctx;
    return harmony_output_parser_create(h->prompt, h->tools, 1 << 16);
}

/* The same result for one chunk, every two-chunk split, and one byte at a time. */
static void expect_parse_after(const char *prompt, const char *tools_json, const char *text,
                               const char *content, const char *thinking,
                               const char *calls_json)
{
    json_t *tools = tools_json ? parse_json(tools_json) : NULL;
    harmony_parser h = {prompt, tools};
    output_parse_expect(make_harmony_parser, &h, text, content, thinking, calls_json);
    json_decref(tools);
}

#define PROMPT "<|start|>user<|message|>Hi<|end|><|start|>assistant"

static void expect_parse(const char *text, const char *content, const char *thinking,
                         const char *calls_json)
{
    expect_parse_after(PROMPT, NULL, text, content, thinking, calls_json);
}

static void test_analysis_is_thinking_and_final_is_content(void **state)
{
    (void)state;
    expect_parse("<|channel|>analysis<|message|>User greets. Reply.<|end|>"
                 "<|start|>assistant<|channel|>final<|message|>Hello! <b>Hi</b> a<|b",
                 "Hello! <b>Hi</b> a<|b", "User greets. Reply.", "[]");
    /* <|return|> ends the answer when the runner passes it on */
    expect_parse("<|channel|>final<|message|>Done.<|return|>", "Done.", "", "[]");
}

static void test_a_call_ends_at_call_or_at_the_end_of_the_answer(void **state)
{
    (void)state;
    const char *tools = "[{\"type\":\"function\",\"function\":{\"name\":\"get-weather\"}}]";
    const char *call = "[{\"function\":{\"index\":0,\"name\":\"get-weather\","
                       "\"arguments\":{\"city\":\"Paris\"}}}]";
    expect_parse_after(PROMPT, tools,
                       "<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant"
                       "<|channel|>commentary to=functions.get_weather <|constrain|>json"
                       "<|message|>{\"city\": \"Paris\"}",
                       "", "Need weather.", call);
    expect_parse_after(PROMPT, tools,
                       "<|channel|>commentary to=functions.get_weather<|constrain|>json"
                       "<|message|>{\"city\":\"Paris\"}<|call|>",
                       "", "", call);
    /* the recipient may come before the channel */
    expect_parse_after(PROMPT, tools,
                       " to=functions.get_weather<|channel|>commentary json<|message|>"
                       "{\"city\":\"Paris\"}<|call|>",
                       "", "", call);
}

static void test_calls_in_a_row_are_numbered(void **state)
{
    (void)state;
    expect_parse("<|channel|>commentary to=functions.now <|constrain|>json<|message|><|call|>"
                 "<|start|>assistant<|channel|>commentary to=functions.add <|constrain|>json"
                 "<|message|>{\"a\":1,\"b\":[2]}",
                 "", "",
                 "[{\"function\":{\"index\":0,\"name\":\"now\",\"arguments\":{}}},"
                 "{\"function\":{\"index\":1,\"name\":\"add\",\"arguments\":{\"a\":1,\"b\":[2]}}}"
                 "]");
}

static void test_a_call_without_object_arguments_is_content(void **state)
{
    (void)state;
    expect_parse("<|channel|>commentary to=functions.f <|constrain|>json<|message|>[1, 2]",
                 "[1, 2]", "", "[]");
    expect_parse("<|channel|>commentary to=functions.f<|message|>{\"a\": ", "{\"a\": ", "",
                 "[]");
}

static void test_commentary_without_recipient_is_content(void **state)
{
    (void)state;
    expect_parse("<|channel|>commentary<|message|>Checking the weather.<|end|>"
                 "stray text<|start|>assistant<|channel|>final<|message|>18 C.",
                 "Checking the weather.18 C.", "", "[]");
}

static void test_a_prefilled_message_continues(void **state)
{
    (void)state;
    expect_parse_after(PROMPT "<|channel|>analysis<|message|>I think",
                       NULL, " more.<|end|><|start|>assistant<|channel|>final<|message|>Done",
                       "Done", " more.", "[]");
    expect_parse_after(PROMPT "<|channel|>final<|message|>Hel", NULL, "lo.", "lo.", "", "[]");
    /* a prompt with no message tags at all: the answer starts a new message */
    expect_parse_after("plain prompt", NULL, "<|channel|>final<|message|>ok", "ok", "", "[]");
}

static void test_an_unfinished_header_says_nothing(void **state)
{
    (void)state;
    expect_parse("<|channel|>analysis", "", "", "[]");
}

/* A header longer than any real one is dropped as it grows; its message's text is content. */
static void test_an_overlong_header_is_dropped(void **state)
{
    (void)state;
    size_t n = 10000;
    char *text = malloc(n + 64);
    assert_non_null(text);
    memset(text, 'x', n);
    strcpy(text + n, "<|channel|>analysis<|message|>said");
    output_parsed got;
    size_t splits[] = {5000, n + 5, n + 30};
    harmony_parser h = {PROMPT, NULL};
    output_parse_split(make_harmony_parser, &h, text, splits, 3, &got);
    assert_string_equal(got.content, "said");
    assert_string_equal(got.thinking, "");
    json_decref(got.calls);
    free(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reasoning_level_follows_think),
        cmocka_unit_test(test_tools_and_system_make_the_developer_message),
        cmocka_unit_test(test_history_has_thinking_calls_and_results),
        cmocka_unit_test(test_a_last_assistant_message_is_continued),
        cmocka_unit_test(test_tool_names_become_distinct_identifiers),
        cmocka_unit_test(test_render_stops_at_the_output_limit),
        cmocka_unit_test(test_analysis_is_thinking_and_final_is_content),
        cmocka_unit_test(test_a_call_ends_at_call_or_at_the_end_of_the_answer),
        cmocka_unit_test(test_calls_in_a_row_are_numbered),
        cmocka_unit_test(test_a_call_without_object_arguments_is_content),
        cmocka_unit_test(test_commentary_without_recipient_is_content),
        cmocka_unit_test(test_a_prefilled_message_continues),
        cmocka_unit_test(test_an_unfinished_header_says_nothing),
        cmocka_unit_test(test_an_overlong_header_is_dropped),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * Output parsing: thinking and tool calls come out the same however the model's output is
 * chunked (every split point, and byte by byte), text before a tool tag stays content, and
 * the tags are inferred from a Go template as ollama infers them. The families whose calls
 * are not JSON (Qwen3-Coder's <function=...>, GLM's <arg_key> pairs, DeepSeek's call tokens,
 * DeepSeek V3's older fenced form (Cogito's), Mistral's [ARGS], Gemma 4's call:NAME{...}, Kimi
 * K2's call tokens, MiniMax M2's <invoke>, DeepSeek V3.2's DSML, MiniMax M3's elements, Cohere's
 * action blocks, Glimmer's messages) are read in their own syntax, the arguments typed by the
 * tools' schemas.
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
#include "template/renderer.h"
#include "template/template.h"

/* The tags parser of one expect_parse: its tags, whether the prompt left it thinking, and
 * the request's tools (NULL: none). */
typedef struct tags_parser {
    const corral_output_tags *tags;
    bool in_thinking;
    const json_t *tools;
} tags_parser;

static corral_output_parser *make_tags_parser(void *ctx)
{
    const tags_parser *t = ctx;
    corral_output_parser *p = corral_output_parser_create(t->tags, t->in_thinking, 1 << 16);
    if (p)
        corral_output_parser_set_tools(p, t->tools);
    return p;
}

/* The same result for one chunk, every two-chunk split, and one byte at a time. */
static void expect_parse(const corral_output_tags *tags, bool in_thinking, const char *text,
                         const char *content, const char *thinking, const char *calls_json)
{
    tags_parser t = {tags, in_thinking, NULL};
    output_parse_expect(make_tags_parser, &t, text, content, thinking, calls_json);
}

static const corral_output_tags qwen = {"<think>", "</think>", "<tool_call>", false, "",
                                        CORRAL_CALLS_JSON, false};

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

/* An answer that closes a thinking it never opened (MiniMax M3's when it does not think)
 * starts its content after the tag. */
static void test_a_bare_closing_thinking_tag_at_the_start_is_not_content(void **state)
{
    (void)state;
    expect_parse(&qwen, false, "</think>\n\nHello!", "Hello!", "", "[]");
    expect_parse(&qwen, false, "</thinking> is a tag", "</thinking> is a tag", "", "[]");
    expect_parse(&qwen, false, "Hi</think>", "Hi</think>", "", "[]");
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
    const corral_output_tags brace = {"", "", "{", false, "", CORRAL_CALLS_JSON, false};
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

/* The parameters of the tagged-syntax tests' tool: each argument typed by its schema. */
static const char weather_tools[] =
    "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"parameters\":{"
    "\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"},"
    "\"days\":{\"type\":\"integer\"},\"metric\":{\"type\":\"boolean\"},"
    "\"note\":{\"type\":\"string\"},\"scale\":{\"type\":\"number\"},"
    "\"when\":{\"anyOf\":[{\"type\":\"integer\"},{\"type\":\"null\"}]},"
    "\"hours\":{\"type\":\"array\"},\"where\":{\"type\":[\"object\",\"string\"]}}}}},"
    "{\"type\":\"function\",\"function\":{\"name\":\"plan\",\"parameters\":{"
    "\"type\":\"object\",\"properties\":{\"steps\":{\"type\":\"array\",\"items\":{"
    "\"type\":\"object\",\"properties\":{\"n\":{\"type\":\"integer\"},"
    "\"done\":{\"type\":\"boolean\"}}}},\"tags\":{\"type\":\"array\"}}}}}]";

static void expect_tagged(corral_call_syntax calls, const char *open, const char *text,
                          const char *content, const char *calls_json)
{
    corral_output_tags tags = {"<think>", "</think>", "", false, "", calls, false};
    snprintf(tags.tool_open, sizeof tags.tool_open, "%s", open);
    json_t *tools = json_loads(weather_tools, 0, NULL);
    assert_non_null(tools);
    tags_parser t = {&tags, false, tools};
    output_parse_expect(make_tags_parser, &t, text, content, "", calls_json);
    json_decref(tools);
}

/* Qwen3-Coder's and Qwen 3.5's calls: <function=NAME> with <parameter=KEY> values, typed by
 * the tool's schema (one newline off each end of a value), cut at every byte. */
static void test_xml_function_calls_are_typed_by_the_schema(void **state)
{
    (void)state;
    expect_tagged(CORRAL_CALLS_XML_FUNCTION, "<tool_call>",
                  "Let me check.<tool_call>\n<function=get_weather>\n"
                  "<parameter=city>\nParis\n</parameter>\n<parameter=days>\n3\n</parameter>\n"
                  "<parameter=metric>\nTrue\n</parameter>\n<parameter=note>\n42\n</parameter>\n"
                  "<parameter=scale>\n2.0\n</parameter>\n<parameter=when>\nnull\n</parameter>\n"
                  "</function>\n</tool_call>\n<tool_call>\n<function=other>\n<parameter=x>\n"
                  "line one\nline two\n</parameter>\n</function>\n</tool_call>",
                  "Let me check.",
                  "[{\"function\":{\"index\":0,\"name\":\"get_weather\",\"arguments\":{"
                  "\"city\":\"Paris\",\"days\":3,\"metric\":true,\"note\":\"42\",\"scale\":2,"
                  "\"when\":null}}},"
                  "{\"function\":{\"index\":1,\"name\":\"other\",\"arguments\":{"
                  "\"x\":\"line one\\nline two\"}}}]");
}

/* Qwen 3.5's, Qwen3-VL's and Nemotron 3 Nano's models may open a call without closing their
 * thinking: the call tag ends it, as ollama's parsers for them read it, and the call is a call
 * (cut at every byte). Families whose parsers do not do that keep it all as thinking. */
static void test_a_call_ends_the_thinking_in_the_families_whose_parsers_say_so(void **state)
{
    (void)state;
    static const char call[] = "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n"
                               "</parameter>\n<parameter=days>\n3\n</parameter>\n</function>\n"
                               "</tool_call>";
    static const char parsed[] = "[{\"function\":{\"index\":0,\"name\":\"get_weather\","
                                 "\"arguments\":{\"city\":\"Paris\",\"days\":3}}}]";
    static const char *const ending[] = {"qwen3.5", "ornith", "qwen3.8", "nemotron-3-nano",
                                         "nemotron-3.5-nano"};
    json_t *tools = json_loads(weather_tools, 0, NULL);
    assert_non_null(tools);
    char text[512];
    for (size_t i = 0; i < sizeof ending / sizeof ending[0]; i++) {
        const corral_renderer *r = corral_renderer_find(ending[i]);
        assert_non_null(r);
        corral_output_tags tags;
        corral_renderer_output_tags(r, &tags);
        assert_true(tags.tool_ends_thinking);
        tags_parser t = {&tags, true, tools};
        snprintf(text, sizeof text, "Plan.\n%s", call);
        output_parse_expect(make_tags_parser, &t, text, "", "Plan.", parsed);
        /* the model opened the thinking itself; it mentions the tag's start on the way */
        t.in_thinking = false;
        snprintf(text, sizeof text, "<think>\nA <tool_c and a </thi.  %s", call);
        output_parse_expect(make_tags_parser, &t, text, "", "A <tool_c and a </thi.", parsed);
        /* a call at once: no thinking */
        t.in_thinking = true;
        output_parse_expect(make_tags_parser, &t, call, "", "", parsed);
        /* closed first: as ever */
        snprintf(text, sizeof text, "Plan.</think>\n\nSure.%s", call);
        output_parse_expect(make_tags_parser, &t, text, "Sure.", "Plan.", parsed);
    }
    /* Qwen3-VL's JSON calls */
    corral_output_tags vl;
    corral_renderer_output_tags(corral_renderer_find("qwen3-vl-thinking"), &vl);
    tags_parser t = {&vl, true, NULL};
    output_parse_expect(make_tags_parser, &t,
                        "Plan.<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>",
                        "", "Plan.",
                        "[{\"function\":{\"index\":0,\"name\":\"f\",\"arguments\":{}}}]");
    /* GLM's and Laguna's parsers keep such a call in the thinking */
    static const char *const keeping[] = {"glm-4.7", "laguna"};
    for (size_t i = 0; i < sizeof keeping / sizeof keeping[0]; i++) {
        corral_output_tags tags;
        corral_renderer_output_tags(corral_renderer_find(keeping[i]), &tags);
        assert_false(tags.tool_ends_thinking);
        tags_parser k = {&tags, true, tools};
        output_parse_expect(make_tags_parser, &k, "Plan.\n<tool_call>f</tool_call>", "",
                            "Plan.\n<tool_call>f</tool_call>", "[]");
    }
    json_decref(tools);
}

/* GLM's and Laguna's calls: the name, then <arg_key>/<arg_value> pairs. */
static void test_arg_pair_calls_are_typed_by_the_schema(void **state)
{
    (void)state;
    expect_tagged(CORRAL_CALLS_ARG_PAIRS, "<tool_call>",
                  "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n"
                  "<arg_key>days</arg_key>\n<arg_value>x3</arg_value>\n<arg_key>hours</arg_key>\n"
                  "<arg_value>[1, 2]</arg_value>\n<arg_key>where</arg_key>\n"
                  "<arg_value>{\"lat\": 1.5}</arg_value>\n<arg_key>metric</arg_key>"
                  "<arg_value>yes</arg_value></tool_call>",
                  "",
                  "[{\"function\":{\"index\":0,\"name\":\"get_weather\",\"arguments\":{"
                  "\"city\":\"Paris\",\"days\":\"x3\",\"hours\":[1,2],\"where\":{\"lat\":1.5},"
                  "\"metric\":false}}}]");
}

/* DeepSeek's call tokens and Mistral's [ARGS]: JSON arguments after the name. */
static void test_deepseek_and_mistral_calls(void **state)
{
    (void)state;
    expect_tagged(CORRAL_CALLS_DEEPSEEK, "<｜tool▁calls▁begin｜>",
                  "Checking.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>"
                  "{\"city\": \"Paris\"}<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>b<｜tool▁sep｜>{}"
                  "<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
                  "Checking.",
                  "[{\"function\":{\"index\":0,\"name\":\"get_weather\",\"arguments\":{"
                  "\"city\":\"Paris\"}}},{\"function\":{\"index\":1,\"name\":\"b\","
                  "\"arguments\":{}}}]");
    /* DeepSeek V3's older form (Cogito's): a type, then the name, the arguments fenced */
    expect_tagged(CORRAL_CALLS_DEEPSEEK_FENCED, "<｜tool▁calls▁begin｜>",
                  "Checking.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>"
                  "get_weather\n```json\n{\"city\": \"Paris\", \"days\": 3}\n```"
                  "<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>function<｜tool▁sep｜> b \n```json\n"
                  "{\n  \"x\": [1, \"```\"]\n}\n```\n<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
                  "Checking.",
                  "[{\"function\":{\"index\":0,\"name\":\"get_weather\",\"arguments\":{"
                  "\"city\":\"Paris\",\"days\":3}}},{\"function\":{\"index\":1,\"name\":\"b\","
                  "\"arguments\":{\"x\":[1,\"```\"]}}}]");
    expect_tagged(CORRAL_CALLS_NAME_ARGS, "[TOOL_CALLS]",
                  "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\"}[TOOL_CALLS]b[ARGS]{}",
                  "",
                  "[{\"function\":{\"index\":0,\"name\":\"get_weather\",\"arguments\":{"
                  "\"city\":\"Paris\"}}},{\"function\":{\"index\":1,\"name\":\"b\","
                  "\"arguments\":{}}}]");
}

/* Gemma 4's calls: call:NAME{...} with its own quoting, nested lists and mappings. */
static void test_gemma4_calls(void **state)
{
    (void)state;
    expect_tagged(CORRAL_CALLS_GEMMA4, "<|tool_call>",
                  "<|tool_call>call:get_weather{city:<|\"|>Paris, \"FR\"<|\"|>,days:3,"
                  "metric:true,scale:2.5,note:null,hours:[1,<|\"|>b<|\"|>,[]],"
                  "where:{<|\"|>lat<|\"|>:1.5,name:x}}<tool_call|><|tool_call>call:b{}"
                  "<tool_call|>",
                  "",
                  "[{\"function\":{\"index\":0,\"name\":\"get_weather\",\"arguments\":{"
                  "\"city\":\"Paris, \\\"FR\\\"\",\"days\":3,\"metric\":true,\"scale\":2.5,"
                  "\"note\":null,\"hours\":[1,\"b\",[]],\"where\":{\"lat\":1.5,\"name\":\"x\"}}}},"
                  "{\"function\":{\"index\":1,\"name\":\"b\",\"arguments\":{}}}]");
    static const char *const broken[] = {
        "<|tool_call>get_weather{city:x}<tool_call|>",
        "<|tool_call>call:f{city:<|\"|>x}<tool_call|>",
        "<|tool_call>call:f{a:1,}<tool_call|>",
        "<|tool_call>call:f{a:[1}<tool_call|>",
        "<|tool_call>call:f{a:1} more<tool_call|>",
    };
    for (size_t i = 0; i < sizeof broken / sizeof broken[0]; i++)
        expect_tagged(CORRAL_CALLS_GEMMA4, "<|tool_call>", broken[i], broken[i], "[]");
}

/* FunctionGemma's calls: Gemma 4's values with <escape> marks, content before them kept. */
static void test_functiongemma_calls(void **state)
{
    (void)state;
    expect_tagged(CORRAL_CALLS_FUNCTIONGEMMA, "<start_function_call>",
                  "Checking.<start_function_call>call:get_weather{city:<escape>Paris, <b>"
                  "<escape>,days:3,metric:true,note:null,hours:[1,<escape>b<escape>],"
                  "where:{lat:-1.5}}<end_function_call><start_function_call>call:b{}"
                  "<end_function_call>",
                  "Checking.",
                  "[{\"function\":{\"index\":0,\"name\":\"get_weather\",\"arguments\":{"
                  "\"city\":\"Paris, <b>\",\"days\":3,\"metric\":true,\"note\":null,"
                  "\"hours\":[1,\"b\"],\"where\":{\"lat\":-1.5}}}},"
                  "{\"function\":{\"index\":1,\"name\":\"b\",\"arguments\":{}}}]");
    static const char *const broken[] = {
        "<start_function_call>get_weather{city:x}<end_function_call>",
        "<start_function_call>call:f{city:<escape>x}<end_function_call>",
        "<start_function_call>call:f{a:1,}<end_function_call>",
        "<start_function_call>call:f{a:{b:1}<end_function_call>",
        "<start_function_call>call:f{a:1} more<end_function_call>",
        /* Gemma 4's mark is not FunctionGemma's */
        "<start_function_call>call:f{a:<|\"|>x,y<|\"|>}<end_function_call>",
    };
    for (size_t i = 0; i < sizeof broken / sizeof broken[0]; i++)
        expect_tagged(CORRAL_CALLS_FUNCTIONGEMMA, "<start_function_call>", broken[i], broken[i],
                      "[]");
}

/* Kimi K2's call tokens: the name read off the id functions.NAME:IDX its template writes. */
static void test_kimi_calls(void **state)
{
    (void)state;
    expect_tagged(CORRAL_CALLS_KIMI, "<|tool_calls_section_begin|>",
                  "Checking.<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0"
                  "<|tool_call_argument_begin|>{\"city\": \"Paris\", \"days\": 3}<|tool_call_end|>\n"
                  "<|tool_call_begin|>functions.b:12<|tool_call_argument_begin|>{}<|tool_call_end|>"
                  "<|tool_calls_section_end|><|tool_calls_section_begin|><|tool_call_begin|>c"
                  "<|tool_call_argument_begin|>{}<|tool_call_end|><|tool_calls_section_end|>",
                  "Checking.",
                  "[{\"function\":{\"index\":0,\"name\":\"get_weather\",\"arguments\":{"
                  "\"city\":\"Paris\",\"days\":3}}},{\"function\":{\"index\":1,\"name\":\"b\","
                  "\"arguments\":{}}},{\"function\":{\"index\":2,\"name\":\"c\","
                  "\"arguments\":{}}}]");
}

/* MiniMax M2's <invoke> blocks: parameters typed by the schema as Qwen3-Coder's are. */
static void test_minimax_calls_are_typed_by_the_schema(void **state)
{
    (void)state;
    expect_tagged(CORRAL_CALLS_MINIMAX, "<minimax:tool_call>",
                  "Let me check.<minimax:tool_call>\n<invoke name=\"get_weather\">\n"
                  "<parameter name=\"city\">Paris</parameter>\n<parameter name=\"days\">3</parameter>\n"
                  "<parameter name=\"metric\">true</parameter>\n<parameter name=\"note\">42</parameter>\n"
                  "<parameter name=\"scale\">2.0</parameter>\n<parameter name=\"hours\">[1, 2]"
                  "</parameter>\n<parameter name=\"where\">{\"lat\": 1.5}</parameter>\n</invoke>\n"
                  "<invoke name=\"other\">\n</invoke>\n</minimax:tool_call>",
                  "Let me check.",
                  "[{\"function\":{\"index\":0,\"name\":\"get_weather\",\"arguments\":{"
                  "\"city\":\"Paris\",\"days\":3,\"metric\":true,\"note\":\"42\",\"scale\":2,"
                  "\"hours\":[1,2],\"where\":{\"lat\":1.5}}}},"
                  "{\"function\":{\"index\":1,\"name\":\"other\",\"arguments\":{}}}]");
}

/* DeepSeek V3.2's DSML: string="true" keeps the text as it is, string="false" reads JSON, and
 * a value that says neither (or is not JSON) is typed by the schema; V4's block too. */
static void test_dsml_calls(void **state)
{
    (void)state;
    expect_tagged(CORRAL_CALLS_DSML, "<｜DSML｜function_calls>",
                  "Checking.<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"get_weather\">\n"
                  "<｜DSML｜parameter name=\"city\" string=\"true\">\nParis </｜DSML｜parameter>\n"
                  "<｜DSML｜parameter name=\"days\" string=\"false\">3</｜DSML｜parameter>\n"
                  "<｜DSML｜parameter name=\"note\" string=\"true\">42</｜DSML｜parameter>\n"
                  "<｜DSML｜parameter name=\"hours\" string=\"false\">[1, 2]</｜DSML｜parameter>\n"
                  "<｜DSML｜parameter name=\"metric\" string=\"false\">True</｜DSML｜parameter>\n"
                  "<｜DSML｜parameter name=\"scale\">2.5</｜DSML｜parameter>\n</｜DSML｜invoke>\n"
                  "<｜DSML｜invoke name=\"b\">\n</｜DSML｜invoke>\n</｜DSML｜function_calls>",
                  "Checking.",
                  "[{\"function\":{\"index\":0,\"name\":\"get_weather\",\"arguments\":{"
                  "\"city\":\"\\nParis \",\"days\":3,\"note\":\"42\",\"hours\":[1,2],"
                  "\"metric\":true,\"scale\":2.5}}},"
                  "{\"function\":{\"index\":1,\"name\":\"b\",\"arguments\":{}}}]");
    expect_tagged(CORRAL_CALLS_DSML, "<｜DSML｜tool_calls>",
                  "<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"b\">\n<｜DSML｜parameter name=\"x\" "
                  "string=\"false\">{\"y\": null}</｜DSML｜parameter>\n</｜DSML｜invoke>\n"
                  "</｜DSML｜tool_calls>",
                  "",
                  "[{\"function\":{\"index\":0,\"name\":\"b\",\"arguments\":{\"x\":{\"y\":null}}}}]");
}

/* MiniMax M3's: each argument an element named by its key, ]<]minimax[>[ before every tag,
 * nested values as nested elements (<item>s a list), typed by the schema where they stand. */
#define NS "]<]minimax[>["
static void test_minimax_m3_calls(void **state)
{
    (void)state;
    expect_tagged(CORRAL_CALLS_MINIMAX_M3, NS "<tool_call>",
                  "</think>Checking." NS "<tool_call>\n" NS "<invoke name=\"get_weather\">" NS
                  "<city>Paris" NS "</city>" NS "<days>3" NS "</days>" NS "<metric>true" NS
                  "</metric>" NS "<note>42" NS "</note>" NS "<hours>" NS "<item>1" NS "</item>" NS
                  "<item>2" NS "</item>" NS "</hours>" NS "<where>" NS "<lat>1.5" NS "</lat>" NS
                  "</where>" NS "</invoke>\n" NS "<invoke name=\"plan\">" NS "<steps>" NS "<item>" NS
                  "<n>1" NS "</n>" NS "<done>false" NS "</done>" NS "</item>" NS "</steps>" NS
                  "<tags>" NS "</tags>" NS "</invoke>\n" NS "<invoke name=\"b\">" NS "<a>" NS "<a> x "
                  NS "</a>" NS "</a>" NS "</invoke>\n" NS "</tool_call>",
                  "Checking.",
                  "[{\"function\":{\"index\":0,\"name\":\"get_weather\",\"arguments\":{"
                  "\"city\":\"Paris\",\"days\":3,\"metric\":true,\"note\":\"42\","
                  "\"hours\":[\"1\",\"2\"],\"where\":{\"lat\":\"1.5\"}}}},"
                  "{\"function\":{\"index\":1,\"name\":\"plan\",\"arguments\":{"
                  "\"steps\":[{\"n\":1,\"done\":false}],\"tags\":[]}}},"
                  "{\"function\":{\"index\":2,\"name\":\"b\",\"arguments\":{"
                  "\"a\":{\"a\":\" x \"}}}}]");
    static const char *const broken[] = {
        NS "<tool_call>" NS "<invoke name=\"f\">" NS "<x>1" NS "</invoke>" NS "</tool_call>",
        NS "<tool_call>" NS "<invoke name=\"f\">" NS "<x>1" NS "</y>" NS "</invoke>" NS
           "</tool_call>",
        NS "<tool_call>" NS "<invoke name=\"f\">" NS "<x>1" NS "</x>junk" NS "</invoke>" NS
           "</tool_call>",
        NS "<tool_call>" NS "<invoke name=\"plan\">" NS "<steps>" NS "<item>1" NS "</item>" NS
           "<n>2" NS "</n>" NS "</steps>" NS "</invoke>" NS "</tool_call>",
        NS "<tool_call>" NS "<invoke name=\"f\">" NS "<x>" NS "<y>1" NS "</y>z" NS "</x>" NS
           "</invoke>" NS "</tool_call>",
        NS "<tool_call><invoke name=\"f\"></invoke>" NS "</tool_call>",
    };
    for (size_t i = 0; i < sizeof broken / sizeof broken[0]; i++)
        expect_tagged(CORRAL_CALLS_MINIMAX_M3, NS "<tool_call>", broken[i], broken[i], "[]");
}

/* LFM2's and Olmo 3's Python-like calls: Python literals (quotes, escapes, True/None,
 * tuples, dicts), a list of calls or one a line, cut at every byte; what is not calls alone
 * stays content. */
static void test_python_calls(void **state)
{
    (void)state;
    expect_tagged(CORRAL_CALLS_PYTHON, "<|tool_call_start|>",
                  "Sure.<|tool_call_start|>[get_weather(city='Paris \\'15e\\'', days=3, "
                  "metric=True, note=\"a\\\\b\\n\\u00e9\\U0001F600\", scale=-2.5e1, when=None,"
                  " hours=(1, 2), where={'lat': 1.5, 2: [False]}), plan(steps=[]),]"
                  "<|tool_call_end|>",
                  "Sure.",
                  "[{\"function\":{\"index\":0,\"name\":\"get_weather\",\"arguments\":{"
                  "\"city\":\"Paris '15e'\",\"days\":3,\"metric\":true,"
                  "\"note\":\"a\\\\b\\n\\u00e9\\ud83d\\ude00\",\"scale\":-25,\"when\":null,"
                  "\"hours\":[1,2],\"where\":{\"lat\":1.5,\"2\":[false]}}}},"
                  "{\"function\":{\"index\":1,\"name\":\"plan\",\"arguments\":{\"steps\":[]}}}]");
    expect_tagged(CORRAL_CALLS_PYTHON, "<function_calls>",
                  "<function_calls>get_weather(city=\"Oslo\")\nget-time( zone = 'UTC' , )\n"
                  "</function_calls>",
                  "",
                  "[{\"function\":{\"index\":0,\"name\":\"get_weather\",\"arguments\":{"
                  "\"city\":\"Oslo\"}}},{\"function\":{\"index\":1,\"name\":\"get-time\","
                  "\"arguments\":{\"zone\":\"UTC\"}}}]");
    static const char *const broken[] = {
        "<|tool_call_start|>[f(x=1)<|tool_call_end|>",       /* the list never closes */
        "<|tool_call_start|>f(x=1) and more<|tool_call_end|>", /* text after the call */
        "<|tool_call_start|>f(x=y)<|tool_call_end|>",        /* a name, not a literal */
        "<|tool_call_start|>f(1)<|tool_call_end|>",          /* no keyword */
        "<|tool_call_start|>f(x='open)<|tool_call_end|>",    /* the string never closes */
        "<|tool_call_start|>f(x=[1, 2)<|tool_call_end|>",
        "<|tool_call_start|>f(x='\\ud800')<|tool_call_end|>", /* a lone surrogate */
        "<|tool_call_start|>[]<|tool_call_end|>",            /* no call */
        ("<|tool_call_start|>f(x=[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]])"
         "<|tool_call_end|>"), /* past the nesting limit */
    };
    for (size_t i = 0; i < sizeof broken / sizeof broken[0]; i++)
        expect_tagged(CORRAL_CALLS_PYTHON, "<|tool_call_start|>", broken[i], broken[i], "[]");
}

/* Cohere's answers: thinking to its closing mark, then text between marks that are not
 * content, or an action block of JSON calls (the name under "tool_name", the arguments under
 * "parameters"), malformed ones recovered as ollama recovers them, cut at every byte; a block
 * that holds no call stays content. */
static void test_cohere_answers(void **state)
{
    (void)state;
    static const corral_output_tags cohere = {"<|START_THINKING|>", "<|END_THINKING|>",
                                              "<|START_ACTION|>", false, "", CORRAL_CALLS_COHERE,
                                              false};
    json_t *tools = json_loads(weather_tools, 0, NULL);
    assert_non_null(tools);
    tags_parser t = {&cohere, true, tools};
    output_parse_expect(make_tags_parser, &t,
                        "Need the weather. \n<|END_THINKING|><|START_ACTION|>[\n\n    "
                        "{\"tool_call_id\": \"0\", \"tool_name\": \"get_weather\", \"parameters\": "
                        "{\"city\": \"Paris\", \"days\": 3}},\n\n    {\"tool_call_id\": \"1\", "
                        "\"tool_name\": \"plan\"}\n\n]<|END_ACTION|><|END_OF_TURN_TOKEN|>",
                        "", "Need the weather.",
                        "[{\"function\":{\"index\":0,\"name\":\"get_weather\",\"arguments\":{"
                        "\"city\":\"Paris\",\"days\":3}}},{\"function\":{\"index\":1,"
                        "\"name\":\"plan\",\"arguments\":{}}}]");
    output_parse_expect(make_tags_parser, &t,
                        "Sunny?<|END_THINKING|><|START_TEXT|>It is <b>sunny</b>.<|END_TEXT|>"
                        "<|END_OF_TURN_TOKEN|>",
                        "It is <b>sunny</b>.", "Sunny?", "[]");
    /* thinking off, the older models' response marks; an answer continued in its text */
    static const corral_output_tags plain = {"", "", "", false, "", CORRAL_CALLS_COHERE, false};
    t = (tags_parser){&plain, false, NULL};
    output_parse_expect(make_tags_parser, &t,
                        "<|START_RESPONSE|>Hi <|START_TEXT|<|END_RESPONSE|>", "Hi <|START_TEXT|",
                        "", "[]");
    output_parse_expect(make_tags_parser, &t, "tial answer.<|END_TEXT|>", "tial answer.", "",
                        "[]");
    output_parse_expect(make_tags_parser, &t, "<|START_ACTION|>[]<|END_ACTION|>",
                        "<|START_ACTION|>[]<|END_ACTION|>", "", "[]");
    /* a malformed array as ollama's parser recovers it (its tests' cases): each object on
     * its own, one that is not JSON passed over, no comma needed, braces in strings kept */
    t = (tags_parser){&cohere, true, tools};
    output_parse_expect(make_tags_parser, &t,
                        "plan<|END_THINKING|><|START_ACTION|>[\n    {\"tool_call_id\": \"0\", "
                        "\"tool_name\": \"set_alarm\", \"parameters\": {\"time\": 15:30}},    "
                        "{\"tool_call_id\": \"1\", \"tool_name\": \"get_weather\", "
                        "\"parameters\": {\"city\": \"Oslo\"}}\n]<|END_ACTION|>",
                        "", "plan",
                        "[{\"function\":{\"index\":0,\"name\":\"get_weather\",\"arguments\":{"
                        "\"city\":\"Oslo\"}}}]");
    output_parse_expect(make_tags_parser, &t,
                        "<|END_THINKING|><|START_ACTION|>[{\"tool_call_id\": \"0\", \"tool_name\": "
                        "\"a\", \"parameters\": {}}{\"tool_call_id\": \"1\", \"tool_name\": "
                        "\"b\", \"parameters\": {\"x\": \"{not json}\"}}]<|END_ACTION|>",
                        "", "",
                        "[{\"function\":{\"index\":0,\"name\":\"a\",\"arguments\":{}}},"
                        "{\"function\":{\"index\":1,\"name\":\"b\",\"arguments\":{"
                        "\"x\":\"{not json}\"}}}]");
    json_decref(tools);
    /* the objects whole without the list around them, beside other values, or cut off by
     * the answer's end */
    static const char *const recovered[] = {
        "<|START_ACTION|>{\"tool_name\": \"f\"}<|END_ACTION|>",
        "<|START_ACTION|>[{\"tool_name\": \"f\"}, 2, \"}{\"]<|END_ACTION|>",
        "<|START_ACTION|>[{\"tool_name\": \"f\"}",
        "<|START_ACTION|>[{\"tool_name\": \"f\"}, {\"tool_name\": \"g\", \"param",
    };
    for (size_t i = 0; i < sizeof recovered / sizeof recovered[0]; i++)
        expect_tagged(CORRAL_CALLS_COHERE, "<|START_ACTION|>", recovered[i], "",
                      "[{\"function\":{\"index\":0,\"name\":\"f\",\"arguments\":{}}}]");
    static const char *const broken[] = {
        "<|START_ACTION|>[]<|END_ACTION|>",
        "<|START_ACTION|>[!!!]<|END_ACTION|>",
        "<|START_ACTION|>[{\"tool_name\": 1}]<|END_ACTION|>",
        "<|START_ACTION|>[{\"tool_name\": \"f\", \"parameters\": [1]}]<|END_ACTION|>",
        "<|START_ACTION|>[{\"tool_name\": \"f\", \"parameters\": {\"x\": 1:2}}]<|END_ACTION|>",
        "<|START_ACTION|>[{\"tool_name\": \"f\", \"parameters\": {\"x\": \"}\"]",
    };
    for (size_t i = 0; i < sizeof broken / sizeof broken[0]; i++)
        expect_tagged(CORRAL_CALLS_COHERE, "<|START_ACTION|>", broken[i], broken[i], "[]");
}

/* Glimmer's answers as messages: to=self thinking (dropped when thinking is off), a call
 * to a tool (by its name or NS.NAME) as its ATEM block (values typed, their newlines kept; a
 * stray <|message|> in the invoke's name dropped),
 * to=user or no header content, a call block in a content message read as one when it names
 * a tool; cut at every byte. */
static void test_glimmer_answers(void **state)
{
    (void)state;
    static const corral_output_tags glimmer = {"to=self<|message|>", "<|eom|>",
                                               "<atem:function_calls>", false, "",
                                               CORRAL_CALLS_GLIMMER, false};
    json_t *tools = json_loads(weather_tools, 0, NULL);
    assert_non_null(tools);
    tags_parser t = {&glimmer, false, tools};
    output_parse_expect(
        make_tags_parser, &t,
        " to=self<|message|>Need data.\n<|eom|><|start|>assistant to=get_weather<|message|>"
        "<atem:function_calls>\n<atem:invoke name=\"get_weather\">\n<atem:parameter name=\"city\">"
        "San Francisco</atem:parameter>\n<atem:parameter name=\"days\">3</atem:parameter>\n"
        "<atem:parameter name=\"hours\">[1, 2]</atem:parameter>\n<atem:parameter name=\"note\">"
        "\n two lines \n</atem:parameter>\n</atem:invoke>\n"
        "</atem:function_calls><|eom|><|start|>assistant to=get_weather.get_weather<|message|>"
        "<atem:function_calls>\n<atem:invoke name=\"get_weather.get_weather\">\n</atem:invoke>\n"
        "</atem:function_calls><|eot|>",
        "", "Need data.\n",
        "[{\"function\":{\"index\":0,\"name\":\"get_weather\",\"arguments\":{"
        "\"city\":\"San Francisco\",\"days\":3,\"hours\":[1,2],\"note\":\"\\n two lines "
        "\\n\"}}},{\"function\":{"
        "\"index\":1,\"name\":\"get_weather\",\"arguments\":{}}}]");
    output_parse_expect(make_tags_parser, &t,
                        " to=self<|message|>Hm.<|eom|><|start|>assistant to=user<|message|>It is "
                        "<b>65F</b> <|eo.<|eot|>",
                        "It is <b>65F</b> <|eo.", "Hm.", "[]");
    /* a call block addressed to the user, or to nobody */
    output_parse_expect(make_tags_parser, &t,
                        " to=user<|message|>\n<atem:function_calls>\n<atem:invoke name=\"plan\">\n"
                        "<atem:parameter name=\"steps\">[]</atem:parameter>\n</atem:invoke>\n"
                        "</atem:function_calls>",
                        "", "",
                        "[{\"function\":{\"index\":0,\"name\":\"plan\",\"arguments\":{"
                        "\"steps\":[]}}}]");
    /* a value may hold the end marks' text (ollama's case): a call's block, or one in a
     * content message, ends at the first mark after its close */
    output_parse_expect(
        make_tags_parser, &t,
        " to=get_weather<|message|><atem:function_calls>\n<atem:invoke name=\"get_weather\">\n"
        "<atem:parameter name=\"city\">literal <|eot|> and <|start|>assistant to=user"
        "<|message|> text</atem:parameter>\n</atem:invoke>\n</atem:function_calls><|eom|>"
        "<|start|>assistant<|message|>\n<atem:function_calls>\n<atem:invoke name=\"plan\">\n"
        "<atem:parameter name=\"tags\">[\"<|eom|>\"]</atem:parameter>\n</atem:invoke>\n"
        "</atem:function_calls>\n<|eot|>",
        "", "",
        "[{\"function\":{\"index\":0,\"name\":\"get_weather\",\"arguments\":{"
        "\"city\":\"literal <|eot|> and <|start|>assistant to=user<|message|> text\"}}},"
        "{\"function\":{\"index\":1,\"name\":\"plan\",\"arguments\":{\"tags\":[\"<|eom|>\"]}}}]");
    static const char *const content[][2] = {
        {"Just text.", "Just text."},
        {"<|message|>Hi<|eot|>", "Hi"},
        {" to=user yes", " to=user yes"},
        {"today", "today"},
        {"<|start|>assis", "<|start|>assis"},
        /* a block naming no tool, another tool than the header's, or broken, stays content */
        {" to=other<|message|><atem:function_calls><atem:invoke name=\"other\"></atem:invoke>"
         "</atem:function_calls>",
         "<atem:function_calls><atem:invoke name=\"other\"></atem:invoke></atem:function_calls>"},
        {" to=plan<|message|><atem:function_calls><atem:invoke name=\"get_weather\">"
         "</atem:invoke></atem:function_calls><|eot|>",
         "<atem:function_calls><atem:invoke name=\"get_weather\"></atem:invoke>"
         "</atem:function_calls>"},
        {" to=plan<|message|><atem:function_calls><atem:invoke name=\"plan\"><atem:parameter "
         "name=\"steps\">[</atem:invoke></atem:function_calls>",
         "<atem:function_calls><atem:invoke name=\"plan\"><atem:parameter name=\"steps\">["
         "</atem:invoke></atem:function_calls>"},
        {" to=get_weather<|message|>no block<|eot|>", "no block"},
        {" to=user<|message|><atem:function_calls>", "<atem:function_calls>"},
        /* a block never closed runs to the answer's end, marks and all */
        {" to=user<|message|><atem:function_calls><|eot|>Hi", "<atem:function_calls><|eot|>Hi"},
    };
    for (size_t i = 0; i < sizeof content / sizeof content[0]; i++)
        output_parse_expect(make_tags_parser, &t, content[i][0], content[i][1], "", "[]");
    json_decref(tools);
    /* ollama's cases of a <|message|> the model wrote into the invoke name (inside it, for
     * its `">`, twice), dropped; one in a value kept; NS.NAME's values typed by NAME's schema */
    tools = json_loads("[{\"type\":\"function\",\"function\":{\"name\":\"read\",\"parameters\":"
                       "{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"},"
                       "\"lines\":{\"type\":\"integer\"}}}}}]",
                       0, NULL);
    assert_non_null(tools);
    t.tools = tools;
    static const char *const names[][2] = {
        {"read", "read<|message|>\">"},
        {"read", "read<|message|>"},
        {"read", "re<|message|>ad\">"},
        {"read", "read<|message|><|message|>\">"},
        {"read.read", "read.read\">"},
        {"read", "read.read<|message|>"},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char text[512];
        snprintf(text, sizeof text,
                 " to=%s<|message|><atem:function_calls>\n<atem:invoke name=\"%s<atem:parameter "
                 "name=\"path\">go.mod</atem:parameter>\n<atem:parameter name=\"lines\">3"
                 "</atem:parameter>\n</atem:invoke>\n</atem:function_calls><|eot|>",
                 names[i][0], names[i][1]);
        output_parse_expect(make_tags_parser, &t, text, "", "",
                            "[{\"function\":{\"index\":0,\"name\":\"read\",\"arguments\":{"
                            "\"path\":\"go.mod\",\"lines\":3}}}]");
    }
    output_parse_expect(make_tags_parser, &t,
                        " to=read<|message|><atem:function_calls>\n<atem:invoke name=\"read\">\n"
                        "<atem:parameter name=\"path\">keep <|message|> literal</atem:parameter>\n"
                        "</atem:invoke>\n</atem:function_calls><|eot|>",
                        "", "",
                        "[{\"function\":{\"index\":0,\"name\":\"read\",\"arguments\":{"
                        "\"path\":\"keep <|message|> literal\"}}}]");
    /* thinking off drops the thinking; without tools a call is content */
    corral_output_tags quiet = glimmer;
    quiet.think_open[0] = quiet.think_close[0] = quiet.tool_open[0] = '\0';
    t = (tags_parser){&quiet, false, NULL};
    output_parse_expect(make_tags_parser, &t,
                        " to=self<|message|>secret<|eom|><|start|>assistant to=get_weather"
                        "<|message|><atem:function_calls></atem:function_calls><|eot|>",
                        "<atem:function_calls></atem:function_calls>", "", "[]");
    json_decref(tools);
}

/* What is not a whole call in the syntax stays content, as a JSON call that does not parse. */
static void test_broken_tagged_calls_stay_content(void **state)
{
    (void)state;
    static const char *const xml[] = {
        "<tool_call>\n<function=f>\n<parameter=x>\n1\n</function>\n</tool_call>",
        "<tool_call>\n<function=f>\n</tool_call>",
        "<tool_call>\nf\n</tool_call>",
        "<tool_call>\n<function=f>\n",
    };
    for (size_t i = 0; i < sizeof xml / sizeof xml[0]; i++)
        expect_tagged(CORRAL_CALLS_XML_FUNCTION, "<tool_call>", xml[i], xml[i], "[]");
    static const char *const pairs[] = {
        "<tool_call>f<arg_key>x</arg_key></tool_call>",
        "<tool_call><arg_key>x</arg_key><arg_value>1</arg_value></tool_call>",
        "<tool_call>f<arg_key>x</arg_key>junk<arg_value>1</arg_value></tool_call>",
    };
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++)
        expect_tagged(CORRAL_CALLS_ARG_PAIRS, "<tool_call>", pairs[i], pairs[i], "[]");
    expect_tagged(CORRAL_CALLS_NAME_ARGS, "[TOOL_CALLS]", "[TOOL_CALLS]f[ARGS][1]",
                  "[TOOL_CALLS]f[ARGS][1]", "[]");
    expect_tagged(CORRAL_CALLS_DEEPSEEK, "<｜tool▁calls▁begin｜>",
                  "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f{}<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
                  "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f{}<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
                  "[]");
    static const char *const fenced[] = {
        /* the bare form is not the fenced one */
        "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>{}<｜tool▁call▁end｜>"
        "<｜tool▁calls▁end｜>",
        "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function f\n```json\n{}\n```"
        "<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
        "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f```json\n{}\n```"
        "<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
        "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n{}"
        "<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
        "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n{x:1}\n```"
        "<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
        "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n[1]\n```"
        "<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
        "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n{}\n```junk"
        "<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
        "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>\n```json\n{}\n```"
        "<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
    };
    for (size_t i = 0; i < sizeof fenced / sizeof fenced[0]; i++)
        expect_tagged(CORRAL_CALLS_DEEPSEEK_FENCED, "<｜tool▁calls▁begin｜>", fenced[i], fenced[i],
                      "[]");
    static const char *const kimi[] = {
        "<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0{}<|tool_call_end|>"
        "<|tool_calls_section_end|>",
        "<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>"
        "[1]<|tool_call_end|><|tool_calls_section_end|>",
        "<|tool_calls_section_begin|>junk<|tool_call_begin|>f<|tool_call_argument_begin|>{}"
        "<|tool_call_end|><|tool_calls_section_end|>",
        "<|tool_calls_section_begin|><|tool_call_begin|>f<|tool_call_argument_begin|>{}"
        "<|tool_calls_section_end|>",
        "<|tool_calls_section_begin|> <|tool_calls_section_end|>",
        "<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>{}",
    };
    for (size_t i = 0; i < sizeof kimi / sizeof kimi[0]; i++)
        expect_tagged(CORRAL_CALLS_KIMI, "<|tool_calls_section_begin|>", kimi[i], kimi[i], "[]");
    static const char *const minimax[] = {
        "<minimax:tool_call><invoke name=\"f\"><parameter name=\"x\">1</invoke>"
        "</minimax:tool_call>",
        "<minimax:tool_call><invoke name=\"f\"><parameter name=\"x\">1</parameter>"
        "</minimax:tool_call>",
        "<minimax:tool_call><invoke name=f><parameter name=\"x\">1</parameter></invoke>"
        "</minimax:tool_call>",
        "<minimax:tool_call><invoke name=\"\"></invoke></minimax:tool_call>",
        "<minimax:tool_call><invoke name=\"f\"><parameter name=\"\">1</parameter></invoke>"
        "</minimax:tool_call>",
        "<minimax:tool_call><invoke name=\"f\"></invoke>junk</minimax:tool_call>",
        "<minimax:tool_call>\n</minimax:tool_call>",
    };
    for (size_t i = 0; i < sizeof minimax / sizeof minimax[0]; i++)
        expect_tagged(CORRAL_CALLS_MINIMAX, "<minimax:tool_call>", minimax[i], minimax[i], "[]");
    static const char *const dsml[] = {
        ("<｜DSML｜function_calls><｜DSML｜invoke name=\"f\"><｜DSML｜parameter name=\"x\" "
         "string=\"true\">1</｜DSML｜invoke></｜DSML｜function_calls>"),
        "<｜DSML｜function_calls><invoke name=\"f\"></invoke></｜DSML｜function_calls>",
        "<｜DSML｜function_calls><｜DSML｜invoke name=\"f\"></｜DSML｜function_calls>",
    };
    for (size_t i = 0; i < sizeof dsml / sizeof dsml[0]; i++)
        expect_tagged(CORRAL_CALLS_DSML, "<｜DSML｜function_calls>", dsml[i], dsml[i], "[]");
}

/* Each syntax is read off the template that writes it, Jinja or Go. */
static void test_call_syntaxes_are_read_from_templates(void **state)
{
    (void)state;
    static const struct {
        const char *src;
        corral_call_syntax calls;
        const char *open;
    } cases[] = {
        {"{{- '<tool_call>\\n<function=' + tool_call.name + '>\\n' }}{{- '<parameter=' + k }}",
         CORRAL_CALLS_XML_FUNCTION, "<tool_call>"},
        {"{{ '<tool_call>' + tc.name }}{% for k, v in tc.arguments.items() %}<arg_key>{{ k }}"
         "</arg_key><arg_value>{{ v }}</arg_value>{% endfor %}",
         CORRAL_CALLS_ARG_PAIRS, "<tool_call>"},
        {"{{'<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>' + tool['function']['name'] + "
         "'<｜tool▁sep｜>' + tool['function']['arguments'] + '<｜tool▁call▁end｜>'}}",
         CORRAL_CALLS_DEEPSEEK, "<｜tool▁calls▁begin｜>"},
        /* DeepSeek R1's, the arguments fenced */
        {"{{'<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>' + tool['type'] + '<｜tool▁sep｜>' + "
         "tool['function']['name'] + '\\n' + '```json' + '\\n' + tool['function']['arguments'] "
         "+ '\\n' + '```' + '<｜tool▁call▁end｜>'}}",
         CORRAL_CALLS_DEEPSEEK_FENCED, "<｜tool▁calls▁begin｜>"},
        {"{{ '[TOOL_CALLS]' + tool.function.name + '[ARGS]' + arguments }}", CORRAL_CALLS_NAME_ARGS,
         "[TOOL_CALLS]"},
        {"{{ '[TOOL_CALLS][' + calls | tojson + ']' }}", CORRAL_CALLS_JSON, "[TOOL_CALLS]"},
        {"{{- '<|tool_call>call:' + function['name'] + '{' -}}{{- '}<tool_call|>' -}}",
         CORRAL_CALLS_GEMMA4, "<|tool_call>"},
        {"{{- '<start_function_call>call:' + function['name'] + '{' -}}{{- '<escape>' + value + "
         "'<escape>' -}}",
         CORRAL_CALLS_FUNCTIONGEMMA, "<start_function_call>"},
        /* Kimi K2's, MiniMax M2's and DeepSeek V3.2's and V4's, as their templates write them */
        {"<|tool_calls_section_begin|>{%- for tool_call in message['tool_calls'] -%}"
         "<|tool_call_begin|>{{ formatted_id }}<|tool_call_argument_begin|>{{ args }}"
         "<|tool_call_end|>{%- endfor -%}<|tool_calls_section_end|>",
         CORRAL_CALLS_KIMI, "<|tool_calls_section_begin|>"},
        {"{%- set toolcall_begin_token = '<minimax:tool_call>' -%}{{- '<invoke name=\"' + "
         "tool_call.name + '\">' }}{{- '<parameter name=\"' + k + '\">' }}",
         CORRAL_CALLS_MINIMAX, "<minimax:tool_call>"},
        {"{%- set dsml_token = '｜DSML｜' -%}{{- '\\n\\n<' + dsml_token + 'function_calls>\\n' -}}"
         "{{- '<' + dsml_token + 'invoke name=\"' + func['name'] + '\">\\n' -}}"
         "{%- if message['tool_calls'] -%}",
         CORRAL_CALLS_DSML, "<｜DSML｜function_calls>"},
        {"{%- set dsml_token = '｜DSML｜' -%}{{- '\\n\\n<' + dsml_token + 'tool_calls>\\n' -}}"
         "{{- '<' + dsml_token + 'invoke name=\"' + func['name'] + '\">\\n' -}}",
         CORRAL_CALLS_DSML, "<｜DSML｜tool_calls>"},
        {"{%- set ns_token = ']<]minimax[>[' -%}{%- set toolcall_begin_token = ns_token ~ "
         "'<tool_call>' -%}{{- ns_token + '<invoke name=\"' + tool_call.name + '\">' }}",
         CORRAL_CALLS_MINIMAX_M3, NS "<tool_call>"},
        /* North's and Command R7B's */
        {"{{- '<|START_ACTION|>[' -}}{\"tool_call_id\": \"{{ i }}\", \"tool_name\": "
         "\"{{ tc['function']['name'] }}\"",
         CORRAL_CALLS_COHERE, "<|START_ACTION|>"},
        /* LFM2.5's */
        {"{{- '<|tool_call_start|>[' + (tool_calls_ns.tool_calls | join(', ')) + "
         "']<|tool_call_end|>' -}}",
         CORRAL_CALLS_PYTHON, "<|tool_call_start|>"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        corral_output_tags tags;
        corral_template_jinja_output_tags(cases[i].src, strlen(cases[i].src), &tags);
        assert_int_equal(tags.calls, cases[i].calls);
        assert_string_equal(tags.tool_open, cases[i].open);
        assert_false(tags.tool_ends_thinking); /* none thinks in <think> */
    }
    /* Qwen3-Coder's calls with <think> thinking (Qwen 3.5's, Nemotron 3 Nano's): <tool_call>
     * ends the thinking, as llama.cpp reads them; Qwen3's JSON calls do not, nor GLM's */
    static const struct {
        const char *src;
        bool ends;
    } thinking[] = {
        {"<think>{{ r }}</think>{{- '<tool_call>\\n<function=' + tc.name + '>\\n' }}"
         "{{- '<parameter=' + k }}",
         true},
        {"<think>{{ r }}</think>{{- '<tool_call>\\n' }}{{- tool_call | tojson }}", false},
        {"<think>{{ r }}</think>{{ '<tool_call>' + tc.name }}<arg_key>{{ k }}</arg_key>"
         "<arg_value>{{ v }}</arg_value>",
         false},
    };
    for (size_t i = 0; i < sizeof thinking / sizeof thinking[0]; i++) {
        corral_output_tags tags;
        corral_template_jinja_output_tags(thinking[i].src, strlen(thinking[i].src), &tags);
        assert_string_equal(tags.think_open, "<think>");
        assert_string_equal(tags.tool_open, "<tool_call>");
        assert_int_equal(tags.tool_ends_thinking, thinking[i].ends);
    }
    const char *go = "{{ range .Messages }}{{ .Content }}{{ if .ToolCalls }}<tool_call>\n"
                     "{{ range .ToolCalls }}<function={{ .Function.Name }}>\n{{ range $k, $v := "
                     ".Function.Arguments }}<parameter={{ $k }}>\n{{ $v }}\n</parameter>\n"
                     "{{ end }}</function>\n{{ end }}</tool_call>{{ end }}{{ end }}";
    corral_error err = {{0}};
    corral_template *tmpl = corral_template_parse(CORRAL_TEMPLATE_GO, go, strlen(go), &err);
    assert_non_null(tmpl);
    corral_output_tags tags;
    corral_template_output_tags(tmpl, &tags);
    assert_int_equal(tags.calls, CORRAL_CALLS_XML_FUNCTION);
    assert_string_equal(tags.tool_open, "<tool_call>");
    corral_template_free(tmpl);

    const char *minimax = "{{ range .Messages }}{{ .Content }}{{ if .ToolCalls }}\n"
                          "<minimax:tool_call>\n{{ range .ToolCalls }}<invoke name=\""
                          "{{ .Function.Name }}\">\n{{ range $k, $v := .Function.Arguments }}"
                          "<parameter name=\"{{ $k }}\">{{ $v }}</parameter>\n{{ end }}</invoke>\n"
                          "{{ end }}</minimax:tool_call>{{ end }}{{ end }}";
    tmpl = corral_template_parse(CORRAL_TEMPLATE_GO, minimax, strlen(minimax), &err);
    assert_non_null(tmpl);
    corral_template_output_tags(tmpl, &tags);
    assert_int_equal(tags.calls, CORRAL_CALLS_MINIMAX);
    assert_string_equal(tags.tool_open, "<minimax:tool_call>");
    corral_template_free(tmpl);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_thinking_content_and_tool_calls_split_at_every_byte),
        cmocka_unit_test(test_two_tool_calls_in_a_row_are_both_parsed),
        cmocka_unit_test(test_output_starts_in_thinking_when_prompt_ended_with_open_tag),
        cmocka_unit_test(test_a_bare_closing_thinking_tag_at_the_start_is_not_content),
        cmocka_unit_test(test_text_that_only_looks_like_a_tag_stays_content),
        cmocka_unit_test(test_brace_tag_parses_json_only_at_the_start),
        cmocka_unit_test(test_tags_are_inferred_from_a_go_template),
        cmocka_unit_test(test_the_arguments_key_is_read_from_the_calls_a_template_writes),
        cmocka_unit_test(test_xml_function_calls_are_typed_by_the_schema),
        cmocka_unit_test(test_a_call_ends_the_thinking_in_the_families_whose_parsers_say_so),
        cmocka_unit_test(test_arg_pair_calls_are_typed_by_the_schema),
        cmocka_unit_test(test_deepseek_and_mistral_calls),
        cmocka_unit_test(test_gemma4_calls),
        cmocka_unit_test(test_functiongemma_calls),
        cmocka_unit_test(test_kimi_calls),
        cmocka_unit_test(test_minimax_calls_are_typed_by_the_schema),
        cmocka_unit_test(test_dsml_calls),
        cmocka_unit_test(test_minimax_m3_calls),
        cmocka_unit_test(test_python_calls),
        cmocka_unit_test(test_cohere_answers),
        cmocka_unit_test(test_glimmer_answers),
        cmocka_unit_test(test_broken_tagged_calls_stay_content),
        cmocka_unit_test(test_call_syntaxes_are_read_from_templates),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

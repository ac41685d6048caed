/*
 * Forced tool calls' grammars (src/server/core/tool_grammar.c): for each tag style a
 * template can have (bare JSON, <tool_call>...</tool_call>, [TOOL_CALLS] and its list), the
 * grammar accepts a call of an allowed tool, whose text the output parser then reads back as
 * exactly that call, and refuses prose, another tool's name, arguments against the tool's
 * schema and anything after the call. Also the checks of a forced choice against the tools.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "corral/engine.h"
#include "server/core/chat_request.h"
#include "gguf.h"
#include "grammar.h"
#include "server/core/tool_grammar.h"
#include "template/cohere.h"
#include "template/glimmer.h"
#include "template/harmony.h"
#include "template/renderer.h"
#include "template/template.h"

static const char tools_json[] =
    "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"parameters\":"
    "{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"},"
    "\"unit\":{\"enum\":[\"C\",\"F\"]}},\"required\":[\"city\"]}}},"
    " {\"type\":\"function\",\"function\":{\"name\":\"now\"}},"
    " {\"type\":\"function\",\"function\":{\"name\":\"plan\",\"parameters\":"
    "{\"type\":\"object\",\"properties\":{\"steps\":{\"type\":\"array\",\"items\":"
    "{\"$ref\":\"#/$defs/step\"}}},\"required\":[\"steps\"],\"$defs\":{\"step\":"
    "{\"type\":\"object\",\"properties\":{\"do\":{\"type\":\"string\"}},"
    "\"required\":[\"do\"]}}}}},"
    " {\"type\":\"function\",\"function\":{\"name\":\"book\",\"parameters\":"
    "{\"type\":\"object\",\"properties\":{\"guests\":{\"type\":\"integer\"},"
    "\"vip\":{\"type\":\"boolean\"},\"price\":{\"type\":\"number\"},"
    "\"note\":{\"type\":[\"string\",\"null\"],\"maxLength\":8},"
    "\"code\":{\"type\":[\"string\",\"integer\"]},"
    "\"ids\":{\"anyOf\":[{\"type\":\"string\"},{\"type\":\"array\",\"items\":{\"type\":\"integer\"}}]},"
    "\"meta\":{\"type\":\"object\",\"properties\":{\"k\":{\"type\":\"string\"}}}},"
    "\"required\":[\"guests\"]}}}]";

static json_t *load(const char *text)
{
    json_error_t jerr;
    json_t *value = json_loads(text, 0, &jerr);
    if (!value)
        fail_msg("bad test JSON %s: %s", text, jerr.text);
    return value;
}

static corral_output_tags tags_of(const char *tool_open, const char *arguments_key)
{
    corral_output_tags tags = {0};
    strcpy(tags.tool_open, tool_open);
    strcpy(tags.tool_arguments, arguments_key);
    return tags;
}

static corral_output_tags syntax_tags(const char *tool_open, corral_call_syntax calls)
{
    corral_output_tags tags = tags_of(tool_open, "");
    tags.calls = calls;
    return tags;
}

static char *last_gbnf; /* the grammar of the latest check, printed when it fails */

static corral_grammar *tool_grammar(const corral_output_tags *tags, const char *name)
{
    json_t *tools = load(tools_json);
    corral_error err = {{0}};
    char *gbnf = tool_grammar_create(tools, name, tags, &err);
    json_decref(tools);
    if (!gbnf)
        fail_msg("%s: %s", tags->tool_open, err.message);
    corral_grammar *g = corral_grammar_create(gbnf, NULL, &err);
    if (!g)
        fail_msg("%s: %s", gbnf, err.message);
    free(last_gbnf);
    last_gbnf = gbnf;
    return g;
}

/* The calls the output parser reads out of text under tags, as a JSON array. */
static json_t *parsed_calls(const corral_output_tags *tags, const char *text)
{
    corral_output_parser *p = corral_output_parser_create(tags, false, 1 << 16);
    assert_non_null(p);
    json_t *tools = load(tools_json); /* the tagged syntaxes type arguments by them */
    corral_output_parser_set_tools(p, tools);
    corral_output_delta d;
    corral_error err = {{0}};
    assert_true(corral_output_parser_feed(p, text, strlen(text), true, &d, &err));
    assert_int_equal(d.content_len, 0);
    json_t *calls = json_deep_copy(d.tool_calls);
    corral_output_parser_free(p);
    json_decref(tools);
    return calls;
}

/* Each of valid accepted and parsed back as the call expected[i] ({"name","arguments"}),
 * each of invalid refused (NULL-terminated lists). */
static void check(const corral_output_tags *tags, const char *name, const char *const *valid,
                  const char *const *expected, const char *const *invalid)
{
    corral_grammar *g = tool_grammar(tags, name);
    for (size_t i = 0; valid[i]; i++) {
        if (!corral_grammar_accepts(g, valid[i], strlen(valid[i])))
            fail_msg("tag %s refused %s under\n%s", tags->tool_open, valid[i], last_gbnf);
        json_t *calls = parsed_calls(tags, valid[i]);
        json_t *want = load(expected[i]);
        assert_int_equal(json_array_size(calls), 1);
        json_t *fn = json_object_get(json_array_get(calls, 0), "function");
        if (!json_equal(json_object_get(fn, "name"), json_object_get(want, "name")) ||
            !json_equal(json_object_get(fn, "arguments"), json_object_get(want, "arguments")))
            fail_msg("%s parsed as %s", valid[i], json_dumps(fn, JSON_COMPACT));
        json_decref(want);
        json_decref(calls);
    }
    for (; *invalid; invalid++)
        if (corral_grammar_accepts(g, *invalid, strlen(*invalid)))
            fail_msg("tag %s accepted %s under\n%s", tags->tool_open, *invalid, last_gbnf);
    corral_grammar_free(g);
}

#define LIST(...) ((const char *const[]){__VA_ARGS__, NULL})

static void test_bare_json_calls_any_tool(void **state)
{
    (void)state;
    corral_output_tags tags = tags_of("{", "");
    check(&tags, NULL,
          LIST("{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\"}}",
               "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\", \"unit\": \"C\"}}",
               "{\"name\":\"now\",\"arguments\":{}}",
               "{\"name\":\"now\",\"arguments\":{\"anything\":[1,2]}}",
               "{\"name\":\"plan\",\"arguments\":{\"steps\":[{\"do\":\"a\"},{\"do\":\"b\"}]}}"),
          LIST("{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\"}}",
               "{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Oslo\",\"unit\":\"C\"}}",
               "{\"name\":\"now\",\"arguments\":{}}",
               "{\"name\":\"now\",\"arguments\":{\"anything\":[1,2]}}",
               "{\"name\":\"plan\",\"arguments\":{\"steps\":[{\"do\":\"a\"},{\"do\":\"b\"}]}}"),
          LIST("The weather in Paris is fine.", "",
               "{\"name\":\"get_time\",\"arguments\":{}}",
               "{\"name\":\"get_weather\",\"arguments\":{}}",
               "{\"name\":\"get_weather\",\"arguments\":{\"city\":3}}",
               "{\"name\":\"get_weather\",\"arguments\":{\"city\":\"P\",\"unit\":\"K\"}}",
               "{\"name\":\"get_weather\",\"arguments\":{\"city\":\"P\",\"x\":1}}",
               "{\"name\":\"get_weather\",\"parameters\":{\"city\":\"Paris\"}}",
               "{\"name\":\"plan\",\"arguments\":{\"steps\":[{\"go\":\"a\"}]}}",
               "{\"name\":\"now\",\"arguments\":{}} and more",
               "[{\"name\":\"now\",\"arguments\":{}}]",
               "{\"name\":\"now\",\"arguments\":{}}{\"name\":\"now\",\"arguments\":{}}"));
}

static void test_xml_tag_named_tool_in_the_templates_shape(void **state)
{
    (void)state;
    corral_output_tags tags = tags_of("<tool_call>", "parameters");
    check(&tags, "get_weather",
          LIST("<tool_call>\n{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}\n"
               "</tool_call>",
               "<tool_call>{\"name\":\"get_weather\",\"parameters\":{\"city\":\"x\"}}</tool_call>"),
          LIST("{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\"}}",
               "{\"name\":\"get_weather\",\"arguments\":{\"city\":\"x\"}}"),
          LIST("{\"name\":\"get_weather\",\"parameters\":{\"city\":\"Paris\"}}",
               "<tool_call>{\"name\":\"now\",\"parameters\":{}}</tool_call>",
               "<tool_call>{\"name\":\"get_weather\",\"arguments\":{\"city\":\"x\"}}</tool_call>",
               "<tool_call>{\"name\":\"get_weather\",\"parameters\":{\"city\":\"x\"}}",
               "Sure! <tool_call>{\"name\":\"get_weather\",\"parameters\":{\"city\":\"x\"}}"
               "</tool_call>",
               "<tool_call>{\"name\":\"get_weather\",\"parameters\":{\"city\":\"x\"}}</tool_call>"
               "<tool_call>{\"name\":\"get_weather\",\"parameters\":{\"city\":\"y\"}}</tool_call>"));
}

static void test_mistral_tag_takes_a_list_of_one(void **state)
{
    (void)state;
    corral_output_tags tags = tags_of("[TOOL_CALLS]", "arguments");
    check(&tags, "now",
          LIST("[TOOL_CALLS][{\"name\":\"now\",\"arguments\":{}}]",
               "[TOOL_CALLS] [{\"name\": \"now\", \"arguments\": {\"tz\": \"UTC\"}}]"),
          LIST("{\"name\":\"now\",\"arguments\":{}}",
               "{\"name\":\"now\",\"arguments\":{\"tz\":\"UTC\"}}"),
          LIST("[TOOL_CALLS]{\"name\":\"now\",\"arguments\":{}}",
               "[TOOL_CALLS][]",
               "[TOOL_CALLS][{\"name\":\"now\",\"arguments\":{}},{\"name\":\"now\",\"arguments\":{}}]",
               "[TOOL_CALLS][{\"name\":\"get_weather\",\"arguments\":{\"city\":\"x\"}}]",
               "It is noon."));
    /* ollama's Go template for Mistral opens the list in the tag itself: the tag as it is */
    corral_output_tags go = tags_of("[TOOL_CALLS] [", "arguments");
    check(&go, "now", LIST("[TOOL_CALLS] [{\"name\":\"now\",\"arguments\":{}}"),
          LIST("{\"name\":\"now\",\"arguments\":{}}"),
          LIST("[TOOL_CALLS] [[{\"name\":\"now\",\"arguments\":{}}]",
               "[TOOL_CALLS][{\"name\":\"now\",\"arguments\":{}}"));
}

/* Qwen3-Coder's, Qwen 3.5's and Nemotron 3's <function=...> calls: each value raw text
 * between newlines, typed back by the tool's schema; a string may hold any text but the tags
 * that would end it, and never one the parser would read as another type. */
static void test_xml_function_calls(void **state)
{
    (void)state;
    corral_output_tags tags = syntax_tags("<tool_call>", CORRAL_CALLS_XML_FUNCTION);
#define XML(name, params) "<tool_call>\n<function=" name ">\n" params "</function>\n</tool_call>"
#define P(key, value) "<parameter=" key ">\n" value "\n</parameter>\n"
    check(&tags, NULL,
          LIST(XML("get_weather", P("city", "Paris")),
               XML("get_weather", P("city", "New York</div>\n<b>") P("unit", "F")),
               XML("get_weather", P("city", "")),
               XML("get_weather", P("city", "nullify")),
               XML("now", ""),
               XML("plan", P("steps", "[{\"do\": \"a\\u003c/b>\"}, {\"do\":\"<b<\"}]")),
               XML("book", P("guests", "-3") P("vip", "true") P("price", "2.5e3")
                               P("note", "null") P("code", "x7") P("meta", "{\"k\": \"v\"}")),
               XML("book", P("guests", "0") P("note", "a b") P("code", "42")),
               XML("book", P("guests", "1") P("code", "true")), /* no boolean: a string */
               XML("book", P("guests", "1") P("ids", "[1, 2]")),
               XML("book", P("guests", "1") P("ids", "a, b"))),
          LIST("{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\"}}",
               "{\"name\":\"get_weather\",\"arguments\":{\"city\":\"New York</div>\\n<b>\","
               "\"unit\":\"F\"}}",
               "{\"name\":\"get_weather\",\"arguments\":{\"city\":\"\"}}",
               "{\"name\":\"get_weather\",\"arguments\":{\"city\":\"nullify\"}}",
               "{\"name\":\"now\",\"arguments\":{}}",
               "{\"name\":\"plan\",\"arguments\":{\"steps\":[{\"do\":\"a</b>\"},{\"do\":\"<b<\"}]}}",
               "{\"name\":\"book\",\"arguments\":{\"guests\":-3,\"vip\":true,\"price\":2500,"
               "\"note\":null,\"code\":\"x7\",\"meta\":{\"k\":\"v\"}}}",
               "{\"name\":\"book\",\"arguments\":{\"guests\":0,\"note\":\"a b\",\"code\":42}}",
               "{\"name\":\"book\",\"arguments\":{\"guests\":1,\"code\":\"true\"}}",
               "{\"name\":\"book\",\"arguments\":{\"guests\":1,\"ids\":[1,2]}}",
               "{\"name\":\"book\",\"arguments\":{\"guests\":1,\"ids\":\"a, b\"}}"),
          LIST("", "Sure.", XML("get_time", P("zone", "UTC")),
               XML("get_weather", ""),                              /* city is required */
               XML("get_weather", P("city", "Paris") P("city", "Oslo")),
               XML("get_weather", P("unit", "C") P("city", "Paris")), /* the schema's order */
               XML("get_weather", P("city", "Paris") P("unit", "K")),
               XML("get_weather", P("city", "Paris") P("country", "FR")),
               XML("get_weather", P("city", "null")),               /* reads back as null */
               XML("get_weather", P("city", "NULL")),
               XML("get_weather", P("city", "Pa</parameter>ris")),
               XML("get_weather", P("city", "Pa</function>ris")),
               "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis</tool_call>",
               "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n",
               XML("get_weather", P("city", "Paris")) "\nmore",
               XML("plan", P("steps", "[{\"do\": \"a</b>\"}]")),   /* '<' escaped in JSON */
               XML("plan", P("steps", "[{\"go\": \"a\"}]")),
               XML("book", P("guests", "three")), XML("book", P("guests", "2.5")),
               XML("book", P("guests", "1") P("vip", "yes")),
               XML("book", P("guests", "1") P("note", "too long a note")),
               XML("book", P("guests", "1") P("ids", "[\"a\"]")), /* an array, of strings */
               XML("book", P("guests", "1") P("price", "1e999"))));
#undef P
#undef XML
}

/* A long value is many steps of the same rules, not a deeper stack. */
static void test_xml_function_long_value(void **state)
{
    (void)state;
    corral_output_tags tags = syntax_tags("<tool_call>", CORRAL_CALLS_XML_FUNCTION);
    corral_grammar *g = tool_grammar(&tags, "get_weather");
    size_t n = 20000;
    char *text = malloc(n + 256);
    assert_non_null(text);
    int at = sprintf(text, "<tool_call>\n<function=get_weather>\n<parameter=city>\n");
    for (size_t i = 0; i < n; i++)
        text[at + i] = "a</par>\n "[i % 9];
    sprintf(text + at + n, "\n</parameter>\n</function>\n</tool_call>");
    assert_true(corral_grammar_accepts(g, text, strlen(text)));
    free(text);
    corral_grammar_free(g);
}

/* GLM-4.5's and later calls: the name, then <arg_key>/<arg_value> pairs, on lines of their
 * own (4.5) or not (4.7); a string value neither starts nor ends with the newline the parser
 * would drop. */
static void test_arg_pairs_calls(void **state)
{
    (void)state;
    corral_output_tags tags = syntax_tags("<tool_call>", CORRAL_CALLS_ARG_PAIRS);
#define KV(key, value) "<arg_key>" key "</arg_key><arg_value>" value "</arg_value>"
    check(&tags, "get_weather",
          LIST("<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n"
               "</tool_call>",
               "<tool_call>get_weather" KV("city", "Rue </arg_key> 3\nB") KV("unit", "C")
               "</tool_call>"),
          LIST("{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\"}}",
               "{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Rue </arg_key> 3\\nB\","
               "\"unit\":\"C\"}}"),
          LIST("<tool_call>now</tool_call>", "<tool_call>get_weather</tool_call>",
               "<tool_call>get_weather" KV("city", "\nParis") "</tool_call>",
               "<tool_call>get_weather" KV("city", "Paris\n") "</tool_call>",
               "<tool_call>get_weather" KV("city", "Null") "</tool_call>",
               "<tool_call>get_weather" KV("city", "a</tool_call>b") "</tool_call>",
               "<tool_call>get_weather" KV("city", "Paris"),
               "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</tool_call>"));
    check(&tags, "book",
          LIST("<tool_call>book" KV("guests", "12") KV("vip", "false") KV("note", "")
               KV("code", "A-1") "</tool_call>"),
          LIST("{\"name\":\"book\",\"arguments\":{\"guests\":12,\"vip\":false,\"note\":\"\","
               "\"code\":\"A-1\"}}"),
          LIST("<tool_call>book" KV("guests", "12") KV("ids", "[\"a\"]") "</tool_call>",
               "<tool_call>book" KV("guests", " 12") "</tool_call>"));
#undef KV
}

/* A block of one DeepSeek call into out (512 bytes): the call's text (form: a format of its
 * name and arguments) between the call tokens, then end (the block's end, or not). */
static const char *ds_block(char out[512], const char *form, const char *name, const char *args,
                            const char *end)
{
    char call[400];
    snprintf(call, sizeof call, form, name, args);
    snprintf(out, 512, "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>%s<｜tool▁call▁end｜>%s", call,
             end);
    return out;
}

/*
 * DeepSeek's call tokens in V3.1's form (the name, then the arguments' JSON) and in V3's
 * older one (R1, Cogito v2: the type "function", the name, then the JSON in a fence): a raw
 * "<｜" in a string could end the call early, so JSON's \u003c stands for its '<'. Each
 * form's grammar refuses the other's call, and the fenced one another type word or fence.
 */
static void test_deepseek_calls(void **state)
{
    (void)state;
    static const struct {
        corral_call_syntax calls;
        const char *form;
        const char *wrong[3];
    } forms[] = {
        {CORRAL_CALLS_DEEPSEEK, "%s<｜tool▁sep｜>%s", {"function<｜tool▁sep｜>%s\n```json\n%s\n```"}},
        {CORRAL_CALLS_DEEPSEEK_FENCED, "function<｜tool▁sep｜>%s\n```json\n%s\n```",
         {"%s<｜tool▁sep｜>%s", "tool<｜tool▁sep｜>%s\n```json\n%s\n```",
          "function<｜tool▁sep｜>%s\n```json\n%s"}},
    };
    static const char end[] = "<｜tool▁calls▁end｜>";
    for (size_t f = 0; f < sizeof forms / sizeof forms[0]; f++) {
        corral_output_tags tags = syntax_tags("<｜tool▁calls▁begin｜>", forms[f].calls);
        const char *form = forms[f].form;
        char b[16][512];
        check(&tags, "get_weather",
              LIST(ds_block(b[0], form, "get_weather", "{\"city\": \"Paris\"}", end),
                   ds_block(b[1], form, "get_weather",
                            "{\n  \"city\": \"\\u003c｜x `\",\n  \"unit\": \"F\"\n}", end)),
              LIST("{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\"}}",
                   "{\"name\":\"get_weather\",\"arguments\":{\"city\":\"<｜x `\",\"unit\":\"F\"}}"),
              LIST(ds_block(b[2], form, "now", "{}", end),
                   ds_block(b[3], form, "get_weather", "{}", end),
                   ds_block(b[4], form, "get_weather", "{\"city\": \"<｜tool▁call▁end｜>\"}", end),
                   ds_block(b[5], form, "get_weather", "{\"city\": \"<｜x\"}", end),
                   ds_block(b[6], form, "get_weather", "{\"city\": \"Paris}", end),
                   ds_block(b[7], form, "get_weather", "{\"city\": \"Paris\"}", ""),
                   "{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\"}}"));
        for (size_t w = 0; w < 3 && forms[f].wrong[w]; w++)
            check(&tags, "get_weather", LIST(b[0]), LIST("{\"name\":\"get_weather\",\"arguments\":"
                                                         "{\"city\":\"Paris\"}}"),
                  LIST(ds_block(b[8 + w], forms[f].wrong[w], "get_weather",
                                "{\"city\": \"Paris\"}", end)));
        check(&tags, NULL,
              LIST(ds_block(b[12], form, "now", "{}", end),
                   ds_block(b[13], form, "plan", "{\"steps\": [{\"do\": \"a\"}]}", end)),
              LIST("{\"name\":\"now\",\"arguments\":{}}",
                   "{\"name\":\"plan\",\"arguments\":{\"steps\":[{\"do\":\"a\"}]}}"),
              LIST(ds_block(b[14], form, "plan", "{}", end),
                   ds_block(b[15], form, "get_time", "{}", end)));
    }
}

/* Kimi K2's call tokens: the name inside the call's id (functions.NAME:IDX), the arguments'
 * JSON after the argument token; a raw "<|" in a string could end the call early. */
static void test_kimi_calls(void **state)
{
    (void)state;
    corral_output_tags tags = syntax_tags("<|tool_calls_section_begin|>", CORRAL_CALLS_KIMI);
#define KIMI(name, args)                                                                        \
    "<|tool_calls_section_begin|><|tool_call_begin|>functions." name                            \
    ":0<|tool_call_argument_begin|>" args "<|tool_call_end|><|tool_calls_section_end|>"
    check(&tags, "get_weather",
          LIST(KIMI("get_weather", "{\"city\": \"Paris\"}"),
               KIMI("get_weather", "{\"city\":\"\\u003c|x\",\"unit\":\"F\"}")),
          LIST("{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\"}}",
               "{\"name\":\"get_weather\",\"arguments\":{\"city\":\"<|x\",\"unit\":\"F\"}}"),
          LIST(KIMI("now", "{}"), KIMI("get_weather", "{}"),
               KIMI("get_weather", "{\"city\": \"<|tool_call_end|>\"}"),
               KIMI("get_weather", "{\"city\": \"Paris}"),
               "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0"
               "<|tool_call_argument_begin|>{\"city\": \"Paris\"}<|tool_call_end|>",
               "{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\"}}"));
    check(&tags, NULL, LIST(KIMI("now", "{}"), KIMI("plan", "{\"steps\": []}")),
          LIST("{\"name\":\"now\",\"arguments\":{}}",
               "{\"name\":\"plan\",\"arguments\":{\"steps\":[]}}"),
          LIST(KIMI("plan", "{}"), KIMI("get_time", "{}")));
#undef KIMI
}

/* MiniMax M2's <invoke name="NAME"> with a <parameter name="KEY"> a property, values typed
 * back by the schema as Qwen3-Coder's are, none holding a tag that would end it. */
static void test_minimax_calls(void **state)
{
    (void)state;
    corral_output_tags tags = syntax_tags("<minimax:tool_call>", CORRAL_CALLS_MINIMAX);
#define MM(name, params) \
    "<minimax:tool_call>\n<invoke name=\"" name "\">" params "\n</invoke>\n</minimax:tool_call>"
#define P(key, value) "\n<parameter name=\"" key "\">" value "</parameter>"
    check(&tags, NULL,
          LIST(MM("get_weather", P("city", "Paris")),
               MM("get_weather", P("city", "New York</div>") P("unit", "F")),
               MM("book", P("guests", "-3") P("vip", "true") P("note", "null") P("code", "x7")),
               MM("plan", P("steps", "[{\"do\": \"a\\u003c/b>\"}]"))),
          LIST("{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\"}}",
               "{\"name\":\"get_weather\",\"arguments\":{\"city\":\"New York</div>\","
               "\"unit\":\"F\"}}",
               "{\"name\":\"book\",\"arguments\":{\"guests\":-3,\"vip\":true,\"note\":null,"
               "\"code\":\"x7\"}}",
               "{\"name\":\"plan\",\"arguments\":{\"steps\":[{\"do\":\"a</b>\"}]}}"),
          LIST("", MM("get_time", P("zone", "UTC")), MM("get_weather", ""),
               MM("get_weather", P("unit", "C") P("city", "Paris")),
               MM("get_weather", P("city", "null")),
               MM("get_weather", P("city", "Pa</parameter>ris")),
               MM("get_weather", P("city", "Pa</invoke>ris")),
               MM("book", P("guests", "three")),
               "<minimax:tool_call>\n<invoke name=\"get_weather\">" P("city", "Paris")
               "\n</invoke>"));
#undef P
#undef MM
}

/* Mistral's [TOOL_CALLS]NAME[ARGS]{JSON}, as its templates since Magistral write calls. */
static void test_name_args_calls(void **state)
{
    (void)state;
    corral_output_tags tags = syntax_tags("[TOOL_CALLS]", CORRAL_CALLS_NAME_ARGS);
    check(&tags, "get_weather",
          LIST("[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\"}",
               "[TOOL_CALLS]get_weather[ARGS]{\"city\":\"<b>\",\"unit\":\"C\"}"),
          LIST("{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\"}}",
               "{\"name\":\"get_weather\",\"arguments\":{\"city\":\"<b>\",\"unit\":\"C\"}}"),
          LIST("[TOOL_CALLS]now[ARGS]{}", "[TOOL_CALLS]get_weather[ARGS]{}",
               "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris}",
               "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\"} more",
               "[TOOL_CALLS][{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\"}}]"));
}

/* DeepSeek V3.2's and V4's DSML invoke: each parameter says its type, string="true" before a
 * string's raw text (kept as it is, newlines too), "false" before any value as JSON. */
static void test_dsml_calls(void **state)
{
    (void)state;
#define D "｜DSML｜"
#define DSML(name, params) \
    "<" D "function_calls>\n<" D "invoke name=\"" name "\">\n" params "</" D "invoke>\n</" D \
    "function_calls>"
#define S(key, value) "<" D "parameter name=\"" key "\" string=\"true\">" value "</" D "parameter>\n"
#define J(key, value) "<" D "parameter name=\"" key "\" string=\"false\">" value "</" D "parameter>\n"
    corral_output_tags tags = syntax_tags("<" D "function_calls>", CORRAL_CALLS_DSML);
    check(&tags, NULL,
          LIST(DSML("get_weather", S("city", "Paris")),
               DSML("get_weather", S("city", "null\n<b>") S("unit", "F")),
               DSML("get_weather", S("city", "\nParis\n")),
               DSML("get_weather", J("city", "\"Oslo\"")),
               DSML("now", ""),
               DSML("book", J("guests", "3") J("vip", "true") J("price", "2.5") S("note", "42")
                                J("code", "7") J("ids", "[1, 2]") J("meta", "{\"k\": \"v\"}"))),
          LIST("{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\"}}",
               "{\"name\":\"get_weather\",\"arguments\":{\"city\":\"null\\n<b>\",\"unit\":\"F\"}}",
               "{\"name\":\"get_weather\",\"arguments\":{\"city\":\"\\nParis\\n\"}}",
               "{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Oslo\"}}",
               "{\"name\":\"now\",\"arguments\":{}}",
               "{\"name\":\"book\",\"arguments\":{\"guests\":3,\"vip\":true,\"price\":2.5,"
               "\"note\":\"42\",\"code\":7,\"ids\":[1,2],\"meta\":{\"k\":\"v\"}}}"),
          LIST("", DSML("get_time", ""), DSML("get_weather", ""), /* city is required */
               DSML("get_weather", J("city", "3")), DSML("get_weather", S("unit", "C")),
               DSML("get_weather", S("city", "Paris") S("unit", "K")),
               DSML("get_weather", S("city", "Pa</" D "parameter>ris")),
               DSML("get_weather", S("city", "Pa</" D "function_calls>ris")),
               DSML("get_weather", J("city", "\"Pa<" D "x\"")),
               DSML("book", S("guests", "3")), DSML("book", J("guests", "three")),
               "<" D "function_calls>\n<" D "invoke name=\"get_weather\">\n<" D
               "parameter name=\"city\" string=\"true\">Paris</" D "invoke>\n</" D
               "function_calls>",
               "<" D "function_calls>\n<" D "invoke name=\"get_weather\">\n" S("city", "Paris")));
    /* V4 names the block tool_calls */
    corral_output_tags v4 = syntax_tags("<" D "tool_calls>", CORRAL_CALLS_DSML);
    check(&v4, "get_weather",
          LIST("<" D "tool_calls>\n<" D "invoke name=\"get_weather\">\n" S("city", "Paris")
               "</" D "invoke>\n</" D "tool_calls>"),
          LIST("{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\"}}"),
          LIST(DSML("get_weather", S("city", "Paris"))));
#undef J
#undef S
#undef DSML
#undef D
}

/* MiniMax M3's elements, every tag after the namespace mark: a value is an element named by
 * its key, raw text typed by the schema there, an array's items <item> elements, an object's
 * properties elements of their own (no JSON). */
static void test_minimax_m3_calls(void **state)
{
    (void)state;
#define N "]<]minimax[>["
#define M3(name, params) \
    N "<tool_call>\n" N "<invoke name=\"" name "\">" params N "</invoke>\n" N "</tool_call>"
#define E(key, value) N "<" key ">" value N "</" key ">"
    corral_output_tags tags = syntax_tags(N "<tool_call>", CORRAL_CALLS_MINIMAX_M3);
    check(&tags, NULL,
          LIST(M3("get_weather", E("city", "Paris")),
               M3("get_weather", E("city", "New York <b>\n[1]") E("unit", "C")),
               M3("now", ""),
               M3("plan", E("steps", E("item", E("do", "a")) E("item", E("do", "b")))),
               M3("plan", E("steps", "")),
               M3("book", E("guests", "3") E("vip", "true") E("price", "2.5")
                              E("meta", E("k", "v"))),
               M3("book", E("guests", "3") E("ids", "a, b") E("meta", ""))),
          LIST("{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\"}}",
               "{\"name\":\"get_weather\",\"arguments\":{\"city\":\"New York <b>\\n[1]\","
               "\"unit\":\"C\"}}",
               "{\"name\":\"now\",\"arguments\":{}}",
               "{\"name\":\"plan\",\"arguments\":{\"steps\":[{\"do\":\"a\"},{\"do\":\"b\"}]}}",
               "{\"name\":\"plan\",\"arguments\":{\"steps\":[]}}",
               "{\"name\":\"book\",\"arguments\":{\"guests\":3,\"vip\":true,\"price\":2.5,"
               "\"meta\":{\"k\":\"v\"}}}",
               "{\"name\":\"book\",\"arguments\":{\"guests\":3,\"ids\":\"a, b\",\"meta\":{}}}"),
          LIST("", M3("get_time", ""), M3("get_weather", ""),   /* city is required */
               M3("get_weather", E("city", "null")), M3("get_weather", E("city", "\nParis")),
               M3("get_weather", E("city", "Pa" N "ris")),
               M3("get_weather", E("city", "Paris") E("unit", "K")),
               N "<tool_call>\n" N "<invoke name=\"get_weather\">" N "<city>Paris" N
               "</invoke>\n" N "</tool_call>",
               N "<tool_call>\n" N "<invoke name=\"get_weather\">" E("city", "Paris"),
               M3("plan", E("steps", E("item", E("go", "a")))),
               M3("plan", E("steps", "[{\"do\": \"a\"}]")),         /* elements, not JSON */
               M3("book", E("guests", "three")),
               M3("book", E("guests", "3") E("ids", E("item", "1"))), /* items read as text */
               M3("plan", E("steps", E("item", ""))))); /* do is required */
#undef E
#undef M3
#undef N
}

/* LFM2's [NAME(KEY=VALUE,...)] and Olmo 3's NAME(KEY=VALUE, ...): keys sorted, as Corral's
 * renderers write them, each value JSON that reads the same as a Python literal (no \/, \b or
 * \f escapes, which Python keeps as written; no raw '<' before what closes the block). */
static void test_python_calls(void **state)
{
    (void)state;
    corral_output_tags lfm2 = syntax_tags("<|tool_call_start|>", CORRAL_CALLS_PYTHON);
#define LFM(call) "<|tool_call_start|>[" call "]<|tool_call_end|>"
    check(&lfm2, NULL,
          LIST(LFM("get_weather(city=\"Paris\")"),
               LFM("get_weather(city=\"Pa\\u003c|ris \\\"<b>\\\"\",unit=\"F\")"),
               LFM("now()"),
               LFM("plan(steps=[{\"do\": \"a\"}, {\"do\":\"b\\n\"}])"),
               LFM("book(code=7, guests=3, ids=[1, 2], meta={\"k\": \"v\"}, note=null, "
                   "price=2.5, vip=true)")),
          LIST("{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\"}}",
               "{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Pa<|ris \\\"<b>\\\"\","
               "\"unit\":\"F\"}}",
               "{\"name\":\"now\",\"arguments\":{}}",
               "{\"name\":\"plan\",\"arguments\":{\"steps\":[{\"do\":\"a\"},{\"do\":\"b\\n\"}]}}",
               "{\"name\":\"book\",\"arguments\":{\"guests\":3,\"vip\":true,\"price\":2.5,"
               "\"note\":null,\"code\":7,\"ids\":[1,2],\"meta\":{\"k\":\"v\"}}}"),
          LIST("", "get_weather(city=\"Paris\")", LFM("get_time()"),
               LFM("get_weather()"),                                   /* city is required */
               LFM("get_weather(unit=\"C\", city=\"Paris\")"),          /* sorted keys */
               LFM("get_weather(city=\"Paris\", unit=\"K\")"),
               LFM("get_weather(city=\"Paris\", zone=\"UTC\")"),
               LFM("get_weather(city=\"Pa<|tool_call_end|>\")"),
               LFM("get_weather(city=\"a\\/b\")"), LFM("get_weather(city=\"a\\bb\")"),
               LFM("get_weather(city=3)"), LFM("get_weather(city=\"Paris)"),
               "<|tool_call_start|>[get_weather(city=\"Paris\")<|tool_call_end|>",
               "<|tool_call_start|>get_weather(city=\"Paris\")<|tool_call_end|>",
               LFM("book(guests=\"3\")"), LFM("book(guests=3, note=\"too long a note\")")));
#undef LFM
    corral_output_tags olmo = syntax_tags("<function_calls>", CORRAL_CALLS_PYTHON);
    check(&olmo, "get_weather",
          LIST("<function_calls>get_weather(city=\"Paris\", unit=\"F\")</function_calls>",
               "<function_calls>get_weather(city=\"a<|b\\u003c/c\")</function_calls>"),
          LIST("{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\",\"unit\":\"F\"}}",
               "{\"name\":\"get_weather\",\"arguments\":{\"city\":\"a<|b</c\"}}"),
          LIST("<function_calls>[get_weather(city=\"Paris\")]</function_calls>",
               "<function_calls>get_weather(city=\"a</c\")</function_calls>",
               "<function_calls>get_weather(city=\"Paris\")"));
}

/* Gemma 4's call:NAME{key:value,...}: bare keys, strings between <|"|> marks, the rest bare. */
static void test_gemma4_calls(void **state)
{
    (void)state;
    corral_output_tags tags = syntax_tags("<|tool_call>", CORRAL_CALLS_GEMMA4);
#define Q(text) "<|\"|>" text "<|\"|>"
    check(&tags, NULL,
          LIST("<|tool_call>call:get_weather{city:" Q("Paris") "}<tool_call|>",
               "<|tool_call>call:get_weather{city:" Q("Paris, \"FR\" <b>") ",unit:" Q("C")
               "}<tool_call|>",
               "<|tool_call>call:now{}<tool_call|>",
               "<|tool_call>call:plan{steps:[{do:" Q("a") "},{do:" Q("b") "}]}<tool_call|>",
               "<|tool_call>call:book{code:7,guests:3,meta:{k:" Q("v") "},note:null,price:1.5,"
               "vip:true}<tool_call|>"),
          LIST("{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\"}}",
               "{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris, \\\"FR\\\" <b>\","
               "\"unit\":\"C\"}}",
               "{\"name\":\"now\",\"arguments\":{}}",
               "{\"name\":\"plan\",\"arguments\":{\"steps\":[{\"do\":\"a\"},{\"do\":\"b\"}]}}",
               "{\"name\":\"book\",\"arguments\":{\"guests\":3,\"vip\":true,\"price\":1.5,"
               "\"note\":null,\"code\":7,\"meta\":{\"k\":\"v\"}}}"),
          LIST("<|tool_call>call:get_time{zone:" Q("UTC") "}<tool_call|>",
               "<|tool_call>call:get_weather{}<tool_call|>",
               "<|tool_call>call:get_weather{city:\"Paris\"}<tool_call|>",
               "<|tool_call>call:get_weather{city:" Q("Paris") ",unit:" Q("K") "}<tool_call|>",
               "<|tool_call>call:get_weather{city:<|\"|>Paris}<tool_call|>",
               "<|tool_call>call:get_weather{city:" Q("Pa<tool_call|>ris") "}<tool_call|>",
               "<|tool_call>call:get_weather{city:" Q("Paris") "}",
               "<|tool_call>call:book{guests:" Q("3") "}<tool_call|>",
               "<|tool_call>call:book{guests:3,note:" Q("a longer note") "}<tool_call|>",
               "<|tool_call>call:book{guests:3,code:7}<tool_call|>")); /* dictsort's order */
#undef Q
}

/* FunctionGemma's call:NAME{key:value,...}: Gemma 4's values with <escape> for the mark. */
static void test_functiongemma_calls(void **state)
{
    (void)state;
    corral_output_tags tags = syntax_tags("<start_function_call>", CORRAL_CALLS_FUNCTIONGEMMA);
#define Q(text) "<escape>" text "<escape>"
#define FG(call) "<start_function_call>call:" call "<end_function_call>"
    check(&tags, NULL,
          LIST(FG("get_weather{city:" Q("Paris") "}"),
               FG("get_weather{city:" Q("Paris, \"FR\" <b> <|\"|>") ",unit:" Q("C") "}"),
               FG("now{}"), FG("plan{steps:[{do:" Q("a") "},{do:" Q("b") "}]}"),
               FG("book{code:7,guests:3,ids:[1,2],meta:{k:" Q("v") "},note:null,price:1.5,"
                  "vip:true}")),
          LIST("{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\"}}",
               "{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris, \\\"FR\\\" <b> "
               "<|\\\"|>\",\"unit\":\"C\"}}",
               "{\"name\":\"now\",\"arguments\":{}}",
               "{\"name\":\"plan\",\"arguments\":{\"steps\":[{\"do\":\"a\"},{\"do\":\"b\"}]}}",
               "{\"name\":\"book\",\"arguments\":{\"guests\":3,\"vip\":true,\"price\":1.5,"
               "\"note\":null,\"code\":7,\"ids\":[1,2],\"meta\":{\"k\":\"v\"}}}"),
          LIST(FG("get_time{zone:" Q("UTC") "}"), FG("get_weather{}"),
               FG("get_weather{city:<|\"|>Paris<|\"|>}"),
               FG("get_weather{city:" Q("Paris") ",unit:" Q("K") "}"),
               FG("get_weather{city:<escape>Paris}"),
               FG("get_weather{city:" Q("Pa<end_function_call>ris") "}"),
               "<start_function_call>call:get_weather{city:" Q("Paris") "}",
               "<|tool_call>call:get_weather{city:" Q("Paris") "}<tool_call|>",
               FG("book{guests:" Q("3") "}"),
               FG("book{guests:3,note:" Q("a longer note") "}"),
               FG("book{guests:3,code:7}"))); /* sorted, as its renderer writes them */
#undef FG
#undef Q
    /* a constant string holding the mark cannot be written */
    json_t *tools = load("[{\"function\":{\"name\":\"n\",\"parameters\":{\"type\":\"object\","
                         "\"properties\":{\"x\":{\"const\":\"a<escape>b\"}}}}}]");
    corral_error err = {{0}};
    assert_null(tool_grammar_create(tools, "n", &tags, &err));
    assert_non_null(strstr(err.message, "FunctionGemma's calls"));
    json_decref(tools);
}

/* The calls each family's template or renderer writes, for its grammar to accept. */
static const char *const rendered_calls[] = {
    "{\"name\":\"get_weather\",\"arguments\":{\"city\":\"New York <b>\",\"unit\":\"C\"}}",
    ("{\"name\":\"book\",\"arguments\":{\"guests\":3,\"vip\":true,\"price\":2.5,"
     "\"ids\":[1,2],\"meta\":{\"k\":\"v\"}}}"),
    "{\"name\":\"now\",\"arguments\":{}}",
    NULL,
};

/* MiniMax M3's parser types the items of an array under anyOf as text, so its calls hold
 * arrays where the schema's items say their type. */
static const char *const m3_calls[] = {
    "{\"name\":\"get_weather\",\"arguments\":{\"city\":\"New York <b>\",\"unit\":\"C\"}}",
    "{\"name\":\"plan\",\"arguments\":{\"steps\":[{\"do\":\"a\"},{\"do\":\"b\"}]}}",
    ("{\"name\":\"book\",\"arguments\":{\"guests\":3,\"vip\":true,\"price\":2.5,"
     "\"meta\":{\"k\":\"v\"}}}"),
    "{\"name\":\"now\",\"arguments\":{}}",
    NULL,
};

/* The template src renders each of calls (NULL-terminated); the grammar of a call of that
 * tool accepts the rendering from the tool tag on, and the parser reads it back as the call
 * rendered. */
static void check_renderings(const char *src, const char *const *calls)
{
    corral_error err = {{0}};
    corral_template *tmpl = corral_template_parse(CORRAL_TEMPLATE_JINJA, src, strlen(src), &err);
    if (!tmpl) {
        fail_msg("%s: %s", src, err.message);
        return;
    }
    corral_output_tags tags;
    corral_template_output_tags(tmpl, &tags);
    assert_int_not_equal(tags.calls, CORRAL_CALLS_JSON);
    for (size_t i = 0; calls[i]; i++) {
        json_t *call = load(calls[i]);
        json_t *request = json_pack("{s:[{s:s,s:s,s:[{s:s,s:O}]}]}", "messages", "role",
                                    "assistant", "content", "", "tool_calls", "type", "function",
                                    "function", call);
        size_t len;
        char *text = corral_template_render_chat(tmpl, request, NULL, &len, &err);
        if (!text) {
            fail_msg("%s: %s", src, err.message);
            return;
        }
        const char *from = strstr(text, tags.tool_open);
        assert_non_null(from);
        const char *name = json_string_value(json_object_get(call, "name"));
        check(&tags, name, LIST(from), LIST(calls[i]), LIST("x"));
        free(text);
        json_decref(request);
        json_decref(call);
    }
    corral_template_free(tmpl);
}

/*
 * Each family's template (its call-writing part, as the real ones write calls) renders a
 * call; the grammar of a call of that tool accepts the rendering from the tool tag on, and
 * the parser reads it back as the call rendered.
 */
static void test_templates_own_renderings_are_accepted(void **state)
{
    (void)state;
    static const struct {
        const char *src;
    } families[] = {
        /* Qwen3-Coder, Qwen 3.5: Python's str of a scalar, JSON of the rest */
        {"{%- for m in messages %}{%- for tc in m.tool_calls %}{{- '<tool_call>\n<function=' + "
         "tc.function.name + '>\n' }}{%- for k, v in tc.function.arguments|items %}{{- "
         "'<parameter=' + k + '>\n' }}{%- set v = v | tojson | safe if v is mapping or (v is "
         "sequence and v is not string) else v | string %}{{- v }}{{- '\n</parameter>\n' }}"
         "{%- endfor %}{{- '</function>\n</tool_call>' }}{%- endfor %}{%- endfor %}"},
        /* GLM-4.5 */
        {"{%- for m in messages %}{%- for tc in m.tool_calls %}{{ '<tool_call>' + "
         "tc.function.name }}\n{% for k, v in tc.function.arguments.items() %}<arg_key>{{ k }}"
         "</arg_key>\n<arg_value>{{ v | tojson if v is not string else v }}</arg_value>\n"
         "{% endfor %}</tool_call>{%- endfor %}{%- endfor %}"},
        /* DeepSeek V3.1 */
        {"{%- for m in messages %}{{ '<｜tool▁calls▁begin｜>' }}{%- for tc in m.tool_calls %}"
         "{{ '<｜tool▁call▁begin｜>' + tc.function.name + '<｜tool▁sep｜>' + "
         "tc.function.arguments | tojson + '<｜tool▁call▁end｜>' }}{%- endfor %}"
         "{{ '<｜tool▁calls▁end｜>' }}{%- endfor %}"},
        /* Mistral since Magistral */
        {"{%- for m in messages %}{%- for tc in m.tool_calls %}{{ '[TOOL_CALLS]' + "
         "tc.function.name + '[ARGS]' + tc.function.arguments | tojson }}{%- endfor %}"
         "{%- endfor %}"},
        /* Gemma 4: keys bare and sorted, strings between <|"|> marks */
        {"{%- macro fa(a) -%}{%- if a is string -%}{{- '<|\"|>' + a + '<|\"|>' -}}{%- elif a is "
         "boolean -%}{{- 'true' if a else 'false' -}}{%- elif a is mapping -%}{{- '{' -}}"
         "{%- for k, v in a | dictsort -%}{%- if not loop.first %},{% endif -%}{{- k -}}:"
         "{{- fa(v) -}}{%- endfor -%}{{- '}' -}}{%- elif a is sequence -%}{{- '[' -}}{%- for v "
         "in a -%}{%- if not loop.first %},{% endif -%}{{- fa(v) -}}{%- endfor -%}{{- ']' -}}"
         "{%- else -%}{{- a -}}{%- endif -%}{%- endmacro -%}"
         "{%- for m in messages %}{%- for tc in m.tool_calls %}{{- '<|tool_call>call:' + "
         "tc.function.name + '{' -}}{%- for k, v in tc.function.arguments | dictsort -%}{%- if "
         "not loop.first %},{% endif -%}{{- k -}}:{{- fa(v) -}}{%- endfor -%}"
         "{{- '}<tool_call|>' -}}{%- endfor %}{%- endfor %}"},
        /* Kimi K2: the id functions.NAME:IDX, the arguments' JSON */
        {"{%- for m in messages %}<|tool_calls_section_begin|>{%- for tc in m.tool_calls %}"
         "{%- set id = 'functions.' + tc.function.name + ':' + loop.index0|string -%}"
         "<|tool_call_begin|>{{ id }}<|tool_call_argument_begin|>{{ tc.function.arguments | "
         "tojson }}<|tool_call_end|>{%- endfor -%}<|tool_calls_section_end|>{%- endfor %}"},
        /* MiniMax M2: strings as they are, JSON of the rest */
        {"{%- for m in messages %}{{- '<minimax:tool_call>\n' }}{%- for tc in m.tool_calls %}"
         "{{- '<invoke name=\"' + tc.function.name + '\">' }}\n{%- for k, v in "
         "tc.function.arguments.items() %}{{- '<parameter name=\"' + k + '\">' }}{{- v | "
         "tojson if v is not string else v }}{{- '</parameter>' }}\n{% endfor %}"
         "{{- '</invoke>\n' }}{%- endfor -%}{{- '</minimax:tool_call>' }}{%- endfor %}"},
        /* DeepSeek V3.2: strings as they are with string="true", JSON of the rest */
        {"{%- set t = '｜DSML｜' -%}{%- for m in messages %}{{- '<' + t + 'function_calls>\n' -}}"
         "{%- for tc in m.tool_calls -%}{{- '<' + t + 'invoke name=\"' + tc.function.name + "
         "'\">\n' -}}{%- for k, v in tc.function.arguments.items() -%}{%- if v is string -%}"
         "{{- '<' + t + 'parameter name=\"' + k + '\" string=\"true\">' + v + '</' + t + "
         "'parameter>\n' -}}{%- else -%}{{- '<' + t + 'parameter name=\"' + k + '\" "
         "string=\"false\">' + (v | tojson) + '</' + t + 'parameter>\n' -}}{%- endif -%}"
         "{%- endfor -%}{{- '</' + t + 'invoke>\n' -}}{%- endfor -%}"
         "{{- '</' + t + 'function_calls>' -}}{%- endfor %}"},
        /* DeepSeek R1 (V3's older form): the call's type, the arguments fenced */
        {"{%- for m in messages %}{{ '<｜Assistant｜><｜tool▁calls▁begin｜>' }}{%- for tool in "
         "m.tool_calls %}{{ '<｜tool▁call▁begin｜>' + tool['type'] + '<｜tool▁sep｜>' + "
         "tool['function']['name'] + '\\n' + '```json' + '\\n' + tool['function']['arguments'] "
         "| tojson + '\\n' + '```' + '<｜tool▁call▁end｜>' }}{%- endfor %}"
         "{{ '<｜tool▁calls▁end｜>' }}{%- endfor %}"},
    };
    for (size_t f = 0; f < sizeof families / sizeof families[0]; f++)
        check_renderings(families[f].src, rendered_calls);
}

/* MiniMax M3's template (its to_xml, elements all the way down) renders calls its grammar
 * accepts. */
static void test_minimax_m3_template_renderings_are_accepted(void **state)
{
    (void)state;
    check_renderings(
        "{%- macro to_xml(val, ns) -%}{%- if val is mapping -%}{%- for k, v in val.items() if v "
        "is not none -%}{{ ns }}<{{ k }}>{{ to_xml(v, ns) }}{{ ns }}</{{ k }}>{%- endfor -%}"
        "{%- elif val is iterable and val is not string -%}{%- for item in val -%}{{ ns }}<item>"
        "{{ to_xml(item, ns) }}{{ ns }}</item>{%- endfor -%}{%- elif val is boolean -%}"
        "{{ val | tojson }}{%- else -%}{{ val }}{%- endif -%}{%- endmacro -%}"
        "{%- set t = ']<]minimax[>[' -%}{%- for m in messages %}{{- t + '<tool_call>\n' }}"
        "{%- for tc in m.tool_calls -%}{{- t + '<invoke name=\"' + tc.function.name + '\">' }}"
        "{%- for k, v in tc.function.arguments.items() if v is not none %}{{- t + '<' + k + '>' "
        "-}}{{- to_xml(v, t) -}}{{- t + '</' + k + '>' }}{%- endfor -%}{{- t + '</invoke>\n' }}"
        "{%- endfor -%}{{- t + '</tool_call>' }}{%- endfor %}",
        m3_calls);
}

/* The assistant turn of one call (call_text: {"name","arguments"}) as a renderer writes
 * it, with the tools of tools_json offered: malloc'ed. */
static char *rendered_call(const corral_renderer *r, const char *call_text)
{
    json_t *call = load(call_text), *tools = load(tools_json);
    json_t *messages = json_pack("[{s:s,s:s},{s:s,s:s,s:[{s:O}]}]", "role", "user", "content",
                                 "hi", "role", "assistant", "content", "", "tool_calls",
                                 "function", call);
    size_t len;
    corral_error err = {{0}};
    char *text = r->render(messages, tools, NULL, NULL, &len, &err);
    if (!text)
        fail_msg("%s: %s", r->names[0], err.message);
    json_decref(messages);
    json_decref(tools);
    json_decref(call);
    return text;
}

/* The renderers writing calls in a syntax of their own (LFM2's and Olmo 3's Python calls,
 * Cogito's fenced JSON, FunctionGemma's): the grammar of a call of that tool accepts the
 * block as they render it, and the parser reads it back as the call rendered. */
static void test_renderers_own_calls_are_accepted(void **state)
{
    (void)state;
    static const struct {
        const char *renderer, *close;
        corral_call_syntax calls;
    } families[] = {
        {"lfm2", "<|tool_call_end|>", CORRAL_CALLS_PYTHON},
        {"olmo3", "</function_calls>", CORRAL_CALLS_PYTHON},
        {"cogito", "<｜tool▁calls▁end｜>", CORRAL_CALLS_DEEPSEEK_FENCED},
        {"functiongemma", "<end_function_call>", CORRAL_CALLS_FUNCTIONGEMMA},
    };
    for (size_t f = 0; f < sizeof families / sizeof families[0]; f++) {
        const corral_renderer *r = corral_renderer_find(families[f].renderer);
        assert_non_null(r);
        corral_output_tags tags;
        corral_renderer_output_tags(r, &tags);
        assert_int_equal(tags.calls, families[f].calls);
        for (size_t i = 0; rendered_calls[i]; i++) {
            char *text = rendered_call(r, rendered_calls[i]);
            char *from = NULL; /* the last tag: a system prompt may name it too */
            for (char *at = text; (at = strstr(at, tags.tool_open)); at++)
                from = at;
            char *end = from ? strstr(from, families[f].close) : NULL;
            assert_non_null(end);
            end[strlen(families[f].close)] = '\0';
            json_t *call = load(rendered_calls[i]);
            const char *name = json_string_value(json_object_get(call, "name"));
            check(&tags, name, LIST(from), LIST(rendered_calls[i]), LIST("x"));
            json_decref(call);
            free(text);
        }
    }
}

/*
 * gpt-oss: the server ends the prompt with the call's header, the grammar is the arguments'.
 * The harmony renderer's own call message is that header, the arguments, <|call|>: the
 * grammar accepts its arguments, and the parser of the answer to the prompt and header reads
 * the call back under the tool's own name (get_weather's prompt name is the same; a renamed
 * one maps back).
 */
static void test_harmony_call_after_its_header(void **state)
{
    (void)state;
    json_t *tools = load(tools_json);
    json_t *renamed = load("[{\"function\":{\"name\":\"get-weather\",\"parameters\":"
                           "{\"type\":\"object\",\"properties\":{\"city\":{\"type\":"
                           "\"string\"}},\"required\":[\"city\"]}}}]");
    corral_error err = {{0}};
    char *header = NULL;
    /* one function: named, or the only one offered */
    assert_null(tool_grammar_harmony(tools, NULL, &header, &err));
    assert_non_null(strstr(err.message, "name the function"));
    assert_null(tool_grammar_harmony(tools, "get_time", &header, &err));
    char *gbnf = tool_grammar_harmony(renamed, NULL, &header, &err);
    assert_non_null(gbnf);
    assert_string_equal(header, "<|channel|>commentary to=functions.get_weather "
                                "<|constrain|>json<|message|>");
    corral_grammar *g = corral_grammar_create(gbnf, NULL, &err);
    assert_non_null(g);
    static const char *const good[] = {"{\"city\":\"Paris\"}", "{\"city\": \"a\\u003c|b <c>\"}"};
    static const char *const want[] = {"Paris", "a<|b <c>"};
    static const char prompt[] = "<|start|>user<|message|>hi<|end|><|start|>assistant";
    for (size_t i = 0; i < 2; i++) {
        assert_true(corral_grammar_accepts(g, good[i], strlen(good[i])));
        char *before = NULL;
        assert_true(asprintf(&before, "%s%s", prompt, header) > 0);
        corral_output_parser *p = harmony_output_parser_create(before, renamed, 1 << 16);
        assert_non_null(p);
        corral_output_delta d;
        char *answer = NULL;
        assert_true(asprintf(&answer, "%s<|call|>", good[i]) > 0);
        assert_true(corral_output_parser_feed(p, answer, strlen(answer), true, &d, &err));
        assert_int_equal(d.content_len, 0);
        assert_int_equal(json_array_size(d.tool_calls), 1);
        json_t *fn = json_object_get(json_array_get(d.tool_calls, 0), "function");
        assert_string_equal(json_string_value(json_object_get(fn, "name")), "get-weather");
        assert_string_equal(json_string_value(json_object_get(json_object_get(fn, "arguments"),
                                                              "city")), want[i]);
        corral_output_parser_free(p);
        free(answer);
        free(before);
    }
    static const char *const bad[] = {"{}", "{\"city\": 3}", "{\"city\": \"Paris",
                                      "{\"city\": \"a<|end|>\"}", "{\"city\":\"x\"} more",
                                      "<|channel|>final<|message|>Paris"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (corral_grammar_accepts(g, bad[i], strlen(bad[i])))
            fail_msg("accepted %s under\n%s", bad[i], gbnf);
    corral_grammar_free(g);
    free(gbnf);
    free(header);
    /* the renderer writes a call in the history with the same header (its keys sorted, here
     * the schema's order too) */
    gbnf = tool_grammar_harmony(tools, "get_weather", &header, &err);
    assert_non_null(gbnf);
    g = corral_grammar_create(gbnf, NULL, &err);
    assert_non_null(g);
    json_t *messages = json_pack(
        "[{s:s,s:s},{s:s,s:s,s:[{s:{s:s,s:{s:s,s:s}}}]}]", "role", "user", "content", "hi",
        "role", "assistant", "content", "", "tool_calls", "function", "name", "get_weather",
        "arguments", "unit", "F", "city", "New York <b> & co");
    size_t len;
    char *text = harmony_render(messages, tools, NULL, "2026-01-01", NULL, &len, &err);
    assert_non_null(text);
    char *at = strstr(text, header), *end = at ? strstr(at, "<|call|>") : NULL;
    assert_non_null(end);
    *end = '\0';
    at += strlen(header);
    if (!corral_grammar_accepts(g, at, strlen(at)))
        fail_msg("refused %s under\n%s", at, gbnf);
    corral_grammar_free(g);
    free(text);
    free(gbnf);
    free(header);
    json_decref(messages);
    json_decref(renamed);
    json_decref(tools);
}

/* The calls the Glimmer parser reads out of the answer body after header (a message's), as
 * a JSON array; NULL when part of it is content. */
static json_t *glimmer_read(const json_t *tools, const char *header, const char *body)
{
    const corral_renderer *r = corral_renderer_find("glimmer");
    assert_non_null(r);
    corral_output_tags tags;
    corral_renderer_output_tags(r, &tags);
    assert_int_equal(tags.calls, CORRAL_CALLS_GLIMMER);
    corral_output_parser *p = corral_output_parser_create(&tags, false, 1 << 16);
    assert_non_null(p);
    corral_output_parser_set_tools(p, tools);
    corral_output_delta d;
    corral_error err = {{0}};
    assert_true(corral_output_parser_feed(p, header, strlen(header), false, &d, &err));
    assert_int_equal(d.content_len + d.thinking_len + json_array_size(d.tool_calls), 0);
    char *answer = NULL;
    assert_true(asprintf(&answer, "%s<|eot|>", body) > 0);
    assert_true(corral_output_parser_feed(p, answer, strlen(answer), true, &d, &err));
    json_t *calls = d.content_len ? NULL : json_deep_copy(d.tool_calls);
    free(answer);
    corral_output_parser_free(p);
    return calls;
}

/*
 * Glimmer: the server ends the prompt with the call message's header (" to=NAME<|message|>",
 * its <|message|> a control token), the grammar is the body's ATEM block of that function.
 * It accepts the block as the renderer writes a call in the history, after the same header,
 * and the parser of the answer after that header reads the call back; a block invoking
 * another function, leaving out a required argument or leaving a value open is refused.
 */
static void test_glimmer_call_after_its_header(void **state)
{
    (void)state;
    json_t *tools = load(tools_json);
    corral_error err = {{0}};
    char *header = NULL;
    /* one function: named, or the only one offered; never "self", the thinking's recipient */
    assert_null(tool_grammar_glimmer(tools, NULL, &header, &err));
    assert_non_null(strstr(err.message, "name the function"));
    assert_null(tool_grammar_glimmer(tools, "get_time", &header, &err));
    json_t *self = load("[{\"function\":{\"name\":\"self\"}}]");
    assert_null(tool_grammar_glimmer(self, NULL, &header, &err));
    assert_non_null(strstr(err.message, "\"self\""));
    json_decref(self);
    corral_output_tags tags = syntax_tags(GLIMMER_TOOL_OPEN, CORRAL_CALLS_GLIMMER);
    assert_null(tool_grammar_create(tools, "get_weather", &tags, &err)); /* needs its header */

    char *gbnf = tool_grammar_glimmer(tools, "get_weather", &header, &err);
    if (!gbnf)
        fail_msg("%s", err.message);
    assert_string_equal(header, " to=get_weather<|message|>");
    corral_grammar *g = corral_grammar_create(gbnf, NULL, &err);
    assert_non_null(g);
#define ATEM(name, params)                                                                      \
    "<atem:function_calls>\n<atem:invoke name=\"" name "\">\n" params                            \
    "</atem:invoke>\n</atem:function_calls>"
#define P(key, value) "<atem:parameter name=\"" key "\">" value "</atem:parameter>\n"
    static const char *const good[] = {
        ATEM("get_weather", P("city", "Paris")),
        ATEM("get_weather", P("city", "New York </b> \"x\"") P("unit", "F")),
        ATEM("get_weather", P("city", "\nParis\n")),
    };
    static const char *const want[] = {
        "{\"city\":\"Paris\"}",
        "{\"city\":\"New York </b> \\\"x\\\"\",\"unit\":\"F\"}",
        "{\"city\":\"\\nParis\\n\"}",
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        if (!corral_grammar_accepts(g, good[i], strlen(good[i])))
            fail_msg("refused %s under\n%s", good[i], gbnf);
        json_t *calls = glimmer_read(tools, header, good[i]);
        assert_int_equal(json_array_size(calls), 1);
        json_t *fn = json_object_get(json_array_get(calls, 0), "function"), *args = load(want[i]);
        assert_string_equal(json_string_value(json_object_get(fn, "name")), "get_weather");
        if (!json_equal(json_object_get(fn, "arguments"), args))
            fail_msg("%s read as %s", good[i], json_dumps(fn, JSON_COMPACT));
        json_decref(args);
        json_decref(calls);
    }
    static const char *const bad[] = {
        "", "Paris is sunny.", ATEM("now", ""), ATEM("get_weather", ""),
        ATEM("get_weather", P("city", "Paris") P("unit", "K")),
        ATEM("get_weather", P("unit", "C") P("city", "Paris")),
        ATEM("get_weather", P("city", "null")),
        ATEM("get_weather", P("city", "Pa</atem:parameter>ris")),
        ATEM("get_weather", P("city", "Pa<|eot|>ris")),
        "<atem:function_calls>\n<atem:invoke name=\"get_weather\">\n<atem:parameter "
        "name=\"city\">Paris</atem:invoke>\n</atem:function_calls>",
        "<atem:function_calls>\n<atem:invoke name=\"get_weather\">\n" P("city", "Paris"),
        ATEM("get_weather", P("city", "Paris")) " more",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (corral_grammar_accepts(g, bad[i], strlen(bad[i])))
            fail_msg("accepted %s under\n%s", bad[i], gbnf);
    corral_grammar_free(g);
    free(gbnf);
    free(header);
    /* a mapping's JSON: its strings never hold '<' before '/' or '|', where the tags and the
     * message's end marks start */
    gbnf = tool_grammar_glimmer(tools, "book", &header, &err);
    assert_non_null(gbnf);
    g = corral_grammar_create(gbnf, NULL, &err);
    assert_non_null(g);
    static const char meta[] = ATEM("book", P("guests", "3") P("meta", "{\"k\": \"a\\u003c|b <c\"}"));
    assert_true(corral_grammar_accepts(g, meta, sizeof meta - 1));
    json_t *calls = glimmer_read(tools, header, meta), *args = load(
        "{\"guests\":3,\"meta\":{\"k\":\"a<|b <c\"}}");
    assert_true(json_equal(json_object_get(json_object_get(json_array_get(calls, 0), "function"),
                                           "arguments"),
                           args));
    json_decref(args);
    json_decref(calls);
    static const char *const raw_lt[] = {
        ATEM("book", P("guests", "3") P("meta", "{\"k\": \"a<|eot|>\"}")),
        ATEM("book", P("guests", "3") P("meta", "{\"k\": \"a</atem:parameter>\"}")),
    };
    for (size_t i = 0; i < sizeof raw_lt / sizeof raw_lt[0]; i++)
        if (corral_grammar_accepts(g, raw_lt[i], strlen(raw_lt[i])))
            fail_msg("accepted %s under\n%s", raw_lt[i], gbnf);
    corral_grammar_free(g);
    free(gbnf);
    free(header);
#undef P
#undef ATEM

    /* the renderer's own call messages: the same header, a block the grammar accepts and the
     * parser reads back as the call */
    const corral_renderer *r = corral_renderer_find("glimmer");
    assert_non_null(r);
    for (size_t i = 0; rendered_calls[i]; i++) {
        json_t *call = load(rendered_calls[i]);
        const char *name = json_string_value(json_object_get(call, "name"));
        gbnf = tool_grammar_glimmer(tools, name, &header, &err);
        if (!gbnf)
            fail_msg("%s: %s", name, err.message);
        g = corral_grammar_create(gbnf, NULL, &err);
        assert_non_null(g);
        char *text = rendered_call(r, rendered_calls[i]);
        char *message = NULL;
        assert_true(asprintf(&message, "<|start|>assistant%s", header) > 0);
        char *at = strstr(text, message), *end = at ? strstr(at, "<|eot|>") : NULL;
        assert_non_null(end);
        *end = '\0';
        at += strlen(message);
        if (!corral_grammar_accepts(g, at, strlen(at)))
            fail_msg("refused %s under\n%s", at, gbnf);
        json_t *calls = glimmer_read(tools, header, at);
        assert_int_equal(json_array_size(calls), 1);
        json_t *fn = json_object_get(json_array_get(calls, 0), "function");
        if (!json_equal(json_object_get(fn, "name"), json_object_get(call, "name")) ||
            !json_equal(json_object_get(fn, "arguments"), json_object_get(call, "arguments")))
            fail_msg("%s read as %s", at, json_dumps(fn, JSON_COMPACT));
        json_decref(calls);
        free(message);
        free(text);
        corral_grammar_free(g);
        free(gbnf);
        free(header);
        json_decref(call);
    }
    json_decref(tools);
}

/* The Cohere renderer's prompt for a question with tools_json offered, think on or off, and
 * when continued an assistant's text after it (the prompt continues it): malloc'ed. */
static char *cohere_prompt(bool think, const char *continued)
{
    const corral_renderer *r = corral_renderer_find("cohere");
    assert_non_null(r);
    json_t *tools = load(tools_json);
    json_t *messages = json_pack("[{s:s,s:s}]", "role", "user", "content", "Weather in Paris?");
    if (continued)
        json_array_append_new(messages,
                              json_pack("{s:s,s:s}", "role", "assistant", "content", continued));
    json_t *think_value = json_boolean(think);
    size_t len;
    corral_error err = {{0}};
    char *text = r->render(messages, tools, think_value, NULL, &len, &err);
    if (!text)
        fail_msg("cohere: %s", err.message);
    json_decref(think_value);
    json_decref(messages);
    json_decref(tools);
    return text;
}

/* The calls the Cohere parser reads out of answer, the parser having read the action tag the
 * prompt ends with first, as the generation feeds it (the renderer's tags, thinking off):
 * a JSON array, NULL when part of it is content. */
static json_t *cohere_read(const char *answer)
{
    const corral_renderer *r = corral_renderer_find("cohere");
    assert_non_null(r);
    corral_output_tags tags;
    corral_renderer_output_tags(r, &tags);
    assert_int_equal(tags.calls, CORRAL_CALLS_COHERE);
    corral_output_parser *p = corral_output_parser_create(&tags, false, 1 << 16);
    assert_non_null(p);
    json_t *tools = load(tools_json);
    corral_output_parser_set_tools(p, tools);
    corral_output_delta d;
    corral_error err = {{0}};
    assert_true(corral_output_parser_feed(p, COHERE_TOOL_OPEN, strlen(COHERE_TOOL_OPEN), false,
                                          &d, &err));
    assert_int_equal(d.content_len + d.thinking_len + json_array_size(d.tool_calls), 0);
    assert_true(corral_output_parser_feed(p, answer, strlen(answer), true, &d, &err));
    json_t *calls = d.content_len ? NULL : json_deep_copy(d.tool_calls);
    corral_output_parser_free(p);
    json_decref(tools);
    return calls;
}

/* The one call in calls is expected ({"name", "arguments"}). */
static void assert_one_call(const json_t *calls, const char *expected, const char *answer)
{
    json_t *want = load(expected);
    json_t *fn = json_object_get(json_array_get(calls, 0), "function");
    if (json_array_size(calls) != 1 ||
        !json_equal(json_object_get(fn, "name"), json_object_get(want, "name")) ||
        !json_equal(json_object_get(fn, "arguments"), json_object_get(want, "arguments")))
        fail_msg("%s read as %s", answer, calls ? json_dumps(calls, JSON_COMPACT) : "content");
    json_decref(want);
}

/*
 * Cohere: the server ends the prompt with <|START_ACTION|> (a control token in Cohere's
 * vocabularies), after what closes the block the prompt leaves open; the grammar is the JSON
 * list of one call, laid out with a blank line inside the brackets as the renderer writes it,
 * or one newline or none. The answer ends at the list: the parser, having read the tag,
 * reads the call of the cut-off action back typed (and of a whole one, should a model spell
 * <|END_ACTION|> out in text). The tag, the end tag, a list of none or two, a call against
 * the schema are refused.
 */
static void test_cohere_list_after_its_tag(void **state)
{
    (void)state;
    json_t *tools = load(tools_json);
    corral_error err = {{0}};
    char *tail = NULL;
    char *prompt = cohere_prompt(false, NULL);
    char *gbnf = tool_grammar_cohere(tools, NULL, prompt, &tail, &err);
    if (!gbnf)
        fail_msg("%s", err.message);
    assert_string_equal(tail, "<|START_ACTION|>");
    free(tail);
    corral_output_tags tags = syntax_tags(COHERE_TOOL_OPEN, CORRAL_CALLS_COHERE);
    assert_null(tool_grammar_create(tools, NULL, &tags, &err)); /* needs its tag in the prompt */
    corral_grammar *g = corral_grammar_create(gbnf, NULL, &err);
    assert_non_null(g);
#define CALL(id, name, params) \
    "{\"tool_call_id\": \"" id "\", \"tool_name\": \"" name "\", \"parameters\": " params "}"
    static const char *const good[] = {
        "[\n\n    " CALL("0", "get_weather", "{\"city\": \"Paris\"}") "\n\n]",
        "[\n    " CALL("3", "get_weather", "{\"city\": \"a\\u003c|b <c>\", \"unit\": \"F\"}") "\n]",
        "[" CALL("12", "now", "{}") "]",
        "[\n\n    " CALL("0", "plan", "{\"steps\": [{\"do\": \"a\"}]}") "\n\n]",
    };
    static const char *const want[] = {
        "{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\"}}",
        "{\"name\":\"get_weather\",\"arguments\":{\"city\":\"a<|b <c>\",\"unit\":\"F\"}}",
        "{\"name\":\"now\",\"arguments\":{}}",
        "{\"name\":\"plan\",\"arguments\":{\"steps\":[{\"do\":\"a\"}]}}",
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        if (!corral_grammar_accepts(g, good[i], strlen(good[i])))
            fail_msg("refused %s under\n%s", good[i], gbnf);
        json_t *calls = cohere_read(good[i]);
        assert_one_call(calls, want[i], good[i]);
        json_decref(calls);
        char *closed = NULL;
        assert_true(asprintf(&closed, "%s<|END_ACTION|>", good[i]) > 0);
        calls = cohere_read(closed);
        assert_one_call(calls, want[i], closed);
        json_decref(calls);
        free(closed);
    }
    static const char *const bad[] = {
        "", "It is sunny.", "<|START_ACTION|>[" CALL("0", "now", "{}") "]",
        "[" CALL("0", "now", "{}") "]<|END_ACTION|>", "[" CALL("0", "now", "{}") "] ",
        "[" CALL("0", "get_time", "{}") "]",
        "[" CALL("0", "get_weather", "{}") "]",                  /* city is required */
        "[" CALL("0", "get_weather", "{\"city\": \"Paris}") "]", /* unterminated */
        "[" CALL("0", "get_weather", "{\"city\": \"a<|END_ACTION|>\"}") "]",
        "[" CALL("0", "get_weather", "{\"city\": \"Paris\", \"unit\": \"K\"}") "]",
        "[" CALL("0", "now", "{}") ", " CALL("1", "now", "{}") "]", "[]", CALL("0", "now", "{}"),
        "[{\"tool_name\": \"now\", \"parameters\": {}}]", /* no id */
        "[{\"tool_call_id\": \"0\", \"name\": \"now\", \"parameters\": {}}]",
        "[" CALL("123456789", "now", "{}") "]",
        "[\n\n\n    " CALL("0", "now", "{}") "\n\n]",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (corral_grammar_accepts(g, bad[i], strlen(bad[i])))
            fail_msg("accepted %s under\n%s", bad[i], gbnf);
#undef CALL
    corral_grammar_free(g);
    free(gbnf);
    free(prompt);

    /* the renderer's own action: its list accepted, the call read back */
    const corral_renderer *r = corral_renderer_find("cohere");
    assert_non_null(r);
    for (size_t i = 0; rendered_calls[i]; i++) {
        json_t *call = load(rendered_calls[i]);
        const char *name = json_string_value(json_object_get(call, "name"));
        char *text = rendered_call(r, rendered_calls[i]);
        gbnf = tool_grammar_cohere(tools, name, text, &tail, &err);
        if (!gbnf)
            fail_msg("%s: %s", name, err.message);
        g = corral_grammar_create(gbnf, NULL, &err);
        assert_non_null(g);
        char *from = NULL; /* the last tag: the system turn's tool list may name it too */
        for (char *at = text; (at = strstr(at, COHERE_TOOL_OPEN)); at++)
            from = at;
        char *end = from ? strstr(from, "<|END_ACTION|>") : NULL;
        assert_non_null(end);
        *end = '\0';
        from += strlen(COHERE_TOOL_OPEN);
        if (!corral_grammar_accepts(g, from, strlen(from)))
            fail_msg("refused %s under\n%s", from, gbnf);
        json_t *calls = cohere_read(from);
        assert_one_call(calls, rendered_calls[i], from);
        json_decref(calls);
        corral_grammar_free(g);
        free(gbnf);
        free(tail);
        free(text);
        json_decref(call);
    }
    json_decref(tools);
}

/*
 * What the prompt is followed by for the action to come next: after the renderer's thinking,
 * closed (think off) or open (closed empty), after the bare turn a Command R7B or Command A
 * template opens (an empty thinking, as those templates write a call's turn), after an
 * assistant's text the prompt continues (closed with its own mark).
 */
static void test_cohere_tail_closes_the_open_block(void **state)
{
    (void)state;
    static const char turn[] = "<|START_OF_TURN_TOKEN|><|USER_TOKEN|>hi<|END_OF_TURN_TOKEN|>"
                               "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>";
    static const char older[] = "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|><|START_RESPONSE|>Sure";
    static const char later[] = "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|><|START_RESPONSE|>a"
                                "<|END_RESPONSE|><|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|>"
                                "<|CHATBOT_TOKEN|><|START_TEXT|>b";
    struct {
        char *prompt;
        const char *tail;
    } cases[] = {
        {cohere_prompt(false, NULL), "<|START_ACTION|>"},
        {cohere_prompt(true, NULL), "<|END_THINKING|><|START_ACTION|>"},
        {cohere_prompt(true, "Let me check"), "<|END_TEXT|><|START_ACTION|>"},
        {strdup(later), "<|END_TEXT|><|START_ACTION|>"},
        {strdup(turn), "<|START_THINKING|><|END_THINKING|><|START_ACTION|>"},
        {NULL, "<|START_THINKING|><|END_THINKING|><|START_ACTION|>"},
        {strdup(older), "<|END_RESPONSE|><|START_ACTION|>"},
    };
    assert_true(asprintf(&cases[5].prompt, "%s\n", turn) > 0);
    json_t *tools = load(tools_json);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        assert_non_null(cases[i].prompt);
        corral_error err = {{0}};
        char *tail = NULL;
        char *gbnf = tool_grammar_cohere(tools, "now", cases[i].prompt, &tail, &err);
        if (!gbnf)
            fail_msg("%s", err.message);
        if (strcmp(tail, cases[i].tail) != 0)
            fail_msg("case %zu: %s followed by %s", i, cases[i].prompt, tail);
        free(tail);
        free(gbnf);
        free(cases[i].prompt);
    }
    json_decref(tools);
}

/*
 * A vocabulary where Cohere's tags are control tokens, as in Cohere's GGUFs (and pieces that
 * could spell them, and every byte): the prompt and its tail end with the <|START_ACTION|>
 * token; the grammar never allows either tag's token, nor a text spelling the opening one,
 * takes the list token by token, and then allows the end of generation alone.
 */
static void test_cohere_tags_as_control_tokens(void **state)
{
    (void)state;
    static const char *const named[] = {
        "<unk>", "<BOS_TOKEN>", "<|END_OF_TURN_TOKEN|>", "<|START_ACTION|>", "<|END_ACTION|>",
        "<|START_THINKING|>", "<|END_THINKING|>", "<|START_OF_TURN_TOKEN|>", "<|USER_TOKEN|>",
        "<|CHATBOT_TOKEN|>", "<|SYSTEM_TOKEN|>", "<|START_TEXT|>", "<|END_TEXT|>",
        "<|", "|>", "START", "_", "ACTION", "END", "[", "]", "{\"", "\": ", "\"}",
    };
    enum { NAMED = sizeof named / sizeof named[0], N = NAMED + 256, START = 3, END = 4 };
    static char bytes[256][7];
    gguf_str strs[N];
    int32_t types[N];
    float scores[N];
    for (size_t i = 0; i < N; i++) {
        if (i >= NAMED)
            snprintf(bytes[i - NAMED], sizeof bytes[0], "<0x%02X>", (unsigned)(i - NAMED));
        const char *text = i < NAMED ? named[i] : bytes[i - NAMED];
        strs[i] = (gguf_str){text, strlen(text)};
        types[i] = i == 0 ? 2 : i < 13 ? 3 : i < NAMED ? 1 : 6;
        scores[i] = -(float)i;
    }
    corral_error err = {{0}};
    gguf_writer *w = gguf_writer_create();
    assert_non_null(w);
    char path[] = "/tmp/corral-test-cohere-vocab-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    bool ok = gguf_writer_add_str(w, "tokenizer.ggml.model", "llama", 5, &err) &&
              gguf_writer_add_str_array(w, "tokenizer.ggml.tokens", strs, N, &err) &&
              gguf_writer_add_array(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, types, N,
                                    &err) &&
              gguf_writer_add_array(w, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, scores, N,
                                    &err) &&
              gguf_writer_add_u32(w, "tokenizer.ggml.bos_token_id", 1, &err) &&
              gguf_writer_add_u32(w, "tokenizer.ggml.eos_token_id", 2, &err) &&
              gguf_writer_begin(w, path, &err) && gguf_writer_finish(w, &err);
    gguf_writer_free(w);
    corral_vocab *vocab = ok ? corral_vocab_open(path, &err) : NULL;
    unlink(path);
    if (!vocab)
        fail_msg("%s", err.message);
    corral_token eos = corral_vocab_eos(vocab);

    json_t *tools = load(tools_json);
    for (int think = 0; think < 2; think++) {
        char *prompt = cohere_prompt(think, NULL), *tail = NULL;
        char *gbnf = tool_grammar_cohere(tools, "get_weather", prompt, &tail, &err);
        assert_non_null(gbnf);
        char *text = NULL;
        assert_true(asprintf(&text, "%s%s", prompt, tail) > 0);
        static corral_token ids[1 << 15];
        size_t n = 0, cap = sizeof ids / sizeof ids[0];
        assert_true(corral_tokenize(vocab, text, strlen(text), false, true, ids, cap, &n, &err));
        assert_true(n >= 2 && n <= cap);
        assert_int_equal(ids[n - 1], START);
        assert_int_equal(ids[n - 2], 6); /* <|END_THINKING|>, closed in the prompt or its tail */

        corral_grammar *g = corral_grammar_create(gbnf, vocab, &err);
        assert_non_null(g);
        static const char list[] = "[\n\n    {\"tool_call_id\": \"0\", \"tool_name\": "
                                   "\"get_weather\", \"parameters\": {\"city\": \"Paris\"}}\n\n]";
        assert_false(grammar_allows(g, 13)); /* "<|": the tag spelled out */
        for (size_t at = 0; at < sizeof list - 1;) {
            assert_false(grammar_allows(g, START));
            assert_false(grammar_allows(g, END));
            assert_false(grammar_allows(g, eos));
            corral_token best = -1;
            size_t best_len = 0;
            for (corral_token id = 0; id < N; id++) {
                char piece[32];
                size_t k = corral_token_to_piece(vocab, id, piece, sizeof piece, false);
                if (k > best_len && k <= sizeof list - 1 - at &&
                    memcmp(piece, list + at, k) == 0) {
                    best = id;
                    best_len = k;
                }
            }
            assert_true(best >= 0);
            if (!grammar_allows(g, best))
                fail_msg("the token of \"%.*s\" refused at %zu under\n%s", (int)best_len,
                         list + at, at, gbnf);
            grammar_accept(g, best);
            at += best_len;
        }
        uint8_t allowed[N];
        assert_true(grammar_allows_all(g, allowed));
        for (corral_token id = 0; id < N; id++)
            if (allowed[id] != (id == eos))
                fail_msg("after the list, token %d %s", id, allowed[id] ? "allowed" : "refused");
        corral_grammar_free(g);
        free(text);
        free(gbnf);
        free(tail);
        free(prompt);
    }
    json_decref(tools);
    corral_vocab_free(vocab);
}

/* A name the syntax cannot hold back, a value no text reads back as: refused, by tool. */
static void test_tagged_refusals_name_the_tool(void **state)
{
    (void)state;
    json_t *tools = load("[{\"function\":{\"name\":\"a>b\"}},{\"function\":{\"name\":\"n\","
                         "\"parameters\":{\"type\":\"object\",\"properties\":{\"x\":"
                         "{\"enum\":[1,2]}},\"required\":[\"x\"]}}},{\"function\":{\"name\":"
                         "\"o\",\"parameters\":{\"type\":\"object\",\"properties\":{\"x\":"
                         "{\"enum\":[1,2]},\"y\":{\"type\":\"integer\"}}}}}]");
    corral_output_tags xml = syntax_tags("<tool_call>", CORRAL_CALLS_XML_FUNCTION);
    corral_error err = {{0}};
    assert_null(tool_grammar_create(tools, "a>b", &xml, &err));
    assert_non_null(strstr(err.message, "tool \"a>b\""));
    /* an enum of numbers with no type: the parser keeps "1" as text */
    assert_null(tool_grammar_create(tools, "n", &xml, &err));
    assert_non_null(strstr(err.message, "tool \"n\""));
    assert_non_null(strstr(err.message, "\"x\""));
    char *gbnf = tool_grammar_create(tools, "o", &xml, &err); /* x is optional: left out */
    assert_non_null(gbnf);
    corral_grammar *g = corral_grammar_create(gbnf, NULL, &err);
    assert_non_null(g);
    static const char y[] = "<tool_call>\n<function=o>\n<parameter=y>\n2\n</parameter>\n"
                            "</function>\n</tool_call>";
    static const char x[] = "<tool_call>\n<function=o>\n<parameter=x>\n2\n</parameter>\n"
                            "</function>\n</tool_call>";
    assert_true(corral_grammar_accepts(g, y, sizeof y - 1));
    assert_false(corral_grammar_accepts(g, x, sizeof x - 1));
    corral_grammar_free(g);
    free(gbnf);
    corral_output_tags gemma = syntax_tags("<|tool_call>", CORRAL_CALLS_GEMMA4);
    assert_non_null(gbnf = tool_grammar_create(tools, "n", &gemma, &err)); /* bare numbers */
    free(gbnf);
    corral_output_tags unknown = syntax_tags("<x>", (corral_call_syntax)99);
    assert_null(tool_grammar_create(tools, "n", &unknown, &err));
    json_decref(tools);
}

/* $refs are rewritten where they are schemas, never inside a const's or enum's data; a
 * property called "const" is a schema like any other. */
static void test_refs_move_but_data_stays(void **state)
{
    (void)state;
    json_t *tools = load("[{\"function\":{\"name\":\"f\",\"parameters\":{\"type\":\"object\","
                         "\"properties\":{\"k\":{\"const\":{\"$ref\":\"#/x\"}},"
                         "\"e\":{\"enum\":[{\"$ref\":\"#\"}]},\"n\":{\"$ref\":\"#/$defs/n\"},"
                         "\"const\":{\"$ref\":\"#/$defs/n\"}},"
                         "\"required\":[\"k\",\"e\",\"n\",\"const\"],\"$defs\":{\"n\":"
                         "{\"type\":\"integer\"}}}}}]");
    corral_output_tags tags = tags_of("[TOOL_CALLS]", "");
    corral_error err = {{0}};
    char *gbnf = tool_grammar_create(tools, "f", &tags, &err);
    json_decref(tools);
    if (!gbnf)
        fail_msg("%s", err.message);
    corral_grammar *g = corral_grammar_create(gbnf, NULL, &err);
    assert_non_null(g);
    free(gbnf);
    static const char good[] = "[TOOL_CALLS][{\"name\":\"f\",\"arguments\":{\"k\":{\"$ref\":"
                               "\"#/x\"},\"e\":{\"$ref\":\"#\"},\"n\":7,\"const\":8}}]";
    static const char bad[] = "[TOOL_CALLS][{\"name\":\"f\",\"arguments\":{\"k\":{\"$ref\":"
                              "\"#/x\"},\"e\":{\"$ref\":\"#\"},\"n\":7,\"const\":\"8\"}}]";
    assert_true(corral_grammar_accepts(g, good, sizeof good - 1));
    assert_false(corral_grammar_accepts(g, bad, sizeof bad - 1));
    corral_grammar_free(g);
}

static void test_parameters_it_cannot_enforce_name_the_tool(void **state)
{
    (void)state;
    json_t *tools = load("[{\"function\":{\"name\":\"ok\"}},{\"function\":{\"name\":\"odd\","
                         "\"parameters\":{\"type\":\"object\",\"properties\":{\"a\":"
                         "{\"type\":\"thing\"}}}}}]");
    corral_output_tags tags = tags_of("{", "");
    corral_error err = {{0}};
    assert_null(tool_grammar_create(tools, NULL, &tags, &err));
    assert_non_null(strstr(err.message, "tool \"odd\""));
    assert_non_null(strstr(err.message, "unsupported schema type \"thing\""));
    char *only_ok = tool_grammar_create(tools, "ok", &tags, &err); /* odd is not offered */
    assert_non_null(only_ok);
    free(only_ok);
    json_decref(tools);
}

static void test_choice_checked_against_the_tools(void **state)
{
    (void)state;
    chat_request *req = chat_request_create(true);
    char message[256];
    assert_true(tool_choice_check(req, message, sizeof message)); /* auto, no tools */
    req->tool_choice = CHAT_TOOL_CHOICE_REQUIRED;
    assert_false(tool_choice_check(req, message, sizeof message));
    assert_non_null(strstr(message, "no tools"));
    req->tools = load(tools_json);
    assert_true(tool_choice_check(req, message, sizeof message));
    req->tool_choice = CHAT_TOOL_CHOICE_NAMED;
    req->tool_choice_name = strdup("get_time");
    assert_false(tool_choice_check(req, message, sizeof message));
    assert_non_null(strstr(message, "\"get_time\""));
    free(req->tool_choice_name);
    req->tool_choice_name = strdup("plan");
    assert_true(tool_choice_check(req, message, sizeof message));
    req->format = json_string("json"); /* a second grammar for the same answer */
    assert_false(tool_choice_check(req, message, sizeof message));
    assert_non_null(strstr(message, "response format"));
    json_decref(req->format);
    req->format = json_string(""); /* no format */
    assert_true(tool_choice_check(req, message, sizeof message));
    chat_request_free(req);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bare_json_calls_any_tool),
        cmocka_unit_test(test_xml_tag_named_tool_in_the_templates_shape),
        cmocka_unit_test(test_mistral_tag_takes_a_list_of_one),
        cmocka_unit_test(test_xml_function_calls),
        cmocka_unit_test(test_xml_function_long_value),
        cmocka_unit_test(test_arg_pairs_calls),
        cmocka_unit_test(test_deepseek_calls),
        cmocka_unit_test(test_kimi_calls),
        cmocka_unit_test(test_minimax_calls),
        cmocka_unit_test(test_name_args_calls),
        cmocka_unit_test(test_gemma4_calls),
        cmocka_unit_test(test_functiongemma_calls),
        cmocka_unit_test(test_dsml_calls),
        cmocka_unit_test(test_minimax_m3_calls),
        cmocka_unit_test(test_python_calls),
        cmocka_unit_test(test_renderers_own_calls_are_accepted),
        cmocka_unit_test(test_harmony_call_after_its_header),
        cmocka_unit_test(test_glimmer_call_after_its_header),
        cmocka_unit_test(test_cohere_list_after_its_tag),
        cmocka_unit_test(test_cohere_tail_closes_the_open_block),
        cmocka_unit_test(test_cohere_tags_as_control_tokens),
        cmocka_unit_test(test_tagged_refusals_name_the_tool),
        cmocka_unit_test(test_templates_own_renderings_are_accepted),
        cmocka_unit_test(test_minimax_m3_template_renderings_are_accepted),
        cmocka_unit_test(test_refs_move_but_data_stays),
        cmocka_unit_test(test_parameters_it_cannot_enforce_name_the_tool),
        cmocka_unit_test(test_choice_checked_against_the_tools),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    free(last_gbnf);
    return failed;
}

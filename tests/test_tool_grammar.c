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

#include <cmocka.h>
#include <jansson.h>

#include "corral/engine.h"
#include "server/core/chat_request.h"
#include "server/core/tool_grammar.h"
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
    "\"required\":[\"do\"]}}}}}]";

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
    free(gbnf);
    return g;
}

/* The calls the output parser reads out of text under tags, as a JSON array. */
static json_t *parsed_calls(const corral_output_tags *tags, const char *text)
{
    corral_output_parser *p = corral_output_parser_create(tags, false, 1 << 16);
    assert_non_null(p);
    corral_output_delta d;
    corral_error err = {{0}};
    assert_true(corral_output_parser_feed(p, text, strlen(text), true, &d, &err));
    assert_int_equal(d.content_len, 0);
    json_t *calls = json_deep_copy(d.tool_calls);
    corral_output_parser_free(p);
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
            fail_msg("tag %s refused %s", tags->tool_open, valid[i]);
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
            fail_msg("tag %s accepted %s", tags->tool_open, *invalid);
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
        cmocka_unit_test(test_refs_move_but_data_stays),
        cmocka_unit_test(test_parameters_it_cannot_enforce_name_the_tool),
        cmocka_unit_test(test_choice_checked_against_the_tools),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

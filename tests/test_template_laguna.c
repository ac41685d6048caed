/*
 * The Laguna prompt (template/laguna.h) as ollama's `laguna` renderer writes it: the system
 * turn (the default one, the request's, none for a blank one), later system turns, thinking
 * opened or closed by think, the history's assistant turns (thinking from the message or from
 * the content's tags, whitespace-only answers, calls with string and JSON arguments), tool
 * results, a last assistant turn continued, and the output cap; and ollama's `poolside-v1`
 * layout of the same (packed tags, thinking only while on, every turn closed).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "template/laguna.h"

#define BOS "\xe3\x80\x88|EOS|\xe3\x80\x89"
#define DEFAULT_SYSTEM                                                                          \
    BOS "<system>\n\nYou are a helpful, conversationally-fluent assistant made by Poolside. "   \
        "You are here to be helpful to users through natural language conversations.\n</system>\n"

typedef char *render_fn(const json_t *messages, const json_t *tools, const json_t *think,
                        const corral_template_limits *limits, size_t *len, corral_error *err);

/* messages, tools (NULL: none) and think as JSON text, rendered by render and compared with
 * want. */
static void expect(render_fn *render, const char *messages, const char *tools, const char *think,
                   const char *want)
{
    json_error_t jerr;
    json_t *m = json_loads(messages, 0, &jerr);
    json_t *t = think ? json_loads(think, JSON_DECODE_ANY, &jerr) : NULL;
    json_t *tl = tools ? json_loads(tools, 0, &jerr) : NULL;
    assert_non_null(m);
    assert_true(!tools || tl);
    corral_error err = {{0}};
    size_t len;
    char *got = render(m, tl, t, NULL, &len, &err);
    json_decref(tl);
    if (!got)
        fail_msg("%s", err.message);
    if (strcmp(got, want) != 0)
        fail_msg("rendered\n%s\nwanted\n%s", got, want);
    assert_int_equal(len, strlen(want));
    free(got);
    json_decref(m);
    json_decref(t);
}

static void check_tools(const char *messages, const char *tools, const char *think,
                        const char *want)
{
    expect(laguna_render, messages, tools, think, want);
}

static void check(const char *messages, const char *think, const char *want)
{
    check_tools(messages, NULL, think, want);
}

static void test_default_system_and_thinking_switch(void **state)
{
    (void)state;
    check("[]", NULL, DEFAULT_SYSTEM "<assistant>\n</think>");
    check("[{\"role\":\"user\",\"content\":\"Hello\"}]", NULL,
          DEFAULT_SYSTEM "<user>\nHello\n</user>\n<assistant>\n</think>");
    check("[{\"role\":\"user\",\"content\":\"Hello\"}]", "true",
          DEFAULT_SYSTEM "<user>\nHello\n</user>\n<assistant>\n<think>");
    check("[{\"role\":\"user\",\"content\":\"Hello\"}]", "\"high\"",
          DEFAULT_SYSTEM "<user>\nHello\n</user>\n<assistant>\n<think>");
    check("[{\"role\":\"user\",\"content\":\"Hello\"}]", "false",
          DEFAULT_SYSTEM "<user>\nHello\n</user>\n<assistant>\n</think>");
    /* ollama's levels turn it on; any other string is not a level and leaves it off */
    static const char *const on[] = {"\"low\"", "\"medium\"", "\"max\""};
    static const char *const off[] = {"\"false\"", "\"none\"", "\"\"", "null"};
    for (size_t i = 0; i < sizeof on / sizeof *on; i++)
        check("[{\"role\":\"user\",\"content\":\"Hello\"}]", on[i],
              DEFAULT_SYSTEM "<user>\nHello\n</user>\n<assistant>\n<think>");
    for (size_t i = 0; i < sizeof off / sizeof *off; i++)
        check("[{\"role\":\"user\",\"content\":\"Hello\"}]", off[i],
              DEFAULT_SYSTEM "<user>\nHello\n</user>\n<assistant>\n</think>");
}

static void test_system_turns(void **state)
{
    (void)state;
    /* the leading one replaces the default, its trailing space dropped */
    check("[{\"role\":\"system\",\"content\":\"Stay concise.\\n\\n\"},"
          "{\"role\":\"user\",\"content\":\"Hi\"}]",
          NULL, BOS "<system>\n\nStay concise.\n</system>\n<user>\nHi\n</user>\n<assistant>\n</think>");
    /* a blank one leaves the system turn out */
    check("[{\"role\":\"system\",\"content\":\" \"},{\"role\":\"user\",\"content\":\"Hi\"}]", NULL,
          BOS "<user>\nHi\n</user>\n<assistant>\n</think>");
    /* a later one stays where it is */
    check("[{\"role\":\"system\",\"content\":\"Primary.\"},{\"role\":\"user\",\"content\":\"Hi\"},"
          "{\"role\":\"system\",\"content\":\"Secondary.\"}]",
          NULL,
          BOS "<system>\n\nPrimary.\n</system>\n<user>\nHi\n</user>\n<system>\nSecondary.\n"
              "</system>\n<assistant>\n</think>");
}

static void test_history(void **state)
{
    (void)state;
    /* thinking and calls of an earlier turn, then the tool's result */
    check("[{\"role\":\"user\",\"content\":\"Add these.\"},"
          "{\"role\":\"assistant\",\"content\":\"\",\"thinking\":\"Need addition.\","
          "\"tool_calls\":[{\"function\":{\"name\":\"add\",\"arguments\":{\"a\":2,\"b\":3}}}]},"
          "{\"role\":\"tool\",\"content\":\"5\"},{\"role\":\"user\",\"content\":\"Thanks\"}]",
          "true",
          DEFAULT_SYSTEM "<user>\nAdd these.\n</user>\n<assistant>\n<think>\nNeed addition.\n"
                         "</think>\n<tool_call>add\n<arg_key>a</arg_key>\n<arg_value>2</arg_value>\n"
                         "<arg_key>b</arg_key>\n<arg_value>3</arg_value>\n</tool_call>\n"
                         "</assistant>\n<tool_response>\n5\n</tool_response>\n<user>\nThanks\n"
                         "</user>\n<assistant>\n<think>");
    /* thinking sent back inside the content; the message's own thinking wins over it */
    check("[{\"role\":\"user\",\"content\":\"Explain\"},"
          "{\"role\":\"assistant\",\"content\":\"<think>\\nPlan\\n</think>\\nAnswer\\n\\n\"},"
          "{\"role\":\"user\",\"content\":\"Next\"}]",
          "true",
          DEFAULT_SYSTEM "<user>\nExplain\n</user>\n<assistant>\n<think>\nPlan\n</think>\nAnswer\n"
                         "</assistant>\n<user>\nNext\n</user>\n<assistant>\n<think>");
    check("[{\"role\":\"user\",\"content\":\"Explain\"},{\"role\":\"assistant\",\"thinking\":"
          "\"Use metadata.\",\"content\":\"<think>Ignore this</think>\\nAnswer\"},"
          "{\"role\":\"user\",\"content\":\"Next\"}]",
          NULL,
          DEFAULT_SYSTEM "<user>\nExplain\n</user>\n<assistant>\n<think>\nUse metadata.\n</think>\n"
                         "Answer\n</assistant>\n<user>\nNext\n</user>\n<assistant>\n</think>");
    /* an answer of white space only; arguments of other kinds as spaced JSON */
    check("[{\"role\":\"user\",\"content\":\"Continue\"},{\"role\":\"assistant\",\"content\":"
          "\" \\n\\t \"},{\"role\":\"user\",\"content\":\"Do calls\"},{\"role\":\"assistant\","
          "\"content\":\"\",\"tool_calls\":[{\"function\":{\"name\":\"configure\",\"arguments\":"
          "{\"flag\":true,\"opts\":{\"b\":[1,2],\"a\":\"<x>\"}}}}]},"
          "{\"role\":\"user\",\"content\":\"Done?\"}]",
          NULL,
          DEFAULT_SYSTEM "<user>\nContinue\n</user>\n<assistant>\n</think>\n</assistant>\n"
                         "<user>\nDo calls\n</user>\n<assistant>\n</think>\n<tool_call>configure\n"
                         "<arg_key>flag</arg_key>\n<arg_value>true</arg_value>\n"
                         "<arg_key>opts</arg_key>\n<arg_value>{\"a\": \"\\u003cx\\u003e\", "
                         "\"b\": [1, 2]}</arg_value>\n</tool_call>\n</assistant>\n"
                         "<user>\nDone?\n</user>\n<assistant>\n</think>");
}

/* A last assistant turn with something in it is continued; an empty one is closed. */
static void test_last_assistant_turn(void **state)
{
    (void)state;
    check("[{\"role\":\"user\",\"content\":\"Hi\"},{\"role\":\"assistant\",\"content\":\"Hel\"}]",
          "true", DEFAULT_SYSTEM "<user>\nHi\n</user>\n<assistant>\n</think>\nHel\n");
    check("[{\"role\":\"user\",\"content\":\"Hi\"},{\"role\":\"assistant\",\"content\":\"\"}]",
          NULL, DEFAULT_SYSTEM "<user>\nHi\n</user>\n<assistant>\n</think>\n</assistant>\n");
}

static void test_output_cap(void **state)
{
    (void)state;
    json_t *m = json_pack("[{s:s,s:s}]", "role", "user", "content", "a long enough message");
    corral_template_limits limits = corral_template_default_limits();
    limits.max_output_bytes = 64;
    corral_error err = {{0}};
    size_t len;
    assert_null(laguna_render(m, NULL, NULL, &limits, &len, &err));
    assert_non_null(strstr(err.message, "longer than 64 bytes"));
    json_decref(m);
}

/* Offered tools: a line of JSON each in the system turn (ollama's field order and spacing),
 * then how to call them, with the thinking variant when thinking is on. */
#define WEATHER_TOOL                                                                            \
    "{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": "          \
    "\"Get weather\", \"parameters\": {\"type\": \"object\", \"required\": [\"location\"], "      \
    "\"properties\": {\"location\": {\"type\": \"string\", \"description\": \"City\"}}}}}"
#define TOOLS_TEXT                                                                              \
    "### Tools\n\nYou may call functions to assist with the user query.\nAll available "        \
    "function signatures are listed below:\n<available_tools>\n" WEATHER_TOOL                   \
    "\n</available_tools>\n\n"
#define HOW_TO_CALL                                                                             \
    "For each function call, return an unescaped XML-like object with function name and "      \
    "arguments within '<tool_call>' and '</tool_call>' tags, like here:\n"
#define CALL_EXAMPLE                                                                            \
    "<tool_call>function-name\n<arg_key>argument-key</arg_key>\n<arg_value>value-of-argument-"  \
    "key</arg_value>\n</tool_call>\n</system>\n"

static void test_tools_in_the_system_turn(void **state)
{
    (void)state;
    /* the client's fields in another order, and one ollama's tools do not carry */
    static const char tools[] =
        "[{\"function\":{\"parameters\":{\"properties\":{\"location\":{\"type\":\"string\","
        "\"description\":\"City\"}},\"required\":[\"location\"],\"type\":\"object\"},"
        "\"description\":\"Get weather\",\"name\":\"get_weather\",\"strict\":true},"
        "\"type\":\"function\"}]";
    check_tools("[{\"role\":\"system\",\"content\":\"\"},{\"role\":\"user\",\"content\":"
                "\"Weather?\"}]",
                tools, NULL,
                BOS "<system>\n\n\n" TOOLS_TEXT HOW_TO_CALL CALL_EXAMPLE
                    "<user>\nWeather?\n</user>\n<assistant>\n</think>");
    check_tools("[{\"role\":\"system\",\"content\":\"Stay concise.\"},{\"role\":\"user\","
                "\"content\":\"Weather?\"}]",
                tools, "true",
                BOS "<system>\n\nStay concise.\n\n" TOOLS_TEXT
                    "Wrap your thinking in '<think>', '</think>' tags, followed by a function "
                    "call. " HOW_TO_CALL "<think> your thoughts here </think>\n" CALL_EXAMPLE
                    "<user>\nWeather?\n</user>\n<assistant>\n<think>");
    check_tools("[{\"role\":\"user\",\"content\":\"Hi\"}]", "[]", NULL,
                DEFAULT_SYSTEM "<user>\nHi\n</user>\n<assistant>\n</think>");
}

/* poolside-v1: the same turns packed tight, an earlier answer's thinking only while thinking
 * is on, every assistant turn closed and a new one opened. */
#define V1_SYSTEM                                                                               \
    BOS "<system>You are a helpful, conversationally-fluent assistant made by Poolside. You "   \
        "are here to be helpful to users through natural language conversations.</system>\n"
#define V1_TOOLS                                                                                \
    "### Tools\n\nYou may call functions to assist with the user query.\nAll available "        \
    "function signatures are listed below:\n<available_tools>\n" WEATHER_TOOL                   \
    "\n</available_tools></system>\n"

static void check_v1(const char *messages, const char *tools, const char *think,
                     const char *want)
{
    expect(poolside_v1_render, messages, tools, think, want);
}

static void test_poolside_v1(void **state)
{
    (void)state;
    static const char tools[] =
        "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"description\":"
        "\"Get weather\",\"parameters\":{\"type\":\"object\",\"required\":[\"location\"],"
        "\"properties\":{\"location\":{\"type\":\"string\",\"description\":\"City\"}}}}}]";
    const char *hello = "[{\"role\":\"user\",\"content\":\"Hello\"}]";
    check_v1("[]", NULL, NULL, V1_SYSTEM "<assistant></think>");
    check_v1(hello, NULL, NULL, V1_SYSTEM "<user>Hello</user>\n<assistant></think>");
    check_v1(hello, NULL, "true", V1_SYSTEM "<user>Hello</user>\n<assistant><think>");
    check_v1(hello, NULL, "false", V1_SYSTEM "<user>Hello</user>\n<assistant></think>");
    check_v1(hello, NULL, "\"low\"", V1_SYSTEM "<user>Hello</user>\n<assistant><think>");
    check_v1(hello, NULL, "\"high\"", V1_SYSTEM "<user>Hello</user>\n<assistant><think>");
    check_v1(hello, NULL, "\"false\"", V1_SYSTEM "<user>Hello</user>\n<assistant></think>");
    check_v1(hello, NULL, "\"none\"", V1_SYSTEM "<user>Hello</user>\n<assistant></think>");
    check_v1("[{\"role\":\"system\",\"content\":\"Stay concise.\\n\\n\"},{\"role\":\"user\","
             "\"content\":\"Hi\"}]",
             NULL, NULL,
             BOS "<system>Stay concise.</system>\n<user>Hi</user>\n<assistant></think>");
    /* a blank system message leaves the turn out unless tools or thinking want one */
    const char *blank = "[{\"role\":\"system\",\"content\":\"\"},{\"role\":\"user\","
                        "\"content\":\"Hi\"}]";
    check_v1(blank, NULL, NULL, BOS "<user>Hi</user>\n<assistant></think>");
    check_v1(blank, NULL, "true", BOS "<system></system>\n<user>Hi</user>\n<assistant><think>");
    check_v1(blank, tools, NULL,
             BOS "<system>" V1_TOOLS "<user>Hi</user>\n<assistant></think>");
    check_v1("[{\"role\":\"system\",\"content\":\"Stay concise.\"},{\"role\":\"user\","
             "\"content\":\"Weather?\"}]",
             tools, "true",
             BOS "<system>Stay concise.\n\n" V1_TOOLS "<user>Weather?</user>\n<assistant><think>");
    check_v1("[{\"role\":\"user\",\"content\":\"Weather?\"}]", tools, NULL,
             BOS "<system>You are a helpful, conversationally-fluent assistant made by Poolside. "
                 "You are here to be helpful to users through natural language conversations."
                 "\n\n" V1_TOOLS "<user>Weather?</user>\n<assistant></think>");
    check_v1("[{\"role\":\"system\",\"content\":\"Primary.\"},{\"role\":\"user\",\"content\":"
             "\"Hi\"},{\"role\":\"system\",\"content\":\"Secondary.\"}]",
             NULL, NULL,
             BOS "<system>Primary.</system>\n<user>Hi</user>\n<system>Secondary.</system>\n"
                 "<assistant></think>");
    /* an earlier answer's thinking and content as they are, calls, the tool's result */
    check_v1("[{\"role\":\"user\",\"content\":\"Add these.\"},{\"role\":\"assistant\","
             "\"content\":\"\\nCalling the tool.\\n\",\"thinking\":\"Need addition.\","
             "\"tool_calls\":[{\"function\":{\"name\":\"add\",\"arguments\":{\"a\":2,\"b\":3}}}]},"
             "{\"role\":\"tool\",\"content\":\"5\"},{\"role\":\"user\",\"content\":\"Thanks\"}]",
             NULL, "true",
             V1_SYSTEM "<user>Add these.</user>\n<assistant><think>Need addition.</think>\n"
                       "Calling the tool.\n<tool_call>add<arg_key>a</arg_key><arg_value>2"
                       "</arg_value><arg_key>b</arg_key><arg_value>3</arg_value></tool_call>"
                       "</assistant>\n<tool_response>5</tool_response>\n<user>Thanks</user>\n"
                       "<assistant><think>");
    const char *answered = "[{\"role\":\"user\",\"content\":\"Explain\"},{\"role\":"
                           "\"assistant\",\"thinking\":\"Hidden plan.\",\"content\":\"Answer\"},"
                           "{\"role\":\"user\",\"content\":\"Next\"}]";
    check_v1(answered, NULL, NULL,
             V1_SYSTEM "<user>Explain</user>\n<assistant></think>Answer</assistant>\n"
                       "<user>Next</user>\n<assistant></think>");
    check_v1(answered, NULL, "true",
             V1_SYSTEM "<user>Explain</user>\n<assistant><think>Hidden plan.</think>Answer"
                       "</assistant>\n<user>Next</user>\n<assistant><think>");
    check_v1("[{\"role\":\"user\",\"content\":\"Explain\"},{\"role\":\"assistant\","
             "\"content\":\"Answer\"},{\"role\":\"user\",\"content\":\"Next\"}]",
             NULL, "true",
             V1_SYSTEM "<user>Explain</user>\n<assistant><think></think>Answer</assistant>\n"
                       "<user>Next</user>\n<assistant><think>");
    check_v1("[{\"role\":\"user\",\"content\":\"Do calls\"},{\"role\":\"assistant\","
             "\"tool_calls\":[{\"function\":{\"name\":\"echo\",\"arguments\":{\"text\":"
             "\"hello\",\"count\":2}}},{\"function\":{\"name\":\"configure\",\"arguments\":"
             "{\"flag\":true,\"options\":{\"mode\":\"fast\"}}}}]},{\"role\":\"user\","
             "\"content\":\"Done?\"}]",
             NULL, NULL,
             V1_SYSTEM "<user>Do calls</user>\n<assistant></think><tool_call>echo<arg_key>text"
                       "</arg_key><arg_value>hello</arg_value><arg_key>count</arg_key>"
                       "<arg_value>2</arg_value></tool_call><tool_call>configure<arg_key>flag"
                       "</arg_key><arg_value>true</arg_value><arg_key>options</arg_key>"
                       "<arg_value>{\"mode\": \"fast\"}</arg_value></tool_call></assistant>\n"
                       "<user>Done?</user>\n<assistant></think>");
    /* a last assistant message is closed, not continued */
    check_v1("[{\"role\":\"user\",\"content\":\"Complete this\"},{\"role\":\"assistant\","
             "\"content\":\"Partial\"}]",
             NULL, NULL,
             V1_SYSTEM "<user>Complete this</user>\n<assistant></think>Partial</assistant>\n"
                       "<assistant></think>");
    json_t *m = json_pack("[{s:s,s:s}]", "role", "user", "content", "a long enough message");
    corral_template_limits limits = corral_template_default_limits();
    limits.max_output_bytes = 64;
    corral_error err = {{0}};
    size_t len;
    assert_null(poolside_v1_render(m, NULL, NULL, &limits, &len, &err));
    assert_non_null(strstr(err.message, "poolside-v1 prompt"));
    json_decref(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_default_system_and_thinking_switch),
        cmocka_unit_test(test_system_turns),
        cmocka_unit_test(test_history),
        cmocka_unit_test(test_last_assistant_turn),
        cmocka_unit_test(test_output_cap),
        cmocka_unit_test(test_tools_in_the_system_turn),
        cmocka_unit_test(test_poolside_v1),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

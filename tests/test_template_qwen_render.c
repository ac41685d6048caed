/*
 * The Qwen family's built-in renderers (template/renderer.h, qwen_render.c) as ollama's
 * `qwen3.5`, `ornith`, `qwen3.8`, `qwen3-coder`, `qwen3-vl-instruct` and `qwen3-vl-thinking`
 * renderers write their
 * prompts: plain chat, system turns, offered tools (their JSON in ollama's field order and
 * spacing, or the coder's XML), calls and tool results in the history, thinking on, off and
 * unset, a last assistant turn continued, image markers left in place, the output cap, tools
 * nested too deep and fields of the wrong kinds; the renderer table's
 * lookup, tags and capabilities; and the server's choice (server/core/renderer_model.h): a
 * config's renderer name picks the renderer, laguna's family rule stands, and a name Corral
 * does not know leaves the prompt to the model's template.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "server/core/prompt.h"
#include "server/models/model_info.h"
#include "template/renderer.h"

#define S "<|im_start|>"
#define E "<|im_end|>\n"

#define XML_HELP                                                                                \
    "\n</tools>\n\nIf you choose to call a function ONLY reply in the following format with "  \
    "NO suffix:\n\n<tool_call>\n<function=example_function_name>\n"                             \
    "<parameter=example_parameter_1>\nvalue_1\n</parameter>\n<parameter=example_parameter_2>\n" \
    "This is the value for the second parameter\nthat can span\nmultiple lines\n</parameter>\n" \
    "</function>\n</tool_call>\n\n<IMPORTANT>\nReminder:\n- Function calls MUST follow the "    \
    "specified format: an inner <function=...></function> block must be nested within "         \
    "<tool_call></tool_call> XML tags\n- Required parameters MUST be specified\n- You may "     \
    "provide optional reasoning for your function call in natural language BEFORE the "        \
    "function call, but NOT after\n- If there is no function call available, answer the "      \
    "question like normal with your current knowledge and do not tell the user about "         \
    "function calls\n</IMPORTANT>"

/* messages, tools (NULL: none) and think (NULL: unset) as JSON text through the renderer of
 * ollama's name, compared with want. */
static void check(const char *renderer, const char *messages, const char *tools,
                  const char *think, const char *want)
{
    const corral_renderer *r = corral_renderer_find(renderer);
    assert_non_null(r);
    json_error_t jerr;
    json_t *m = json_loads(messages, 0, &jerr);
    json_t *tl = tools ? json_loads(tools, 0, &jerr) : NULL;
    json_t *t = think ? json_loads(think, JSON_DECODE_ANY, &jerr) : NULL;
    assert_non_null(m);
    assert_true(!tools || tl);
    assert_true(!think || t);
    corral_error err = {{0}};
    size_t len;
    char *got = r->render(m, tl, t, NULL, &len, &err);
    if (!got)
        fail_msg("%s", err.message);
    if (strcmp(got, want) != 0)
        fail_msg("%s rendered\n%s\nwanted\n%s", renderer, got, want);
    assert_int_equal(len, strlen(want));
    free(got);
    json_decref(m);
    json_decref(tl);
    json_decref(t);
}

#define WEATHER_TOOL                                                                            \
    "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"parameters\":"            \
    "{\"properties\":{\"location\":{\"type\":\"string\"}},\"required\":[\"location\"],"          \
    "\"type\":\"object\",\"x-extra\":1}}}]"
/* as ollama marshals it: its structs' field order, unknown fields dropped, spaced */
#define WEATHER_TOOL_JSON                                                                       \
    "{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"parameters\": "       \
    "{\"type\": \"object\", \"required\": [\"location\"], \"properties\": {\"location\": "      \
    "{\"type\": \"string\"}}}}}"

/* a tool with every field ollama's structs know, and one they do not */
#define RICH_TOOL                                                                               \
    "[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"description\":\"Does <f> & more\","  \
    "\"parameters\":{\"type\":\"object\",\"$defs\":{\"b\":1,\"a\":2},\"properties\":{\"z\":"     \
    "{\"description\":\"Zed\",\"type\":[\"string\",\"null\"],\"enum\":[\"x\",\"y\"],"           \
    "\"extra\":1},\"a\":{\"required\":[\"q\"],\"type\":\"object\",\"properties\":{\"q\":"        \
    "{\"type\":\"integer\"}}},\"u\":{\"items\":{\"type\":\"string\",\"b\":1,\"a\":2},\"anyOf\":" \
    "[{\"type\":\"string\"},{\"type\":[\"number\"]}]}}}}}]"

static void test_qwen35_chat_and_thinking(void **state)
{
    (void)state;
    const char *hello = "[{\"role\":\"user\",\"content\":\" hello \"}]";
    check("qwen3.5", hello, NULL, NULL, S "user\nhello" E S "assistant\n<think>\n");
    check("qwen3.5", hello, NULL, "true", S "user\nhello" E S "assistant\n<think>\n");
    check("qwen3.5", hello, NULL, "\"low\"", S "user\nhello" E S "assistant\n<think>\n");
    check("qwen3.5", hello, NULL, "false",
          S "user\nhello" E S "assistant\n<think>\n\n</think>\n\n");
    /* the leading system turn, trimmed, written even when empty; a later one stays */
    check("qwen3.5",
          "[{\"role\":\"system\",\"content\":\"Be brief.\\n\"},{\"role\":\"user\",\"content\":"
          "\"Hi\"},{\"role\":\"system\",\"content\":\"Later.\"},{\"role\":\"user\",\"content\":"
          "\"Again\"}]",
          NULL, "false",
          S "system\nBe brief." E S "user\nHi" E S "system\nLater." E S "user\nAgain" E S
            "assistant\n<think>\n\n</think>\n\n");
    check("qwen3.5",
          "[{\"role\":\"system\",\"content\":\"\"},{\"role\":\"user\",\"content\":\"Hi\"}]", NULL,
          NULL, S "system\n" E S "user\nHi" E S "assistant\n<think>\n");
    /* image markers are the server's, placed in the text before rendering */
    check("qwen3.5", "[{\"role\":\"user\",\"content\":\"<corral-image-00ff-0>What is it?\"}]",
          NULL, NULL, S "user\n<corral-image-00ff-0>What is it?" E S "assistant\n<think>\n");
}

static void test_qwen35_tools_and_history(void **state)
{
    (void)state;
    /* tools first, then the system text; an earlier answer's call without its thinking */
    check("qwen3.5",
          "[{\"role\":\"system\",\"content\":\"You are a helpful assistant.\"},"
          "{\"role\":\"user\",\"content\":\"What's the weather in Paris?\"},"
          "{\"role\":\"assistant\",\"content\":\"I'll check.\",\"thinking\":\"Look it up.\","
          "\"tool_calls\":[{\"function\":{\"name\":\"get_weather\",\"arguments\":"
          "{\"location\":\"Paris\"}}}]},"
          "{\"role\":\"tool\",\"content\":\"22C\"},{\"role\":\"user\",\"content\":\"Thanks\"}]",
          WEATHER_TOOL, NULL,
          S "system\n# Tools\n\nYou have access to the following functions:\n\n<tools>\n"
            WEATHER_TOOL_JSON XML_HELP "\n\nYou are a helpful assistant." E
          S "user\nWhat's the weather in Paris?" E
          S "assistant\nI'll check.\n\n<tool_call>\n<function=get_weather>\n"
            "<parameter=location>\nParis\n</parameter>\n</function>\n</tool_call>" E
          S "user\n<tool_response>\n22C\n</tool_response>" E S "user\nThanks" E
          S "assistant\n<think>\n");
    /* the current answer's round trip keeps its thinking; calls in a row, results grouped;
     * arguments other than strings as Go prints them (objects as compact sorted JSON) */
    check("qwen3.5",
          "[{\"role\":\"user\",\"content\":\"Run them.\"},{\"role\":\"assistant\",\"content\":"
          "\"\",\"thinking\":\" Need both. \",\"tool_calls\":[{\"function\":{\"name\":\"add\","
          "\"arguments\":{\"b\":3,\"a\":2.5}}},{\"function\":{\"name\":\"set\",\"arguments\":"
          "{\"on\":true,\"opts\":{\"z\":[1,2],\"a\":\"<x>\"},\"none\":null}}}]},"
          "{\"role\":\"tool\",\"content\":\"5.5\"},{\"role\":\"tool\",\"content\":\"ok\"}]",
          NULL, NULL,
          S "user\nRun them." E S "assistant\n<think>\nNeed both.\n</think>\n\n<tool_call>\n"
            "<function=add>\n<parameter=b>\n3\n</parameter>\n<parameter=a>\n2.5\n</parameter>\n"
            "</function>\n</tool_call>\n<tool_call>\n<function=set>\n<parameter=on>\ntrue\n"
            "</parameter>\n<parameter=opts>\n{\"a\":\"\\u003cx\\u003e\",\"z\":[1,2]}\n"
            "</parameter>\n<parameter=none>\nnull\n</parameter>\n</function>\n</tool_call>" E
          S "user\n<tool_response>\n5.5\n</tool_response>\n<tool_response>\nok\n"
            "</tool_response>" E S "assistant\n<think>\n");
    /* thinking sent back in the content of an earlier answer is cut out */
    check("qwen3.5",
          "[{\"role\":\"user\",\"content\":\"Explain\"},{\"role\":\"assistant\",\"content\":"
          "\"<think>\\nPlan\\n</think>\\n\\nAnswer\"},{\"role\":\"user\",\"content\":\"Next\"}]",
          NULL, "true",
          S "user\nExplain" E S "assistant\nAnswer" E S "user\nNext" E S "assistant\n<think>\n");
    /* a last assistant turn is continued: with its think block when thinking */
    const char *partial = "[{\"role\":\"user\",\"content\":\"Go\"},{\"role\":\"assistant\","
                          "\"content\":\"Partial\",\"thinking\":\"Hm\"}]";
    check("qwen3.5", partial, NULL, NULL,
          S "user\nGo" E S "assistant\n<think>\nHm\n</think>\n\nPartial");
    check("qwen3.5", partial, NULL, "false", S "user\nGo" E S "assistant\nPartial");
}

/* Ornith: Qwen 3.5 with a think block in every earlier answer, empty when it has none, also
 * when thinking is off. */
static void test_ornith(void **state)
{
    (void)state;
    check("ornith",
          "[{\"role\":\"user\",\"content\":\"Say hello.\"},{\"role\":\"assistant\",\"content\":"
          "\"Hello.\"},{\"role\":\"user\",\"content\":\"Now say bye.\"}]",
          NULL, NULL,
          S "user\nSay hello." E S "assistant\n<think>\n\n</think>\n\nHello." E
          S "user\nNow say bye." E S "assistant\n<think>\n");
    check("ornith",
          "[{\"role\":\"user\",\"content\":\"Say hello.\"},{\"role\":\"assistant\",\"content\":"
          "\"Hello.\",\"thinking\":\"Keep it short.\"},{\"role\":\"user\",\"content\":"
          "\"Now say bye.\"}]",
          NULL, "false",
          S "user\nSay hello." E S "assistant\n<think>\nKeep it short.\n</think>\n\nHello." E
          S "user\nNow say bye." E S "assistant\n<think>\n\n</think>\n\n");
    /* thinking sent back in an earlier answer's content is moved into its block */
    check("ornith",
          "[{\"role\":\"user\",\"content\":\"Explain\"},{\"role\":\"assistant\",\"content\":"
          "\"<think>\\nPlan\\n</think>\\n\\nAnswer\"},{\"role\":\"user\",\"content\":\"Next\"}]",
          NULL, NULL,
          S "user\nExplain" E S "assistant\n<think>\nPlan\n</think>\n\nAnswer" E
          S "user\nNext" E S "assistant\n<think>\n");
}

#define XHIGH                                                                                   \
    "Reasoning effort is set to xhigh. Please think carefully through the task, validate key "  \
    "assumptions, consider plausible alternatives, and prioritize correctness, consistency, "   \
    "and clarity in the final answer."
#define LOW                                                                                     \
    "Reasoning effort is set to low. Keep your thinking brief and focused, moving directly to " \
    "the conclusion without unnecessary elaboration."
#define HELLO "{\"role\":\"user\",\"content\":\"Hello\"}"
#define HELLO_TURNS S "user\nHello" E S "assistant\n<think>\n"
#define CITY_TOOL(NAME, DESCRIPTION)                                                            \
    "{\"type\":\"function\",\"function\":{\"name\":\"" NAME "\",\"description\":\""             \
    DESCRIPTION "\",\"parameters\":{\"type\":\"object\",\"required\":[\"city\"],"               \
    "\"properties\":{\"city\":{\"type\":\"string\"}}}}}"
#define CITY_TOOL_JSON(NAME, DESCRIPTION)                                                       \
    "{\"type\": \"function\", \"function\": {\"name\": \"" NAME "\", \"description\": \""       \
    DESCRIPTION "\", \"parameters\": {\"type\": \"object\", \"required\": [\"city\"], "         \
    "\"properties\": {\"city\": {\"type\": \"string\"}}}}}"
#define CITY_TOOLS                                                                              \
    "[" CITY_TOOL("get_weather", "Get weather") "," CITY_TOOL("get_uv", "Get UV index") "]"
#define CITY_TOOLS_HEADER                                                                       \
    S "system\n# Tools\n\nYou have access to the following functions:\n\n<tools>\n"            \
      CITY_TOOL_JSON("get_weather", "Get weather") "\n"                                         \
      CITY_TOOL_JSON("get_uv", "Get UV index") XML_HELP

/* Qwen 3.8: the effort's guidance and every system or developer message in one leading
 * system turn; a think block in every earlier answer, its content's tags kept as text. */
static void test_qwen38(void **state)
{
    (void)state;
    check("qwen3.8", "[" HELLO "]", NULL, NULL, S "system\n" XHIGH E HELLO_TURNS);
    check("qwen3.8", "[" HELLO "]", NULL, "\"high\"", S "system\n" XHIGH E HELLO_TURNS);
    check("qwen3.8", "[" HELLO "]", NULL, "\"max\"", S "system\n" XHIGH E HELLO_TURNS);
    check("qwen3.8", "[" HELLO "]", NULL, "\"low\"", S "system\n" LOW E HELLO_TURNS);
    check("qwen3.8", "[" HELLO "]", NULL, "\"medium\"", HELLO_TURNS);
    check("qwen3.8", "[" HELLO "]", NULL, "false",
          S "user\nHello" E S "assistant\n<think>\n\n</think>\n\n");
    check("qwen3.8", "[{\"role\":\"system\",\"content\":\" Be concise. \\n\"}," HELLO "]", NULL,
          "true", S "system\nBe concise." E HELLO_TURNS);
    /* a blank system message alone makes no turn */
    check("qwen3.8", "[{\"role\":\"system\",\"content\":\" \"}," HELLO "]", NULL, "true",
          HELLO_TURNS);
    check("qwen3.8", "[{\"role\":\"developer\",\"content\":\"Use Go.\"}," HELLO "]", NULL, NULL,
          S "system\n" XHIGH "\n\nUse Go." E HELLO_TURNS);
    check("qwen3.8",
          "[{\"role\":\"system\",\"content\":\"Base policy.\"},{\"role\":\"developer\","
          "\"content\":\"Use Go.\"}," HELLO "]",
          NULL, NULL, S "system\n" XHIGH "\n\nBase policy.\n\nUse Go." E HELLO_TURNS);
    check("qwen3.8",
          "[{\"role\":\"system\",\"content\":\"Base policy.\"},{\"role\":\"user\",\"content\":"
          "\"Base question\"},{\"role\":\"assistant\",\"content\":\"Base answer\"},{\"role\":"
          "\"system\",\"content\":\"Request policy.\"},{\"role\":\"user\",\"content\":"
          "\"Current question\"}]",
          NULL, NULL,
          S "system\n" XHIGH "\n\nBase policy.\n\nRequest policy." E S "user\nBase question" E
          S "assistant\n<think>\n\n</think>\n\nBase answer" E S "user\nCurrent question" E
          S "assistant\n<think>\n");
    check("qwen3.8",
          "[{\"role\":\"user\",\"content\":\"First\"},{\"role\":\"assistant\",\"thinking\":"
          "\"Plan\",\"content\":\"<think>literal</think>\\nAnswer\"},{\"role\":\"user\","
          "\"content\":\"Next\"}]",
          NULL, NULL,
          S "system\n" XHIGH E S "user\nFirst" E
          S "assistant\n<think>\nPlan\n</think>\n\n<think>literal</think>\nAnswer" E
          S "user\nNext" E S "assistant\n<think>\n");
    /* a role ollama's renderer does not know is written as a turn of its own */
    check("qwen3.8", "[" HELLO ",{\"role\":\"critic\",\"content\":\"Shorter.\"}]", NULL, "true",
          S "user\nHello" E S "critic\nShorter." E S "assistant\n<think>\n");
    check("qwen3.8",
          "[{\"role\":\"developer\",\"content\":\"Use tools when requested.\"},{\"role\":"
          "\"user\",\"content\":\"Check the weather.\"}]",
          CITY_TOOLS, "true",
          CITY_TOOLS_HEADER "\n\nUse tools when requested." E S "user\nCheck the weather." E
          S "assistant\n<think>\n");
    check("qwen3.8", "[" HELLO "]", CITY_TOOLS, NULL,
          S "system\n" XHIGH "\n\n# Tools\n\nYou have access to the following functions:\n\n"
            "<tools>\n" CITY_TOOL_JSON("get_weather", "Get weather") "\n"
            CITY_TOOL_JSON("get_uv", "Get UV index") XML_HELP E HELLO_TURNS);
    check("qwen3.8",
          "[{\"role\":\"user\",\"content\":\"Weather?\"},{\"role\":\"assistant\",\"thinking\":"
          "\"Need current data.\",\"content\":\"I'll check.\",\"tool_calls\":[{\"function\":"
          "{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Montréal\"}}}]},{\"role\":"
          "\"tool\",\"content\":\"{\\\"temp\\\": 18}\"}]",
          CITY_TOOLS, "true",
          CITY_TOOLS_HEADER E S "user\nWeather?" E
          S "assistant\n<think>\nNeed current data.\n</think>\n\nI'll check.\n\n<tool_call>\n"
            "<function=get_weather>\n<parameter=city>\nMontréal\n</parameter>\n</function>\n"
            "</tool_call>" E
          S "user\n<tool_response>\n{\"temp\": 18}\n</tool_response>" E
          S "assistant\n<think>\n");
    check("qwen3.8",
          "[{\"role\":\"user\",\"content\":\"Complete this\"},{\"role\":\"assistant\","
          "\"thinking\":\"Draft\",\"content\":\"Partial\"}]",
          NULL, NULL,
          S "system\n" XHIGH E S "user\nComplete this" E
          S "assistant\n<think>\nDraft\n</think>\n\nPartial");
}

/* What Qwen 3.8's renderer refuses: no question to answer, a think value it does not take. */
static void test_qwen38_refusals(void **state)
{
    (void)state;
    static const struct {
        const char *messages, *think, *error;
    } cases[] = {
        {"[]", NULL, "no user message with a question"},
        {"[{\"role\":\"system\",\"content\":\"Hello\"}]", NULL, "no user message with a question"},
        {"[{\"role\":\"user\",\"content\":\" <tool_response>x</tool_response>\\n\"}]", NULL,
         "no user message with a question"},
        {"[" HELLO "]", "\"extreme\"", "think takes"},
        {"[" HELLO "]", "3", "think takes"},
    };
    corral_render_fn *render = corral_renderer_find("qwen3.8")->render;
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        json_t *m = json_loads(cases[i].messages, 0, NULL);
        json_t *t = cases[i].think ? json_loads(cases[i].think, JSON_DECODE_ANY, NULL) : NULL;
        assert_non_null(m);
        corral_error err = {{0}};
        size_t len;
        char *text = render(m, NULL, t, NULL, &len, &err);
        if (text)
            fail_msg("case %zu rendered\n%s", i, text);
        if (!strstr(err.message, cases[i].error))
            fail_msg("case %zu: %s", i, err.message);
        json_decref(m);
        json_decref(t);
    }
}

/* ollama's field order at every level, free-form values' keys sorted, HTML escaped */
static void test_tool_json(void **state)
{
    (void)state;
    check("qwen3.5", "[{\"role\":\"user\",\"content\":\"x\"}]", RICH_TOOL, "false",
          S "system\n# Tools\n\nYou have access to the following functions:\n\n<tools>\n"
            "{\"type\": \"function\", \"function\": {\"name\": \"f\", \"description\": \"Does "
            "\\u003cf\\u003e \\u0026 more\", \"parameters\": {\"type\": \"object\", \"$defs\": "
            "{\"a\": 2, \"b\": 1}, \"properties\": {\"z\": {\"type\": [\"string\", \"null\"], "
            "\"description\": \"Zed\", \"enum\": [\"x\", \"y\"]}, \"a\": {\"type\": \"object\", "
            "\"properties\": {\"q\": {\"type\": \"integer\"}}, \"required\": [\"q\"]}, \"u\": "
            "{\"anyOf\": [{\"type\": \"string\"}, {\"type\": \"number\"}], \"items\": {\"a\": 2, "
            "\"b\": 1, \"type\": \"string\"}}}}}}" XML_HELP E S "user\nx" E
          S "assistant\n<think>\n\n</think>\n\n");
    check("qwen3-coder", "[{\"role\":\"user\",\"content\":\"x\"}]", RICH_TOOL, NULL,
          S "system\nYou are Qwen, a helpful AI assistant that can interact with a computer to "
            "solve tasks.\n\n# Tools\n\nYou have access to the following functions:\n\n<tools>\n"
            "<function>\n<name>f</name>\n<description>Does <f> & more</description>\n"
            "<parameters>\n<parameter>\n<name>z</name>\n<type>[\"string\",\"null\"]</type>\n"
            "<description>Zed</description>\n<enum>[\"x\",\"y\"]</enum>\n</parameter>\n"
            "<parameter>\n<name>a</name>\n<type>object</type>\n<properties>{\"q\":{\"type\":"
            "\"integer\"}}</properties>\n<required>[\"q\"]</required>\n</parameter>\n"
            "<parameter>\n<name>u</name>\n<anyOf>[{\"type\":\"string\"},{\"type\":\"number\"}]"
            "</anyOf>\n<items>{\"a\":2,\"b\":1,\"type\":\"string\"}</items>\n</parameter>\n"
            "<$defs>{\"a\":2,\"b\":1}</$defs>\n</parameters>\n</function>" XML_HELP E
          S "user\nx" E S "assistant\n");
}

static void test_qwen3_coder(void **state)
{
    (void)state;
    check("qwen3-coder",
          "[{\"role\":\"system\",\"content\":\"You are a helpful assistant.\"},"
          "{\"role\":\"user\",\"content\":\"Hello, how are you?\"}]",
          NULL, "true",
          S "system\nYou are a helpful assistant." E S "user\nHello, how are you?" E
          S "assistant\n");
    /* tools as XML; the parameters' other fields after the properties */
    check("qwen3-coder",
          "[{\"role\":\"system\",\"content\":\"You are a helpful assistant with access to "
          "tools.\"},{\"role\":\"user\",\"content\":\"What is the weather like in San "
          "Francisco?\"},{\"role\":\"assistant\",\"content\":\"I'll check the weather in San "
          "Francisco for you.\",\"tool_calls\":[{\"function\":{\"name\":\"get_weather\","
          "\"arguments\":{\"unit\":\"fahrenheit\"}}}]},{\"role\":\"tool\",\"content\":\"68F\"},"
          "{\"role\":\"user\",\"content\":\"That sounds nice! What about New York?\"}]",
          "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"description\":"
          "\"Get the current weather in a given location\",\"parameters\":{\"type\":\"object\","
          "\"required\":[\"unit\"],\"properties\":{\"unit\":{\"type\":\"string\",\"enum\":"
          "[\"celsius\",\"fahrenheit\"],\"description\":\"The unit of temperature\"}}}}}]",
          NULL,
          S "system\nYou are a helpful assistant with access to tools.\n\n# Tools\n\nYou have "
            "access to the following functions:\n\n<tools>\n<function>\n<name>get_weather</name>"
            "\n<description>Get the current weather in a given location</description>\n"
            "<parameters>\n<parameter>\n<name>unit</name>\n<type>string</type>\n<description>"
            "The unit of temperature</description>\n<enum>[\"celsius\",\"fahrenheit\"]</enum>\n"
            "</parameter>\n<required>[\"unit\"]</required>\n</parameters>\n</function>" XML_HELP E
          S "user\nWhat is the weather like in San Francisco?" E
          S "assistant\nI'll check the weather in San Francisco for you.\n\n<tool_call>\n"
            "<function=get_weather>\n<parameter=unit>\nfahrenheit\n</parameter>\n</function>\n"
            "</tool_call>" E S "user\n<tool_response>\n68F\n</tool_response>" E
          S "user\nThat sounds nice! What about New York?" E S "assistant\n");
    /* tools without a system message: Qwen's default one; several types as a JSON list */
    check("qwen3-coder", "[{\"role\":\"user\",\"content\":\"x\"}]",
          "[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{\"type\":"
          "\"object\",\"properties\":{\"n\":{\"type\":[\"string\",\"null\"]}}}}}]",
          NULL,
          S "system\nYou are Qwen, a helpful AI assistant that can interact with a computer to "
            "solve tasks.\n\n# Tools\n\nYou have access to the following functions:\n\n<tools>\n"
            "<function>\n<name>f</name>\n<parameters>\n<parameter>\n<name>n</name>\n"
            "<type>[\"string\",\"null\"]</type>\n</parameter>\n</parameters>\n</function>"
            XML_HELP E S "user\nx" E S "assistant\n");
    /* a last assistant turn without calls is continued */
    check("qwen3-coder",
          "[{\"role\":\"user\",\"content\":\"Go\"},{\"role\":\"assistant\",\"content\":\"def \"}]",
          NULL, NULL, S "user\nGo" E S "assistant\ndef ");
}

static void test_qwen3_vl(void **state)
{
    (void)state;
    check("qwen3-vl-instruct",
          "[{\"role\":\"system\",\"content\":\"You are a helpful assistant.\"},{\"role\":\"user\","
          "\"content\":\"Tell me something interesting.\"},{\"role\":\"assistant\",\"content\":"
          "\"I'll tell you something interesting about cats\"}]",
          NULL, NULL,
          S "system\nYou are a helpful assistant." E S "user\nTell me something interesting." E
          S "assistant\nI'll tell you something interesting about cats");
    /* a user turn of tool results is not a question; calls as JSON objects */
    check("qwen3-vl-instruct",
          "[{\"role\":\"user\",\"content\":\"What's the weather?\"},{\"role\":\"assistant\","
          "\"content\":\"I'll check.\",\"tool_calls\":[{\"function\":{\"name\":"
          "\"get-current-weather\",\"arguments\":{\"location\":\"Paris\",\"unit\":\"celsius\"}}}]},"
          "{\"role\":\"user\",\"content\":\"<tool_response>\\n18\\n</tool_response>\"},"
          "{\"role\":\"user\",\"content\":\"Thanks!\"}]",
          NULL, NULL,
          S "user\nWhat's the weather?" E S "assistant\nI'll check.\n<tool_call>\n{\"name\": "
            "\"get-current-weather\", \"arguments\": {\"location\": \"Paris\", \"unit\": "
            "\"celsius\"}}\n</tool_call>" E S "user\n<tool_response>\n18\n</tool_response>" E
          S "user\nThanks!" E S "assistant\n");
    check("qwen3-vl-instruct",
          "[{\"role\":\"user\",\"content\":\"Compute results\"},{\"role\":\"assistant\","
          "\"content\":\"ok\",\"tool_calls\":[{\"function\":{\"name\":\"job\",\"arguments\":"
          "{\"n\":1}}}]},{\"role\":\"tool\",\"content\":\"5\"},{\"role\":\"tool\",\"content\":"
          "\"6\"}]",
          NULL, NULL,
          S "user\nCompute results" E S "assistant\nok\n<tool_call>\n{\"name\": \"job\", "
            "\"arguments\": {\"n\": 1}}\n</tool_call>" E S "user\n<tool_response>\n5\n"
            "</tool_response>\n<tool_response>\n6\n</tool_response>" E S "assistant\n");
    /* tools after the system text, with how to call them */
    check("qwen3-vl-instruct",
          "[{\"role\":\"system\",\"content\":\"Sys.\"},{\"role\":\"user\",\"content\":\"Hi\"}]",
          WEATHER_TOOL, NULL,
          S "system\nSys.\n\n# Tools\n\nYou may call one or more functions to assist with the "
            "user query.\n\nYou are provided with function signatures within <tools></tools> XML "
            "tags:\n<tools>\n" WEATHER_TOOL_JSON "\n</tools>\n\nFor each function call, return a "
            "json object with function name and arguments within <tool_call></tool_call> XML "
            "tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
            "<args-json-object>}\n</tool_call>" E S "user\nHi" E S "assistant\n");
    check("qwen3-vl-thinking",
          "[{\"role\":\"system\",\"content\":\"You are a helpful assistant.\"},{\"role\":\"user\","
          "\"content\":\"Hello, how are you?\"}]",
          NULL, NULL,
          S "system\nYou are a helpful assistant." E S "user\nHello, how are you?" E
          S "assistant\n<think>\n");
    check("qwen3-vl-thinking",
          "[{\"role\":\"user\",\"content\":\"Tell me a story in two sentences.\"},"
          "{\"role\":\"assistant\",\"content\":\"abc\",\"thinking\":\"To make this story "
          "interesting, I will speak in poetry.\"}]",
          NULL, NULL,
          S "user\nTell me a story in two sentences." E S "assistant\n<think>\nTo make this "
            "story interesting, I will speak in poetry.\n</think>\n\nabc");
    check("qwen3-vl-thinking",
          "[{\"role\":\"user\",\"content\":\"Tell me a story in two sentences.\"},"
          "{\"role\":\"assistant\",\"thinking\":\"To make this story interesting, I will speak "
          "in poetry.\",\"content\":\"abc\"},{\"role\":\"user\",\"content\":\"What is the weather "
          "like in San Francisco?\"},{\"role\":\"assistant\",\"thinking\":\"Speak poetry.\"}]",
          NULL, NULL,
          S "user\nTell me a story in two sentences." E S "assistant\nabc" E
          S "user\nWhat is the weather like in San Francisco?" E
          S "assistant\n<think>\nSpeak poetry.");
    check("qwen3-vl-thinking", "[{\"role\":\"user\",\"content\":\"Hi\"}]", NULL, "false",
          S "user\nHi" E S "assistant\n");
}

static const char *const qwen_names[] = {"qwen3.5", "ornith", "qwen3.8", "qwen3-coder",
                                         "qwen3-vl-instruct", "qwen3-vl-thinking"};

/* A tool whose properties nest depth deep. */
static json_t *nested_tool(size_t depth)
{
    json_t *props = json_object();
    for (size_t i = 0; i < depth; i++)
        props = json_pack("{s:{s:s,s:o}}", "p", "type", "object", "properties", props);
    return json_pack("[{s:s,s:{s:s,s:{s:s,s:o}}}]", "type", "function", "function", "name", "f",
                     "parameters", "type", "object", "properties", props);
}

/* The output cap holds for every renderer, and a tool nested past what the JSON writer takes
 * is refused; fields of the wrong kinds are left out, not trusted. */
static void test_refusals(void **state)
{
    (void)state;
    json_t *m = json_loads("[{\"role\":\"user\",\"content\":\"a long enough question\"}]", 0, NULL);
    json_t *odd = json_loads("[{\"role\":\"user\",\"content\":7},{\"role\":5},"
                             "{\"role\":\"assistant\",\"content\":[1],"
                             "\"tool_calls\":[1,{\"function\":{\"name\":3,\"arguments\":[1]}}]},"
                             "{\"role\":\"tool\"}]",
                             0, NULL);
    json_t *deep = nested_tool(200), *shallow = nested_tool(3);
    json_t *odd_tools = json_loads("[5,null,{\"type\":1,\"function\":{\"name\":[],"
                                   "\"parameters\":{\"properties\":{\"a\":7}}}}]",
                                   0, NULL);
    assert_true(m && odd && deep && shallow && odd_tools);
    corral_template_limits limits = corral_template_default_limits();
    limits.max_output_bytes = 16;
    for (size_t i = 0; i < sizeof qwen_names / sizeof *qwen_names; i++) {
        corral_render_fn *render = corral_renderer_find(qwen_names[i])->render;
        corral_error err = {{0}};
        size_t len;
        assert_null(render(m, NULL, NULL, &limits, &len, &err));
        assert_non_null(strstr(err.message, "longer than 16 bytes"));
        assert_null(render(m, deep, NULL, NULL, &len, &err));
        assert_non_null(strstr(err.message, "nested too deep"));
        char *text = render(m, shallow, NULL, NULL, &len, &err);
        assert_non_null(text);
        free(text);
        text = render(odd, odd_tools, NULL, NULL, &len, &err);
        assert_non_null(text);
        free(text);
    }
    json_decref(m);
    json_decref(odd);
    json_decref(deep);
    json_decref(shallow);
    json_decref(odd_tools);
}

static void test_table(void **state)
{
    (void)state;
    const corral_renderer *r = corral_renderer_find("qwen3.5");
    corral_output_tags tags;
    corral_renderer_output_tags(r, &tags);
    assert_string_equal(tags.think_open, "<think>");
    assert_string_equal(tags.think_close, "</think>");
    assert_string_equal(tags.tool_open, "<tool_call>");
    assert_int_equal(tags.calls, CORRAL_CALLS_XML_FUNCTION);
    assert_true(r->tools && r->thinking);
    r = corral_renderer_find("qwen3-coder");
    assert_true(r->tools && !r->thinking);
    r = corral_renderer_find("qwen3-vl-instruct");
    corral_renderer_output_tags(r, &tags);
    assert_string_equal(tags.think_open, "");
    assert_int_equal(tags.calls, CORRAL_CALLS_JSON);
    assert_true(corral_renderer_find("qwen3-vl-thinking")->thinking);
    assert_int_equal(corral_renderer_find("laguna")->calls, CORRAL_CALLS_ARG_PAIRS);
    /* the variants split their answers as the renderers they vary */
    static const char *const variants[][2] = {
        {"ornith", "qwen3.5"}, {"qwen3.8", "qwen3.5"}, {"poolside-v1", "laguna"}};
    for (size_t i = 0; i < sizeof variants / sizeof *variants; i++) {
        corral_output_tags base;
        corral_renderer_output_tags(corral_renderer_find(variants[i][1]), &base);
        r = corral_renderer_find(variants[i][0]);
        corral_renderer_output_tags(r, &tags);
        assert_memory_equal(&tags, &base, sizeof tags);
        assert_true(r->tools && r->thinking);
    }
    assert_int_equal(corral_renderer_find("cogito")->calls, CORRAL_CALLS_DEEPSEEK_FENCED);
    assert_true(corral_renderer_find("cogito")->tools);
    /* every name ollama gives the built-in ones renders a chat; the tools capability goes
     * with a tag its answers' calls are read after, thinking with a tag pair */
    static const char *const names[] = {"laguna", "poolside-v1", "qwen3.5", "ornith", "qwen3.8",
                                        "qwen3-coder", "qwen3-vl-instruct",
                                        "qwen3-vl-thinking", "glm-4.7", "glm-ocr",
                                        "deepseek3.1", "cogito", "olmo3", "olmo3.1",
                                        "olmo3-think", "olmo3-32b-think", "lfm2",
                                        "lfm2-thinking", "nemotron-3-nano",
                                        "nemotron-3.5-nano", "functiongemma", "gemma4",
                                        "gemma4-small", "gemma4-large", "cohere", "glimmer"};
    json_t *chat = json_loads("[{\"role\":\"user\",\"content\":\"Hello\"}]", 0, NULL);
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        r = corral_renderer_find(names[i]);
        if (!r)
            fail_msg("no renderer %s", names[i]);
        assert_int_equal(r->tools, r->tool_open[0] != '\0');
        assert_int_equal(r->thinking, r->think_open[0] != '\0' && r->think_close[0] != '\0');
        /* only ollama's qwen3.8 refuses an image in a system message */
        assert_int_equal(r->text_only_system, strcmp(names[i], "qwen3.8") == 0);
        corral_error err = {{0}};
        size_t len;
        char *text = r->render(chat, NULL, NULL, NULL, &len, &err);
        if (!text || !strstr(text, "Hello"))
            fail_msg("%s: %s", names[i], text ? text : err.message);
        free(text);
    }
    json_decref(chat);
    assert_null(corral_renderer_find("qwen3.9"));
    assert_null(corral_renderer_find("harmony")); /* its own path: answers split by channels */
    assert_null(corral_renderer_find(""));
    assert_null(corral_renderer_find(NULL));
}

/* A chat through prompt_build for a model of config (JSON) and TEMPLATE (NULL: none). */
static char *build(const char *config, const char *template_text, corral_output_tags *tags,
                   json_t **caps)
{
    json_t *cfg = json_loads(config, 0, NULL);
    assert_non_null(cfg);
    model_ref ref = {.config = cfg, .template_text = (char *)template_text};
    json_t *request = json_loads("{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],"
                                 "\"think\":true}",
                                 0, NULL);
    corral_error err = {{0}};
    char *text = prompt_build(&ref, request, true, NULL, tags, &err);
    if (!text)
        fail_msg("%s", err.message);
    *caps = model_info_capabilities(cfg, NULL, template_text);
    assert_non_null(*caps);
    json_decref(request);
    json_decref(cfg);
    return text;
}

static bool has(const json_t *caps, const char *name)
{
    size_t i;
    const json_t *v;
    json_array_foreach(caps, i, v) {
        if (strcmp(json_string_value(v), name) == 0)
            return true;
    }
    return false;
}

static void test_server_choice(void **state)
{
    (void)state;
    corral_output_tags tags;
    json_t *caps;
    /* the config's name wins over a TEMPLATE */
    char *text = build("{\"renderer\":\"qwen3.5\"}", "{{ .Prompt }}", &tags, &caps);
    assert_string_equal(text, S "user\nHi" E S "assistant\n<think>\n");
    assert_string_equal(tags.think_open, "<think>");
    assert_int_equal(tags.calls, CORRAL_CALLS_XML_FUNCTION);
    assert_true(has(caps, "tools") && has(caps, "thinking"));
    free(text);
    json_decref(caps);
    text = build("{\"renderer\":\"qwen3-coder\"}", NULL, &tags, &caps);
    assert_true(has(caps, "tools") && !has(caps, "thinking"));
    free(text);
    json_decref(caps);
    /* laguna's family without a TEMPLATE, also under a name Corral does not know */
    text = build("{\"renderer\":\"no-such-renderer\",\"model_family\":\"laguna\"}", NULL, &tags,
                 &caps);
    assert_non_null(strstr(text, "<assistant>\n<think>"));
    assert_int_equal(tags.calls, CORRAL_CALLS_ARG_PAIRS);
    free(text);
    json_decref(caps);
    /* an unknown name: the TEMPLATE lays the prompt out, and its capabilities stand */
    text = build("{\"renderer\":\"no-such-renderer\"}", "{{ .Prompt }}", &tags, &caps);
    assert_string_equal(text, "Hi");
    assert_string_equal(tags.think_open, "");
    assert_false(has(caps, "tools") || has(caps, "thinking"));
    free(text);
    json_decref(caps);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_qwen35_chat_and_thinking),
        cmocka_unit_test(test_qwen35_tools_and_history),
        cmocka_unit_test(test_ornith),
        cmocka_unit_test(test_qwen38),
        cmocka_unit_test(test_qwen38_refusals),
        cmocka_unit_test(test_tool_json),
        cmocka_unit_test(test_qwen3_coder),
        cmocka_unit_test(test_qwen3_vl),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_server_choice),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

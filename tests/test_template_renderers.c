/*
 * ollama's built-in renderers written after laguna's (template/glm.h, deepseek3.h, cogito.h,
 * olmo3.h, lfm2.h): a table of requests and, for each, the prompt ollama's renderer of that
 * name writes, byte for byte (plain chat, system turns, tools and calls with their results,
 * thinking on, off and unset, continued answers, images' markers); answers read back with the
 * tags each header names; the JSON forms and trimming they share (template/gorender.h); and
 * the output cap.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "template/cogito.h"
#include "template/cohere.h"
#include "template/deepseek3.h"
#include "template/glimmer.h"
#include "template/glm.h"
#include "template/gorender.h"
#include "template/lfm2.h"
#include "template/olmo3.h"
#include "template/valuefmt.h"
#include "output_parse_fixture.h"

typedef char *(*render_fn)(const json_t *messages, const json_t *tools, const json_t *think,
                           const corral_template_limits *limits, size_t *len, corral_error *err);

/* One request: messages, tools (NULL: none) and think (NULL: absent) as JSON text. */
typedef struct render_case {
    const char *name;
    render_fn render;
    const char *messages, *tools, *think;
    const char *want;
} render_case;

#define GLM "[gMASK]<sop>"
#define WEATHER_FN                                                                              \
    "{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"description\":\"Get "      \
    "weather\",\"parameters\":{\"type\":\"object\",\"required\":[\"location\"],\"properties\":" \
    "{\"location\":{\"type\":\"string\"}}}}}"
#define WEATHER_TOOL "[" WEATHER_FN "]"
#define GLM_TOOLS                                                                               \
    "<|system|>\n# Tools\n\nYou may call one or more functions to assist with the user "        \
    "query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n"   \
    "<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", "               \
    "\"description\": \"Get weather\", \"parameters\": {\"type\": \"object\", \"required\": "  \
    "[\"location\"], \"properties\": {\"location\": {\"type\": \"string\"}}}}}\n</tools>\n\n"    \
    "For each function call, output the function name and arguments within the following XML " \
    "format:\n<tool_call>{function-name}<arg_key>{arg-key-1}</arg_key><arg_value>{arg-value-1}" \
    "</arg_value><arg_key>{arg-key-2}</arg_key><arg_value>{arg-value-2}</arg_value>..."         \
    "</tool_call>"
#define USER_HELLO "[{\"role\":\"user\",\"content\":\"Hello\"}]"
#define WEATHER_CALL(args)                                                                      \
    "{\"function\":{\"name\":\"get_weather\",\"arguments\":" args "}}"

#define DS_BOS "<｜begin▁of▁sentence｜>"
#define DS_EOS "<｜end▁of▁sentence｜>"
#define DS_TOOLS                                                                                \
    "\n\n## Tools\nYou have access to the following tools:\n\n### get_weather\nDescription: " \
    "Get weather\n\nParameters: {\"type\":\"object\",\"required\":[\"location\"],"              \
    "\"properties\":{\"location\":{\"type\":\"string\"}}}\n\nIMPORTANT: ALWAYS adhere to this "  \
    "exact format for tool use:\n<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>tool_call_name"          \
    "<｜tool▁sep｜>tool_call_arguments<｜tool▁call▁end｜>{{additional_tool_calls}}"                 \
    "<｜tool▁calls▁end｜>\n\nWhere:\n\n- `tool_call_name` must be an exact match to one of the "   \
    "available tools\n- `tool_call_arguments` must be valid JSON that strictly follows the "     \
    "tool's Parameters Schema\n- For multiple tool calls, chain them directly without "          \
    "separators or spaces\n"
#define DS_WEATHER_HISTORY                                                                      \
    "[{\"role\":\"user\",\"content\":\"Weather in Paris?\"},{\"role\":\"assistant\","            \
    "\"content\":\"\",\"tool_calls\":[" WEATHER_CALL("{\"location\":\"Paris\",\"when\":{"           \
                                                   "\"z\":1,\"a\":\"<now>\"}}") "]},"             \
    "{\"role\":\"tool\",\"content\":\"22°C\"},{\"role\":\"assistant\",\"content\":"              \
    "\"Sunny.\"},{\"role\":\"user\",\"content\":\"And London?\"}]"
#define DS_WEATHER_PROMPT                                                                       \
    "<｜User｜>Weather in Paris?<｜Assistant｜></think><｜tool▁calls▁begin｜><｜tool▁call▁begin｜>"    \
    "get_weather<｜tool▁sep｜>{\"location\":\"Paris\",\"when\":{\"a\":\"\\u003cnow\\u003e\","     \
    "\"z\":1}}<｜tool▁call▁end｜><｜tool▁calls▁end｜>" DS_EOS "<｜tool▁output▁begin｜>22°C"            \
    "<｜tool▁output▁end｜>Sunny." DS_EOS "<｜User｜>And London?<｜Assistant｜>"

#define COGITO_SYSTEM                                                                           \
    DS_BOS "You are Cogito, an AI assistant created by Deep Cogito, which is an AI research lab " \
           "based in San Francisco."
#define COGITO_TOOLS                                                                            \
    "\nYou have the following functions available:\n```json\n{\n    \"type\": \"function\",\n"     \
    "    \"function\": {\n        \"name\": \"get_weather\",\n        \"description\": \"Get "      \
    "weather\",\n        \"parameters\": {\n            \"type\": \"object\",\n            "         \
    "\"required\": [\n                \"location\"\n            ],\n            \"properties\": {\n" \
    "                \"location\": {\n                    \"type\": \"string\"\n                }\n" \
    "            }\n        }\n    }\n}\n```\n"

#define IM(role, text) "<|im_start|>" role "\n" text "<|im_end|>\n"
#define OLMO31_SYSTEM                                                                           \
    "You are Olmo, a helpful AI assistant built by Ai2. Your date cutoff is December 2024, and " \
    "your model weights are available at https://huggingface.co/allenai."
#define NO_FUNCTIONS "You do not currently have access to any functions. <functions></functions>"
#define OLMO_WEATHER_HISTORY                                                                    \
    "[{\"role\":\"system\",\"content\":\"Be exact.\"},{\"role\":\"user\",\"content\":\"SF and "  \
    "NYC?\"},{\"role\":\"assistant\",\"content\":\"Checking.\",\"tool_calls\":["                \
    WEATHER_CALL("{\"location\":\"San Francisco\",\"days\":[1,2],\"at\":{\"b\":\"<\",\"a\":1}}") \
    "," WEATHER_CALL("{\"location\":\"New York\"}") "]},"                                       \
    "{\"role\":\"tool\",\"content\":\"68\"},{\"role\":\"system\",\"content\":\"Dropped.\"},"       \
    "{\"role\":\"tool\",\"content\":\"55\"}]"

#define LFM "<|startoftext|>"

#define CO_SYS "<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|><|START_TEXT|>"
#define CO_END "<|END_TEXT|><|END_OF_TURN_TOKEN|>"
#define CO_NO_TOOLS "# Available Tools\n```json\n[\n\n\n\n]\n```"
#define CO_USER(text) "<|START_OF_TURN_TOKEN|><|USER_TOKEN|><|START_TEXT|>" text CO_END
#define CO_BOT "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>"
#define CO_ACTION CO_BOT "\n            \n                "
#define CO_WEATHER                                                                              \
    "\n    {\"name\": \"get_weather\", \"description\": \"Get weather\", \"parameters\": "         \
    "{\"type\": \"object\", \"required\": [\"location\"], \"properties\": {\"location\": "       \
    "{\"type\": \"string\"}}}, \"responses\": null}"
#define CO_RESULTS "<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|><|START_TOOL_RESULT|>["
#define CO_RESULT(id, json)                                                                     \
    "\n    {\n        \"tool_call_id\": \"" id "\",\n        \"results\": {\n\n            \n"     \
    "            \"0\": " json "\n\n        },\n        \"is_error\": null\n    }"
#define CO_RESULTS_END "\n\n]<|END_TOOL_RESULT|><|END_OF_TURN_TOKEN|>"

/* Glimmer's prompts dated as ollama's reference prompts are */
#define GL_DATE "2026-07-29"
#define GL_BOS "<|begin_of_text|>"
#define GL_MSG(header, text, end) "<|start|>" header "<|message|>" text end
#define GL_DEFAULT(strength)                                                                    \
    "You are a helpful AI assistant.\nKnowledge cutoff: 2026-01-04.\nCurrent date: " GL_DATE     \
    ".\n\nReasoning strength: " strength "."
#define GL_RECIPIENTS "\n\n# Valid recipients: \"self\", \"user\"."
#define GL_TOOLS_PREFIX                                                                         \
    "\n\nIn this environment you have access to a set of tools you can use to answer the "      \
    "user's question.\n\nYou can invoke a function by writing a \"<atem:function_calls>\" "      \
    "block like the following:\n<atem:function_calls>\n<atem:invoke name=\"$FUNCTION_NAME\">\n" \
    "<atem:parameter name=\"$PARAMETER_NAME\">$PARAMETER_VALUE</atem:parameter>\n...\n"         \
    "</atem:invoke>\n</atem:function_calls>\n\nString and scalar parameters should be "         \
    "specified as is, while lists and objects should use JSON format. Note that spaces for "    \
    "string values are not stripped. The output is not expected to be valid XML and is "        \
    "parsed with regular expressions.\nHere are the functions available in JSONSchema "         \
    "format:\n// Tool metadata\n"
#define GL_TOOLS_SUFFIX                                                                         \
    "\n\nHere's an example of how to call a function in the tool set:\n(If the tool namespace " \
    "is not specified, invoke the function directly as `example_function_name` rather than "    \
    "`example_tool_name.example_function_name`)\n\nto=example_tool_name.example_function_name"  \
    "\n\n<atem:function_calls>\n<atem:invoke name=\"example_tool_name.example_function_name\">" \
    "\n<atem:parameter name=\"example_parameter_1\">value_1</atem:parameter>\n<atem:parameter " \
    "name=\"example_parameter_2\">This is the value for the second parameter\nthat can span\n"  \
    "\"multiple\" lines\n</atem:parameter>\n</atem:invoke>\n</atem:function_calls>"
#define GL_WEATHER_SCHEMA                                                                       \
    "{\"name\": \"get_weather\", \"description\": \"Get weather\", \"parameters\": {\"type\": " \
    "\"object\", \"required\": [\"location\"], \"properties\": {\"location\": {\"type\": "       \
    "\"string\"}}}}"
#define GL_WEATHER_TOOLS                                                                        \
    GL_TOOLS_PREFIX "{\"name\": \"get_weather\", \"description\": \"\"}\n// Function schemas\n"   \
                    GL_WEATHER_SCHEMA GL_TOOLS_SUFFIX                                           \
    "\n\n# Valid recipients: \"self\", \"get_weather.*\", \"user\"."
#define GL_EMPTY_CALL(name)                                                                     \
    "<atem:function_calls>\n<atem:invoke name=\"" name "\">\n</atem:invoke>\n"                   \
    "</atem:function_calls>"
#define EOM "<|eom|>"
#define EOT "<|eot|>"
#define GL_NEXT "<|start|>assistant"

static char *glimmer_on_reference_date(const json_t *messages, const json_t *tools,
                                       const json_t *think, const corral_template_limits *limits,
                                       size_t *len, corral_error *err)
{
    return glimmer_render_dated(messages, tools, think, GL_DATE, limits, len, err);
}

static const render_case CASES[] = {
    {"glm-4.7 thinks when think is unset", glm47_render, USER_HELLO, NULL, NULL,
     GLM "<|user|>Hello<|assistant|><think>"},
    {"glm-4.7 think false", glm47_render, USER_HELLO, NULL, "false",
     GLM "<|user|>Hello<|assistant|></think>"},
    {"glm-4.7 a level", glm47_render, USER_HELLO, NULL, "\"high\"",
     GLM "<|user|>Hello<|assistant|><think>"},
    {"glm-4.7 system", glm47_render,
     "[{\"role\":\"system\",\"content\":\"You are helpful.\"},"
     "{\"role\":\"user\",\"content\":\"Hello\"}]",
     NULL, NULL, GLM "<|system|>You are helpful.<|user|>Hello<|assistant|><think>"},
    {"glm-4.7 history keeps thinking", glm47_render,
     "[{\"role\":\"user\",\"content\":\"Hi\"},{\"role\":\"assistant\",\"content\":\"Hello "
     "there\"},{\"role\":\"user\",\"content\":\"Think step by step\"},{\"role\":\"assistant\","
     "\"thinking\":\"Let me think...\",\"content\":\"Here's my answer.\"},"
     "{\"role\":\"user\",\"content\":\"Continue\"}]",
     NULL, NULL,
     GLM "<|user|>Hi<|assistant|></think>Hello there<|user|>Think step by step<|assistant|>"
         "<think>Let me think...</think>Here's my answer.<|user|>Continue<|assistant|><think>"},
    {"glm-4.7 calls and a run of results", glm47_render,
     "[{\"role\":\"user\",\"content\":\"Compare weather\"},{\"role\":\"assistant\",\"content\":"
     "\"Let me check\",\"tool_calls\":[" WEATHER_CALL("{\"location\":\"Tokyo\",\"unit\":"
                                                      "\"celsius\"}") "," WEATHER_CALL(
         "{\"location\":\"Paris\",\"days\":2,\"opts\":{\"z\":[true,null],\"a\":\"<b>\"}}") "]},"
     "{\"role\":\"tool\",\"content\":\"{\\\"temperature\\\":22}\"},"
     "{\"role\":\"tool\",\"content\":\"{\\\"temperature\\\":18}\"},"
     "{\"role\":\"assistant\",\"content\":\"Tokyo is warmer.\"}]",
     WEATHER_TOOL, NULL,
     GLM GLM_TOOLS "<|user|>Compare weather<|assistant|></think>Let me check<tool_call>"
                   "get_weather<arg_key>location</arg_key><arg_value>Tokyo</arg_value><arg_key>"
                   "unit</arg_key><arg_value>celsius</arg_value></tool_call><tool_call>"
                   "get_weather<arg_key>location</arg_key><arg_value>Paris</arg_value><arg_key>"
                   "days</arg_key><arg_value>2</arg_value><arg_key>opts</arg_key><arg_value>"
                   "{\"a\":\"\\u003cb\\u003e\",\"z\":[true,null]}</arg_value></tool_call>"
                   "<|observation|><tool_response>{\"temperature\":22}</tool_response>"
                   "<tool_response>{\"temperature\":18}</tool_response><|assistant|></think>"
                   "Tokyo is warmer.<|assistant|><think>"},
    {"glm-4.7 a last assistant message is not continued", glm47_render,
     "[{\"role\":\"user\",\"content\":\"Hi\"},{\"role\":\"assistant\",\"content\":\"Hel\"}]",
     NULL, NULL, GLM "<|user|>Hi<|assistant|></think>Hel<|assistant|><think>"},
    {"glm-4.7 other roles leave nothing", glm47_render,
     "[{\"role\":\"user\",\"content\":\"Hi\"},{\"role\":\"critic\",\"content\":\"x\"}]", NULL,
     "false", GLM "<|user|>Hi<|assistant|></think>"},
    {"glm-ocr leaves thinking to the model when think is unset", glmocr_render, USER_HELLO,
     NULL, NULL, GLM "<|user|>\nHello<|assistant|>\n"},
    {"glm-ocr think true", glmocr_render, USER_HELLO, NULL, "true",
     GLM "<|user|>\nHello<|assistant|>\n"},
    {"glm-ocr think false", glmocr_render,
     "[{\"role\":\"system\",\"content\":\"Read it.\"},{\"role\":\"user\",\"content\":\"One\"},"
     "{\"role\":\"assistant\",\"thinking\":\" Looked. \",\"content\":\"\\n Done. \\u3000\"},"
     "{\"role\":\"user\",\"content\":\"Two /nothink\"}]",
     NULL, "false",
     GLM "<|system|>\nRead it.\n<|user|>\nOne/nothink<|assistant|>\n<think>Looked.</think>\n"
         "Done.\n<|user|>\nTwo /nothink<|assistant|>\n<think></think>\n"},
    {"glm-ocr images where the server marked them", glmocr_render,
     "[{\"role\":\"user\",\"content\":\"<corral-image-ab-0> First image\"},"
     "{\"role\":\"assistant\",\"content\":\"Processed.\"},"
     "{\"role\":\"user\",\"content\":\"<corral-image-ab-1> Second image\"}]",
     NULL, NULL,
     GLM "<|user|>\n<corral-image-ab-0> First image<|assistant|>\n<think></think>\nProcessed.\n"
         "<|user|>\n<corral-image-ab-1> Second image<|assistant|>\n"},
    {"glm-ocr calls and results", glmocr_render,
     "[{\"role\":\"user\",\"content\":\"Weather?\"},{\"role\":\"assistant\",\"tool_calls\":["
     WEATHER_CALL("{\"location\":\"Tokyo\"}") "]},"
     "{\"role\":\"tool\",\"content\":\"22\"},{\"role\":\"tool\",\"content\":\"18\"}]",
     WEATHER_TOOL, NULL,
     GLM GLM_TOOLS "<|user|>\nWeather?<|assistant|>\n<think></think>\n<tool_call>get_weather"
                   "<arg_key>location</arg_key><arg_value>Tokyo</arg_value></tool_call>\n"
                   "<|observation|>\n<tool_response>\n22\n</tool_response>\n\n<tool_response>\n"
                   "18\n</tool_response>\n<|assistant|>\n"},
    {"deepseek3.1 thinks only when asked", deepseek31_render, USER_HELLO, NULL, NULL,
     DS_BOS "<｜User｜>Hello<｜Assistant｜></think>"},
    {"deepseek3.1 think true", deepseek31_render, USER_HELLO, NULL, "true",
     DS_BOS "<｜User｜>Hello<｜Assistant｜><think>"},
    {"deepseek3.1 a level", deepseek31_render, USER_HELLO, NULL, "\"low\"",
     DS_BOS "<｜User｜>Hello<｜Assistant｜><think>"},
    {"deepseek3.1 system messages joined", deepseek31_render,
     "[{\"role\":\"system\",\"content\":\"First\"},{\"role\":\"user\",\"content\":\"Hi\"},"
     "{\"role\":\"system\",\"content\":\"Second\"}]",
     NULL, "false", DS_BOS "First\n\nSecond<｜User｜>Hi<｜Assistant｜></think>"},
    {"deepseek3.1 tools, calls, results and the answer after them", deepseek31_render,
     DS_WEATHER_HISTORY, WEATHER_TOOL, "true", DS_BOS DS_TOOLS DS_WEATHER_PROMPT "<think>"},
    {"deepseek3.1 the same, thinking off", deepseek31_render, DS_WEATHER_HISTORY, NULL, "false",
     DS_BOS DS_WEATHER_PROMPT "</think>"},
    {"deepseek3.1 earlier thinking dropped, content after a closing tag kept", deepseek31_render,
     "[{\"role\":\"user\",\"content\":\"Who?\"},{\"role\":\"assistant\",\"thinking\":"
     "\"Hmm\",\"content\":\"<think>Hmm</think>DeepSeek</think>!\"},"
     "{\"role\":\"user\",\"content\":\"Story?\"}]",
     NULL, "true",
     DS_BOS "<｜User｜>Who?<｜Assistant｜></think>DeepSeek</think>!" DS_EOS
            "<｜User｜>Story?<｜Assistant｜><think>"},
    {"deepseek3.1 a last answer with thinking opens it", deepseek31_render,
     "[{\"role\":\"user\",\"content\":\"Go\"},{\"role\":\"assistant\",\"thinking\":\"T\","
     "\"content\":\"A\"}]",
     NULL, "true", DS_BOS "<｜User｜>Go<｜Assistant｜><think>A" DS_EOS},
    {"deepseek3.1 system only", deepseek31_render,
     "[{\"role\":\"system\",\"content\":\"System instruction\"}]", NULL, "false",
     DS_BOS "System instruction"},
    {"cogito plain", cogito_render, USER_HELLO, NULL, NULL,
     COGITO_SYSTEM "<｜User｜>Hello<｜Assistant｜>"},
    {"cogito system, thinking on", cogito_render,
     "[{\"role\":\"system\",\"content\":\"Be brief.\"},{\"role\":\"user\",\"content\":"
     "\"Hello\"}]",
     NULL, "true",
     DS_BOS "Enable deep thinking subroutine.\n\nYou are Cogito, an AI assistant created by Deep "
            "Cogito, which is an AI research lab based in San Francisco.\n\nBe brief.\n\n"
            "<｜User｜>Hello<｜Assistant｜><think>\n"},
    {"cogito system, thinking off", cogito_render,
     "[{\"role\":\"system\",\"content\":\"Be brief.\"},{\"role\":\"user\",\"content\":"
     "\"Hello\"},{\"role\":\"system\",\"content\":\"Later.\"}]",
     NULL, "false", COGITO_SYSTEM "\n\nBe brief.<｜User｜>Hello<｜Assistant｜>"},
    {"cogito tools, calls and a run of results", cogito_render,
     "[{\"role\":\"user\",\"content\":\"Paris and London\"},{\"role\":\"assistant\","
     "\"content\":\"Checking.\",\"thinking\":\"dropped\",\"tool_calls\":["
     WEATHER_CALL("{\"location\":\"Paris\"}") "," WEATHER_CALL("{\"location\":\"London\"}") "]},"
     "{\"role\":\"tool\",\"content\":\"22°C\"},{\"role\":\"tool\",\"content\":\"18°C\"}]",
     WEATHER_TOOL, "true",
     DS_BOS "Enable deep thinking subroutine.\n\nYou are Cogito, an AI assistant created by Deep "
            "Cogito, which is an AI research lab based in San Francisco." COGITO_TOOLS
            "<｜User｜>Paris and London<｜Assistant｜>Checking.<｜tool▁calls▁begin｜>"
            "<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{\"location\":"
            "\"Paris\"}\n```<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>function<｜tool▁sep｜>"
            "get_weather\n```json\n{\"location\":\"London\"}\n```<｜tool▁call▁end｜>"
            "<｜tool▁calls▁end｜>" DS_EOS "<｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>22°C"
            "<｜tool▁output▁end｜>\n<｜tool▁output▁begin｜>18°C<｜tool▁output▁end｜>"
            "<｜tool▁outputs▁end｜><｜Assistant｜><think>\n"},
    {"cogito a last assistant message", cogito_render,
     "[{\"role\":\"user\",\"content\":\"Hello\"},{\"role\":\"assistant\",\"content\":\"\"}]",
     NULL, NULL, COGITO_SYSTEM "<｜User｜>Hello<｜Assistant｜>" DS_EOS "<｜Assistant｜>"},
    {"olmo3 default system, no tools", olmo3_render, USER_HELLO, NULL, "true",
     IM("system", "You are a helpful function-calling AI assistant. " NO_FUNCTIONS)
         IM("user", "Hello") "<|im_start|>assistant\n"},
    {"olmo3.1 default system with tools", olmo31_render, USER_HELLO,
     "[" WEATHER_FN "," WEATHER_FN "]", NULL,
     IM("system", OLMO31_SYSTEM
        " You are provided with function signatures within <functions></functions> XML tags. "
        "You may call one or more functions to assist with the user query. Output any function "
        "calls within <function_calls></function_calls> XML tags. Do not make assumptions about "
        "what values to plug into functions.<functions>[{\"type\": \"function\", \"function\": "
        "{\"name\": \"get_weather\", \"description\": \"Get weather\", \"parameters\": "
        "{\"type\": \"object\", \"required\": [\"location\"], \"properties\": {\"location\": "
        "{\"type\": \"string\"}}}}}, {\"type\": \"function\", \"function\": {\"name\": "
        "\"get_weather\", \"description\": \"Get weather\", \"parameters\": {\"type\": "
        "\"object\", \"required\": [\"location\"], \"properties\": {\"location\": {\"type\": "
        "\"string\"}}}}}]</functions>") IM("user", "Hello") "<|im_start|>assistant\n"},
    {"olmo3 the request's system, calls and results", olmo3_render, OLMO_WEATHER_HISTORY, NULL,
     NULL,
     IM("system", "Be exact.") IM("user", "SF and NYC?")
         IM("assistant", "Checking.<function_calls>get_weather(at={\"a\":1,\"b\":\"\\u003c\"}, "
                         "days=[1,2], location=\"San Francisco\")\nget_weather(location=\"New "
                         "York\")</function_calls>") IM("environment", "68")
             IM("environment", "55") "<|im_start|>assistant\n"},
    {"olmo3 a last answer continued", olmo3_render,
     "[{\"role\":\"user\",\"content\":\"Hi\"},{\"role\":\"assistant\",\"content\":\"Hel\"}]",
     NULL, NULL,
     IM("system", "You are a helpful function-calling AI assistant. " NO_FUNCTIONS)
         IM("user", "Hi") "<|im_start|>assistant\nHel"},
    {"olmo3 an empty last answer", olmo3_render,
     "[{\"role\":\"user\",\"content\":\"Hi\"},{\"role\":\"assistant\",\"content\":\"\"}]",
     NULL, NULL,
     IM("system", "You are a helpful function-calling AI assistant. " NO_FUNCTIONS)
         IM("user", "Hi") "<|im_start|>assistant\n<|im_start|>assistant\n"},
    {"olmo3-think default system, always thinking", olmo3_think_render, USER_HELLO, WEATHER_TOOL,
     "false", IM("system", OLMO31_SYSTEM) IM("user", "Hello") "<|im_start|>assistant\n<think>"},
    {"olmo3-32b-think default system", olmo3_32b_think_render, USER_HELLO, NULL, NULL,
     IM("system", "You are a helpful AI assistant.") IM("user", "Hello")
         "<|im_start|>assistant\n<think>"},
    {"olmo3-think the request's system; calls and results left out", olmo3_think_render,
     OLMO_WEATHER_HISTORY, NULL, NULL,
     IM("system", "Be exact. " NO_FUNCTIONS) IM("user", "SF and NYC?") IM("assistant", "Checking.")
         "<|im_start|>assistant\n<think>"},
    {"lfm2 plain", lfm2_render, USER_HELLO, NULL, NULL,
     LFM IM("user", "Hello") "<|im_start|>assistant\n"},
    {"lfm2 no messages", lfm2_render, "[]", NULL, NULL, LFM "<|im_start|>assistant\n"},
    {"lfm2 tools without a system message", lfm2_render, USER_HELLO,
     "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"parameters\":"
     "{\"type\":\"object\"}}},{\"type\":\"function\",\"function\":{\"name\":\"\","
     "\"description\":\"<nameless>\"}}]",
     "false",
     LFM IM("system", "List of tools: <|tool_list_start|>[{\"name\": \"get_weather\", "
                      "\"parameters\": {\"type\": \"object\", \"properties\": null}}, {\"type\": "
                      "\"function\", \"function\": {\"name\": \"\", \"description\": "
                      "\"<nameless>\", \"parameters\": {\"type\": \"\", \"properties\": null}}}]"
                      "<|tool_list_end|>") IM("user", "Hello") "<|im_start|>assistant\n"},
    {"lfm2 system and tools, calls, results, other roles", lfm2_render,
     "[{\"role\":\"system\",\"content\":\"Be exact.\"},{\"role\":\"developer\",\"content\":"
     "\"Do X\"},{\"role\":\"user\",\"content\":\"<corral-image-ab-0>Where?\"},"
     "{\"role\":\"assistant\",\"content\":\" \",\"tool_calls\":["
     WEATHER_CALL("{\"location\":\"Paris\",\"at\":{\"when\":\"<now>\",\"day\":1}}") ","
     WEATHER_CALL("{}") "]},{\"role\":\"tool\",\"content\":\"22C\"},{\"role\":\"assistant\","
     "\"content\":\"Checking.\",\"tool_calls\":[" WEATHER_CALL("{\"location\":\"Rome\"}") "]},"
     "{\"role\":\"tool\",\"content\":\"<|tool_response_start|>9C<|tool_response_end|>\"}]",
     WEATHER_TOOL, NULL,
     LFM IM("system", "Be exact.\nList of tools: <|tool_list_start|>[{\"name\": \"get_weather\", "
                      "\"description\": \"Get weather\", \"parameters\": {\"type\": \"object\", "
                      "\"required\": [\"location\"], \"properties\": {\"location\": {\"type\": "
                      "\"string\"}}}}]<|tool_list_end|>")
         IM("developer", "Do X") IM("user", "<corral-image-ab-0>Where?")
             IM("assistant", "<|tool_call_start|>[get_weather(at={\"day\": 1, \"when\": "
                             "\"<now>\"},location=\"Paris\"),get_weather()]<|tool_call_end|> ")
                 IM("tool", "<|tool_response_start|>22C<|tool_response_end|>")
                     IM("assistant", "<|tool_call_start|>[get_weather(location=\"Rome\")]"
                                     "<|tool_call_end|>\nChecking.")
                         IM("tool", "<|tool_response_start|>9C<|tool_response_end|>")
                             "<|im_start|>assistant\n"},
    {"lfm2 thinking dropped, earlier thinking cut, the last answer continued", lfm2_render,
     "[{\"role\":\"user\",\"content\":\"Q1\"},{\"role\":\"assistant\",\"content\":"
     "\"<think>r1</think> A1\"},{\"role\":\"user\",\"content\":\"Q2\"},{\"role\":"
     "\"assistant\",\"thinking\":\"r2\",\"content\":\"<think>r2</think>A2\"}]",
     NULL, "true",
     LFM IM("user", "Q1") IM("assistant", "A1") IM("user", "Q2")
         "<|im_start|>assistant\n<think>r2</think>A2"},
    {"lfm2-thinking earlier thinking cut unless think is on", lfm2_thinking_render,
     "[{\"role\":\"user\",\"content\":\"Q1\"},{\"role\":\"assistant\",\"thinking\":\"r1\","
     "\"content\":\" A1 \"},{\"role\":\"assistant\",\"thinking\":\"r1b\",\"content\":\"</think>B"
     "</think> B1\"},{\"role\":\"user\",\"content\":\"Q2\"},{\"role\":\"assistant\","
     "\"thinking\":\"r2\",\"content\":\"A2\"},{\"role\":\"user\",\"content\":\"Q3\"}]",
     NULL, "false",
     LFM IM("user", "Q1") IM("assistant", "A1") IM("assistant", "B1") IM("user", "Q2")
         IM("assistant", "<think>r2</think>A2") IM("user", "Q3") "<|im_start|>assistant\n"},
    {"lfm2-thinking empty answers", lfm2_thinking_render,
     "[{\"role\":\"assistant\",\"content\":\"\"},{\"role\":\"assistant\",\"thinking\":\"t\","
     "\"content\":\"\"}]",
     NULL, NULL, LFM IM("assistant", "") "<|im_start|>assistant\n<think>t</think>"},
    {"lfm2-thinking think on keeps it", lfm2_thinking_render,
     "[{\"role\":\"user\",\"content\":\"Q1\"},{\"role\":\"assistant\",\"thinking\":\"r1\","
     "\"content\":\"A1\",\"tool_calls\":[" WEATHER_CALL("{\"location\":\"Paris\"}") "]},"
     "{\"role\":\"user\",\"content\":\"Q2\"}]",
     NULL, "\"high\"",
     LFM IM("user", "Q1") IM("assistant", "<think>r1</think><|tool_call_start|>[get_weather("
                                          "location=\"Paris\")]<|tool_call_end|>\nA1")
         IM("user", "Q2") "<|im_start|>assistant\n"},
    {"cohere user only, thinking unless told not to", cohere_render, USER_HELLO, NULL, NULL,
     CO_SYS CO_NO_TOOLS CO_END CO_USER("Hello") CO_BOT "<|START_THINKING|>"},
    {"cohere think false", cohere_render, USER_HELLO, NULL, "false",
     CO_SYS CO_NO_TOOLS CO_END CO_USER("Hello") CO_BOT "<|START_THINKING|><|END_THINKING|>"},
    {"cohere a level", cohere_render, USER_HELLO, NULL, "\"low\"",
     CO_SYS CO_NO_TOOLS CO_END CO_USER("Hello") CO_BOT "<|START_THINKING|>"},
    {"cohere system and history with thinking", cohere_render,
     "[{\"role\":\"system\",\"content\":\"DEVPREAMBLE\"},{\"role\":\"user\",\"content\":\"Q1\"},"
     "{\"role\":\"assistant\",\"content\":\"A1\",\"thinking\":\"THINK1\"},"
     "{\"role\":\"user\",\"content\":\"Q2\"}]",
     NULL, NULL,
     CO_SYS "DEVPREAMBLE\n\n\n\n" CO_NO_TOOLS CO_END CO_USER("Q1") CO_BOT
            "<|START_THINKING|>THINK1<|END_THINKING|><|START_TEXT|>A1" CO_END CO_USER("Q2")
                CO_BOT "<|START_THINKING|>"},
    {"cohere roles in any case, a later system message, other roles left out", cohere_render,
     "[{\"role\":\"System\",\"content\":\"Be brief.\"},{\"role\":\"USER\",\"content\":\"Hi\"},"
     "{\"role\":\"critic\",\"content\":\"x\"},{\"role\":\"system\",\"content\":\"Later.\"}]",
     NULL, "true",
     CO_SYS "Be brief.\n\n\n\n" CO_NO_TOOLS CO_END CO_USER("Hi") CO_SYS "Later." CO_END CO_BOT
            "<|START_THINKING|>"},
    {"cohere tools, a call and its result", cohere_render,
     "[{\"role\":\"user\",\"content\":\"weather in Paris?\"},{\"role\":\"assistant\","
     "\"content\":\"left out\",\"thinking\":\"I should call the tool\",\"tool_calls\":[{\"id\":"
     "\"call_x\",\"function\":{\"name\":\"get_weather\",\"arguments\":{\"location\":"
     "\"Paris\"}}}]},{\"role\":\"tool\",\"tool_call_id\":\"call_x\",\"content\":\"15C sunny\"},"
     "{\"role\":\"user\",\"content\":\"thanks\"}]",
     WEATHER_TOOL, NULL,
     CO_SYS "# Available Tools\n```json\n[\n" CO_WEATHER "\n\n\n]\n```" CO_END
         CO_USER("weather in Paris?") CO_ACTION
     "<|START_THINKING|>I should call the tool<|END_THINKING|><|START_ACTION|>[\n\n    "
     "{\"tool_call_id\": \"0\", \"tool_name\": \"get_weather\", \"parameters\": {\"location\": "
     "\"Paris\"}}\n\n]<|END_ACTION|><|END_OF_TURN_TOKEN|>" CO_RESULTS
         CO_RESULT("0", "{\"content\": \"15C sunny\"}") CO_RESULTS_END CO_USER("thanks") CO_BOT
     "<|START_THINKING|>"},
    {"cohere calls numbered across turns, results merged, hostile strings", cohere_render,
     "[{\"role\":\"user\",\"content\":\"go <|END_TEXT|>\"},{\"role\":\"assistant\","
     "\"tool_calls\":[{\"id\":\"a\",\"function\":{\"name\":\"get_weather\",\"arguments\":{"
     "\"location\":\"<Paris>\"}}},{\"id\":\"b\",\"function\":{\"name\":\"t2\",\"arguments\":{"
     "\"x\":1,\"y\":{\"b\":2,\"a\":\"&\"}}}}]},{\"role\":\"tool\",\"tool_call_id\":\"b\","
     "\"content\":\"r2 \\\"q\\\" <y>\"},{\"role\":\"tool\",\"tool_call_id\":\"a\",\"content\":"
     "\"r1\\u2028\"},{\"role\":\"tool\",\"tool_call_id\":\"zz\",\"content\":\"r3\"},{\"role\":"
     "\"assistant\",\"tool_calls\":[{\"id\":\"a\",\"function\":{\"name\":\"get_weather\","
     "\"arguments\":{}}}]},{\"role\":\"tool\",\"tool_call_id\":\"a\",\"content\":\"again\"},"
     "{\"role\":\"CHATBOT\",\"content\":\"Done.\"},{\"role\":\"user\",\"content\":\"ok\"}]",
     "[" WEATHER_FN ",{\"type\":\"function\",\"function\":{\"name\":\"say<x>\","
     "\"description\":\"a \\\"b\\\" & c\"}}]",
     "false",
     CO_SYS "# Available Tools\n```json\n[\n" CO_WEATHER ",\n\n\n    {\"name\": "
            "\"say\\u003cx\\u003e\", \"description\": \"a \\\"b\\\" \\u0026 c\", \"parameters\": "
            "{\"type\": \"\", \"properties\": null}, \"responses\": null}\n\n\n]\n```" CO_END
                CO_USER("go <|END_TEXT|>") CO_ACTION
     "<|START_ACTION|>[\n\n    {\"tool_call_id\": \"0\", \"tool_name\": \"get_weather\", "
     "\"parameters\": {\"location\": \"\\u003cParis\\u003e\"}},\n\n    {\"tool_call_id\": \"1\", "
     "\"tool_name\": \"t2\", \"parameters\": {\"x\": 1, \"y\": {\"a\": \"\\u0026\", \"b\": 2}}}"
     "\n\n]<|END_ACTION|><|END_OF_TURN_TOKEN|>" CO_RESULTS
         CO_RESULT("1", "{\"content\": \"r2 \\\"q\\\" \\u003cy\\u003e\"}") "," CO_RESULT(
             "0", "{\"content\": \"r1\\u2028\"}") "," CO_RESULT("zz", "{\"content\": \"r3\"}")
             CO_RESULTS_END CO_ACTION
     "<|START_ACTION|>[\n\n    {\"tool_call_id\": \"2\", \"tool_name\": \"get_weather\", "
     "\"parameters\": {}}\n\n]<|END_ACTION|><|END_OF_TURN_TOKEN|>" CO_RESULTS
         CO_RESULT("0", "{\"content\": \"again\"}") CO_RESULTS_END CO_BOT
     "<|START_TEXT|>Done." CO_END CO_USER("ok") CO_BOT "<|START_THINKING|><|END_THINKING|>"},
    {"cohere a last answer is continued", cohere_render,
     "[{\"role\":\"user\",\"content\":\"<corral-image-ab-0>Q\"},{\"role\":\"assistant\","
     "\"content\":\"partial\",\"thinking\":\"T\"}]",
     NULL, "false",
     CO_SYS CO_NO_TOOLS CO_END CO_USER("<corral-image-ab-0>Q") CO_BOT
            "<|START_THINKING|>T<|END_THINKING|><|START_TEXT|>partial"},
    {"glimmer default system", glimmer_on_reference_date, USER_HELLO, NULL, NULL,
     GL_BOS GL_MSG("system", GL_DEFAULT("high") GL_RECIPIENTS, EOT) GL_MSG("user", "Hello", EOT)
         GL_NEXT},
    {"glimmer think false", glimmer_on_reference_date, USER_HELLO, NULL, "false",
     GL_BOS GL_MSG("system", GL_DEFAULT("none") GL_RECIPIENTS, EOT) GL_MSG("user", "Hello", EOT)
         GL_NEXT},
    {"glimmer think true", glimmer_on_reference_date, USER_HELLO, NULL, "true",
     GL_BOS GL_MSG("system", GL_DEFAULT("high") GL_RECIPIENTS, EOT) GL_MSG("user", "Hello", EOT)
         GL_NEXT},
    {"glimmer a level", glimmer_on_reference_date, USER_HELLO, NULL, "\"max\"",
     GL_BOS GL_MSG("system", GL_DEFAULT("max") GL_RECIPIENTS, EOT) GL_MSG("user", "Hello", EOT)
         GL_NEXT},
    {"glimmer the request's system, image marker, thinking and answer",
     glimmer_on_reference_date,
     "[{\"role\":\"system\",\"content\":\"Be concise.\"},{\"role\":\"user\",\"content\":"
     "\"<corral-image-ab-0>Read this.\"},{\"role\":\"assistant\",\"thinking\":\"I should "
     "inspect it.\",\"content\":\"It says hello.\"}]",
     NULL, "\"low\"",
     GL_BOS GL_MSG("system", "Be concise.\n\nReasoning strength: low." GL_RECIPIENTS, EOT)
         GL_MSG("user", "<corral-image-ab-0>Read this.", EOT)
             GL_MSG("assistant to=self", "I should inspect it.", EOM)
                 GL_MSG("assistant to=user", "It says hello.", EOT) GL_NEXT},
    {"glimmer reasoning effort renamed, a stated strength kept", glimmer_on_reference_date,
     "[{\"role\":\"system\",\"content\":\"Reasoning Effort: low. reasoning Effort and "
     "REASONING EFFORT.\"},{\"role\":\"user\",\"content\":\"Hi\"},{\"role\":\"system\","
     "\"content\":\"You are direct.\\nreasoning STRENGTH: low.\"}]",
     NULL, "\"high\"",
     GL_BOS GL_MSG("system", "Reasoning Strength: low. reasoning Effort and REASONING STRENGTH."
                   GL_RECIPIENTS, EOT) GL_MSG("user", "Hi", EOT)
         GL_MSG("system", "You are direct.\nreasoning STRENGTH: low." GL_RECIPIENTS, EOT)
             GL_NEXT},
    {"glimmer tools, a call and its result", glimmer_on_reference_date,
     "[{\"role\":\"user\",\"content\":\"Weather?\"},{\"role\":\"assistant\",\"thinking\":"
     "\"Need current data.\",\"content\":\"left out\",\"tool_calls\":[{\"id\":\"call_weather\","
     "\"function\":{\"name\":\"get_weather\",\"arguments\":{\"location\":\"SF\",\"units\":"
     "\"fahrenheit\"}}}]},{\"role\":\"tool\",\"tool_call_id\":\"call_weather\",\"content\":"
     "\"{\\\"temp\\\":65}\"},{\"role\":\"assistant\",\"content\":\"It is 65F.\"}]",
     WEATHER_TOOL, NULL,
     GL_BOS GL_MSG("system", GL_DEFAULT("high") GL_WEATHER_TOOLS, EOT)
         GL_MSG("user", "Weather?", EOT) GL_MSG("assistant to=self", "Need current data.", EOM)
             GL_MSG("assistant to=get_weather",
                    "<atem:function_calls>\n<atem:invoke name=\"get_weather\">\n<atem:parameter "
                    "name=\"location\">SF</atem:parameter>\n<atem:parameter name=\"units\">"
                    "fahrenheit</atem:parameter>\n</atem:invoke>\n</atem:function_calls>",
                    EOT)
                 GL_MSG("tool get_weather",
                        "<tool_output name=\"get_weather\">\n{\"temp\":65}\n</tool_output>", EOT)
                     GL_MSG("assistant to=user", "It is 65F.", EOT) GL_NEXT},
    {"glimmer namespaces, values, adjacent calls, result names, other roles",
     glimmer_on_reference_date,
     "[{\"role\":\"user\",\"content\":\"Run.\"},{\"role\":\"assistant\",\"tool_calls\":["
     "{\"id\":\"c1\",\"function\":{\"name\":\"fs.read\",\"arguments\":{\"text\":\"keep  "
     "spaces\",\"count\":3,\"ratio\":3.5,\"enabled\":true,\"fallback\":null,\"items\":["
     "\"h\\u00e9llo\",2],\"config\":{\"mode\":\"fast\",\"a\":\"<v>\\u2028\"}}}},{\"id\":\"c2\","
     "\"function\":{\"name\":\"get_weather\",\"arguments\":{}}}]},{\"role\":\"assistant\","
     "\"tool_calls\":[{\"function\":{\"name\":\"fs.write\",\"arguments\":{}}}]},"
     "{\"role\":\"tool\",\"tool_call_id\":\"c1\",\"content\":\"README\"},{\"role\":\"tool\","
     "\"tool_name\":\"custom\",\"tool_call_id\":\"c2\",\"content\":\"x\"},{\"role\":\"tool\","
     "\"tool_call_id\":\"missing\",\"content\":\"not found\"},{\"role\":\"tool\",\"content\":"
     "\"orphan\"},{\"role\":\"developer\",\"content\":\"Follow policy.\"},{\"role\":"
     "\"assistant\",\"thinking\":\"Only thought.\"}]",
     "[{\"type\":\"function\",\"function\":{\"name\":\"fs.read\",\"description\":\"Read <a> "
     "file\",\"parameters\":{\"type\":\"object\",\"properties\":{\"path\":{\"type\":"
     "\"string\"}}}}},{\"type\":\"function\",\"function\":{\"name\":\"fs.write\"}}," WEATHER_FN
     "]",
     NULL,
     GL_BOS GL_MSG(
         "system",
         GL_DEFAULT("high") GL_TOOLS_PREFIX
         "{\"name\": \"fs\", \"description\": \"\"}\n{\"name\": \"get_weather\", "
         "\"description\": \"\"}\n// Function schemas\n{\"name\": \"fs.read\", \"description\": "
         "\"Read <a> file\", \"parameters\": {\"type\": \"object\", \"properties\": {\"path\": "
         "{\"type\": \"string\"}}}}\n{\"name\": \"fs.write\", \"description\": \"\", "
         "\"parameters\": {\"type\": \"\", \"properties\": null}}\n" GL_WEATHER_SCHEMA
             GL_TOOLS_SUFFIX "\n\n# Valid recipients: \"self\", \"fs.*\", \"get_weather.*\", "
                             "\"user\".",
         EOT) GL_MSG("user", "Run.", EOT)
         GL_MSG("assistant to=fs.read",
                "<atem:function_calls>\n<atem:invoke name=\"fs.read\">\n<atem:parameter "
                "name=\"text\">keep  spaces</atem:parameter>\n<atem:parameter name=\"count\">3"
                "</atem:parameter>\n<atem:parameter name=\"ratio\">3.5</atem:parameter>\n"
                "<atem:parameter name=\"enabled\">true</atem:parameter>\n<atem:parameter "
                "name=\"fallback\">null</atem:parameter>\n<atem:parameter name=\"items\">"
                "[\"h\xc3\xa9llo\", 2]</atem:parameter>\n<atem:parameter name=\"config\">"
                "{\"a\": \"<v>\\u2028\", \"mode\": \"fast\"}</atem:parameter>\n</atem:invoke>\n"
                "</atem:function_calls>",
                EOM) GL_MSG("assistant to=get_weather", GL_EMPTY_CALL("get_weather"), EOM)
             GL_MSG("assistant to=fs.write", GL_EMPTY_CALL("fs.write"), EOT)
                 GL_MSG("tool fs.read", "<tool_output name=\"fs.read\">\nREADME\n</tool_output>",
                        EOT)
                     GL_MSG("tool custom", "<tool_output name=\"custom\">\nx\n</tool_output>", EOT)
                         GL_MSG("tool missing",
                                "<tool_output name=\"missing\">\nnot found\n</tool_output>", EOT)
                             GL_MSG("tool ", "<tool_output name=\"\">\norphan\n</tool_output>",
                                    EOT) GL_MSG("assistant to=self", "Only thought.", EOM) GL_NEXT},
    {"glimmer late and repeated system messages", glimmer_on_reference_date,
     "[{\"role\":\"user\",\"content\":\"One\"},{\"role\":\"system\",\"content\":\"First "
     "policy.\"},{\"role\":\"system\",\"content\":\"Second policy.\"},{\"role\":\"user\","
     "\"content\":\"Two\"}]",
     WEATHER_TOOL, NULL,
     GL_BOS GL_MSG("user", "One", EOT)
         GL_MSG("system", "First policy.\n\nReasoning strength: high." GL_WEATHER_TOOLS, EOT)
             GL_MSG("system", "Second policy.\n\nReasoning strength: high." GL_WEATHER_TOOLS,
                    EOT) GL_MSG("user", "Two", EOT) GL_NEXT},
};

static json_t *load(const char *text)
{
    json_error_t jerr;
    json_t *v = text ? json_loads(text, JSON_DECODE_ANY, &jerr) : NULL;
    if (text && !v)
        fail_msg("bad JSON in the table: %s", jerr.text);
    return v;
}

static void test_cases(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof CASES / sizeof *CASES; i++) {
        const render_case *c = &CASES[i];
        json_t *m = load(c->messages), *tools = load(c->tools), *think = load(c->think);
        corral_error err = {{0}};
        size_t len;
        char *got = c->render(m, tools, think, NULL, &len, &err);
        if (!got)
            fail_msg("%s: %s", c->name, err.message);
        if (strcmp(got, c->want) != 0)
            fail_msg("%s: rendered\n%s\nwanted\n%s", c->name, got, c->want);
        assert_int_equal(len, strlen(c->want));
        free(got);
        json_decref(m);
        json_decref(tools);
        json_decref(think);
    }
}

/* api.Tool's field order, empty fields left out, schema maps sorted, one type unwrapped. */
static void test_tool_json(void **state)
{
    (void)state;
    json_t *tool = load(
        "{\"function\":{\"parameters\":{\"properties\":{\"b\":{\"description\":\"B\",\"type\":"
        "[\"string\"],\"enum\":[\"x\",{\"q\":1,\"p\":2}]},\"a\":{\"required\":[],\"type\":"
        "[\"string\",\"null\"],\"items\":{\"z\":1,\"y\":2},\"anyOf\":[{\"type\":\"integer\"}],"
        "\"properties\":{}}},\"type\":\"object\",\"$defs\":null,\"extra\":1},"
        "\"description\":\"\",\"name\":\"f<g>\"},\"type\":\"function\"}");
    tbuf out;
    tbuf_init(&out, 4096);
    assert_true(gorender_tool(&out, tool, -1));
    assert_string_equal(
        out.data, "{\"type\":\"function\",\"function\":{\"name\":\"f\\u003cg\\u003e\","
                  "\"parameters\":{\"type\":\"object\",\"properties\":{\"b\":{\"type\":\"string\","
                  "\"description\":\"B\",\"enum\":[\"x\",{\"p\":2,\"q\":1}]},\"a\":{\"anyOf\":[{"
                  "\"type\":\"integer\"}],\"type\":[\"string\",\"null\"],\"items\":{\"y\":2,"
                  "\"z\":1},\"properties\":{}}}}}}");
    tbuf_free(&out);
    tbuf_init(&out, 4096);
    json_t *bare = load("{}");
    assert_true(gorender_tool(&out, bare, -1));
    assert_string_equal(out.data, "{\"type\":\"\",\"function\":{\"name\":\"\",\"parameters\":{"
                                  "\"type\":\"\",\"properties\":null}}}");
    tbuf_free(&out);
    json_decref(bare);
    json_decref(tool);
}

/* Go's strings.TrimSpace: ASCII and Unicode white space, nothing else. */
static void test_trim(void **state)
{
    (void)state;
    const char *s = "\xc2\xa0\t x y\xe3\x80\x80\n\xe2\x80\x8b";
    size_t n = strlen(s);
    const char *t = gorender_trim(s, &n);
    /* U+200B (zero width space) is not white space to Go */
    assert_int_equal(n, strlen("x y\xe3\x80\x80\n\xe2\x80\x8b"));
    assert_memory_equal(t, "x y", 3);
    n = 3;
    t = gorender_trim(" \xc2\x85", &n);
    assert_int_equal(n, 0);
}

/* The tags a renderer's header names for its answers, and whether its prompt leaves the
 * answer inside its thinking. */
typedef struct answer_tags {
    const char *think_open, *think_close, *tool_open;
    corral_call_syntax calls;
    bool in_thinking;
} answer_tags;

static corral_output_parser *make_parser(void *ctx)
{
    const answer_tags *a = ctx;
    corral_output_tags tags = {.calls = a->calls};
    strcpy(tags.think_open, a->think_open);
    strcpy(tags.think_close, a->think_close);
    strcpy(tags.tool_open, a->tool_open);
    return corral_output_parser_create(&tags, a->in_thinking, 1 << 16);
}

/* The same with the request's tools, for a syntax that reads calls by them. */
typedef struct answer_tools {
    answer_tags tags;
    const json_t *tools;
} answer_tools;

static corral_output_parser *make_tools_parser(void *ctx)
{
    const answer_tools *a = ctx;
    corral_output_parser *p = make_parser((void *)&a->tags);
    if (p)
        corral_output_parser_set_tools(p, a->tools);
    return p;
}

/* Answers that think and call as the renderers' prompts ask, read back with the tags their
 * headers name. */
static void test_answers_read_back(void **state)
{
    (void)state;
    static const char call[] =
        "[{\"function\":{\"index\":0,\"name\":\"get_weather\",\"arguments\":{\"location\":"
        "\"Tokyo\"}}}]";
    answer_tags glm = {GLM_THINK_OPEN, GLM_THINK_CLOSE, GLM_TOOL_OPEN, GLM_CALLS, true};
    output_parse_expect(make_parser, &glm,
                        "Plan.</think>Checking.<tool_call>get_weather<arg_key>location</arg_key>"
                        "<arg_value>Tokyo</arg_value></tool_call>",
                        "Checking.", "Plan.", call);
    answer_tags ds = {DEEPSEEK3_THINK_OPEN, DEEPSEEK3_THINK_CLOSE, DEEPSEEK3_TOOL_OPEN,
                      DEEPSEEK3_CALLS, true};
    output_parse_expect(make_parser, &ds,
                        "Plan.</think>Checking." DEEPSEEK3_TOOL_OPEN DEEPSEEK3_CALL_BEGIN
                        "get_weather" DEEPSEEK3_SEP "{\"location\":\"Tokyo\"}" DEEPSEEK3_CALL_END
                            DEEPSEEK3_CALLS_END,
                        "Checking.", "Plan.", call);
    answer_tags olmo = {OLMO3_THINK_OPEN, OLMO3_THINK_CLOSE, "", CORRAL_CALLS_JSON, true};
    output_parse_expect(make_parser, &olmo, "Plan.</think>Answer.", "Answer.", "Plan.", "[]");
    /* lfm2-thinking opens its thinking itself, or answers at once */
    answer_tags lfm2 = {LFM2_THINK_OPEN, LFM2_THINK_CLOSE, "", CORRAL_CALLS_JSON, false};
    output_parse_expect(make_parser, &lfm2, "<think>Plan.</think>Answer.", "Answer.", "Plan.",
                        "[]");
    output_parse_expect(make_parser, &lfm2, "Answer.", "Answer.", "", "[]");
    /* cohere's prompt opens the thinking; the text and the action are in their marks */
    answer_tags cohere = {COHERE_THINK_OPEN, COHERE_THINK_CLOSE, COHERE_TOOL_OPEN,
                          CORRAL_CALLS_COHERE, true};
    output_parse_expect(make_parser, &cohere,
                        "Plan.<|END_THINKING|>" COHERE_TOOL_OPEN "[\n    {\"tool_call_id\": \"0\", "
                        "\"tool_name\": \"get_weather\", \"parameters\": {\"location\": "
                        "\"Tokyo\"}}\n]<|END_ACTION|>",
                        "", "Plan.", call);
    output_parse_expect(make_parser, &cohere,
                        "Plan.<|END_THINKING|><|START_TEXT|>Answer.<|END_TEXT|>", "Answer.",
                        "Plan.", "[]");
    /* glimmer's prompt leaves the answer to address its messages */
    json_t *tools = load(WEATHER_TOOL);
    answer_tools glimmer = {
        {GLIMMER_THINK_OPEN, GLIMMER_THINK_CLOSE, GLIMMER_TOOL_OPEN, CORRAL_CALLS_GLIMMER, false},
        tools};
    output_parse_expect(make_tools_parser, &glimmer,
                        " to=self<|message|>Plan." EOM GL_NEXT " to=get_weather<|message|>"
                        "<atem:function_calls>\n<atem:invoke name=\"get_weather\">\n"
                        "<atem:parameter name=\"location\">Tokyo</atem:parameter>\n"
                        "</atem:invoke>\n</atem:function_calls>" EOT,
                        "", "Plan.", call);
    output_parse_expect(make_tools_parser, &glimmer,
                        " to=self<|message|>Plan." EOM GL_NEXT " to=user<|message|>Answer.",
                        "Answer.", "Plan.", "[]");
    json_decref(tools);
}

/* Glimmer's default system message is dated today, as ollama dates it (local time). */
static void test_glimmer_dates_today(void **state)
{
    (void)state;
    json_t *m = load(USER_HELLO);
    corral_error err = {{0}};
    size_t len;
    time_t before = time(NULL);
    char *got = glimmer_render(m, NULL, NULL, NULL, &len, &err);
    time_t after = time(NULL);
    assert_non_null(got);
    /* the day may turn while it renders: either side's date will do */
    char want[2][64];
    struct tm local;
    assert_non_null(localtime_r(&before, &local));
    strftime(want[0], sizeof want[0], "Current date: %Y-%m-%d.", &local);
    assert_non_null(localtime_r(&after, &local));
    strftime(want[1], sizeof want[1], "Current date: %Y-%m-%d.", &local);
    if (!strstr(got, want[0]) && !strstr(got, want[1]))
        fail_msg("no \"%s\" in\n%s", want[1], got);
    free(got);
    json_decref(m);
}

/* A prompt over the cap, or a tool nested deeper than JSON is written, is refused with a
 * message, not cut short. */
static void test_refusals(void **state)
{
    (void)state;
    json_t *m = load(USER_HELLO);
    corral_template_limits limits = corral_template_default_limits();
    limits.max_output_bytes = 16;
    corral_error err = {{0}};
    size_t len;
    assert_null(glm47_render(m, NULL, NULL, &limits, &len, &err));
    assert_non_null(strstr(err.message, "glm-4.7"));
    assert_null(cohere_render(m, NULL, NULL, &limits, &len, &err));
    assert_non_null(strstr(err.message, "cohere"));
    assert_null(glimmer_render(m, NULL, NULL, &limits, &len, &err));
    assert_non_null(strstr(err.message, "glimmer"));
    json_t *schema = json_object(), *inner = schema;
    for (int i = 0; i < TFMT_MAX_DEPTH + 8; i++) {
        json_t *next = json_object();
        json_object_set_new(inner, "x",
                            json_pack("{s:s,s:o}", "type", "object", "properties", next));
        inner = next;
    }
    json_t *tools = json_pack("[{s:s,s:{s:s,s:{s:s,s:o}}}]", "type", "function", "function",
                              "name", "f", "parameters", "type", "object", "properties", schema);
    assert_non_null(tools);
    render_fn renderers[] = {glm47_render, deepseek31_render, cogito_render, olmo3_render,
                             lfm2_render, cohere_render, glimmer_render};
    for (size_t i = 0; i < sizeof renderers / sizeof *renderers; i++) {
        err.message[0] = '\0';
        assert_null(renderers[i](m, tools, NULL, NULL, &len, &err));
        assert_non_null(strstr(err.message, "nested past"));
    }
    json_decref(tools);
    json_decref(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cases),
        cmocka_unit_test(test_tool_json),
        cmocka_unit_test(test_trim),
        cmocka_unit_test(test_answers_read_back),
        cmocka_unit_test(test_glimmer_dates_today),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * ollama's built-in renderers written after laguna's (template/glm.h, deepseek3.h, cogito.h,
 * olmo3.h, lfm2.h, nemotron.h, functiongemma.h, gemma4.h): a table of requests and, for each,
 * the prompt ollama's renderer of that name writes, byte for byte (plain chat, system turns,
 * tools and calls with their results, thinking on, off and unset, continued answers, images'
 * markers, hostile strings); answers read back with the tags each header names; the JSON
 * forms and trimming they share (template/gorender.h); and the output cap.
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
#include "template/functiongemma.h"
#include "template/gemma4.h"
#include "template/glimmer.h"
#include "template/glm.h"
#include "template/gorender.h"
#include "template/lfm2.h"
#include "template/nemotron.h"
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

#define NEM_SYSTEM IM("system", "")
#define NEM_THINK "<|im_start|>assistant\n<think>\n"
#define NEM_NO_THINK "<|im_start|>assistant\n<think></think>"
#define NEM_TOOLS_HEAD "# Tools\n\nYou have access to the following functions:\n\n<tools>"
#define NEM_TOOLS_TAIL                                                                          \
    "\n</tools>\n\nIf you choose to call a function ONLY reply in the following format with NO " \
    "suffix:\n\n<tool_call>\n<function=example_function_name>\n<parameter=example_parameter_1>"  \
    "\nvalue_1\n</parameter>\n<parameter=example_parameter_2>\nThis is the value for the "       \
    "second parameter\nthat can span\nmultiple lines\n</parameter>\n</function>\n</tool_call>"   \
    "\n\n<IMPORTANT>\nReminder:\n- Function calls MUST follow the specified format: an inner "  \
    "<function=...></function> block must be nested within <tool_call></tool_call> XML tags\n" \
    "- Required parameters MUST be specified\n- You may provide optional reasoning for your "    \
    "function call in natural language BEFORE the function call, but NOT after\n- If there is "  \
    "no function call available, answer the question like normal with your current knowledge " \
    "and do not tell the user about function calls\n</IMPORTANT>"
#define SEARCH_DOCS_TOOL                                                                        \
    "[{\"type\":\"function\",\"function\":{\"name\":\"search_docs\",\"description\":\"Search "  \
    "docs\",\"parameters\":{\"type\":\"object\",\"$defs\":{\"shared\":{\"type\":\"string\"}},"  \
    "\"required\":[\"query\"],\"properties\":{\"query\":{\"type\":\"string\",\"description\":"  \
    "\"Search query\",\"enum\":[\"api\",\"cli\"]},\"mode\":{\"type\":[\"string\",\"null\"],"    \
    "\"description\":\"Mode\",\"anyOf\":[{\"type\":\"string\"},{\"type\":\"number\"}]},"       \
    "\"payload\":{\"type\":\"object\",\"description\":\"Payload\",\"properties\":{\"enabled\":" \
    "{\"type\":\"boolean\"}},\"required\":[\"enabled\"]},\"tags\":{\"type\":\"array\","         \
    "\"description\":\"Tags\",\"items\":{\"type\":\"string\"}}}}}}]"
#define SEARCH_DOCS_XML                                                                         \
    "\n<function>\n<name>search_docs</name>\n<description>Search docs</description>\n"          \
    "<parameters>\n<parameter>\n<name>query</name>\n<type>string</type>\n<description>Search "  \
    "query</description>\n<enum>[\"api\", \"cli\"]</enum>\n</parameter>\n<parameter>\n<name>"   \
    "mode</name>\n<type>['string', 'null']</type>\n<description>Mode</description>\n<anyOf>"   \
    "[{\"type\": \"string\"}, {\"type\": \"number\"}]</anyOf>\n</parameter>\n<parameter>\n"     \
    "<name>payload</name>\n<type>object</type>\n<description>Payload</description>\n"          \
    "<properties>{\"enabled\": {\"type\": \"boolean\"}}</properties>\n<required>[\"enabled\"]" \
    "</required>\n</parameter>\n<parameter>\n<name>tags</name>\n<type>array</type>\n"          \
    "<description>Tags</description>\n<items>{\"type\": \"string\"}</items>\n</parameter>\n"    \
    "<$defs>{\"shared\": {\"type\": \"string\"}}</$defs>\n<required>[\"query\"]</required>\n"   \
    "</parameters>\n</function>"
#define NEM_WEATHER_CALL(city)                                                                  \
    "<tool_call>\n<function=get_weather>\n<parameter=city>\n" city "\n</parameter>\n"           \
    "</function>\n</tool_call>\n"
#define NEM_CALL_F "<tool_call>\n<function=f>\n</function>\n</tool_call>\n"
#define CALL_F "{\"function\":{\"name\":\"f\"}}"
#define PARIS_CALL "{\"function\":{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\"}}}"

#define FG_DEFAULT "You can do function calling with the following functions:"
#define FG_WEATHER_TOOL                                                                         \
    "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"description\":\"Get "     \
    "weather\",\"parameters\":{\"type\":\"object\",\"properties\":{\"city\":{\"type\":"         \
    "\"string\",\"description\":\"City\"}}}}}]"
#define FG_WEATHER_DECL                                                                         \
    "<start_function_declaration>declaration:get_weather{description:<escape>Get weather"       \
    "<escape>,parameters:{properties:{city:{description:<escape>City<escape>,type:<escape>"     \
    "STRING<escape>}},type:<escape>OBJECT<escape>}}<end_function_declaration>"
#define FG_TURN(role, text) "<start_of_turn>" role "\n" text "<end_of_turn>\n"
#define FG_MODEL "<start_of_turn>model\n"
#define FG_PARIS_CALL                                                                           \
    "<start_function_call>call:get_weather{city:<escape>Paris<escape>}<end_function_call>"
#define G4Q "<|\"|>"
#define G4TURN(role, text) "<|turn>" role "\n" text "<turn|>\n"
#define G4MODEL "<|turn>model\n"
#define G4THOUGHT "<|channel>thought\n"
#define G4CALL(name, args) "<|tool_call>call:" name args "<tool_call|>"
#define G4RESULT(name, text)                                                                    \
    "<|tool_response>response:" name "{value:" G4Q text G4Q "}<tool_response|>"
#define G4_BASH_FN(desc, arg_desc)                                                              \
    "{\"type\":\"function\",\"function\":{\"name\":\"bash\",\"description\":\"" desc "\","     \
    "\"parameters\":{\"type\":\"object\",\"required\":[\"command\"],\"properties\":{"          \
    "\"command\":{\"type\":\"string\",\"description\":\"" arg_desc "\"}}}}}"
#define G4_READ_FN                                                                              \
    "{\"type\":\"function\",\"function\":{\"name\":\"read\",\"description\":\"Read a file\","  \
    "\"parameters\":{\"type\":\"object\",\"required\":[\"path\"],\"properties\":{\"path\":{"   \
    "\"type\":\"string\",\"description\":\"File path\"}}}}}"
#define G4_BASH_DECL(desc, arg_desc)                                                            \
    "<|tool>declaration:bash{description:" G4Q desc G4Q ",parameters:{properties:{command:{"   \
    "description:" G4Q arg_desc G4Q ",type:" G4Q "STRING" G4Q "}},required:[" G4Q "command" G4Q \
    "],type:" G4Q "OBJECT" G4Q "}}<tool|>"
#define G4_READ_DECL                                                                            \
    "<|tool>declaration:read{description:" G4Q "Read a file" G4Q ",parameters:{properties:{"   \
    "path:{description:" G4Q "File path" G4Q ",type:" G4Q "STRING" G4Q "}},required:[" G4Q     \
    "path" G4Q "],type:" G4Q "OBJECT" G4Q "}}<tool|>"
#define G4_BASH_CALL(id, command)                                                               \
    "{" id "\"function\":{\"name\":\"bash\",\"arguments\":{\"command\":\"" command "\"}}}"
#define G4_ARRAY_TOOL(name, prop, items)                                                        \
    "{\"type\":\"function\",\"function\":{\"name\":\"" name "\",\"description\":\"D\","        \
    "\"parameters\":{\"type\":\"object\",\"properties\":{\"" prop "\":{\"type\":\"array\","     \
    "\"description\":\"P\",\"items\":" items "}}}}}"
#define G4_ARRAY_DECL(name, prop, items)                                                        \
    "<|tool>declaration:" name "{description:" G4Q "D" G4Q ",parameters:{properties:{" prop     \
    ":{description:" G4Q "P" G4Q ",items:{" items "},type:" G4Q "ARRAY" G4Q "}},type:" G4Q      \
    "OBJECT" G4Q "}}<tool|>"
#define G4T(name) "type:" G4Q name G4Q
#define G4D(text) "description:" G4Q text G4Q
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
    {"nemotron-3-nano thinks when think is unset", nemotron3_nano_render, USER_HELLO, NULL,
     NULL, NEM_SYSTEM IM("user", "Hello") NEM_THINK},
    {"nemotron-3-nano think false", nemotron3_nano_render, USER_HELLO, NULL, "false",
     NEM_SYSTEM IM("user", "Hello") NEM_NO_THINK},
    {"nemotron-3-nano /no_think in the question wins over think", nemotron3_nano_render,
     "[{\"role\":\"user\",\"content\":\"Hello /no_think\"}]", NULL, "true",
     NEM_SYSTEM IM("user", "Hello") NEM_NO_THINK},
    {"nemotron-3-nano switches taken out, a real </think> kept", nemotron3_nano_render,
     "[{\"role\":\"system\",\"content\":\"A /think B /no_think C </think>\"},"
     "{\"role\":\"user\",\"content\":\"Hello\"}]",
     NULL, "false", IM("system", "A  B  C </think>") IM("user", "Hello") NEM_THINK},
    {"nemotron-3-nano the last switch wins", nemotron3_nano_render,
     "[{\"role\":\"system\",\"content\":\"Policy /no_think\"},"
     "{\"role\":\"user\",\"content\":\"Actually /think\"},"
     "{\"role\":\"system\",\"content\":\"  Later  \"}]",
     NULL, "false",
     IM("system", "Policy ") IM("user", "Actually") IM("system", "Later") NEM_THINK},
    {"nemotron-3-nano system and tools", nemotron3_nano_render,
     "[{\"role\":\"system\",\"content\":\"Follow policy.\"},"
     "{\"role\":\"user\",\"content\":\"Use a tool\"}]",
     SEARCH_DOCS_TOOL, "true",
     IM("system", "Follow policy.\n\n" NEM_TOOLS_HEAD SEARCH_DOCS_XML NEM_TOOLS_TAIL)
         IM("user", "Use a tool") NEM_THINK},
    {"nemotron-3-nano tools without a system message", nemotron3_nano_render,
     "[{\"role\":\"user\",\"content\":\"Use a tool\"}]", SEARCH_DOCS_TOOL, NULL,
     IM("system", NEM_TOOLS_HEAD SEARCH_DOCS_XML NEM_TOOLS_TAIL) IM("user", "Use a tool")
         NEM_THINK},
    {"nemotron-3-nano hostile tool fields", nemotron3_nano_render, USER_HELLO,
     "[{\"type\":\"function\",\"function\":{\"name\":\"find\",\"description\":\"  Find <b>&"
     "\\\"x\\\"\\n \",\"parameters\":{\"type\":\"object\",\"items\":\"x\",\"required\":"
     "[\"k<\"],\"properties\":{\"k<\":{\"type\":\"string\",\"description\":\" d \",\"enum\":"
     "[\"a\\\"b\\n\\\\\",1.5,100,null,true,{\"z\":1,\"a\":2}],\"items\":{\"z\":[1],\"a\":"
     "\"<\"}}}}}},{\"type\":\"function\",\"function\":{\"name\":\"now\",\"description\":"
     "\" \"}}]",
     NULL,
     IM("system",
        NEM_TOOLS_HEAD "\n<function>\n<name>find</name>\n<description>Find <b>&\"x\""
                       "</description>\n<parameters>\n<parameter>\n<name>k<</name>\n<type>"
                       "string</type>\n<description>d</description>\n<enum>[\"a\\\"b\\n\\\\\", "
                       "1.5, 100, null, true, {\"a\": 2, \"z\": 1}]</enum>\n<items>{\"a\": "
                       "\"<\", \"z\": [1]}</items>\n</parameter>\n<items>x</items>\n<required>"
                       "[\"k<\"]</required>\n</parameters>\n</function>\n<function>\n<name>now"
                       "</name>\n<description></description>\n<parameters>\n</parameters>\n"
                       "</function>" NEM_TOOLS_TAIL) IM("user", "Hello") NEM_THINK},
    {"nemotron-3-nano an answer's thinking", nemotron3_nano_render,
     "[{\"role\":\"user\",\"content\":\"Hi\"},{\"role\":\"assistant\",\"content\":\"Answer\","
     "\"thinking\":\"Need to think\"}]",
     NULL, "true",
     NEM_SYSTEM IM("user", "Hi") IM("assistant", "<think>\nNeed to think\n</think>\nAnswer")
         NEM_THINK},
    {"nemotron-3-nano answers before the last question lose their thinking",
     nemotron3_nano_render,
     "[{\"role\":\"user\",\"content\":\"first\"},{\"role\":\"assistant\",\"content\":\"answer "
     "one\",\"thinking\":\"early reasoning\"},{\"role\":\"user\",\"content\":\"second\"},"
     "{\"role\":\"assistant\",\"content\":\"answer two\",\"thinking\":\"late reasoning\"}]",
     NULL, NULL,
     NEM_SYSTEM IM("user", "first") IM("assistant", "<think></think>\nanswer one")
         IM("user", "second") IM("assistant", "<think>\nlate reasoning\n</think>\nanswer two")
             NEM_THINK},
    {"nemotron-3-nano earlier answers: tags in the content, blank, a stray closing tag",
     nemotron3_nano_render,
     "[{\"role\":\"user\",\"content\":\"Hi\"},{\"role\":\"assistant\",\"content\":"
     "\"<think>hidden</think>Visible \"},{\"role\":\"user\",\"content\":\"Next\"},"
     "{\"role\":\"assistant\",\"content\":\"   \"},{\"role\":\"user\",\"content\":\"go\"},"
     "{\"role\":\"assistant\",\"content\":\"stray </think> tail\"},{\"role\":\"user\","
     "\"content\":\"again\"},{\"role\":\"assistant\",\"content\":\"<think>kept</think>Answer\"}]",
     NULL, "true",
     NEM_SYSTEM IM("user", "Hi") IM("assistant", "<think></think>Visible") IM("user", "Next")
         IM("assistant", "<think></think>") IM("user", "go")
             IM("assistant", "stray </think> tail") IM("user", "again")
                 IM("assistant", "<think>kept</think>Answer") NEM_THINK},
    {"nemotron-3-nano a call with content", nemotron3_nano_render,
     "[{\"role\":\"user\",\"content\":\"Weather?\"},{\"role\":\"assistant\",\"content\":"
     "\"Checking now.\",\"tool_calls\":[" PARIS_CALL "]}]",
     NULL, "true",
     NEM_SYSTEM IM("user", "Weather?")
         IM("assistant", "<think></think>Checking now.\n" NEM_WEATHER_CALL("Paris")) NEM_THINK},
    {"nemotron-3-nano earlier calls lose their thinking", nemotron3_nano_render,
     "[{\"role\":\"user\",\"content\":\"Weather?\"},{\"role\":\"assistant\",\"content\":"
     "\"Checking now.\",\"thinking\":\"Need weather\",\"tool_calls\":[" PARIS_CALL "]},"
     "{\"role\":\"user\",\"content\":\"And Rome?\"},{\"role\":\"assistant\",\"content\":"
     "\"<think>draft\",\"tool_calls\":[" PARIS_CALL "]},{\"role\":\"user\",\"content\":"
     "\"And tomorrow?\"},{\"role\":\"assistant\",\"content\":\"<think>inline</think>after\","
     "\"tool_calls\":[" CALL_F "]}]",
     NULL, "true",
     NEM_SYSTEM IM("user", "Weather?")
         IM("assistant", "<think></think>Checking now.\n" NEM_WEATHER_CALL("Paris"))
             IM("user", "And Rome?")
                 IM("assistant", "<think></think>\n" NEM_WEATHER_CALL("Paris"))
                     IM("user", "And tomorrow?")
                         IM("assistant", "<think>inline</think>after\n" NEM_CALL_F) NEM_THINK},
    {"nemotron-3-nano a run of results, then an answer", nemotron3_nano_render,
     "[{\"role\":\"user\",\"content\":\"go\"},{\"role\":\"assistant\",\"content\":\"\","
     "\"tool_calls\":[" CALL_F "]},{\"role\":\"tool\",\"content\":\"one\"},{\"role\":\"tool\","
     "\"content\":\"two /no_think\"},{\"role\":\"assistant\",\"content\":\"done\"},"
     "{\"role\":\"user\",\"content\":\"next\"}]",
     NULL, NULL,
     NEM_SYSTEM IM("user", "go") IM("assistant", "<think></think>\n" NEM_CALL_F)
         IM("user", "<tool_response>\none\n</tool_response>\n<tool_response>\ntwo /no_think\n"
                    "</tool_response>\n") IM("assistant", "<think></think>done")
             IM("user", "next") NEM_THINK},
    {"nemotron-3-nano a result first, another role", nemotron3_nano_render,
     "[{\"role\":\"tool\",\"content\":\"orphan result\"},{\"role\":\"developer\",\"content\":"
     "\" Custom \"}]",
     NULL, NULL,
     NEM_SYSTEM "<tool_response>\norphan result\n</tool_response>\n<|im_end|>\n"
         IM("developer", " Custom ") NEM_THINK},
    {"nemotron-3-nano call arguments", nemotron3_nano_render,
     "[{\"role\":\"user\",\"content\":\"go\"},{\"role\":\"assistant\",\"tool_calls\":[{"
     "\"function\":{\"name\":\"f\",\"arguments\":{\"int\":7,\"float\":2.5,\"wholefloat\":2.0,"
     "\"boolfalse\":false,\"empty\":\"\",\"nothing\":null,\"obj\":{\"k\":true},\"arr\":[1,"
     "\"two\",false],\"s\":\"line\\n</parameter> \\\"q\\\" <\",\"deep\":{\"s\":\"q\\\"uote\","
     "\"n\":null,\"i\":3,\"f\":1.5,\"inner\":[1,{\"z\":true}],\"b\":false}}}}]}]",
     NULL, NULL,
     NEM_SYSTEM IM("user", "go")
         IM("assistant", "<think></think>\n<tool_call>\n<function=f>\n<parameter=int>\n7\n"
                         "</parameter>\n<parameter=float>\n2.5\n</parameter>\n<parameter="
                         "wholefloat>\n2\n</parameter>\n<parameter=boolfalse>\nFalse\n"
                         "</parameter>\n<parameter=empty>\n\n</parameter>\n<parameter=nothing>"
                         "\nNone\n</parameter>\n<parameter=obj>\n{\"k\": true}\n</parameter>\n"
                         "<parameter=arr>\n[1, \"two\", false]\n</parameter>\n<parameter=s>\n"
                         "line\n</parameter> \"q\" <\n</parameter>\n<parameter=deep>\n{\"b\": "
                         "false, \"f\": 1.5, \"i\": 3, \"inner\": [1, {\"z\": true}], \"n\": "
                         "null, \"s\": \"q\\\"uote\"}\n</parameter>\n</function>\n</tool_call>\n")
             NEM_THINK},
    {"nemotron-3.5-nano medium effort at the last question", nemotron35_nano_render,
     "[{\"role\":\"user\",\"content\":\"Q1\"},{\"role\":\"assistant\",\"content\":\"A\"},"
     "{\"role\":\"user\",\"content\":\"Q2 \"}]",
     NULL, "\"medium\"",
     NEM_SYSTEM IM("user", "Q1") IM("assistant", "<think></think>A")
         IM("user", "Q2 \n\n{reasoning effort: efficient}") NEM_THINK},
    {"nemotron-3.5-nano switches are text", nemotron35_nano_render,
     "[{\"role\":\"system\",\"content\":\"Policy /think\"},"
     "{\"role\":\"user\",\"content\":\" Hello /no_think\"}]",
     NULL, "false", IM("system", "Policy /think") IM("user", " Hello /no_think") NEM_NO_THINK},
    {"nemotron-3.5-nano thinking", nemotron35_nano_render,
     "[{\"role\":\"user\",\"content\":\"Hi\"},{\"role\":\"assistant\",\"content\":\"Visible\","
     "\"thinking\":\"hidden\"},{\"role\":\"user\",\"content\":\"Next\"},{\"role\":"
     "\"assistant\",\"content\":\"Answer\",\"thinking\":\"Need to think\"}]",
     NULL, "\"high\"",
     NEM_SYSTEM IM("user", "Hi") IM("assistant", "<think></think>Visible") IM("user", "Next")
         IM("assistant", "<think>\nNeed to think</think>Answer") NEM_THINK},
    {"functiongemma chat", functiongemma_render,
     "[{\"role\":\"user\",\"content\":\" Hi \"},{\"role\":\"assistant\",\"content\":"
     "\"Hello!\"},{\"role\":\"user\",\"content\":\"More\"}]",
     NULL, "true",
     "<bos>" FG_TURN("user", "Hi") FG_TURN("model", "Hello!") FG_TURN("user", "More") FG_MODEL},
    {"functiongemma no messages", functiongemma_render, "[]", NULL, NULL, "<bos>" FG_MODEL},
    {"functiongemma system", functiongemma_render,
     "[{\"role\":\"system\",\"content\":\"You are helpful \"},{\"role\":\"user\",\"content\":"
     "\"Hello!\"}]",
     NULL, NULL,
     "<bos>" FG_TURN("developer", "You are helpful") FG_TURN("user", "Hello!") FG_MODEL},
    {"functiongemma developer message and tools", functiongemma_render,
     "[{\"role\":\"developer\",\"content\":\"Be concise.\"},{\"role\":\"user\",\"content\":"
     "\"Weather?\"}]",
     FG_WEATHER_TOOL, NULL,
     "<bos>" FG_TURN("developer", "Be concise.\n" FG_DEFAULT FG_WEATHER_DECL)
         FG_TURN("user", "Weather?") FG_MODEL},
    {"functiongemma the default line not written twice", functiongemma_render,
     "[{\"role\":\"system\",\"content\":\" " FG_DEFAULT "\\n\"},{\"role\":\"user\","
     "\"content\":\"Weather?\"}]",
     FG_WEATHER_TOOL, NULL,
     "<bos>" FG_TURN("developer", FG_DEFAULT "\n" FG_WEATHER_DECL) FG_TURN("user", "Weather?")
         FG_MODEL},
    {"functiongemma calls, their results, a question after them", functiongemma_render,
     "[{\"role\":\"user\",\"content\":\"Weather?\"},{\"role\":\"assistant\",\"content\":"
     "\"Let me check.\",\"tool_calls\":[" PARIS_CALL ",{\"function\":{\"name\":\"get_time\","
     "\"arguments\":{\"timezone\":\"UTC\"}}}]},{\"role\":\"tool\",\"content\":\"Sunny\"},"
     "{\"role\":\"tool\",\"content\":\"12:00\"},{\"role\":\"user\",\"content\":\"Thanks!\"}]",
     FG_WEATHER_TOOL, NULL,
     "<bos>" FG_TURN("developer", FG_DEFAULT FG_WEATHER_DECL) FG_TURN("user", "Weather?")
         FG_MODEL "Let me check." FG_PARIS_CALL "<start_function_call>call:get_time{timezone:"
                  "<escape>UTC<escape>}<end_function_call><start_function_response>response:"
                  "get_weather{<escape>Sunny<escape>}<end_function_response>"
                  "<start_function_response>response:get_time{<escape>12:00<escape>}"
                  "<end_function_response>Thanks!<end_of_turn>\n" FG_MODEL},
    {"functiongemma a last result is continued", functiongemma_render,
     "[{\"role\":\"user\",\"content\":\"Weather?\"},{\"role\":\"assistant\",\"content\":\"\","
     "\"tool_calls\":[" PARIS_CALL "]},{\"role\":\"tool\",\"content\":\"Sunny\"}]",
     NULL, NULL,
     "<bos>" FG_TURN("user", "Weather?") FG_MODEL FG_PARIS_CALL "<start_function_response>response:"
                                                        "get_weather{<escape>Sunny<escape>}"
                                                        "<end_function_response>"},
    {"functiongemma values and declarations", functiongemma_render,
     "[{\"role\":\"assistant\",\"tool_calls\":[{\"function\":{\"name\":\"f\",\"arguments\":{"
     "\"z\":[1,2.5,\"s<escape>\",null,{\"b\":true,\"a\":-3}],\"n\":2.0,\"a\":1e300}}},"
     "{\"function\":{\"name\":\"g\",\"arguments\":\"{}\"}}]}]",
     "[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{\"type\":\"object\","
     "\"required\":[\"b\",\"a\"],\"properties\":{\"b\":{\"type\":[\"integer\",\"null\"]},"
     "\"a\":{\"description\":\"A <x>\"}}}}},{\"type\":\"function\",\"function\":{\"name\":"
     "\"now\",\"description\":\"Time\"}},{\"type\":\"function\",\"function\":{\"name\":\"e\","
     "\"parameters\":{\"properties\":{}}}}]",
     NULL,
     "<bos>" FG_TURN("developer", FG_DEFAULT
             "<start_function_declaration>declaration:f{description:<escape><escape>,parameters:"
             "{properties:{a:{description:<escape>A <x><escape>},b:{description:<escape><escape>"
             ",type:<escape>INTEGER<escape>}},required:[<escape>b<escape>,<escape>a<escape>],"
             "type:<escape>OBJECT<escape>}}<end_function_declaration>"
             "<start_function_declaration>declaration:now{description:<escape>Time<escape>}"
             "<end_function_declaration><start_function_declaration>declaration:e{description:"
             "<escape><escape>,parameters:{}}<end_function_declaration>")
         FG_MODEL "<start_function_call>call:f{a:1e+300,n:2,z:[1,2.5,<escape>s<escape><escape>,"
                  "<nil>,{a:-3,b:true}]}<end_function_call><start_function_call>call:g{}"
                  "<end_function_call><end_of_turn>\n" FG_MODEL},
    {"functiongemma a result without a call, another role after it", functiongemma_render,
     "[{\"role\":\"user\",\"content\":\"a\"},{\"role\":\"tool\",\"content\":\"orphan\"},"
     "{\"role\":\"system\",\"content\":\" mid \"},{\"role\":\"user\",\"content\":\"b\"}]",
     NULL, NULL,
     "<bos>" FG_TURN("user", "a") "<start_function_response>response:{<escape>orphan<escape>}"
                          "<end_function_response>" FG_TURN("system", "mid")
                              "b<end_of_turn>\n" FG_MODEL},
    /* Gemma 4: ollama's reference cases and its Go code worked through by hand */
    {"gemma4 a question", gemma4_render, USER_HELLO, NULL, NULL,
     "<bos>" G4TURN("user", "Hello") G4MODEL},
    {"gemma4 no messages", gemma4_render, "[]", NULL, NULL, "<bos>" G4MODEL},
    {"gemma4 think false: no system turn", gemma4_render, USER_HELLO, NULL, "false",
     "<bos>" G4TURN("user", "Hello") G4MODEL},
    {"gemma4-large an empty thinking block unless thinking is on", gemma4_large_render,
     USER_HELLO, NULL, "false", "<bos>" G4TURN("user", "Hello") G4MODEL G4THOUGHT "<channel|>"},
    {"gemma4-large none when thinking is on", gemma4_large_render, USER_HELLO, NULL, "true",
     "<bos>" G4TURN("system", "<|think|>\n") G4TURN("user", "Hello") G4MODEL},
    {"gemma4 a level thinks; the developer message trimmed, the tools after it", gemma4_render,
     "[{\"role\":\"developer\",\"content\":\"  Prefer terse answers.\\nUse tools when needed.  "
     "\"},{\"role\":\"user\",\"content\":\"Hi\"}]",
     "[" G4_BASH_FN("Run a command", "The command") "," G4_READ_FN "]", "\"high\"",
     "<bos>" G4TURN("system", "<|think|>\nPrefer terse answers.\nUse tools when needed."
                         G4_BASH_DECL("Run a command", "The command") G4_READ_DECL)
         G4TURN("user", "Hi") G4MODEL},
    {"gemma4 a system message of spaces, a later system turn, user text trimmed",
     gemma4_render,
     "[{\"role\":\"system\",\"content\":\"   \"},{\"role\":\"user\",\"content\":\"  hello  \"},"
     "{\"role\":\"system\",\"content\":\" late \"}]",
     NULL, NULL,
     "<bos>" G4TURN("system", "") G4TURN("user", "hello") G4TURN("system", "late") G4MODEL},
    {"gemma4 earlier answers lose the thinking in their text", gemma4_render,
     "[{\"role\":\"user\",\"content\":\"Hi\"},{\"role\":\"assistant\",\"content\":"
     "\"<|channel>T1<channel|>Middle<|channel>T2<channel|>Done \"},{\"role\":\"user\","
     "\"content\":\"More\"},{\"role\":\"assistant\",\"content\":\"  Kept <|channel>unclosed\"},"
     "{\"role\":\"user\",\"content\":\"Again\"},{\"role\":\"assistant\",\"content\":"
     "\"<|channel>only<channel|>\"}]",
     NULL, NULL,
     "<bos>" G4TURN("user", "Hi") G4TURN("model", "MiddleDone") G4TURN("user", "More")
         G4TURN("model", "Kept") G4TURN("user", "Again") G4TURN("model", "") G4MODEL},
    {"gemma4 consecutive answers share a turn; thinking after the last question kept",
     gemma4_render,
     "[{\"role\":\"user\",\"content\":\"Start\"},{\"role\":\"assistant\",\"thinking\":\"old\","
     "\"content\":\"One.\"},{\"role\":\"user\",\"content\":\"Go\"},{\"role\":\"assistant\","
     "\"thinking\":\"Plan\",\"content\":\"Two.\"},{\"role\":\"assistant\",\"content\":"
     "\"Three.\"}]",
     NULL, NULL,
     "<bos>" G4TURN("user", "Start") G4TURN("model", "One.") G4TURN("user", "Go")
         G4TURN("model", G4THOUGHT "Plan\n<channel|>Two.Three.") G4MODEL},
    {"gemma4 calls by id, results out of order, then the answer in the same turn",
     gemma4_render,
     "[{\"role\":\"system\",\"content\":\"You are a coding assistant.\"},{\"role\":\"user\","
     "\"content\":\"List files, then read config.\"},{\"role\":\"assistant\",\"thinking\":"
     "\"Need the listing.\",\"tool_calls\":[" G4_BASH_CALL("\"id\":\"call_bash\",", "ls -la")
     ",{\"id\":\"call_read\",\"function\":{\"name\":\"read\",\"arguments\":{\"path\":"
     "\"config.json\"}}}]},{\"role\":\"tool\",\"tool_call_id\":\"call_read\",\"content\":"
     "\"{\\\"debug\\\": true}\"},{\"role\":\"tool\",\"tool_call_id\":\"call_bash\",\"content\":"
     "\"config.json\\nmain.go\"},{\"role\":\"assistant\",\"content\":\"Config loaded.\"}]",
     "[" G4_BASH_FN("Run a command", "The command") "," G4_READ_FN "]", "true",
     "<bos>" G4TURN("system", "<|think|>\nYou are a coding assistant."
                         G4_BASH_DECL("Run a command", "The command") G4_READ_DECL)
         G4TURN("user", "List files, then read config.")
             G4TURN("model", G4THOUGHT "Need the listing.\n<channel|>"
                    G4CALL("bash", "{command:" G4Q "ls -la" G4Q "}")
                        G4CALL("read", "{path:" G4Q "config.json" G4Q "}")
                            G4RESULT("read", "{\"debug\": true}")
                                G4RESULT("bash", "config.json\nmain.go") "Config loaded.")
                 G4MODEL},
    {"gemma4 a pending call leaves its turn open for the results", gemma4_render,
     "[{\"role\":\"user\",\"content\":\"List files\"},{\"role\":\"assistant\",\"content\":"
     "\"Let me check.\",\"thinking\":\"Use bash\",\"tool_calls\":[" G4_BASH_CALL("", "ls") "]}]",
     "[" G4_BASH_FN("Run", "Cmd") "]", NULL,
     "<bos>" G4TURN("system", G4_BASH_DECL("Run", "Cmd")) G4TURN("user", "List files")
         "<|turn>model\n" G4THOUGHT "Use bash\n<channel|>"
         G4CALL("bash", "{command:" G4Q "ls" G4Q "}") "Let me check.<|tool_response>"},
    {"gemma4 the last results open the thinking channel when thinking is on", gemma4_render,
     "[{\"role\":\"user\",\"content\":\"List files\"},{\"role\":\"assistant\",\"tool_calls\":["
     G4_BASH_CALL("", "ls") "]},{\"role\":\"tool\",\"tool_name\":\"bash\",\"content\":"
     "\"\\n  file1\\n\"}]",
     "[" G4_BASH_FN("Run", "Cmd") "]", "true",
     "<bos>" G4TURN("system", "<|think|>\n" G4_BASH_DECL("Run", "Cmd")) G4TURN("user", "List files")
         "<|turn>model\n" G4CALL("bash", "{command:" G4Q "ls" G4Q "}")
             G4RESULT("bash", "\n  file1\n") G4THOUGHT},
    {"gemma4 a round trip before a later question closes its turn", gemma4_render,
     "[{\"role\":\"user\",\"content\":\"List files\"},{\"role\":\"assistant\",\"thinking\":"
     "\"old\",\"content\":\"<|channel>x<channel|>\",\"tool_calls\":[" G4_BASH_CALL("", "ls")
     "]},{\"role\":\"tool\",\"tool_name\":\"bash\",\"content\":\"file1.txt\"},{\"role\":"
     "\"user\",\"content\":\"Now answer\"}]",
     "[" G4_BASH_FN("Run", "Cmd") "]", "true",
     "<bos>" G4TURN("system", "<|think|>\n" G4_BASH_DECL("Run", "Cmd")) G4TURN("user", "List files")
         G4TURN("model", G4CALL("bash", "{command:" G4Q "ls" G4Q "}")
                    G4RESULT("bash", "file1.txt")) G4TURN("user", "Now answer") G4MODEL},
    {"gemma4-large a continued turn with calls, then the empty thinking block",
     gemma4_large_render,
     "[{\"role\":\"user\",\"content\":\"Use the tool\"},{\"role\":\"assistant\",\"content\":"
     "\"First.\"},{\"role\":\"assistant\",\"content\":\"Checking.\",\"tool_calls\":[{"
     "\"function\":{\"name\":\"bash\",\"arguments\":{\"command\":null}}}]},{\"role\":\"tool\","
     "\"tool_name\":\"bash\",\"content\":\"done\"},{\"role\":\"tool\",\"tool_name\":\"bash\","
     "\"content\":\"\"},{\"role\":\"assistant\",\"content\":\"Done.\"},{\"role\":\"user\","
     "\"content\":\"Next\"}]",
     "[" G4_BASH_FN("Run", "Cmd") "]", NULL,
     "<bos>" G4TURN("system", G4_BASH_DECL("Run", "Cmd")) G4TURN("user", "Use the tool")
         G4TURN("model", "First." G4CALL("bash", "{command:null}") G4RESULT("bash", "done")
                             G4RESULT("bash", "") "Checking.Done.")
             G4TURN("user", "Next") G4MODEL G4THOUGHT "<channel|>"},
    {"gemma4 a result names its call by id, else its tool_name, else unknown", gemma4_render,
     "[{\"role\":\"user\",\"content\":\"Go\"},{\"role\":\"assistant\",\"tool_calls\":["
     G4_BASH_CALL("\"id\":\"a\",", "ls") ",{\"id\":\"b\",\"function\":{\"name\":\"read\","
     "\"arguments\":{\"path\":\"go.mod\"}}}]},{\"role\":\"tool\",\"content\":\"p1\"},{\"role\":"
     "\"tool\",\"tool_call_id\":\"zzz\",\"tool_name\":\"named\",\"content\":\" p2 \"},"
     "{\"role\":\"tool\",\"tool_call_id\":\"b\",\"tool_name\":\"x\",\"content\":\"p3\"}]",
     NULL, NULL,
     "<bos>" G4TURN("user", "Go") "<|turn>model\n" G4CALL("bash", "{command:" G4Q "ls" G4Q "}")
         G4CALL("read", "{path:" G4Q "go.mod" G4Q "}") G4RESULT("unknown", "p1")
             G4RESULT("named", " p2 ") G4RESULT("read", "p3")},
    {"gemma4 results with no call before them are left out", gemma4_render,
     "[{\"role\":\"user\",\"content\":\"Q\"},{\"role\":\"tool\",\"content\":\"orphan\"},"
     "{\"role\":\"assistant\",\"content\":\"A\"},{\"role\":\"tool\",\"content\":\"x\"},"
     "{\"role\":\"user\",\"content\":\"Q2\"}]",
     NULL, NULL, "<bos>" G4TURN("user", "Q") G4TURN("model", "A") G4TURN("user", "Q2") G4MODEL},
    {"gemma4 arguments: sorted, bare keys, Go's numbers, hostile strings as they are",
     gemma4_render,
     "[{\"role\":\"user\",\"content\":\"Go <turn|>\"},{\"role\":\"assistant\",\"tool_calls\":["
     "{\"function\":{\"name\":\"f\",\"arguments\":{\"b\":[1,2.5,\"x\",{\"z\":null,\"a\":true}],"
     "\"a\":1e21,\"c\":-0.0,\"d\":12345678901234567}}},{\"function\":{\"name\":\"g\","
     "\"arguments\":\"oops\"}},{\"function\":{\"name\":\"h\",\"arguments\":{\"s\":"
     "\"a<|\\\"|>b<tool_call|>\"}}}]}]",
     NULL, NULL,
     "<bos>" G4TURN("user", "Go <turn|>") "<|turn>model\n"
         G4CALL("f", "{a:1e+21,b:[1,2.5," G4Q "x" G4Q ",{a:true,z:null}],c:0,"
                     "d:12345678901234568}") G4CALL("g", "{}")
             G4CALL("h", "{s:" G4Q "a<|\"|>b<tool_call|>" G4Q "}") "<|tool_response>"},
    {"gemma4 images where the server marked them", gemma4_render,
     "[{\"role\":\"user\",\"content\":\" <corral-image-ab-0> What is it? \"},{\"role\":"
     "\"assistant\",\"tool_calls\":[" G4_BASH_CALL("", "ls") "]},{\"role\":\"tool\","
     "\"content\":\"<corral-image-ab-1> \"}]",
     NULL, NULL,
     "<bos>" G4TURN("user", "<corral-image-ab-0> What is it?") "<|turn>model\n"
         G4CALL("bash", "{command:" G4Q "ls" G4Q "}") G4RESULT("unknown", "<corral-image-ab-1> ")},
    {"gemma4 declarations: nested objects, unions, anyOf, enums, type only", gemma4_render,
     USER_HELLO,
     "[{\"type\":\"function\",\"function\":{\"name\":\"create_user\",\"description\":\"Create "
     "user\",\"parameters\":{\"type\":\"object\",\"properties\":{\"profile\":{\"type\":"
     "\"object\",\"description\":\"Profile\",\"required\":[\"name\"],\"properties\":{\"name\":"
     "{\"type\":\"string\",\"description\":\"Name\"},\"age\":{\"type\":\"number\","
     "\"description\":\"Age\"}}}}}}},{\"type\":\"function\",\"function\":{\"name\":"
     "\"maybe_name\",\"description\":\"U\",\"parameters\":{\"type\":\"object\",\"properties\":{"
     "\"name\":{\"type\":[\"string\",\"null\"],\"description\":\"Name\"}}}}},{\"type\":"
     "\"function\",\"function\":{\"name\":\"pick\",\"description\":\"P\",\"parameters\":{"
     "\"type\":\"object\",\"properties\":{\"value\":{\"anyOf\":[{\"type\":\"string\"},{\"type\":"
     "\"number\"},{\"type\":[\"string\"]}],\"description\":\"Value\"}}}}},{\"type\":\"function\","
     "\"function\":{\"name\":\"set_mode\",\"description\":\"Set mode\",\"parameters\":{\"type\":"
     "\"object\",\"properties\":{\"mode\":{\"type\":\"string\",\"description\":\"The mode\","
     "\"enum\":[\"fast\",\"slow\"]}}}}},{\"type\":\"function\",\"function\":{\"name\":\"raw\","
     "\"description\":\"Raw input\",\"parameters\":{\"type\":\"object\"}}}]",
     NULL,
     "<bos>" G4TURN("system",
               "<|tool>declaration:create_user{" G4D("Create user") ",parameters:{properties:{"
               "profile:{" G4D("Profile") ",properties:{age:{" G4D("Age") "," G4T("NUMBER")
               "},name:{" G4D("Name") "," G4T("STRING") "}},required:[" G4Q "name" G4Q "],"
               G4T("OBJECT") "}}," G4T("OBJECT") "}}<tool|>"
               "<|tool>declaration:maybe_name{" G4D("U") ",parameters:{properties:{name:{"
               G4D("Name") "," G4T("['STRING', 'NULL']") "}}," G4T("OBJECT") "}}<tool|>"
               "<|tool>declaration:pick{" G4D("P") ",parameters:{properties:{value:{"
               G4D("Value") "," G4T("['STRING', 'NUMBER']") "}}," G4T("OBJECT") "}}<tool|>"
               "<|tool>declaration:set_mode{" G4D("Set mode") ",parameters:{properties:{mode:{"
               G4D("The mode") ",enum:[" G4Q "fast" G4Q "," G4Q "slow" G4Q "]," G4T("STRING")
               "}}," G4T("OBJECT") "}}<tool|>"
               "<|tool>declaration:raw{" G4D("Raw input") ",parameters:{" G4T("OBJECT")
               "}}<tool|>") G4TURN("user", "Hello") G4MODEL},
    {"gemma4 declarations: keyword names dropped, an object's other fields as properties, "
     "Go's %v and upper case",
     gemma4_render, USER_HELLO,
     "[{\"type\":\"function\",\"function\":{\"name\":\"quirks\",\"parameters\":{\"required\":["
     "\"level\",3],\"properties\":{\"type\":{\"type\":\"string\"},\"level\":{\"type\":\"string\","
     "\"enum\":[\"a\",2,true,null,1e21]},\"opts\":{\"type\":\"object\",\"description\":\"Opts\","
     "\"items\":{\"type\":\"string\"}},\"any\":{},\"mixed\":{\"anyOf\":[{\"type\":\"string\"},"
     "{\"type\":\"integer\",\"description\":\"n\"}],\"description\":\"M\"},\"big\":{\"type\":"
     "\"\xc5\xbftring\"}}}}},{\"type\":\"function\",\"function\":{\"name\":\"f\"}}]",
     NULL,
     "<bos>" G4TURN("system",
               "<|tool>declaration:quirks{" G4D("") ",parameters:{properties:{any:{},big:{"
               G4T("STRING") "},level:{enum:[" G4Q "a" G4Q "," G4Q "2" G4Q "," G4Q "true" G4Q
               "," G4Q "<nil>" G4Q "," G4Q "1e+21" G4Q "]," G4T("STRING") "},mixed:{" G4D("M")
               "},opts:{" G4D("Opts") ",properties:{items:{" G4T("STRING") "}},"
               G4T("OBJECT") "}},required:[" G4Q "level" G4Q "]}}<tool|>"
               "<|tool>declaration:f{" G4D("") "}<tool|>") G4TURN("user", "Hello") G4MODEL},
    {"gemma4 declarations: array items as the client sent them", gemma4_render, USER_HELLO,
     "[" G4_ARRAY_TOOL("u", "values", "{\"type\":[\"string\",\"null\"]}") ","
     G4_ARRAY_TOOL("x", "settings", "{\"type\":\"object\",\"additionalProperties\":false,"
                   "\"default\":{\"mode\":\"auto\"},\"examples\":[{\"k\":1},\"s\"],\"nullable\":"
                   "true,\"skip\":null,\"required\":[\"mode\"],\"properties\":{\"mode\":{"
                   "\"type\":\"string\",\"description\":\"Mode\"}}}") ","
     G4_ARRAY_TOOL("n", "entries", "{\"type\":\"object\",\"required\":[\"note\"],"
                   "\"properties\":{\"note\":{\"type\":\"string\",\"description\":\"Note\","
                   "\"nullable\":true},\"metadata\":{\"type\":\"object\",\"description\":"
                   "\"Metadata\",\"nullable\":true,\"properties\":{\"tag\":{\"type\":\"string\","
                   "\"description\":\"Tag\"}}}}}") ","
     G4_ARRAY_TOOL("j", "jobs", "{\"type\":\"object\",\"required\":[\"tasks\"],\"properties\":{"
                   "\"tasks\":{\"type\":\"array\",\"description\":\"Tasks\",\"items\":{\"type\":"
                   "\"object\",\"required\":[\"command\"],\"properties\":{\"command\":{\"type\":"
                   "\"string\",\"description\":\"Command\"},\"timeout\":{\"type\":\"number\","
                   "\"description\":\"Timeout\"}}}}}}") ","
     G4_ARRAY_TOOL("t", "odd", "{\"format\":\"uri\",\"type\":5}") "]",
     NULL,
     "<bos>" G4TURN("system",
               G4_ARRAY_DECL("u", "values", "type:[" G4Q "STRING" G4Q "," G4Q "NULL" G4Q "]")
                   G4_ARRAY_DECL("x", "settings",
                                 "additionalProperties:false,default:{" G4Q "mode" G4Q ":" G4Q
                                 "auto" G4Q "},examples:[{" G4Q "k" G4Q ":1}," G4Q "s" G4Q
                                 "],nullable:true,properties:{mode:{" G4D("Mode") ","
                                 G4T("STRING") "}},required:[" G4Q "mode" G4Q "],"
                                 G4T("OBJECT"))
                       G4_ARRAY_DECL("n", "entries",
                                     "properties:{metadata:{" G4D("Metadata") ",nullable:true,"
                                     "properties:{tag:{" G4D("Tag") "," G4T("STRING") "}},"
                                     G4T("OBJECT") "},note:{" G4D("Note") ",nullable:true,"
                                     G4T("STRING") "}},required:[" G4Q "note" G4Q "],"
                                     G4T("OBJECT"))
                           G4_ARRAY_DECL("j", "jobs",
                                         "properties:{tasks:{" G4D("Tasks") ",items:{properties:{"
                                         "command:{" G4D("Command") "," G4T("STRING")
                                         "},timeout:{" G4D("Timeout") "," G4T("NUMBER")
                                         "}},required:[" G4Q "command" G4Q "]," G4T("OBJECT")
                                         "}," G4T("ARRAY") "}},required:[" G4Q "tasks" G4Q "],"
                                         G4T("OBJECT"))
                               G4_ARRAY_DECL("t", "odd", "format:" G4Q "uri" G4Q ","))
         G4TURN("user", "Hello") G4MODEL},
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
    answer_tags cogito = {COGITO_THINK_OPEN, COGITO_THINK_CLOSE, COGITO_TOOL_OPEN, COGITO_CALLS,
                          true};
    output_parse_expect(make_parser, &cogito,
                        "Plan.</think>Checking." COGITO_TOOL_OPEN DEEPSEEK3_CALL_BEGIN
                        "function" DEEPSEEK3_SEP "get_weather\n```json\n{\"location\":\"Tokyo\"}"
                        "\n```" DEEPSEEK3_CALL_END DEEPSEEK3_CALLS_END,
                        "Checking.", "Plan.", call);
    answer_tags olmo = {OLMO3_THINK_OPEN, OLMO3_THINK_CLOSE, "", CORRAL_CALLS_JSON, true};
    output_parse_expect(make_parser, &olmo, "Plan.</think>Answer.", "Answer.", "Plan.", "[]");
    /* lfm2-thinking opens its thinking itself, or answers at once */
    answer_tags lfm2 = {LFM2_THINK_OPEN, LFM2_THINK_CLOSE, "", CORRAL_CALLS_JSON, false};
    output_parse_expect(make_parser, &lfm2, "<think>Plan.</think>Answer.", "Answer.", "Plan.",
                        "[]");
    output_parse_expect(make_parser, &lfm2, "Answer.", "Answer.", "", "[]");
    /* Nemotron's prompt opens the thinking when it is on; its calls are Qwen3-Coder's */
    answer_tags nemotron = {NEMOTRON_THINK_OPEN, NEMOTRON_THINK_CLOSE, NEMOTRON_TOOL_OPEN,
                            CORRAL_CALLS_XML_FUNCTION, true};
    output_parse_expect(make_parser, &nemotron,
                        "Plan.\n</think>\nChecking.\n<tool_call>\n<function=get_weather>\n"
                        "<parameter=location>\nTokyo\n</parameter>\n</function>\n</tool_call>\n",
                        "Checking.\n", "Plan.", call);
    answer_tags functiongemma = {"", "", FUNCTIONGEMMA_TOOL_OPEN, CORRAL_CALLS_FUNCTIONGEMMA,
                                 false};
    output_parse_expect(make_parser, &functiongemma,
                        "Checking.<start_function_call>call:get_weather{location:<escape>Tokyo"
                        "<escape>}<end_function_call>",
                        "Checking.", "", call);
    /* Gemma 4 thinks in its thought channel, or (after a call's results with thinking on)
     * starts inside it, the prompt having opened it */
    answer_tags g4 = {GEMMA4_THINK_OPEN, GEMMA4_THINK_CLOSE, GEMMA4_TOOL_OPEN,
                      CORRAL_CALLS_GEMMA4, false};
    output_parse_expect(make_parser, &g4,
                        "<|channel>thought\nPlan.\n<channel|>Checking.<|tool_call>call:"
                        "get_weather{location:<|\"|>Tokyo<|\"|>}<tool_call|>",
                        "Checking.", "Plan.", call);
    output_parse_expect(make_parser, &g4, "Sunny.", "Sunny.", "", "[]");
    g4.in_thinking = true;
    output_parse_expect(make_parser, &g4, "Plan.<channel|>\nDone.", "Done.", "Plan.", "[]");
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
    assert_null(gemma4_large_render(m, NULL, NULL, &limits, &len, &err));
    assert_non_null(strstr(err.message, "gemma4"));
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
    render_fn renderers[] = {glm47_render,           deepseek31_render,      cogito_render,
                             olmo3_render,           lfm2_render,            nemotron3_nano_render,
                             nemotron35_nano_render, gemma4_render,          cohere_render,
                             glimmer_render};
    for (size_t i = 0; i < sizeof renderers / sizeof *renderers; i++) {
        err.message[0] = '\0';
        assert_null(renderers[i](m, tools, NULL, NULL, &len, &err));
        assert_non_null(strstr(err.message, "nested past"));
    }
    /* FunctionGemma reads a schema one level deep; its calls' arguments are written whole */
    json_t *deep_call = json_pack("[{s:s,s:[{s:{s:s,s:{s:O}}}]}]", "role", "assistant",
                                  "tool_calls", "function", "name", "f", "arguments", "x", schema);
    assert_non_null(deep_call);
    char *text = functiongemma_render(m, tools, NULL, NULL, &len, &err);
    assert_non_null(text);
    free(text);
    assert_null(functiongemma_render(deep_call, NULL, NULL, NULL, &len, &err));
    assert_non_null(strstr(err.message, "functiongemma prompt"));
    assert_non_null(strstr(err.message, "nested past"));
    render_fn capped[] = {nemotron3_nano_render, nemotron35_nano_render, functiongemma_render};
    const char *names[] = {"nemotron-3-nano", "nemotron-3.5-nano", "functiongemma"};
    for (size_t i = 0; i < sizeof capped / sizeof *capped; i++) {
        assert_null(capped[i](m, NULL, NULL, &limits, &len, &err));
        assert_non_null(strstr(err.message, names[i]));
        assert_non_null(strstr(err.message, "longer than 16 bytes"));
    }
    /* fields of the wrong kinds are read as Go reads a missing one, not trusted */
    json_t *odd = load("[{\"role\":5},{\"role\":\"assistant\",\"content\":[1],\"thinking\":"
                       "2,\"tool_calls\":[1,{\"function\":{\"name\":3,\"arguments\":[1]}}]},"
                       "{\"role\":\"tool\"},{\"role\":\"user\",\"content\":{}}]");
    json_t *odd_tools = load("[5,null,{\"type\":1,\"function\":{\"name\":[],\"parameters\":{"
                             "\"type\":[],\"required\":[1],\"properties\":{\"a\":7,\"b\":{"
                             "\"type\":[2,\"x\"],\"enum\":{}}}}}}]");
    for (size_t i = 0; i < sizeof capped / sizeof *capped; i++) {
        text = capped[i](odd, odd_tools, NULL, NULL, &len, &err);
        if (!text)
            fail_msg("%s: %s", names[i], err.message);
        free(text);
    }
    json_decref(odd);
    json_decref(odd_tools);
    json_decref(deep_call);
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

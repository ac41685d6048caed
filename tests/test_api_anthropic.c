/*
 * Anthropic's /v1/messages as the typed request (api/anthropic.c), field by field and
 * refusal by refusal, and Anthropic's answer shapes: the message object with its content
 * blocks, stop_reason and usage, and the named events of a stream.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "api_fixture.h"
#include "server/api/anthropic.h"

#define M "\"model\": \"m\", \"max_tokens\": 16, "
#define HI "\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]"
#define USER "{\"role\": \"user\", \"content\": \"hi\"}"

static const parse_case cases[] = {
    {"the least a request has", "{" M HI "}", 200,
     "{\"model\": \"m\", \"chat\": true, \"messages\": [" USER "], \"stream\": false,"
     " \"options\": {\"num_predict\": 16}, \"tools\": null, \"think\": null, \"format\": null}"},
    {"stream", "{" M HI ", \"stream\": true}", 200, "{\"stream\": true}"},
    {"sampling fields are options",
     "{" M HI ", \"temperature\": 0.5, \"top_p\": 0.9, \"top_k\": 20, \"stop_sequences\":"
     " [\"END\"]}", 200,
     "{\"options\": {\"num_predict\": 16, \"temperature\": 0.5, \"top_p\": 0.9, \"top_k\": 20,"
     " \"stop\": [\"END\"]}}"},
    {"system a string", "{" M "\"system\": \"be brief\", " HI "}", 200,
     "{\"messages\": [{\"role\": \"system\", \"content\": \"be brief\"}, " USER "]}"},
    {"system text blocks, as Claude Code sends them, one system message",
     "{" M "\"system\": [{\"type\": \"text\", \"text\": \"a\"}, {\"type\": \"text\", \"text\":"
     " \"\"}, {\"type\": \"text\", \"text\": \"b\", \"cache_control\": {\"type\":"
     " \"ephemeral\"}}], " HI "}", 200,
     "{\"messages\": [{\"role\": \"system\", \"content\": \"ab\"}, " USER "]}"},
    {"an empty system makes no system message, as in ollama",
     "{" M "\"system\": \"\", " HI "}", 200, "{\"messages\": [" USER "]}"},
    {"system blocks other than text are passed over, as ollama passes them over",
     "{" M "\"system\": [{\"type\": \"image\", \"text\": \"no\"}, {\"type\": \"text\","
     " \"text\": \"a\"}, 3, {\"type\": \"document\"}], " HI "}", 200,
     "{\"messages\": [{\"role\": \"system\", \"content\": \"a\"}, " USER "]}"},
    {"only an image for system makes no system message",
     "{" M "\"system\": [{\"type\": \"image\"}], " HI "}", 200, "{\"messages\": [" USER "]}"},
    {"a tool without input_schema is a function without parameters, as in ollama",
     "{" M HI ", \"tools\": [{\"name\": \"f\"}, {\"name\": \"g\", \"input_schema\": null}]}",
     200,
     "{\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\"}}, {\"type\":"
     " \"function\", \"function\": {\"name\": \"g\"}}]}"},
    {"empty system blocks make no system message",
     "{" M "\"system\": [{\"type\": \"text\", \"text\": \"\"}], " HI "}", 200,
     "{\"messages\": [" USER "]}"},
    {"text blocks joined with nothing between, as in ollama",
     "{" M "\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\":"
     " \"a\"}, {\"type\": \"text\", \"text\": \"b\"}]}]}", 200,
     "{\"messages\": [{\"role\": \"user\", \"content\": \"ab\"}]}"},
    {"a document stands apart from the text blocks around it",
     "{" M "\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\":"
     " \"a\"}, {\"type\": \"document\", \"source\": {\"type\": \"text\", \"data\": \"d\"}},"
     " {\"type\": \"text\", \"text\": \"\"}, {\"type\": \"text\", \"text\": \"b\"},"
     " {\"type\": \"text\", \"text\": \"c\"}]}]}", 200,
     "{\"messages\": [{\"role\": \"user\", \"content\": \"a\\n\\nd\\n\\nbc\"}]}"},
    {"thinking, tool_use and tool_result",
     "{" M "\"messages\": [" USER ", {\"role\": \"assistant\", \"content\": [{\"type\":"
     " \"thinking\", \"thinking\": \"t\", \"signature\": \"\"}, {\"type\": \"redacted_thinking\","
     " \"data\": \"x\"}, {\"type\": \"tool_use\", \"id\": \"toolu_1\", \"name\": \"f\", \"input\":"
     " {\"x\": 1}}]}, {\"role\": \"user\", \"content\": [{\"type\": \"tool_result\","
     " \"tool_use_id\": \"toolu_1\", \"content\": [{\"type\": \"text\", \"text\": \"4\"},"
     " {\"type\": \"text\", \"text\": \"2\"}]}]}]}",
     200,
     "{\"messages\": [" USER ", {\"role\": \"assistant\", \"content\": \"\", \"thinking\": \"t\","
     " \"tool_calls\": [{\"id\": \"toolu_1\", \"function\": {\"index\": 0, \"name\": \"f\","
     " \"arguments\": {\"x\": 1}}}]}, {\"role\": \"tool\", \"content\": \"42\","
     " \"tool_call_id\": \"toolu_1\", \"tool_name\": \"f\"}]}"},
    {"tools as function tools",
     "{" M HI ", \"tools\": [{\"name\": \"f\", \"description\": \"d\", \"input_schema\":"
     " {\"type\": \"object\"}}]}", 200,
     "{\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", \"description\":"
     " \"d\", \"parameters\": {\"type\": \"object\"}}}]}"},
    {"tool_choice none withholds the tools",
     "{" M HI ", \"tool_choice\": {\"type\": \"none\"}, \"tools\": [{\"name\": \"f\","
     " \"input_schema\": {}}]}", 200, "{\"tools\": null}"},
    {"tool_choice auto leaves the choice to the model",
     "{" M HI ", \"tool_choice\": {\"type\": \"auto\"}, \"tools\": [{\"name\": \"f\", \"input_schema\": {}}]}", 200,
     "{\"tool_choice\": \"auto\", \"tool_choice_name\": null}"},
    {"tool_choice any forces a call",
     "{" M HI ", \"tool_choice\": {\"type\": \"any\", \"disable_parallel_tool_use\": true},"
     " \"tools\": [{\"name\": \"f\", \"input_schema\": {}}]}", 200, "{\"tool_choice\": \"required\"}"},
    {"tool_choice tool forces a call of the one named",
     "{" M HI ", \"tool_choice\": {\"type\": \"tool\", \"name\": \"f\"}, \"tools\": [{\"name\": \"f\", \"input_schema\": {}}]}", 200,
     "{\"tool_choice\": \"named\", \"tool_choice_name\": \"f\"}"},
    {"tool_choice tool without a name",
     "{" M HI ", \"tool_choice\": {\"type\": \"tool\"}, \"tools\": [{\"name\": \"f\", \"input_schema\": {}}]}", 400,
     "tool_choice: must be {\"type\": \"auto\"}"},
    {"thinking enabled", "{" M HI ", \"thinking\": {\"type\": \"enabled\", \"budget_tokens\":"
                         " 1024}}", 200, "{\"think\": true}"},
    {"thinking disabled", "{" M HI ", \"thinking\": {\"type\": \"disabled\"}}", 200,
     "{\"think\": false}"},
    {"output_config.effort is the think level",
     "{" M HI ", \"output_config\": {\"effort\": \"low\"}}", 200, "{\"think\": \"low\"}"},
    {"effort xhigh is high", "{" M HI ", \"output_config\": {\"effort\": \"xhigh\"}}", 200,
     "{\"think\": \"high\"}"},
    {"adaptive thinking, as Claude Code sends it, at the effort's level",
     "{" M HI ", \"thinking\": {\"type\": \"adaptive\"}, \"output_config\": {\"effort\":"
     " \"low\"}}", 200, "{\"think\": \"low\"}"},
    {"adaptive thinking without an effort is no setting, as in ollama",
     "{" M HI ", \"thinking\": {\"type\": \"adaptive\"}}", 200, "{\"think\": null}"},
    {"enabled thinking is think true whatever the effort, as in ollama",
     "{" M HI ", \"thinking\": {\"type\": \"enabled\", \"budget_tokens\": 2048},"
     " \"output_config\": {\"effort\": \"max\"}}", 200, "{\"think\": true}"},
    {"adaptive thinking with an unknown effort is no setting, as in ollama",
     "{" M HI ", \"thinking\": {\"type\": \"adaptive\"}, \"output_config\": {\"effort\":"
     " \"huge\"}}", 200, "{\"think\": null}"},
    {"a newer thinking type takes the effort's level, as in ollama",
     "{" M HI ", \"thinking\": {\"type\": \"auto\"}, \"output_config\": {\"effort\":"
     " \"medium\"}}", 200, "{\"think\": \"medium\"}"},
    {"an effort that is not a string, even with thinking enabled",
     "{" M HI ", \"thinking\": {\"type\": \"enabled\"}, \"output_config\": {\"effort\":"
     " 3}}", 400, "output_config.effort: must be a string"},
    {"an effort's case and surrounding spaces do not matter, as in ollama",
     "{" M HI ", \"output_config\": {\"effort\": \" \\tMedium \"}}", 200,
     "{\"think\": \"medium\"}"},
    {"XHIGH is high", "{" M HI ", \"output_config\": {\"effort\": \"XHIGH\"}}", 200,
     "{\"think\": \"high\"}"},
    {"an empty effort is ignored", "{" M HI ", \"output_config\": {\"effort\": \"\"}}", 200,
     "{\"think\": null}"},
    {"an effort that is not a string", "{" M HI ", \"output_config\": {\"effort\": 3}}", 400,
     "output_config.effort: must be a string"},
    {"disabled thinking wins over effort",
     "{" M HI ", \"thinking\": {\"type\": \"disabled\"}, \"output_config\": {\"effort\":"
     " \"high\"}}", 200, "{\"think\": false}"},
    {"an unknown effort is ignored, as in ollama",
     "{" M HI ", \"output_config\": {\"effort\": \"extreme\"}}", 200, "{\"think\": null}"},
    {"a level's prefix is not the level",
     "{" M HI ", \"output_config\": {\"effort\": \"hig\"}}", 200, "{\"think\": null}"},
    {"structured output",
     "{" M HI ", \"output_config\": {\"format\": {\"type\": \"json_schema\", \"schema\":"
     " {\"type\": \"object\"}}}}", 200, "{\"format\": {\"type\": \"object\"}}"},
    {"no max_tokens", "{\"model\": \"m\", " HI "}", 400,
     "max_tokens: required, and greater than 0"},
    {"max_tokens 0", "{\"model\": \"m\", \"max_tokens\": 0, " HI "}", 400, "max_tokens"},
    {"no messages", "{" M "\"messages\": []}", 400, "messages: at least one message is required"},
    {"a system role", "{" M "\"messages\": [{\"role\": \"system\", \"content\": \"x\"}]}", 400,
     "messages.0.role: must be user or assistant"},
    {"content a number", "{" M "\"messages\": [{\"role\": \"user\", \"content\": 1}]}", 400,
     "messages.0.content: must be a string or an array"},
    {"a text block without text",
     "{" M "\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"text\"}]}]}", 400,
     "messages.0.content.0.text: must be a string"},
    {"a thinking block's thinking not text",
     "{" M "\"messages\": [{\"role\": \"assistant\", \"content\": [{\"type\": \"thinking\","
     " \"thinking\": 1}]}]}", 400, "messages.0.content.0.thinking: must be a string"},
    {"a tool_use without input",
     "{" M "\"messages\": [{\"role\": \"assistant\", \"content\": [{\"type\": \"tool_use\","
     " \"name\": \"f\"}]}]}", 400, "messages.0.content.0: tool_use needs a name and an input"},
    {"a tool_result's image blocks are the tool message's images",
     "{" M "\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"tool_result\","
     " \"tool_use_id\": \"a\", \"content\": [{\"type\": \"text\", \"text\": \"shot\"},"
     " {\"type\": \"image\", \"source\": {\"type\": \"base64\", \"media_type\":"
     " \"image/png\", \"data\": \"aGk=\"}}]}]}]}", 200,
     "{\"messages\": [{\"role\": \"tool\", \"content\": \"shot\", \"tool_call_id\": \"a\","
     " \"images\": [\"aGk=\"]}]}"},
    {"a tool_result's image without base64 data",
     "{" M "\"messages\": [{\"role\": \"user\", \"content\": [" "{\"type\": \"text\","
     " \"text\": \"x\"}, {\"type\": \"tool_result\", \"tool_use_id\": \"a\", \"content\":"
     " [{\"type\": \"image\"}]}]}]}", 400,
     "messages.0.content.1.content.0.source: invalid image source"},
    {"a tool_result's text document is a line of its result",
     "{" M "\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"tool_result\","
     " \"tool_use_id\": \"a\", \"content\": [{\"type\": \"text\", \"text\": \"read:\"},"
     " {\"type\": \"document\", \"source\": {\"type\": \"text\", \"media_type\":"
     " \"text/plain\", \"data\": \"body\"}}, {\"type\": \"text\", \"text\": \"x\"},"
     " {\"type\": \"text\", \"text\": \"y\"}]}]}]}", 200,
     "{\"messages\": [{\"role\": \"tool\", \"content\": \"read:\\nbody\\nxy\", \"tool_call_id\":"
     " \"a\"}]}"},
    {"a tool_result's PDF, as Claude Code sends a PDF it read, is a line saying it is left out",
     "{" M "\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"tool_result\","
     " \"tool_use_id\": \"a\", \"content\": [{\"type\": \"text\", \"text\": \"read:\"},"
     " {\"type\": \"document\", \"source\": {\"type\": \"base64\", \"media_type\":"
     " \"application/pdf\", \"data\": \"JVBERi0=\"}}]}]}]}", 200,
     "{\"messages\": [{\"role\": \"tool\", \"content\": \"read:\\n[document left out: this"
     " server reads only text documents, not PDFs or files]\", \"tool_call_id\": \"a\"}]}"},
    {"a tool_result's blocks of other types are passed over, as in ollama",
     "{" M "\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"tool_result\","
     " \"tool_use_id\": \"a\", \"content\": [{\"type\": \"text\", \"text\": \"x\"},"
     " {\"type\": \"search_result\", \"source\": \"s\", \"title\": \"t\", \"content\": []},"
     " {\"type\": \"tool_reference\", \"tool_name\": \"f\"}]}]}]}", 200,
     "{\"messages\": [{\"role\": \"tool\", \"content\": \"x\", \"tool_call_id\": \"a\"}]}"},
    {"a tool_result's block without a type",
     "{" M "\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"tool_result\","
     " \"tool_use_id\": \"a\", \"content\": [{\"text\": \"x\"}]}]}]}", 400,
     "messages.0.content.0.content.0: must be a block with a type"},
    {"a tool_result's block not an object",
     "{" M "\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"tool_result\","
     " \"tool_use_id\": \"a\", \"content\": [\"x\"]}]}]}", 400,
     "messages.0.content.0.content.0: must be a block with a type"},
    {"a tool_result's content a number",
     "{" M "\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"tool_result\","
     " \"tool_use_id\": \"a\", \"content\": 5}]}]}", 400,
     "messages.0.content.0.content: must be a string or an array of blocks"},
    {"an image block goes with the message's text",
     "{" M "\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"image\", \"source\":"
     " {\"type\": \"base64\", \"media_type\": \"image/png\", \"data\": \"aGk=\"}}, {\"type\":"
     " \"text\", \"text\": \"what\"}]}]}", 200,
     "{\"messages\": [{\"role\": \"user\", \"content\": \"what\", \"images\": [\"aGk=\"]}]}"},
    {"an image block alone",
     "{" M "\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"image\", \"source\":"
     " {\"type\": \"base64\", \"data\": \"aGk=\"}}]}]}", 200,
     "{\"messages\": [{\"role\": \"user\", \"content\": \"\", \"images\": [\"aGk=\"]}]}"},
    {"an image block without a source",
     "{" M "\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"image\"}]}]}", 400,
     "messages.0.content.0.source: invalid image source"},
    {"an image's base64 source without data",
     "{" M "\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"image\", \"source\":"
     " {\"type\": \"base64\", \"data\": 1}}]}]}", 400, "messages.0.content.0.source: invalid image source"},
    {"an image by URL",
     "{" M "\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"image\", \"source\":"
     " {\"type\": \"url\", \"url\": \"https://example.com/a.png\"}}]}]}", 400,
     "messages.0.content.0.source: invalid image source type: url. Only base64 images are"
     " supported."},
    {"a text document: its title, then its text, among the message's texts",
     "{" M "\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\":"
     " \"Sum up\"}, {\"type\": \"document\", \"title\": \"Notes\", \"source\": {\"type\":"
     " \"text\", \"media_type\": \"text/plain\", \"data\": \"a b\"}, \"citations\":"
     " {\"enabled\": true}}]}]}", 200,
     "{\"messages\": [{\"role\": \"user\", \"content\": \"Sum up\\n\\nNotes\\n\\na b\"}]}"},
    {"a content document: its text blocks",
     "{" M "\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"document\","
     " \"source\": {\"type\": \"content\", \"content\": [{\"type\": \"text\", \"text\":"
     " \"one\"}, {\"type\": \"text\", \"text\": \"two\"}]}}]}]}", 200,
     "{\"messages\": [{\"role\": \"user\", \"content\": \"one\\n\\ntwo\"}]}"},
    {"a content document as a string",
     "{" M "\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"document\","
     " \"source\": {\"type\": \"content\", \"content\": \"all\"}}]}]}", 200,
     "{\"messages\": [{\"role\": \"user\", \"content\": \"all\"}]}"},
    {"a content document holding an image",
     "{" M "\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"document\","
     " \"source\": {\"type\": \"content\", \"content\": [{\"type\": \"image\"}]}}]}]}", 400,
     "messages.0.content.0.source.content.0: only text blocks are read"},
    {"a PDF document, a URL's and a file's are lines saying they are left out",
     "{" M "\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"text\","
     " \"text\": \"Sum up\"}, {\"type\": \"document\", \"title\": \"Q3 \\\"final\\\"\","
     " \"source\": {\"type\": \"base64\", \"media_type\": \"application/pdf\", \"data\":"
     " \"JVBERi0=\"}}, {\"type\": \"document\", \"source\": {\"type\": \"url\", \"url\":"
     " \"https://example.com/a.pdf\"}}, {\"type\": \"document\", \"source\": {\"type\":"
     " \"file\", \"file_id\": \"f\"}}]}]}", 200,
     "{\"messages\": [{\"role\": \"user\", \"content\": \"Sum up\\n\\n[document \\\"Q3"
     " \\\"final\\\"\\\" left out: this server reads only text documents, not PDFs or files]"
     "\\n\\n[document left out: this server reads only text documents, not PDFs or files]"
     "\\n\\n[document left out: this server reads only text documents, not PDFs or files]\"}]}"},
    {"a document without a source",
     "{" M "\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"document\"}]}]}", 400,
     "messages.0.content.0.source: only text documents are read"},
    {"a text document's data not a string",
     "{" M "\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"document\","
     " \"source\": {\"type\": \"text\", \"data\": 7}}]}]}", 400,
     "messages.0.content.0.source: only text documents are read"},
    {"blocks of other types are passed over, as in ollama",
     "{" M "\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"container_upload\","
     " \"file_id\": \"f\"}, {\"type\": \"text\", \"text\": \"hi\"}, {\"type\":"
     " \"search_result\", \"source\": \"s\", \"title\": \"t\", \"content\": []}]}]}", 200,
     "{\"messages\": [" USER "]}"},
    {"a message left with nothing makes none, as in ollama",
     "{" M "\"messages\": [" USER ", {\"role\": \"assistant\", \"content\": [{\"type\":"
     " \"redacted_thinking\", \"data\": \"x\"}, {\"type\": \"mcp_tool_use\", \"id\": \"m\","
     " \"name\": \"f\", \"server_name\": \"s\", \"input\": {}}, {\"type\":"
     " \"mcp_tool_result\", \"tool_use_id\": \"m\", \"content\": \"r\"}]}, " USER "]}", 200,
     "{\"messages\": [" USER ", " USER "]}"},
    {"only an empty text block makes no message, as in ollama",
     "{" M "\"messages\": [" USER ", {\"role\": \"assistant\", \"content\": [{\"type\":"
     " \"text\", \"text\": \"\"}]}, " USER "]}", 200, "{\"messages\": [" USER ", " USER "]}"},
    {"an empty string makes no message, as ollama reads it as one empty text block",
     "{" M "\"messages\": [" USER ", {\"role\": \"assistant\", \"content\": \"\"}, " USER "]}",
     200, "{\"messages\": [" USER ", " USER "]}"},
    {"empty text and thinking blocks make no message, as in ollama",
     "{" M "\"messages\": [" USER ", {\"role\": \"assistant\", \"content\": [{\"type\":"
     " \"thinking\", \"thinking\": \"\", \"signature\": \"\"}, {\"type\": \"text\", \"text\":"
     " \"\"}, {\"type\": \"thinking\", \"signature\": \"s\"}]}, " USER "]}", 200,
     "{\"messages\": [" USER ", " USER "]}"},
    {"an empty text block adds no blank line to the others",
     "{" M "\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\":"
     " \"\"}, {\"type\": \"text\", \"text\": \"hi\"}, {\"type\": \"text\", \"text\": \"\"}]}]}",
     200, "{\"messages\": [" USER "]}"},
    {"a block without a type",
     "{" M "\"messages\": [{\"role\": \"user\", \"content\": [{\"text\": \"hi\"}]}]}", 400,
     "messages.0.content.0: must be a block with a type"},
    {"a block not an object",
     "{" M "\"messages\": [{\"role\": \"user\", \"content\": [\"hi\"]}]}", 400,
     "messages.0.content.0: must be a block with a type"},
    {"a web search replayed: a call of the answer's turn, its results a tool message after it",
     "{" M "\"messages\": [" USER ", {\"role\": \"assistant\", \"content\": [{\"type\":"
     " \"server_tool_use\", \"id\": \"srvtoolu_1\", \"name\": \"web_search\", \"input\":"
     " {\"query\": \"q\"}}, {\"type\": \"web_search_tool_result\", \"tool_use_id\":"
     " \"srvtoolu_1\", \"content\": [{\"type\": \"web_search_result\", \"title\": \"T\","
     " \"url\": \"https://a\", \"encrypted_content\": \"e\"}, {\"type\": \"web_search_result\","
     " \"url\": \"https://b\"}]}, {\"type\": \"text\", \"text\": \"found\", \"citations\":"
     " []}]}, " USER "]}", 200,
     "{\"messages\": [" USER ", {\"role\": \"assistant\", \"content\": \"found\","
     " \"tool_calls\": [{\"id\": \"srvtoolu_1\", \"function\": {\"index\": 0, \"name\":"
     " \"web_search\", \"arguments\": {\"query\": \"q\"}}}]}, {\"role\": \"tool\","
     " \"content\": \"- T: https://a\\n- : https://b\\n\", \"tool_call_id\": \"srvtoolu_1\","
     " \"tool_name\": \"web_search\"}, " USER "]}"},
    {"a failed web search: its error and code",
     "{" M "\"messages\": [{\"role\": \"assistant\", \"content\": [{\"type\":"
     " \"web_search_tool_result\", \"tool_use_id\": \"s\", \"content\": {\"type\":"
     " \"web_search_tool_result_error\", \"error_code\": \"max_uses_exceeded\"}}]}]}", 200,
     "{\"messages\": [{\"role\": \"tool\", \"content\":"
     " \"web_search_tool_result_error: max_uses_exceeded\", \"tool_call_id\": \"s\"}]}"},
    {"an error among a web search's results is the whole result",
     "{" M "\"messages\": [{\"role\": \"assistant\", \"content\": [{\"type\":"
     " \"web_search_tool_result\", \"tool_use_id\": \"s\", \"content\": [{\"type\":"
     " \"web_search_result\", \"title\": \"T\", \"url\": \"u\"}, {\"type\":"
     " \"web_search_tool_result_error\"}]}]}]}", 200,
     "{\"messages\": [{\"role\": \"tool\", \"content\": \"web_search_tool_result_error\","
     " \"tool_call_id\": \"s\"}]}"},
    {"a web search's results not an array",
     "{" M "\"messages\": [{\"role\": \"assistant\", \"content\": [{\"type\":"
     " \"web_search_tool_result\", \"tool_use_id\": \"s\", \"content\": 3}]}]}", 400,
     "messages.0.content.0.content: must be a string, an array of results or an error"},
    {"a server_tool_use without input",
     "{" M "\"messages\": [{\"role\": \"assistant\", \"content\": [{\"type\":"
     " \"server_tool_use\", \"id\": \"s\", \"name\": \"web_search\"}]}]}", 400,
     "messages.0.content.0: server_tool_use needs a name and an input object"},
    {"a tool with a schema not an object", "{" M HI ", \"tools\": [{\"name\": \"f\","
     " \"input_schema\": \"x\"}]}", 400, "tools.0: input_schema must be an object"},
    {"a tool without a name", "{" M HI ", \"tools\": [{\"input_schema\": {}}]}", 400,
     "tools.0: a tool needs a name"},
    {"a custom tool by its type", "{" M HI ", \"tools\": [{\"type\": \"custom\", \"name\": \"f\","
     " \"input_schema\": {}}]}", 200,
     "{\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\":"
     " {}}}]}"},
    {"a server tool", "{" M HI ", \"tools\": [{\"type\": \"web_search_20250305\", \"name\":"
     " \"web_search\", \"max_uses\": 5}]}", 400,
     "tools.0: web_search_20250305 is a server tool, which Corral does not run"},
    {"output_config.format not a schema",
     "{" M HI ", \"output_config\": {\"format\": {\"type\": \"json\"}}}", 400,
     "output_config.format: must be"},
};

/* count_tokens takes the same body without max_tokens, and never streams. */
static const parse_case count_cases[] = {
    {"no max_tokens needed", "{\"model\": \"m\", \"system\": \"s\", " HI "}", 200,
     "{\"model\": \"m\", \"count_only\": true, \"stream\": false, \"options\": {},"
     " \"messages\": [{\"role\": \"system\", \"content\": \"s\"}, " USER "]}"},
    {"stream is not read", "{\"model\": \"m\", \"stream\": true, " HI "}", 200,
     "{\"stream\": false}"},
    {"tools count as the messages would", "{\"model\": \"m\", " HI ", \"tools\": [{\"name\":"
     " \"f\", \"input_schema\": {\"type\": \"object\"}}]}", 200,
     "{\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\","
     " \"parameters\": {\"type\": \"object\"}}}]}"},
    {"no messages", "{\"model\": \"m\", \"messages\": []}", 400,
     "messages: at least one message is required"},
};

static void test_requests(void **state)
{
    (void)state;
    api_run_parse_cases(cases, sizeof cases / sizeof cases[0], anthropic_parse);
    api_run_parse_cases(count_cases, sizeof count_cases / sizeof count_cases[0],
                        anthropic_parse_count);
    /* a messages request is not a count */
    json_t *body = api_json("{" M HI "}");
    chat_request *req = NULL;
    char message[256];
    assert_int_equal(anthropic_parse(body, &req, message, sizeof message), 200);
    assert_false(req->count_only);
    chat_request_free(req);
    json_decref(body);
}

#define DONE "{\"done_reason\": \"stop\", \"prompt_eval_count\": 7, \"eval_count\": 3}"

static generation_info info_for(void)
{
    json_t *body = api_json("{\"model\": \"m\"}");
    generation_info info = {.model = "m", .chat = true, .state = anthropic_answer_create(body)};
    json_decref(body);
    assert_non_null(info.state);
    return info;
}

/* The message: thinking, text and tool_use blocks, stop_reason and usage. */
static void test_whole(void **state)
{
    (void)state;
    generation_info info = info_for();
    json_t *calls = api_json("[{\"id\": \"call_1\", \"function\": {\"index\": 0, \"name\": \"f\","
                             " \"arguments\": {\"x\": 1}}}]");
    generation_delta answer = {.content = "hi", .content_len = 2, .thinking = "hmm",
                               .thinking_len = 3, .tool_calls = calls};
    info.n_tool_calls = 1;
    json_t *got = api_shape_whole(&anthropic_shape, &info, DONE, &answer);
    json_t *want = api_json(
        "{\"type\": \"message\", \"role\": \"assistant\", \"model\": \"m\", \"content\": ["
        "{\"type\": \"thinking\", \"thinking\": \"hmm\", \"signature\": \"\"},"
        " {\"type\": \"text\", \"text\": \"hi\"},"
        " {\"type\": \"tool_use\", \"id\": \"call_1\", \"name\": \"f\", \"input\": {\"x\": 1}}],"
        " \"stop_reason\": \"tool_use\", \"stop_sequence\": null,"
        " \"usage\": {\"input_tokens\": 7, \"output_tokens\": 3}}");
    api_expect_subset(want, got, "message");
    assert_non_null(strstr(json_string_value(json_object_get(got, "id")), "msg_"));
    json_decref(got);
    json_decref(want);
    json_decref(calls);

    /* a stop sequence and a token limit */
    info.n_tool_calls = 0;
    generation_delta text = {.content = "x", .content_len = 1, .thinking = ""};
    got = api_shape_whole(&anthropic_shape, &info, "{\"stop_sequence\": \"END\"}", &text);
    want = api_json("{\"stop_reason\": \"stop_sequence\", \"stop_sequence\": \"END\"}");
    api_expect_subset(want, got, "stop_sequence");
    json_decref(got);
    json_decref(want);
    got = api_shape_whole(&anthropic_shape, &info, "{\"done_reason\": \"length\"}", &text);
    want = api_json("{\"stop_reason\": \"max_tokens\"}");
    api_expect_subset(want, got, "max_tokens");
    json_decref(got);
    json_decref(want);
    free(info.state);
}

/* A stream: message_start and a ping, the text block's start, deltas and stop, then
 * message_delta with the stop reason and message_stop; each event named as its type. */
static void test_stream(void **state)
{
    (void)state;
    generation_info info = info_for();
    generation_delta pieces[] = {{.content = "a", .content_len = 1, .thinking = ""},
                                 {.content = "b", .content_len = 1, .thinking = ""}};
    char *text = api_shape_stream(&anthropic_shape, &info, pieces, 2, DONE);
    static const char *const types[] = {"message_start", "ping", "content_block_start",
                                        "content_block_delta", "content_block_delta",
                                        "content_block_stop", "message_delta", "message_stop"};
    const char *event = text;
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        char head[64];
        snprintf(head, sizeof head, "event: %s\ndata: ", types[i]);
        if (strncmp(event, head, strlen(head)) != 0)
            fail_msg("event %zu: %.60s, want %s", i, event, types[i]);
        const char *end = strstr(event, "\n\n");
        assert_non_null(end);
        char *data = strndup(event + strlen(head), (size_t)(end - event - strlen(head)));
        json_t *got = api_json(data);
        assert_string_equal(json_string_value(json_object_get(got, "type")), types[i]);
        if (i == 3) {
            json_t *want = api_json("{\"index\": 0, \"delta\": {\"type\": \"text_delta\","
                                    " \"text\": \"a\"}}");
            api_expect_subset(want, got, "content_block_delta");
            json_decref(want);
        } else if (i == 6) {
            json_t *want = api_json("{\"delta\": {\"stop_reason\": \"end_turn\","
                                    " \"stop_sequence\": null}, \"usage\": {\"input_tokens\": 7,"
                                    " \"output_tokens\": 3}}");
            api_expect_subset(want, got, "message_delta");
            json_decref(want);
        }
        json_decref(got);
        free(data);
        event = end + 2;
    }
    assert_string_equal(event, "");
    free(text);
    free(info.state);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_requests),
        cmocka_unit_test(test_whole),
        cmocka_unit_test(test_stream),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

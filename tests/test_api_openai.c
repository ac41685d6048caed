/*
 * OpenAI's /v1/chat/completions and /v1/completions as the typed request (api/openai.c),
 * field by field and refusal by refusal, and OpenAI's answer shapes: chat.completion and
 * text_completion objects, and the chunks of a stream as server-sent events ending in
 * `data: [DONE]`.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "api_fixture.h"
#include "server/api/openai.h"

static unsigned parse_chat(const json_t *body, chat_request **out, char *message, size_t size)
{
    return openai_parse(body, true, out, message, size);
}

static unsigned parse_completion(const json_t *body, chat_request **out, char *message,
                                 size_t size)
{
    return openai_parse(body, false, out, message, size);
}

#define M "\"model\": \"m\", "
#define HI "\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]"
#define USER "{\"role\": \"user\", \"content\": \"hi\"}"
#define FN "{\"type\": \"function\", \"function\": {\"name\": \"f\"}}"

static const parse_case chat_cases[] = {
    {"the least a chat has", "{" M HI "}", 200,
     "{\"model\": \"m\", \"chat\": true, \"messages\": [" USER "], \"stream\": false,"
     " \"options\": {}, \"tools\": null, \"think\": null, \"format\": null,"
     " \"logprobs\": false}"},
    {"stream", "{" M HI ", \"stream\": true}", 200, "{\"stream\": true}"},
    {"developer is system",
     "{" M "\"messages\": [{\"role\": \"developer\", \"content\": \"be brief\"}, " USER "]}", 200,
     "{\"messages\": [{\"role\": \"system\", \"content\": \"be brief\"}, " USER "]}"},
    {"roles in any case, as ollama reads them",
     "{" M "\"messages\": [{\"role\": \"Developer\", \"content\": \"be brief\"}, {\"role\":"
     " \"USER\", \"content\": \"hi\"}, {\"role\": \"Assistant\", \"content\": null,"
     " \"tool_calls\": [{\"id\": \"c1\", \"function\": {\"name\": \"f\", \"arguments\":"
     " \"{}\"}}]}, {\"role\": \"Tool\", \"tool_call_id\": \"c1\", \"content\": \"1\"}]}", 200,
     "{\"messages\": [{\"role\": \"system\", \"content\": \"be brief\"}, " USER ","
     " {\"role\": \"assistant\", \"content\": \"\", \"tool_calls\": [{\"id\": \"c1\","
     " \"function\": {\"index\": 0, \"name\": \"f\", \"arguments\": {}}}]},"
     " {\"role\": \"tool\", \"content\": \"1\", \"tool_call_id\": \"c1\", \"tool_name\": \"f\"}]}"},
    {"null content is empty",
     "{" M "\"messages\": [{\"role\": \"assistant\", \"content\": null}]}", 200,
     "{\"messages\": [{\"role\": \"assistant\", \"content\": \"\"}]}"},
    {"each text part a message",
     "{" M "\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"a\"},"
     " {\"type\": \"text\", \"text\": \"b\"}]}]}", 200,
     "{\"messages\": [{\"role\": \"user\", \"content\": \"a\"}, {\"role\": \"user\","
     " \"content\": \"b\"}]}"},
    {"no parts is an empty message",
     "{" M "\"messages\": [{\"role\": \"user\", \"content\": []}]}", 200,
     "{\"messages\": [{\"role\": \"user\", \"content\": \"\"}]}"},
    {"reasoning is thinking",
     "{" M "\"messages\": [{\"role\": \"assistant\", \"content\": \"a\", \"reasoning\": \"r\"}]}",
     200, "{\"messages\": [{\"role\": \"assistant\", \"content\": \"a\", \"thinking\": \"r\"}]}"},
    {"tool calls and their results",
     "{" M "\"messages\": [{\"role\": \"assistant\", \"content\": null, \"tool_calls\": [{\"id\":"
     " \"call_1\", \"type\": \"function\", \"function\": {\"name\": \"f\", \"arguments\":"
     " \"{\\\"x\\\": 1}\"}}]}, {\"role\": \"tool\", \"tool_call_id\": \"call_1\", \"content\":"
     " \"42\"}]}",
     200,
     "{\"messages\": [{\"role\": \"assistant\", \"content\": \"\", \"tool_calls\": [{\"id\":"
     " \"call_1\", \"function\": {\"index\": 0, \"name\": \"f\", \"arguments\": {\"x\": 1}}}]},"
     " {\"role\": \"tool\", \"content\": \"42\", \"tool_call_id\": \"call_1\", \"tool_name\":"
     " \"f\"}]}"},
    {"a tool result's own name wins",
     "{" M "\"messages\": [{\"role\": \"tool\", \"tool_call_id\": \"c\", \"name\": \"g\","
     " \"content\": \"1\"}]}", 200,
     "{\"messages\": [{\"role\": \"tool\", \"content\": \"1\", \"tool_call_id\": \"c\","
     " \"tool_name\": \"g\"}]}"},
    {"a tool result's parts are one message, its text joined by newlines",
     "{" M "\"messages\": [{\"role\": \"assistant\", \"content\": null, \"tool_calls\": [{\"id\":"
     " \"c\", \"function\": {\"name\": \"f\", \"arguments\": \"{}\"}}]}, {\"role\": \"tool\","
     " \"tool_call_id\": \"c\", \"content\": [{\"type\": \"text\", \"text\": \"a\"}, {\"type\":"
     " \"image_url\", \"image_url\": {\"url\": \"data:image/png;base64,aGk=\"}}, {\"type\":"
     " \"text\", \"text\": \"b\"}]}]}", 200,
     "{\"messages\": [{\"role\": \"assistant\", \"content\": \"\", \"tool_calls\": [{\"id\":"
     " \"c\", \"function\": {\"index\": 0, \"name\": \"f\", \"arguments\": {}}}]},"
     " {\"role\": \"tool\", \"content\": \"a\\nb\", \"tool_call_id\": \"c\", \"tool_name\":"
     " \"f\", \"images\": [\"aGk=\"]}]}"},
    {"a tool result's part of another type",
     "{" M "\"messages\": [{\"role\": \"tool\", \"content\": [{\"type\": \"file\"}]}]}", 400,
     "messages[0].content[0]: file input is not supported yet"},
    {"sampling fields are options",
     "{" M HI ", \"temperature\": 0.2, \"top_p\": 0.9, \"seed\": 7, \"frequency_penalty\": 0.1,"
     " \"presence_penalty\": 0.3, \"max_tokens\": 5, \"stop\": \"x\"}", 200,
     "{\"options\": {\"temperature\": 0.2, \"top_p\": 0.9, \"seed\": 7, \"frequency_penalty\":"
     " 0.1, \"presence_penalty\": 0.3, \"num_predict\": 5, \"stop\": [\"x\"]}}"},
    {"max_completion_tokens over max_tokens",
     "{" M HI ", \"max_tokens\": 5, \"max_completion_tokens\": 9, \"stop\": [\"a\", \"b\"]}", 200,
     "{\"options\": {\"num_predict\": 9, \"stop\": [\"a\", \"b\"]}}"},
    {"tools", "{" M HI ", \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\"}}]}",
     200, "{\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\"}}]}"},
    {"tool_choice none withholds the tools",
     "{" M HI ", \"tool_choice\": \"none\", \"tools\": [{\"type\": \"function\", \"function\":"
     " {\"name\": \"f\"}}]}", 200, "{\"tools\": null}"},
    {"tool_choice auto leaves the choice to the model",
     "{" M HI ", \"tool_choice\": \"auto\", \"tools\": [" FN "]}", 200,
     "{\"tool_choice\": \"auto\", \"tool_choice_name\": null}"},
    {"tool_choice required forces a call",
     "{" M HI ", \"tool_choice\": \"required\", \"tools\": [" FN "]}", 200,
     "{\"tool_choice\": \"required\", \"tools\": [" FN "]}"},
    {"tool_choice naming a function forces a call of it",
     "{" M HI ", \"tool_choice\": {\"type\": \"function\", \"function\": {\"name\": \"f\"}},"
     " \"tools\": [" FN "], \"parallel_tool_calls\": false}", 200,
     "{\"tool_choice\": \"named\", \"tool_choice_name\": \"f\"}"},
    {"tool_choice of an unknown kind", "{" M HI ", \"tool_choice\": \"always\"}", 400,
     "tool_choice must be \"none\", \"auto\", \"required\" or"},
    {"tool_choice function without a name",
     "{" M HI ", \"tool_choice\": {\"type\": \"function\", \"function\": {}}}", 400,
     "tool_choice must be"},
    {"reasoning_effort none is think off", "{" M HI ", \"reasoning_effort\": \"none\"}", 200,
     "{\"think\": false}"},
    {"reasoning_effort minimal is low", "{" M HI ", \"reasoning_effort\": \"minimal\"}", 200,
     "{\"think\": \"low\"}"},
    {"reasoning_effort xhigh is max", "{" M HI ", \"reasoning_effort\": \"xhigh\"}", 200,
     "{\"think\": \"max\"}"},
    {"reasoning_effort ultra, a client's tier above xhigh, is max",
     "{" M HI ", \"reasoning_effort\": \"ultra\"}", 200,
     "{\"think\": \"max\"}"},
    {"reasoning.effort", "{" M HI ", \"reasoning\": {\"effort\": \"high\"}}", 200,
     "{\"think\": \"high\"}"},
    {"response_format json_object", "{" M HI ", \"response_format\": {\"type\": \"json_object\"}}",
     200, "{\"format\": \"json\"}"},
    {"response_format json_schema",
     "{" M HI ", \"response_format\": {\"type\": \"json_schema\", \"json_schema\": {\"name\":"
     " \"x\", \"schema\": {\"type\": \"object\"}}}}", 200, "{\"format\": {\"type\": \"object\"}}"},
    {"response_format text", "{" M HI ", \"response_format\": {\"type\": \"text\"}}", 200,
     "{\"format\": null}"},
    {"response_format's type trimmed and in any case, as ollama reads it",
     "{" M HI ", \"response_format\": {\"type\": \" JSON_Object\\n\"}}", 200,
     "{\"format\": \"json\"}"},
    {"reasoning.effort wins over reasoning_effort, as in ollama",
     "{" M HI ", \"reasoning_effort\": \"low\", \"reasoning\": {\"effort\": \"high\"}}", 200,
     "{\"think\": \"high\"}"},
    {"a reasoning object without an effort leaves thinking at the model's default",
     "{" M HI ", \"reasoning_effort\": \"low\", \"reasoning\": {}}", 200, "{\"think\": null}"},
    {"logprobs", "{" M HI ", \"logprobs\": true, \"top_logprobs\": 3}", 200,
     "{\"logprobs\": true, \"top_logprobs\": 3}"},
    {"no messages", "{" M "\"messages\": []}", 400, "[] is too short - 'messages'"},
    {"messages not an array", "{" M "\"messages\": {}}", 400, "messages must be an array"},
    {"a message without a role", "{" M "\"messages\": [{\"content\": \"a\"}]}", 400,
     "messages[0].role must be a string"},
    {"content a number", "{" M "\"messages\": [{\"role\": \"user\", \"content\": 1}]}", 400,
     "messages[0].content must be a string or an array"},
    {"an image part, a message of its own with the data URL's base64",
     "{" M "\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"image_url\","
     " \"image_url\": {\"url\": \"data:image/png;base64,aGk=\"}}, {\"type\": \"text\","
     " \"text\": \"what\"}]}]}", 200,
     "{\"messages\": [{\"role\": \"user\", \"content\": \"\", \"images\": [\"aGk=\"]},"
     " {\"role\": \"user\", \"content\": \"what\"}]}"},
    {"image_url as a string",
     "{" M "\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"image_url\","
     " \"image_url\": \"data:image/jpeg;base64,eW8=\"}]}]}", 200,
     "{\"messages\": [{\"role\": \"user\", \"content\": \"\", \"images\": [\"eW8=\"]}]}"},
    {"a remote image URL",
     "{" M "\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"image_url\","
     " \"image_url\": {\"url\": \"https://example.com/a.png\"}}]}]}", 400,
     "messages[0].content[0]: image URLs are not currently supported, please use base64"
     " encoded data instead"},
    {"a data URL without base64",
     "{" M "\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"image_url\","
     " \"image_url\": {\"url\": \"data:image/png,abc\"}}]}]}", 400,
     "messages[0].content[0]: invalid image input"},
    {"a tool result's remote image, refused as a message's is",
     "{" M "\"messages\": [{\"role\": \"tool\", \"tool_call_id\": \"c\", \"content\": [{\"type\":"
     " \"image_url\", \"image_url\": \"http://example.com/a.png\"}]}]}", 400,
     "messages[0].content[0]: image URLs are not currently supported"},
    {"a tool result's image_url without a url",
     "{" M "\"messages\": [{\"role\": \"tool\", \"tool_call_id\": \"c\", \"content\": [{\"type\":"
     " \"image_url\", \"image_url\": 3}]}]}", 400, "messages[0].content[0]: invalid message format"},
    {"an image_url without a url",
     "{" M "\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"image_url\","
     " \"image_url\": {}}]}]}", 400, "messages[0].content[0]: invalid message format"},
    {"an audio part is a message of its own with the clip, as an image part",
     "{" M "\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\":"
     " \"hear\"}, {\"type\": \"input_audio\", \"input_audio\": {\"data\": \"UklGRg==\","
     " \"format\": \"wav\"}}, {\"type\": \"input_audio\", \"input_audio\": {\"data\":"
     " \"SUQz\", \"format\": \"mp3\"}}]}]}", 200,
     "{\"messages\": [{\"role\": \"user\", \"content\": \"hear\"}, {\"role\": \"user\","
     " \"content\": \"\", \"images\": [\"UklGRg==\"]}, {\"role\": \"user\", \"content\": \"\","
     " \"images\": [\"SUQz\"]}]}"},
    {"an audio part without its format, as ollama reads none",
     "{" M "\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"input_audio\","
     " \"input_audio\": {\"data\": \"UklGRg==\"}}]}]}", 200,
     "{\"messages\": [{\"role\": \"user\", \"content\": \"\", \"images\": [\"UklGRg==\"]}]}"},
    {"a tool result's audio part goes with its text",
     "{" M "\"messages\": [{\"role\": \"tool\", \"tool_call_id\": \"c\", \"content\": [{\"type\":"
     " \"text\", \"text\": \"a\"}, {\"type\": \"input_audio\", \"input_audio\": {\"data\":"
     " \"SUQz\", \"format\": \"mp3\"}}]}]}", 200,
     "{\"messages\": [{\"role\": \"tool\", \"content\": \"a\", \"tool_call_id\": \"c\","
     " \"images\": [\"SUQz\"]}]}"},
    {"an audio part without input_audio",
     "{" M "\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"input_audio\"}]}]}",
     400, "messages[0].content[0]: invalid input_audio format"},
    {"an audio part without data",
     "{" M "\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"input_audio\","
     " \"input_audio\": {\"format\": \"wav\"}}]}]}",
     400, "messages[0].content[0]: invalid input_audio format: missing data"},
    {"an audio part in a format OpenAI does not define",
     "{" M "\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"input_audio\","
     " \"input_audio\": {\"data\": \"ZkxhQw==\", \"format\": \"flac\"}}]}]}",
     400, "messages[0].content[0]: unsupported input_audio format \"flac\": expected \"wav\" or"
     " \"mp3\""},
    {"a tool result's audio part whose format is not a string",
     "{" M "\"messages\": [{\"role\": \"tool\", \"content\": [{\"type\": \"input_audio\","
     " \"input_audio\": {\"data\": \"ZkxhQw==\", \"format\": 3}}]}]}",
     400, "messages[0].content[0]: input_audio format must be \"wav\" or \"mp3\""},
    {"a text part without text",
     "{" M "\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"text\"}]}]}", 400,
     "messages[0].content[0].text must be a string"},
    {"tool call arguments that are not JSON",
     "{" M "\"messages\": [{\"role\": \"assistant\", \"tool_calls\": [{\"function\": {\"name\":"
     " \"f\", \"arguments\": \"{oops\"}}]}]}", 400,
     "messages[0].tool_calls[0]: function.name must be a string and function.arguments a JSON"
     " object"},
    {"n past 1", "{" M HI ", \"n\": 2}", 400, "n must be 1"},
    {"stop a number", "{" M HI ", \"stop\": 1}", 400, "stop must be a string or an array"},
    {"max_tokens 0", "{" M HI ", \"max_tokens\": 0}", 400, "max_tokens must be between 1 and"},
    {"tools not an array", "{" M HI ", \"tools\": {}}", 400, "tools must be an array"},
    {"an unknown reasoning_effort", "{" M HI ", \"reasoning_effort\": \"lots\"}", 400,
     "reasoning_effort must be none, minimal, low, medium, high, xhigh, ultra or max"},
    {"json_schema without a schema",
     "{" M HI ", \"response_format\": {\"type\": \"json_schema\", \"json_schema\": {}}}", 400,
     "response_format.json_schema.schema must be an object"},
    {"an unknown response_format",
     "{" M HI ", \"response_format\": {\"type\": \"yaml\"}}", 400,
     "response_format.type must be text, json_object or json_schema"},
    {"top_logprobs past 20", "{" M HI ", \"top_logprobs\": 21}", 400,
     "top_logprobs must be between 0 and 20"},
};

static const parse_case completion_cases[] = {
    {"a prompt", "{" M "\"prompt\": \"once\"}", 200,
     "{\"model\": \"m\", \"chat\": false, \"prompt\": \"once\", \"suffix\": null,"
     " \"stream\": false, \"options\": {}}"},
    {"fill in the middle", "{" M "\"prompt\": \"a\", \"suffix\": \"c\", \"max_tokens\": 4}", 200,
     "{\"prompt\": \"a\", \"suffix\": \"c\", \"options\": {\"num_predict\": 4}}"},
    {"no prompt", "{" M "\"max_tokens\": 4}", 400, "prompt must be a string"},
    {"logprobs: how many alternatives, the legacy API's way",
     "{" M "\"prompt\": \"a\", \"logprobs\": 2}", 200,
     "{\"logprobs\": true, \"top_logprobs\": 2}"},
    {"no logprobs", "{" M "\"prompt\": \"a\"}", 200, "{\"logprobs\": false}"},
    {"logprobs a bool", "{" M "\"prompt\": \"a\", \"logprobs\": true}", 400,
     "logprobs must be an integer"},
    {"logprobs past 20", "{" M "\"prompt\": \"a\", \"logprobs\": 21}", 400, "logprobs"},
    {"suffix a number", "{" M "\"prompt\": \"a\", \"suffix\": 1}", 400,
     "suffix must be a string"},
};

static void test_chat_requests(void **state)
{
    (void)state;
    api_run_parse_cases(chat_cases, sizeof chat_cases / sizeof chat_cases[0], parse_chat);
}

static void test_completion_requests(void **state)
{
    (void)state;
    api_run_parse_cases(completion_cases, sizeof completion_cases / sizeof completion_cases[0],
                        parse_completion);
}

#define DONE "{\"done_reason\": \"stop\", \"prompt_eval_count\": 7, \"eval_count\": 3}"

static generation_info info_for(const char *body, bool chat)
{
    json_t *b = api_json(body);
    generation_info info = {.model = "m", .chat = chat, .state = openai_answer_create(b, chat)};
    json_decref(b);
    assert_non_null(info.state);
    return info;
}

/* A chat.completion: the message with reasoning, the finish reason, usage. */
static void test_whole_chat(void **state)
{
    (void)state;
    generation_info info = info_for("{\"model\": \"m\"}", true);
    generation_delta answer = {.content = "hi", .content_len = 2, .thinking = "hmm",
                               .thinking_len = 3};
    json_t *got = api_shape_whole(&openai_shape, &info, DONE, &answer);
    json_t *want = api_json(
        "{\"object\": \"chat.completion\", \"model\": \"m\", \"system_fingerprint\": \"fp_corral\","
        " \"choices\": [{\"index\": 0, \"finish_reason\": \"stop\", \"message\": {\"role\":"
        " \"assistant\", \"content\": \"hi\", \"reasoning\": \"hmm\"}, \"logprobs\": null}],"
        " \"usage\": {\"prompt_tokens\": 7, \"completion_tokens\": 3, \"total_tokens\": 10,"
        " \"prompt_tokens_details\": {\"cached_tokens\": 0}}}");
    api_expect_subset(want, got, "chat.completion");
    assert_non_null(strstr(json_string_value(json_object_get(got, "id")), "chatcmpl-"));
    json_decref(got);
    json_decref(want);

    /* tool calls: each with its index, as ollama's, their arguments as JSON text, and
     * finish_reason tool_calls */
    json_t *calls = api_json("[{\"id\": \"call_1\", \"function\": {\"index\": 0, \"name\": \"f\","
                             " \"arguments\": {\"x\": 1}}}, {\"id\": \"call_2\", \"function\":"
                             " {\"index\": 1, \"name\": \"g\", \"arguments\": {}}}]");
    generation_delta called = {.content = "", .thinking = "", .tool_calls = calls};
    info.n_tool_calls = 2;
    got = api_shape_whole(&openai_shape, &info, DONE, &called);
    want = api_json("[{\"index\": 0, \"finish_reason\": \"tool_calls\", \"message\": {\"role\":"
                    " \"assistant\", \"content\": \"\", \"tool_calls\": [{\"id\": \"call_1\","
                    " \"index\": 0, \"type\": \"function\", \"function\": {\"name\": \"f\","
                    " \"arguments\": \"{\\\"x\\\":1}\"}}, {\"id\": \"call_2\", \"index\": 1,"
                    " \"type\": \"function\", \"function\": {\"name\": \"g\", \"arguments\":"
                    " \"{}\"}}]}, \"logprobs\": null}]");
    assert_true(json_equal(want, json_object_get(got, "choices")));
    json_decref(got);
    json_decref(want);
    /* cut at the token limit after a call: length, as OpenAI says it */
    got = api_shape_whole(&openai_shape, &info, "{\"done_reason\": \"length\"}", &called);
    assert_string_equal(json_string_value(json_object_get(
                            json_array_get(json_object_get(got, "choices"), 0), "finish_reason")),
                        "length");
    json_decref(got);
    json_decref(calls);
    free(info.state);
}

/* A text_completion, cut at the token limit; usage counts the whole prompt, the tokens the
 * runner found cached too (the context less the answer), not only those it evaluated. */
static void test_whole_completion(void **state)
{
    (void)state;
    generation_info info = info_for("{\"model\": \"m\"}", false);
    generation_delta answer = {.content = "once", .content_len = 4, .thinking = ""};
    json_t *got = api_shape_whole(&openai_shape, &info,
                                  "{\"done_reason\": \"length\", \"prompt_eval_count\": 1,"
                                  " \"eval_count\": 2, \"tokens\": [1, 2, 3, 4, 5]}", &answer);
    json_t *want = api_json("{\"object\": \"text_completion\", \"choices\": [{\"index\": 0,"
                            " \"finish_reason\": \"length\", \"text\": \"once\", \"logprobs\":"
                            " null}], \"usage\": {\"prompt_tokens\": 3, \"completion_tokens\": 2,"
                            " \"total_tokens\": 5, \"prompt_tokens_details\": {\"cached_tokens\":"
                            " 2}}}");
    api_expect_subset(want, got, "text_completion");
    json_decref(got);
    json_decref(want);

    /* a completion whose model's parser read a call still just stops, as ollama's do */
    info.n_tool_calls = 1;
    got = api_shape_whole(&openai_shape, &info, "{\"done_reason\": \"stop\"}", &answer);
    want = api_json("{\"choices\": [{\"index\": 0, \"finish_reason\": \"stop\", \"text\":"
                    " \"once\", \"logprobs\": null}]}");
    api_expect_subset(want, got, "a completion's calls");
    json_decref(got);
    json_decref(want);
    free(info.state);

    /* logprobs (the legacy API's shape): each token's first character counted from the start
     * of the prompt ("H\u00e9": 2 characters, 3 bytes), its alternatives as {token: logprob} */
    info = info_for("{\"model\": \"m\", \"prompt\": \"H\\u00e9\"}", false);
    info.logprobs = true;
    json_t *lps = api_json(
        "[{\"token\": \" \\u00e9t\\u00e9\", \"logprob\": -0.5, \"top_logprobs\": [{\"token\":"
        " \" \\u00e9t\\u00e9\", \"logprob\": -0.5}, {\"token\": \"!\", \"logprob\": -1.5}]},"
        " {\"token\": \"!\", \"logprob\": -0.25, \"top_logprobs\": [{\"token\": \"!\","
        " \"logprob\": -0.25}]}]");
    generation_delta scored = {.content = " \xc3\xa9t\xc3\xa9!", .content_len = 7,
                               .thinking = "", .logprobs = lps};
    got = api_shape_whole(&openai_shape, &info, "{\"done_reason\": \"stop\"}", &scored);
    want = api_json("{\"tokens\": [\" \\u00e9t\\u00e9\", \"!\"], \"token_logprobs\": [-0.5, -0.25],"
                    " \"top_logprobs\": [{\" \\u00e9t\\u00e9\": -0.5, \"!\": -1.5}, {\"!\": -0.25}],"
                    " \"text_offset\": [2, 6]}");
    json_t *choice = json_array_get(json_object_get(got, "choices"), 0);
    assert_true(json_equal(want, json_object_get(choice, "logprobs")));
    json_decref(got);
    json_decref(want);
    json_decref(lps);
    free(info.state);
}

/* A stream: data lines of chat.completion.chunk, the role first, the finish reason last, a
 * usage chunk when asked for, then [DONE]. */
static void test_stream(void **state)
{
    (void)state;
    generation_info info =
        info_for("{\"model\": \"m\", \"stream_options\": {\"include_usage\": true}}", true);
    generation_delta pieces[] = {{.content = "a", .content_len = 1, .thinking = ""},
                                 {.content = "b", .content_len = 1, .thinking = ""}};
    char *text = api_shape_stream(&openai_shape, &info, pieces, 2, DONE);
    const char *event = text;
    const char *want[] = {
        "{\"object\": \"chat.completion.chunk\", \"choices\": [{\"index\": 0, \"finish_reason\":"
        " null, \"delta\": {\"role\": \"assistant\", \"content\": \"a\"}}], \"usage\": null}",
        "{\"choices\": [{\"index\": 0, \"finish_reason\": null, \"delta\": {\"content\":"
        " \"b\"}}]}",
        "{\"choices\": [{\"index\": 0, \"finish_reason\": \"stop\", \"delta\": {}}]}",
        "{\"choices\": [], \"usage\": {\"prompt_tokens\": 7, \"completion_tokens\": 3,"
        " \"total_tokens\": 10, \"prompt_tokens_details\": {\"cached_tokens\": 0}}}",
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        assert_memory_equal(event, "data: ", 6);
        const char *end = strstr(event, "\n\n");
        assert_non_null(end);
        char *line = strndup(event + 6, (size_t)(end - event - 6));
        json_t *got = api_json(line), *w = api_json(want[i]);
        api_expect_subset(w, got, want[i]);
        json_decref(got);
        json_decref(w);
        free(line);
        event = end + 2;
    }
    assert_string_equal(event, "data: [DONE]\n\n");
    free(text);
    free(info.state);
}

/* The deltas of a stream's chunks before its finish chunk. */
static json_t *stream_deltas(const char *text)
{
    json_t *deltas = json_array();
    for (const char *event = text; strncmp(event, "data: {", 7) == 0;) {
        const char *end = strstr(event, "\n\n");
        assert_non_null(end);
        char *line = strndup(event + 6, (size_t)(end - event - 6));
        json_t *chunk = api_json(line);
        json_t *choice = json_array_get(json_object_get(chunk, "choices"), 0);
        if (json_is_null(json_object_get(choice, "finish_reason")))
            json_array_append(deltas, json_object_get(choice, "delta"));
        json_decref(chunk);
        free(line);
        event = end + 2;
    }
    return deltas;
}

/* A piece with both thinking and an answer is two chunks, the reasoning first, as ollama
 * streams it; one with thinking alone stays one. Every delta but the reasoning half of a
 * split piece carries content, "" when there is none, as ollama's do. */
#define CALL_ABC                                                                           \
    "{\"index\": 0, \"id\": \"call_abc\", \"type\": \"function\", \"function\": {\"name\":" \
    " \"f\", \"arguments\": \"{}\"}}"

static void test_stream_splits_thinking(void **state)
{
    (void)state;
    generation_info info = info_for("{\"model\": \"m\"}", true);
    json_t *calls = api_json("[{\"id\": \"call_abc\", \"function\": {\"index\": 0, "
                             "\"name\": \"f\", \"arguments\": {}}}]");
    generation_delta pieces[] = {
        {.content = "", .thinking = "hm", .thinking_len = 2},
        {.content = "a", .content_len = 1, .thinking = "\"\\", .thinking_len = 2},
        {.content = "", .thinking = "t", .thinking_len = 1, .tool_calls = calls},
        {.content = "", .thinking = "", .tool_calls = calls},
    };
    char *text = api_shape_stream(&openai_shape, &info, pieces, 4, DONE);
    json_t *got = stream_deltas(text);
    json_t *want = api_json(
        "[{\"role\": \"assistant\", \"content\": \"\", \"reasoning\": \"hm\"},"
        " {\"reasoning\": \"\\\"\\\\\"}, {\"content\": \"a\"}, {\"reasoning\": \"t\"},"
        " {\"content\": \"\", \"tool_calls\": [" CALL_ABC "]},"
        " {\"content\": \"\", \"tool_calls\": [" CALL_ABC "]}]");
    if (!json_equal(got, want)) {
        char *dump = json_dumps(got, JSON_SORT_KEYS);
        fail_msg("deltas: %s", dump);
    }
    json_decref(want);
    json_decref(got);
    json_decref(calls);
    free(text);
    free(info.state);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chat_requests),
        cmocka_unit_test(test_completion_requests),
        cmocka_unit_test(test_whole_chat),
        cmocka_unit_test(test_whole_completion),
        cmocka_unit_test(test_stream),
        cmocka_unit_test(test_stream_splits_thinking),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * OpenAI's /v1/responses as the typed request (api/responses.c), field by field and refusal
 * by refusal, and the Responses shapes: the response object with its output items (reasoning,
 * message, function calls) and the request's settings, and the numbered events of a stream.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "api_fixture.h"
#include "server/api/responses.h"

#define M "\"model\": \"m\", "
#define USER "{\"role\": \"user\", \"content\": \"hi\"}"

/* a namespace tool holding inner */
#define NS(inner) "{\"type\": \"namespace\", \"name\": \"a\", \"tools\": [" inner "]}"

static const parse_case cases[] = {
    {"input a string", "{" M "\"input\": \"hi\"}", 200,
     "{\"model\": \"m\", \"chat\": true, \"messages\": [" USER "], \"stream\": false,"
     " \"options\": {}, \"tools\": null, \"think\": null, \"format\": null}"},
    {"stream", "{" M "\"input\": \"hi\", \"stream\": true}", 200, "{\"stream\": true}"},
    {"instructions are a system message", "{" M "\"instructions\": \"be brief\", \"input\": \"hi\"}",
     200, "{\"messages\": [{\"role\": \"system\", \"content\": \"be brief\"}, " USER "]}"},
    {"empty instructions make no system message, as in ollama (the model's own stays)",
     "{" M "\"instructions\": \"\", \"input\": \"hi\"}", 200, "{\"messages\": [" USER "]}"},
    {"sampling fields are options",
     "{" M "\"input\": \"hi\", \"temperature\": 0.5, \"top_p\": 0.9, \"max_output_tokens\": 8}",
     200, "{\"options\": {\"temperature\": 0.5, \"top_p\": 0.9, \"num_predict\": 8}}"},
    {"message items, a message's parts one message with their text joined as ollama joins it",
     "{" M "\"input\": [{\"role\": \"developer\", \"content\": \"s\"}, {\"type\": \"message\","
     " \"role\": \"user\", \"content\": [{\"type\": \"input_text\", \"text\": \"a\"},"
     " {\"type\": \"input_text\", \"text\": \"b\"}]}]}", 200,
     "{\"messages\": [{\"role\": \"system\", \"content\": \"s\"}, {\"role\": \"user\","
     " \"content\": \"ab\"}]}"},
    {"an assistant's parts after its reasoning: one turn with the thinking",
     "{" M "\"input\": [" USER ", {\"type\": \"reasoning\", \"summary\": [{\"type\":"
     " \"summary_text\", \"text\": \"t\"}]}, {\"role\": \"assistant\", \"content\":"
     " [{\"type\": \"output_text\", \"text\": \"a\"}, {\"type\": \"output_text\","
     " \"text\": \"b\"}]}]}", 200,
     "{\"messages\": [" USER ", {\"role\": \"assistant\", \"content\": \"ab\", \"thinking\":"
     " \"t\"}]}"},
    {"an assistant message replayed between a call and its output joins the call's turn",
     "{" M "\"input\": [" USER ", {\"type\": \"function_call\", \"call_id\": \"c1\", \"name\":"
     " \"f\", \"arguments\": \"{}\"}, {\"role\": \"assistant\", \"content\": [{\"type\":"
     " \"output_text\", \"text\": \"looking\"}]}, {\"type\": \"function_call_output\","
     " \"call_id\": \"c1\", \"output\": \"/tmp\"}]}", 200,
     "{\"messages\": [" USER ", {\"role\": \"assistant\", \"content\": \"looking\","
     " \"tool_calls\": [{\"id\": \"c1\", \"function\": {\"index\": 0, \"name\": \"f\","
     " \"arguments\": {}}}]}, {\"role\": \"tool\", \"content\": \"/tmp\", \"tool_call_id\":"
     " \"c1\", \"tool_name\": \"f\"}]}"},
    {"an assistant message after a call that no output follows is a turn of its own",
     "{" M "\"input\": [" USER ", {\"type\": \"function_call\", \"call_id\": \"c1\", \"name\":"
     " \"f\", \"arguments\": \"{}\"}, {\"role\": \"assistant\", \"content\": \"done\"}]}",
     200,
     "{\"messages\": [" USER ", {\"role\": \"assistant\", \"content\": \"\", \"tool_calls\":"
     " [{\"id\": \"c1\", \"function\": {\"index\": 0, \"name\": \"f\", \"arguments\": {}}}]},"
     " {\"role\": \"assistant\", \"content\": \"done\"}]}"},
    {"a function_call with empty or no arguments calls with none, as ollama reads it",
     "{" M "\"input\": [{\"type\": \"function_call\", \"call_id\": \"c1\", \"name\": \"f\","
     " \"arguments\": \"\"}, {\"type\": \"function_call\", \"call_id\": \"c2\", \"name\":"
     " \"g\"}]}", 200,
     "{\"messages\": [{\"role\": \"assistant\", \"content\": \"\", \"tool_calls\":"
     " [{\"id\": \"c1\", \"function\": {\"index\": 0, \"name\": \"f\", \"arguments\": {}}},"
     " {\"id\": \"c2\", \"function\": {\"index\": 1, \"name\": \"g\", \"arguments\": {}}}]}]}"},
    {"a function_call whose arguments are no string",
     "{" M "\"input\": [{\"type\": \"function_call\", \"name\": \"f\", \"arguments\": 1}]}",
     400, "input[0]: a function_call needs a name and arguments that are a JSON object"},
    {"reasoning with an empty summary: its reasoning_text, never its encrypted_content",
     "{" M "\"input\": [" USER ", {\"type\": \"reasoning\", \"summary\": [], \"content\":"
     " [{\"type\": \"reasoning_text\", \"text\": \"raw\"}], \"encrypted_content\": \"gAAA\"},"
     " {\"type\": \"message\", \"role\": \"assistant\", \"content\": [{\"type\":"
     " \"output_text\", \"text\": \"ok\"}]}, {\"type\": \"reasoning\", \"summary\": [],"
     " \"encrypted_content\": \"gAAA\"}, " USER "]}", 200,
     "{\"messages\": [" USER ", {\"role\": \"assistant\", \"content\": \"ok\", \"thinking\":"
     " \"raw\"}, " USER "]}"},
    {"reasoning, a function call and its output",
     "{" M "\"input\": [" USER ", {\"type\": \"reasoning\", \"summary\": [{\"type\":"
     " \"summary_text\", \"text\": \"t\"}]}, {\"type\": \"function_call\", \"call_id\": \"c1\","
     " \"name\": \"f\", \"arguments\": \"{\\\"x\\\": 1}\"}, {\"type\": \"function_call_output\","
     " \"call_id\": \"c1\", \"output\": \"42\"}]}",
     200,
     "{\"messages\": [" USER ", {\"role\": \"assistant\", \"content\": \"\", \"thinking\": \"t\","
     " \"tool_calls\": [{\"id\": \"c1\", \"function\": {\"index\": 0, \"name\": \"f\","
     " \"arguments\": {\"x\": 1}}}]}, {\"role\": \"tool\", \"content\": \"42\", \"tool_call_id\":"
     " \"c1\", \"tool_name\": \"f\"}]}"},
    {"function tools",
     "{" M "\"input\": \"hi\", \"tools\": [{\"type\": \"function\", \"name\": \"f\","
     " \"description\": \"d\", \"parameters\": {\"type\": \"object\"}}]}", 200,
     "{\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", \"description\": \"d\","
     " \"parameters\": {\"type\": \"object\"}}}]}"},
    {"a tool without a description has none (a template printing tools shows no null)",
     "{" M "\"input\": \"hi\", \"tools\": [{\"type\": \"function\", \"name\": \"f\","
     " \"parameters\": {\"type\": \"object\"}}]}", 200,
     "{\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\","
     " \"parameters\": {\"type\": \"object\"}}}]}"},
    {"tool_choice none withholds the tools",
     "{" M "\"input\": \"hi\", \"tool_choice\": \"none\", \"tools\": [{\"type\": \"function\","
     " \"name\": \"f\"}]}", 200, "{\"tools\": null}"},
    {"tool_choice auto leaves the choice to the model",
     "{" M "\"input\": \"hi\", \"tool_choice\": \"auto\", \"tools\": [{\"type\": \"function\", \"name\": \"f\"}]}", 200,
     "{\"tool_choice\": \"auto\", \"tool_choice_name\": null}"},
    {"tool_choice required forces a call",
     "{" M "\"input\": \"hi\", \"tool_choice\": \"required\", \"tools\": [{\"type\": \"function\", \"name\": \"f\"}]}", 200,
     "{\"tool_choice\": \"required\"}"},
    {"tool_choice naming a function forces a call of it",
     "{" M "\"input\": \"hi\", \"tool_choice\": {\"type\": \"function\", \"name\": \"f\"},"
     " \"tools\": [{\"type\": \"function\", \"name\": \"f\"}], \"parallel_tool_calls\": false}", 200,
     "{\"tool_choice\": \"named\", \"tool_choice_name\": \"f\"}"},
    {"tool_choice of a kind Corral cannot force",
     "{" M "\"input\": \"hi\", \"tool_choice\": {\"type\": \"file_search\"}}", 400,
     "tool_choice must be \"none\", \"auto\", \"required\" or"},
    {"reasoning.effort", "{" M "\"input\": \"hi\", \"reasoning\": {\"effort\": \"low\"}}", 200,
     "{\"think\": \"low\"}"},
    {"text.format json_schema",
     "{" M "\"input\": \"hi\", \"text\": {\"format\": {\"type\": \"json_schema\", \"name\": \"x\","
     " \"schema\": {\"type\": \"object\"}}}}", 200, "{\"format\": {\"type\": \"object\"}}"},
    {"text.format json_object",
     "{" M "\"input\": \"hi\", \"text\": {\"format\": {\"type\": \"json_object\"}}}", 200,
     "{\"format\": \"json\"}"},
    {"previous_response_id", "{" M "\"input\": \"hi\", \"previous_response_id\": \"resp_1\"}", 400,
     "previous_response_id is not supported"},
    {"no input items", "{" M "\"input\": []}", 400, "input: at least one item is required"},
    {"input a number", "{" M "\"input\": 1}", 400, "input must be a string or an array"},
    {"content a number", "{" M "\"input\": [{\"role\": \"user\", \"content\": 1}]}", 400,
     "input[0].content must be a string or an array"},
    {"an image part, an image of its message, as ollama makes it",
     "{" M "\"input\": [{\"role\": \"user\", \"content\": [{\"type\": \"input_image\","
     " \"image_url\": \"data:image/png;base64,aGk=\"}, {\"type\": \"input_text\", \"text\":"
     " \"what\"}]}]}", 200,
     "{\"messages\": [{\"role\": \"user\", \"content\": \"what\", \"images\": [\"aGk=\"]}]}"},
    {"an image part without image_url is passed over, as in ollama",
     "{" M "\"input\": [{\"role\": \"user\", \"content\": [{\"type\": \"input_image\","
     " \"file_id\": \"file-1\"}, {\"type\": \"input_image\", \"image_url\": \"\"},"
     " {\"type\": \"input_image\", \"image_url\": null}, {\"type\": \"input_text\","
     " \"text\": \"what\"}]}]}", 200,
     "{\"messages\": [{\"role\": \"user\", \"content\": \"what\"}]}"},
    {"an image part with image_url not a URL",
     "{" M "\"input\": [{\"role\": \"user\", \"content\": [{\"type\": \"input_image\","
     " \"image_url\": 3}]}]}", 400, "input[0].content[0]: invalid message format"},
    {"a remote image",
     "{" M "\"input\": [{\"role\": \"user\", \"content\": [{\"type\": \"input_image\","
     " \"image_url\": \"http://example.com/a.png\"}]}]}", 400,
     "input[0].content[0]: image URLs are not currently supported"},
    {"a file part",
     "{" M "\"input\": [{\"role\": \"user\", \"content\": [{\"type\": \"input_file\"}]}]}", 400,
     "input[0].content[0]: file inputs are not currently supported"},
    {"a message item without a role", "{" M "\"input\": [{\"type\": \"message\"}]}", 400,
     "input[0]: a message item needs a role"},
    {"a replayed web search is passed over, as in ollama: the answer after it has its findings",
     "{" M "\"input\": [" USER ", {\"type\": \"web_search_call\", \"id\": \"ws_1\", \"status\":"
     " \"completed\", \"action\": {\"type\": \"search\", \"query\": \"q\"}}, {\"role\":"
     " \"assistant\", \"content\": [{\"type\": \"output_text\", \"text\": \"found\"}]}]}", 200,
     "{\"messages\": [" USER ", {\"role\": \"assistant\", \"content\": \"found\"}]}"},
    {"a web search before a call, the answer between the call and its output joining it",
     "{" M "\"input\": [" USER ", {\"type\": \"web_search_call\", \"id\": \"ws_1\", \"status\":"
     " \"completed\"}, {\"type\": \"function_call\", \"call_id\": \"c1\", \"name\": \"f\","
     " \"arguments\": \"{}\"}, {\"role\": \"assistant\", \"content\": \"a\"}, {\"type\":"
     " \"function_call_output\", \"call_id\": \"c1\", \"output\": \"r\"}]}", 200,
     "{\"messages\": [" USER ", {\"role\": \"assistant\", \"content\": \"a\", \"tool_calls\":"
     " [{\"id\": \"c1\", \"function\": {\"index\": 0, \"name\": \"f\", \"arguments\": {}}}]},"
     " {\"role\": \"tool\", \"content\": \"r\", \"tool_call_id\": \"c1\", \"tool_name\":"
     " \"f\"}]}"},
    {"an item of a type ollama does not read either",
     "{" M "\"input\": [{\"type\": \"file_search_call\", \"id\": \"fs_1\"}]}", 400,
     "input[0]: file_search_call items are not supported"},
    {"an item without a type", "{" M "\"input\": [{\"content\": \"hi\"}]}", 400,
     "input[0]: an item needs a type"},
    {"an item not an object", "{" M "\"input\": [\"hi\"]}", 400,
     "input[0]: an item needs a type"},
    {"a function_call with text arguments",
     "{" M "\"input\": [{\"type\": \"function_call\", \"name\": \"f\", \"arguments\": \"x\"}]}",
     400, "input[0]: a function_call needs a name and arguments that are a JSON object"},
    {"a function_call_output without a call",
     "{" M "\"input\": [{\"type\": \"function_call_output\", \"output\": \"x\"}]}", 400,
     "input[0]: a function_call_output needs a call_id and an output"},
    {"a function_call_output of parts: text joined with nothing between, images on the result",
     "{" M "\"input\": [{\"type\": \"function_call\", \"call_id\": \"c1\", \"name\": \"f\","
     " \"arguments\": \"{}\"}, {\"type\": \"function_call_output\", \"call_id\": \"c1\","
     " \"output\": [{\"type\": \"input_text\", \"text\": \"a\"}, {\"type\": \"input_image\","
     " \"image_url\": \"data:image/png;base64,aGk=\"}, {\"type\": \"input_text\", \"text\":"
     " \"b\"}]}]}", 200,
     "{\"messages\": [{\"role\": \"assistant\", \"content\": \"\", \"tool_calls\": [{\"id\":"
     " \"c1\", \"function\": {\"index\": 0, \"name\": \"f\", \"arguments\": {}}}]},"
     " {\"role\": \"tool\", \"content\": \"ab\", \"tool_call_id\": \"c1\", \"tool_name\":"
     " \"f\", \"images\": [\"aGk=\"]}]}"},
    {"a function_call_output with a file part",
     "{" M "\"input\": [{\"type\": \"function_call_output\", \"call_id\": \"c1\", \"output\":"
     " [{\"type\": \"input_file\", \"file_data\": \"x\"}]}]}", 400,
     "input[0].output[0]: file inputs are not currently supported"},
    {"a function_call_output image without image_url is passed over, as in ollama",
     "{" M "\"input\": [{\"type\": \"function_call_output\", \"call_id\": \"c1\", \"output\":"
     " [{\"type\": \"input_image\", \"file_id\": \"file-1\"}, {\"type\": \"input_text\","
     " \"text\": \"a\"}]}]}", 200,
     "{\"messages\": [{\"role\": \"tool\", \"content\": \"a\", \"tool_call_id\": \"c1\"}]}"},
    {"a function_call_output image by remote URL",
     "{" M "\"input\": [{\"type\": \"function_call_output\", \"call_id\": \"c1\", \"output\":"
     " [{\"type\": \"input_image\", \"image_url\": \"https://example.com/a.png\"}]}]}", 400,
     "input[0].output[0]: image URLs are not currently supported"},
    {"a function_call_output image not base64 data",
     "{" M "\"input\": [{\"type\": \"function_call_output\", \"call_id\": \"c1\", \"output\":"
     " [{\"type\": \"input_image\", \"image_url\": {\"url\": \"data:image/png,aGk=\"}}]}]}",
     400, "input[0].output[0]: invalid image input"},
    {"a built-in tool", "{" M "\"input\": \"hi\", \"tools\": [{\"type\": \"web_search\"}]}", 400,
     "tools[0]: only function tools with a name (or namespaces of them) are supported"},
    {"a namespace's functions, named under it",
     "{" M "\"input\": \"hi\", \"tools\": [{\"type\": \"namespace\", \"name\": \"git\","
     " \"tools\": [{\"type\": \"function\", \"name\": \"log\", \"parameters\": {\"type\":"
     " \"object\"}}, {\"type\": \"namespace\", \"name\": \"remote\", \"tools\": [{\"type\":"
     " \"function\", \"name\": \"push\"}]}]}]}", 200,
     "{\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"git.log\","
     " \"parameters\": {\"type\": \"object\"}}}, {\"type\": \"function\", \"function\":"
     " {\"name\": \"git.remote.push\", \"parameters\": null}}]}"},
    {"a namespace's member that is not a function",
     "{" M "\"input\": \"hi\", \"tools\": [{\"type\": \"namespace\", \"name\": \"n\","
     " \"tools\": [{\"type\": \"web_search\"}]}]}", 400,
     "tools[0].tools[0]: only function tools with a name"},
    {"namespaces nested too deep",
     "{" M "\"input\": \"hi\", \"tools\": [" NS(NS(NS(NS(NS(NS(NS(NS(NS(""))))))))) "]}", 400,
     "namespaces nest at most 8 deep"},
    {"a tool's parameters not an object",
     "{" M "\"input\": \"hi\", \"tools\": [{\"type\": \"function\", \"name\": \"f\","
     " \"parameters\": 1}]}", 400, "tools[0] must be"},
    {"an unknown effort", "{" M "\"input\": \"hi\", \"reasoning\": {\"effort\": \"lots\"}}", 400,
     "reasoning_effort must be"},
    {"no truncation: older messages dropped, as ollama's chat",
     "{" M "\"input\": \"hi\"}", 200, "{\"truncate\": true}"},
    {"truncation auto", "{" M "\"input\": \"hi\", \"truncation\": \"auto\"}", 200,
     "{\"truncate\": true}"},
    {"truncation disabled: too long is a 400", "{" M "\"input\": \"hi\", \"truncation\":"
     " \"disabled\"}", 200, "{\"truncate\": false}"},
    {"an unknown truncation", "{" M "\"input\": \"hi\", \"truncation\": \"some\"}", 400,
     "truncation must be auto or disabled"},
    {"truncation not a string", "{" M "\"input\": \"hi\", \"truncation\": false}", 400,
     "truncation must be"},
    {"background false", "{" M "\"input\": \"hi\", \"background\": false}", 200,
     "{\"stream\": false}"},
    {"background true needs a stored response",
     "{" M "\"input\": \"hi\", \"background\": true}", 400, "background is not supported"},
    {"an unknown text.format", "{" M "\"input\": \"hi\", \"text\": {\"format\": {\"type\":"
                               " \"yaml\"}}}", 400, "text.format must be"},
};

static void test_requests(void **state)
{
    (void)state;
    api_run_parse_cases(cases, sizeof cases / sizeof cases[0], responses_parse);
}

#define DONE "{\"done_reason\": \"stop\", \"prompt_eval_count\": 7, \"eval_count\": 3}"

static generation_info info_for(const char *body)
{
    json_t *b = api_json(body);
    generation_info info = {.model = "m", .chat = true, .state = responses_answer_create(b)};
    json_decref(b);
    assert_non_null(info.state);
    return info;
}

/* The response: reasoning, message and function_call items, usage, and the request's
 * settings repeated. */
static void test_whole(void **state)
{
    (void)state;
    generation_info info = info_for("{\"model\": \"m\", \"instructions\": \"be brief\","
                                    " \"temperature\": 0.5}");
    json_t *calls = api_json("[{\"id\": \"call_1\", \"function\": {\"index\": 0, \"name\": \"f\","
                             " \"arguments\": {\"x\": 1}}}]");
    generation_delta answer = {.content = "hi", .content_len = 2, .thinking = "hmm",
                               .thinking_len = 3, .tool_calls = calls};
    json_t *got = api_shape_whole(&responses_shape, &info, DONE, &answer);
    json_t *want = api_json(
        "{\"object\": \"response\", \"status\": \"completed\", \"model\": \"m\", \"error\": null,"
        " \"incomplete_details\": null, \"instructions\": \"be brief\", \"temperature\": 0.5,"
        " \"store\": false, \"truncation\": \"auto\", \"background\": false,"
        " \"service_tier\": \"default\", \"top_logprobs\": 0, \"max_tool_calls\": null,"
        " \"usage\": {\"input_tokens\": 7, \"input_tokens_details\": {\"cached_tokens\": 0},"
        " \"output_tokens\": 3, \"output_tokens_details\": {\"reasoning_tokens\": 0},"
        " \"total_tokens\": 10}}");
    api_expect_subset(want, got, "response");
    assert_true(json_is_integer(json_object_get(got, "completed_at")));
    json_t *output = json_object_get(got, "output");
    assert_int_equal(json_array_size(output), 3);
    json_t *item = json_array_get(output, 0);
    assert_string_equal(json_string_value(json_object_get(item, "type")), "reasoning");
    json_decref(want);
    want = api_json("[{\"type\": \"summary_text\", \"text\": \"hmm\"}]");
    assert_true(json_equal(want, json_object_get(item, "summary")));
    json_decref(want);
    item = json_array_get(output, 1);
    want = api_json("{\"type\": \"message\", \"status\": \"completed\", \"role\": \"assistant\","
                    " \"content\": [{\"type\": \"output_text\", \"text\": \"hi\", \"annotations\":"
                    " [], \"logprobs\": []}]}");
    api_expect_subset(want, item, "message item");
    json_decref(want);
    item = json_array_get(output, 2);
    want = api_json("{\"type\": \"function_call\", \"call_id\": \"call_1\", \"name\": \"f\","
                    " \"arguments\": \"{\\\"x\\\":1}\", \"status\": \"completed\"}");
    api_expect_subset(want, item, "function_call item");
    json_decref(want);
    json_decref(got);

    /* cut at max_output_tokens */
    generation_delta text = {.content = "x", .content_len = 1, .thinking = ""};
    got = api_shape_whole(&responses_shape, &info, "{\"done_reason\": \"length\"}", &text);
    want = api_json("{\"status\": \"incomplete\", \"incomplete_details\": {\"reason\":"
                    " \"max_output_tokens\"}}");
    api_expect_subset(want, got, "incomplete");
    json_decref(want);
    json_decref(got);
    json_decref(calls);
    responses_shape.free_state(info.state);

    /* a prompt the runner had partly cached: 5 tokens (6 in the context less the 1 answer
     * token), 2 of them evaluated; the request's truncation and user repeated */
    info = info_for("{\"model\": \"m\", \"truncation\": \"disabled\", \"user\": \"u\","
                    " \"text\": {\"verbosity\": \"low\"}, \"reasoning\": {\"effort\": \"low\"}}");
    got = api_shape_whole(&responses_shape, &info,
                          "{\"done_reason\": \"stop\", \"prompt_eval_count\": 2, \"eval_count\":"
                          " 1, \"tokens\": [1, 2, 3, 4, 5, 6]}", &text);
    want = api_json("{\"truncation\": \"disabled\", \"user\": \"u\", \"text\": {\"format\":"
                    " {\"type\": \"text\"}, \"verbosity\": \"low\"}, \"reasoning\": {\"effort\":"
                    " \"low\", \"summary\": null}, \"usage\": {\"input_tokens\":"
                    " 5, \"input_tokens_details\": {\"cached_tokens\": 3}, \"output_tokens\": 1,"
                    " \"output_tokens_details\": {\"reasoning_tokens\": 0}, \"total_tokens\": 6}}");
    api_expect_subset(want, got, "cached, text and reasoning merged over the defaults");
    json_decref(want);
    json_decref(got);
    responses_shape.free_state(info.state);
}

/* A stream: each event named as its type and numbered from 0, from response.created to
 * response.completed. */
static void test_stream(void **state)
{
    (void)state;
    generation_info info = info_for("{\"model\": \"m\"}");
    generation_delta pieces[] = {{.content = "a", .content_len = 1, .thinking = ""},
                                 {.content = "b", .content_len = 1, .thinking = ""}};
    char *text = api_shape_stream(&responses_shape, &info, pieces, 2, DONE);
    static const char *const types[] = {
        "response.created",           "response.in_progress",
        "response.output_item.added", "response.content_part.added",
        "response.output_text.delta", "response.output_text.delta",
        "response.output_text.done",  "response.content_part.done",
        "response.output_item.done",  "response.completed"};
    const char *event = text;
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        char head[96];
        snprintf(head, sizeof head, "event: %s\ndata: ", types[i]);
        if (strncmp(event, head, strlen(head)) != 0)
            fail_msg("event %zu: %.60s, want %s", i, event, types[i]);
        const char *end = strstr(event, "\n\n");
        assert_non_null(end);
        char *data = strndup(event + strlen(head), (size_t)(end - event - strlen(head)));
        json_t *got = api_json(data);
        assert_string_equal(json_string_value(json_object_get(got, "type")), types[i]);
        assert_int_equal(json_integer_value(json_object_get(got, "sequence_number")), i);
        if (i == 6)
            assert_string_equal(json_string_value(json_object_get(got, "text")), "ab");
        /* completed_at: null while the response runs, a time once it has ended */
        json_t *completed_at = json_object_get(json_object_get(got, "response"), "completed_at");
        if (i == 0)
            assert_true(json_is_null(completed_at));
        if (i == 9)
            assert_true(json_is_integer(completed_at));
        json_decref(got);
        free(data);
        event = end + 2;
    }
    assert_string_equal(event, "");
    free(text);
    responses_shape.free_state(info.state);
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

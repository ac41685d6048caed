/*
 * ollama's native /api/chat and /api/generate as the typed request (api/native.c and
 * core/chat_request.c), field by field and refusal by refusal, and the native answer shape:
 * the stream:false object with ollama's metrics, the NDJSON chunks of a stream.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api_fixture.h"
#include "server/api/api_time.h"
#include "server/api/native.h"

static unsigned parse_chat(const json_t *body, chat_request **out, char *message, size_t size)
{
    return native_parse(body, true, out, message, size);
}

static unsigned parse_generate(const json_t *body, chat_request **out, char *message,
                               size_t size)
{
    return native_parse(body, false, out, message, size);
}

#define M "\"model\": \"m\", "
#define USER "{\"role\": \"user\", \"content\": \"hi\"}"

static const parse_case chat_cases[] = {
    {"the least a chat has", "{" M "\"messages\": [" USER "]}", 200,
     "{\"model\": \"m\", \"chat\": true, \"messages\": [" USER "], \"stream\": true,"
     " \"truncate\": true, \"shift\": true, \"think\": null, \"format\": null,"
     " \"options\": null, \"tools\": null, \"logprobs\": false, \"top_logprobs\": 0,"
     " \"keep_alive_ns\": null}"},
    {"no model: the core answers it", "{\"messages\": []}", 200, "{\"model\": null}"},
    {"no messages: a load", "{" M "\"messages\": []}", 200, "{\"messages\": []}"},
    {"absent and null role and content are empty",
     "{" M "\"messages\": [{}, {\"role\": null, \"content\": null}]}", 200,
     "{\"messages\": [{\"role\": \"\", \"content\": \"\"}, {\"role\": \"\", \"content\": \"\"}]}"},
    {"thinking, a tool result's name and call id",
     "{" M "\"messages\": [{\"role\": \"assistant\", \"content\": \"a\", \"thinking\": \"t\"},"
     " {\"role\": \"tool\", \"content\": \"r\", \"tool_name\": \"f\", \"tool_call_id\": \"c1\"}]}",
     200,
     "{\"messages\": [{\"role\": \"assistant\", \"content\": \"a\", \"thinking\": \"t\"},"
     " {\"role\": \"tool\", \"content\": \"r\", \"tool_name\": \"f\", \"tool_call_id\": \"c1\"}]}"},
    {"roles in any case, as ollama reads them",
     "{" M "\"messages\": [{\"role\": \"SYSTEM\", \"content\": \"s\"}, {\"role\": \"User\","
     " \"content\": \"hi\"}]}", 200,
     "{\"messages\": [{\"role\": \"system\", \"content\": \"s\"}, " USER "]}"},
    {"unknown message fields are dropped",
     "{" M "\"messages\": [{\"role\": \"user\", \"content\": \"hi\", \"color\": \"red\"}]}", 200,
     "{\"messages\": [" USER "]}"},
    {"tool calls: id, index, name, arguments",
     "{" M "\"messages\": [{\"role\": \"assistant\", \"content\": \"\", \"tool_calls\": ["
     "{\"id\": \"call_1\", \"function\": {\"index\": 0, \"name\": \"f\", \"arguments\": {\"x\": 1}}},"
     "{\"function\": {\"name\": \"g\"}}]}]}",
     200,
     "{\"messages\": [{\"role\": \"assistant\", \"content\": \"\", \"tool_calls\": ["
     "{\"id\": \"call_1\", \"function\": {\"index\": 0, \"name\": \"f\", \"arguments\": {\"x\": 1}}},"
     "{\"function\": {\"name\": \"g\"}}]}]}"},
    {"a tool call's arguments as their JSON text, as OpenAI's API carries them",
     "{" M "\"messages\": [{\"role\": \"assistant\", \"content\": \"\", \"tool_calls\": ["
     "{\"function\": {\"name\": \"f\", \"arguments\": \"{\\\"x\\\": 1}\"}}]}]}",
     200,
     "{\"messages\": [{\"role\": \"assistant\", \"content\": \"\", \"tool_calls\": ["
     "{\"function\": {\"name\": \"f\", \"arguments\": {\"x\": 1}}}]}]}"},
    {"images as given",
     "{" M "\"messages\": [{\"role\": \"user\", \"content\": \"see\", \"images\": [\"aGk=\"]}]}",
     200, "{\"messages\": [{\"role\": \"user\", \"content\": \"see\", \"images\": [\"aGk=\"]}]}"},
    {"tools", "{" M "\"messages\": [], \"tools\": [{\"type\": \"function\", \"function\": "
              "{\"name\": \"f\", \"parameters\": {\"type\": \"object\"}}}]}", 200,
     "{\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": "
     "{\"type\": \"object\"}}}]}"},
    {"no tools is none", "{" M "\"messages\": [], \"tools\": []}", 200, "{\"tools\": null}"},
    {"think true", "{" M "\"messages\": [], \"think\": true}", 200, "{\"think\": true}"},
    {"think false", "{" M "\"messages\": [], \"think\": false}", 200, "{\"think\": false}"},
    {"think a level", "{" M "\"messages\": [], \"think\": \"high\"}", 200, "{\"think\": \"high\"}"},
    {"think null", "{" M "\"messages\": [], \"think\": null}", 200, "{\"think\": null}"},
    {"format json", "{" M "\"messages\": [], \"format\": \"json\"}", 200, "{\"format\": \"json\"}"},
    {"format a schema", "{" M "\"messages\": [], \"format\": {\"type\": \"object\"}}", 200,
     "{\"format\": {\"type\": \"object\"}}"},
    {"format empty is free text", "{" M "\"messages\": [], \"format\": \"\"}", 200,
     "{\"format\": null}"},
    {"options as given", "{" M "\"messages\": [], \"options\": {\"temperature\": 0.5}}", 200,
     "{\"options\": {\"temperature\": 0.5}}"},
    {"stream false", "{" M "\"messages\": [], \"stream\": false}", 200, "{\"stream\": false}"},
    {"keep_alive a duration", "{" M "\"messages\": [], \"keep_alive\": \"5m\"}", 200,
     "{\"keep_alive_ns\": 300000000000}"},
    {"keep_alive seconds", "{" M "\"messages\": [], \"keep_alive\": 10}", 200,
     "{\"keep_alive_ns\": 10000000000}"},
    {"keep_alive negative is forever", "{" M "\"messages\": [], \"keep_alive\": -1}", 200,
     "{\"keep_alive_ns\": -1}"},
    {"logprobs", "{" M "\"messages\": [], \"logprobs\": true, \"top_logprobs\": 5}", 200,
     "{\"logprobs\": true, \"top_logprobs\": 5}"},
    {"truncate and shift off", "{" M "\"messages\": [], \"truncate\": false, \"shift\": false}",
     200, "{\"truncate\": false, \"shift\": false}"},
    {"messages not an array", "{" M "\"messages\": {}}", 400, "messages must be an array"},
    {"a message not an object", "{" M "\"messages\": [3]}", 400,
     "messages[0] must be an object"},
    {"content not a string", "{" M "\"messages\": [{\"role\": \"user\", \"content\": 3}]}", 400,
     "messages[0].content must be a string"},
    {"thinking not a string", "{" M "\"messages\": [{\"role\": \"user\", \"thinking\": []}]}", 400,
     "messages[0].thinking must be a string"},
    {"tool_calls not an array",
     "{" M "\"messages\": [{\"role\": \"assistant\", \"tool_calls\": {}}]}", 400,
     "messages[0].tool_calls must be an array"},
    {"a tool call without a name",
     "{" M "\"messages\": [{\"role\": \"assistant\", \"tool_calls\": [{\"function\": {}}]}]}", 400,
     "messages[0].tool_calls[0] must be"},
    {"a tool call's arguments as text that is not an object",
     "{" M "\"messages\": [{\"role\": \"assistant\", \"tool_calls\": [{\"function\": "
     "{\"name\": \"f\", \"arguments\": \"[1]\"}}]}]}", 400,
     "messages[0].tool_calls[0] must be"},
    {"a tool call's arguments as text that is not JSON",
     "{" M "\"messages\": [{\"role\": \"assistant\", \"tool_calls\": [{\"function\": "
     "{\"name\": \"f\", \"arguments\": \"{x\"}}]}]}", 400,
     "the arguments an object or its JSON text"},
    {"an image not a string",
     "{" M "\"messages\": [{\"role\": \"user\", \"images\": [1]}]}", 400,
     "messages[0].images[0] must be a base64 string"},
    {"tools not an array", "{" M "\"messages\": [], \"tools\": {}}", 400,
     "tools must be an array"},
    {"a tool without a name", "{" M "\"messages\": [], \"tools\": [{\"function\": {}}]}", 400,
     "tools[0] must be"},
    {"a tool's parameters not an object",
     "{" M "\"messages\": [], \"tools\": [{\"function\": {\"name\": \"f\", \"parameters\": 1}}]}",
     400, "tools[0] must be"},
    {"think an unknown level", "{" M "\"messages\": [], \"think\": \"extreme\"}", 400,
     "invalid think value"},
    {"think a number", "{" M "\"messages\": [], \"think\": 1}", 400,
     "think must be a string or a boolean"},
    {"keep_alive not a duration", "{" M "\"messages\": [], \"keep_alive\": \"soon\"}", 400,
     "invalid keep_alive duration"},
    {"top_logprobs past 20", "{" M "\"messages\": [], \"top_logprobs\": 21}", 400,
     "top_logprobs must be between 0 and 20"},
    {"truncate not a boolean", "{" M "\"messages\": [], \"truncate\": \"yes\"}", 400,
     "truncate must be a boolean"},
    {"stream not a boolean", "{" M "\"messages\": [], \"stream\": 1}", 400,
     "stream must be a boolean"},
    {"format neither text nor schema", "{" M "\"messages\": [], \"format\": 1}", 400,
     "format must be a string or an object"},
    {"options not an object", "{" M "\"messages\": [], \"options\": []}", 400,
     "options must be an object"},
};

static const parse_case generate_cases[] = {
    {"the least a completion has", "{" M "\"prompt\": \"hi\"}", 200,
     "{\"model\": \"m\", \"chat\": false, \"prompt\": \"hi\", \"suffix\": null, \"system\": null,"
     " \"template\": null, \"raw\": false, \"context\": null, \"images\": [], \"stream\": true}"},
    {"suffix, system and template",
     "{" M "\"prompt\": \"a\", \"suffix\": \"b\", \"system\": \"s\", \"template\": \"{{ .Prompt }}\"}",
     200, "{\"suffix\": \"b\", \"system\": \"s\", \"template\": \"{{ .Prompt }}\"}"},
    {"raw", "{" M "\"prompt\": \"a\", \"raw\": true}", 200, "{\"raw\": true}"},
    {"empty texts are absent, as older clients send them for the model's own",
     "{" M "\"prompt\": \"a\", \"suffix\": \"\", \"system\": \"\", \"template\": \"\","
     " \"context\": []}", 200,
     "{\"suffix\": null, \"system\": null, \"template\": null, \"context\": []}"},
    {"raw with the empty fields older clients send",
     "{" M "\"prompt\": \"a\", \"raw\": true, \"system\": \"\", \"template\": \"\","
     " \"context\": []}", 200, "{\"raw\": true, \"system\": null, \"template\": null}"},
    {"raw with a system", "{" M "\"prompt\": \"a\", \"raw\": true, \"system\": \"s\"}", 400,
     "raw mode does not support template, system, or context"},
    {"raw with a context", "{" M "\"prompt\": \"a\", \"raw\": true, \"context\": [1]}", 400,
     "raw mode does not support template, system, or context"},
    {"context", "{" M "\"prompt\": \"a\", \"context\": [1, 2, 3]}", 200,
     "{\"context\": [1, 2, 3]}"},
    {"images", "{" M "\"prompt\": \"a\", \"images\": [\"aGk=\", \"eW8=\"]}", 200,
     "{\"images\": [\"aGk=\", \"eW8=\"]}"},
    {"think, format, options, logprobs as a chat's",
     "{" M "\"prompt\": \"a\", \"think\": \"low\", \"format\": \"json\", \"options\": "
     "{\"seed\": 1}, \"logprobs\": true, \"top_logprobs\": 2}", 200,
     "{\"think\": \"low\", \"format\": \"json\", \"options\": {\"seed\": 1}, \"logprobs\": true,"
     " \"top_logprobs\": 2}"},
    {"a completion has no messages or tools",
     "{" M "\"prompt\": \"a\", \"messages\": [" USER "], \"tools\": [{}]}", 200,
     "{\"messages\": null, \"tools\": null}"},
    {"prompt not a string", "{" M "\"prompt\": 1}", 400, "prompt must be a string"},
    {"context not an array", "{" M "\"prompt\": \"a\", \"context\": 1}", 400,
     "context must be an array"},
    {"raw not a boolean", "{" M "\"prompt\": \"a\", \"raw\": \"yes\"}", 400,
     "raw must be a boolean"},
    {"an image not a string", "{" M "\"prompt\": \"a\", \"images\": [1]}", 400,
     "images[0] must be a base64 string"},
};

static void test_chat_requests(void **state)
{
    (void)state;
    api_run_parse_cases(chat_cases, sizeof chat_cases / sizeof chat_cases[0], parse_chat);
}

static void test_generate_requests(void **state)
{
    (void)state;
    api_run_parse_cases(generate_cases, sizeof generate_cases / sizeof generate_cases[0],
                        parse_generate);
}

#define DONE                                                                                  \
    "{\"done_reason\": \"stop\", \"prompt_eval_count\": 7, \"prompt_eval_duration\": 100,"    \
    " \"eval_count\": 3, \"eval_duration\": 0, \"tokens\": [1, 2, 3, 4]}"

/* stream:false: the message with thinking and tool calls, the done reason and the nonzero
 * metrics; a completion's context is the runner's tokens. */
static void test_whole_answer(void **state)
{
    (void)state;
    json_t *calls = api_json("[{\"id\": \"call_1\", \"function\": {\"index\": 0, \"name\": \"f\","
                             " \"arguments\": {\"x\": 1}}}]");
    generation_delta answer = {.content = "hi", .content_len = 2, .thinking = "hmm",
                               .thinking_len = 3, .tool_calls = calls};
    generation_info info = {.model = "m", .chat = true, .load_ns = 5};
    json_t *got = api_shape_whole(&native_shape, &info, DONE, &answer);
    json_t *want = api_json(
        "{\"model\": \"m\", \"message\": {\"role\": \"assistant\", \"content\": \"hi\", \"thinking\":"
        " \"hmm\", \"tool_calls\": [{\"id\": \"call_1\", \"function\": {\"index\": 0, \"name\": "
        "\"f\", \"arguments\": {\"x\": 1}}}]}, \"done\": true, \"done_reason\": \"stop\","
        " \"load_duration\": 5, \"prompt_eval_count\": 7, \"prompt_eval_duration\": 100,"
        " \"eval_count\": 3, \"eval_duration\": null, \"context\": null}");
    api_expect_subset(want, got, "chat");
    assert_true(json_is_string(json_object_get(got, "created_at")));
    assert_true(json_is_integer(json_object_get(got, "total_duration")));
    json_decref(got);
    json_decref(want);

    generation_info completion = {.model = "m"};
    generation_delta text = {.content = "ok", .content_len = 2, .thinking = ""};
    got = api_shape_whole(&native_shape, &completion, DONE, &text);
    want = api_json("{\"response\": \"ok\", \"context\": [1, 2, 3, 4], \"message\": null,"
                    " \"load_duration\": null}");
    api_expect_subset(want, got, "generate");
    json_decref(got);
    json_decref(want);
    json_decref(calls);
}

/* A stream: one JSON object a line, the last with done true and the metrics. */
static void test_stream(void **state)
{
    (void)state;
    generation_delta pieces[] = {{.content = "a", .content_len = 1, .thinking = ""},
                                 {.content = "", .thinking = "t", .thinking_len = 1}};
    generation_info info = {.model = "m", .chat = true};
    char *text = api_shape_stream(&native_shape, &info, pieces, 2, DONE);
    char *lines[4] = {0};
    size_t n = 0;
    for (char *save, *line = strtok_r(text, "\n", &save); line && n < 4;
         line = strtok_r(NULL, "\n", &save))
        lines[n++] = line;
    assert_int_equal(n, 3);
    json_t *first = api_json(lines[0]), *second = api_json(lines[1]), *last = api_json(lines[2]);
    json_t *want = api_json("{\"message\": {\"role\": \"assistant\", \"content\": \"a\"},"
                            " \"done\": false}");
    api_expect_subset(want, first, "first");
    json_decref(want);
    want = api_json("{\"message\": {\"role\": \"assistant\", \"content\": \"\", \"thinking\":"
                    " \"t\"}, \"done\": false}");
    api_expect_subset(want, second, "second");
    json_decref(want);
    want = api_json("{\"done\": true, \"done_reason\": \"stop\", \"eval_count\": 3}");
    api_expect_subset(want, last, "last");
    json_decref(want);
    json_decref(first);
    json_decref(second);
    json_decref(last);
    free(text);
}

/* _debug_render_only: ollama's empty answer (an empty response or message, done false) with
 * the rendered prompt, and an image count only when there are images. */
static void test_rendered_only(void **state)
{
    (void)state;
    generation_info chat = {.model = "m", .chat = true};
    json_t *got = native_shape.rendered(&chat, generation_debug_info("Q: hi", 0));
    json_t *want = api_json("{\"model\": \"m\", \"message\": {\"role\": \"\", \"content\":"
                            " \"\"}, \"done\": false, \"response\": null, \"_debug_info\":"
                            " {\"rendered_template\": \"Q: hi\"}}");
    api_expect_subset(want, got, "chat");
    assert_true(json_is_string(json_object_get(got, "created_at")));
    json_decref(got);
    json_decref(want);

    generation_info completion = {.model = "m"};
    got = native_shape.rendered(&completion, generation_debug_info("[img]x", 2));
    want = api_json("{\"response\": \"\", \"done\": false, \"message\": null,"
                    " \"_debug_info\": {\"rendered_template\": \"[img]x\", \"image_count\": 2}}");
    api_expect_subset(want, got, "generate");
    json_decref(got);
    json_decref(want);
}

static void expect_local_time(const char *tz, time_t seconds, long nanoseconds, const char *want)
{
    setenv("TZ", tz, 1);
    tzset();
    json_t *got = api_local_time((struct timespec){.tv_sec = seconds, .tv_nsec = nanoseconds});
    if (!got || strcmp(json_string_value(got), want) != 0)
        fail_msg("TZ=%s %lld.%09ld: %s, want %s", tz, (long long)seconds, nanoseconds,
                 got ? json_string_value(got) : "NULL", want);
    json_decref(got);
}

/* modified_at and expires_at as Go writes a local time.Time: RFC 3339, the nanoseconds
 * without trailing zeros, "Z" for a zero offset; a year past 9999 is its last moment. */
static void test_local_times(void **state)
{
    (void)state;
    char *saved = getenv("TZ") ? strdup(getenv("TZ")) : NULL;
    expect_local_time("UTC", 1, 500000000, "1970-01-01T00:00:01.5Z");
    expect_local_time("UTC", 0, 0, "1970-01-01T00:00:00Z");
    expect_local_time("UTC", 1796057407, 843956773, "2026-11-30T16:50:07.843956773Z");
    expect_local_time("UTC-1", 1, 120, "1970-01-01T01:00:01.00000012+01:00");
    expect_local_time("<-0530>5:30", 0, 0, "1969-12-31T18:30:00-05:30");
    expect_local_time("UTC-1", 253402300799, 0, "9999-12-31T23:59:59+01:00");
    if (saved)
        setenv("TZ", saved, 1);
    else
        unsetenv("TZ");
    tzset();
    free(saved);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chat_requests),
        cmocka_unit_test(test_generate_requests),
        cmocka_unit_test(test_whole_answer),
        cmocka_unit_test(test_stream),
        cmocka_unit_test(test_rendered_only),
        cmocka_unit_test(test_local_times),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * Every number and type a client or the environment gives the server, as tables of input and
 * expected outcome: generation options (bounded, saturated or refused with a 400's message),
 * the JSON types of each API's request fields, keep-alive durations (huge ones are forever,
 * never a wrapped clock), and the CORRAL_* settings `corral serve` refuses to start with.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "options/options.h"
#include "server/http/request_fields.h"
#include "server/server.h"

static json_t *parse(const char *text)
{
    json_error_t jerr;
    json_t *v = json_loads(text, JSON_DECODE_ANY, &jerr);
    if (!v)
        fail_msg("bad test JSON %s: %s", text, jerr.text);
    return v;
}

/* ---- options ---- */

typedef struct option_case {
    const char *options;  /* the request's options */
    const char *expected; /* the normalised object, or NULL for a 400 */
    const char *message;  /* the 400's message */
} option_case;

static const option_case option_cases[] = {
    {"{\"num_ctx\": 8192}", "{\"num_ctx\": 8192}", NULL},
    {"{\"num_ctx\": 0}", "{\"num_ctx\": 0}", NULL},
    {"{\"num_ctx\": -1}", NULL, "option \"num_ctx\" must be between 0 and 16777216"},
    {"{\"num_ctx\": 16777217}", NULL, "option \"num_ctx\" must be between 0 and 16777216"},
    {"{\"num_ctx\": 1e30}", NULL, "option \"num_ctx\" is out of range for an integer"},
    {"{\"num_batch\": 100000}", NULL, "option \"num_batch\" must be between 0 and 65536"},
    {"{\"num_batch\": -2}", NULL, "option \"num_batch\" must be between 0 and 65536"},
    {"{\"num_batch\": 512.9}", "{\"num_batch\": 512}", NULL},
    {"{\"num_thread\": -3}", "{\"num_thread\": 0}", NULL},
    {"{\"num_thread\": 1}", "{\"num_thread\": 1}", NULL},
    {"{\"num_keep\": -100}", "{\"num_keep\": -1}", NULL},
    {"{\"num_keep\": 1e18}", "{\"num_keep\": 16777216}", NULL},
    {"{\"top_k\": 1e12}", "{\"top_k\": 2147483647}", NULL},
    {"{\"top_k\": 9223372036854775807}", "{\"top_k\": 2147483647}", NULL},
    {"{\"top_k\": -5}", "{\"top_k\": 0}", NULL},
    {"{\"repeat_last_n\": 99999999999}", "{\"repeat_last_n\": 16777216}", NULL},
    {"{\"repeat_last_n\": -7}", "{\"repeat_last_n\": -1}", NULL},
    {"{\"seed\": 9223372036854775807}", "{\"seed\": 9223372036854775807}", NULL},
    {"{\"seed\": -9223372036854775808}", "{\"seed\": -9223372036854775808}", NULL},
    {"{\"seed\": 1e300}", NULL, "option \"seed\" is out of range for an integer"},
    {"{\"seed\": -1e19}", NULL, "option \"seed\" is out of range for an integer"},
    {"{\"num_predict\": -5}", "{\"num_predict\": -5}", NULL},
    {"{\"num_predict\": 9223372036854775807}", "{\"num_predict\": 9223372036854775807}", NULL},
    {"{\"num_gpu\": 999999999999}", "{\"num_gpu\": 999999999999}", NULL},
    {"{\"temperature\": 0.5, \"top_p\": 1}", "{\"temperature\": 0.5, \"top_p\": 1.0}", NULL},
    {"{\"temperature\": 1e300}", NULL, "option \"temperature\" is out of range for float32"},
    {"{\"repeat_penalty\": -1e39}", NULL,
     "option \"repeat_penalty\" is out of range for float32"},
    {"{\"min_p\": 3.4e38}", "{\"min_p\": 3.4e38}", NULL},
    {"{\"top_k\": \"5\"}", NULL, "option \"top_k\" must be of type integer"},
    {"{\"top_p\": true}", NULL, "option \"top_p\" must be of type float32"},
    {"{\"use_mmap\": 1}", NULL, "option \"use_mmap\" must be of type boolean"},
    {"{\"stop\": \"x\"}", NULL, "option \"stop\" must be of type array"},
    {"{\"stop\": [1]}", NULL, "option \"stop\" must be of an array of strings"},
    {"{\"unknown\": [1], \"num_ctx\": null}", "{}", NULL},
    {"\"x\"", NULL, "options must be a JSON object"},
};

static void test_options_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof option_cases / sizeof option_cases[0]; i++) {
        const option_case *c = &option_cases[i];
        json_t *in = parse(c->options);
        corral_error err = {{0}};
        json_t *out = options_normalize(in, &err);
        if (c->expected) {
            json_t *want = parse(c->expected);
            char *got = out ? json_dumps(out, JSON_SORT_KEYS) : NULL;
            if (!out || !json_equal(out, want))
                fail_msg("options %s: got %s (%s), expected %s", c->options,
                         got ? got : "NULL", err.message, c->expected);
            free(got);
            json_decref(want);
        } else {
            if (out)
                fail_msg("options %s: accepted, expected \"%s\"", c->options, c->message);
            assert_string_equal(err.message, c->message);
        }
        json_decref(out);
        json_decref(in);
    }
}

/* More threads than cores only wait on each other: a huge num_thread is the core count. */
static void test_options_num_thread_is_at_most_the_cores(void **state)
{
    (void)state;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    assert_true(cores > 0);
    json_t *in = parse("{\"num_thread\": 100000}");
    corral_error err = {{0}};
    json_t *out = options_normalize(in, &err);
    assert_non_null(out);
    assert_int_equal(json_integer_value(json_object_get(out, "num_thread")), cores);
    json_decref(out);
    json_decref(in);
}

/* ---- request fields ---- */

typedef struct field_case {
    request_api api;
    const char *body;
    const char *message; /* NULL: accepted */
} field_case;

static const field_case field_cases[] = {
    {REQUEST_API_GENERATE, "{\"model\": \"m\", \"prompt\": \"hi\", \"stream\": false, \"raw\": "
                           "true, \"context\": [1, 2], \"keep_alive\": \"5m\", \"think\": "
                           "\"high\", \"format\": {}, \"options\": {}, \"top_logprobs\": 3}",
     NULL},
    {REQUEST_API_GENERATE, "{\"model\": \"m\", \"prompt\": null, \"stream\": null}", NULL},
    {REQUEST_API_GENERATE, "{\"prompt\": [1, 2]}", "prompt must be a string"},
    {REQUEST_API_GENERATE, "{\"stream\": \"yes\"}", "stream must be a boolean"},
    {REQUEST_API_GENERATE, "{\"model\": 5}", "model must be a string"},
    {REQUEST_API_GENERATE, "{\"context\": \"1 2\"}", "context must be an array"},
    {REQUEST_API_GENERATE, "{\"keep_alive\": true}",
     "keep_alive must be a string or a number"},
    {REQUEST_API_GENERATE, "{\"format\": 1}", "format must be a string or an object"},
    {REQUEST_API_GENERATE, "{\"options\": []}", "options must be an object"},
    {REQUEST_API_GENERATE, "{\"think\": 1}", "think must be a string or a boolean"},
    {REQUEST_API_GENERATE, "{\"top_logprobs\": 21}",
     "top_logprobs must be between 0 and 20"},
    {REQUEST_API_GENERATE, "{\"images\": \"x\"}", "images must be an array"},
    {REQUEST_API_CHAT, "{\"model\": \"m\", \"messages\": [], \"tools\": [], \"stream\": true}",
     NULL},
    {REQUEST_API_CHAT, "{\"messages\": \"hi\"}", "messages must be an array"},
    {REQUEST_API_CHAT, "{\"stream\": \"yes\"}", "stream must be a boolean"},
    {REQUEST_API_CHAT, "{\"tools\": {}}", "tools must be an array"},
    {REQUEST_API_CHAT, "{\"truncate\": \"no\"}", "truncate must be a boolean"},
    {REQUEST_API_CHAT, "{\"logprobs\": 1}", "logprobs must be a boolean"},
    {REQUEST_API_EMBED, "{\"model\": \"m\", \"input\": [\"a\"], \"dimensions\": 8}", NULL},
    {REQUEST_API_EMBED, "{\"keep_alive\": []}", "keep_alive must be a string or a number"},
    {REQUEST_API_EMBED, "{\"options\": 1}", "options must be an object"},
    {REQUEST_API_EMBED, "{\"truncate\": 0}", "truncate must be a boolean"},
    {REQUEST_API_EMBEDDINGS, "{\"model\": [\"a\"]}", "model must be a string"},
    {REQUEST_API_OPENAI_CHAT, "{\"model\": \"m\", \"messages\": [], \"max_tokens\": 5, "
                              "\"temperature\": 0, \"stop\": \"x\", \"tool_choice\": \"auto\"}",
     NULL},
    {REQUEST_API_OPENAI_CHAT, "{\"max_tokens\": -5}",
     "max_tokens must be between 1 and 2147483647"},
    {REQUEST_API_OPENAI_CHAT, "{\"max_tokens\": 0}",
     "max_tokens must be between 1 and 2147483647"},
    {REQUEST_API_OPENAI_CHAT, "{\"max_completion_tokens\": 1e3}",
     "max_completion_tokens must be an integer"},
    {REQUEST_API_OPENAI_CHAT, "{\"messages\": {}}", "messages must be an array"},
    {REQUEST_API_OPENAI_CHAT, "{\"n\": \"1\"}", "n must be an integer"},
    {REQUEST_API_OPENAI_CHAT, "{\"stream\": \"yes\"}", "stream must be a boolean"},
    {REQUEST_API_OPENAI_CHAT, "{\"stop\": 1}", "stop must be a string or an array"},
    {REQUEST_API_OPENAI_CHAT, "{\"stream_options\": true}", "stream_options must be an object"},
    {REQUEST_API_OPENAI_COMPLETION, "{\"prompt\": [1]}", "prompt must be a string"},
    {REQUEST_API_OPENAI_COMPLETION, "{\"max_tokens\": -1}",
     "max_tokens must be between 1 and 2147483647"},
    {REQUEST_API_OPENAI_EMBEDDINGS, "{\"encoding_format\": 0}",
     "encoding_format must be a string"},
    {REQUEST_API_ANTHROPIC, "{\"model\": \"m\", \"max_tokens\": 5, \"messages\": [], "
                            "\"system\": [], \"stream\": false}",
     NULL},
    {REQUEST_API_ANTHROPIC, "{\"max_tokens\": \"5\"}", "max_tokens must be an integer"},
    {REQUEST_API_ANTHROPIC, "{\"max_tokens\": -1}",
     "max_tokens must be between 1 and 2147483647"},
    {REQUEST_API_ANTHROPIC, "{\"system\": 5}", "system must be a string or an array"},
    {REQUEST_API_ANTHROPIC, "{\"messages\": \"hi\"}", "messages must be an array"},
    {REQUEST_API_ANTHROPIC, "{\"stream\": \"yes\"}", "stream must be a boolean"},
    {REQUEST_API_ANTHROPIC, "{\"thinking\": \"on\"}", "thinking must be an object"},
    {REQUEST_API_RESPONSES, "{\"model\": \"m\", \"input\": \"hi\", \"max_output_tokens\": 9}",
     NULL},
    {REQUEST_API_RESPONSES, "{\"input\": 5}", "input must be a string or an array"},
    {REQUEST_API_RESPONSES, "{\"max_output_tokens\": -1}",
     "max_output_tokens must be between 1 and 2147483647"},
    {REQUEST_API_RESPONSES, "{\"instructions\": []}", "instructions must be a string"},
    {REQUEST_API_RESPONSES, "{\"stream\": \"yes\"}", "stream must be a boolean"},
    {REQUEST_API_CREATE, "{\"model\": \"m\", \"files\": {}, \"stream\": false}", NULL},
    {REQUEST_API_CREATE, "{\"stream\": \"no\"}", "stream must be a boolean"},
    {REQUEST_API_CREATE, "{\"parameters\": []}", "parameters must be an object"},
    {REQUEST_API_CREATE, "{\"messages\": {}}", "messages must be an array"},
    {REQUEST_API_TRANSFER, "{\"model\": \"m\", \"insecure\": true}", NULL},
    {REQUEST_API_TRANSFER, "{\"insecure\": \"yes\"}", "insecure must be a boolean"},
    {REQUEST_API_TRANSFER, "{\"stream\": 0}", "stream must be a boolean"},
};

static void test_request_fields_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof field_cases / sizeof field_cases[0]; i++) {
        const field_case *c = &field_cases[i];
        json_t *body = parse(c->body);
        corral_error err = {{0}};
        bool ok = request_fields_check(c->api, body, &err);
        if (c->message && ok)
            fail_msg("case %zu %s: accepted, expected \"%s\"", i, c->body, c->message);
        if (!c->message && !ok)
            fail_msg("case %zu %s: refused: %s", i, c->body, err.message);
        if (c->message)
            assert_string_equal(err.message, c->message);
        json_decref(body);
    }
}

/* ---- durations ---- */

typedef struct duration_case {
    const char *text;
    bool valid;
    int64_t ns; /* -1: forever */
} duration_case;

static const duration_case duration_cases[] = {
    {"5m", true, 300000000000},
    {"1h30m", true, 5400000000000},
    {"300ms", true, 300000000},
    {"0", true, 0},
    {"30", true, 30000000000},
    {"-1", true, -1},
    {"-1s", true, -1},
    {"2500000h", true, -1},          /* 285 years: forever, not a wrapped clock */
    {"7.5e9", true, -1},             /* seconds */
    {"1e300", true, -1},
    {"inf", true, -1},
    {"99999999999999999999h", true, -1},
    {"100000h", true, 360000000000000000},
    {"nan", false, 0},
    {"", false, 0},
    {"5x", false, 0},
    {"5m-3s", false, 0},
    {"1hnan", false, 0},
    {"m", false, 0},
};

static void test_durations_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof duration_cases / sizeof duration_cases[0]; i++) {
        const duration_case *c = &duration_cases[i];
        int64_t ns = 12345;
        bool ok = server_parse_duration(c->text, &ns);
        if (ok != c->valid)
            fail_msg("duration \"%s\": %s", c->text, ok ? "accepted" : "refused");
        if (ok && ns != c->ns)
            fail_msg("duration \"%s\": %lld ns, expected %lld", c->text, (long long)ns,
                     (long long)c->ns);
    }
    /* a keep_alive given as a JSON number of seconds */
    assert_int_equal(server_duration_ns(7.5e9 * 1e9), -1);
    assert_int_equal(server_duration_ns(-5), -1);
    assert_int_equal(server_duration_ns(60e9), 60000000000);
}

/* ---- the environment ---- */

typedef struct env_case {
    const char *name, *value;
    const char *message; /* a substring of the refusal; NULL: accepted */
} env_case;

static const env_case env_cases[] = {
    {"CORRAL_MAX_REQUEST_MB", "0", "CORRAL_MAX_REQUEST_MB must be an integer from 1 to 16384"},
    {"CORRAL_MAX_REQUEST_MB", "ten", "CORRAL_MAX_REQUEST_MB must be"},
    {"CORRAL_MAX_REQUEST_MB", "99999999999999999999", "CORRAL_MAX_REQUEST_MB must be"},
    {"CORRAL_MAX_REQUEST_MB", "2", NULL},
    {"CORRAL_NUM_PARALLEL", "abc", "CORRAL_NUM_PARALLEL must be an integer from 1 to 64"},
    {"CORRAL_NUM_PARALLEL", "-1", "CORRAL_NUM_PARALLEL must be"},
    {"CORRAL_NUM_PARALLEL", "4x", "CORRAL_NUM_PARALLEL must be"},
    {"CORRAL_NUM_PARALLEL", "0", NULL}, /* ollama's "auto": the default */
    {"CORRAL_MAX_LOADED_MODELS", "many", "CORRAL_MAX_LOADED_MODELS must be"},
    {"CORRAL_MAX_QUEUE", "0", "CORRAL_MAX_QUEUE must be an integer from 1 to 1048576"},
    {"CORRAL_CONTEXT_LENGTH", "-1", "CORRAL_CONTEXT_LENGTH must be"},
    {"CORRAL_CONTEXT_LENGTH", "2k", "CORRAL_CONTEXT_LENGTH must be"},
    {"CORRAL_KEEP_ALIVE", "bogus", "CORRAL_KEEP_ALIVE must be a duration"},
    {"CORRAL_KEEP_ALIVE", "2500000h", NULL},
    {"CORRAL_RUNNER_TIMEOUT", "0", "CORRAL_RUNNER_TIMEOUT must be a positive duration"},
    {"CORRAL_RUNNER_TIMEOUT", "-1s", "CORRAL_RUNNER_TIMEOUT must be a positive duration"},
    {"CORRAL_SWEEP_INTERVAL", "soon", "CORRAL_SWEEP_INTERVAL must be a positive duration"},
    {"CORRAL_HOST", "[::1", "invalid address in CORRAL_HOST"},
    {"OLLAMA_HOST", "[::1]8080", "invalid address in OLLAMA_HOST"},
    {"CORRAL_HOST", "127.0.0.1:8080", NULL},
    {"CORRAL_KV_CACHE_TYPE", "q5", "CORRAL_KV_CACHE_TYPE must be"},
    {"OLLAMA_LOAD_TIMEOUT", "later", "OLLAMA_LOAD_TIMEOUT must be a duration"},
    {"CORRAL_LOAD_TIMEOUT", "10m", NULL},
    {"CORRAL_MAX_TRANSFER_STREAMS", "-1", "CORRAL_MAX_TRANSFER_STREAMS must be an integer"},
    {"OLLAMA_MAX_TRANSFER_STREAMS", "2", NULL},
    {"CORRAL_PROMPT_LOOKUP", "17", "CORRAL_PROMPT_LOOKUP must be an integer from 0 to 16"},
    {"CORRAL_PROMPT_LOOKUP", "0", NULL},
    {"CORRAL_DEBUG", "verbose", "CORRAL_DEBUG must be 1, true, 0, false or a level"},
    {"CORRAL_MAX_REQUEST_MB", "16385", "CORRAL_MAX_REQUEST_MB must be"}, /* Corral's own: no clamp */
};

static const char *const env_suffixes[] = {
    "HOST", "KEEP_ALIVE", "RUNNER_TIMEOUT", "SWEEP_INTERVAL", "NUM_PARALLEL",
    "MAX_LOADED_MODELS", "MAX_QUEUE", "CONTEXT_LENGTH", "MAX_REQUEST_MB", "KV_CACHE_TYPE",
    "LOAD_TIMEOUT", "NOPRUNE", "DEBUG", "MAX_TRANSFER_STREAMS", "PROMPT_LOOKUP",
};

static void clear_env(void)
{
    for (size_t i = 0; i < sizeof env_suffixes / sizeof env_suffixes[0]; i++) {
        char name[64];
        snprintf(name, sizeof name, "CORRAL_%s", env_suffixes[i]);
        unsetenv(name);
        snprintf(name, sizeof name, "OLLAMA_%s", env_suffixes[i]);
        unsetenv(name);
    }
}

static void test_environment_table(void **state)
{
    (void)state;
    setenv("CORRAL_MODELS", "/tmp/corral-test-server-options-models", 1);
    for (size_t i = 0; i < sizeof env_cases / sizeof env_cases[0]; i++) {
        const env_case *c = &env_cases[i];
        clear_env();
        setenv(c->name, c->value, 1);
        server_config config;
        corral_error err = {{0}};
        bool ok = server_config_from_env(&config, &err);
        if (c->message && ok)
            fail_msg("%s=%s: accepted, expected \"%s\"", c->name, c->value, c->message);
        if (!c->message && !ok)
            fail_msg("%s=%s: refused: %s", c->name, c->value, err.message);
        if (c->message && !strstr(err.message, c->message))
            fail_msg("%s=%s: \"%s\", expected \"%s\"", c->name, c->value, err.message,
                     c->message);
    }
    clear_env();
    server_config config;
    corral_error err = {{0}};
    setenv("CORRAL_MAX_REQUEST_MB", "2", 1);
    setenv("CORRAL_NUM_PARALLEL", "0", 1);
    setenv("CORRAL_KEEP_ALIVE", "2500000h", 1);
    setenv("CORRAL_RUNNER_TIMEOUT", "2s", 1);
    setenv("OLLAMA_LOAD_TIMEOUT", "90s", 1);
    setenv("OLLAMA_NOPRUNE", "true", 1);
    setenv("OLLAMA_MAX_TRANSFER_STREAMS", "3", 1);
    assert_true(server_config_from_env(&config, &err));
    assert_int_equal(config.max_transfer_streams, 3);
    assert_int_equal(config.prompt_lookup, 8);
    assert_int_equal(config.load_timeout_ns, 90000000000ll);
    assert_true(config.no_prune);
    assert_int_equal(config.max_body_bytes, 2u << 20);
    assert_int_equal(config.num_parallel, 4);
    assert_int_equal(config.keep_alive_ns, -1);
    assert_int_equal(config.runner_timeout_ns, 2000000000);
    clear_env();
}

/* Values ollama's envconfig takes, each with the meaning ollama gives it; a field left 0 is
 * not checked. */
typedef struct ollama_env_case {
    const char *name, *value;
    const char *host;
    int port;                /* checked with host */
    int64_t load_timeout_ns;
    char debug, no_prune;    /* 'y' or 'n' */
    uint32_t num_parallel, num_ctx;
    bool warns;
} ollama_env_case;

static const ollama_env_case ollama_env_cases[] = {
    {"OLLAMA_HOST", "0.0.0.0", .host = "0.0.0.0", .port = 11434},
    {"OLLAMA_HOST", "1.2.3.4:1234", .host = "1.2.3.4", .port = 1234},
    {"OLLAMA_HOST", ":1234", .host = "0.0.0.0", .port = 1234},
    {"OLLAMA_HOST", "example.com", .host = "example.com", .port = 11434},
    {"OLLAMA_HOST", "http://1.2.3.4", .host = "1.2.3.4", .port = 80},
    {"OLLAMA_HOST", "https://1.2.3.4", .host = "1.2.3.4", .port = 443},
    {"OLLAMA_HOST", "tcp://1.2.3.4", .host = "1.2.3.4", .port = 11434},
    {"OLLAMA_HOST", "http://0.0.0.0:8080/", .host = "0.0.0.0", .port = 8080},
    {"OLLAMA_HOST", "https://example.com/ollama", .host = "example.com", .port = 443},
    {"OLLAMA_HOST", "[::1]", .host = "::1", .port = 11434},
    {"OLLAMA_HOST", "[::]", .host = "::", .port = 11434},
    {"OLLAMA_HOST", "::1", .host = "::1", .port = 11434},
    {"OLLAMA_HOST", "[::1]:1337", .host = "::1", .port = 1337},
    {"OLLAMA_HOST", " \" 1.2.3.4 \" ", .host = "1.2.3.4", .port = 11434},
    {"OLLAMA_HOST", ":0", .host = "0.0.0.0", .port = 0},
    {"OLLAMA_HOST", ":66000", .host = "0.0.0.0", .port = 11434, .warns = true},
    {"OLLAMA_HOST", ":-1", .host = "0.0.0.0", .port = 11434, .warns = true},
    {"OLLAMA_HOST", "0.0.0.0:", .host = "0.0.0.0", .port = 11434, .warns = true},
    {"OLLAMA_LOAD_TIMEOUT", "0", .load_timeout_ns = -1},
    {"OLLAMA_LOAD_TIMEOUT", "-0", .load_timeout_ns = -1},
    {"OLLAMA_LOAD_TIMEOUT", "-1m", .load_timeout_ns = -1},
    {"OLLAMA_LOAD_TIMEOUT", "120", .load_timeout_ns = 120000000000ll},
    {"OLLAMA_DEBUG", "2", .debug = 'y'},
    {"OLLAMA_DEBUG", "t", .debug = 'y'},
    {"OLLAMA_DEBUG", "F", .debug = 'n'},
    {"OLLAMA_DEBUG", "-1", .debug = 'n'},
    {"OLLAMA_NOPRUNE", "t", .no_prune = 'y'},
    {"OLLAMA_NOPRUNE", "random", .no_prune = 'y'}, /* ollama: a value it cannot read is true */
    {"OLLAMA_NOPRUNE", "False", .no_prune = 'n'},
    {"OLLAMA_NUM_PARALLEL", "128", .num_parallel = 64, .warns = true},
    {"OLLAMA_CONTEXT_LENGTH", "0", .num_ctx = 4096},
    {"OLLAMA_CONTEXT_LENGTH", "33554432", .num_ctx = 16777216, .warns = true},
};

static void test_environment_as_ollama_reads_it(void **state)
{
    (void)state;
    setenv("CORRAL_MODELS", "/tmp/corral-test-server-options-models", 1);
    for (size_t i = 0; i < sizeof ollama_env_cases / sizeof ollama_env_cases[0]; i++) {
        const ollama_env_case *c = &ollama_env_cases[i];
        clear_env();
        setenv(c->name, c->value, 1);
        server_config config;
        corral_error err = {{0}};
        if (!server_config_from_env(&config, &err))
            fail_msg("%s=%s: refused: %s", c->name, c->value, err.message);
        if (c->host && (strcmp(config.host, c->host) != 0 || (int)config.port != c->port))
            fail_msg("%s=%s: %s port %u, expected %s port %d", c->name, c->value, config.host,
                     config.port, c->host, c->port);
        if (c->load_timeout_ns && config.load_timeout_ns != c->load_timeout_ns)
            fail_msg("%s=%s: load timeout %lld", c->name, c->value,
                     (long long)config.load_timeout_ns);
        if ((c->debug && config.debug != (c->debug == 'y')) ||
            (c->no_prune && config.no_prune != (c->no_prune == 'y')))
            fail_msg("%s=%s: debug %d, noprune %d", c->name, c->value, config.debug,
                     config.no_prune);
        if ((c->num_parallel && config.num_parallel != c->num_parallel) ||
            (c->num_ctx && config.default_num_ctx != c->num_ctx))
            fail_msg("%s=%s: parallel %u, context %u", c->name, c->value, config.num_parallel,
                     config.default_num_ctx);
        if (c->warns != (config.warning[0] != '\0'))
            fail_msg("%s=%s: warning \"%s\"", c->name, c->value, config.warning);
    }
    clear_env();
    server_config config;
    corral_error err = {{0}};
    setenv("OLLAMA_HOST", ":66000", 1);
    setenv("OLLAMA_MAX_LOADED_MODELS", "5000", 1);
    assert_true(server_config_from_env(&config, &err));
    assert_string_equal(config.warning, "invalid port '66000' in OLLAMA_HOST, using the default "
                                        "11434; OLLAMA_MAX_LOADED_MODELS=5000 is above 1024, "
                                        "the most Corral runs: 1024");
    clear_env();
    setenv("CORRAL_MODELS", " '/srv/models' ", 1); /* trimmed as ollama trims */
    assert_true(server_config_from_env(&config, &err));
    assert_string_equal(config.models_root, "/srv/models");
    unsetenv("CORRAL_MODELS");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_options_table),
        cmocka_unit_test(test_options_num_thread_is_at_most_the_cores),
        cmocka_unit_test(test_request_fields_table),
        cmocka_unit_test(test_durations_table),
        cmocka_unit_test(test_environment_table),
        cmocka_unit_test(test_environment_as_ollama_reads_it),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

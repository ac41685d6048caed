/*
 * The field tables of request_fields.h: one per API, each field's accepted JSON types and,
 * for counts, the accepted range.
 */
#include "server/http/request_fields.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

enum {
    F_STRING = 1 << 0,
    F_NUMBER = 1 << 1, /* integer or real */
    F_INTEGER = 1 << 2,
    F_BOOL = 1 << 3,
    F_ARRAY = 1 << 4,
    F_OBJECT = 1 << 5,
};

typedef struct request_field {
    const char *name;
    unsigned types;
    json_int_t min, max; /* an F_INTEGER's range; both 0: any integer */
} request_field;

#define COUNT_MAX INT32_MAX /* a token count past this is no count a model can reach */

static const request_field generate_fields[] = {
    {"model", F_STRING, 0, 0},
    {"prompt", F_STRING, 0, 0},
    {"suffix", F_STRING, 0, 0},
    {"system", F_STRING, 0, 0},
    {"template", F_STRING, 0, 0},
    {"context", F_ARRAY, 0, 0},
    {"stream", F_BOOL, 0, 0},
    {"raw", F_BOOL, 0, 0},
    {"format", F_STRING | F_OBJECT, 0, 0},
    {"images", F_ARRAY, 0, 0},
    {"options", F_OBJECT, 0, 0},
    {"keep_alive", F_STRING | F_NUMBER, 0, 0},
    {"think", F_BOOL | F_STRING, 0, 0},
    {"logprobs", F_BOOL, 0, 0},
    {"top_logprobs", F_INTEGER, 0, 20},
    {"truncate", F_BOOL, 0, 0},
    {"shift", F_BOOL, 0, 0},
    {"_debug_render_only", F_BOOL, 0, 0},
};

static const request_field chat_fields[] = {
    {"model", F_STRING, 0, 0},
    {"messages", F_ARRAY, 0, 0},
    {"tools", F_ARRAY, 0, 0},
    {"format", F_STRING | F_OBJECT, 0, 0},
    {"options", F_OBJECT, 0, 0},
    {"stream", F_BOOL, 0, 0},
    {"keep_alive", F_STRING | F_NUMBER, 0, 0},
    {"think", F_BOOL | F_STRING, 0, 0},
    {"truncate", F_BOOL, 0, 0},
    {"shift", F_BOOL, 0, 0},
    {"logprobs", F_BOOL, 0, 0},
    {"top_logprobs", F_INTEGER, 0, 20},
    {"_debug_render_only", F_BOOL, 0, 0},
};

/* The embedding endpoints check input/prompt and dimensions themselves, with ollama's and
 * OpenAI's messages ("invalid input type"). */
static const request_field embed_fields[] = {
    {"model", F_STRING, 0, 0},
    {"truncate", F_BOOL, 0, 0},
    {"options", F_OBJECT, 0, 0},
    {"keep_alive", F_STRING | F_NUMBER, 0, 0},
};

static const request_field embeddings_fields[] = {
    {"model", F_STRING, 0, 0},
    {"options", F_OBJECT, 0, 0},
    {"keep_alive", F_STRING | F_NUMBER, 0, 0},
};

/*
 * OpenAI's minimum for max_tokens is 1; ollama's num_predict would read a negative one as
 * "no limit", the opposite of what was asked. The sampling fields that become options
 * (temperature, top_p, seed, the penalties; Anthropic's top_k) are checked with the options,
 * with ollama's message naming them.
 */
#define OPENAI_SAMPLING_FIELDS                                                                 \
    {"model", F_STRING, 0, 0}, {"stream", F_BOOL, 0, 0}, {"stream_options", F_OBJECT, 0, 0},  \
        {"max_tokens", F_INTEGER, 1, COUNT_MAX},                                               \
        {"max_completion_tokens", F_INTEGER, 1, COUNT_MAX},                                    \
        {"stop", F_STRING | F_ARRAY, 0, 0}, {"n", F_INTEGER, 0, 0}, {"user", F_STRING, 0, 0},  \
        {"_debug_render_only", F_BOOL, 0, 0}

static const request_field openai_chat_fields[] = {
    OPENAI_SAMPLING_FIELDS,
    {"messages", F_ARRAY, 0, 0},
    {"tools", F_ARRAY, 0, 0},
    {"tool_choice", F_STRING | F_OBJECT, 0, 0},
    {"response_format", F_OBJECT, 0, 0},
    {"reasoning_effort", F_STRING, 0, 0},
    {"reasoning", F_OBJECT, 0, 0},
    {"logprobs", F_BOOL, 0, 0},
    {"top_logprobs", F_INTEGER, 0, 20},
};

static const request_field openai_completion_fields[] = {
    OPENAI_SAMPLING_FIELDS,
    {"prompt", F_STRING, 0, 0},
    {"suffix", F_STRING, 0, 0},
    {"logprobs", F_INTEGER, 0, 20}, /* the legacy API's: how many alternatives per token */
};

static const request_field openai_embeddings_fields[] = {
    {"model", F_STRING, 0, 0},
    {"encoding_format", F_STRING, 0, 0},
    {"user", F_STRING, 0, 0},
};

static const request_field anthropic_fields[] = {
    {"model", F_STRING, 0, 0},
    {"messages", F_ARRAY, 0, 0},
    {"max_tokens", F_INTEGER, 1, COUNT_MAX},
    {"system", F_STRING | F_ARRAY, 0, 0},
    {"stream", F_BOOL, 0, 0},
    {"stop_sequences", F_ARRAY, 0, 0},
    {"tools", F_ARRAY, 0, 0},
    {"tool_choice", F_OBJECT, 0, 0},
    {"thinking", F_OBJECT, 0, 0},
    {"output_config", F_OBJECT, 0, 0},
    {"metadata", F_OBJECT, 0, 0},
};

static const request_field responses_fields[] = {
    {"model", F_STRING, 0, 0},
    {"input", F_STRING | F_ARRAY, 0, 0},
    {"instructions", F_STRING, 0, 0},
    {"stream", F_BOOL, 0, 0},
    {"max_output_tokens", F_INTEGER, 1, COUNT_MAX},
    {"tools", F_ARRAY, 0, 0},
    {"tool_choice", F_STRING | F_OBJECT, 0, 0},
    {"text", F_OBJECT, 0, 0},
    {"reasoning", F_OBJECT, 0, 0},
    {"metadata", F_OBJECT, 0, 0},
    {"parallel_tool_calls", F_BOOL, 0, 0},
    {"store", F_BOOL, 0, 0},
    {"previous_response_id", F_STRING, 0, 0},
    {"truncation", F_STRING, 0, 0},
    {"background", F_BOOL, 0, 0},
    {"prompt_cache_key", F_STRING, 0, 0},
    {"safety_identifier", F_STRING, 0, 0},
    {"user", F_STRING, 0, 0},
};

static const request_field create_fields[] = {
    {"model", F_STRING, 0, 0},
    {"name", F_STRING, 0, 0},
    {"from", F_STRING, 0, 0},
    {"template", F_STRING, 0, 0},
    {"system", F_STRING, 0, 0},
    {"quantize", F_STRING, 0, 0},
    {"quantization", F_STRING, 0, 0},
    {"files", F_OBJECT, 0, 0},
    {"adapters", F_OBJECT, 0, 0},
    {"draft_files", F_OBJECT, 0, 0},
    {"draft_quantize", F_STRING, 0, 0},
    {"license", F_STRING | F_ARRAY, 0, 0},
    {"parameters", F_OBJECT, 0, 0},
    {"messages", F_ARRAY, 0, 0},
    {"stream", F_BOOL, 0, 0},
    {"insecure", F_BOOL, 0, 0}, /* Corral: a base model pulled from an http registry */
};

static const request_field transfer_fields[] = {
    {"model", F_STRING, 0, 0},
    {"name", F_STRING, 0, 0},
    {"insecure", F_BOOL, 0, 0},
    {"stream", F_BOOL, 0, 0},
};

#define TABLE(t) {t, sizeof t / sizeof t[0]}

static const struct {
    const request_field *fields;
    size_t n;
} tables[] = {
    [REQUEST_API_GENERATE] = TABLE(generate_fields),
    [REQUEST_API_CHAT] = TABLE(chat_fields),
    [REQUEST_API_EMBED] = TABLE(embed_fields),
    [REQUEST_API_EMBEDDINGS] = TABLE(embeddings_fields),
    [REQUEST_API_OPENAI_CHAT] = TABLE(openai_chat_fields),
    [REQUEST_API_OPENAI_COMPLETION] = TABLE(openai_completion_fields),
    [REQUEST_API_OPENAI_EMBEDDINGS] = TABLE(openai_embeddings_fields),
    [REQUEST_API_ANTHROPIC] = TABLE(anthropic_fields),
    [REQUEST_API_RESPONSES] = TABLE(responses_fields),
    [REQUEST_API_CREATE] = TABLE(create_fields),
    [REQUEST_API_TRANSFER] = TABLE(transfer_fields),
};

static bool has_type(unsigned types, const json_t *v)
{
    return ((types & F_STRING) && json_is_string(v)) ||
           ((types & F_NUMBER) && json_is_number(v)) ||
           ((types & F_INTEGER) && json_is_integer(v)) ||
           ((types & F_BOOL) && json_is_boolean(v)) || ((types & F_ARRAY) && json_is_array(v)) ||
           ((types & F_OBJECT) && json_is_object(v));
}

/* "a string or an object" for the message. */
static void describe_types(unsigned types, char *out, size_t size)
{
    static const char *const names[] = {"a string", "a number", "an integer",
                                        "a boolean", "an array", "an object"};
    size_t len = 0;
    out[0] = '\0';
    for (unsigned bit = 0; bit < sizeof names / sizeof names[0]; bit++) {
        if (!(types & (1u << bit)))
            continue;
        int n = snprintf(out + len, size - len, "%s%s", len ? " or " : "", names[bit]);
        if (n < 0 || (size_t)n >= size - len)
            return;
        len += (size_t)n;
    }
}

bool request_fields_check(request_api api, const json_t *body, corral_error *err)
{
    const request_field *fields = tables[api].fields;
    for (size_t i = 0; i < tables[api].n; i++) {
        const request_field *f = &fields[i];
        const json_t *v = json_object_get(body, f->name);
        if (!v || json_is_null(v))
            continue;
        if (!has_type(f->types, v)) {
            char expected[96];
            describe_types(f->types, expected, sizeof expected);
            corral_error_set(err, "%s must be %s", f->name, expected);
            return false;
        }
        bool bounded = f->min != 0 || f->max != 0;
        json_int_t n = json_integer_value(v);
        if (bounded && json_is_integer(v) && (n < f->min || n > f->max)) {
            corral_error_set(err, "%s must be between %" JSON_INTEGER_FORMAT
                                  " and %" JSON_INTEGER_FORMAT, f->name, f->min, f->max);
            return false;
        }
    }
    return true;
}

/*
 * OpenAI-compatible endpoints: /v1/chat/completions and /v1/completions over
 * the generation core (server-sent events when stream is true, ending in `data: [DONE]`),
 * /v1/models and /v1/models/:model from the store, and /v1/embeddings run as /api/embed. A
 * request is translated into an /api/chat or /api/generate body; answers and errors take
 * OpenAI's shapes ({"error": {"message", "type", "param", "code"}}).
 */
#include <ctype.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <openssl/evp.h>

#include "server/api/anthropic.h"
#include "server/api/api_build.h"
#include "server/api/api_serve.h"
#include "server/api/sse.h"
#include "server/core/embedding.h"
#include "server/core/generation.h"
#include "server/core/tool_grammar.h"
#include "server/http/body.h"
#include "server/http/json_lossy.h"
#include "server/api/openai.h"
#include "server/models/model_ref.h"
#include "server/http/request_fields.h"
#include "server/server.h"

/* What every chunk of one answer repeats. */
typedef struct openai_answer {
    char id[40];          /* chatcmpl-N or cmpl-N */
    json_int_t created;   /* Unix seconds, the same in every chunk */
    bool include_usage;   /* stream_options.include_usage */
    bool role_sent;       /* the first chat chunk carries delta.role */
    json_int_t text_offset; /* a completion's logprobs: characters from the prompt's start */
    char model[];         /* as the request named it */
} openai_answer;

void openai_error(http_reply *reply, unsigned status, const char *message)
{
    const char *type = status == 400   ? "invalid_request_error"
                       : status == 404 ? "not_found_error"
                                       : "api_error";
    http_reply_json(reply, status,
                    json_pack("{s:{s:o*,s:s,s:n,s:n}}", "error", "message",
                              json_string_lossy(message, strlen(message)), "type", type, "param", "code"));
}

/* length before tool_calls, as OpenAI orders them: an answer cut at the token limit may
 * have had more calls to make, and the client should know it was cut. */
static const char *finish_reason(const generation_info *info, const generation_done *done)
{
    const char *reason = done->reason;
    if (reason && strcmp(reason, "length") == 0)
        return "length";
    /* a completion has no calls (ollama's completions pass the ones its parser reads over) */
    return info->chat && info->n_tool_calls > 0 ? "tool_calls" : "stop";
}

/*
 * ollama's tool calls ({id, function: {index, name, arguments: {...}}}) as OpenAI's: the
 * call's index (0 when the call has none), a type, and the arguments as a JSON string, in a
 * whole answer as in a streamed delta, as ollama writes them.
 */
static json_t *openai_tool_calls(const json_t *calls)
{
    json_t *out = json_array();
    size_t i;
    json_t *call;
    json_array_foreach(calls, i, call) {
        json_t *fn = json_object_get(call, "function");
        char *args = json_dumps(json_object_get(fn, "arguments"), JSON_COMPACT | JSON_ENCODE_ANY);
        json_t *index = json_object_get(fn, "index");
        json_t *c = json_pack("{s:O,s:I,s:s,s:{s:O,s:s}}", "id", json_object_get(call, "id"),
                              "index", json_is_integer(index) ? json_integer_value(index) : 0,
                              "type", "function", "function", "name",
                              json_object_get(fn, "name"), "arguments", args ? args : "{}");
        free(args);
        if (!c || json_array_append_new(out, c) != 0) {
            json_decref(out);
            return NULL;
        }
    }
    return out;
}

/* Token counts; prompt_tokens is the whole prompt, cached or not, and of it
 * prompt_tokens_details.cached_tokens those the runner kept from an earlier request, as OpenAI
 * reports its prompt cache (ollama sends no details). */
static json_t *usage(const generation_done *done)
{
    json_int_t completion = done->eval_count, prompt = done->prompt_tokens;
    json_int_t cached = done->prompt_tokens - done->prompt_eval_count;
    return json_pack("{s:I,s:I,s:I,s:{s:I}}", "prompt_tokens", prompt, "completion_tokens",
                     completion, "total_tokens", prompt + completion, "prompt_tokens_details",
                     "cached_tokens", cached > 0 ? cached : 0);
}

/* The fields every object of an answer starts with. */
static json_t *answer_object(const generation_info *info, const char *object)
{
    const openai_answer *a = info->state;
    return json_pack("{s:s,s:s,s:I,s:s,s:s}", "id", a->id, "object", object, "created",
                     a->created, "model", a->model, "system_fingerprint", "fp_corral");
}

/* One SSE event: a chunk with choice (consumed; NULL: no choice, the usage chunk). */
static bool send_chunk(const generation_info *info, json_t *choice, json_t *chunk_usage,
                       generation_out *out)
{
    const openai_answer *a = info->state;
    json_t *c = answer_object(info, info->chat ? "chat.completion.chunk" : "text_completion");
    json_object_set_new(c, "choices", choice ? json_pack("[o]", choice) : json_array());
    if (a->include_usage) /* OpenAI: null in every chunk but the last */
        json_object_set_new(c, "usage", chunk_usage ? chunk_usage : json_null());
    else
        json_decref(chunk_usage);
    return sse_data(out, c);
}

/* Characters (code points) in text, as the legacy API counts its text_offset. */
static json_int_t characters(const char *text, size_t len)
{
    json_int_t n = 0;
    for (size_t i = 0; i < len; i++)
        n += ((unsigned char)text[i] & 0xC0) != 0x80;
    return n;
}

/*
 * The legacy completions API's logprobs of some tokens (ollama's [{token, logprob,
 * top_logprobs}]): tokens, token_logprobs, top_logprobs (each position's alternatives as
 * {token: logprob}) and text_offset, each token's first character counted from the start of
 * the prompt, which the answer carries on from chunk to chunk.
 */
static json_t *legacy_logprobs(openai_answer *a, const json_t *logprobs)
{
    json_t *tokens = json_array(), *values = json_array(), *tops = json_array(),
           *offsets = json_array();
    size_t i, k;
    json_t *lp, *alt;
    json_array_foreach(logprobs, i, lp) {
        json_t *token = json_object_get(lp, "token");
        json_t *top = json_object();
        json_array_foreach(json_object_get(lp, "top_logprobs"), k, alt)
            if (json_is_string(json_object_get(alt, "token")))
                json_object_set(top, json_string_value(json_object_get(alt, "token")),
                                json_object_get(alt, "logprob"));
        json_array_append(tokens, token);
        json_array_append(values, json_object_get(lp, "logprob"));
        json_array_append_new(tops, top);
        json_array_append_new(offsets, json_integer(a->text_offset));
        a->text_offset += characters(json_string_value(token), json_string_length(token));
    }
    return json_pack("{s:o,s:o,s:o,s:o}", "tokens", tokens, "token_logprobs", values,
                     "top_logprobs", tops, "text_offset", offsets);
}

/*
 * A choice of a chunk: the chat delta (content, the thinking as `reasoning` as ollama sends
 * it, tool calls) or the completion text (and its tokens' logprobs when asked for), and its
 * finish reason. A chat delta carries `content`, "" when the piece has none, as ollama's
 * does, so a client that reads it unguarded meets a string; only the finish chunk and the
 * reasoning half of a split piece (with_content false) leave it out.
 */
static json_t *chunk_choice(const generation_info *info, const generation_delta *d,
                            bool with_content, const char *reason)
{
    openai_answer *a = info->state;
    json_t *choice = json_pack("{s:i,s:s?}", "index", 0, "finish_reason", reason);
    if (!info->chat) {
        json_object_set_new(choice, "text", json_stringn(d->content, d->content_len));
        json_object_set_new(choice, "logprobs",
                            info->logprobs ? legacy_logprobs(a, d->logprobs) : json_null());
        return choice;
    }
    json_t *delta = json_object();
    if (!a->role_sent)
        json_object_set_new(delta, "role", json_string("assistant"));
    a->role_sent = true;
    if (with_content)
        json_object_set_new(delta, "content", json_stringn(d->content, d->content_len));
    if (d->thinking_len > 0)
        json_object_set_new(delta, "reasoning", json_stringn(d->thinking, d->thinking_len));
    if (json_array_size(d->tool_calls) > 0)
        json_object_set_new(delta, "tool_calls", openai_tool_calls(d->tool_calls));
    json_object_set_new(choice, "delta", delta);
    if (json_array_size(d->logprobs) > 0)
        json_object_set_new(choice, "logprobs",
                            json_pack("{s:o}", "content", json_deep_copy(d->logprobs)));
    return choice;
}

static const generation_delta nothing = {.content = "", .thinking = ""};

/* A chat piece with thinking and an answer (content or tool calls) goes as two chunks, as
 * ollama sends it: the reasoning first (with the piece's logprobs), then the answer, so a
 * client that reads one field per chunk misses neither. */
static bool openai_piece(const generation_info *info, const generation_delta *delta,
                         generation_out *out)
{
    bool mixed = info->chat && delta->thinking_len > 0 &&
                 (delta->content_len > 0 || json_array_size(delta->tool_calls) > 0);
    if (!mixed)
        return send_chunk(info, chunk_choice(info, delta, true, NULL), NULL, out);
    generation_delta reasoning = {.content = "", .thinking = delta->thinking,
                                  .thinking_len = delta->thinking_len,
                                  .logprobs = delta->logprobs};
    generation_delta answer = *delta;
    answer.thinking = "";
    answer.thinking_len = 0;
    answer.logprobs = NULL;
    return send_chunk(info, chunk_choice(info, &reasoning, false, NULL), NULL, out) &&
           send_chunk(info, chunk_choice(info, &answer, true, NULL), NULL, out);
}

static bool openai_end(const generation_info *info, const generation_done *done,
                       generation_out *out)
{
    const openai_answer *a = info->state;
    json_t *finish = chunk_choice(info, &nothing, false, finish_reason(info, done));
    return send_chunk(info, finish, NULL, out) &&
           (!a->include_usage || send_chunk(info, NULL, usage(done), out)) &&
           sse_done(out);
}

static bool openai_fail(const generation_info *info, const char *message, generation_out *out)
{
    (void)info;
    return sse_data(out, json_pack("{s:{s:s,s:s,s:n,s:n}}", "error", "message", message, "type",
                                   "api_error", "param", "code"));
}

static json_t *openai_whole(const generation_info *info, const generation_done *done,
                            const generation_delta *answer)
{
    json_t *c = answer_object(info, info->chat ? "chat.completion" : "text_completion");
    json_t *choice =
        json_pack("{s:i,s:s}", "index", 0, "finish_reason", finish_reason(info, done));
    if (info->chat) {
        json_t *message = json_pack("{s:s,s:s%}", "role", "assistant", "content",
                                    answer->content, answer->content_len);
        if (answer->thinking_len > 0)
            json_object_set_new(message, "reasoning",
                                json_stringn(answer->thinking, answer->thinking_len));
        if (json_array_size(answer->tool_calls) > 0)
            json_object_set_new(message, "tool_calls",
                                openai_tool_calls(answer->tool_calls));
        json_object_set_new(choice, "message", message);
        json_object_set_new(choice, "logprobs",
                            info->logprobs
                                ? json_pack("{s:o}", "content",
                                            answer->logprobs ? json_deep_copy(answer->logprobs)
                                                             : json_array())
                                : json_null());
    } else {
        json_object_set_new(choice, "text", json_stringn(answer->content, answer->content_len));
        json_object_set_new(choice, "logprobs", info->logprobs
                                                    ? legacy_logprobs(info->state, answer->logprobs)
                                                    : json_null());
    }
    json_object_set_new(c, "choices", json_pack("[o]", choice));
    json_object_set_new(c, "usage", usage(done));
    return c;
}

/* An empty prompt: nothing generated (ollama loads the model and answers at once). */
static json_t *openai_loaded(const generation_info *info, const char *reason)
{
    (void)reason;
    static const generation_done none = {0};
    return openai_whole(info, &none, &nothing);
}

/* _debug_render_only: the empty answer with the rendered prompt, as ollama gives it. */
static json_t *openai_rendered(const generation_info *info, json_t *debug_info)
{
    json_t *answer = openai_loaded(info, NULL);
    if (answer)
        json_object_set_new(answer, "_debug_info", debug_info);
    else
        json_decref(debug_info);
    return answer;
}

const generation_shape openai_shape = {
    .stream_content_type = "text/event-stream",
    .stream_loaded = true,
    .piece = openai_piece,
    .end = openai_end,
    .fail = openai_fail,
    .whole = openai_whole,
    .loaded = openai_loaded,
    .error = openai_error,
    .rendered = openai_rendered,
};

/* ---- requests ---- */

json_t *openai_read_body(const http_request *req, http_reply *reply)
{
    char message[256];
    json_t *body = http_body_object(req, message, sizeof message);
    if (!body)
        openai_error(reply, 400, message);
    return body;
}

/*
 * OpenAI's sampling fields as ollama options (checked later with the rest); false with a
 * message for a field Corral cannot honour. Absent fields leave the model's parameters be:
 * ollama sets temperature and top_p to 1.0 then, over the Modelfile's, which a model's
 * author did not ask for.
 */
static bool read_options(const json_t *body, json_t *options, char *message, size_t size)
{
    static const char *const same[] = {"temperature", "top_p", "seed", "frequency_penalty",
                                       "presence_penalty"};
    for (size_t i = 0; i < sizeof same / sizeof same[0]; i++) {
        json_t *v = json_object_get(body, same[i]);
        if (v && !json_is_null(v))
            json_object_set(options, same[i], v);
    }
    static const char *const limits[] = {"max_tokens", "max_completion_tokens"}; /* newest last */
    for (size_t i = 0; i < 2; i++) {
        json_t *v = json_object_get(body, limits[i]);
        if (v && !json_is_null(v))
            json_object_set(options, "num_predict", v);
    }
    json_t *stop = json_object_get(body, "stop");
    if (json_is_string(stop))
        json_object_set_new(options, "stop", json_pack("[O]", stop));
    else if (json_is_array(stop))
        json_object_set(options, "stop", stop);
    else if (stop && !json_is_null(stop)) {
        snprintf(message, size, "stop must be a string or an array of strings");
        return false;
    }
    json_t *n = json_object_get(body, "n");
    if (n && !json_is_null(n) && json_integer_value(n) != 1) {
        snprintf(message, size, "n must be 1: Corral answers one choice per request");
        return false;
    }
    return true;
}

bool openai_read_reasoning(const json_t *body, chat_think *think, char *message, size_t size)
{
    /* ollama's precedence: a reasoning object, even one without an effort, wins */
    json_t *reasoning = json_object_get(body, "reasoning");
    json_t *effort = reasoning && !json_is_null(reasoning)
                         ? json_object_get(reasoning, "effort")
                         : json_object_get(body, "reasoning_effort");
    if (!effort || json_is_null(effort))
        return true;
    static const struct {
        const char *effort;
        chat_think think;
    } map[] = {
        {"none", CHAT_THINK_OFF},   {"minimal", CHAT_THINK_LOW}, {"low", CHAT_THINK_LOW},
        {"medium", CHAT_THINK_MEDIUM}, {"high", CHAT_THINK_HIGH}, {"max", CHAT_THINK_MAX},
        {"xhigh", CHAT_THINK_MAX},  {"ultra", CHAT_THINK_MAX},
    };
    const char *given = json_string_value(effort);
    for (size_t i = 0; given && i < sizeof map / sizeof map[0]; i++)
        if (strcmp(given, map[i].effort) == 0) {
            *think = map[i].think;
            return true;
        }
    snprintf(message, size,
             "reasoning_effort must be none, minimal, low, medium, high, xhigh, ultra or max");
    return false;
}

bool openai_read_tool_choice(const json_t *choice, bool name_in_function, chat_request *req,
                             api_build *b)
{
    const char *word = json_string_value(choice);
    if (!choice || json_is_null(choice) ||
        (word && (strcmp(word, "none") == 0 || strcmp(word, "auto") == 0)))
        return true;
    if (word && strcmp(word, "required") == 0) {
        req->tool_choice = CHAT_TOOL_CHOICE_REQUIRED;
        return true;
    }
    const char *type = json_string_value(json_object_get(choice, "type"));
    const json_t *named = name_in_function ? json_object_get(choice, "function") : choice;
    const char *name = json_string_value(json_object_get(named, "name"));
    if (type && strcmp(type, "function") == 0 && name)
        return tool_choice_set_named(req, name) || API_OUT_OF_MEMORY(b);
    return api_refuse(b, 400, "tool_choice must be \"none\", \"auto\", \"required\" or %s",
                      name_in_function
                          ? "{\"type\": \"function\", \"function\": {\"name\": ...}}"
                          : "{\"type\": \"function\", \"name\": ...}");
}

/* A response_format type without surrounding spaces, in lower case, in buf; NULL when it is
 * no string. One too long for buf to hold is kept as it came, to be named in the refusal. */
static const char *format_type(const json_t *type, char *buf, size_t size)
{
    const char *text = json_string_value(type);
    if (!text)
        return NULL;
    size_t len = json_string_length(type);
    while (len > 0 && isspace((unsigned char)*text))
        text++, len--;
    while (len > 0 && isspace((unsigned char)text[len - 1]))
        len--;
    if (len >= size)
        return json_string_value(type);
    for (size_t i = 0; i < len; i++)
        buf[i] = (char)tolower((unsigned char)text[i]);
    buf[len] = '\0';
    return buf;
}

/*
 * The chat fields that change the request's shape: logprobs, tools (withheld when tool_choice
 * is "none") and the choice (openai_read_tool_choice), reasoning_effort as think, and
 * response_format as ollama's `format` ("json" for json_object, the schema for json_schema).
 */
static bool read_chat_features(const json_t *body, chat_request *req, api_build *b)
{
    req->logprobs = json_is_true(json_object_get(body, "logprobs")); /* types checked already */
    req->top_logprobs = (int)json_integer_value(json_object_get(body, "top_logprobs"));
    json_t *tools = json_object_get(body, "tools");
    json_t *choice = json_object_get(body, "tool_choice");
    if (tools && !json_is_null(tools) && !json_is_array(tools))
        return api_refuse(b, 400, "tools must be an array");
    bool withheld = json_is_string(choice) && strcmp(json_string_value(choice), "none") == 0;
    if (json_array_size(tools) > 0 && !withheld) {
        if (!chat_request_check_tools(tools, b->message, b->size)) {
            b->status = 400;
            return false;
        }
        req->tools = json_incref(tools);
    }
    if (!openai_read_tool_choice(choice, true, req, b))
        return false;
    if (!openai_read_reasoning(body, &req->think, b->message, b->size)) {
        b->status = 400;
        return false;
    }
    json_t *response_format = json_object_get(body, "response_format");
    char type_buf[16]; /* the type trimmed and lower-cased, as ollama reads it */
    const char *type = format_type(json_object_get(response_format, "type"), type_buf,
                                   sizeof type_buf);
    if (!type || strcmp(type, "text") == 0)
        return true;
    if (strcmp(type, "json_object") == 0)
        return (req->format = json_string("json")) || API_OUT_OF_MEMORY(b);
    json_t *schema = json_object_get(json_object_get(response_format, "json_schema"), "schema");
    if (strcmp(type, "json_schema") == 0 && json_is_object(schema)) {
        req->format = json_incref(schema);
        return true;
    }
    return api_refuse(b, 400, "%s", strcmp(type, "json_schema") == 0
                                        ? "response_format.json_schema.schema must be an object"
                                        : "response_format.type must be text, json_object or "
                                          "json_schema");
}

/* An assistant's tool calls as ollama's: the arguments a JSON object, not its text; each
 * noted in names (call id -> function name) for the results that answer it. */
static bool add_tool_calls(const json_t *calls, size_t at, chat_message *m, json_t *names,
                           api_build *b)
{
    size_t i;
    json_t *call;
    json_array_foreach(calls, i, call) {
        json_t *fn = json_object_get(call, "function");
        const char *name = json_string_value(json_object_get(fn, "name"));
        const char *id = json_string_value(json_object_get(call, "id"));
        json_t *args = json_object_get(fn, "arguments");
        json_t *parsed = json_is_string(args) ? json_loads(json_string_value(args), 0, NULL)
                                              : json_incref(args);
        bool ok = name && json_is_object(parsed)
                      ? (chat_message_add_tool_call(m, id, name, parsed) &&
                         (!id || json_object_set_new(names, id, json_string(name)) == 0)) ||
                            API_OUT_OF_MEMORY(b)
                      : api_refuse(b, 400, "messages[%zu].tool_calls[%zu]: function.name must be a "
                                           "string and function.arguments a JSON object", at, i);
        json_decref(parsed);
        if (!ok)
            return false;
    }
    return true;
}

/* Set *field to a copy of text (a JSON string); false when out of memory. */
static bool set_text(char **field, const json_t *text)
{
    free(*field);
    *field = strndup(json_string_value(text), json_string_length(text));
    return *field != NULL;
}

/*
 * What an OpenAI message carries beside its text, set on the last message it made:
 * `reasoning` as thinking, an assistant's tool_calls, and for a tool result its
 * tool_call_id and the function's name (`name`, else the call's with that id).
 */
static bool add_message_extras(const json_t *m, size_t at, chat_request *req, json_t *names,
                               api_build *b)
{
    chat_message *last = &req->messages[req->n_messages - 1];
    json_t *reasoning = json_object_get(m, "reasoning");
    if (json_is_string(reasoning) && !set_text(&last->thinking, reasoning))
        return API_OUT_OF_MEMORY(b);
    if (!add_tool_calls(json_object_get(m, "tool_calls"), at, last, names, b))
        return false;
    json_t *call_id = json_object_get(m, "tool_call_id");
    if (json_is_string(call_id) && !set_text(&last->tool_call_id, call_id))
        return API_OUT_OF_MEMORY(b);
    json_t *name = json_object_get(m, "name");
    if (!json_is_string(name) && json_is_string(call_id))
        name = json_object_get(names, json_string_value(call_id));
    if (json_is_string(name) && strcmp(last->role, "tool") == 0 &&
        !set_text(&last->tool_name, name))
        return API_OUT_OF_MEMORY(b);
    return true;
}

/*
 * An input_audio part's clip appended to m's media: {"data": base64, "format"}, the format one
 * of OpenAI's two ("wav", "mp3") or left out, as ollama reads none. The clip is told from an
 * image by its bytes later, as every media item is. Refused with ollama's messages, after
 * where (the part).
 */
static bool add_input_audio(chat_message *m, const json_t *audio, const char *where,
                            api_build *b)
{
    if (!json_is_object(audio))
        return api_refuse(b, 400, "%s: invalid input_audio format", where);
    json_t *data = json_object_get(audio, "data");
    if (!json_is_string(data))
        return api_refuse(b, 400, "%s: invalid input_audio format: missing data", where);
    json_t *format = json_object_get(audio, "format");
    const char *name = json_string_value(format);
    if (format && !json_is_null(format) && !name)
        return api_refuse(b, 400, "%s: input_audio format must be \"wav\" or \"mp3\"", where);
    if (name && strcmp(name, "wav") != 0 && strcmp(name, "mp3") != 0)
        return api_refuse(b, 400, "%s: unsupported input_audio format \"%.32s\": expected "
                                  "\"wav\" or \"mp3\"", where, name);
    return chat_message_add_image(m, json_string_value(data), json_string_length(data)) ||
           API_OUT_OF_MEMORY(b);
}

/* An input_audio part as a message of role of its own with the clip, as ollama makes one. */
static bool add_audio_message(chat_request *req, const char *role, const json_t *audio,
                              const char *where, api_build *b)
{
    chat_message m = {.role = strdup(role), .content = strdup("")};
    bool ok = (m.role && m.content) || API_OUT_OF_MEMORY(b);
    ok = ok && add_input_audio(&m, audio, where, b) &&
         (chat_request_push_message(req, &m) || API_OUT_OF_MEMORY(b));
    chat_message_clear(&m);
    return ok;
}

/*
 * A tool result's parts as one tool message: its text parts joined by newlines, its images
 * and audio clips with it. ollama makes each part a message of its own, which leaves every part but the last
 * without the call's id and function name (a template then shows a result of nothing); tool
 * results made of several parts are what MCP tools return.
 */
static bool add_tool_parts(chat_request *req, const json_t *parts, size_t at, api_build *b)
{
    chat_message m = {.role = strdup("tool"), .content = strdup("")};
    bool ok = (m.role && m.content) || API_OUT_OF_MEMORY(b);
    size_t len = 0, k;
    json_t *part;
    json_array_foreach(parts, k, part) {
        const char *type = json_string_value(json_object_get(part, "type"));
        json_t *text = json_object_get(part, "text");
        if (!ok)
            break;
        char where[64];
        snprintf(where, sizeof where, "messages[%zu].content[%zu]", at, k);
        if (type && strcmp(type, "image_url") == 0) {
            ok = api_build_image_url(&m, json_object_get(part, "image_url"), where, b);
        } else if (type && strcmp(type, "input_audio") == 0) {
            ok = add_input_audio(&m, json_object_get(part, "input_audio"), where, b);
        } else if (!type || strcmp(type, "text") != 0) {
            ok = api_refuse(b, 400, "messages[%zu].content[%zu]: %s input is not supported yet",
                            at, k, type ? type : "untyped");
        } else if (!json_is_string(text)) {
            ok = api_refuse(b, 400, "messages[%zu].content[%zu].text must be a string", at, k);
        } else {
            ok = chat_message_append_text(&m, &len, "\n", json_string_value(text),
                                          json_string_length(text)) ||
                 API_OUT_OF_MEMORY(b);
        }
    }
    ok = ok && (chat_request_push_message(req, &m) || API_OUT_OF_MEMORY(b));
    chat_message_clear(&m);
    return ok;
}

/*
 * OpenAI's messages as the request's: content a string, null (an assistant's tool call) or
 * an array of parts, each text part a message of its own as ollama makes it (a tool
 * result's parts make one message); "developer" (the newer name of the system role) is
 * "system".
 */
static bool read_messages(const json_t *in, chat_request *req, api_build *b)
{
    if (!json_is_array(in))
        return api_refuse(b, 400, "messages must be an array");
    if (json_array_size(in) == 0)
        return api_refuse(b, 400, "[] is too short - 'messages'");
    json_t *names = json_object(); /* call id -> function name, for tool results */
    bool ok = names || API_OUT_OF_MEMORY(b);
    size_t i;
    json_t *m;
    json_array_foreach(in, i, m) {
        const char *role = json_string_value(json_object_get(m, "role"));
        json_t *content = json_object_get(m, "content");
        if (!ok)
            break;
        if (!role) {
            ok = api_refuse(b, 400, "messages[%zu].role must be a string", i);
            break;
        }
        if (strcasecmp(role, "developer") == 0)
            role = "system";
        if (json_is_string(content))
            ok = chat_request_add_text(req, role, json_string_value(content),
                                       json_string_length(content)) ||
                 API_OUT_OF_MEMORY(b);
        else if (!content || json_is_null(content) ||
                 (json_is_array(content) && json_array_size(content) == 0))
            ok = chat_request_add_text(req, role, "", 0) || API_OUT_OF_MEMORY(b);
        else if (!json_is_array(content))
            ok = api_refuse(b, 400, "messages[%zu].content must be a string or an array", i);
        else if (strcasecmp(role, "tool") == 0)
            ok = add_tool_parts(req, content, i, b);
        bool parts = json_is_array(content) && strcasecmp(role, "tool") != 0;
        size_t k;
        json_t *part;
        json_array_foreach(parts ? content : NULL, k, part) {
            const char *type = json_string_value(json_object_get(part, "type"));
            json_t *text = json_object_get(part, "text");
            if (!ok)
                break;
            char where[64];
            snprintf(where, sizeof where, "messages[%zu].content[%zu]", i, k);
            if (type && strcmp(type, "image_url") == 0)
                ok = api_build_image_message(req, role, json_object_get(part, "image_url"), where,
                                             b);
            else if (type && strcmp(type, "input_audio") == 0)
                ok = add_audio_message(req, role, json_object_get(part, "input_audio"), where, b);
            else if (!type || strcmp(type, "text") != 0)
                ok = api_refuse(b, 400, "messages[%zu].content[%zu]: %s input is not supported yet",
                                i, k, type ? type : "untyped");
            else if (!json_is_string(text))
                ok = api_refuse(b, 400, "messages[%zu].content[%zu].text must be a string", i, k);
            else
                ok = chat_request_add_text(req, role, json_string_value(text),
                                           json_string_length(text)) ||
                     API_OUT_OF_MEMORY(b);
        }
        ok = ok && add_message_extras(m, i, req, names, b);
    }
    json_decref(names);
    return ok;
}

static atomic_uint_fast64_t answers_made;

void *openai_answer_create(const json_t *body, bool chat)
{
    const char *model = json_string_value(json_object_get(body, "model"));
    size_t len = model ? strlen(model) : 0;
    openai_answer *a = calloc(1, sizeof *a + len + 1);
    if (!a)
        return NULL;
    uint64_t n = atomic_fetch_add(&answers_made, 1) + 1;
    snprintf(a->id, sizeof a->id, "%s-%" PRIu64, chat ? "chatcmpl" : "cmpl", n);
    a->created = (json_int_t)time(NULL);
    a->include_usage =
        json_is_true(json_object_get(json_object_get(body, "stream_options"), "include_usage"));
    json_t *prompt = chat ? NULL : json_object_get(body, "prompt");
    if (json_is_string(prompt)) /* a completion's tokens are counted from the prompt's start */
        a->text_offset = characters(json_string_value(prompt), json_string_length(prompt));
    memcpy(a->model, model ? model : "", len + 1);
    return a;
}

unsigned openai_parse(const json_t *body, bool chat, chat_request **out, char *message,
                      size_t size)
{
    corral_error err = {{0}};
    if (!request_fields_check(chat ? REQUEST_API_OPENAI_CHAT : REQUEST_API_OPENAI_COMPLETION,
                              body, &err)) {
        snprintf(message, size, "%s", err.message);
        return 400;
    }
    api_build b = {.message = message, .size = size, .status = 200};
    chat_request *req = chat_request_create(chat);
    const char *model = json_string_value(json_object_get(body, "model"));
    bool ok = (req && (!model || (req->model = strdup(model))) &&
               (req->options = json_object())) ||
              API_OUT_OF_MEMORY(&b);
    if (req) {
        req->stream = json_is_true(json_object_get(body, "stream"));
        req->debug_render_only = json_is_true(json_object_get(body, "_debug_render_only"));
    }
    if (ok && !read_options(body, req->options, message, size)) {
        b.status = 400;
        ok = false;
    }
    if (ok && chat) {
        ok = read_messages(json_object_get(body, "messages"), req, &b) &&
             read_chat_features(body, req, &b);
    } else if (ok) {
        json_t *prompt = json_object_get(body, "prompt");
        json_t *suffix = json_object_get(body, "suffix");
        if (!json_is_string(prompt))
            ok = api_refuse(&b, 400, "prompt must be a string");
        else if (suffix && !json_is_null(suffix) && !json_is_string(suffix))
            ok = api_refuse(&b, 400, "suffix must be a string");
        else /* a suffix is fill-in-the-middle, as /api/generate's */
            ok = (set_text(&req->prompt, prompt) &&
                  (!json_is_string(suffix) || set_text(&req->suffix, suffix))) ||
                 API_OUT_OF_MEMORY(&b);
        json_t *logprobs = json_object_get(body, "logprobs"); /* an integer: types checked */
        if (ok && json_is_integer(logprobs)) {
            req->logprobs = true;
            req->top_logprobs = (int)json_integer_value(logprobs);
        }
    }
    if (!ok) {
        chat_request_free(req);
        return b.status;
    }
    *out = req;
    return 200;
}

/* /v1/chat/completions (chat) and /v1/completions as /api/chat and /api/generate. */
static void handle_completion(server *srv, const http_request *req, http_reply *reply, bool chat)
{
    json_t *body = openai_read_body(req, reply);
    if (!body)
        return;
    char message[512];
    chat_request *request = NULL;
    unsigned status = openai_parse(body, chat, &request, message, sizeof message);
    openai_answer *answer = status == 200 ? openai_answer_create(body, chat) : NULL;
    api_serve_parsed(srv, status, message, request, &openai_shape, answer, reply);
    json_decref(body);
}

static void handle_chat_completions(void *ctx, const http_request *req, http_reply *reply)
{
    handle_completion(ctx, req, reply, true);
}

static void handle_completions(void *ctx, const http_request *req, http_reply *reply)
{
    handle_completion(ctx, req, reply, false);
}

/* ---- models and embeddings ---- */

/* A model as OpenAI lists it or, for a client that sent anthropic-version (Anthropic's SDKs
 * list models at this same path), as Anthropic does: type, id, display_name and an RFC 3339
 * created_at. Corral's names are what a user knows the model by, so they are the display
 * name too. */
static json_t *model_object(const char *id, const struct timespec *modified,
                            const corral_model_name *name, bool anthropic)
{
    if (!anthropic)
        return json_pack("{s:s,s:s,s:I,s:s}", "id", id, "object", "model", "created",
                         (json_int_t)modified->tv_sec, "owned_by", name->namespace);
    struct tm tm;
    char created[32];
    time_t seconds = modified->tv_sec;
    if (!gmtime_r(&seconds, &tm) ||
        strftime(created, sizeof created, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
        return NULL;
    return json_pack("{s:s,s:s,s:s,s:s}", "type", "model", "id", id, "display_name", id,
                     "created_at", created);
}

static void models_error(const http_request *req, http_reply *reply, unsigned status,
                         const char *message)
{
    if (req->anthropic_version)
        anthropic_reply_error(reply, status, message);
    else
        openai_error(reply, status, message);
}

/* Every model, newest first: OpenAI's list, or Anthropic's page of them all (has_more false,
 * first_id and last_id; its limit and cursors are not read, as one page holds the lot). */
static void handle_models(void *ctx, const http_request *req, http_reply *reply)
{
    server *srv = ctx;
    bool anthropic = req->anthropic_version != NULL;
    corral_store_entry *entries;
    size_t n;
    corral_error err = {{0}};
    if (corral_store_list(srv->store, &entries, &n, &err) != CORRAL_STORE_OK) {
        models_error(req, reply, 500, err.message);
        return;
    }
    json_t *data = json_array();
    for (size_t i = 0; data && i < n; i++) {
        json_t *entry = model_object(entries[i].display, &entries[i].modified, &entries[i].name,
                                     anthropic);
        if (!entry || json_array_append_new(data, entry) != 0) {
            json_decref(data);
            data = NULL;
        }
    }
    corral_store_list_free(entries, n);
    json_t *list = NULL;
    if (data && anthropic)
        list = json_pack("{s:o,s:b,s:O,s:O}", "data", data, "has_more", 0, "first_id",
                         n ? json_object_get(json_array_get(data, 0), "id") : json_null(),
                         "last_id",
                         n ? json_object_get(json_array_get(data, n - 1), "id") : json_null());
    else if (data)
        list = json_pack("{s:s,s:o}", "object", "list", "data", data);
    if (list)
        http_reply_json(reply, 200, list);
    else
        models_error(req, reply, 500, "out of memory");
}

static void handle_model(void *ctx, const http_request *req, http_reply *reply)
{
    server *srv = ctx;
    model_ref *ref = NULL;
    corral_error err = {{0}};
    switch (model_ref_open(srv->store, req->path_param, &ref, &err)) {
    case MODEL_REF_OK: {
        json_t *model = model_object(req->path_param, &ref->modified, &ref->name,
                                     req->anthropic_version != NULL);
        if (model)
            http_reply_json(reply, 200, model);
        else
            models_error(req, reply, 500, "out of memory");
        break;
    }
    case MODEL_REF_INVALID_NAME: models_error(req, reply, 400, err.message); break;
    case MODEL_REF_NOT_FOUND: models_error(req, reply, 404, err.message); break;
    default: models_error(req, reply, 500, err.message); break;
    }
    model_ref_free(ref);
}

/* A vector as OpenAI's base64 encoding_format: its float32 values' bytes, little-endian. */
static json_t *base64_vector(const json_t *vector)
{
    size_t n = json_array_size(vector);
    unsigned char *bytes = malloc(n * 4 + 1);
    char *text = malloc(4 * ((n * 4 + 2) / 3) + 1);
    json_t *out = NULL;
    if (bytes && text) {
        for (size_t i = 0; i < n; i++) {
            float f = (float)json_number_value(json_array_get(vector, i));
            uint32_t u;
            memcpy(&u, &f, 4);
            for (int b = 0; b < 4; b++)
                bytes[i * 4 + (size_t)b] = (unsigned char)(u >> (8 * b));
        }
        int len = EVP_EncodeBlock((unsigned char *)text, bytes, (int)(n * 4));
        out = json_stringn(text, (size_t)len);
    }
    free(bytes);
    free(text);
    return out;
}

/* /v1/embeddings as /api/embed: input a string or strings, encoding_format float or base64
 * (in any case, as ollama reads it). */
static void handle_embeddings(void *ctx, const http_request *req, http_reply *reply)
{
    json_t *body = openai_read_body(req, reply);
    if (!body)
        return;
    corral_error err = {{0}};
    if (!request_fields_check(REQUEST_API_OPENAI_EMBEDDINGS, body, &err)) {
        openai_error(reply, 400, err.message);
        json_decref(body);
        return;
    }
    const char *format = json_string_value(json_object_get(body, "encoding_format"));
    json_t *dims = json_object_get(body, "dimensions");
    json_t *inputs = embedding_inputs(json_object_get(body, "input"));
    embedding_params params = {.inputs = inputs, .normalize = true,
                               .facts = http_reply_facts(reply),
                               .client_fd = http_reply_client_fd(reply)};
    if (!inputs || json_array_size(inputs) == 0) {
        openai_error(reply, 400, inputs ? "input must not be empty" : "invalid input type");
    } else if (format && *format && strcasecmp(format, "float") != 0 &&
               strcasecmp(format, "base64") != 0) {
        char message[160];
        snprintf(message, sizeof message,
                 "Invalid value for 'encoding_format' = %.64s. Supported values: ['float', "
                 "'base64'].", format);
        openai_error(reply, 400, message);
    } else if (dims && !json_is_null(dims) &&
               (!json_is_integer(dims) || json_integer_value(dims) <= 0)) {
        openai_error(reply, 400, "dimensions must be a positive integer");
    } else {
        params.dimensions = (uint32_t)(json_integer_value(dims) > 1 << 20
                                           ? 1 << 20
                                           : json_integer_value(dims));
        embedding_result result;
        unsigned status = embedding_run(ctx, body, &params, &result, &err);
        json_t *data = status == 200 ? json_array() : NULL;
        size_t i;
        json_t *vector;
        json_array_foreach(status == 200 ? result.vectors : NULL, i, vector) {
            bool base64 = format && strcasecmp(format, "base64") == 0;
            json_array_append_new(data, json_pack("{s:s,s:o,s:I}", "object", "embedding",
                                                  "embedding", base64 ? base64_vector(vector)
                                                                      : json_incref(vector),
                                                  "index", (json_int_t)i));
        }
        if (status != 200)
            openai_error(reply, status, err.message);
        else
            http_reply_json(reply, 200,
                            json_pack("{s:s,s:o,s:O,s:{s:I,s:I}}", "object", "list", "data", data,
                                      "model", json_object_get(body, "model"), "usage",
                                      "prompt_tokens", result.prompt_tokens, "total_tokens",
                                      result.prompt_tokens));
        embedding_result_free(&result);
    }
    json_decref(inputs);
    json_decref(body);
}

static const http_route routes[] = {
    {"POST", "/v1/chat/completions", false, handle_chat_completions, NULL},
    {"POST", "/v1/completions", false, handle_completions, NULL},
    {"POST", "/v1/embeddings", false, handle_embeddings, NULL},
    {"GET", "/v1/models", false, handle_models, NULL},
    {"GET", "/v1/models/", true, handle_model, NULL},
};

const route_table routes_openai = {routes, sizeof routes / sizeof routes[0]};

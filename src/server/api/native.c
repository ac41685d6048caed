/*
 * /api/generate and /api/chat in ollama's native shape: a body read into the typed
 * chat_request, and NDJSON chunks (or one object for stream:false) with ollama's final
 * metrics; and /api/embed with the legacy /api/embeddings. The work itself is generation.c's
 * and embedding.c's.
 */
#include "server/api/native.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/core/embedding.h"
#include "server/http/body.h"
#include "server/http/request_fields.h"
#include "server/server.h"

/* A chunk of the answer in the endpoint's shape; thinking and tool calls only when there
 * are some, as ollama omits empty ones. */
static json_t *chunk(const generation_info *info, const generation_delta *d, bool done)
{
    json_t *c = json_object();
    json_object_set_new(c, "model", json_string(info->model));
    json_object_set_new(c, "created_at", generation_created_at());
    json_t *part = c;
    if (info->chat) {
        part = json_pack("{s:s,s:s#}", "role", "assistant", "content", d->content,
                         (int)d->content_len);
        json_object_set_new(c, "message", part);
    } else {
        json_object_set_new(c, "response", json_stringn(d->content, d->content_len));
    }
    if (d->thinking_len > 0)
        json_object_set_new(part, "thinking", json_stringn(d->thinking, d->thinking_len));
    if (json_array_size(d->tool_calls) > 0)
        json_object_set(part, "tool_calls", (json_t *)d->tool_calls);
    if (json_array_size(d->logprobs) > 0)
        json_object_set_new(c, "logprobs", json_deep_copy(d->logprobs));
    json_object_set_new(c, "done", json_boolean(done));
    return c;
}

static const generation_delta nothing = {.content = "", .thinking = ""};

/* The final chunk: how the answer ended, and ollama's metrics. */
static json_t *final_chunk(const generation_info *info, const generation_done *done,
                           const generation_delta *answer)
{
    json_t *c = chunk(info, answer, true);
    if (done->reason)
        json_object_set_new(c, "done_reason", json_string(done->reason));
    if (!info->chat && !info->raw && done->context)
        json_object_set(c, "context", (json_t *)done->context);
    json_object_set_new(c, "total_duration", json_integer(generation_elapsed_ns(info)));
    if (info->load_ns)
        json_object_set_new(c, "load_duration", json_integer(info->load_ns));
    static const char *const metrics[] = {"prompt_eval_count", "prompt_eval_duration",
                                          "eval_count", "eval_duration"};
    const int64_t values[] = {done->prompt_eval_count, done->prompt_eval_duration_ns,
                              done->eval_count, done->eval_duration_ns};
    for (size_t i = 0; i < 4; i++)
        if (values[i] != 0) /* ollama omits zero values */
            json_object_set_new(c, metrics[i], json_integer(values[i]));
    if (done->context_shifts > 0) /* Corral says when the context overflowed */
        json_object_set_new(c, "context_shifts", json_integer(done->context_shifts));
    if (done->prompt_truncated > 0)
        json_object_set_new(c, "prompt_truncated", json_integer(done->prompt_truncated));
    if (info->messages_dropped > 0) /* and when `truncate` dropped whole messages */
        json_object_set_new(c, "messages_dropped",
                            json_integer((json_int_t)info->messages_dropped));
    return c;
}

static bool native_piece(const generation_info *info, const generation_delta *delta,
                         generation_out *out)
{
    return generation_out_json(out, "", chunk(info, delta, false), "\n");
}

/* The final chunk, with a generate's tool calls (held for it, as ollama gives them). */
static bool native_end(const generation_info *info, const generation_done *done,
                       generation_out *out)
{
    generation_delta calls = nothing;
    calls.tool_calls = done->tool_calls;
    return generation_out_json(out, "", final_chunk(info, done, &calls), "\n");
}

static bool native_fail(const generation_info *info, const char *message, generation_out *out)
{
    (void)info;
    return generation_out_json(out, "", json_pack("{s:s}", "error", message), "\n");
}

static json_t *native_loaded(const generation_info *info, const char *reason)
{
    json_t *c = chunk(info, &nothing, true);
    json_object_set_new(c, "done_reason", json_string(reason));
    return c;
}

/* _debug_render_only: ollama's empty answer object (its Go zero values: an empty response or
 * message, done false) carrying the rendered prompt, so clients read it as any answer. */
static json_t *native_rendered(const generation_info *info, json_t *debug_info)
{
    json_t *empty = info->chat ? json_pack("{s:s,s:s}", "role", "", "content", "")
                               : json_string("");
    return json_pack("{s:s,s:o,s:o,s:b,s:o}", "model", info->model, "created_at",
                     generation_created_at(), info->chat ? "message" : "response", empty,
                     "done", 0, "_debug_info", debug_info);
}

static void native_error(http_reply *reply, unsigned status, const char *message)
{
    http_reply_error(reply, status, "%s", message);
}

const generation_shape native_shape = {
    .stream_content_type = "application/x-ndjson",
    .piece = native_piece,
    .end = native_end,
    .fail = native_fail,
    .whole = final_chunk,
    .loaded = native_loaded,
    .error = native_error,
    .rendered = native_rendered,
};

/* ---- requests ---- */

/* What parsing a body is doing: where a mistake is reported, and whether memory ran out. */
typedef struct parse {
    char *message;
    size_t size;
    unsigned status; /* 200 until something fails */
} parse;

static bool refuse(parse *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static bool refuse(parse *p, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->message, p->size, fmt, ap);
    va_end(ap);
    p->status = 400;
    return false;
}

static bool out_of_memory(parse *p)
{
    snprintf(p->message, p->size, "out of memory");
    p->status = 500;
    return false;
}

/* A copy of v's text (NULL when v is not a string); false only when out of memory. */
static bool copy_string(parse *p, const json_t *v, char **out)
{
    *out = NULL;
    if (!json_is_string(v))
        return true;
    *out = strndup(json_string_value(v), json_string_length(v));
    return *out || out_of_memory(p);
}

static bool is_string_or_null(const json_t *v)
{
    return !v || json_is_null(v) || json_is_string(v);
}

/* images: base64 strings, kept as given; where names the field for a message. */
static bool read_images(parse *p, const json_t *images, const char *where, chat_image **out,
                        size_t *n)
{
    size_t count = json_array_size(images);
    if (count == 0)
        return true;
    if (!(*out = calloc(count, sizeof **out)))
        return out_of_memory(p);
    size_t i;
    json_t *image;
    json_array_foreach(images, i, image) {
        if (!json_is_string(image))
            return refuse(p, "%simages[%zu] must be a base64 string", where, i);
        if (!copy_string(p, image, &(*out)[i].base64))
            return false;
        (*out)[i].len = json_string_length(image);
        *n = i + 1;
    }
    return true;
}

static bool read_tool_calls(parse *p, const json_t *calls, size_t at, chat_message *m)
{
    if (calls && !json_is_null(calls) && !json_is_array(calls))
        return refuse(p, "messages[%zu].tool_calls must be an array", at);
    size_t count = json_array_size(calls);
    if (count == 0)
        return true;
    if (!(m->tool_calls = calloc(count, sizeof *m->tool_calls)))
        return out_of_memory(p);
    size_t k;
    json_t *call;
    json_array_foreach(calls, k, call) {
        json_t *fn = json_object_get(call, "function");
        json_t *arguments = json_object_get(fn, "arguments");
        json_t *index = json_object_get(fn, "index");
        /* arguments as their JSON text, as OpenAI's API carries them: clients that move a
         * conversation between the two APIs send them so; ollama refuses them */
        json_t *parsed = json_is_string(arguments)
                             ? json_loadb(json_string_value(arguments),
                                          json_string_length(arguments), JSON_REJECT_DUPLICATES,
                                          NULL)
                             : json_incref(arguments);
        if (!json_is_string(json_object_get(fn, "name")) ||
            (parsed && !json_is_null(parsed) && !json_is_object(parsed)) ||
            (json_is_string(arguments) && !parsed)) {
            json_decref(parsed);
            return refuse(p, "messages[%zu].tool_calls[%zu] must be {\"function\": "
                             "{\"name\", \"arguments\": {...}}}, the arguments an object "
                             "or its JSON text", at, k);
        }
        chat_tool_call *c = &m->tool_calls[k];
        m->n_tool_calls = k + 1;
        c->index = json_is_integer(index) ? json_integer_value(index) : -1;
        c->arguments = json_is_object(parsed) ? parsed : NULL;
        if (!c->arguments)
            json_decref(parsed);
        if (!copy_string(p, json_object_get(fn, "name"), &c->name) ||
            !copy_string(p, json_object_get(call, "id"), &c->id))
            return false;
    }
    return true;
}

/* One message: its text fields strings (absent or null role and content: "", as ollama's Go
 * structs decode them, so no template meets an undefined content), its tool calls each a
 * function with a name and object arguments (what templates read of them). */
static bool read_message(parse *p, const json_t *in, size_t at, chat_message *m)
{
    static const char *const text_fields[] = {"role", "content", "thinking", "tool_name"};
    char **targets[] = {&m->role, &m->content, &m->thinking, &m->tool_name};
    if (!json_is_object(in))
        return refuse(p, "messages[%zu] must be an object", at);
    for (size_t f = 0; f < sizeof text_fields / sizeof text_fields[0]; f++) {
        json_t *v = json_object_get(in, text_fields[f]);
        if (!is_string_or_null(v))
            return refuse(p, "messages[%zu].%s must be a string", at, text_fields[f]);
        if (!copy_string(p, v, targets[f]))
            return false;
        if (f < 2 && !*targets[f] && !(*targets[f] = strdup("")))
            return out_of_memory(p);
    }
    chat_role_normalize(m->role); /* a client's "User" is a user turn, as in ollama */
    char where[48];
    snprintf(where, sizeof where, "messages[%zu].", at);
    return read_tool_calls(p, json_object_get(in, "tool_calls"), at, m) &&
           copy_string(p, json_object_get(in, "tool_call_id"), &m->tool_call_id) &&
           read_images(p, json_object_get(in, "images"), where, &m->images, &m->n_images);
}

static bool read_messages(parse *p, const json_t *messages, chat_request *req)
{
    if (messages && !json_is_null(messages) && !json_is_array(messages))
        return refuse(p, "messages must be an array");
    size_t count = json_array_size(messages);
    if (count == 0)
        return true;
    if (!(req->messages = calloc(count, sizeof *req->messages)))
        return out_of_memory(p);
    req->messages_cap = count;
    size_t i;
    json_t *m;
    json_array_foreach(messages, i, m) {
        req->n_messages = i + 1;
        if (!read_message(p, m, i, &req->messages[i]))
            return false;
    }
    return true;
}

/* tools: what a template reads of them must be there. */
static bool read_tools(parse *p, const json_t *tools, chat_request *req)
{
    if (!chat_request_check_tools(tools, p->message, p->size)) {
        p->status = 400;
        return false;
    }
    if (json_array_size(tools) > 0)
        req->tools = json_incref((json_t *)tools);
    return true;
}

/* think: absent or null, a bool, or a level. */
static bool read_think(parse *p, const json_t *think, chat_request *req)
{
    req->think = !think || json_is_null(think) ? CHAT_THINK_UNSET
                 : json_is_true(think)         ? CHAT_THINK_ON
                                               : CHAT_THINK_OFF;
    if (!think || json_is_null(think) || json_is_boolean(think))
        return true;
    for (chat_think level = CHAT_THINK_LOW; json_is_string(think) && level <= CHAT_THINK_MAX;
         level++)
        if (strcmp(json_string_value(think), chat_think_name(level)) == 0) {
            req->think = level;
            return true;
        }
    return refuse(p, "invalid think value: must be true, false, \"low\", \"medium\", \"high\" "
                     "or \"max\"");
}

static bool read_flags(parse *p, const json_t *body, chat_request *req)
{
    static const char *const flags[] = {"truncate", "shift"};
    bool *targets[] = {&req->truncate, &req->shift};
    for (size_t i = 0; i < 2; i++) {
        json_t *flag = json_object_get(body, flags[i]);
        if (flag && !json_is_null(flag) && !json_is_boolean(flag))
            return refuse(p, "%s must be a boolean", flags[i]);
        *targets[i] = !json_is_false(flag);
    }
    return true;
}

static bool read_logprobs(parse *p, const json_t *body, chat_request *req)
{
    json_t *logprobs = json_object_get(body, "logprobs");
    json_t *top = json_object_get(body, "top_logprobs");
    if (logprobs && !json_is_null(logprobs) && !json_is_boolean(logprobs))
        return refuse(p, "logprobs must be a boolean");
    if (top && !json_is_null(top) &&
        (!json_is_integer(top) || json_integer_value(top) < 0 || json_integer_value(top) > 20))
        return refuse(p, "top_logprobs must be between 0 and 20");
    req->logprobs = json_is_true(logprobs);
    req->top_logprobs = (int)json_integer_value(top);
    return true;
}

static bool read_keep_alive(parse *p, const json_t *v, chat_request *req)
{
    if (!v || json_is_null(v))
        return true;
    req->has_keep_alive = true;
    if (json_is_number(v)) { /* seconds */
        req->keep_alive_ns = server_duration_ns(json_number_value(v) * 1e9);
        return true;
    }
    if (json_is_string(v) && server_parse_duration(json_string_value(v), &req->keep_alive_ns))
        return true;
    return refuse(p, "invalid keep_alive duration");
}

/* A text field where "" means absent, as ollama reads a Go string's zero value: older
 * clients (ollama-python before 0.4) send "" for every suffix, system and template they
 * were not given, meaning the model's own. */
static bool copy_text(parse *p, const json_t *v, char **out)
{
    *out = NULL;
    return json_string_length(v) == 0 || copy_string(p, v, out);
}

static bool read_completion(parse *p, const json_t *body, chat_request *req)
{
    json_t *context = json_object_get(body, "context");
    if (json_is_array(context))
        req->context = json_incref(context);
    req->raw = json_is_true(json_object_get(body, "raw"));
    if (!copy_string(p, json_object_get(body, "prompt"), &req->prompt) ||
        !copy_text(p, json_object_get(body, "suffix"), &req->suffix) ||
        !copy_text(p, json_object_get(body, "system"), &req->system) ||
        !copy_text(p, json_object_get(body, "template"), &req->template_text))
        return false;
    /* an empty context is no context, as the empty texts above */
    if (req->raw && (req->template_text || req->system || json_array_size(req->context) > 0))
        return refuse(p, "raw mode does not support template, system, or context");
    return read_images(p, json_object_get(body, "images"), "", &req->images, &req->n_images);
}

/* body in /api/chat's (chat) or /api/generate's form as *out: 200, or 400 with the client's
 * mistake in message, or 500. */
static unsigned parse_body(const json_t *body, bool chat, chat_request **out, char *message,
                           size_t size)
{
    parse p = {.message = message, .size = size, .status = 200};
    chat_request *req = chat_request_create(chat);
    if (!req) {
        out_of_memory(&p);
        return p.status;
    }
    json_t *format = json_object_get(body, "format");
    json_t *options = json_object_get(body, "options");
    bool plain_text = !format || json_is_null(format) ||
                      (json_is_string(format) && json_string_length(format) == 0);
    req->format = plain_text ? NULL : json_incref(format);
    req->options = json_is_object(options) ? json_incref(options) : NULL;
    req->stream = !json_is_false(json_object_get(body, "stream"));
    req->debug_render_only = json_is_true(json_object_get(body, "_debug_render_only"));
    bool ok = copy_string(&p, json_object_get(body, "model"), &req->model) &&
              read_keep_alive(&p, json_object_get(body, "keep_alive"), req) &&
              (chat ? read_tools(&p, json_object_get(body, "tools"), req) &&
                          read_messages(&p, json_object_get(body, "messages"), req)
                    : read_completion(&p, body, req)) &&
              read_flags(&p, body, req) && read_think(&p, json_object_get(body, "think"), req) &&
              read_logprobs(&p, body, req);
    if (!ok) {
        chat_request_free(req);
        return p.status;
    }
    *out = req;
    return 200;
}

unsigned native_parse(const json_t *body, bool chat, chat_request **out, char *message,
                      size_t size)
{
    corral_error err = {{0}};
    if (!request_fields_check(chat ? REQUEST_API_CHAT : REQUEST_API_GENERATE, body, &err)) {
        snprintf(message, size, "%s", err.message);
        return 400;
    }
    return parse_body(body, chat, out, message, size);
}

static void handle(server *srv, const http_request *req, http_reply *reply, bool chat)
{
    char message[512];
    json_t *body = http_body_object(req, message, sizeof message);
    chat_request *request = NULL;
    unsigned status = body ? native_parse(body, chat, &request, message, sizeof message) : 400;
    if (status != 200)
        http_reply_error(reply, status, "%s", message);
    else
        generation_serve(srv, request, &native_shape, NULL, reply);
    chat_request_free(request);
    json_decref(body);
}

static void handle_generate(void *ctx, const http_request *req, http_reply *reply)
{
    handle(ctx, req, reply, false);
}

static void handle_chat(void *ctx, const http_request *req, http_reply *reply)
{
    handle(ctx, req, reply, true);
}

/* dimensions: absent, null or 0 for all; else a positive integer. */
static bool read_dimensions(const json_t *body, uint32_t *dimensions)
{
    json_t *v = json_object_get(body, "dimensions");
    *dimensions = 0;
    if (!v || json_is_null(v))
        return true;
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > 1 << 20)
        return false;
    *dimensions = (uint32_t)json_integer_value(v);
    return true;
}

/*
 * /api/embed: `input` a string or strings, vectors normalised; and the legacy
 * /api/embeddings: one `prompt`, its vector as the runner made it.
 */
static void handle_embed_request(server *srv, const http_request *req, http_reply *reply,
                                 bool legacy)
{
    char message[256];
    json_t *body = http_body_object(req, message, sizeof message);
    embedding_params params = {.normalize = !legacy, .facts = http_reply_facts(reply),
                               .client_fd = http_reply_client_fd(reply)};
    json_t *inputs = NULL;
    corral_error err = {{0}};
    if (!body) {
        http_reply_error(reply, 400, "%s", message);
    } else if (!request_fields_check(legacy ? REQUEST_API_EMBEDDINGS : REQUEST_API_EMBED, body,
                                     &err)) {
        http_reply_error(reply, 400, "%s", err.message);
    } else if (legacy && json_is_array(json_object_get(body, "prompt"))) {
        http_reply_error(reply, 400, "invalid input type"); /* one prompt, one vector */
    } else if (legacy ? !(inputs = embedding_inputs(json_object_get(body, "prompt")))
                      : !(inputs = embedding_inputs(json_object_get(body, "input")))) {
        http_reply_error(reply, 400, "invalid input type");
    } else if (!legacy && !read_dimensions(body, &params.dimensions)) {
        http_reply_error(reply, 400, "dimensions must be a positive integer");
    } else {
        json_t *given = json_object_get(body, legacy ? "prompt" : "input");
        if (json_is_string(given) && json_string_length(given) == 0)
            json_array_clear(inputs); /* an empty text only loads the model, as in ollama */
        params.inputs = inputs;
        embedding_result result;
        unsigned status = embedding_run(srv, body, &params, &result, &err);
        if (status != 200)
            http_reply_error(reply, status, "%s", err.message);
        else if (legacy)
            http_reply_json(reply, 200, json_pack("{s:O}", "embedding",
                                                  json_array_size(result.vectors)
                                                      ? json_array_get(result.vectors, 0)
                                                      : result.vectors));
        else
            http_reply_json(reply, 200,
                            json_pack("{s:O,s:O,s:I,s:I,s:I}", "model",
                                      json_object_get(body, "model"), "embeddings",
                                      result.vectors, "total_duration",
                                      (json_int_t)result.total_ns, "load_duration",
                                      (json_int_t)result.load_ns, "prompt_eval_count",
                                      result.prompt_tokens));
        embedding_result_free(&result);
    }
    json_decref(inputs);
    json_decref(body);
}

static void handle_embed(void *ctx, const http_request *req, http_reply *reply)
{
    handle_embed_request(ctx, req, reply, false);
}

static void handle_embeddings(void *ctx, const http_request *req, http_reply *reply)
{
    handle_embed_request(ctx, req, reply, true);
}

static const http_route routes[] = {
    {"POST", "/api/generate", false, handle_generate, NULL},
    {"POST", "/api/chat", false, handle_chat, NULL},
    {"POST", "/api/embed", false, handle_embed, NULL},
    {"POST", "/api/embeddings", false, handle_embeddings, NULL},
};

const route_table routes_generate = {routes, sizeof routes / sizeof routes[0]};

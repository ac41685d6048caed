/*
 * /api/generate and /api/chat in ollama's native shape: NDJSON chunks
 * (or one object for stream:false) with ollama's final metrics; and /api/embed with the
 * legacy /api/embeddings. The work itself is generation.c's and embedding.c's.
 */
#include "server/api/native.h"

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

static bool native_end(const generation_info *info, const generation_done *done,
                       generation_out *out)
{
    return generation_out_json(out, "", final_chunk(info, done, &nothing), "\n");
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
};

unsigned native_parse(const json_t *body, bool chat, chat_request **out, char *message,
                      size_t size)
{
    corral_error err = {{0}};
    if (!request_fields_check(chat ? REQUEST_API_CHAT : REQUEST_API_GENERATE, body, &err)) {
        snprintf(message, size, "%s", err.message);
        return 400;
    }
    return chat_request_parse_native(body, chat, out, message, size);
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
    embedding_params params = {.normalize = !legacy, .facts = http_reply_facts(reply)};
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
        if (legacy && json_string_length(json_array_get(inputs, 0)) == 0)
            json_array_clear(inputs); /* an empty prompt only loads the model */
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

/*
 * /api/generate and /api/chat (reference §1.1-1.2), and /api/embed(dings) answered as ollama
 * does for a model without the embedding capability. A request is validated, its prompt
 * rendered, a runner acquired from the scheduler, and the runner's pieces relayed as NDJSON
 * chunks (or aggregated for stream:false) with ollama's final metrics. The HTTP client going
 * away closes the runner connection, which cancels the generation.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runner_client.h"
#include "server/model_ref.h"
#include "server/options.h"
#include "server/prompt.h"
#include "server/scheduler.h"
#include "server/server.h"

/* RFC 3339 with nanoseconds, UTC, as Go's time.RFC3339Nano prints it. */
static json_t *created_at(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char date[32], out[64];
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%S", &tm);
    char frac[16];
    snprintf(frac, sizeof frac, "%09ld", ts.tv_nsec);
    size_t n = strlen(frac);
    while (n > 0 && frac[n - 1] == '0') /* Go trims trailing zeros */
        frac[--n] = '\0';
    snprintf(out, sizeof out, "%s%s%sZ", date, n ? "." : "", frac);
    return json_string(out);
}

static int64_t monotonic_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* keep_alive: a duration string or a number of seconds; absent: the server default. */
static bool read_keep_alive(const server *srv, const json_t *body, int64_t *ns)
{
    json_t *v = json_object_get(body, "keep_alive");
    *ns = srv->config.keep_alive_ns;
    if (!v || json_is_null(v))
        return true;
    if (json_is_number(v)) {
        double seconds = json_number_value(v);
        *ns = seconds < 0 ? -1 : (int64_t)(seconds * 1e9);
        return true;
    }
    return json_is_string(v) && server_parse_duration(json_string_value(v), ns);
}

typedef struct generation {
    server *srv;
    bool chat, raw, stream;
    model_ref *ref;
    runner_handle *runner;
    runner_conn *conn;
    int64_t keep_alive_ns;
    int64_t t_start;
    /* stream state */
    char *line;
    size_t line_len, line_pos;
    bool finished;
    /* aggregate state (stream:false) */
    char *text;
    size_t text_len;
} generation;

static void generation_free(generation *g)
{
    runner_conn_close(g->conn); /* before release: closing cancels a running request */
    if (g->runner)
        scheduler_release(g->srv->sched, g->runner, g->keep_alive_ns);
    model_ref_free(g->ref);
    free(g->line);
    free(g->text);
    free(g);
}

/* A chunk of the answer in the endpoint's shape. */
static json_t *chunk(const generation *g, const char *text, size_t len, bool done)
{
    json_t *c = json_object();
    json_object_set_new(c, "model", json_string(g->ref->display));
    json_object_set_new(c, "created_at", created_at());
    if (g->chat)
        json_object_set_new(c, "message", json_pack("{s:s,s:s#}", "role", "assistant", "content",
                                                    text, (int)len));
    else
        json_object_set_new(c, "response", json_stringn(text, len));
    json_object_set_new(c, "done", json_boolean(done));
    return c;
}

/* The final chunk from the runner's done message. */
static json_t *final_chunk(const generation *g, const json_t *done, const char *text, size_t len)
{
    json_t *c = chunk(g, text, len, true);
    json_object_set(c, "done_reason", json_object_get(done, "done_reason"));
    json_t *tokens = json_object_get(done, "tokens");
    if (!g->chat && !g->raw && tokens)
        json_object_set(c, "context", tokens);
    int64_t load = runner_handle_load_ns(g->runner);
    json_object_set_new(c, "total_duration", json_integer(monotonic_ns() - g->t_start));
    if (load)
        json_object_set_new(c, "load_duration", json_integer(load));
    static const char *const metrics[] = {"prompt_eval_count", "prompt_eval_duration",
                                          "eval_count", "eval_duration"};
    for (size_t i = 0; i < 4; i++) {
        json_t *v = json_object_get(done, metrics[i]);
        if (json_integer_value(v) != 0) /* ollama omits zero values */
            json_object_set(c, metrics[i], v);
    }
    json_t *shifts = json_object_get(done, "context_shifts");
    if (json_integer_value(shifts) > 0) /* Corral says when the context overflowed */
        json_object_set(c, "context_shifts", shifts);
    json_t *truncated = json_object_get(done, "prompt_truncated");
    if (json_integer_value(truncated) > 0)
        json_object_set(c, "prompt_truncated", truncated);
    return c;
}

static void set_line(generation *g, json_t *obj)
{
    free(g->line);
    g->line = json_dumps(obj, JSON_COMPACT);
    json_decref(obj);
    g->line_len = g->line ? strlen(g->line) : 0;
    if (g->line)
        g->line[g->line_len++] = '\n'; /* replaces the NUL: the line is a byte run */
    g->line_pos = 0;
}

/* Next NDJSON line of a streaming generation into g->line; false at the end. */
static bool next_line(generation *g)
{
    if (g->finished)
        return false;
    corral_error err;
    json_t *msg = runner_conn_next(g->conn, &err);
    if (!msg) {
        scheduler_report_failure(g->srv->sched, g->runner);
        set_line(g, json_pack("{s:s}", "error", err.message));
        g->finished = true;
        return true;
    }
    json_t *content = json_object_get(msg, "content");
    json_t *error = json_object_get(msg, "error");
    if (json_is_string(content)) {
        set_line(g, chunk(g, json_string_value(content), json_string_length(content), false));
    } else if (json_is_string(error)) {
        set_line(g, json_pack("{s:O}", "error", error));
        g->finished = true;
    } else {
        set_line(g, final_chunk(g, msg, "", 0));
        g->finished = true;
    }
    json_decref(msg);
    return true;
}

static ssize_t stream_next(void *state, char *buf, size_t max)
{
    generation *g = state;
    while (g->line_pos == g->line_len)
        if (!next_line(g))
            return 0;
    if (!g->line)
        return -1;
    size_t n = g->line_len - g->line_pos < max ? g->line_len - g->line_pos : max;
    memcpy(buf, g->line + g->line_pos, n);
    g->line_pos += n;
    return (ssize_t)n;
}

static void stream_close(void *state)
{
    generation_free(state);
}

/* stream:false: read everything, then answer once. */
static void answer_whole(generation *g, http_reply *reply)
{
    corral_error err;
    for (;;) {
        json_t *msg = runner_conn_next(g->conn, &err);
        if (!msg) {
            scheduler_report_failure(g->srv->sched, g->runner);
            http_reply_error(reply, 500, "%s", err.message);
            return;
        }
        json_t *content = json_object_get(msg, "content");
        json_t *error = json_object_get(msg, "error");
        if (json_is_string(content)) {
            size_t n = json_string_length(content);
            char *grown = realloc(g->text, g->text_len + n + 1);
            if (!grown) {
                json_decref(msg);
                http_reply_error(reply, 500, "out of memory");
                return;
            }
            g->text = grown;
            memcpy(g->text + g->text_len, json_string_value(content), n);
            g->text_len += n;
            json_decref(msg);
            continue;
        }
        if (json_is_string(error))
            http_reply_error(reply, 500, "%s", json_string_value(error));
        else
            http_reply_json(reply, 200, final_chunk(g, msg, g->text ? g->text : "", g->text_len));
        json_decref(msg);
        return;
    }
}

/* Request options: the model's PARAMS layer under the request's, normalised and checked. */
static json_t *merged_options(const model_ref *ref, const json_t *body, corral_error *err)
{
    json_t *request = options_normalize(json_object_get(body, "options"), err);
    if (!request)
        return NULL;
    json_t *merged = ref->params ? options_normalize(ref->params, err) : json_object();
    if (!merged) {
        json_decref(request);
        return NULL;
    }
    json_object_update(merged, request);
    json_decref(request);
    return merged;
}

static uint32_t option_u32(const json_t *options, const char *key)
{
    json_int_t v = json_integer_value(json_object_get(options, key));
    return v > 0 && v < (1 << 24) ? (uint32_t)v : 0;
}

/* Is there anything to generate? (No prompt / no messages means load or unload.) */
static bool has_input(const json_t *body, bool chat)
{
    if (chat)
        return json_array_size(json_object_get(body, "messages")) > 0;
    const char *prompt = json_string_value(json_object_get(body, "prompt"));
    return prompt && *prompt;
}

static void handle(server *srv, const http_request *req, http_reply *reply, bool chat)
{
    if (!req->body) {
        http_reply_error(reply, 400, "missing request body");
        return;
    }
    json_error_t jerr;
    json_t *body = json_loadb(req->body, req->body_len, 0, &jerr);
    if (!json_is_object(body)) {
        http_reply_error(reply, 400, "%s", body ? "request body must be a JSON object" : jerr.text);
        json_decref(body);
        return;
    }
    generation *g = calloc(1, sizeof *g);
    corral_error err = {{0}};
    json_t *options = NULL;
    char *prompt = NULL;
    if (!g) {
        http_reply_error(reply, 500, "out of memory");
        goto done;
    }
    g->srv = srv;
    g->chat = chat;
    g->t_start = monotonic_ns();
    json_t *stream = json_object_get(body, "stream");
    g->stream = !json_is_false(stream);
    g->raw = json_is_true(json_object_get(body, "raw"));
    const char *name = json_string_value(json_object_get(body, "model"));
    if (!name || !*name) {
        http_reply_error(reply, 400, "model is required");
        goto done;
    }
    if (!read_keep_alive(srv, body, &g->keep_alive_ns)) {
        http_reply_error(reply, 400, "invalid keep_alive duration");
        goto done;
    }
    if (g->raw && (json_object_get(body, "template") || json_object_get(body, "system") ||
                   json_object_get(body, "context"))) {
        http_reply_error(reply, 400, "raw mode does not support template, system, or context");
        goto done;
    }
    switch (model_ref_open(srv->store, name, &g->ref, &err)) {
    case MODEL_REF_OK: break;
    case MODEL_REF_INVALID_NAME: http_reply_error(reply, 400, "%s", err.message); goto done;
    case MODEL_REF_NOT_FOUND: http_reply_error(reply, 404, "%s", err.message); goto done;
    default: http_reply_error(reply, 500, "%s", err.message); goto done;
    }
    if (!g->ref->model_path) {
        http_reply_error(reply, 400, "\"%s\" does not support %s", name, chat ? "chat" : "generate");
        goto done;
    }
    if (!(options = merged_options(g->ref, body, &err))) {
        http_reply_error(reply, 400, "%s", err.message);
        goto done;
    }
    bool render_only = json_is_true(json_object_get(body, "_debug_render_only"));
    if (has_input(body, chat) || render_only) {
        const char *raw_prompt = json_string_value(json_object_get(body, "prompt"));
        prompt = g->raw ? strdup(raw_prompt ? raw_prompt : "") : prompt_build(g->ref, body, chat, &err);
        if (!prompt) {
            http_reply_error(reply, 500, "%s", err.message);
            goto done;
        }
        if (render_only) {
            http_reply_json(reply, 200,
                            json_pack("{s:s,s:o,s:{s:s,s:i}}", "model", g->ref->display,
                                      "created_at", created_at(), "_debug_info",
                                      "rendered_template", prompt, "image_count", 0));
            goto done;
        }
    }
    load_request load = {.ref = g->ref, .num_ctx = option_u32(options, "num_ctx"),
                         .num_batch = option_u32(options, "num_batch"),
                         .num_thread = (int)option_u32(options, "num_thread")};
    unsigned status = 500;
    if (!(g->runner = scheduler_acquire(srv->sched, &load, &status, &err))) {
        http_reply_error(reply, status, "%s", err.message);
        goto done;
    }
    if (!prompt) { /* load or unload only */
        bool unload = g->keep_alive_ns == 0;
        json_t *c = chunk(g, "", 0, true);
        json_object_set_new(c, "done_reason", json_string(unload ? "unload" : "load"));
        http_reply_json(reply, 200, c);
        if (unload)
            scheduler_unload(srv->sched, g->ref->model_path);
        goto done;
    }
    json_t *runner_req = json_pack("{s:s,s:s,s:O}", "op", "completion", "prompt", prompt,
                                   "options", options);
    json_t *context = json_object_get(body, "context");
    if (!chat && json_is_array(context))
        json_object_set(runner_req, "context", context);
    g->conn = runner_conn_open(runner_handle_socket(g->runner), runner_req, &err);
    json_decref(runner_req);
    if (!g->conn) {
        scheduler_report_failure(srv->sched, g->runner);
        http_reply_error(reply, 500, "%s", err.message);
        goto done;
    }
    if (g->stream) {
        http_reply_stream(reply, "application/x-ndjson", stream_next, stream_close, g);
        g = NULL; /* the stream owns it */
    } else {
        answer_whole(g, reply);
    }
done:
    if (g)
        generation_free(g);
    free(prompt);
    json_decref(options);
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

/* Text models have no embedding capability; ollama answers exactly this. */
static void handle_embed(void *ctx, const http_request *req, http_reply *reply)
{
    server *srv = ctx;
    json_error_t jerr;
    json_t *body = req->body ? json_loadb(req->body, req->body_len, 0, &jerr) : NULL;
    const char *name = json_string_value(json_object_get(body, "model"));
    model_ref *ref = NULL;
    corral_error err;
    if (!req->body)
        http_reply_error(reply, 400, "missing request body");
    else if (!body)
        http_reply_error(reply, 400, "%s", jerr.text);
    else if (!name)
        http_reply_error(reply, 400, "model is required");
    else if (model_ref_open(srv->store, name, &ref, &err) == MODEL_REF_NOT_FOUND)
        http_reply_error(reply, 404, "%s", err.message);
    else if (!ref)
        http_reply_error(reply, 400, "%s", err.message);
    else
        http_reply_error(reply, 400, "\"%s\" does not support embeddings", name);
    model_ref_free(ref);
    json_decref(body);
}

static const http_route routes[] = {
    {"POST", "/api/generate", false, handle_generate, NULL},
    {"POST", "/api/chat", false, handle_chat, NULL},
    {"POST", "/api/embed", false, handle_embed, NULL},
    {"POST", "/api/embeddings", false, handle_embed, NULL},
};

const route_table routes_generate = {routes, sizeof routes / sizeof routes[0]};

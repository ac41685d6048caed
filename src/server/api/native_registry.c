/*
 * POST /api/pull and /api/push: the transfer runs on its own thread and its
 * progress goes to the client as NDJSON (stream:false: only the last object). Consecutive
 * progress lines of one layer are coalesced, so a slow reader sees the latest numbers rather
 * than a backlog. A client that goes away leaves the transfer running, as in ollama. A pull
 * of the demo model imports the copy inside the binary (bundled.h) and needs no network.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "registry/registry.h"
#include "server/http/body.h"
#include "server/http/request_fields.h"
#include "server/models/background_pull.h"
#include "server/models/bundled.h"
#include "server/server.h"

#define MAX_QUEUED_LINES 256u

typedef struct transfer {
    server *srv;
    bool push;
    corral_registry_options opts;
    char *name;
    pthread_mutex_t lock;
    pthread_cond_t changed;
    /* guarded by lock */
    char *lines[MAX_QUEUED_LINES];
    bool line_is_progress[MAX_QUEUED_LINES];
    size_t head, count;
    bool finished;
    unsigned refs; /* the worker thread and the HTTP stream */
    /* the stream's line being sent (stream side only) */
    char *current;
    size_t current_len, current_pos;
} transfer;

static void transfer_release(transfer *t)
{
    pthread_mutex_lock(&t->lock);
    bool last = --t->refs == 0;
    pthread_mutex_unlock(&t->lock);
    if (!last)
        return;
    for (size_t i = 0; i < t->count; i++)
        free(t->lines[(t->head + i) % MAX_QUEUED_LINES]);
    free(t->current);
    free(t->name);
    pthread_mutex_destroy(&t->lock);
    pthread_cond_destroy(&t->changed);
    free(t);
}

/* Queue obj as a line; a progress line replaces the previous one if that was progress too. */
static void transfer_emit(transfer *t, json_t *obj, bool is_progress)
{
    char *text = json_dumps(obj, JSON_COMPACT);
    json_decref(obj);
    if (!text)
        return;
    pthread_mutex_lock(&t->lock);
    size_t last = (t->head + t->count - 1) % MAX_QUEUED_LINES;
    if (is_progress && t->count > 0 && t->line_is_progress[last]) {
        free(t->lines[last]);
        t->lines[last] = text;
    } else if (t->count < MAX_QUEUED_LINES) {
        size_t slot = (t->head + t->count++) % MAX_QUEUED_LINES;
        t->lines[slot] = text;
        t->line_is_progress[slot] = is_progress;
    } else {
        free(text); /* the reader is far behind; only progress can be this many lines */
    }
    pthread_cond_broadcast(&t->changed);
    pthread_mutex_unlock(&t->lock);
}

static bool on_progress(void *ctx, const corral_registry_progress *p)
{
    json_t *obj = registry_progress_json(p);
    if (obj)
        transfer_emit(ctx, obj, p->digest != NULL);
    return true; /* a departed client leaves the transfer running */
}

static corral_registry_status transfer_run(transfer *t, corral_error *err)
{
    if (t->push)
        return corral_registry_push(t->srv->store, t->name, &t->opts, err);
    if (bundled_has(t->name))
        return bundled_pull(t->srv->store, &t->opts, err);
    return corral_registry_pull(t->srv->store, t->name, &t->opts, err);
}

static void *transfer_thread(void *arg)
{
    transfer *t = arg;
    corral_error err = {{0}};
    if (transfer_run(t, &err) != CORRAL_REGISTRY_OK)
        transfer_emit(t, json_pack("{s:s}", "error", err.message), false);
    pthread_mutex_lock(&t->lock);
    t->finished = true;
    pthread_cond_broadcast(&t->changed);
    pthread_mutex_unlock(&t->lock);
    transfer_release(t);
    return NULL;
}

static ssize_t stream_next(void *state, char *buf, size_t max)
{
    transfer *t = state;
    if (t->current_pos == t->current_len) {
        free(t->current);
        t->current = NULL;
        pthread_mutex_lock(&t->lock);
        while (t->count == 0 && !t->finished)
            pthread_cond_wait(&t->changed, &t->lock);
        if (t->count > 0) {
            t->current = t->lines[t->head];
            t->head = (t->head + 1) % MAX_QUEUED_LINES;
            t->count--;
        }
        pthread_mutex_unlock(&t->lock);
        if (!t->current)
            return 0;
        t->current_len = strlen(t->current);
        t->current[t->current_len++] = '\n'; /* replaces the NUL: the line is a byte run */
        t->current_pos = 0;
    }
    size_t n = t->current_len - t->current_pos < max ? t->current_len - t->current_pos : max;
    memcpy(buf, t->current + t->current_pos, n);
    t->current_pos += n;
    return (ssize_t)n;
}

static void stream_close(void *state)
{
    transfer_release(state);
}

/* The body's name, stream and insecure fields, checked; NULL with the reply sent. */
static transfer *transfer_from_request(server *srv, const http_request *req, bool push,
                                       bool *stream, http_reply *reply)
{
    char message[256];
    json_t *body = http_body_object(req, message, sizeof message);
    corral_error type_err = {{0}};
    if (!body || !request_fields_check(REQUEST_API_TRANSFER, body, &type_err)) {
        http_reply_error(reply, 400, "%s", body ? type_err.message : message);
        json_decref(body);
        return NULL;
    }
    const char *name = json_string_value(json_object_get(body, "model"));
    if (!name || !*name)
        name = json_string_value(json_object_get(body, "name")); /* deprecated alias */
    bool insecure = json_is_true(json_object_get(body, "insecure"));
    *stream = !json_is_false(json_object_get(body, "stream"));
    corral_model_name parsed;
    corral_error err;
    transfer *t = NULL;
    if (!name || !*name)
        http_reply_error(reply, 400, "model is required");
    else if (strncasecmp(name, "http://", 7) == 0 && !insecure)
        http_reply_error(reply, 400, "insecure protocol http");
    else if (!corral_model_name_parse(name, &parsed, &err))
        http_reply_error(reply, 400, "%s", err.message);
    else if (!(t = calloc(1, sizeof *t)) || !(t->name = strdup(name))) {
        http_reply_error(reply, 500, "out of memory");
        free(t);
        t = NULL;
    } else {
        t->srv = srv;
        t->push = push;
        t->opts.insecure = insecure;
        t->opts.max_parts = srv->config.max_transfer_streams;
        t->opts.progress = on_progress;
        t->opts.progress_ctx = t;
        pthread_mutex_init(&t->lock, NULL);
        pthread_cond_init(&t->changed, NULL);
    }
    json_decref(body);
    return t;
}

static void handle(server *srv, const http_request *req, http_reply *reply, bool push)
{
    bool stream;
    transfer *t = transfer_from_request(srv, req, push, &stream, reply);
    if (!t)
        return;
    if (!stream) {
        t->opts.progress = NULL;
        t->refs = 1;
        corral_error err = {{0}};
        if (transfer_run(t, &err) == CORRAL_REGISTRY_OK)
            http_reply_json(reply, 200, json_pack("{s:s}", "status", "success"));
        else
            http_reply_error(reply, 500, "%s", err.message);
        transfer_release(t);
        return;
    }
    t->refs = 2;
    pthread_t thread;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    bool started = pthread_create(&thread, &attr, transfer_thread, t) == 0;
    pthread_attr_destroy(&attr);
    if (!started) {
        t->refs = 1;
        transfer_release(t);
        http_reply_error(reply, 500, "cannot start the transfer");
        return;
    }
    http_reply_stream(reply, "application/x-ndjson", stream_next, stream_close, t);
}

static void handle_pull(void *ctx, const http_request *req, http_reply *reply)
{
    handle(ctx, req, reply, false);
}

static void handle_push(void *ctx, const http_request *req, http_reply *reply)
{
    handle(ctx, req, reply, true);
}

static const http_route routes[] = {
    {"POST", "/api/pull", false, handle_pull, NULL},
    {"POST", "/api/push", false, handle_push, NULL},
};

const route_table routes_registry = {routes, sizeof routes / sizeof routes[0]};

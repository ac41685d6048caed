/* GET/HEAD / (the chat page when a browser asks), /api/version, /api/status, GET /api/ps and
 * GET /metrics (Prometheus). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server/api/api_time.h"
#include "server/models/model_info.h"
#include "server/models/model_ref.h"
#include "registry/registry.h"
#include "server/sched/runner_client.h"
#include "server/metrics.h"
#include "server/sched/scheduler.h"
#include "server/server.h"

static void handle_root(void *ctx, const http_request *req, http_reply *reply)
{
    (void)ctx;
    /* A browser gets the chat page; clients probe for ollama's exact words. */
    if (req->accept && strstr(req->accept, "text/html"))
        routes_ui_index(reply);
    else
        http_reply_text(reply, 200, "text/plain; charset=utf-8", "Ollama is running");
}

/* Clients gate features on ollama's version, so "version" is the ollama API this server
 * matches; Corral's own version is beside it (and in every reply's Server header). */
static void handle_version(void *ctx, const http_request *req, http_reply *reply)
{
    (void)ctx;
    (void)req;
    http_reply_json(reply, 200, json_pack("{s:s,s:s}", "version", CORRAL_OLLAMA_API_VERSION,
                                          "corral_version", CORRAL_VERSION));
}

/* ollama's cloud switch as its CLI and app read it before offering cloud models or web tools:
 * Corral has no cloud, so it is always off. "source" is one of ollama's words (none, env,
 * config, both); "config" because it is how this server is built, not a setting a user made. */
static void handle_status(void *ctx, const http_request *req, http_reply *reply)
{
    (void)ctx;
    (void)req;
    http_reply_json(reply, 200, json_pack("{s:{s:b,s:s}}", "cloud", "disabled", 1, "source",
                                          "config"));
}

/* When a loaded model expires, in ollama's format; forever is the last moment there is. */
static json_t *expiry_time(int64_t unix_ns)
{
    if (unix_ns == INT64_MAX)
        return api_local_time((struct timespec){.tv_sec = (time_t)253402300799}); /* 9999 */
    return api_local_time((struct timespec){.tv_sec = (time_t)(unix_ns / 1000000000),
                                            .tv_nsec = (long)(unix_ns % 1000000000)});
}

/* What UIs show of a loaded model (family, size, quantization), from its config as /api/tags
 * gives it; a model deleted while loaded keeps just its format. */
static json_t *loaded_model_details(const corral_store *store, const char *name)
{
    model_ref *ref = NULL;
    json_t *config = NULL;
    if (model_ref_open(store, name, &ref, NULL) == MODEL_REF_OK)
        config = model_info_read_config(store, ref->manifest, NULL);
    model_ref_free(ref);
    json_t *details = config ? model_info_details(config, NULL) : NULL;
    json_decref(config);
    return details ? details : json_pack("{s:s}", "format", "gguf");
}

static void handle_ps(void *ctx, const http_request *req, http_reply *reply)
{
    (void)req;
    server *srv = ctx;
    scheduler_entry *entries = NULL;
    size_t n = srv->sched ? scheduler_list(srv->sched, &entries) : 0;
    json_t *models = json_array();
    for (size_t i = 0; i < n; i++) {
        const scheduler_entry *e = &entries[i];
        const char *hex = e->digest[0] ? e->digest + 7 : "";
        json_array_append_new(
            models, json_pack("{s:s,s:s,s:I,s:s,s:o,s:o,s:I,s:I}", "name", e->name, "model",
                              e->name, "size", (json_int_t)e->size_bytes, "digest", hex,
                              "details", loaded_model_details(srv->store, e->name), "expires_at",
                              expiry_time(e->expires_at_unix_ns), "size_vram", (json_int_t)e->size_vram,
                              "context_length", (json_int_t)e->context_length));
    }
    free(entries);
    http_reply_json(reply, 200, json_pack("{s:o}", "models", models));
}

/* The KV cache use a runner reports; false when it cannot say (gone, or an old answer). */
static bool runner_kv_cells(const char *socket_path, uint64_t *used, uint64_t *total)
{
    /* with a deadline: a stopped runner must not hold /metrics */
    json_t *answer = runner_health(socket_path, 2000);
    json_t *u = json_object_get(answer, "kv_cells_used"), *t = json_object_get(answer, "kv_cells");
    bool ok = json_is_integer(u) && json_is_integer(t) && json_integer_value(u) >= 0 &&
              json_integer_value(t) >= 0;
    if (ok) {
        *used = (uint64_t)json_integer_value(u);
        *total = (uint64_t)json_integer_value(t);
    }
    json_decref(answer);
    return ok;
}

/* Prometheus text: the counters kept as requests go, and what the scheduler, the runners (one
 * health round trip each, a lock held for a loop over its slots) and pulls say now. */
static void handle_metrics(void *ctx, const http_request *req, http_reply *reply)
{
    (void)req;
    server *srv = ctx;
    scheduler_entry *entries = NULL;
    size_t n = srv->sched ? scheduler_list(srv->sched, &entries) : 0;
    metrics_model *models = calloc(n ? n : 1, sizeof *models);
    if ((srv->sched && !entries) || !models) {
        free(entries);
        free(models);
        http_reply_error(reply, 500, "out of memory");
        return;
    }
    for (size_t i = 0; i < n; i++) {
        models[i] = (metrics_model){.name = entries[i].name, .memory_bytes = entries[i].size_bytes};
        models[i].has_kv = runner_kv_cells(entries[i].socket_path, &models[i].kv_cells_used,
                                           &models[i].kv_cells);
    }
    unsigned queue_depth = 0;
    metrics_sample sample = {.models = models, .n_models = n,
                             .pull_bytes = corral_registry_downloaded_bytes()};
    if (srv->sched)
        scheduler_stats(srv->sched, &queue_depth, &sample.runner_restarts);
    sample.queue_depth = queue_depth;
    char *text = metrics_render(&sample);
    if (text)
        http_reply_text(reply, 200, METRICS_CONTENT_TYPE, text);
    else
        http_reply_error(reply, 500, "out of memory");
    free(text);
    free(models);
    free(entries);
}

static const http_route routes[] = {
    {"GET", "/", false, handle_root, NULL},
    {"GET", "/api/version", false, handle_version, NULL},
    {"GET", "/api/status", false, handle_status, NULL},
    {"GET", "/api/ps", false, handle_ps, NULL},
    {"GET", "/metrics", false, handle_metrics, NULL},
};

const route_table routes_basic = {routes, sizeof routes / sizeof routes[0]};

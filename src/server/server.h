/*
 * `corral serve`: the server's shared context (configuration from CORRAL_* / OLLAMA_*
 * variables, the model store, the scheduler) and its entry point. Route files
 * (the files of api/) each export a table of routes that server.c mounts.
 */
#ifndef CORRAL_SERVER_SERVER_H
#define CORRAL_SERVER_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "corral/engine.h"
#include "server/http/http.h"
#include "store/store.h"
#include "util/log.h"

typedef struct scheduler scheduler;

typedef struct server_config {
    char host[256];             /* an IPv4 or IPv6 address or a host name, without brackets */
    unsigned port;              /* 0: the system chooses */
    char models_root[4096];
    size_t max_body_bytes;      /* CORRAL_MAX_REQUEST_BYTES, default 64 MiB (blob uploads are streamed) */
    int64_t keep_alive_ns;      /* CORRAL_KEEP_ALIVE, default 5m; < 0 forever */
    int64_t runner_timeout_ns;  /* CORRAL_RUNNER_TIMEOUT, default 30s: a silent runner's answer */
    int64_t load_timeout_ns;    /* CORRAL_LOAD_TIMEOUT, default 5m: a model load that long fails; < 0 no limit */
    bool no_prune;              /* CORRAL_NOPRUNE: keep unused blobs at startup */
    int64_t sweep_interval_ns;  /* CORRAL_SWEEP_INTERVAL, default 10m: leftover files swept */
    uint32_t num_parallel;      /* CORRAL_NUM_PARALLEL, default 4 */
    uint32_t max_loaded_models; /* CORRAL_MAX_LOADED_MODELS, default 3 */
    uint32_t max_queue;         /* CORRAL_MAX_QUEUE, default 512 */
    uint32_t default_num_ctx;   /* CORRAL_CONTEXT_LENGTH, default 4096 */
    corral_kv_type kv_type;     /* CORRAL_KV_CACHE_TYPE, default f16 */
    char origins[4096];         /* CORRAL_ORIGINS */
    uint32_t max_connections;   /* CORRAL_MAX_CONNECTIONS, default HTTP_DEFAULT_MAX_CONNECTIONS */
    log_format log_format;      /* CORRAL_LOG_FORMAT: text (default) or json */
    bool debug;                 /* CORRAL_DEBUG / OLLAMA_DEBUG: debug lines, prompts included */
    uint32_t max_transfer_streams; /* CORRAL_MAX_TRANSFER_STREAMS: connections per blob, 0 = 8 */
    uint32_t prompt_lookup;     /* CORRAL_PROMPT_LOOKUP: longest draft a runner verifies, 0 off */
    char warning[256];          /* a setting taken otherwise than written, to log at start; "" none */
} server_config;

typedef struct server {
    server_config config;
    corral_store *store;
    scheduler *sched;
} server;

/* Routes exported by each file of api/. */
typedef struct route_table {
    const http_route *routes;
    size_t n_routes;
} route_table;

extern const route_table routes_basic;      /* /, /api/version, /api/status, /api/ps, /metrics */
extern const route_table routes_generate;   /* /api/generate, /api/chat, /api/embed(dings) */
extern const route_table routes_models;     /* tags, show, copy, delete, blobs, create */
extern const route_table routes_registry;   /* /api/pull, /api/push */
extern const route_table routes_openai;     /* /v1/... (OpenAI compatibility) */
extern const route_table routes_anthropic;  /* /v1/messages (Anthropic compatibility) */
extern const route_table routes_responses;  /* /v1/responses (OpenAI's Responses API) */
extern const route_table routes_transcription; /* /v1/audio/transcriptions */
extern const route_table routes_ui;         /* /ui/ (the chat page) */

/* Reply with the chat page (api/ui.c), for / when a browser asks. */
void routes_ui_index(http_reply *reply);

/* The ollama release whose API this server matches, for clients that gate features on it:
 * Codex asks for 0.13.4 before it speaks /v1/responses, VS Code's provider for 0.6.4. */
#define CORRAL_OLLAMA_API_VERSION "0.32.15"

/* Entry point of `corral serve`; argv[0] is "serve". */
int server_main(int argc, char **argv);

/* Read the configuration from the environment (CORRAL_* first, then OLLAMA_*). */
bool server_config_from_env(server_config *config, corral_error *err);

/*
 * A Go duration ("5m", "1h30m", "-1s", "300ms") or a number of seconds into ns. A negative
 * duration, or one too long to count in ns, is -1: forever. False when text is neither.
 */
bool server_parse_duration(const char *text, int64_t *ns);

/* A keep-alive of ns nanoseconds: as it is, or -1 (forever) when negative or too long. */
int64_t server_duration_ns(double ns);

#endif

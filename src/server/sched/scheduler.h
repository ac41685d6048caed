/*
 * The scheduler: which runner process serves which model. It starts runners
 * (runner_ops.h: `corral runner` children in the server) on demand, shares a loaded runner between requests (each runner
 * has num_parallel slots), unloads idle runners when their keep-alive expires or to make
 * room (CORRAL_MAX_LOADED_MODELS, available RAM), notices runners that died, and stops
 * every child on shutdown. Requests waiting for a load or for a free slot are the queue:
 * beyond CORRAL_MAX_QUEUE of them, a request gets 503; one no one waits for any more leaves it.
 */
#ifndef CORRAL_SERVER_SCHEDULER_H
#define CORRAL_SERVER_SCHEDULER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "corral/error.h"
#include "server/models/model_ref.h"
#include "server/sched/runner_ops.h"
#include "server/server.h"

typedef struct runner_handle runner_handle;

/* What a request needs loaded. A runner loaded with other values is reloaded. */
typedef struct load_request {
    const model_ref *ref;
    uint32_t num_ctx;   /* 0: the server default */
    uint32_t num_batch; /* 0: 512 */
    int num_thread;     /* 0: physical cores */
    int num_gpu;        /* layers on a GPU: 0 none (the default), -1 all that fit */
    int64_t keep_alive_ns; /* how long the model stays once idle; < 0 forever */
    /* asked every SCHEDULER_ABANDON_CHECK_MS while the request waits in the queue: true when
     * no one wants its answer any more (its client left), and it then leaves the queue; NULL:
     * never asked */
    bool (*abandoned)(const void *ctx);
    const void *abandoned_ctx;
} load_request;

#define SCHEDULER_ABANDON_CHECK_MS 100
/* The status of a request whose client left (nginx's "client closed request"): it only
 * reaches the request log and the metrics, as no one reads the reply. */
#define SCHEDULER_ABANDONED 499u

/* A scheduler of `corral runner` children (runner_process.h). */
scheduler *scheduler_create(const server_config *config, corral_error *err);
/* A scheduler whose runners are ops' (tests drive the policy with fakes); it frees ops'
 * context with ops->free. NULL with err (ops' context then still the caller's). */
scheduler *scheduler_create_with(const server_config *config, const runner_ops *ops,
                                 corral_error *err);
/* Stops every runner and waits for them. */
void scheduler_free(scheduler *sched);

/*
 * A running runner for the request's model, loading it (and evicting idle runners) as
 * needed; its reference count is raised until scheduler_release. NULL with *http_status
 * (503 queue full, 500 load failure, SCHEDULER_ABANDONED when req->abandoned said so while
 * it waited) and err set.
 */
runner_handle *scheduler_acquire(scheduler *sched, const load_request *req,
                                 unsigned *http_status, corral_error *err);

/* The request is over: lower the count and restart the keep-alive timer with the keep_alive of
 * the newest request that acquired the runner (as ollama: a request that ends late, such as an
 * aborted stream, does not override a later one's). */
void scheduler_release(scheduler *sched, runner_handle *runner);

/* The runner misbehaved (connection failed, crashed): stop it so the next request reloads. */
void scheduler_report_failure(scheduler *sched, runner_handle *runner);

/* Unload the model at model_path when idle (keep_alive 0 on an empty request). */
void scheduler_unload(scheduler *sched, const char *model_path);

const char *runner_handle_socket(const runner_handle *runner);
uint32_t runner_handle_n_ctx(const runner_handle *runner);
uint32_t runner_handle_n_vocab(const runner_handle *runner); /* 0: not reported */

/* A loaded model, for /api/ps. */
typedef struct scheduler_entry {
    char name[CORRAL_NAME_STRING_MAX]; /* display name */
    char digest[CORRAL_DIGEST_BUF];    /* manifest digest */
    char model_path[4096];
    char socket_path[108];             /* the runner's, for asking it directly */
    uint64_t size_bytes;               /* weights + KV cache estimate */
    int64_t expires_at_unix_ns;        /* INT64_MAX: never */
    uint32_t context_length;
    uint64_t size_vram;                /* what the runner holds on a GPU */
} scheduler_entry;

/*
 * Requests now waiting for a model to load or for a free slot, and
 * runners stopped since the start because they crashed or failed a request.
 */
void scheduler_stats(scheduler *sched, unsigned *queue_depth, uint64_t *runner_failures);

/* Snapshot of loaded models (malloc'ed array), latest expiry first. */
size_t scheduler_list(scheduler *sched, scheduler_entry **entries);

#endif

/*
 * The scheduler's policy (see scheduler.h). Runners live in a list guarded by one mutex; a
 * reaper thread notices runners that exited and unloads idle ones whose keep-alive expired.
 * One model loads at a time (as ollama does); loads happen outside the lock, with the runner
 * marked loading so others wait for it instead of starting a second copy. Processes and
 * memory are the runner_ops' (runner_ops.h): this file decides, they act.
 */
#include "server/sched/scheduler.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server/sched/runner_process.h"
#include "util/checked.h"

struct runner_handle {
    runner_handle *next;
    char model_path[4096];
    char *adapter_paths[MODEL_REF_MAX_ADAPTERS]; /* LoRA adapters the runner applies */
    size_t n_adapters;
    char *draft_path;       /* the draft model the runner guesses with, or NULL */
    char *projector_path; /* the vision projector the runner loaded; NULL: none */
    char name[CORRAL_NAME_STRING_MAX];
    char digest[CORRAL_DIGEST_BUF];
    uint32_t num_ctx, num_batch;
    int num_thread;
    uint32_t effective_ctx; /* what the runner reports: num_ctx capped at the trained length */
    uint32_t n_vocab;       /* the model's vocabulary size, as the runner reports it */
    void *process;          /* the runner_ops' handle; NULL until started */
    char socket_path[108];
    int refcount;
    bool loading, failed;
    int64_t expires_at;        /* monotonic ns; INT64_MAX never */
    int64_t keep_alive_ns;     /* of the newest request that acquired it */
    int64_t expires_at_unix;   /* for /api/ps */
    int64_t last_used;         /* monotonic ns, for LRU eviction */
    uint64_t size_bytes;
    int num_gpu;
    uint64_t vram_bytes;    /* what the runner reports holding on a GPU */
};

struct scheduler {
    server_config config;
    runner_ops ops;
    pthread_mutex_t lock;
    pthread_cond_t changed;
    runner_handle *runners;
    unsigned waiting;
    uint64_t n_failed; /* runners marked failed since the start */
    bool loading;
    bool stopping;
    pthread_t reaper;
};

static int64_t now_ns(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* When a keep-alive that starts at now ends: INT64_MAX (never) for a negative one or one past
 * what the clock can count. */
static int64_t expiry(int64_t now, int64_t keep_alive_ns)
{
    return keep_alive_ns < 0 ? INT64_MAX : saturating_add_i64(now, keep_alive_ns);
}

static void free_runner(scheduler *s, runner_handle *r)
{
    if (r->process)
        s->ops.stop(s->ops.ctx, r->process);
    for (size_t i = 0; i < r->n_adapters; i++)
        free(r->adapter_paths[i]);
    free(r->draft_path);
    free(r->projector_path);
    free(r);
}

static void unlink_runner(scheduler *s, runner_handle *r)
{
    for (runner_handle **p = &s->runners; *p; p = &(*p)->next)
        if (*p == r) {
            *p = r->next;
            return;
        }
}

/* ---- the reaper ---- */

static void reap(scheduler *s)
{
    int64_t now = now_ns(CLOCK_MONOTONIC);
    runner_handle **p = &s->runners;
    while (*p) {
        runner_handle *r = *p;
        if (!r->loading && !r->failed && r->process && !s->ops.alive(s->ops.ctx, r->process)) {
            r->failed = true; /* the ops log why */
            s->n_failed++;
        }
        bool expired = r->refcount == 0 && !r->loading && (r->failed || now >= r->expires_at);
        if (expired) {
            *p = r->next;
            free_runner(s, r);
            pthread_cond_broadcast(&s->changed);
        } else {
            p = &r->next;
        }
    }
}

/* The CLOCK_REALTIME deadline (the condition variable's clock) ms from now. */
static struct timespec after_ms(long ms)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    t.tv_sec += ms / 1000;
    t.tv_nsec += (ms % 1000) * 1000000;
    if (t.tv_nsec >= 1000000000) {
        t.tv_sec++;
        t.tv_nsec -= 1000000000;
    }
    return t;
}

static void *reaper_main(void *arg)
{
    scheduler *s = arg;
    pthread_mutex_lock(&s->lock);
    while (!s->stopping) {
        reap(s);
        struct timespec deadline = after_ms(200);
        pthread_cond_timedwait(&s->changed, &s->lock, &deadline);
    }
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

/* ---- public ---- */

scheduler *scheduler_create_with(const server_config *config, const runner_ops *ops,
                                 corral_error *err)
{
    scheduler *s = calloc(1, sizeof *s);
    if (!s) {
        corral_error_set(err, "out of memory");
        return NULL;
    }
    s->config = *config;
    s->ops = *ops;
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->changed, NULL);
    if (pthread_create(&s->reaper, NULL, reaper_main, s) != 0) {
        corral_error_set(err, "cannot start the scheduler thread");
        pthread_cond_destroy(&s->changed);
        pthread_mutex_destroy(&s->lock);
        free(s);
        return NULL;
    }
    return s;
}

scheduler *scheduler_create(const server_config *config, corral_error *err)
{
    runner_ops ops;
    if (!runner_process_ops_create(config, &ops, err))
        return NULL;
    scheduler *s = scheduler_create_with(config, &ops, err);
    if (!s)
        ops.free(ops.ctx);
    return s;
}

void scheduler_free(scheduler *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&s->lock);
    s->stopping = true;
    pthread_cond_broadcast(&s->changed);
    pthread_mutex_unlock(&s->lock);
    pthread_join(s->reaper, NULL);
    /* All asked first: each may take its grace period, and they take it together. */
    for (runner_handle *r = s->runners; r && s->ops.request_stop; r = r->next)
        if (r->process)
            s->ops.request_stop(s->ops.ctx, r->process);
    while (s->runners) {
        runner_handle *r = s->runners;
        s->runners = r->next;
        free_runner(s, r);
    }
    if (s->ops.free)
        s->ops.free(s->ops.ctx);
    pthread_cond_destroy(&s->changed);
    pthread_mutex_destroy(&s->lock);
    free(s);
}

static bool same_adapters(const runner_handle *r, const model_ref *ref)
{
    if (r->n_adapters != ref->n_adapters)
        return false;
    for (size_t i = 0; i < r->n_adapters; i++)
        if (strcmp(r->adapter_paths[i], ref->adapter_paths[i]) != 0)
            return false;
    return true;
}

static bool same_draft(const runner_handle *r, const model_ref *ref)
{
    return !r->draft_path == !ref->draft_path &&
           (!r->draft_path || strcmp(r->draft_path, ref->draft_path) == 0);
}

static bool same_load(const runner_handle *r, const char *path, const load_request *req)
{
    const char *projector = req->ref->projector_path;
    bool same_projector = !r->projector_path == !projector &&
                          (!projector || strcmp(r->projector_path, projector) == 0);
    return strcmp(r->model_path, path) == 0 && same_adapters(r, req->ref) && same_projector &&
           same_draft(r, req->ref) &&
           r->num_ctx == req->num_ctx && r->num_batch == req->num_batch &&
           r->num_thread == req->num_thread && r->num_gpu == req->num_gpu;
}

static size_t count_loaded(const scheduler *s)
{
    size_t n = 0;
    for (const runner_handle *r = s->runners; r; r = r->next)
        n += !r->failed;
    return n;
}

/* Least recently used idle runner, or NULL. */
static runner_handle *idle_lru(const scheduler *s, const char *except_path)
{
    runner_handle *best = NULL;
    for (runner_handle *r = s->runners; r; r = r->next)
        if (r->refcount == 0 && !r->loading && strcmp(r->model_path, except_path) != 0 &&
            (!best || r->last_used < best->last_used))
            best = r;
    return best;
}

/* Room for one more model of `need` bytes? Evict idle runners until there is. With
 * nothing left to evict, a model that does not fit in free RAM still loads: its weights are
 * mmapped and the kernel pages them in. Returns false when the caller must wait. */
static bool make_room(scheduler *s, const char *path, uint64_t need)
{
    for (;;) {
        bool too_many = count_loaded(s) >= s->config.max_loaded_models;
        bool too_big = need > s->ops.available_bytes(s->ops.ctx) && s->runners != NULL;
        if (!too_many && !too_big)
            return true;
        runner_handle *victim = idle_lru(s, path);
        if (!victim)
            return !too_many; /* busy runners only: wait if the count is the limit */
        unlink_runner(s, victim);
        free_runner(s, victim);
    }
}

runner_handle *scheduler_acquire(scheduler *s, const load_request *req_in, unsigned *http_status,
                                 corral_error *err)
{
    load_request req = *req_in;
    corral_error_set(err, "%s", "");
    if (req.num_ctx == 0)
        req.num_ctx = s->config.default_num_ctx;
    if (req.num_batch == 0)
        req.num_batch = 512;
    const char *path = req.ref->model_path;
    if (!path) {
        *http_status = 400;
        corral_error_set(err, "\"%s\" has no model weights", req.ref->display);
        return NULL;
    }
    runner_spec spec = {.name = req.ref->display, .model_path = path, .adapter_paths = req.ref->adapter_paths,
                        .n_adapters = req.ref->n_adapters, .draft_path = req.ref->draft_path,
                        .projector_path = req.ref->projector_path, .num_ctx = req.num_ctx,
                        .num_batch = req.num_batch, .num_parallel = s->config.num_parallel,
                        .num_thread = req.num_thread, .num_gpu = req.num_gpu,
                        .kv_type = s->config.kv_type};
    uint64_t need = s->ops.estimate_bytes(s->ops.ctx, &spec);
    pthread_mutex_lock(&s->lock);
    if (s->waiting >= s->config.max_queue) {
        pthread_mutex_unlock(&s->lock);
        *http_status = 503;
        corral_error_set(err, "server busy, please try again.  maximum pending requests exceeded");
        return NULL;
    }
    s->waiting++;
    runner_handle *found = NULL;
    bool abandoned = false;
    while (!s->stopping) {
        reap(s);
        runner_handle *stale = NULL;
        found = NULL;
        for (runner_handle *r = s->runners; r; r = r->next) {
            if (r->failed)
                continue;
            if (same_load(r, path, &req))
                found = r;
            else if (strcmp(r->model_path, path) == 0 && r->refcount == 0 && !r->loading)
                stale = r; /* loaded with other options: reload */
        }
        /* A request beyond the runner's slots waits here, where CORRAL_MAX_QUEUE counts it
         * (as ollama's pending queue does), not unbounded inside the runner. */
        if (found && !found->loading && found->refcount < (int)s->config.num_parallel)
            break;
        if (stale) {
            unlink_runner(s, stale);
            free_runner(s, stale);
            continue;
        }
        if (found || s->loading || !make_room(s, path, need)) {
            found = NULL;
            if (!req.abandoned) {
                pthread_cond_wait(&s->changed, &s->lock);
                continue;
            }
            struct timespec deadline = after_ms(SCHEDULER_ABANDON_CHECK_MS);
            pthread_cond_timedwait(&s->changed, &s->lock, &deadline);
            if (req.abandoned(req.abandoned_ctx)) {
                abandoned = true;
                corral_error_set(err, "the client left while the request waited");
                break;
            }
            continue;
        }
        /* load it ourselves */
        runner_handle *r = calloc(1, sizeof *r);
        if (!r) {
            corral_error_set(err, "out of memory");
            break;
        }
        snprintf(r->model_path, sizeof r->model_path, "%s", path);
        bool copied = true;
        for (size_t i = 0; copied && i < req.ref->n_adapters; i++)
            copied = (r->adapter_paths[r->n_adapters++] = strdup(req.ref->adapter_paths[i]));
        if (copied && req.ref->draft_path)
            copied = (r->draft_path = strdup(req.ref->draft_path)) != NULL;
        if (copied && req.ref->projector_path)
            copied = (r->projector_path = strdup(req.ref->projector_path)) != NULL;
        if (!copied) {
            free_runner(s, r);
            corral_error_set(err, "out of memory");
            break;
        }
        snprintf(r->name, sizeof r->name, "%s", req.ref->display);
        snprintf(r->digest, sizeof r->digest, "%s", req.ref->digest);
        r->num_ctx = req.num_ctx;
        r->num_batch = req.num_batch;
        r->num_thread = req.num_thread;
        r->num_gpu = req.num_gpu;
        r->size_bytes = need;
        r->loading = true;
        r->expires_at = INT64_MAX;
        r->next = s->runners;
        s->runners = r;
        s->loading = true;
        pthread_mutex_unlock(&s->lock);
        runner_started started = {0};
        bool ok = s->ops.start(s->ops.ctx, &spec, &started, err);
        pthread_mutex_lock(&s->lock);
        if (ok) {
            r->process = started.process;
            memcpy(r->socket_path, started.socket_path, sizeof r->socket_path);
            r->effective_ctx = started.n_ctx;
            r->n_vocab = started.n_vocab;
            r->vram_bytes = started.vram_bytes;
        }
        s->loading = false;
        r->loading = false;
        pthread_cond_broadcast(&s->changed);
        if (!ok) {
            unlink_runner(s, r);
            free_runner(s, r);
            break;
        }
        found = r;
        break;
    }
    if (found) {
        found->refcount++;
        found->last_used = now_ns(CLOCK_MONOTONIC);
        found->expires_at = INT64_MAX;
        found->keep_alive_ns = req.keep_alive_ns;
    } else if (s->stopping && err && !err->message[0]) {
        corral_error_set(err, "the server is shutting down");
    }
    s->waiting--;
    pthread_mutex_unlock(&s->lock);
    if (!found)
        *http_status = abandoned ? SCHEDULER_ABANDONED : 500;
    return found;
}

void scheduler_release(scheduler *s, runner_handle *r)
{
    pthread_mutex_lock(&s->lock);
    int64_t keep_alive_ns = r->keep_alive_ns;
    r->refcount--;
    int64_t now = now_ns(CLOCK_MONOTONIC);
    r->last_used = now;
    r->expires_at = expiry(now, keep_alive_ns);
    r->expires_at_unix = expiry(now_ns(CLOCK_REALTIME), keep_alive_ns);
    pthread_cond_broadcast(&s->changed);
    pthread_mutex_unlock(&s->lock);
}

void scheduler_report_failure(scheduler *s, runner_handle *r)
{
    pthread_mutex_lock(&s->lock);
    s->n_failed += !r->failed;
    r->failed = true;
    /* Now, not when its last request ends: its other requests then fail at once instead of
     * each waiting out its own deadline, and a stopped process cannot take a SIGTERM. The
     * reaper collects it. */
    if (r->process)
        s->ops.kill(s->ops.ctx, r->process);
    pthread_cond_broadcast(&s->changed);
    pthread_mutex_unlock(&s->lock);
}

void scheduler_unload(scheduler *s, const char *model_path)
{
    pthread_mutex_lock(&s->lock);
    for (runner_handle *r = s->runners; r; r = r->next)
        if (strcmp(r->model_path, model_path) == 0)
            r->expires_at = 0; /* the reaper stops it once it is idle */
    pthread_cond_broadcast(&s->changed);
    pthread_mutex_unlock(&s->lock);
}

const char *runner_handle_socket(const runner_handle *r)
{
    return r->socket_path;
}

uint32_t runner_handle_n_vocab(const runner_handle *r)
{
    return r->n_vocab;
}

uint32_t runner_handle_n_ctx(const runner_handle *r)
{
    return r->effective_ctx ? r->effective_ctx : r->num_ctx;
}

void scheduler_stats(scheduler *s, unsigned *queue_depth, uint64_t *runner_failures)
{
    pthread_mutex_lock(&s->lock);
    *queue_depth = s->waiting;
    *runner_failures = s->n_failed;
    pthread_mutex_unlock(&s->lock);
}

static int compare_expiry(const void *a, const void *b)
{
    const scheduler_entry *x = a, *y = b;
    return x->expires_at_unix_ns < y->expires_at_unix_ns ? 1
           : x->expires_at_unix_ns > y->expires_at_unix_ns ? -1 : 0;
}

size_t scheduler_list(scheduler *s, scheduler_entry **entries)
{
    pthread_mutex_lock(&s->lock);
    size_t n = 0;
    for (runner_handle *r = s->runners; r; r = r->next)
        n += !r->failed && !r->loading;
    *entries = calloc(n ? n : 1, sizeof **entries);
    size_t i = 0;
    int64_t now_unix = now_ns(CLOCK_REALTIME);
    for (runner_handle *r = s->runners; r && *entries; r = r->next) {
        if (r->failed || r->loading)
            continue;
        scheduler_entry *e = &(*entries)[i++];
        snprintf(e->name, sizeof e->name, "%s", r->name);
        snprintf(e->digest, sizeof e->digest, "%s", r->digest);
        snprintf(e->model_path, sizeof e->model_path, "%s", r->model_path);
        snprintf(e->socket_path, sizeof e->socket_path, "%s", r->socket_path);
        e->size_bytes = r->size_bytes;
        e->context_length = runner_handle_n_ctx(r);
        e->size_vram = r->vram_bytes;
        e->expires_at_unix_ns = r->refcount > 0 ? expiry(now_unix, s->config.keep_alive_ns)
                                                : r->expires_at_unix;
    }
    pthread_mutex_unlock(&s->lock);
    if (!*entries)
        return 0;
    qsort(*entries, i, sizeof **entries, compare_expiry);
    return i;
}

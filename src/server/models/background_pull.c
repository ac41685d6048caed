/*
 * background_pull (see background_pull.h). The pulling thread appends progress objects to a
 * queue under a lock; the collector swaps them out. Consecutive reports about the same blob
 * replace each other, so a slow reader sees the latest numbers rather than a backlog.
 */
#include "server/models/background_pull.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server/models/bundled.h"

#define COLLECT_WAIT_MS 500 /* a collector without news still returns this often */

struct background_pull {
    corral_store *store;
    char *name;
    corral_registry_options opts;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t changed;
    /* guarded by lock */
    json_t *queue;          /* progress objects not collected yet */
    bool last_is_transfer;  /* the queue's last object is a blob's byte count */
    bool finished;
    bool cancel;
    corral_registry_status status;
    corral_error err;
};

json_t *registry_progress_json(const corral_registry_progress *p)
{
    json_t *obj = json_pack("{s:s}", "status", p->status);
    if (obj && p->digest) {
        json_object_set_new(obj, "digest", json_string(p->digest));
        if (p->total_bytes) /* ollama omits zero values */
            json_object_set_new(obj, "total", json_integer((json_int_t)p->total_bytes));
        if (p->completed_bytes)
            json_object_set_new(obj, "completed", json_integer((json_int_t)p->completed_bytes));
    }
    return obj;
}

static bool on_progress(void *ctx, const corral_registry_progress *p)
{
    background_pull *bp = ctx;
    json_t *obj = registry_progress_json(p);
    pthread_mutex_lock(&bp->lock);
    if (obj) {
        size_t n = json_array_size(bp->queue);
        if (p->digest && bp->last_is_transfer && n > 0)
            json_array_set_new(bp->queue, n - 1, obj);
        else
            json_array_append_new(bp->queue, obj);
        bp->last_is_transfer = p->digest != NULL;
        pthread_cond_broadcast(&bp->changed);
    }
    bool go_on = !bp->cancel;
    pthread_mutex_unlock(&bp->lock);
    return go_on;
}

static void *pull_thread(void *arg)
{
    background_pull *bp = arg;
    corral_error err = {{0}};
    corral_registry_status status =
        bundled_has(bp->name) ? bundled_pull(bp->store, &bp->opts, &err)
                              : corral_registry_pull(bp->store, bp->name, &bp->opts, &err);
    pthread_mutex_lock(&bp->lock);
    bp->status = status;
    bp->err = err;
    bp->finished = true;
    pthread_cond_broadcast(&bp->changed);
    pthread_mutex_unlock(&bp->lock);
    return NULL;
}

background_pull *background_pull_start(corral_store *store, const char *name,
                                       const corral_registry_options *opts, corral_error *err)
{
    background_pull *bp = calloc(1, sizeof *bp);
    if (!bp || !(bp->name = strdup(name)) || !(bp->queue = json_array())) {
        if (bp) {
            free(bp->name);
            free(bp);
        }
        corral_error_set(err, "out of memory");
        return NULL;
    }
    bp->store = store;
    if (opts)
        bp->opts = *opts;
    bp->opts.progress = on_progress;
    bp->opts.progress_ctx = bp;
    pthread_mutex_init(&bp->lock, NULL);
    pthread_cond_init(&bp->changed, NULL);
    if (pthread_create(&bp->thread, NULL, pull_thread, bp) != 0) {
        corral_error_set(err, "cannot start the pull");
        pthread_mutex_destroy(&bp->lock);
        pthread_cond_destroy(&bp->changed);
        json_decref(bp->queue);
        free(bp->name);
        free(bp);
        return NULL;
    }
    return bp;
}

bool background_pull_collect(background_pull *bp, json_t *out)
{
    pthread_mutex_lock(&bp->lock);
    if (json_array_size(bp->queue) == 0 && !bp->finished) {
        struct timespec deadline;
        clock_gettime(CLOCK_REALTIME, &deadline);
        deadline.tv_nsec += (long)COLLECT_WAIT_MS * 1000000L;
        deadline.tv_sec += deadline.tv_nsec / 1000000000L;
        deadline.tv_nsec %= 1000000000L;
        while (json_array_size(bp->queue) == 0 && !bp->finished &&
               pthread_cond_timedwait(&bp->changed, &bp->lock, &deadline) != ETIMEDOUT) {
        }
    }
    json_array_extend(out, bp->queue);
    json_array_clear(bp->queue);
    bp->last_is_transfer = false;
    bool finished = bp->finished;
    pthread_mutex_unlock(&bp->lock);
    return finished;
}

corral_registry_status background_pull_result(const background_pull *bp, corral_error *err)
{
    if (bp->status != CORRAL_REGISTRY_OK && err)
        *err = bp->err;
    return bp->status;
}

void background_pull_free(background_pull *bp)
{
    if (!bp)
        return;
    pthread_mutex_lock(&bp->lock);
    bp->cancel = true;
    pthread_mutex_unlock(&bp->lock);
    pthread_join(bp->thread, NULL);
    pthread_mutex_destroy(&bp->lock);
    pthread_cond_destroy(&bp->changed);
    json_decref(bp->queue);
    free(bp->name);
    free(bp);
}

/*
 * Blob downloads: one blob is fetched as parallel ranged parts into blobs/sha256-<hex>-partial
 * with each part's progress in blobs/sha256-<hex>-partial-<N> (ollama's layout and JSON, so
 * either program resumes the other's downloads), then streamed through corral_blob_writer,
 * which checks the digest before the blob gets its name. A download runs on its own thread and
 * is shared by every pull of the same blob in this process; it stops early only when every
 * pull waiting for it has given up, leaving the partial files for the next pull to resume.
 */
#include "registry/registry_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MAX_PART_FILES 64u          /* ollama uses at most 16 parts; more is not a plan we made */
#define SAVE_EVERY_BYTES (1u << 20) /* part state is written at least this often */
#define MAX_STALLS 20u              /* stalls are retried without costing a retry, up to this */
#define REPORT_INTERVAL_MS 60
#define VERIFY_CHUNK (1u << 20)

typedef struct part {
    struct download *d;
    unsigned index;
    uint64_t offset, size_bytes;
    uint64_t completed;       /* written by this part's worker only */
    uint64_t saved;           /* completed as last written to the part file */
    corral_registry_status status;
    corral_error err;
} part;

typedef struct download {
    struct download *next;    /* in the active list */
    char root[4096];          /* of the store: pulls into one root share a download */
    char digest[CORRAL_DIGEST_BUF];
    uint64_t size_bytes;
    corral_store *store;      /* opened by the download at root */
    reg_client *client;       /* a clone owned by the download */
    char *url;
    char *partial_path;
    int fd;
    part *parts;
    size_t n_parts;
    atomic_uint next_part;
    atomic_uint_fast64_t completed;
    atomic_bool cancelled;
    /* guarded by table_lock */
    unsigned refs;            /* waiting pulls + the download thread */
    unsigned interested;      /* waiting pulls that still want the blob */
    bool done;
    corral_registry_status status;
    corral_error err;
    pthread_cond_t changed;
} download;

static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static download *active;
static atomic_uint_fast64_t downloaded_bytes; /* for the server's metrics */

uint64_t corral_registry_downloaded_bytes(void)
{
    return atomic_load_explicit(&downloaded_bytes, memory_order_relaxed);
}

/* ---- part files ---- */

static char *part_path(const download *d, unsigned index)
{
    char *path = NULL;
    if (asprintf(&path, "%s-%u", d->partial_path, index) < 0)
        return NULL;
    return path;
}

static void save_part(part *p)
{
    char *path = part_path(p->d, p->index);
    char *temp = NULL;
    if (!path || asprintf(&temp, "%s.tmp", path) < 0) {
        free(path);
        return;
    }
    FILE *f = fopen(temp, "we");
    if (f) {
        /* ollama's blobDownloadPart JSON */
        int bad = fprintf(f, "{\"N\":%u,\"Offset\":%llu,\"Size\":%llu,\"Completed\":%llu}\n",
                          p->index, (unsigned long long)p->offset,
                          (unsigned long long)p->size_bytes, (unsigned long long)p->completed) < 0;
        if (fclose(f) != 0 || bad || rename(temp, path) != 0)
            unlink(temp);
        else
            p->saved = p->completed;
    }
    free(temp);
    free(path);
}

static void remove_part_files(const download *d)
{
    for (unsigned i = 0; i < MAX_PART_FILES; i++) {
        char *path = part_path(d, i);
        if (path)
            unlink(path);
        free(path);
    }
}

/* The plan left by an earlier pull, if it is whole and consistent with this blob. */
static bool load_parts(download *d)
{
    part *parts = NULL;
    size_t n = 0;
    uint64_t expected_offset = 0;
    for (unsigned i = 0; i < MAX_PART_FILES && expected_offset < d->size_bytes; i++) {
        char *path = part_path(d, i);
        json_t *root = path ? json_load_file(path, 0, NULL) : NULL;
        free(path);
        json_int_t index = json_integer_value(json_object_get(root, "N"));
        json_int_t offset = json_integer_value(json_object_get(root, "Offset"));
        json_int_t size = json_integer_value(json_object_get(root, "Size"));
        json_int_t completed = json_integer_value(json_object_get(root, "Completed"));
        json_decref(root);
        bool valid = root && index == (json_int_t)i && offset >= 0 &&
                     (uint64_t)offset == expected_offset && size > 0 &&
                     (uint64_t)size <= d->size_bytes - expected_offset && completed >= 0 &&
                     completed <= size;
        part *grown = valid ? realloc(parts, (n + 1) * sizeof *parts) : NULL;
        if (!grown) {
            free(parts);
            return false;
        }
        parts = grown;
        parts[n++] = (part){.d = d, .index = i, .offset = (uint64_t)offset,
                            .size_bytes = (uint64_t)size, .completed = (uint64_t)completed,
                            .saved = (uint64_t)completed};
        expected_offset += (uint64_t)size;
    }
    if (expected_offset != d->size_bytes || n == 0) {
        free(parts);
        return false;
    }
    d->parts = parts;
    d->n_parts = n;
    return true;
}

/* A fresh plan: at most max_parts parts of at least part_min_bytes. */
static bool plan_parts(download *d)
{
    const corral_registry_options *o = &d->client->opts;
    uint64_t n = (d->size_bytes + o->part_min_bytes - 1) / o->part_min_bytes;
    if (n > o->max_parts)
        n = o->max_parts;
    if (n == 0)
        n = 1;
    uint64_t part_size = (d->size_bytes + n - 1) / n;
    d->parts = calloc((size_t)n, sizeof *d->parts);
    if (!d->parts)
        return false;
    uint64_t offset = 0;
    for (d->n_parts = 0; offset < d->size_bytes; d->n_parts++) {
        uint64_t size = d->size_bytes - offset < part_size ? d->size_bytes - offset : part_size;
        d->parts[d->n_parts] = (part){.d = d, .index = (unsigned)d->n_parts, .offset = offset,
                                      .size_bytes = size};
        offset += size;
    }
    return true;
}

/* ---- one part ---- */

static bool part_sink(void *ctx, const char *data, size_t len)
{
    part *p = ctx;
    if (len > p->size_bytes - p->completed) {
        corral_error_set(&p->err, "the registry sent more bytes than the range asked for");
        p->status = CORRAL_REGISTRY_INVALID;
        return false;
    }
    while (len > 0) {
        ssize_t n = pwrite(p->d->fd, data, len, (off_t)(p->offset + p->completed));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            corral_error_set(&p->err, "cannot write '%s': %s", p->d->partial_path,
                             strerror(errno));
            p->status = CORRAL_REGISTRY_IO;
            return false;
        }
        data += n;
        len -= (size_t)n;
        p->completed += (uint64_t)n;
        atomic_fetch_add(&p->d->completed, (uint64_t)n);
        atomic_fetch_add_explicit(&downloaded_bytes, (uint64_t)n, memory_order_relaxed);
    }
    if (p->completed - p->saved >= SAVE_EVERY_BYTES)
        save_part(p);
    return true;
}

static bool part_xfer(void *ctx, uint64_t downloaded, uint64_t uploaded)
{
    (void)downloaded, (void)uploaded;
    part *p = ctx;
    return !atomic_load(&p->d->cancelled);
}

/* One attempt at the rest of the part. Sets p->status; true when the part is complete. */
static bool fetch_part_once(part *p, reg_response *resp, bool *retry)
{
    download *d = p->d;
    uint64_t first = p->offset + p->completed, last = p->offset + p->size_bytes - 1;
    reg_request req = REG_REQUEST_INIT;
    req.method = "GET";
    req.url = d->url;
    req.has_range = true;
    req.range_first = first;
    req.range_last = last;
    req.sink = part_sink;
    req.sink_ctx = p;
    req.xfer = part_xfer;
    req.xfer_ctx = p;
    req.follow_redirects = true;
    req.require_partial = first != 0 || last != d->size_bytes - 1;
    p->status = CORRAL_REGISTRY_OK;
    corral_registry_status status;
    corral_error err = {{0}};
    bool sent = reg_perform(d->client, &req, resp, &status, &err);
    *retry = false;
    if (atomic_load(&d->cancelled)) {
        p->status = CORRAL_REGISTRY_CANCELLED;
        corral_error_set(&p->err, "cancelled");
        return false;
    }
    if (p->status != CORRAL_REGISTRY_OK) /* the sink refused: a write failed or too many bytes */
        return false;
    if (!sent) {
        p->status = status;
        p->err = err;
        *retry = resp->transport_failed && !resp->aborted;
        return false;
    }
    if (resp->status == 200 || resp->status == 206) {
        if (p->completed == p->size_bytes)
            return true;
        corral_error_set(&p->err, "%s: the registry's reply ended early", d->digest);
        p->status = CORRAL_REGISTRY_FAILED;
        *retry = true;
        return false;
    }
    char what[CORRAL_DIGEST_BUF + 32];
    snprintf(what, sizeof what, "pull blob %s", d->digest);
    reg_describe_failure(resp, what, &p->err);
    p->status = reg_status_of_reply(resp);
    *retry = resp->status >= 500 || resp->status == 408 || resp->status == 429;
    return false;
}

static void fetch_part(part *p)
{
    reg_response resp = {0};
    unsigned failures = 0, stalls = 0;
    while (p->completed < p->size_bytes) {
        uint64_t before = p->completed;
        bool retry;
        if (fetch_part_once(p, &resp, &retry))
            break;
        if (!retry)
            break;
        if (p->completed > before) /* progress: a flaky link is not a dead one */
            failures = 0;
        if (resp.stalled && ++stalls <= MAX_STALLS)
            continue;
        if (++failures >= p->d->client->opts.max_retries)
            break;
        reg_backoff(p->d->client, failures);
    }
    if (p->completed == p->size_bytes)
        p->status = CORRAL_REGISTRY_OK;
    save_part(p);
    reg_response_clear(&resp);
}

static void *part_worker(void *arg)
{
    download *d = arg;
    for (;;) {
        unsigned i = atomic_fetch_add(&d->next_part, 1);
        if (i >= d->n_parts)
            return NULL;
        part *p = &d->parts[i];
        if (p->completed < p->size_bytes)
            fetch_part(p);
        if (p->status != CORRAL_REGISTRY_OK)
            atomic_store(&d->cancelled, true); /* one part failed: the blob cannot finish now */
    }
}

/* ---- the whole blob ---- */

/* Stream the finished partial file through the verifying writer into the store. */
static corral_registry_status verify_into_store(download *d, corral_error *err)
{
    corral_blob_writer *w = corral_blob_writer_create(d->store, d->size_bytes, err);
    if (!w)
        return CORRAL_REGISTRY_IO;
    char *buf = malloc(VERIFY_CHUNK);
    corral_registry_status status = CORRAL_REGISTRY_OK;
    uint64_t pos = 0;
    while (buf && pos < d->size_bytes) {
        ssize_t n = pread(d->fd, buf, VERIFY_CHUNK, (off_t)pos);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            corral_error_set(err, "cannot read '%s': %s", d->partial_path,
                             n < 0 ? strerror(errno) : "unexpected end of file");
            status = CORRAL_REGISTRY_IO;
            break;
        }
        if (!corral_blob_writer_write(w, buf, (size_t)n, err)) {
            status = CORRAL_REGISTRY_IO;
            break;
        }
        pos += (uint64_t)n;
    }
    if (!buf) {
        corral_error_set(err, "out of memory");
        status = CORRAL_REGISTRY_IO;
    }
    if (status == CORRAL_REGISTRY_OK) {
        corral_store_status s = corral_blob_writer_finish(w, d->digest, d->size_bytes, err);
        if (s == CORRAL_STORE_INVALID) {
            corral_error_prefix(err, "%s: file must be downloaded again", d->digest);
            status = CORRAL_REGISTRY_INVALID;
        } else if (s != CORRAL_STORE_OK) {
            status = CORRAL_REGISTRY_IO;
        }
    }
    free(buf);
    corral_blob_writer_free(w);
    return status;
}

static void remove_partial(download *d)
{
    unlink(d->partial_path);
    remove_part_files(d);
}

/* Open and lock the partial file (another process may be fetching the same blob: wait). */
static corral_registry_status open_partial(download *d, corral_error *err)
{
    d->fd = open(d->partial_path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (d->fd < 0) {
        corral_error_set(err, "cannot open '%s': %s", d->partial_path, strerror(errno));
        return CORRAL_REGISTRY_IO;
    }
    while (flock(d->fd, LOCK_EX) != 0) {
        if (errno != EINTR) {
            corral_error_set(err, "cannot lock '%s': %s", d->partial_path, strerror(errno));
            return CORRAL_REGISTRY_IO;
        }
    }
    /* The server's sweeper may have removed an old partial file between our open and our
     * lock (it locks it while it does): then start again on a new one. */
    struct stat by_fd, by_path;
    if (fstat(d->fd, &by_fd) == 0 && stat(d->partial_path, &by_path) == 0 &&
        by_fd.st_ino == by_path.st_ino && by_fd.st_dev == by_path.st_dev)
        return CORRAL_REGISTRY_OK;
    close(d->fd);
    d->fd = -1;
    return open_partial(d, err);
}

/* Resume the parts on disk when they fit this blob; otherwise start over. */
static corral_registry_status prepare_parts(download *d, corral_error *err)
{
    struct stat st;
    bool resumable = fstat(d->fd, &st) == 0 && (uint64_t)st.st_size == d->size_bytes &&
                     load_parts(d);
    if (!resumable) {
        remove_part_files(d);
        if (ftruncate(d->fd, 0) != 0 || ftruncate(d->fd, (off_t)d->size_bytes) != 0) {
            corral_error_set(err, "cannot size '%s': %s", d->partial_path, strerror(errno));
            return CORRAL_REGISTRY_IO;
        }
        if (!plan_parts(d)) {
            corral_error_set(err, "out of memory");
            return CORRAL_REGISTRY_IO;
        }
    }
    uint64_t done = 0;
    for (size_t i = 0; i < d->n_parts; i++)
        done += d->parts[i].completed;
    atomic_store(&d->completed, done);
    return CORRAL_REGISTRY_OK;
}

/* Fetch every part on up to max_parts threads; the first failure is the blob's. */
static corral_registry_status fetch_parts(download *d, corral_error *err)
{
    size_t n_workers = d->n_parts < d->client->opts.max_parts ? d->n_parts
                                                               : d->client->opts.max_parts;
    pthread_t threads[64];
    if (n_workers > sizeof threads / sizeof threads[0])
        n_workers = sizeof threads / sizeof threads[0];
    size_t started = 0;
    for (; started < n_workers; started++)
        if (pthread_create(&threads[started], NULL, part_worker, d) != 0)
            break;
    if (started == 0)
        part_worker(d);
    for (size_t i = 0; i < started; i++)
        pthread_join(threads[i], NULL);
    corral_registry_status status = CORRAL_REGISTRY_OK;
    for (size_t i = 0; i < d->n_parts; i++) {
        part *p = &d->parts[i];
        if (p->status == CORRAL_REGISTRY_OK && p->completed == p->size_bytes)
            continue;
        /* Prefer a real cause over the cancellations it triggered in the other parts. */
        if (status == CORRAL_REGISTRY_OK || (status == CORRAL_REGISTRY_CANCELLED &&
                                             p->status != CORRAL_REGISTRY_CANCELLED)) {
            status = p->status == CORRAL_REGISTRY_OK ? CORRAL_REGISTRY_CANCELLED : p->status;
            *err = p->err;
        }
    }
    return status;
}

static corral_registry_status run(download *d, corral_error *err)
{
    corral_registry_status status = open_partial(d, err);
    if (status != CORRAL_REGISTRY_OK)
        return status;
    uint64_t have = 0;
    if (corral_store_blob_stat(d->store, d->digest, &have, NULL) == CORRAL_STORE_OK &&
        have == d->size_bytes) { /* another process finished it while we waited */
        remove_partial(d);
        return CORRAL_REGISTRY_OK;
    }
    if ((status = prepare_parts(d, err)) != CORRAL_REGISTRY_OK)
        return status;
    if ((status = fetch_parts(d, err)) != CORRAL_REGISTRY_OK)
        return status; /* the partial files stay: the next pull resumes from them */
    status = verify_into_store(d, err);
    if (status == CORRAL_REGISTRY_OK || status == CORRAL_REGISTRY_INVALID)
        remove_partial(d); /* a mismatch leaves nothing: the bytes were wrong */
    return status;
}

static void release(download *d)
{
    /* table_lock held */
    if (--d->refs > 0)
        return;
    pthread_cond_destroy(&d->changed);
    if (d->fd >= 0)
        close(d->fd);
    reg_client_free(d->client);
    corral_store_close(d->store);
    free(d->url);
    free(d->partial_path);
    free(d->parts);
    free(d);
}

static void *download_thread(void *arg)
{
    download *d = arg;
    corral_error err = {{0}};
    corral_registry_status status = run(d, &err);
    if (d->fd >= 0)
        close(d->fd); /* releases the lock */
    d->fd = -1;
    pthread_mutex_lock(&table_lock);
    for (download **link = &active; *link; link = &(*link)->next)
        if (*link == d) {
            *link = d->next;
            break;
        }
    d->done = true;
    d->status = status;
    d->err = err;
    pthread_cond_broadcast(&d->changed);
    release(d);
    pthread_mutex_unlock(&table_lock);
    return NULL;
}

/* A new download of digest, with its thread started; NULL with err. table_lock held. */
static download *start(reg_client *c, corral_store *store, const char *digest,
                       uint64_t size_bytes, corral_error *err)
{
    download *d = calloc(1, sizeof *d);
    if (!d) {
        corral_error_set(err, "out of memory");
        return NULL;
    }
    snprintf(d->root, sizeof d->root, "%s", corral_store_root(store));
    memcpy(d->digest, digest, sizeof d->digest);
    d->size_bytes = size_bytes;
    /* Its own handle on the store: the pull that started it may close its own and leave. */
    d->store = corral_store_open(d->root, err);
    d->fd = -1;
    d->refs = 2;
    d->interested = 1;
    pthread_cond_init(&d->changed, NULL);
    char *blob_path = d->store ? corral_store_blob_path(d->store, digest, err) : NULL;
    if (blob_path && asprintf(&d->partial_path, "%s-partial", blob_path) < 0)
        d->partial_path = NULL;
    free(blob_path);
    d->client = d->partial_path ? reg_client_clone(c, err) : NULL;
    d->url = d->client ? reg_client_url(c, "blobs", digest) : NULL;
    pthread_t thread;
    pthread_attr_t attr;
    bool started = false;
    if (d->url && pthread_attr_init(&attr) == 0) {
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        started = pthread_create(&thread, &attr, download_thread, d) == 0;
        pthread_attr_destroy(&attr);
    }
    if (!started) {
        if (d->client)
            corral_error_set(err, "cannot start the download of %s", digest);
        d->refs = 1;
        release(d);
        return NULL;
    }
    d->next = active;
    active = d;
    return d;
}

static void deadline_after_ms(struct timespec *ts, long ms)
{
    clock_gettime(CLOCK_REALTIME, ts);
    ts->tv_nsec += ms * 1000000L;
    ts->tv_sec += ts->tv_nsec / 1000000000L;
    ts->tv_nsec %= 1000000000L;
}

corral_registry_status reg_download_blob(reg_client *c, corral_store *store, const char *digest,
                                         uint64_t size_bytes, corral_error *err)
{
    if (!corral_digest_check(digest, err))
        return CORRAL_REGISTRY_INVALID;
    if (size_bytes > (uint64_t)INT64_MAX) {
        corral_error_set(err, "%s: size %llu is not a file size", digest,
                         (unsigned long long)size_bytes);
        return CORRAL_REGISTRY_INVALID;
    }
    char status_text[32];
    reg_status_for_digest("pulling", digest, status_text, sizeof status_text);

    pthread_mutex_lock(&table_lock);
    download *d = active;
    /* A cancelled download is winding down; a new one waits for its lock, then resumes. */
    while (d && !(strcmp(d->digest, digest) == 0 && !atomic_load(&d->cancelled) &&
                  strcmp(d->root, corral_store_root(store)) == 0))
        d = d->next;
    if (d) {
        d->refs++;
        d->interested++;
    } else if (!(d = start(c, store, digest, size_bytes, err))) {
        pthread_mutex_unlock(&table_lock);
        return CORRAL_REGISTRY_IO;
    }
    bool gave_up = false;
    while (!d->done) {
        struct timespec deadline;
        deadline_after_ms(&deadline, REPORT_INTERVAL_MS);
        pthread_cond_timedwait(&d->changed, &table_lock, &deadline);
        if (d->done)
            break;
        uint64_t completed = atomic_load(&d->completed);
        pthread_mutex_unlock(&table_lock);
        bool keep_going = reg_report(c, status_text, digest, d->size_bytes, completed);
        pthread_mutex_lock(&table_lock);
        if (!keep_going) {
            if (--d->interested == 0)
                atomic_store(&d->cancelled, true);
            gave_up = true;
            break;
        }
    }
    corral_registry_status status = gave_up ? CORRAL_REGISTRY_CANCELLED : d->status;
    if (gave_up)
        corral_error_set(err, "cancelled");
    else if (status != CORRAL_REGISTRY_OK)
        *err = d->err;
    uint64_t shared_size = d->size_bytes;
    release(d);
    pthread_mutex_unlock(&table_lock);
    if (status != CORRAL_REGISTRY_OK)
        return status;
    if (shared_size != size_bytes) { /* the same digest with another size: one is lying */
        corral_error_set(err, "%s: size mismatch: the manifest says %llu bytes, the blob has %llu",
                         digest, (unsigned long long)size_bytes, (unsigned long long)shared_size);
        return CORRAL_REGISTRY_INVALID;
    }
    reg_report(c, status_text, digest, size_bytes, size_bytes);
    return CORRAL_REGISTRY_OK;
}

/*
 * The scheduler (see scheduler.h). Runners live in a list guarded by one mutex; a reaper
 * thread notices runners that exited and unloads idle ones whose keep-alive expired. One
 * model loads at a time (as ollama does); loads happen outside the lock, with the runner
 * marked loading so others wait for it instead of starting a second copy.
 */
#include "scheduler.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "corral/engine.h"
#include "server/runner_client.h"
#include "util/checked.h"
#include "util/log.h"

#define HEALTH_POLL_MS 50

struct runner_handle {
    runner_handle *next;
    char model_path[4096];
    char *adapter_paths[MODEL_REF_MAX_ADAPTERS]; /* LoRA adapters the runner applies */
    size_t n_adapters;
    char name[CORRAL_NAME_STRING_MAX];
    char digest[CORRAL_DIGEST_BUF];
    uint32_t num_ctx, num_batch;
    int num_thread;
    int num_gpu;
    uint64_t vram_bytes;    /* what the runner reports holding on a GPU */
    uint32_t effective_ctx; /* what the runner reports: num_ctx capped at the trained length */
    uint32_t n_vocab;       /* the model's vocabulary size, as the runner reports it */
    pid_t pid;
    char socket_path[108];
    char log_path[128];
    int refcount;
    bool loading, failed;
    int64_t expires_at;        /* monotonic ns; INT64_MAX never */
    int64_t keep_alive_ns;     /* of the newest request that acquired it */
    int64_t expires_at_unix;   /* for /api/ps */
    int64_t last_used;         /* monotonic ns, for LRU eviction */
    int64_t load_ns;           /* how long the load took; reported once */
    uint64_t size_bytes;
};

struct scheduler {
    server_config config;
    pthread_mutex_t lock;
    pthread_cond_t changed;
    runner_handle *runners;
    unsigned waiting;
    uint64_t n_failed; /* runners marked failed since the start */
    bool loading;
    bool stopping;
    pthread_t reaper;
    char dir[64]; /* sockets and logs of the runners */
    unsigned next_id;
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

/* ---- runner processes ---- */

/* SIGTERM, a short grace period, then SIGKILL; always reaps the child. */
static void stop_process(pid_t pid)
{
    if (pid <= 0)
        return;
    kill(pid, SIGTERM);
    kill(pid, SIGCONT); /* a stopped process takes its SIGTERM only once it runs */
    for (int i = 0; i < 100; i++) { /* up to 5 s: the runner drains its connections */
        pid_t r = waitpid(pid, NULL, WNOHANG);
        if (r == pid || (r < 0 && errno == ECHILD))
            return;
        usleep(50 * 1000);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

static void free_runner(runner_handle *r)
{
    stop_process(r->pid);
    unlink(r->socket_path);
    unlink(r->log_path);
    for (size_t i = 0; i < r->n_adapters; i++)
        free(r->adapter_paths[i]);
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

/* Last line of the runner's log, for the error a failed load reports. */
static void last_log_line(const char *path, char *out, size_t size)
{
    out[0] = '\0';
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        size_t n = strlen(line);
        if (line[0] != '\n') {
            n = n < size - 1 ? n : size - 1;
            memcpy(out, line, n);
            out[n] = '\0';
        }
    }
    fclose(f);
    size_t n = strlen(out);
    if (n && out[n - 1] == '\n')
        out[n - 1] = '\0';
}

/* Ask the runner for its health; its context length (capped at the model's) and vocabulary
 * size go to r. */
static bool health_ok(runner_handle *r)
{
    json_t *health = runner_health(r->socket_path, 2000);
    json_int_t ctx = json_integer_value(json_object_get(health, "n_ctx"));
    json_int_t vocab = json_integer_value(json_object_get(health, "n_vocab"));
    json_int_t vram = json_integer_value(json_object_get(health, "vram_bytes"));
    r->vram_bytes = vram > 0 ? (uint64_t)vram : 0;
    if (ctx > 0 && ctx <= UINT32_MAX)
        r->effective_ctx = (uint32_t)ctx;
    if (vocab > 0 && vocab <= UINT32_MAX)
        r->n_vocab = (uint32_t)vocab;
    json_decref(health);
    return health != NULL;
}

/* Start `corral runner` for r and wait until it answers; false with err on failure. */
static bool spawn_runner(scheduler *s, runner_handle *r, corral_error *err)
{
    char ctx[16], batch[16], parallel[16], threads[16], kv[16], gpu[16];
    snprintf(ctx, sizeof ctx, "%u", r->num_ctx);
    snprintf(batch, sizeof batch, "%u", r->num_batch);
    snprintf(parallel, sizeof parallel, "%u", s->config.num_parallel);
    snprintf(threads, sizeof threads, "%d", r->num_thread);
    snprintf(kv, sizeof kv, "%s", corral_kv_type_name(s->config.kv_type));
    snprintf(gpu, sizeof gpu, "%d", r->num_gpu);
    /* the adapters' pairs, then the fixed arguments up to the optional --threads */
    char *argv[2 * MODEL_REF_MAX_ADAPTERS + 19] = {
        "corral", "runner", "--model", r->model_path, "--socket", r->socket_path, "--ctx", ctx,
        "--batch", batch, "--parallel", parallel, "--kv", kv};
    size_t argc = 14;
    for (size_t i = 0; i < r->n_adapters; i++) {
        argv[argc++] = "--lora";
        argv[argc++] = r->adapter_paths[i];
    }
    if (r->num_thread > 0) {
        argv[argc++] = "--threads";
        argv[argc++] = threads;
    }
    if (r->num_gpu != 0) {
        argv[argc++] = "--gpu-layers";
        argv[argc++] = gpu;
    }
    pid_t pid = fork();
    if (pid < 0) {
        corral_error_set(err, "cannot start a runner: %s", strerror(errno));
        return false;
    }
    if (pid == 0) {
        /* The server blocks SIGINT/SIGTERM in every thread (it sigwaits for them); a mask
         * survives exec, and the runner must see the SIGTERM that stops it. */
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        int log = open(r->log_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (log >= 0) {
            dup2(log, STDERR_FILENO);
            dup2(log, STDOUT_FILENO);
        }
        execv("/proc/self/exe", argv);
        _exit(127);
    }
    r->pid = pid;
    int64_t start = now_ns(CLOCK_MONOTONIC);
    while (now_ns(CLOCK_MONOTONIC) - start < s->config.load_timeout_ns) {
        int status;
        if (waitpid(pid, &status, WNOHANG) == pid) {
            char line[256];
            last_log_line(r->log_path, line, sizeof line);
            r->pid = 0;
            corral_error_set(err, "model runner exited (%s %d)%s%s",
                             WIFSIGNALED(status) ? "signal" : "status",
                             WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status),
                             *line ? ": " : "", line);
            return false;
        }
        if (health_ok(r)) {
            r->load_ns = now_ns(CLOCK_MONOTONIC) - start;
            return true;
        }
        usleep(HEALTH_POLL_MS * 1000);
    }
    corral_error_set(err, "timed out loading the model (CORRAL_LOAD_TIMEOUT, now %llds)",
                     (long long)(s->config.load_timeout_ns / 1000000000));
    return false;
}

/* ---- memory planning ---- */

static uint64_t available_ram(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    uint64_t kb = 0;
    char line[256];
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %lu kB", &kb) == 1)
            break;
    if (f)
        fclose(f);
    return kb * 1024;
}

static uint64_t meta_u64(const corral_model_file *f, const char *arch, const char *suffix,
                         uint64_t fallback)
{
    char key[256];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    long i = corral_model_file_find_meta(f, key);
    if (i < 0 || corral_model_file_meta_type(f, (size_t)i) == CORRAL_META_ARRAY)
        return fallback;
    return corral_model_file_meta_uint(f, (size_t)i, 0);
}

/*
 * Weights (the file) plus the KV cache for num_ctx x n_parallel tokens: per layer and token,
 * kv_heads rows of key_length components (K) and as many of value_length (V), stored as the
 * runner will store them (F16 where a quantized type needs multiples of 32 the model lacks).
 */
static uint64_t estimate_bytes(const char *path, uint32_t num_ctx, uint32_t n_parallel,
                               corral_kv_type kv_type)
{
    struct stat st;
    uint64_t bytes = stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;
    corral_model_file *f = corral_model_file_open(path, NULL);
    if (!f)
        return bytes;
    long a = corral_model_file_find_meta(f, "general.architecture");
    size_t len = 0;
    const char *arch_text = a >= 0 && corral_model_file_meta_type(f, (size_t)a) == CORRAL_META_STRING
                                ? corral_model_file_meta_string(f, (size_t)a, 0, &len) : "";
    char arch[64];
    snprintf(arch, sizeof arch, "%.*s", (int)(len < 63 ? len : 63), arch_text);
    uint64_t layers = meta_u64(f, arch, "block_count", 0);
    uint64_t embd = meta_u64(f, arch, "embedding_length", 0);
    uint64_t heads = meta_u64(f, arch, "attention.head_count", 1);
    uint64_t kv_heads = meta_u64(f, arch, "attention.head_count_kv", heads);
    uint64_t key_dim = meta_u64(f, arch, "attention.key_length", heads ? embd / heads : 0);
    uint64_t value_dim = meta_u64(f, arch, "attention.value_length", key_dim);
    corral_model_file_close(f);
    bool quantized = kv_type == CORRAL_KV_Q8_0 || kv_type == CORRAL_KV_Q4_0;
    if (quantized && (key_dim % 32 != 0 || value_dim % 32 != 0))
        kv_type = CORRAL_KV_F16;
    uint64_t row_bytes =
        corral_kv_type_bytes(kv_type, key_dim) + corral_kv_type_bytes(kv_type, value_dim);
    /* the counts come from the file's metadata: a product past 64 bits is "too big" */
    uint64_t total = row_bytes;
    if (__builtin_mul_overflow(total, kv_heads, &total) ||
        __builtin_mul_overflow(total, layers, &total) ||
        __builtin_mul_overflow(total, (uint64_t)num_ctx, &total) ||
        __builtin_mul_overflow(total, (uint64_t)n_parallel, &total) ||
        __builtin_add_overflow(total, bytes, &total))
        return UINT64_MAX;
    return total;
}

/* ---- the reaper ---- */

static void reap(scheduler *s)
{
    int64_t now = now_ns(CLOCK_MONOTONIC);
    runner_handle **p = &s->runners;
    while (*p) {
        runner_handle *r = *p;
        if (!r->loading && !r->failed && r->pid > 0 && waitpid(r->pid, NULL, WNOHANG) == r->pid) {
            log_write(LOG_WARN, "runner exited unexpectedly",
                      (log_field[]){LOG_STR("model", r->name)}, 1);
            r->pid = 0;
            r->failed = true;
            s->n_failed++;
        }
        bool expired = r->refcount == 0 && !r->loading && (r->failed || now >= r->expires_at);
        if (expired) {
            *p = r->next;
            free_runner(r);
            pthread_cond_broadcast(&s->changed);
        } else {
            p = &r->next;
        }
    }
}

static void *reaper_main(void *arg)
{
    scheduler *s = arg;
    pthread_mutex_lock(&s->lock);
    while (!s->stopping) {
        reap(s);
        struct timespec deadline;
        clock_gettime(CLOCK_REALTIME, &deadline);
        deadline.tv_nsec += 200 * 1000000;
        if (deadline.tv_nsec >= 1000000000) {
            deadline.tv_sec++;
            deadline.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&s->changed, &s->lock, &deadline);
    }
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

/* ---- the runners' directory ---- */

#define RUNNER_DIR_PREFIX "corral-runners-"
#define RUNNER_DIR_OWNER "owner" /* "<pid> <start time>": the server the directory is for */

/* pid's start time in clock ticks since boot (/proc/<pid>/stat's 22nd field); 0 when there
 * is no such process. With the pid it names one process, whatever reuses the pid later. */
static unsigned long long process_start_time(pid_t pid)
{
    char path[64], line[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    size_t n = fread(line, 1, sizeof line - 1, f);
    fclose(f);
    line[n] = '\0';
    const char *p = strrchr(line, ')'); /* the command name may hold spaces and parentheses */
    unsigned long long start = 0;
    /* after ")": state and 18 more fields, then the start time */
    if (p && sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d "
                           "%*d %*d %*d %llu", &start) != 1)
        start = 0;
    return start;
}

static bool write_owner(const char *dir)
{
    char path[128];
    snprintf(path, sizeof path, "%s/" RUNNER_DIR_OWNER, dir);
    FILE *f = fopen(path, "wx");
    if (!f)
        return false;
    int n = fprintf(f, "%d %llu\n", (int)getpid(), process_start_time(getpid()));
    return fclose(f) == 0 && n > 0;
}

static void remove_owner(const char *dir)
{
    char path[128];
    snprintf(path, sizeof path, "%s/" RUNNER_DIR_OWNER, dir);
    unlink(path);
}

/* Is the directory's server gone? Only a directory that names its owner can say so. */
static bool owner_is_dead(int dir_fd)
{
    int fd = openat(dir_fd, RUNNER_DIR_OWNER, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return false;
    char text[64];
    ssize_t n = read(fd, text, sizeof text - 1);
    close(fd);
    int pid;
    unsigned long long start;
    if (n <= 0)
        return false;
    text[n] = '\0';
    if (sscanf(text, "%d %llu", &pid, &start) != 2 || pid <= 0)
        return false;
    return pid != getpid() && process_start_time((pid_t)pid) != start;
}

/*
 * Remove the runner directories of servers that died without tidying up (kill -9, a crash):
 * their runners left on their own when they saw the server go, their sockets and logs did
 * not. Only this user's directories, and only plain files in them.
 */
static void remove_dead_dirs(const char *tmp)
{
    DIR *d = opendir(tmp);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (strncmp(e->d_name, RUNNER_DIR_PREFIX, strlen(RUNNER_DIR_PREFIX)) != 0)
            continue;
        int fd = openat(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        struct stat st;
        if (fd < 0)
            continue;
        if (fstat(fd, &st) == 0 && st.st_uid == geteuid() && owner_is_dead(fd)) {
            DIR *inner = fdopendir(dup(fd));
            struct dirent *f;
            while (inner && (f = readdir(inner)))
                if (strcmp(f->d_name, ".") != 0 && strcmp(f->d_name, "..") != 0)
                    unlinkat(fd, f->d_name, 0);
            if (inner)
                closedir(inner);
            if (unlinkat(dirfd(d), e->d_name, AT_REMOVEDIR) == 0)
                log_printf(LOG_INFO, "removed %s/%s of a server that is gone", tmp, e->d_name);
        }
        close(fd);
    }
    if (d)
        closedir(d);
}

/* ---- public ---- */

scheduler *scheduler_create(const server_config *config, corral_error *err)
{
    scheduler *s = calloc(1, sizeof *s);
    if (!s) {
        corral_error_set(err, "out of memory");
        return NULL;
    }
    s->config = *config;
    remove_dead_dirs("/tmp");
    snprintf(s->dir, sizeof s->dir, "/tmp/" RUNNER_DIR_PREFIX "XXXXXX");
    if (!mkdtemp(s->dir)) {
        corral_error_set(err, "cannot create a directory for runner sockets: %s", strerror(errno));
        free(s);
        return NULL;
    }
    if (!write_owner(s->dir)) {
        corral_error_set(err, "cannot write %s/" RUNNER_DIR_OWNER ": %s", s->dir, strerror(errno));
        rmdir(s->dir);
        free(s);
        return NULL;
    }
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->changed, NULL);
    if (pthread_create(&s->reaper, NULL, reaper_main, s) != 0) {
        corral_error_set(err, "cannot start the scheduler thread");
        remove_owner(s->dir);
        rmdir(s->dir);
        free(s);
        return NULL;
    }
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
    while (s->runners) {
        runner_handle *r = s->runners;
        s->runners = r->next;
        free_runner(r);
    }
    remove_owner(s->dir);
    rmdir(s->dir);
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

static bool same_load(const runner_handle *r, const char *path, const load_request *req)
{
    return strcmp(r->model_path, path) == 0 && same_adapters(r, req->ref) &&
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
        bool too_big = need > available_ram() && s->runners != NULL;
        if (!too_many && !too_big)
            return true;
        runner_handle *victim = idle_lru(s, path);
        if (!victim)
            return !too_many; /* busy runners only: wait if the count is the limit */
        unlink_runner(s, victim);
        free_runner(victim);
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
    uint64_t need = estimate_bytes(path, req.num_ctx, s->config.num_parallel, s->config.kv_type);
    pthread_mutex_lock(&s->lock);
    if (s->waiting >= s->config.max_queue) {
        pthread_mutex_unlock(&s->lock);
        *http_status = 503;
        corral_error_set(err, "server busy, please try again.  maximum pending requests exceeded");
        return NULL;
    }
    s->waiting++;
    runner_handle *found = NULL;
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
            free_runner(stale);
            continue;
        }
        if (found || s->loading || !make_room(s, path, need)) {
            found = NULL;
            pthread_cond_wait(&s->changed, &s->lock);
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
        if (!copied) {
            free_runner(r);
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
        unsigned id = s->next_id++;
        snprintf(r->socket_path, sizeof r->socket_path, "%s/runner-%u.sock", s->dir, id);
        snprintf(r->log_path, sizeof r->log_path, "%s/runner-%u.log", s->dir, id);
        r->loading = true;
        r->expires_at = INT64_MAX;
        r->next = s->runners;
        s->runners = r;
        s->loading = true;
        pthread_mutex_unlock(&s->lock);
        bool ok = spawn_runner(s, r, err);
        pthread_mutex_lock(&s->lock);
        s->loading = false;
        r->loading = false;
        pthread_cond_broadcast(&s->changed);
        if (!ok) {
            unlink_runner(s, r);
            free_runner(r);
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
        *http_status = 500;
    return found;
}

void scheduler_release(scheduler *s, runner_handle *r)
{
    pthread_mutex_lock(&s->lock);
    int64_t keep_alive_ns = r->keep_alive_ns;
    r->refcount--;
    r->load_ns = 0;
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
     * reaper's waitpid collects it. */
    if (r->pid > 0)
        kill(r->pid, SIGKILL);
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

int64_t runner_handle_load_ns(const runner_handle *r)
{
    return r->load_ns;
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

/*
 * `corral runner` children as the scheduler's runner_ops (runner_process.h). Each runner
 * gets a socket in the server's private directory, and its output goes into the server's
 * log (runner_log.h); a failed load reports its last line.
 */
#include "server/sched/runner_process.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "server/models/model_ref.h"
#include "server/sched/memory_estimate.h"
#include "server/sched/runner_client.h"
#include "server/sched/runner_log.h"
#include "util/log.h"

#define HEALTH_POLL_MS 50
#define RUNNER_SOCKET_PATH_MAX 108 /* sockaddr_un's sun_path */

typedef struct runner_processes {
    int64_t load_timeout_ns;
    uint32_t prompt_lookup;  /* the runners' --draft: the longest prompt-lookup draft */
    char dir[RUNNER_SOCKET_PATH_MAX]; /* the runners' sockets */
    atomic_uint next_id;
} runner_processes;

typedef struct runner_process {
    pid_t pid; /* 0: exited and reaped */
    char socket_path[RUNNER_SOCKET_PATH_MAX];
    char name[CORRAL_NAME_STRING_MAX]; /* the model, for the log */
    runner_log *log;
    atomic_bool stop_asked; /* the server sent SIGTERM: its end is no news */
    atomic_bool killed;     /* the server sent SIGKILL */
} runner_process;

static int64_t monotonic_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ---- one runner ---- */

static void signal_stop(pid_t pid)
{
    kill(pid, SIGTERM);
    kill(pid, SIGCONT); /* a stopped process takes its SIGTERM only once it runs */
}

/* SIGTERM, a short grace period, then SIGKILL; always reaps the child. */
static void stop_process(pid_t pid)
{
    if (pid <= 0)
        return;
    signal_stop(pid);
    for (int i = 0; i < 100; i++) { /* up to 5 s: the runner drains its connections */
        pid_t r = waitpid(pid, NULL, WNOHANG);
        if (r == pid || (r < 0 && errno == ECHILD))
            return;
        usleep(50 * 1000);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

/* Collect the runner if it has ended, or (wait) once it has. An end the server did not ask
 * for goes into the log with how it came: a crash's signal, an exit status, or the server's
 * own SIGKILL. */
static void collect_ended(runner_process *p, bool wait)
{
    int status;
    if (p->pid <= 0 || waitpid(p->pid, &status, wait ? 0 : WNOHANG) != p->pid)
        return;
    bool signaled = WIFSIGNALED(status);
    bool our_kill = signaled && WTERMSIG(status) == SIGKILL && atomic_load(&p->killed);
    if (!atomic_load(&p->stop_asked))
        log_write(LOG_WARN, our_kill ? "runner killed" : "runner exited unexpectedly",
                  (log_field[]){LOG_STR("model", p->name), LOG_INT("runner_pid", p->pid),
                                signaled ? LOG_INT("signal", WTERMSIG(status))
                                         : LOG_INT("status", WEXITSTATUS(status))},
                  3);
    p->pid = 0;
}

static void remove_process(runner_process *p)
{
    /* a runner that failed a request was sent SIGKILL: it is ending, and how it did (its
     * crash's signal, most often) is worth the wait */
    collect_ended(p, atomic_load(&p->killed));
    atomic_store(&p->stop_asked, true);
    stop_process(p->pid);
    unlink(p->socket_path);
    runner_log_free(p->log); /* after the reaping: the runner's last words are relayed */
    free(p);
}

/* Ask the runner for its health; its context length (capped at the model's) and vocabulary
 * size go to out. */
static bool health_ok(const runner_process *p, runner_started *out)
{
    json_t *health = runner_health(p->socket_path, 2000);
    json_int_t ctx = json_integer_value(json_object_get(health, "n_ctx"));
    json_int_t vocab = json_integer_value(json_object_get(health, "n_vocab"));
    json_int_t vram = json_integer_value(json_object_get(health, "vram_bytes"));
    out->vram_bytes = vram > 0 ? (uint64_t)vram : 0;
    if (ctx > 0 && ctx <= UINT32_MAX)
        out->n_ctx = (uint32_t)ctx;
    if (vocab > 0 && vocab <= UINT32_MAX)
        out->n_vocab = (uint32_t)vocab;
    json_decref(health);
    return health != NULL;
}

/* Start `corral runner` for spec and wait until it answers; false with err on failure. */
static bool start_runner(void *ctx, const runner_spec *spec, runner_started *out,
                         corral_error *err)
{
    runner_processes *ps = ctx;
    runner_process *p = calloc(1, sizeof *p);
    if (!p) {
        corral_error_set(err, "out of memory");
        return false;
    }
    snprintf(p->name, sizeof p->name, "%s", spec->name ? spec->name : "");
    unsigned id = atomic_fetch_add(&ps->next_id, 1);
    int len = snprintf(p->socket_path, sizeof p->socket_path, "%s/runner-%u.sock", ps->dir, id);
    if (len < 0 || (size_t)len >= sizeof p->socket_path) { /* runner_tmp_dir left room */
        corral_error_set(err, "the runner socket's path under %s is too long", ps->dir);
        free(p);
        return false;
    }
    char ctx_arg[16], batch[16], parallel[16], threads[16], kv[16], draft[16], gpu[16];
    snprintf(ctx_arg, sizeof ctx_arg, "%u", spec->num_ctx);
    snprintf(batch, sizeof batch, "%u", spec->num_batch);
    snprintf(parallel, sizeof parallel, "%u", spec->num_parallel);
    snprintf(threads, sizeof threads, "%d", spec->num_thread);
    snprintf(kv, sizeof kv, "%s", corral_kv_type_name(spec->kv_type));
    snprintf(draft, sizeof draft, "%u", ps->prompt_lookup);
    snprintf(gpu, sizeof gpu, "%d", spec->num_gpu);
    /* the fixed arguments, the adapters' pairs, then the optional --draft-model, --mmproj,
     * --threads and --gpu-layers */
    char *argv[2 * MODEL_REF_MAX_ADAPTERS + 25] = {
        "corral", "runner", "--model", (char *)spec->model_path, "--socket", p->socket_path,
        "--ctx", ctx_arg, "--batch", batch, "--parallel", parallel, "--kv", kv, "--draft", draft};
    size_t argc = 16;
    for (size_t i = 0; i < spec->n_adapters && i < MODEL_REF_MAX_ADAPTERS; i++) {
        argv[argc++] = "--lora";
        argv[argc++] = spec->adapter_paths[i];
    }
    if (spec->draft_path) {
        argv[argc++] = "--draft-model";
        argv[argc++] = (char *)spec->draft_path;
    }
    if (spec->projector_path) {
        argv[argc++] = "--mmproj";
        argv[argc++] = (char *)spec->projector_path;
    }
    if (spec->num_thread > 0) {
        argv[argc++] = "--threads";
        argv[argc++] = threads;
    }
    if (spec->num_gpu != 0) {
        argv[argc++] = "--gpu-layers";
        argv[argc++] = gpu;
    }
    int out_pipe[2]; /* the runner's stdout and stderr, read by its runner_log */
    if (pipe2(out_pipe, O_CLOEXEC) != 0) {
        corral_error_set(err, "cannot start a runner: %s", strerror(errno));
        free(p);
        return false;
    }
    pid_t pid = fork();
    if (pid < 0) {
        corral_error_set(err, "cannot start a runner: %s", strerror(errno));
        close(out_pipe[0]);
        close(out_pipe[1]);
        free(p);
        return false;
    }
    if (pid == 0) {
        /* The server blocks SIGINT/SIGTERM in every thread (it sigwaits for them); a mask
         * survives exec, and the runner must see the SIGTERM that stops it. */
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        dup2(out_pipe[1], STDERR_FILENO);
        dup2(out_pipe[1], STDOUT_FILENO);
        /* open across exec, even where the pipe got fd 1 or 2 and dup2 did nothing */
        fcntl(STDERR_FILENO, F_SETFD, 0);
        fcntl(STDOUT_FILENO, F_SETFD, 0);
        execv("/proc/self/exe", argv);
        _exit(127);
    }
    close(out_pipe[1]);
    p->pid = pid;
    p->log = runner_log_start(out_pipe[0], p->name, pid, err);
    if (!p->log) {
        remove_process(p);
        return false;
    }
    int64_t start = monotonic_ns();
    while (ps->load_timeout_ns < 0 || monotonic_ns() - start < ps->load_timeout_ns) {
        int status;
        if (waitpid(pid, &status, WNOHANG) == pid) {
            char line[256];
            p->pid = 0;
            runner_log_finish(p->log);
            runner_log_last_line(p->log, line, sizeof line);
            corral_error_set(err, "model runner exited (%s %d)%s%s",
                             WIFSIGNALED(status) ? "signal" : "status",
                             WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status),
                             *line ? ": " : "", line);
            remove_process(p);
            return false;
        }
        if (health_ok(p, out)) {
            out->process = p;
            snprintf(out->socket_path, sizeof out->socket_path, "%s", p->socket_path);
            return true;
        }
        usleep(HEALTH_POLL_MS * 1000);
    }
    corral_error_set(err, "timed out loading the model (CORRAL_LOAD_TIMEOUT, now %llds)",
                     (long long)(ps->load_timeout_ns / 1000000000));
    remove_process(p);
    return false;
}

static bool process_alive(void *ctx, void *process)
{
    (void)ctx;
    runner_process *p = process;
    collect_ended(p, false);
    return p->pid > 0;
}

/* SIGKILL: the reaper's waitpid (or stop's) collects it. */
static void kill_process(void *ctx, void *process)
{
    (void)ctx;
    runner_process *p = process;
    atomic_store(&p->killed, true);
    if (p->pid > 0)
        kill(p->pid, SIGKILL);
}

static void request_stop(void *ctx, void *process)
{
    (void)ctx;
    runner_process *p = process;
    atomic_store(&p->stop_asked, true);
    if (p->pid > 0)
        signal_stop(p->pid);
}

static void stop_runner(void *ctx, void *process)
{
    (void)ctx;
    remove_process(process);
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

static uint64_t estimate_runner_bytes(void *ctx, const runner_spec *spec)
{
    (void)ctx;
    uint64_t bytes = memory_estimate_model_bytes(spec->model_path, spec->num_ctx,
                                                 spec->num_parallel, spec->kv_type);
    if (spec->draft_path) {
        uint64_t draft = memory_estimate_model_bytes(spec->draft_path, spec->num_ctx,
                                                     spec->num_parallel, spec->kv_type);
        bytes = bytes > UINT64_MAX - draft ? UINT64_MAX : bytes + draft;
    }
    struct stat st; /* a projector is held whole, beside the model (unless it is the model) */
    uint64_t projector = spec->projector_path &&
                                 strcmp(spec->projector_path, spec->model_path) != 0 &&
                                 stat(spec->projector_path, &st) == 0
                             ? (uint64_t)st.st_size
                             : 0;
    /* and the images and clips it encodes, as many as the runner keeps in their one cache */
    uint64_t images =
        spec->projector_path ? memory_estimate_image_cache_bytes(spec->projector_path) : 0;
    uint64_t clips = memory_estimate_clip_cache_bytes(spec->model_path);
    uint64_t media = images > clips ? images : clips;
    bytes = bytes > UINT64_MAX - projector ? UINT64_MAX : bytes + projector;
    return bytes > UINT64_MAX - media ? UINT64_MAX : bytes + media;
}

static uint64_t available_bytes(void *ctx)
{
    (void)ctx;
    return available_ram();
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
    char path[RUNNER_SOCKET_PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/" RUNNER_DIR_OWNER, dir);
    FILE *f = fopen(path, "wx");
    if (!f)
        return false;
    int n = fprintf(f, "%d %llu\n", (int)getpid(), process_start_time(getpid()));
    return fclose(f) == 0 && n > 0;
}

static void remove_owner(const char *dir)
{
    char path[RUNNER_SOCKET_PATH_MAX + 16];
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
 * their runners left on their own when they saw the server go, their sockets did not. Only
 * this user's directories, and only plain files in them.
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

/* The most a runner's socket name adds to its directory: "/runner-4294967295.sock". */
#define RUNNER_SOCKET_NAME_MAX 24

/*
 * Where the runners' directory goes: $TMPDIR as every Unix program reads it (a systemd unit's
 * PrivateTmp, a user's own temporary directory), else /tmp. A socket's whole path must fit
 * sun_path, so a TMPDIR too long for it, or not absolute, falls back to /tmp with a warning.
 */
static void runner_tmp_dir(char *out, size_t size)
{
    const char *env = getenv("TMPDIR");
    size_t n = env ? strlen(env) : 0;
    while (n > 1 && env[n - 1] == '/')
        n--;
    size_t needed = n + 1 + strlen(RUNNER_DIR_PREFIX "XXXXXX") + RUNNER_SOCKET_NAME_MAX;
    if (n > 1 && env[0] == '/' && needed < size && needed < RUNNER_SOCKET_PATH_MAX) {
        snprintf(out, size, "%.*s", (int)n, env);
        return;
    }
    if (n > 1)
        log_printf(LOG_WARN, "TMPDIR=%s is %s: runner sockets go under /tmp", env,
                   env[0] != '/' ? "not an absolute path" : "too long for a socket's path");
    snprintf(out, size, "/tmp");
}

static void free_processes(void *ctx)
{
    runner_processes *ps = ctx;
    remove_owner(ps->dir);
    rmdir(ps->dir);
    free(ps);
}

bool runner_process_ops_create(const server_config *config, runner_ops *ops, corral_error *err)
{
    runner_processes *ps = calloc(1, sizeof *ps);
    if (!ps) {
        corral_error_set(err, "out of memory");
        return false;
    }
    ps->load_timeout_ns = config->load_timeout_ns;
    ps->prompt_lookup = config->prompt_lookup;
    char tmp[RUNNER_SOCKET_PATH_MAX];
    runner_tmp_dir(tmp, sizeof tmp);
    remove_dead_dirs(tmp);
    int len = snprintf(ps->dir, sizeof ps->dir, "%s/" RUNNER_DIR_PREFIX "XXXXXX", tmp);
    if (len < 0 || (size_t)len >= sizeof ps->dir || !mkdtemp(ps->dir)) {
        corral_error_set(err, "cannot create a directory for runner sockets: %s", strerror(errno));
        free(ps);
        return false;
    }
    if (!write_owner(ps->dir)) {
        corral_error_set(err, "cannot write %s/" RUNNER_DIR_OWNER ": %s", ps->dir, strerror(errno));
        rmdir(ps->dir);
        free(ps);
        return false;
    }
    *ops = (runner_ops){.ctx = ps,
                        .start = start_runner,
                        .alive = process_alive,
                        .kill = kill_process,
                        .request_stop = request_stop,
                        .stop = stop_runner,
                        .estimate_bytes = estimate_runner_bytes,
                        .available_bytes = available_bytes,
                        .free = free_processes};
    return true;
}

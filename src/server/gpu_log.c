/* The server's start-up lines about the machine's GPUs (gpu_log.h). */
#include "server/gpu_log.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>

#include "corral/engine.h"
#include "util/log.h"

enum { MAX_GPUS = 16 };

/* "23.6 GiB", as ollama writes memory sizes. */
static void format_gib(char *out, size_t cap, uint64_t bytes)
{
    snprintf(out, cap, "%.1f GiB", (double)bytes / (double)(1u << 30));
}

void gpu_log_discovery(void)
{
    corral_gpu_info gpus[MAX_GPUS];
    size_t n = 0;
    corral_error err = {{0}};
    bool listed = corral_gpu_list(gpus, MAX_GPUS, &n, &err);
    bool any_usable = false;
    for (size_t i = 0; i < n; i++) {
        const corral_gpu_info *g = &gpus[i];
        char total[32], available[32];
        format_gib(total, sizeof total, g->total_bytes);
        format_gib(available, sizeof available, g->free_bytes);
        log_field fields[] = {
            LOG_STR("library", "vulkan"), LOG_INT("id", g->index), LOG_STR("name", g->name),
            LOG_STR("type", g->type), LOG_STR("total", total), LOG_STR("available", available),
            LOG_STR("use", g->chosen ? "chosen" : g->usable ? "usable" : "skipped"),
            LOG_STR("reason", g->why_not ? g->why_not : "")};
        log_write(LOG_INFO, "inference compute", fields,
                  sizeof fields / sizeof fields[0] - (g->usable ? 1 : 0));
        any_usable = any_usable || g->usable;
    }
    if (any_usable)
        return;
    const char *why = !listed ? err.message
                      : n == 0 ? "the Vulkan loader lists no device"
                               : "no device is usable (each line above says why)";
    log_field reason = LOG_STR("reason", why);
    log_write(LOG_INFO, "no compatible GPUs were discovered, models run on the CPU", &reason, 1);
}

extern char **environ;

/* Reap the discovery child, so that it leaves no zombie behind. */
static void *wait_for_child(void *arg)
{
    pid_t pid = (pid_t)(intptr_t)arg;
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
        ;
    return NULL;
}

bool gpu_log_discovery_start(log_format format, corral_error *err)
{
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    sigset_t none;
    sigemptyset(&none);
    /* the server blocks its stop signals in every thread, and a mask survives exec */
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
    char *argv[] = {"corral", "gpus", "--log", format == LOG_FORMAT_JSON ? "json" : "text", NULL};
    pid_t pid;
    int rc = posix_spawn(&pid, "/proc/self/exe", NULL, &attr, argv, environ);
    posix_spawnattr_destroy(&attr);
    if (rc != 0) {
        corral_error_set(err, "cannot start GPU discovery: %s", strerror(rc));
        return false;
    }
    pthread_t waiter;
    pthread_attr_t detached;
    pthread_attr_init(&detached);
    pthread_attr_setdetachstate(&detached, PTHREAD_CREATE_DETACHED);
    rc = pthread_create(&waiter, &detached, wait_for_child, (void *)(intptr_t)pid);
    pthread_attr_destroy(&detached);
    if (rc != 0) /* the child still logs; it stays a zombie until the server exits */
        corral_error_set(err, "cannot wait for GPU discovery: %s", strerror(rc));
    return rc == 0;
}

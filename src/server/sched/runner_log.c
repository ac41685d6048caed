/* A runner's output relayed into the server's log (runner_log.h). */
#include "server/sched/runner_log.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "util/log.h"

/* How long the thread waits on the pipe before it looks at whether it should stop. */
#define RUNNER_LOG_POLL_MS 100
/* A runner log line's own fields kept, at most. */
#define RUNNER_LOG_FIELDS_MAX 16

struct runner_log {
    int fd;
    pid_t pid;
    const char *model; /* the caller's, outliving l */
    pthread_t thread;
    bool joined;
    atomic_bool finishing; /* the runner is gone: stop once the pipe has nothing ready */
    pthread_mutex_t lock;  /* guards last */
    char last[256];
    /* the line being read: a line is relayed when its newline arrives or the buffer fills */
    char line[RUNNER_LOG_LINE_MAX + 1];
    size_t line_len;
};

/* The runner's own log line (a JSON object with level and msg, as util/log.c writes it) again
 * in the server's log, its fields kept (strings and numbers) and the runner's added; false
 * when the line is not one. The runner's time is dropped: the server's is within a read. */
static bool relay_log_line(runner_log *l, const char *text, size_t len, const char **msg_out,
                           json_t **owner)
{
    *owner = text[0] == '{' ? json_loadb(text, len, JSON_REJECT_DUPLICATES, NULL) : NULL;
    json_t *msg = json_object_get(*owner, "msg"), *level = json_object_get(*owner, "level");
    if (!json_is_string(msg) || !json_is_string(level))
        return false;
    log_field fields[RUNNER_LOG_FIELDS_MAX + 2];
    size_t n = 0;
    const char *key;
    json_t *value;
    json_object_foreach(*owner, key, value) {
        if (n == RUNNER_LOG_FIELDS_MAX || !strcmp(key, "time") || !strcmp(key, "level") ||
            !strcmp(key, "msg") || !strcmp(key, "model") || !strcmp(key, "runner_pid"))
            continue;
        if (json_is_string(value))
            fields[n++] = LOG_STR(key, json_string_value(value));
        else if (json_is_integer(value))
            fields[n++] = LOG_INT(key, json_integer_value(value));
        else if (json_is_real(value))
            fields[n++] = LOG_NUM(key, json_real_value(value));
    }
    fields[n++] = LOG_STR("model", l->model);
    fields[n++] = LOG_INT("runner_pid", l->pid);
    log_level as = LOG_INFO;
    log_parse_level(json_string_value(level), &as); /* a name it does not know: INFO */
    *msg_out = json_string_value(msg);
    log_write(as, *msg_out, fields, n);
    return true;
}

static void relay_line(runner_log *l, char *text, size_t len)
{
    while (len > 0 && (text[len - 1] == '\r' || text[len - 1] == '\n'))
        len--;
    if (len == 0)
        return;
    text[len] = '\0';
    const char *last = text;
    json_t *owner;
    if (!relay_log_line(l, text, len, &last, &owner)) /* plain text: a sanitizer's, say */
        log_write(LOG_INFO, text,
                  (log_field[]){LOG_STR("model", l->model), LOG_INT("runner_pid", l->pid)}, 2);
    pthread_mutex_lock(&l->lock);
    snprintf(l->last, sizeof l->last, "%s", last);
    pthread_mutex_unlock(&l->lock);
    json_decref(owner);
}

/* Relay the complete lines of what was read so far; a full buffer goes as a line of its own. */
static void relay_complete_lines(runner_log *l)
{
    size_t start = 0;
    for (size_t i = 0; i < l->line_len; i++)
        if (l->line[i] == '\n') {
            relay_line(l, l->line + start, i - start);
            start = i + 1;
        }
    memmove(l->line, l->line + start, l->line_len - start);
    l->line_len -= start;
    if (l->line_len == RUNNER_LOG_LINE_MAX) {
        relay_line(l, l->line, l->line_len);
        l->line_len = 0;
    }
}

static void *relay_thread(void *arg)
{
    runner_log *l = arg;
    for (;;) {
        struct pollfd pfd = {.fd = l->fd, .events = POLLIN};
        int ready = poll(&pfd, 1, RUNNER_LOG_POLL_MS);
        if (ready < 0 && errno != EINTR)
            break;
        if (ready <= 0) {
            if (atomic_load(&l->finishing))
                break; /* gone, and whatever still holds the pipe's other end is silent */
            continue;
        }
        ssize_t n = read(l->fd, l->line + l->line_len, RUNNER_LOG_LINE_MAX - l->line_len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break; /* the end: every writer has closed the pipe */
        l->line_len += (size_t)n;
        relay_complete_lines(l);
    }
    relay_line(l, l->line, l->line_len); /* a last line without its newline */
    l->line_len = 0;
    return NULL;
}

runner_log *runner_log_start(int fd, const char *model, pid_t pid, corral_error *err)
{
    runner_log *l = calloc(1, sizeof *l);
    if (!l) {
        corral_error_set(err, "out of memory");
        close(fd);
        return NULL;
    }
    l->fd = fd;
    l->pid = pid;
    l->model = model;
    atomic_init(&l->finishing, false);
    pthread_mutex_init(&l->lock, NULL);
    int rc = pthread_create(&l->thread, NULL, relay_thread, l);
    if (rc != 0) {
        corral_error_set(err, "cannot start the runner's log thread: %s", strerror(rc));
        pthread_mutex_destroy(&l->lock);
        close(fd);
        free(l);
        return NULL;
    }
    return l;
}

void runner_log_last_line(runner_log *l, char *out, size_t size)
{
    pthread_mutex_lock(&l->lock);
    snprintf(out, size, "%s", l->last);
    pthread_mutex_unlock(&l->lock);
}

void runner_log_finish(runner_log *l)
{
    if (l->joined)
        return;
    atomic_store(&l->finishing, true);
    pthread_join(l->thread, NULL);
    l->joined = true;
}

void runner_log_free(runner_log *l)
{
    if (!l)
        return;
    runner_log_finish(l);
    close(l->fd);
    pthread_mutex_destroy(&l->lock);
    free(l);
}

/* Runner protocol client (see runner_client.h): a line reader with a size cap. */
#include "server/sched/runner_client.h"

#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define MAX_LINE_BYTES (64u << 20)

struct runner_conn {
    int fd;
    char *buf;
    size_t start, len, cap;
    int liveness_ms; /* <= 0: no check */
    int client_fd;   /* watched for a hang-up; -1: none */
    bool client_gone;
    char socket_path[108];
};

static int connect_unix(const char *socket_path)
{
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    snprintf(addr.sun_path, sizeof addr.sun_path, "%s", socket_path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&addr, sizeof addr) != 0) {
        int saved = errno;
        close(fd);
        errno = saved;
        return -1;
    }
    return fd;
}

json_t *runner_health(const char *socket_path, int timeout_ms)
{
    int fd = connect_unix(socket_path);
    if (fd < 0)
        return NULL;
    const char *req = "{\"op\":\"health\"}\n";
    char buf[512];
    size_t len = 0;
    json_t *health = NULL;
    bool sent = send(fd, req, strlen(req), MSG_NOSIGNAL) == (ssize_t)strlen(req);
    /* one short line; the deadline covers the whole of it */
    struct pollfd p = {.fd = fd, .events = POLLIN};
    while (sent && len < sizeof buf - 1 && poll(&p, 1, timeout_ms) == 1) {
        ssize_t n = recv(fd, buf + len, sizeof buf - 1 - len, 0);
        if (n <= 0)
            break;
        len += (size_t)n;
        if (memchr(buf, '\n', len)) {
            buf[len] = '\0';
            json_error_t jerr;
            health = json_loads(buf, JSON_DISABLE_EOF_CHECK, &jerr);
            break;
        }
    }
    close(fd);
    return health;
}

runner_conn *runner_conn_open(const char *socket_path, const json_t *request,
                              int64_t liveness_ns, corral_error *err)
{
    runner_conn *c = calloc(1, sizeof *c);
    char *line = json_dumps(request, JSON_COMPACT);
    if (!c || !line) {
        free(c);
        free(line);
        corral_error_set(err, "out of memory");
        return NULL;
    }
    snprintf(c->socket_path, sizeof c->socket_path, "%s", socket_path);
    c->client_fd = -1;
    int64_t ms = liveness_ns > 0 ? (liveness_ns + 999999) / 1000000 : 0;
    c->liveness_ms = ms > 24 * 3600 * 1000 ? 24 * 3600 * 1000 : (int)ms;
    c->fd = connect_unix(socket_path);
    bool ok = c->fd >= 0;
    size_t len = strlen(line);
    line[len] = '\n'; /* json_dumps leaves room: the NUL becomes the newline */
    for (size_t sent = 0; ok && sent <= len;) {
        ssize_t w = send(c->fd, line + sent, len + 1 - sent, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        ok = w > 0;
        sent += ok ? (size_t)w : 0;
    }
    free(line);
    if (!ok) {
        corral_error_set(err, "cannot reach the model runner: %s", strerror(errno));
        runner_conn_close(c);
        return NULL;
    }
    return c;
}

json_t *runner_conn_next(runner_conn *c, corral_error *err)
{
    for (;;) {
        char *nl = c->len ? memchr(c->buf + c->start, '\n', c->len) : NULL;
        if (nl) {
            *nl = '\0';
            json_error_t jerr;
            /* generated text may hold U+0000 (a model's <0x00> byte token); every reader
             * of "content" goes by json_string_length */
            json_t *msg = json_loads(c->buf + c->start, JSON_ALLOW_NUL, &jerr);
            size_t used = (size_t)(nl - (c->buf + c->start)) + 1;
            c->start += used;
            c->len -= used;
            if (!msg)
                corral_error_set(err, "bad answer from the model runner: %s", jerr.text);
            return msg;
        }
        if (c->start > 0) { /* compact */
            memmove(c->buf, c->buf + c->start, c->len);
            c->start = 0;
        }
        if (c->len == c->cap) {
            size_t cap = c->cap ? c->cap * 2 : 65536;
            char *grown = cap <= MAX_LINE_BYTES ? realloc(c->buf, cap) : NULL;
            if (!grown) {
                corral_error_set(err, "answer line from the model runner is too long");
                return NULL;
            }
            c->buf = grown;
            c->cap = cap;
        }
        /* POLLRDHUP: the client's FIN even behind unread bytes; its POLLIN never counts */
        struct pollfd p[2] = {{.fd = c->fd, .events = POLLIN},
                              {.fd = c->client_fd, .events = POLLRDHUP}};
        int ready = poll(p, c->client_fd >= 0 ? 2 : 1, c->liveness_ms > 0 ? c->liveness_ms : -1);
        if (ready < 0 && errno == EINTR)
            continue;
        if (c->client_fd >= 0 && (p[1].revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL))) {
            c->client_gone = true;
            corral_error_set(err, "%s", RUNNER_CONN_CLIENT_GONE);
            return NULL;
        }
        if (ready == 0) { /* quiet: busy computing, or gone? */
            json_t *health = runner_health(c->socket_path, c->liveness_ms);
            bool alive = health != NULL;
            json_decref(health);
            if (alive)
                continue;
            corral_error_set(err, "%s (no answer in %d ms)", RUNNER_CONN_NOT_RESPONDING,
                             2 * c->liveness_ms);
            return NULL;
        }
        ssize_t r = recv(c->fd, c->buf + c->len, c->cap - c->len, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            corral_error_set(err, "the model runner stopped unexpectedly");
            return NULL;
        }
        c->len += (size_t)r;
    }
}

void runner_conn_watch(runner_conn *c, int client_fd)
{
    c->client_fd = client_fd;
}

bool runner_conn_client_gone(const runner_conn *c)
{
    return c->client_gone;
}

unsigned runner_error_status(const json_t *answer)
{
    json_int_t status = json_integer_value(json_object_get(answer, "status"));
    return status >= 400 && status < 500 ? (unsigned)status : 500;
}

void runner_conn_close(runner_conn *c)
{
    if (!c)
        return;
    if (c->fd >= 0)
        close(c->fd);
    free(c->buf);
    free(c);
}

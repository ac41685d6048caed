/* Runner protocol client (see runner_client.h): a line reader with a size cap. */
#include "runner_client.h"

#include <errno.h>
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
};

runner_conn *runner_conn_open(const char *socket_path, const json_t *request, corral_error *err)
{
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    snprintf(addr.sun_path, sizeof addr.sun_path, "%s", socket_path);
    runner_conn *c = calloc(1, sizeof *c);
    char *line = json_dumps(request, JSON_COMPACT);
    if (!c || !line) {
        free(c);
        free(line);
        corral_error_set(err, "out of memory");
        return NULL;
    }
    c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    bool ok = c->fd >= 0 && connect(c->fd, (struct sockaddr *)&addr, sizeof addr) == 0;
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

void runner_conn_close(runner_conn *c)
{
    if (!c)
        return;
    if (c->fd >= 0)
        close(c->fd);
    free(c->buf);
    free(c);
}

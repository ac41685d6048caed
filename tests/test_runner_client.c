/*
 * The server's side of the runner protocol (src/server/runner_client.c) against a scripted
 * peer on a Unix socket: answer lines are parsed one by one, text holding U+0000 (a model's
 * <0x00> byte token) comes through whole, and a malformed line or a closed socket is an error.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "server/runner_client.h"

typedef struct peer {
    int listen_fd;
    const char *answer; /* written after the request line has been read */
} peer;

static void *serve_once(void *arg)
{
    peer *p = arg;
    int fd = accept(p->listen_fd, NULL, NULL);
    char c;
    while (fd >= 0 && read(fd, &c, 1) == 1 && c != '\n')
        ;
    if (fd >= 0) {
        size_t n = strlen(p->answer);
        assert_int_equal(write(fd, p->answer, n), (ssize_t)n);
        close(fd);
    }
    return NULL;
}

/* Start a peer that answers one connection with `answer`; returns the socket path. */
static void start_peer(peer *p, pthread_t *thread, char path[108], const char *answer)
{
    snprintf(path, 108, "/tmp/corral-test-runner-client-%d.sock", (int)getpid());
    unlink(path);
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    strcpy(addr.sun_path, path);
    p->listen_fd = socket(AF_UNIX, SOCK_STREAM, 0);
    assert_true(p->listen_fd >= 0);
    assert_int_equal(bind(p->listen_fd, (struct sockaddr *)&addr, sizeof addr), 0);
    assert_int_equal(listen(p->listen_fd, 1), 0);
    p->answer = answer;
    assert_int_equal(pthread_create(thread, NULL, serve_once, p), 0);
}

static void stop_peer(peer *p, pthread_t thread, const char *path)
{
    pthread_join(thread, NULL);
    close(p->listen_fd);
    unlink(path);
}

static void test_runner_client_passes_text_with_nul_through_whole(void **state)
{
    (void)state;
    peer p;
    pthread_t thread;
    char path[108];
    start_peer(&p, &thread, path, "{\"content\":\"a\\u0000b\"}\n{\"done\":true}\n");
    corral_error err = {{0}};
    json_t *request = json_pack("{s:s}", "op", "completion");
    runner_conn *conn = runner_conn_open(path, request, &err);
    json_decref(request);
    assert_non_null(conn);
    json_t *msg = runner_conn_next(conn, &err);
    if (!msg)
        fail_msg("%s", err.message);
    json_t *content = json_object_get(msg, "content");
    assert_int_equal(json_string_length(content), 3);
    assert_memory_equal(json_string_value(content), "a\0b", 3);
    json_decref(msg);
    msg = runner_conn_next(conn, &err);
    assert_non_null(msg);
    assert_true(json_is_true(json_object_get(msg, "done")));
    json_decref(msg);
    assert_null(runner_conn_next(conn, &err)); /* the peer closed */
    runner_conn_close(conn);
    stop_peer(&p, thread, path);
}

static void test_runner_client_rejects_a_malformed_line(void **state)
{
    (void)state;
    peer p;
    pthread_t thread;
    char path[108];
    start_peer(&p, &thread, path, "{\"content\": oops}\n");
    corral_error err = {{0}};
    json_t *request = json_pack("{s:s}", "op", "completion");
    runner_conn *conn = runner_conn_open(path, request, &err);
    json_decref(request);
    assert_non_null(conn);
    assert_null(runner_conn_next(conn, &err));
    assert_true(err.message[0] != '\0');
    runner_conn_close(conn);
    stop_peer(&p, thread, path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_runner_client_passes_text_with_nul_through_whole),
        cmocka_unit_test(test_runner_client_rejects_a_malformed_line),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * The server's side of the runner protocol (src/server/sched/runner_client.c) against a scripted
 * peer on a Unix socket: answer lines are parsed one by one, text holding U+0000 (a model's
 * <0x00> byte token) comes through whole, and a malformed line or a closed socket is an error;
 * a runner that answers neither its request nor a health check is given up on, one that only
 * computes long is waited for; a read that watches a client's socket ends when that client
 * hangs up, not when it has merely sent more bytes; a runner's error answers the client error
 * its "status" names, or a 500.
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
#include <time.h>
#include <unistd.h>

#include "server/sched/runner_client.h"

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
    runner_conn *conn = runner_conn_open(path, request, 0, &err);
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
    runner_conn *conn = runner_conn_open(path, request, 0, &err);
    json_decref(request);
    assert_non_null(conn);
    assert_null(runner_conn_next(conn, &err));
    assert_true(err.message[0] != '\0');
    runner_conn_close(conn);
    stop_peer(&p, thread, path);
}

/* A runner that neither answers its request nor a health check (a stopped process: the
 * kernel still queues connections) fails the read after the liveness deadline, twice over. */
static void test_runner_client_gives_up_on_a_silent_runner(void **state)
{
    (void)state;
    char path[108];
    snprintf(path, sizeof path, "/tmp/corral-test-runner-client-silent-%d.sock", (int)getpid());
    unlink(path);
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    strcpy(addr.sun_path, path);
    int listen_fd = socket(AF_UNIX, SOCK_STREAM, 0);
    assert_int_equal(bind(listen_fd, (struct sockaddr *)&addr, sizeof addr), 0);
    assert_int_equal(listen(listen_fd, 8), 0); /* never accepts */
    corral_error err = {{0}};
    json_t *request = json_pack("{s:s}", "op", "completion");
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    runner_conn *conn = runner_conn_open(path, request, 200000000, &err);
    json_decref(request);
    assert_non_null(conn);
    assert_null(runner_conn_next(conn, &err));
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double waited = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    assert_non_null(strstr(err.message, RUNNER_CONN_NOT_RESPONDING));
    assert_true(waited >= 0.35 && waited < 2.0);
    runner_conn_close(conn);
    close(listen_fd);
    unlink(path);
}

static void *close_after_100ms(void *arg)
{
    nanosleep(&(struct timespec){.tv_nsec = 100000000}, NULL);
    close(*(int *)arg);
    return NULL;
}

/* A runner that says nothing (a long prompt, an image encoding): the read ends when the client
 * it watches hangs up, while a client that has only sent more bytes (a pipelined request,
 * unread) is still there. */
static void test_runner_client_ends_when_the_client_leaves(void **state)
{
    (void)state;
    char path[108];
    snprintf(path, sizeof path, "/tmp/corral-test-runner-client-left-%d.sock", (int)getpid());
    unlink(path);
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    strcpy(addr.sun_path, path);
    int listen_fd = socket(AF_UNIX, SOCK_STREAM, 0);
    assert_int_equal(bind(listen_fd, (struct sockaddr *)&addr, sizeof addr), 0);
    assert_int_equal(listen(listen_fd, 8), 0); /* never answers */
    int client[2]; /* [0]: the server's end, watched; [1]: the client's */
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, client), 0);
    const char *pipelined = "GET /api/version HTTP/1.1\r\n\r\n";
    assert_int_equal(write(client[1], pipelined, strlen(pipelined)), (ssize_t)strlen(pipelined));
    corral_error err = {{0}};
    json_t *request = json_pack("{s:s}", "op", "completion");
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    /* without the watch, the silent runner fails the read after 2 x 1 s instead */
    runner_conn *conn = runner_conn_open(path, request, 1000000000, &err);
    json_decref(request);
    assert_non_null(conn);
    runner_conn_watch(conn, client[0]);
    pthread_t leaver;
    assert_int_equal(pthread_create(&leaver, NULL, close_after_100ms, &client[1]), 0);
    assert_null(runner_conn_next(conn, &err));
    clock_gettime(CLOCK_MONOTONIC, &t1);
    pthread_join(leaver, NULL);
    double waited = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    assert_string_equal(err.message, RUNNER_CONN_CLIENT_GONE);
    assert_true(runner_conn_client_gone(conn));
    if (waited < 0.09 || waited > 0.9)
        fail_msg("the read ended after %.3f s, not when the client left (0.1 s)", waited);
    char pending[64]; /* the client's bytes are still there to read: none was taken */
    assert_int_equal(read(client[0], pending, sizeof pending), (ssize_t)strlen(pipelined));
    runner_conn_close(conn);
    close(client[0]);
    close(listen_fd);
    unlink(path);
}

/* A runner busy computing stays quiet on the request but answers health checks: the read
 * waits for it. */
typedef struct busy_peer {
    int listen_fd;
    int health_answers;
} busy_peer;

static void *serve_busy(void *arg)
{
    busy_peer *p = arg;
    int request_fd = accept(p->listen_fd, NULL, NULL);
    char c;
    while (request_fd >= 0 && read(request_fd, &c, 1) == 1 && c != '\n')
        ;
    while (p->health_answers < 2) { /* two liveness checks pass while "computing" */
        int fd = accept(p->listen_fd, NULL, NULL);
        while (fd >= 0 && read(fd, &c, 1) == 1 && c != '\n')
            ;
        const char *ok = "{\"status\":\"ok\"}\n";
        assert_int_equal(write(fd, ok, strlen(ok)), (ssize_t)strlen(ok));
        close(fd);
        p->health_answers++;
    }
    const char *answer = "{\"done\":true}\n";
    assert_int_equal(write(request_fd, answer, strlen(answer)), (ssize_t)strlen(answer));
    close(request_fd);
    return NULL;
}

static void test_runner_client_waits_for_a_busy_runner(void **state)
{
    (void)state;
    char path[108];
    snprintf(path, sizeof path, "/tmp/corral-test-runner-client-busy-%d.sock", (int)getpid());
    unlink(path);
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    strcpy(addr.sun_path, path);
    busy_peer p = {.listen_fd = socket(AF_UNIX, SOCK_STREAM, 0)};
    assert_int_equal(bind(p.listen_fd, (struct sockaddr *)&addr, sizeof addr), 0);
    assert_int_equal(listen(p.listen_fd, 8), 0);
    pthread_t thread;
    assert_int_equal(pthread_create(&thread, NULL, serve_busy, &p), 0);
    corral_error err = {{0}};
    json_t *request = json_pack("{s:s}", "op", "completion");
    runner_conn *conn = runner_conn_open(path, request, 100000000, &err);
    json_decref(request);
    assert_non_null(conn);
    json_t *msg = runner_conn_next(conn, &err);
    if (!msg)
        fail_msg("%s", err.message);
    assert_true(json_is_true(json_object_get(msg, "done")));
    assert_int_equal(p.health_answers, 2);
    json_decref(msg);
    runner_conn_close(conn);
    pthread_join(thread, NULL);
    close(p.listen_fd);
    unlink(path);
}

/* The status a runner's error answer gives the client: a request the runner refused is the
 * client's (its 4xx), anything else the server's. */
static void test_runner_client_error_status(void **state)
{
    (void)state;
    static const struct {
        const char *answer;
        unsigned status;
    } cases[] = {
        {"{\"error\":\"image slicing: 1 x 2000 is too thin\",\"status\":400}", 400},
        {"{\"error\":\"the input length exceeds the context length\",\"status\":400}", 400},
        {"{\"error\":\"the projector failed\"}", 500},
        {"{\"error\":\"out of memory\",\"status\":500}", 500},
        {"{\"error\":\"odd\",\"status\":200}", 500},
        {"{\"error\":\"odd\",\"status\":\"400\"}", 500},
        {"{\"error\":\"odd\",\"status\":-400}", 500},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_t *answer = json_loads(cases[i].answer, 0, NULL);
        assert_non_null(answer);
        if (runner_error_status(answer) != cases[i].status)
            fail_msg("%s: %u, not %u", cases[i].answer, runner_error_status(answer),
                     cases[i].status);
        json_decref(answer);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_runner_client_gives_up_on_a_silent_runner),
        cmocka_unit_test(test_runner_client_waits_for_a_busy_runner),
        cmocka_unit_test(test_runner_client_ends_when_the_client_leaves),
        cmocka_unit_test(test_runner_client_passes_text_with_nul_through_whole),
        cmocka_unit_test(test_runner_client_rejects_a_malformed_line),
        cmocka_unit_test(test_runner_client_error_status),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * The server's side of the runner protocol (runner/protocol.h): open a connection, send one
 * request, read the JSON lines of the answer. Closing the connection cancels the request.
 * A runner that goes quiet is asked for its health on a second connection (its connection
 * threads answer that even while its model computes); one that does not answer that either
 * (stopped, deadlocked) fails the read instead of leaving the request waiting forever.
 * A read may also watch the socket of the client the answer is for: when that client hangs
 * up, the read fails at once, and closing the connection then stops the runner's work.
 */
#ifndef CORRAL_SERVER_RUNNER_CLIENT_H
#define CORRAL_SERVER_RUNNER_CLIENT_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "corral/error.h"

typedef struct runner_conn runner_conn;

/*
 * Connect to socket_path and send request (not consumed). NULL with err on failure.
 * liveness_ns: after this long without a byte, the runner must answer a health check within
 * as long again (<= 0: wait forever).
 */
runner_conn *runner_conn_open(const char *socket_path, const json_t *request,
                              int64_t liveness_ns, corral_error *err);

/* The next answer line as JSON (caller decrefs); NULL with err at EOF, on a bad line, or when
 * the runner stopped answering (RUNNER_CONN_NOT_RESPONDING in err). */
json_t *runner_conn_next(runner_conn *conn, corral_error *err);

#define RUNNER_CONN_NOT_RESPONDING "the model runner stopped responding"

/*
 * From now on, runner_conn_next also watches client_fd (a client's socket; -1: none) while it
 * waits for the runner: once the client has closed its end or reset the connection, it fails
 * with RUNNER_CONN_CLIENT_GONE in err and runner_conn_client_gone is true. It never reads the
 * client's bytes, so a client that has sent more (pipelined, keep-alive) is not taken for gone.
 */
void runner_conn_watch(runner_conn *conn, int client_fd);
bool runner_conn_client_gone(const runner_conn *conn);

#define RUNNER_CONN_CLIENT_GONE "the client closed the connection"

/* The HTTP status for a runner's {"error"} answer: the client error its "status" names when
 * the failure is the request's (runner/protocol.h), else 500. */
unsigned runner_error_status(const json_t *answer);

/* The runner's health answer ({"status":"ok","n_ctx":…}, caller decrefs), or NULL when it
 * does not answer within timeout_ms. */
json_t *runner_health(const char *socket_path, int timeout_ms);

void runner_conn_close(runner_conn *conn);

#endif

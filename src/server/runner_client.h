/*
 * The server's side of the runner protocol (runner/protocol.h): open a connection, send one
 * request, read the JSON lines of the answer. Closing the connection cancels the request.
 */
#ifndef CORRAL_SERVER_RUNNER_CLIENT_H
#define CORRAL_SERVER_RUNNER_CLIENT_H

#include <jansson.h>

#include "corral/error.h"

typedef struct runner_conn runner_conn;

/* Connect to socket_path and send request (not consumed). NULL with err on failure. */
runner_conn *runner_conn_open(const char *socket_path, const json_t *request, corral_error *err);

/* The next answer line as JSON (caller decrefs); NULL with err at EOF or on a bad line. */
json_t *runner_conn_next(runner_conn *conn, corral_error *err);

void runner_conn_close(runner_conn *conn);

#endif

/*
 * The HTTP client every `corral` command uses to talk to `corral serve`: the server address
 * from CORRAL_HOST / OLLAMA_HOST ([scheme://]host[:port][/path]), the API key from
 * CORRAL_API_KEY / OLLAMA_API_KEY when set, JSON calls, NDJSON streams read line by line
 * (each line at most 8 MB), blob uploads, cancellation from a signal handler, and starting a
 * local server in the background when none answers. Knows nothing of what the routes mean.
 */
#ifndef CORRAL_CLI_CLIENT_H
#define CORRAL_CLI_CLIENT_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "corral/error.h"

#define CLIENT_MAX_LINE_BYTES (8u << 20)   /* one NDJSON line, as ollama's client */
#define CLIENT_MAX_REPLY_BYTES (64u << 20) /* one whole JSON reply (show -v of a big model) */

typedef struct client_address {
    char url[640];  /* scheme://host:port/path, no trailing slash */
    char host[256]; /* as written, IPv6 keeps its brackets */
    unsigned port;
    bool loopback;  /* a local address this client may start a server on */
} client_address;

typedef struct corral_client corral_client;

/* Parse [scheme://]host[:port][/path]; empty text means 127.0.0.1:11434. */
bool client_parse_address(const char *text, client_address *out, corral_error *err);

/* A client for CORRAL_HOST, else OLLAMA_HOST, else the default. NULL with err. */
corral_client *client_open(corral_error *err);
void client_close(corral_client *client);
const client_address *client_get_address(const corral_client *client);

/*
 * Make sure a server answers. When none does and the address is a loopback one, start
 * `corral serve` detached (log in ~/.corral/server.log) and wait for it to answer.
 */
bool client_ensure_server(corral_client *client, corral_error *err);

/* client_open, then client_ensure_server: what every command starts with. NULL with err. */
corral_client *client_connect(corral_error *err);

/*
 * One request: method and path ("/api/show"), an optional JSON body. Returns the HTTP status
 * (0 when the server could not be reached or the transfer failed). *reply (if reply is not
 * NULL) gets the parsed JSON body of a 2xx reply, or NULL when it was empty. On any status
 * other than 2xx err holds the server's {"error"} text.
 */
long client_call(corral_client *client, const char *method, const char *path, const json_t *body,
                 json_t **reply, corral_error *err);

/* Called with each NDJSON object of a stream; return false to stop reading (not an error). */
typedef bool (*client_line_fn)(void *user, const json_t *line);

/*
 * POST body to path and stream the NDJSON reply through on_line. A line {"error": …} ends
 * the stream as a failure. Returns the HTTP status, 0 on transport failure or cancellation
 * (client_cancelled() tells which); err is set unless the status is 2xx and no error line came.
 */
long client_stream(corral_client *client, const char *path, const json_t *body,
                   client_line_fn on_line, void *user, corral_error *err);

/* Called while a blob uploads; sent_bytes of total_bytes. */
typedef void (*client_upload_fn)(void *user, uint64_t sent_bytes, uint64_t total_bytes);

/* Upload file_path as blob digest ("sha256:<hex>") unless the server already has it. */
bool client_upload_blob(corral_client *client, const char *file_path, const char *digest,
                        client_upload_fn on_progress, void *user, corral_error *err);

/* Async-signal-safe: abort the transfer in progress (Ctrl-C). */
void client_cancel(void);
/* Whether client_cancel was called since the last client_reset_cancel. */
bool client_cancelled(void);
void client_reset_cancel(void);

#endif

/*
 * The HTTP layer of `corral serve` over libmicrohttpd: listening, the connection cap, the
 * route table, request bodies (size-capped, or streamed to a sink for blob uploads), the
 * guards every request passes before its handler runs (Host header, Origin, API key), CORS,
 * and replies: JSON, errors as {"error": ...}, plain text, and NDJSON streams produced line
 * by line; a hook when each request completes, with the facts its handler noted (for the
 * request log and metrics). Handlers never see libmicrohttpd types.
 */
#ifndef CORRAL_SERVER_HTTP_H
#define CORRAL_SERVER_HTTP_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "corral/error.h"
#include "server/http/api_keys.h"

typedef struct http_server http_server;
typedef struct http_request http_request;
typedef struct http_reply http_reply;

struct http_request {
    const char *method;
    const char *path;
    const char *path_param; /* the part after a route's prefix (e.g. a blob digest) */
    const char *accept;     /* the Accept header, or NULL */
    const char *user_agent; /* the User-Agent header, or NULL */
    const char *content_type; /* the Content-Type header, or NULL */
    /* the anthropic-version header, which Anthropic's SDKs send on every request, or NULL */
    const char *anthropic_version;
    const char *body;       /* NUL-terminated; NULL when the request had none */
    size_t body_len;
    void *sink_state;       /* what the route's body sink returned, for streamed bodies */
};

/*
 * A streamed reply's producer: write up to max bytes into buf and return how many (> 0),
 * 0 at the end, or -1 to abort the connection. Called from the connection's own thread, so
 * it may block. close is called exactly once when the reply ends or the client goes away.
 */
typedef ssize_t (*http_stream_next_fn)(void *state, char *buf, size_t max);
typedef void (*http_stream_close_fn)(void *state);

/*
 * What a handler learns about its request, for the request log and the metrics: it fills
 * these as it learns them. They live until the request completes, a streamed reply included,
 * and the stream's producer may still fill them (it runs before completion).
 */
typedef struct http_request_facts {
    char model[640];          /* a display name (store names are shorter); "": none */
    int64_t prompt_tokens;    /* < 0: unknown */
    int64_t generated_tokens; /* < 0: unknown */
    int64_t draft_tokens;     /* speculative decoding's guesses verified; 0: none */
    int64_t draft_accepted;   /* ... and kept */
} http_request_facts;

/* The facts of the request this reply answers. */
http_request_facts *http_reply_facts(http_reply *reply);

/*
 * The socket of the client this reply answers, for a handler that waits on other work (a
 * model runner) to notice the client leave, with poll's POLLRDHUP or http_client_gone; -1
 * when unknown. It stays open until the request completes, a streamed reply included; a
 * handler never reads, writes or closes it.
 */
int http_reply_client_fd(const http_reply *reply);

/*
 * Whether the client on socket fd (http_reply_client_fd's; -1: never) has closed its end or
 * reset the connection, without waiting. Bytes it has sent and not yet had read (a pipelined
 * or keep-alive request) do not count: only its hang-up does.
 */
bool http_client_gone(int fd);

/* ---- replies (exactly one per request) ---- */

void http_reply_json(http_reply *reply, unsigned status, json_t *body); /* consumes body */
void http_reply_error(http_reply *reply, unsigned status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void http_reply_text(http_reply *reply, unsigned status, const char *content_type,
                     const char *text);
void http_reply_empty(http_reply *reply, unsigned status);
/* A file of the server's own web page (200): it may load and call only this server. */
void http_reply_page(http_reply *reply, const char *content_type, const void *data, size_t len);
void http_reply_stream(http_reply *reply, const char *content_type, http_stream_next_fn next,
                       http_stream_close_fn close, void *state);

/* ---- routes ---- */

typedef void (*http_handler_fn)(void *ctx, const http_request *req, http_reply *reply);

/*
 * A body sink receives a request body in chunks instead of buffering it: begin returns the
 * sink state (NULL with an HTTP status and message to refuse), write takes each chunk
 * (false with a status and message to refuse the rest), abort drops a sink whose body will
 * not be used. A refused body is still read to its end and dropped, so the client gets the
 * status rather than a closed connection. The handler sees the state in req->sink_state
 * and owns it.
 */
typedef struct http_body_sink {
    void *(*begin)(void *ctx, const char *path_param, unsigned *status, corral_error *err);
    bool (*write)(void *state, const char *data, size_t size, unsigned *status,
                  corral_error *err);
    void (*abort)(void *state);
} http_body_sink;

typedef struct http_route {
    const char *method;      /* "GET" also answers HEAD */
    const char *path;        /* exact, or a prefix when it ends with '/' and prefix is set */
    bool prefix;
    http_handler_fn handler;
    const http_body_sink *sink; /* NULL: body buffered up to the size cap */
} http_route;

/* A request has completed: its reply sent in full, or the connection ended early. */
typedef struct http_request_done {
    const char *method;
    const char *path;  /* as requested (cut to 255 bytes) */
    const char *route; /* the matched route's path; NULL when no route matched */
    unsigned status;   /* 0: no reply went out */
    int64_t duration_ns;
    bool completed;    /* false: the client left or the connection failed before the end */
    const http_request_facts *facts;
} http_request_done;

typedef struct http_config {
    const char *host; /* bind address: IPv4, IPv6 (no brackets) or a name, e.g. "127.0.0.1" */
    unsigned port;    /* 0: the system chooses (http_server_port says which) */
    size_t max_body_bytes;
    const char *extra_origins; /* comma-separated allowed origins (CORRAL_ORIGINS), may be NULL */
    api_keys *keys;            /* NULL or disabled: no key needed */
    unsigned max_connections;  /* open connections; past it a new one gets 503 (0: default) */
    unsigned idle_timeout_s;   /* a connection silent this long is closed (0: default) */
    /* called once per request with the server's ctx, from the connection's thread; NULL: none */
    void (*on_request_done)(void *ctx, const http_request_done *done);
} http_config;

#define HTTP_DEFAULT_MAX_CONNECTIONS 4096u
#define HTTP_DEFAULT_IDLE_TIMEOUT_S 120u

http_server *http_server_start(const http_config *config, const http_route *routes,
                               size_t n_routes, void *ctx, corral_error *err);
void http_server_stop(http_server *server);

/* The port the server listens on. */
unsigned http_server_port(const http_server *server);

#endif

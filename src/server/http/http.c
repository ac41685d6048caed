/*
 * HTTP over libmicrohttpd (see http.h). One thread per connection (polled with poll(), so
 * no FD_SETSIZE limit), so handlers and stream producers may block. Per request: the first
 * callback applies the guards (connection cap, Host, Origin, API key) and picks the route,
 * the middle ones collect the body (capped) or feed a sink, the last one runs the handler
 * and queues its reply with the CORS headers. A request refused while its body arrives is
 * answered once the body has been read and dropped.
 */
#include "server/http/http.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <fnmatch.h>
#include <ifaddrs.h>
#include <malloc.h>
#include <microhttpd.h>
#include <netdb.h>
#include <poll.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "util/log.h"
#include "server/http/content_encoding.h"
#include "server/http/json_lossy.h"

struct http_server {
    struct MHD_Daemon *daemon;
    const http_route *routes;
    size_t n_routes;
    void *ctx;
    size_t max_body_bytes;
    char *extra_origins;
    bool loopback; /* bound to a loopback address: the Host guard applies */
    unsigned port; /* the port listened on, the system's choice when asked for 0 */
    api_keys *keys;
    unsigned max_connections;
    atomic_uint open_connections;
    _Atomic int64_t last_trim_s; /* monotonic seconds of the last malloc_trim */
    void (*on_request_done)(void *ctx, const http_request_done *done);
};

struct http_reply {
    struct MHD_Response *response;
    unsigned status;
    http_request_facts *facts;
    int client_fd; /* -1: unknown */
};

typedef struct request_state {
    const http_route *route;
    const char *path_param;
    char *body;
    size_t len, cap;
    bool has_body;
    void *sink_state;
    bool answered;          /* a reply is queued already; ignore the rest */
    bool failed;            /* the request is answered with the error below */
    unsigned fail_status;
    char fail_message[CORRAL_ERROR_MAX];
    /* for on_request_done */
    char method[16], path[256];
    int64_t start_ns;
    unsigned status;
    http_request_facts facts;
} request_state;

static int64_t monotonic_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

http_request_facts *http_reply_facts(http_reply *reply)
{
    return reply->facts;
}

int http_reply_client_fd(const http_reply *reply)
{
    return reply->client_fd;
}

bool http_client_gone(int fd)
{
    if (fd < 0)
        return false;
    struct pollfd p = {.fd = fd, .events = POLLRDHUP};
    return poll(&p, 1, 0) == 1 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL));
}

/* ---- replies ---- */

static void set_reply(http_reply *reply, unsigned status, struct MHD_Response *response)
{
    if (reply->response) /* a handler replying twice is a bug; keep the first */
        MHD_destroy_response(response);
    else {
        reply->response = response;
        reply->status = status;
    }
}

static struct MHD_Response *buffer_response(const char *data, size_t len, const char *type)
{
    struct MHD_Response *r =
        MHD_create_response_from_buffer(len, (void *)data, MHD_RESPMEM_MUST_COPY);
    if (r && type)
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    return r;
}

void http_reply_json(http_reply *reply, unsigned status, json_t *body)
{
    char *text = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    if (!text) {
        http_reply_text(reply, 500, "application/json", "{\"error\":\"out of memory\"}");
        return;
    }
    set_reply(reply, status, buffer_response(text, strlen(text), "application/json; charset=utf-8"));
    free(text);
}

void http_reply_error(http_reply *reply, unsigned status, const char *fmt, ...)
{
    char message[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    http_reply_json(reply, status, json_pack("{s:o*}", "error", json_string_lossy(message, strlen(message))));
}

void http_reply_text(http_reply *reply, unsigned status, const char *content_type,
                     const char *text)
{
    set_reply(reply, status, buffer_response(text, strlen(text), content_type));
}

void http_reply_empty(http_reply *reply, unsigned status)
{
    set_reply(reply, status, buffer_response("", 0, NULL));
}

void http_reply_page(http_reply *reply, const char *content_type, const void *data, size_t len)
{
    struct MHD_Response *r = buffer_response(data, len, content_type);
    if (r) {
        MHD_add_response_header(r, "Content-Security-Policy",
                                "default-src 'none'; script-src 'self'; style-src 'self'; "
                                "img-src 'self' data:; connect-src 'self'; base-uri 'none'; "
                                "form-action 'none'; frame-ancestors 'none'");
        MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
        MHD_add_response_header(r, "X-Frame-Options", "DENY");
        MHD_add_response_header(r, "Referrer-Policy", "no-referrer");
        MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    }
    set_reply(reply, 200, r);
}

typedef struct stream_state {
    http_stream_next_fn next;
    http_stream_close_fn close;
    void *state;
    int client_fd;
} stream_state;

/* Set on a connection's thread when its stream ends because the client left: libmicrohttpd's
 * warning about an application error that follows is then no error (the producer logs the
 * client's leaving itself). */
static _Thread_local bool stream_client_left;

static ssize_t stream_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    stream_state *s = cls;
    ssize_t n = s->next(s->state, buf, max);
    if (n == 0)
        return MHD_CONTENT_READER_END_OF_STREAM;
    if (n < 0)
        stream_client_left = http_client_gone(s->client_fd);
    return n < 0 ? MHD_CONTENT_READER_END_WITH_ERROR : n;
}

static void stream_free(void *cls)
{
    stream_state *s = cls;
    s->close(s->state);
    free(s);
}

void http_reply_stream(http_reply *reply, const char *content_type, http_stream_next_fn next,
                       http_stream_close_fn close, void *state)
{
    stream_state *s = malloc(sizeof *s);
    struct MHD_Response *r = NULL;
    if (s) {
        *s = (stream_state){next, close, state, reply->client_fd};
        r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, stream_reader, s,
                                              stream_free);
    }
    if (!r) {
        free(s);
        close(state);
        http_reply_error(reply, 500, "out of memory");
        return;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
    set_reply(reply, 200, r);
}

/* ---- Host guard and CORS, as ollama applies them ---- */

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcasecmp(s + n - k, suffix) == 0;
}

static bool is_local_interface(const struct sockaddr *want, int family)
{
    struct ifaddrs *list;
    if (getifaddrs(&list) != 0)
        return false;
    bool found = false;
    for (struct ifaddrs *i = list; i && !found; i = i->ifa_next) {
        if (!i->ifa_addr || i->ifa_addr->sa_family != family)
            continue;
        if (family == AF_INET)
            found = ((struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr ==
                    ((const struct sockaddr_in *)want)->sin_addr.s_addr;
        else
            found = memcmp(&((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr,
                           &((const struct sockaddr_in6 *)want)->sin6_addr, 16) == 0;
    }
    freeifaddrs(list);
    return found;
}

static bool is_allowed_ip(const char *host)
{
    struct sockaddr_in v4 = {.sin_family = AF_INET};
    struct sockaddr_in6 v6 = {.sin6_family = AF_INET6};
    if (inet_pton(AF_INET, host, &v4.sin_addr) == 1) {
        uint32_t a = ntohl(v4.sin_addr.s_addr);
        return (a >> 24) == 127 || (a >> 24) == 10 || (a >> 20) == (172u << 4 | 1) ||
               (a >> 16) == (192u << 8 | 168) || (a >> 16) == (169u << 8 | 254) || a == 0 ||
               is_local_interface((struct sockaddr *)&v4, AF_INET);
    }
    if (inet_pton(AF_INET6, host, &v6.sin6_addr) == 1) {
        const uint8_t *b = v6.sin6_addr.s6_addr;
        static const uint8_t zero[16], loop[16] = {[15] = 1};
        return memcmp(b, zero, 16) == 0 || memcmp(b, loop, 16) == 0 || (b[0] & 0xfe) == 0xfc ||
               (b[0] == 0xfe && (b[1] & 0xc0) == 0x80) ||
               is_local_interface((struct sockaddr *)&v6, AF_INET6);
    }
    return false;
}

/* The Host header is allowed on a loopback-bound server (DNS-rebinding guard). */
static bool host_allowed(const char *header)
{
    if (!header || !*header)
        return true;
    char host[256];
    if (strlen(header) >= sizeof host)
        return false;
    if (header[0] == '[') { /* [v6]:port */
        const char *close = strchr(header, ']');
        if (!close)
            return false;
        snprintf(host, sizeof host, "%.*s", (int)(close - header - 1), header + 1);
    } else {
        snprintf(host, sizeof host, "%s", header);
        char *colon = strchr(host, ':');
        if (colon && !strchr(colon + 1, ':'))
            *colon = '\0';
    }
    char hostname[256] = "";
    gethostname(hostname, sizeof hostname - 1);
    return strcasecmp(host, "localhost") == 0 || (*hostname && strcasecmp(host, hostname) == 0) ||
           ends_with(host, ".localhost") || ends_with(host, ".local") ||
           ends_with(host, ".internal") || is_allowed_ip(host);
}

/* "scheme://" + host equals origin, for the server's own pages (same origin). */
static bool origin_is_host(const char *origin, const char *host)
{
    static const char *const schemes[] = {"http://", "https://"};
    for (size_t i = 0; i < 2; i++) {
        size_t n = strlen(schemes[i]);
        if (strncasecmp(origin, schemes[i], n) == 0 && strcasecmp(origin + n, host) == 0)
            return true;
    }
    return false;
}

/*
 * ollama's list: local pages on any port and the schemes of desktop apps and editors, plus
 * CORRAL_ORIGINS. A page served by this server is allowed too, when the Host it was
 * reached by is a local name or address: a DNS-rebound name never is.
 */
static bool origin_allowed(const http_server *s, const char *origin, const char *host)
{
    if (host && *host && origin_is_host(origin, host) && host_allowed(host))
        return true;
    static const char *const builtin[] = {
        "http://localhost",  "https://localhost",  "http://localhost:*",  "https://localhost:*",
        "http://127.0.0.1",  "https://127.0.0.1",  "http://127.0.0.1:*",  "https://127.0.0.1:*",
        "http://0.0.0.0",    "https://0.0.0.0",    "http://0.0.0.0:*",    "https://0.0.0.0:*",
        "app://*",           "file://*",           "tauri://*",           "vscode-webview://*",
        "vscode-file://*",
    };
    for (size_t i = 0; i < sizeof builtin / sizeof builtin[0]; i++)
        if (fnmatch(builtin[i], origin, 0) == 0)
            return true;
    if (!s->extra_origins)
        return false;
    char *list = strdup(s->extra_origins), *save = NULL;
    bool found = false;
    for (char *p = list ? strtok_r(list, ",", &save) : NULL; p && !found;
         p = strtok_r(NULL, ",", &save)) {
        while (isspace((unsigned char)*p))
            p++;
        found = strcmp(p, "*") == 0 || fnmatch(p, origin, 0) == 0;
    }
    free(list);
    return found;
}

static const char *header(struct MHD_Connection *conn, const char *name)
{
    return MHD_lookup_connection_value(conn, MHD_HEADER_KIND, name);
}

/* The allowed headers are ollama's (the OpenAI SDK's among them) and what the Anthropic
 * SDK and both SDKs' helpers send from a browser: a preflight refuses any header not listed. */
static void add_cors(const http_server *s, struct MHD_Connection *conn, struct MHD_Response *r)
{
    const char *origin = header(conn, "Origin");
    MHD_add_response_header(r, "Vary", "Origin");
    if (!origin || !origin_allowed(s, origin, header(conn, "Host")))
        return;
    MHD_add_response_header(r, "Access-Control-Allow-Origin", origin);
    MHD_add_response_header(r, "Access-Control-Allow-Methods",
                            "GET, POST, PUT, PATCH, DELETE, HEAD, OPTIONS");
    MHD_add_response_header(r, "Access-Control-Allow-Headers",
                            "Authorization, Content-Type, User-Agent, Accept, X-Requested-With, "
                            "OpenAI-Beta, x-stainless-arch, x-stainless-async, "
                            "x-stainless-custom-poll-interval, x-stainless-helper-method, "
                            "x-stainless-lang, x-stainless-os, x-stainless-package-version, "
                            "x-stainless-poll-helper, x-stainless-retry-count, "
                            "x-stainless-runtime, x-stainless-runtime-version, "
                            "x-stainless-timeout, x-stainless-helper, x-api-key, "
                            "anthropic-version, anthropic-beta, "
                            "anthropic-dangerous-direct-browser-access");
}

/* ---- dispatch ---- */

static enum MHD_Result queue(http_server *s, struct MHD_Connection *conn, request_state *st,
                             http_reply *reply)
{
    if (!reply->response) {
        reply->response = buffer_response("{\"error\":\"internal error: no reply\"}", 35,
                                          "application/json");
        reply->status = 500;
    }
    if (!reply->response)
        return MHD_NO;
    add_cors(s, conn, reply->response);
    MHD_add_response_header(reply->response, "Server", "corral/" CORRAL_VERSION);
    st->status = reply->status;
    enum MHD_Result rc = MHD_queue_response(conn, reply->status, reply->response);
    MHD_destroy_response(reply->response);
    return rc;
}

static const http_route *find_route(const http_server *s, const char *method, const char *url,
                                    bool *path_known, const char **param)
{
    *path_known = false;
    bool head = strcmp(method, "HEAD") == 0;
    for (size_t i = 0; i < s->n_routes; i++) {
        const http_route *r = &s->routes[i];
        size_t n = strlen(r->path);
        bool match = r->prefix ? strncmp(url, r->path, n) == 0 && url[n] != '\0'
                               : strcmp(url, r->path) == 0;
        if (!match)
            continue;
        *path_known = true;
        if (strcmp(r->method, method) == 0 || (head && strcmp(r->method, "GET") == 0)) {
            *param = r->prefix ? url + n : NULL;
            return r;
        }
    }
    return NULL;
}

/* Refuse the request; its body is read to the end and dropped, then the error is sent. */
static void fail(request_state *st, unsigned status, const char *message)
{
    if (st->failed)
        return;
    st->failed = true;
    st->fail_status = status;
    snprintf(st->fail_message, sizeof st->fail_message, "%s", message);
    if (st->sink_state) {
        st->route->sink->abort(st->sink_state);
        st->sink_state = NULL;
    }
}

/* GET/HEAD / and /api/version answer without a key: clients probe them to find a server.
 * The chat page's files hold nothing secret; the page asks for a key when the API wants one. */
static bool needs_key(const char *method, const char *url)
{
    bool get = strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0;
    return !(get && (strcmp(url, "/") == 0 || strcmp(url, "/api/version") == 0 ||
                     strcmp(url, "/ui") == 0 || strncmp(url, "/ui/", 4) == 0));
}

/* The request's Content-Length is over the cap and the client waits for "100 Continue". */
static bool declared_too_large(const http_server *s, struct MHD_Connection *conn)
{
    const char *length = header(conn, "Content-Length");
    const char *expect = header(conn, "Expect");
    return length && strtoull(length, NULL, 10) > s->max_body_bytes && expect &&
           strcasecmp(expect, "100-continue") == 0;
}

static enum MHD_Result first_call(http_server *s, struct MHD_Connection *conn, const char *url,
                                  const char *method, request_state *st)
{
    http_reply reply = {.facts = &st->facts, .client_fd = -1};
    st->answered = true; /* until a route accepts the request */
    if (atomic_load(&s->open_connections) > s->max_connections) {
        http_reply_error(&reply, 503, "server busy: more than %u open connections",
                         s->max_connections);
        if (reply.response)
            MHD_add_response_header(reply.response, MHD_HTTP_HEADER_CONNECTION, "close");
        return queue(s, conn, st, &reply);
    }
    if (s->loopback && !host_allowed(header(conn, "Host"))) {
        http_reply_error(&reply, 403, "forbidden: host not allowed");
        return queue(s, conn, st, &reply);
    }
    /* A browser sends Origin on cross-site requests, including "simple" ones it sends
     * without a preflight: refuse them before any handler can act on them. */
    const char *origin = header(conn, "Origin");
    if (origin && !origin_allowed(s, origin, header(conn, "Host"))) {
        http_reply_error(&reply, 403, "forbidden: origin not allowed");
        return queue(s, conn, st, &reply);
    }
    if (strcmp(method, "OPTIONS") == 0) {
        http_reply_empty(&reply, 204);
        return queue(s, conn, st, &reply);
    }
    if (api_keys_enabled(s->keys) && needs_key(method, url)) {
        size_t len = 0;
        const char *key =
            api_keys_from_headers(header(conn, "Authorization"), header(conn, "x-api-key"), &len);
        if (!key || !api_keys_check(s->keys, key, len)) {
            http_reply_error(&reply, 401, "unauthorized: %s",
                             key ? "invalid API key" : "an API key is required "
                                                       "(Authorization: Bearer KEY)");
            if (reply.response)
                MHD_add_response_header(reply.response, MHD_HTTP_HEADER_WWW_AUTHENTICATE,
                                        "Bearer");
            return queue(s, conn, st, &reply);
        }
    }
    bool path_known;
    st->route = find_route(s, method, url, &path_known, &st->path_param);
    if (!st->route) {
        if (path_known)
            http_reply_text(&reply, 405, "text/plain", "405 method not allowed");
        else
            http_reply_text(&reply, 404, "text/plain", "404 page not found");
        return queue(s, conn, st, &reply);
    }
    /* Refuse a declared oversized body now, before MHD sends "100 Continue" for it. A
     * client that sends the body unasked has it read and dropped (take_body), then the 413. */
    if (!st->route->sink && declared_too_large(s, conn)) {
        http_reply_error(&reply, 413, "request body larger than %zu bytes", s->max_body_bytes);
        return queue(s, conn, st, &reply);
    }
    if (st->route->sink) {
        unsigned status = 400;
        corral_error err = {{0}};
        st->sink_state = st->route->sink->begin(s->ctx, st->path_param, &status, &err);
        if (!st->sink_state)
            fail(st, status, err.message);
    }
    st->answered = false;
    return MHD_YES;
}

/* A body sent compressed (Content-Encoding), decoded in place of the one received, under the
 * same cap; false when it has answered the error. */
static bool decode_body(http_server *s, struct MHD_Connection *conn, request_state *st,
                        http_reply *reply)
{
    char *plain, message[160];
    size_t len;
    unsigned status = 400;
    if (!http_body_decode(header(conn, "Content-Encoding"), st->body, st->len,
                          s->max_body_bytes, &plain, &len, &status, message, sizeof message)) {
        http_reply_error(reply, status, "%s", message);
        return false;
    }
    if (plain) {
        free(st->body);
        st->body = plain;
        st->len = len;
        st->cap = len + 1;
    }
    return true;
}

static void take_body(http_server *s, request_state *st, const char *data, size_t size)
{
    st->has_body = true;
    if (st->failed)
        return;
    if (st->route->sink) {
        unsigned status = 500;
        corral_error err = {{0}};
        if (!st->route->sink->write(st->sink_state, data, size, &status, &err))
            fail(st, status, *err.message ? err.message : "cannot store the upload");
        return;
    }
    if (st->len + size > s->max_body_bytes) {
        char message[128];
        snprintf(message, sizeof message, "request body larger than %zu bytes", s->max_body_bytes);
        fail(st, 413, message);
        return;
    }
    if (st->len + size + 1 > st->cap) {
        size_t cap = st->cap ? st->cap : 4096;
        while (cap < st->len + size + 1)
            cap *= 2;
        char *grown = realloc(st->body, cap);
        if (!grown) {
            fail(st, 500, "out of memory");
            return;
        }
        st->body = grown;
        st->cap = cap;
    }
    memcpy(st->body + st->len, data, size);
    st->len += size;
    st->body[st->len] = '\0';
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_data_size,
                                  void **con_cls)
{
    (void)version;
    http_server *s = cls;
    request_state *st = *con_cls;
    if (!st) {
        st = calloc(1, sizeof *st);
        if (!st)
            return MHD_NO;
        st->start_ns = monotonic_ns();
        snprintf(st->method, sizeof st->method, "%s", method);
        snprintf(st->path, sizeof st->path, "%s", url);
        st->facts.prompt_tokens = st->facts.generated_tokens = -1;
        *con_cls = st;
        return first_call(s, conn, url, method, st);
    }
    /* one thread per connection: the socket outlives the handler and its streamed reply */
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    http_reply reply = {.facts = &st->facts, .client_fd = info ? info->connect_fd : -1};
    if (st->answered) {
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (*upload_data_size > 0) {
        take_body(s, st, upload_data, *upload_data_size);
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (st->failed) { /* the whole body has been read (and dropped) */
        st->answered = true;
        http_reply_error(&reply, st->fail_status, "%s", st->fail_message);
        return queue(s, conn, st, &reply);
    }
    if (st->has_body && !st->route->sink && !decode_body(s, conn, st, &reply)) {
        st->answered = true;
        return queue(s, conn, st, &reply);
    }
    http_request req = {
        .method = method,
        .path = url,
        .path_param = st->path_param,
        .accept = header(conn, "Accept"),
        .user_agent = header(conn, "User-Agent"),
        .content_type = header(conn, "Content-Type"),
        .anthropic_version = header(conn, "anthropic-version"),
        .body = st->has_body && !st->route->sink ? st->body : NULL,
        .body_len = st->len,
        .sink_state = st->sink_state,
    };
    st->sink_state = NULL; /* the handler owns it now */
    st->route->handler(s->ctx, &req, &reply);
    return queue(s, conn, st, &reply);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode code)
{
    (void)conn;
    http_server *s = cls;
    request_state *st = *con_cls;
    if (!st)
        return;
    if (st->sink_state) /* the client went away mid-upload */
        st->route->sink->abort(st->sink_state);
    if (s->on_request_done) {
        http_request_done done = {
            .method = st->method, .path = st->path, .route = st->route ? st->route->path : NULL,
            .status = st->status, .duration_ns = monotonic_ns() - st->start_ns,
            .completed = code == MHD_REQUEST_TERMINATED_COMPLETED_OK, .facts = &st->facts};
        s->on_request_done(s->ctx, &done);
    }
    free(st->body);
    free(st);
    *con_cls = NULL;
}

/*
 * The last connection is gone: give back to the system what a burst of connection threads
 * left in malloc's arenas, so the server's memory returns to its idle size. At most once a
 * second, so a client that opens a connection per request does not pay for it each time.
 */
static void trim_when_idle(http_server *s)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    int64_t last = atomic_load(&s->last_trim_s);
    if (now.tv_sec - last >= 1 && atomic_compare_exchange_strong(&s->last_trim_s, &last, now.tv_sec))
        malloc_trim(0);
}

static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_ctx,
                          enum MHD_ConnectionNotificationCode code)
{
    (void)conn;
    (void)socket_ctx;
    http_server *s = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED)
        atomic_fetch_add(&s->open_connections, 1);
    else if (code == MHD_CONNECTION_NOTIFY_CLOSED && atomic_fetch_sub(&s->open_connections, 1) == 1)
        trim_when_idle(s);
}

/*
 * Raise the open-file limit to what the system allows (as servers commonly do) and keep
 * the connection cap below it, with room for model files, runner sockets and the store.
 */
static unsigned fit_connection_cap(unsigned wanted)
{
    struct rlimit lim;
    if (getrlimit(RLIMIT_NOFILE, &lim) != 0)
        return wanted;
    if (lim.rlim_cur < lim.rlim_max) {
        lim.rlim_cur = lim.rlim_max;
        setrlimit(RLIMIT_NOFILE, &lim);
        getrlimit(RLIMIT_NOFILE, &lim);
    }
    const rlim_t reserve = 256;
    if (lim.rlim_cur != RLIM_INFINITY && lim.rlim_cur < (rlim_t)wanted + 2 * reserve)
        return lim.rlim_cur > 2 * reserve ? (unsigned)(lim.rlim_cur - 2 * reserve) : 16;
    return wanted;
}

/* libmicrohttpd's own messages go through the log, so that a JSON log stays JSON. */
static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    char message[512];
    vsnprintf(message, sizeof message, fmt, ap);
    size_t n = strlen(message);
    while (n > 0 && message[n - 1] == '\n')
        message[--n] = '\0';
    if (stream_client_left && strncmp(message, "Closing connection", 18) == 0) {
        stream_client_left = false;
        return;
    }
    log_write(LOG_WARN, message, (log_field[]){LOG_STR("source", "libmicrohttpd")}, 1);
}

/*
 * config's host and port as a socket address: an IPv4 or IPv6 address, else a name resolved
 * (its first address, as a Go server listening on a name takes). *loopback says whether only
 * this machine can reach it.
 */
static bool bind_address(const http_config *config, struct sockaddr_storage *addr,
                         bool *loopback, corral_error *err)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *found = NULL;
    char port[8];
    snprintf(port, sizeof port, "%u", config->port);
    int rc = getaddrinfo(config->host, port, &hints, &found);
    if (rc != 0 || !found) {
        corral_error_set(err, "cannot listen on '%s': %s", config->host,
                         rc ? gai_strerror(rc) : "no address");
        return false;
    }
    memset(addr, 0, sizeof *addr);
    memcpy(addr, found->ai_addr, found->ai_addrlen);
    freeaddrinfo(found);
    if (addr->ss_family == AF_INET) {
        *loopback = (ntohl(((struct sockaddr_in *)addr)->sin_addr.s_addr) >> 24) == 127;
    } else {
        static const uint8_t loop[16] = {[15] = 1};
        *loopback = memcmp(((struct sockaddr_in6 *)addr)->sin6_addr.s6_addr, loop, 16) == 0;
    }
    return true;
}

http_server *http_server_start(const http_config *config, const http_route *routes,
                               size_t n_routes, void *ctx, corral_error *err)
{
    struct sockaddr_storage addr;
    bool loopback;
    if (!bind_address(config, &addr, &loopback, err))
        return NULL;
    http_server *s = calloc(1, sizeof *s);
    if (!s) {
        corral_error_set(err, "out of memory");
        return NULL;
    }
    s->routes = routes;
    s->n_routes = n_routes;
    s->ctx = ctx;
    s->max_body_bytes = config->max_body_bytes;
    s->extra_origins = config->extra_origins ? strdup(config->extra_origins) : NULL;
    s->loopback = loopback;
    s->keys = config->keys;
    s->on_request_done = config->on_request_done;
    s->max_connections = fit_connection_cap(
        config->max_connections ? config->max_connections : HTTP_DEFAULT_MAX_CONNECTIONS);
    /* Past the cap, MHD accepts a few more connections so they can be told 503; past
     * those it closes new ones at once. */
    unsigned hard_limit = s->max_connections + 64;
    unsigned idle_timeout_s =
        config->idle_timeout_s ? config->idle_timeout_s : HTTP_DEFAULT_IDLE_TIMEOUT_S;
    /* The logger goes first: libmicrohttpd prints what it meets before it to stderr. */
    s->daemon = MHD_start_daemon(
        MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL |
            MHD_USE_ERROR_LOG | (addr.ss_family == AF_INET6 ? MHD_USE_IPv6 : 0),
        (uint16_t)config->port, NULL, NULL, on_request, s, MHD_OPTION_EXTERNAL_LOGGER, mhd_log,
        NULL, MHD_OPTION_SOCK_ADDR, &addr, MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
        MHD_OPTION_NOTIFY_CONNECTION, on_connection, s, MHD_OPTION_CONNECTION_LIMIT, hard_limit,
        MHD_OPTION_CONNECTION_TIMEOUT, idle_timeout_s, MHD_OPTION_END);
    if (!s->daemon) {
        corral_error_set(err, "cannot listen on %s:%u (address in use?)", config->host,
                         config->port);
        free(s->extra_origins);
        free(s);
        return NULL;
    }
    const union MHD_DaemonInfo *bound = MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_BIND_PORT);
    s->port = bound && bound->port ? bound->port : (uint16_t)config->port;
    return s;
}

unsigned http_server_port(const http_server *s)
{
    return s->port;
}

void http_server_stop(http_server *s)
{
    if (!s)
        return;
    MHD_stop_daemon(s->daemon);
    free(s->extra_origins);
    free(s);
}

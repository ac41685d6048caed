/*
 * libcurl client for `corral serve` (see client.h). One curl handle per client so requests
 * reuse the connection. Every byte the server sends lands in a bounded buffer: a reply larger
 * than CLIENT_MAX_REPLY_BYTES or a line longer than CLIENT_MAX_LINE_BYTES fails the request.
 */
#include "client.h"

#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_PORT 11434
#define SERVER_START_TIMEOUT_MS 60000 /* a sanitizer build opens its store slowly */
#define HEARTBEAT_TIMEOUT_MS 2000

struct corral_client {
    CURL *curl;
    client_address address;
};

static volatile sig_atomic_t cancel_requested;

void client_cancel(void)
{
    cancel_requested = 1;
}

bool client_cancelled(void)
{
    return cancel_requested != 0;
}

void client_reset_cancel(void)
{
    cancel_requested = 0;
}

/* ---- address ---- */

static bool is_loopback_host(const char *host)
{
    return strcmp(host, "localhost") == 0 || strncmp(host, "127.", 4) == 0 ||
           strcmp(host, "[::1]") == 0 || strcmp(host, "0.0.0.0") == 0 || strcmp(host, "[::]") == 0;
}

bool client_parse_address(const char *text, client_address *out, corral_error *err)
{
    memset(out, 0, sizeof *out);
    while (isspace((unsigned char)*text) || *text == '"' || *text == '\'')
        text++;
    char trimmed[600];
    size_t len = strlen(text);
    if (len >= sizeof trimmed) {
        corral_error_set(err, "server address '%.40s...' is too long", text);
        return false;
    }
    memcpy(trimmed, text, len + 1);
    while (len && (isspace((unsigned char)trimmed[len - 1]) || trimmed[len - 1] == '"' ||
                   trimmed[len - 1] == '\''))
        trimmed[--len] = '\0';

    const char *scheme = "http";
    unsigned port = DEFAULT_PORT;
    char *rest = trimmed;
    char *sep = strstr(trimmed, "://");
    if (sep) {
        *sep = '\0';
        if (strcmp(trimmed, "http") == 0) {
            port = 80;
        } else if (strcmp(trimmed, "https") == 0) {
            scheme = "https";
            port = 443;
        } else {
            corral_error_set(err, "server address: unsupported scheme '%s' (use http or https)",
                             trimmed);
            return false;
        }
        rest = sep + 3;
    } else if (strcmp(trimmed, "ollama.com") == 0) {
        scheme = "https"; /* ollama's one special case */
        port = 443;
    }

    const char *path = "";
    char *slash = strchr(rest, '/');
    if (slash) {
        path = slash + 1;
        *slash = '\0';
    }
    char *port_text = NULL;
    char *bracket = strchr(rest, ']');
    char *colon = strrchr(bracket ? bracket : rest, ':');
    char bare_ipv6[sizeof out->host];
    if (!bracket && colon && strchr(rest, ':') != colon) {
        /* "::1" or "::": an IPv6 address without brackets has no port, as ollama reads it */
        if ((size_t)snprintf(bare_ipv6, sizeof bare_ipv6, "[%s]", rest) >= sizeof bare_ipv6) {
            corral_error_set(err, "server address: host '%.40s...' is too long", rest);
            return false;
        }
        rest = bare_ipv6;
        colon = NULL;
    }
    if (colon) {
        *colon = '\0';
        port_text = colon + 1;
    }
    if (port_text && *port_text) {
        char *end;
        long p = strtol(port_text, &end, 10);
        if (*end || p <= 0 || p > 65535) {
            corral_error_set(err, "server address: invalid port '%s'", port_text);
            return false;
        }
        port = (unsigned)p;
    }
    const char *host = *rest ? rest : "127.0.0.1";
    size_t host_len = strlen(host);
    if (host_len >= sizeof out->host) {
        corral_error_set(err, "server address: host '%.40s...' is too long", host);
        return false;
    }
    memcpy(out->host, host, host_len + 1);
    out->port = port;
    out->loopback = is_loopback_host(out->host);
    size_t path_len = strlen(path);
    while (path_len && path[path_len - 1] == '/')
        path_len--;
    int n = snprintf(out->url, sizeof out->url, "%s://%s:%u%s%.*s", scheme, out->host, port,
                     path_len ? "/" : "", (int)path_len, path);
    if (n < 0 || (size_t)n >= sizeof out->url) {
        corral_error_set(err, "server address '%.40s...' is too long", text);
        return false;
    }
    return true;
}

/* ---- bounded buffers ---- */

typedef struct byte_buffer {
    char *data;
    size_t len, cap, max_bytes;
} byte_buffer;

static bool buffer_append(byte_buffer *b, const char *data, size_t n)
{
    if (n > b->max_bytes - b->len)
        return false;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *grown = realloc(b->data, cap);
        if (!grown)
            return false;
        b->data = grown;
        b->cap = cap;
    }
    memcpy(b->data + b->len, data, n);
    b->len += n;
    b->data[b->len] = '\0';
    return true;
}

static void buffer_free(byte_buffer *b)
{
    free(b->data);
    *b = (byte_buffer){0};
}

/* ---- client ---- */

corral_client *client_open(corral_error *err)
{
    const char *text = getenv("CORRAL_HOST");
    if (!text || !*text)
        text = getenv("OLLAMA_HOST");
    corral_client *client = calloc(1, sizeof *client);
    if (!client) {
        corral_error_set(err, "out of memory");
        return NULL;
    }
    if (!client_parse_address(text ? text : "", &client->address, err)) {
        free(client);
        return NULL;
    }
    static bool curl_ready;
    if (!curl_ready) {
        if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
            corral_error_set(err, "libcurl failed to initialise");
            free(client);
            return NULL;
        }
        curl_ready = true;
    }
    client->curl = curl_easy_init();
    if (!client->curl) {
        corral_error_set(err, "libcurl failed to initialise");
        free(client);
        return NULL;
    }
    return client;
}

void client_close(corral_client *client)
{
    if (!client)
        return;
    curl_easy_cleanup(client->curl);
    free(client);
}

const client_address *client_get_address(const corral_client *client)
{
    return &client->address;
}

static int on_transfer_progress(void *user, curl_off_t dltotal, curl_off_t dlnow,
                                curl_off_t ultotal, curl_off_t ulnow)
{
    (void)user, (void)dltotal, (void)dlnow, (void)ultotal, (void)ulnow;
    return cancel_requested ? 1 : 0; /* non-zero aborts the transfer */
}

/*
 * headers plus "Authorization: Bearer KEY" when CORRAL_API_KEY (else OLLAMA_API_KEY) is set,
 * for a server that requires API keys. A key with a line break is not sent: it would end the
 * header early.
 */
static struct curl_slist *with_api_key(struct curl_slist *headers)
{
    const char *key = getenv("CORRAL_API_KEY");
    if (!key || !*key)
        key = getenv("OLLAMA_API_KEY");
    if (!key || !*key || strpbrk(key, "\r\n") || strlen(key) > 1024)
        return headers;
    char line[1100];
    snprintf(line, sizeof line, "Authorization: Bearer %s", key);
    struct curl_slist *more = curl_slist_append(headers, line);
    explicit_bzero(line, sizeof line);
    return more ? more : headers;
}

/* A proxy from the environment (http_proxy, ...) never carries requests to a local server, as
 * in ollama's client: a corporate proxy cannot reach this machine's loopback address. */
static void skip_proxy_when_local(corral_client *client)
{
    if (client->address.loopback)
        curl_easy_setopt(client->curl, CURLOPT_NOPROXY, "*");
}

/* Reset the handle for a request to path; headers must outlive the transfer. */
static void prepare(corral_client *client, const char *method, const char *path,
                    struct curl_slist *headers, const char *body, size_t body_len)
{
    CURL *c = client->curl;
    curl_easy_reset(c);
    skip_proxy_when_local(client);
    char url[1024];
    snprintf(url, sizeof url, "%s%s", client->address.url, path);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "corral/" CORRAL_VERSION " (amd64 linux)");
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_transfer_progress);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, 5000L);
    if (strcmp(method, "HEAD") == 0) {
        curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
    } else if (strcmp(method, "GET") != 0) {
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    }
    if (body) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_len);
    }
}

/* err from a failed transfer; a refused connection names the address. */
static void transport_error(const corral_client *client, CURLcode code, const char *detail,
                            corral_error *err)
{
    if (code == CURLE_ABORTED_BY_CALLBACK && cancel_requested)
        corral_error_set(err, "cancelled");
    else if (code == CURLE_COULDNT_CONNECT)
        corral_error_set(err, "could not connect to a corral server at %s (is 'corral serve' "
                              "running?)", client->address.url);
    else
        corral_error_set(err, "%s: %s", client->address.url, detail && *detail ? detail
                                                                        : curl_easy_strerror(code));
}

/* err from a non-2xx reply body: the server's {"error"} text, else the start of the body. */
static void status_error(long status, const char *body, size_t len, corral_error *err)
{
    json_t *json = body && len ? json_loadb(body, len, 0, NULL) : NULL;
    const char *message = json_string_value(json_object_get(json, "error"));
    if (message)
        corral_error_set(err, "%s", message);
    else if (body && len)
        corral_error_set(err, "server replied %ld: %.200s", status, body);
    else
        corral_error_set(err, "server replied %ld", status);
    json_decref(json);
}

static size_t collect_body(char *data, size_t size, size_t n, void *user)
{
    return buffer_append(user, data, size * n) ? size * n : 0;
}

static char *encode_body(const json_t *body, size_t *len, corral_error *err)
{
    *len = 0;
    if (!body)
        return NULL;
    char *text = json_dumps(body, JSON_COMPACT);
    if (!text)
        corral_error_set(err, "out of memory encoding the request");
    else
        *len = strlen(text);
    return text;
}

long client_call(corral_client *client, const char *method, const char *path, const json_t *body,
                 json_t **reply, corral_error *err)
{
    if (reply)
        *reply = NULL;
    size_t body_len;
    char *body_text = encode_body(body, &body_len, err);
    if (body && !body_text)
        return 0;
    struct curl_slist *headers = curl_slist_append(NULL, "Content-Type: application/json");
    headers = curl_slist_append(headers, "Accept: application/json");
    headers = with_api_key(headers);
    byte_buffer got = {.max_bytes = CLIENT_MAX_REPLY_BYTES};
    char detail[CURL_ERROR_SIZE] = "";
    prepare(client, method, path, headers, body_text, body_len);
    curl_easy_setopt(client->curl, CURLOPT_ERRORBUFFER, detail);
    curl_easy_setopt(client->curl, CURLOPT_WRITEFUNCTION, collect_body);
    curl_easy_setopt(client->curl, CURLOPT_WRITEDATA, &got);
    CURLcode code = curl_easy_perform(client->curl);
    long status = 0;
    if (code == CURLE_WRITE_ERROR) {
        corral_error_set(err, "the server's reply to %s is larger than %u MB", path,
                         CLIENT_MAX_REPLY_BYTES >> 20);
    } else if (code != CURLE_OK) {
        transport_error(client, code, detail, err);
    } else {
        curl_easy_getinfo(client->curl, CURLINFO_RESPONSE_CODE, &status);
        if (status < 200 || status > 299) {
            status_error(status, got.data, got.len, err);
        } else if (reply && got.len) {
            json_error_t jerr;
            *reply = json_loadb(got.data, got.len, JSON_ALLOW_NUL, &jerr);
            if (!*reply) {
                corral_error_set(err, "the server's reply to %s is not JSON: %s", path, jerr.text);
                status = 0;
            }
        }
    }
    buffer_free(&got);
    curl_slist_free_all(headers);
    free(body_text);
    return status;
}

/* ---- NDJSON streams ---- */

typedef struct stream_state {
    CURL *curl;
    long status;             /* known at the first body byte */
    byte_buffer line;        /* the partial line (2xx) or the error body */
    client_line_fn on_line;
    void *user;
    bool stopped;            /* the callback asked to stop */
    bool failed;
    corral_error *err;
} stream_state;

/* One complete line; false ends the transfer. */
static bool deliver_line(stream_state *s, const char *text, size_t len)
{
    while (len && (text[len - 1] == '\r' || isspace((unsigned char)text[len - 1])))
        len--;
    if (!len)
        return true;
    json_error_t jerr;
    /* a model may generate a NUL byte, which the server sends as \u0000 */
    json_t *obj = json_loadb(text, len, JSON_ALLOW_NUL, &jerr);
    if (!json_is_object(obj)) {
        corral_error_set(s->err, "the server sent a line that is not a JSON object: %.80s", text);
        json_decref(obj);
        s->failed = true;
        return false;
    }
    const char *error = json_string_value(json_object_get(obj, "error"));
    if (error) {
        corral_error_set(s->err, "%s", error);
        json_decref(obj);
        s->failed = true;
        return false;
    }
    bool more = s->on_line(s->user, obj);
    json_decref(obj);
    if (!more)
        s->stopped = true;
    return more;
}

static size_t on_stream_bytes(char *data, size_t size, size_t n, void *user)
{
    stream_state *s = user;
    size_t total = size * n;
    if (!s->status)
        curl_easy_getinfo(s->curl, CURLINFO_RESPONSE_CODE, &s->status);
    if (s->status < 200 || s->status > 299) {
        /* an error body: keep the first part for the message */
        size_t room = s->line.max_bytes - s->line.len;
        buffer_append(&s->line, data, total < room ? total : room);
        return total;
    }
    size_t start = 0;
    for (size_t i = 0; i < total; i++) {
        if (data[i] != '\n')
            continue;
        bool ok;
        if (s->line.len) {
            if (!buffer_append(&s->line, data + start, i - start))
                goto too_long;
            ok = deliver_line(s, s->line.data, s->line.len);
            s->line.len = 0;
        } else {
            ok = deliver_line(s, data + start, i - start);
        }
        if (!ok)
            return 0;
        start = i + 1;
    }
    if (start < total && !buffer_append(&s->line, data + start, total - start))
        goto too_long;
    return total;
too_long:
    corral_error_set(s->err, "the server sent a line longer than %u MB",
                     CLIENT_MAX_LINE_BYTES >> 20);
    s->failed = true;
    return 0;
}

long client_stream(corral_client *client, const char *path, const json_t *body,
                   client_line_fn on_line, void *user, corral_error *err)
{
    size_t body_len;
    char *body_text = encode_body(body, &body_len, err);
    if (!body_text)
        return 0;
    struct curl_slist *headers = curl_slist_append(NULL, "Content-Type: application/json");
    headers = curl_slist_append(headers, "Accept: application/x-ndjson");
    headers = with_api_key(headers);
    stream_state s = {
        .curl = client->curl, .line = {.max_bytes = CLIENT_MAX_LINE_BYTES},
        .on_line = on_line, .user = user, .err = err,
    };
    char detail[CURL_ERROR_SIZE] = "";
    prepare(client, "POST", path, headers, body_text, body_len);
    curl_easy_setopt(client->curl, CURLOPT_ERRORBUFFER, detail);
    curl_easy_setopt(client->curl, CURLOPT_WRITEFUNCTION, on_stream_bytes);
    curl_easy_setopt(client->curl, CURLOPT_WRITEDATA, &s);
    CURLcode code = curl_easy_perform(client->curl);
    long status = 0;
    if (code == CURLE_WRITE_ERROR && s.stopped) {
        status = s.status; /* the caller had what it wanted */
    } else if (code == CURLE_WRITE_ERROR && s.failed) {
        status = 0;
    } else if (code != CURLE_OK) {
        transport_error(client, code, detail, err);
    } else {
        curl_easy_getinfo(client->curl, CURLINFO_RESPONSE_CODE, &status);
        if (status < 200 || status > 299)
            status_error(status, s.line.data, s.line.len, err);
        else if (s.line.len && !deliver_line(&s, s.line.data, s.line.len) && s.failed)
            status = 0; /* a last line without its newline */
    }
    if (s.failed && status >= 200 && status <= 299)
        status = 0;
    buffer_free(&s.line);
    curl_slist_free_all(headers);
    free(body_text);
    return status;
}

/* ---- blob upload ---- */

typedef struct upload_state {
    FILE *file;
    uint64_t sent, total;
    client_upload_fn on_progress;
    void *user;
} upload_state;

static size_t read_upload(char *buf, size_t size, size_t n, void *user)
{
    upload_state *u = user;
    size_t got = fread(buf, 1, size * n, u->file);
    if (got == 0 && ferror(u->file))
        return CURL_READFUNC_ABORT;
    u->sent += got;
    if (u->on_progress)
        u->on_progress(u->user, u->sent, u->total);
    return got;
}

bool client_upload_blob(corral_client *client, const char *file_path, const char *digest,
                        client_upload_fn on_progress, void *user, corral_error *err)
{
    char path[256];
    snprintf(path, sizeof path, "/api/blobs/%s", digest);
    long status = client_call(client, "HEAD", path, NULL, NULL, err);
    if (status == 200) {
        if (on_progress) {
            struct stat st;
            uint64_t size = stat(file_path, &st) == 0 ? (uint64_t)st.st_size : 0;
            on_progress(user, size, size);
        }
        return true;
    }
    if (status != 404) {
        if (status)
            corral_error_prefix(err, "checking blob %s", digest);
        return false;
    }
    FILE *file = fopen(file_path, "rb");
    if (!file) {
        corral_error_set(err, "%s: %s", file_path, strerror(errno));
        return false;
    }
    struct stat st;
    if (fstat(fileno(file), &st) != 0) {
        corral_error_set(err, "%s: %s", file_path, strerror(errno));
        fclose(file);
        return false;
    }
    upload_state u = {file, 0, (uint64_t)st.st_size, on_progress, user};
    struct curl_slist *headers = curl_slist_append(NULL, "Content-Type: application/octet-stream");
    headers = curl_slist_append(headers, "Expect:");
    headers = with_api_key(headers);
    byte_buffer got = {.max_bytes = 1u << 20};
    char detail[CURL_ERROR_SIZE] = "";
    prepare(client, "POST", path, headers, NULL, 0);
    CURL *c = client->curl;
    curl_easy_setopt(c, CURLOPT_POST, 1L);
    curl_easy_setopt(c, CURLOPT_READFUNCTION, read_upload);
    curl_easy_setopt(c, CURLOPT_READDATA, &u);
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)st.st_size);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, detail);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &got);
    CURLcode code = curl_easy_perform(c);
    bool ok = false;
    if (code != CURLE_OK) {
        transport_error(client, code, detail, err);
    } else {
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
        if (status == 200 || status == 201)
            ok = true;
        else
            status_error(status, got.data, got.len, err);
    }
    if (!ok)
        corral_error_prefix(err, "uploading %s", file_path);
    buffer_free(&got);
    curl_slist_free_all(headers);
    fclose(file);
    return ok;
}

/* ---- starting a local server ---- */

static bool server_answers(corral_client *client)
{
    curl_easy_reset(client->curl);
    skip_proxy_when_local(client);
    char url[700];
    snprintf(url, sizeof url, "%s/", client->address.url);
    curl_easy_setopt(client->curl, CURLOPT_URL, url);
    curl_easy_setopt(client->curl, CURLOPT_NOBODY, 1L);
    curl_easy_setopt(client->curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(client->curl, CURLOPT_TIMEOUT_MS, (long)HEARTBEAT_TIMEOUT_MS);
    long status = 0;
    if (curl_easy_perform(client->curl) == CURLE_OK)
        curl_easy_getinfo(client->curl, CURLINFO_RESPONSE_CODE, &status);
    return status == 200;
}

/* ~/.corral/server.log, creating ~/.corral; false when HOME is unusable. */
static bool server_log_path(char *out, size_t size)
{
    const char *home = getenv("HOME");
    if (!home || !*home)
        return false;
    char dir[4096];
    if ((size_t)snprintf(dir, sizeof dir, "%s/.corral", home) >= sizeof dir)
        return false;
    if (mkdir(dir, 0755) != 0 && errno != EEXIST)
        return false;
    return (size_t)snprintf(out, size, "%s/server.log", dir) < size;
}

/* fork twice so the server is adopted by init and never left a zombie of ours. */
static bool spawn_server(const char *log_path, corral_error *err)
{
    pid_t child = fork();
    if (child < 0) {
        corral_error_set(err, "cannot start 'corral serve': %s", strerror(errno));
        return false;
    }
    if (child == 0) {
        if (fork() != 0)
            _exit(0);
        setsid();
        int null_fd = open("/dev/null", O_RDONLY);
        int log_fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (null_fd < 0 || log_fd < 0)
            _exit(127);
        dup2(null_fd, STDIN_FILENO);
        dup2(log_fd, STDOUT_FILENO);
        dup2(log_fd, STDERR_FILENO);
        signal(SIGINT, SIG_DFL);
        execl("/proc/self/exe", "corral", "serve", (char *)NULL);
        _exit(127);
    }
    int status;
    waitpid(child, &status, 0);
    return true;
}

bool client_ensure_server(corral_client *client, corral_error *err)
{
    if (server_answers(client))
        return true;
    if (!client->address.loopback) {
        corral_error_set(err, "could not connect to a corral server at %s", client->address.url);
        return false;
    }
    char log_path[4200];
    if (!server_log_path(log_path, sizeof log_path))
        snprintf(log_path, sizeof log_path, "/dev/null");
    if (isatty(STDERR_FILENO))
        fprintf(stderr, "starting 'corral serve' on %s (log: %s)\n", client->address.url,
                log_path);
    if (!spawn_server(log_path, err))
        return false;
    for (int waited_ms = 0; waited_ms < SERVER_START_TIMEOUT_MS; waited_ms += 100) {
        if (cancel_requested)
            break;
        struct timespec pause = {0, 100 * 1000000L};
        nanosleep(&pause, NULL);
        if (server_answers(client))
            return true;
    }
    corral_error_set(err, "'corral serve' did not answer on %s; see %s", client->address.url,
                     log_path);
    return false;
}

corral_client *client_connect(corral_error *err)
{
    corral_client *client = client_open(err);
    if (client && !client_ensure_server(client, err)) {
        client_close(client);
        return NULL;
    }
    return client;
}

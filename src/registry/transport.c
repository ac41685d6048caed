/*
 * HTTP to a registry over libcurl: the client for one repository, single requests with
 * bounded in-memory replies or streamed bodies, stall detection, the 401 → challenge → retry
 * step, and retries with exponential backoff. Authorization goes only to the registry's own
 * host; redirects stay on https unless the client is insecure.
 */
#include "registry/registry_internal.h"

#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_PART_MIN_BYTES (16ull << 20)
#define DEFAULT_MAX_PARTS 8u
#define DEFAULT_STALL_SECONDS 30u
#define DEFAULT_MAX_RETRIES 6u
#define DEFAULT_BACKOFF_MS 1000u
#define BACKOFF_CAP_MS 30000u
#define STALL_BYTES_PER_SECOND 1024L
#define CONNECT_TIMEOUT_S 30L
#define HEADER_VALUE_MAX 4096u

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static bool curl_ready;

static void curl_init_once(void)
{
    curl_ready = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK;
}

reg_client *reg_client_create(const corral_model_name *name, const char *scheme,
                              const corral_registry_options *opts, corral_error *err)
{
    pthread_once(&curl_once, curl_init_once);
    if (!curl_ready) {
        corral_error_set(err, "libcurl failed to initialise");
        return NULL;
    }
    reg_client *c = calloc(1, sizeof *c);
    if (!c) {
        corral_error_set(err, "out of memory");
        return NULL;
    }
    if (opts)
        c->opts = *opts;
    if (!c->opts.part_min_bytes)
        c->opts.part_min_bytes = DEFAULT_PART_MIN_BYTES;
    if (!c->opts.max_parts)
        c->opts.max_parts = DEFAULT_MAX_PARTS;
    if (!c->opts.stall_seconds)
        c->opts.stall_seconds = DEFAULT_STALL_SECONDS;
    if (!c->opts.max_retries)
        c->opts.max_retries = DEFAULT_MAX_RETRIES;
    if (!c->opts.backoff_ms)
        c->opts.backoff_ms = DEFAULT_BACKOFF_MS;
    snprintf(c->scheme, sizeof c->scheme, "%s", scheme);
    memcpy(c->host, name->host, sizeof c->host);
    snprintf(c->repository, sizeof c->repository, "%s/%s", name->namespace, name->model);
    pthread_mutex_init(&c->lock, NULL);
    return c;
}

reg_client *reg_client_open(const char *text, const corral_registry_options *opts,
                            corral_model_name *name, corral_registry_status *status,
                            corral_error *err)
{
    *status = CORRAL_REGISTRY_INVALID;
    bool insecure = opts && opts->insecure;
    const char *scheme = insecure ? "http" : "https";
    if (strncasecmp(text, "http://", 7) == 0) {
        if (!insecure) {
            corral_error_set(err, "insecure protocol http");
            return NULL;
        }
    } else if (strncasecmp(text, "https://", 8) == 0) {
        scheme = "https";
    }
    if (!corral_model_name_parse(text, name, err))
        return NULL;
    reg_client *c = reg_client_create(name, scheme, opts, err);
    *status = c ? CORRAL_REGISTRY_OK : CORRAL_REGISTRY_FAILED;
    return c;
}

reg_client *reg_client_clone(reg_client *c, corral_error *err)
{
    reg_client *copy = malloc(sizeof *copy);
    if (!copy) {
        corral_error_set(err, "out of memory");
        return NULL;
    }
    pthread_mutex_lock(&c->lock);
    *copy = *c;
    copy->authorization = c->authorization ? strdup(c->authorization) : NULL;
    pthread_mutex_unlock(&c->lock);
    pthread_mutex_init(&copy->lock, NULL);
    if (c->authorization && !copy->authorization) {
        reg_client_free(copy);
        corral_error_set(err, "out of memory");
        return NULL;
    }
    return copy;
}

void reg_client_free(reg_client *c)
{
    if (!c)
        return;
    pthread_mutex_destroy(&c->lock);
    free(c->authorization);
    free(c);
}

char *reg_client_url(const reg_client *c, const char *kind, const char *reference)
{
    char *url = NULL;
    if (asprintf(&url, "%s://%s/v2/%s/%s/%s", c->scheme, c->host, c->repository, kind,
                 reference) < 0)
        return NULL;
    return url;
}

bool reg_report(const reg_client *c, const char *status, const char *digest, uint64_t total,
                uint64_t completed)
{
    if (!c->opts.progress)
        return true;
    corral_registry_progress p = {status, digest, total, completed};
    return c->opts.progress(c->opts.progress_ctx, &p);
}

void reg_status_for_digest(const char *prefix, const char *digest, char *buf, size_t cap)
{
    const char *hex = strchr(digest, ':');
    hex = hex ? hex + 1 : digest;
    snprintf(buf, cap, "%s %.12s", prefix, hex);
}

void reg_response_clear(reg_response *r)
{
    free(r->body);
    free(r->location);
    free(r->www_authenticate);
    free(r->content_digest);
    *r = (reg_response){0};
}

/* ---- URLs ---- */

bool reg_url_hostname(const char *url, char *buf, size_t cap)
{
    CURLU *u = curl_url();
    char *host = NULL;
    bool ok = u && curl_url_set(u, CURLUPART_URL, url, 0) == CURLUE_OK &&
              curl_url_get(u, CURLUPART_HOST, &host, 0) == CURLUE_OK && strlen(host) < cap;
    if (ok) {
        size_t i = 0;
        for (; host[i]; i++)
            buf[i] = (char)tolower((unsigned char)host[i]);
        buf[i] = '\0';
    }
    curl_free(host);
    curl_url_cleanup(u);
    return ok;
}

char *reg_resolve_url(const char *base, const char *location, const char *query_key,
                      const char *query_value)
{
    CURLU *u = curl_url();
    char *scheme = NULL, *url = NULL, *result = NULL;
    if (!u || curl_url_set(u, CURLUPART_URL, base, 0) != CURLUE_OK ||
        curl_url_set(u, CURLUPART_URL, location, 0) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK)
        goto done;
    if (strcmp(scheme, "http") != 0 && strcmp(scheme, "https") != 0)
        goto done;
    if (query_key) {
        char *pair = NULL;
        if (asprintf(&pair, "%s=%s", query_key, query_value) < 0)
            goto done;
        CURLUcode rc = curl_url_set(u, CURLUPART_QUERY, pair, CURLU_APPENDQUERY | CURLU_URLENCODE);
        free(pair);
        if (rc != CURLUE_OK)
            goto done;
    }
    if (curl_url_get(u, CURLUPART_URL, &url, 0) == CURLUE_OK)
        result = strdup(url);
done:
    curl_free(scheme);
    curl_free(url);
    curl_url_cleanup(u);
    return result;
}

/* Does url point at the registry's own host (credentials may go there)? */
static bool is_registry_host(const reg_client *c, const char *url)
{
    char url_host[CORRAL_NAME_HOST_MAX + 1], own[CORRAL_NAME_HOST_MAX + 16];
    snprintf(own, sizeof own, "%s://%s/", c->scheme, c->host);
    char own_host[CORRAL_NAME_HOST_MAX + 1];
    return reg_url_hostname(url, url_host, sizeof url_host) &&
           reg_url_hostname(own, own_host, sizeof own_host) && strcmp(url_host, own_host) == 0;
}

/* ---- one transfer ---- */

typedef struct transfer {
    CURL *curl;
    const reg_request *req;
    reg_response *resp;
    size_t body_cap;
    size_t upload_pos; /* bytes of the body handed to curl */
    corral_error *err;
} transfer;

static size_t on_body(char *data, size_t size, size_t n, void *ctx)
{
    transfer *t = ctx;
    size_t len = size * n;
    long code = 0;
    curl_easy_getinfo(t->curl, CURLINFO_RESPONSE_CODE, &code);
    if (t->req->sink && code == 200 && t->req->require_partial) {
        corral_error_set(t->err, "%s: the registry ignored the Range header", t->req->url);
        t->resp->aborted = true;
        return 0;
    }
    if (t->req->sink && code >= 200 && code < 300) {
        if (!t->req->sink(t->req->sink_ctx, data, len)) {
            t->resp->aborted = true;
            return 0;
        }
        return len;
    }
    if (len > t->body_cap - t->resp->body_len) {
        corral_error_set(t->err, "the registry's reply is larger than %zu bytes", t->body_cap);
        t->resp->aborted = true;
        return 0;
    }
    char *grown = realloc(t->resp->body, t->resp->body_len + len + 1);
    if (!grown) {
        t->resp->aborted = true;
        return 0;
    }
    memcpy(grown + t->resp->body_len, data, len);
    t->resp->body = grown;
    t->resp->body_len += len;
    grown[t->resp->body_len] = '\0';
    return len;
}

/* value of "Name: value" into *slot (replacing an earlier one), trimmed and bounded. */
static void keep_header(char **slot, const char *value, size_t len)
{
    while (len > 0 && (*value == ' ' || *value == '\t'))
        value++, len--;
    while (len > 0 && (value[len - 1] == '\r' || value[len - 1] == '\n' ||
                       value[len - 1] == ' ' || value[len - 1] == '\t'))
        len--;
    if (len > HEADER_VALUE_MAX)
        return; /* hostile: none of the headers we read is legitimately this long */
    free(*slot);
    *slot = strndup(value, len);
}

static size_t on_header(char *data, size_t size, size_t n, void *ctx)
{
    transfer *t = ctx;
    size_t len = size * n;
    if (len >= 5 && strncmp(data, "HTTP/", 5) == 0) { /* a new reply after a redirect */
        free(t->resp->location);
        free(t->resp->www_authenticate);
        free(t->resp->content_digest);
        t->resp->location = t->resp->www_authenticate = t->resp->content_digest = NULL;
        return len;
    }
    static const struct {
        const char *name;
        size_t offset;
    } wanted[] = {
        {"location:", offsetof(reg_response, location)},
        {"docker-upload-location:", offsetof(reg_response, location)},
        {"www-authenticate:", offsetof(reg_response, www_authenticate)},
        {"docker-content-digest:", offsetof(reg_response, content_digest)},
    };
    for (size_t i = 0; i < sizeof wanted / sizeof wanted[0]; i++) {
        size_t name_len = strlen(wanted[i].name);
        if (len > name_len && strncasecmp(data, wanted[i].name, name_len) == 0)
            keep_header((char **)((char *)t->resp + wanted[i].offset), data + name_len,
                        len - name_len);
    }
    return len;
}

static size_t on_upload(char *buf, size_t size, size_t n, void *ctx)
{
    transfer *t = ctx;
    size_t room = size * n;
    const reg_request *req = t->req;
    if (req->body) {
        size_t left = req->body_len - t->upload_pos;
        size_t k = left < room ? left : room;
        memcpy(buf, req->body + t->upload_pos, k);
        t->upload_pos += k;
        return k;
    }
    uint64_t left = req->body_fd_len - t->upload_pos;
    size_t want = left < room ? (size_t)left : room;
    if (want == 0)
        return 0;
    ssize_t got;
    do
        got = pread(req->body_fd, buf, want, (off_t)t->upload_pos);
    while (got < 0 && errno == EINTR);
    if (got <= 0) {
        corral_error_set(t->err, "cannot read the blob to upload: %s",
                         got < 0 ? strerror(errno) : "unexpected end of file");
        return CURL_READFUNC_ABORT;
    }
    t->upload_pos += (size_t)got;
    return (size_t)got;
}

static int on_progress(void *ctx, curl_off_t dl_total, curl_off_t dl_now, curl_off_t ul_total,
                       curl_off_t ul_now)
{
    (void)dl_total, (void)ul_total;
    transfer *t = ctx;
    if (t->req->xfer && !t->req->xfer(t->req->xfer_ctx, (uint64_t)dl_now, (uint64_t)ul_now)) {
        t->resp->aborted = true;
        return 1;
    }
    return 0;
}

/* Append a formatted header line; false when out of memory or too long. */
static bool add_header(struct curl_slist **headers, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static bool add_header(struct curl_slist **headers, const char *fmt, ...)
{
    char line[16384]; /* holds the longest token auth.c accepts */
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof line)
        return false;
    struct curl_slist *grown = curl_slist_append(*headers, line);
    if (grown)
        *headers = grown;
    return grown != NULL;
}

bool reg_send_once(reg_client *c, const reg_request *req, reg_response *resp,
                      corral_error *err)
{
    reg_response_clear(resp);
    CURL *curl = curl_easy_init();
    if (!curl) {
        corral_error_set(err, "libcurl: cannot create a handle");
        resp->transport_failed = true;
        return false;
    }
    transfer t = {.curl = curl, .req = req, .resp = resp, .err = err,
                  .body_cap = req->max_body_bytes ? req->max_body_bytes : REG_SMALL_REPLY_MAX};
    struct curl_slist *headers = NULL;
    bool ok_headers = add_header(&headers, "User-Agent: corral/%s (x86_64 linux)", CORRAL_VERSION);
    if (req->accept)
        ok_headers &= add_header(&headers, "Accept: %s", req->accept);
    if (req->content_type)
        ok_headers &= add_header(&headers, "Content-Type: %s", req->content_type);
    if (req->has_range)
        ok_headers &= add_header(&headers, "Range: bytes=%llu-%llu",
                                 (unsigned long long)req->range_first,
                                 (unsigned long long)req->range_last);
    pthread_mutex_lock(&c->lock);
    const char *authorization = req->authorization ? req->authorization : c->authorization;
    if (authorization && is_registry_host(c, req->url))
        ok_headers &= add_header(&headers, "Authorization: %s", authorization);
    pthread_mutex_unlock(&c->lock);
    ok_headers &= add_header(&headers, "Expect:"); /* no 100-continue round trip */

    bool insecure = c->opts.insecure || strcmp(c->scheme, "http") == 0;
    curl_easy_setopt(curl, CURLOPT_URL, req->url);
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, insecure ? "http,https" : "https");
    curl_easy_setopt(curl, CURLOPT_REDIR_PROTOCOLS_STR, insecure ? "http,https" : "https");
    curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, req->follow_redirects ? 1L : 0L);
    curl_easy_setopt(curl, CURLOPT_MAXREDIRS, 10L);
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT, CONNECT_TIMEOUT_S);
    curl_easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, STALL_BYTES_PER_SECOND);
    curl_easy_setopt(curl, CURLOPT_LOW_SPEED_TIME, (long)c->opts.stall_seconds);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &t);
    curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(curl, CURLOPT_HEADERDATA, &t);
    curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(curl, CURLOPT_XFERINFODATA, &t);
    curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
    if (strcmp(req->method, "HEAD") == 0) {
        curl_easy_setopt(curl, CURLOPT_NOBODY, 1L);
    } else if (req->body || req->body_fd >= 0) {
        curl_easy_setopt(curl, CURLOPT_UPLOAD, 1L);
        curl_easy_setopt(curl, CURLOPT_READFUNCTION, on_upload);
        curl_easy_setopt(curl, CURLOPT_READDATA, &t);
        curl_easy_setopt(curl, CURLOPT_INFILESIZE_LARGE,
                         (curl_off_t)(req->body ? req->body_len : req->body_fd_len));
        curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, req->method);
    } else if (strcmp(req->method, "POST") == 0) {
        curl_easy_setopt(curl, CURLOPT_POSTFIELDS, "");
        curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, 0L);
    } else if (strcmp(req->method, "GET") != 0) {
        curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, req->method);
    }

    CURLcode rc = ok_headers ? curl_easy_perform(curl) : CURLE_OUT_OF_MEMORY;
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &resp->status);
    bool ok = rc == CURLE_OK;
    if (!ok) {
        resp->transport_failed = true;
        resp->stalled = rc == CURLE_OPERATION_TIMEDOUT;
        resp->unknown_host = rc == CURLE_COULDNT_RESOLVE_HOST;
        if (rc == CURLE_UNSUPPORTED_PROTOCOL && !insecure)
            corral_error_set(err, "%s: refusing plain http without insecure", req->url);
        else if (!resp->aborted || !err || !err->message[0])
            corral_error_set(err, "%s %s: %s", req->method, req->url,
                             resp->stalled ? "the transfer stalled" : curl_easy_strerror(rc));
    }
    curl_slist_free_all(headers);
    curl_easy_cleanup(curl);
    return ok;
}

bool reg_perform(reg_client *c, const reg_request *req, reg_response *resp,
                 corral_registry_status *status, corral_error *err)
{
    *status = CORRAL_REGISTRY_FAILED;
    if (err)
        err->message[0] = '\0';
    if (!reg_send_once(c, req, resp, err))
        return false;
    if (resp->status != 401) {
        *status = CORRAL_REGISTRY_OK;
        return true;
    }
    if (!resp->www_authenticate) {
        corral_error_set(err, "%s: unauthorized, and the registry sent no challenge", req->url);
        *status = CORRAL_REGISTRY_UNAUTHORIZED;
        return false;
    }
    char *challenge = strdup(resp->www_authenticate);
    if (!challenge) {
        corral_error_set(err, "out of memory");
        return false;
    }
    *status = reg_auth_answer(c, challenge, err);
    free(challenge);
    if (*status != CORRAL_REGISTRY_OK)
        return false;
    *status = CORRAL_REGISTRY_FAILED;
    if (!reg_send_once(c, req, resp, err))
        return false;
    if (resp->status == 401) {
        corral_error_set(err, "unauthorized: %s refused the credentials for %s", c->host,
                         c->repository);
        *status = CORRAL_REGISTRY_UNAUTHORIZED;
        return false;
    }
    *status = CORRAL_REGISTRY_OK;
    return true;
}

static bool is_transient(long status)
{
    return status >= 500 || status == 408 || status == 429;
}

bool reg_perform_retry(reg_client *c, const reg_request *req, reg_response *resp,
                       corral_registry_status *status, corral_error *err)
{
    for (unsigned attempt = 1;; attempt++) {
        bool ok = reg_perform(c, req, resp, status, err);
        bool retry = ok ? is_transient(resp->status)
                        : resp->transport_failed && !resp->aborted && !resp->unknown_host;
        if (!retry || attempt >= c->opts.max_retries) {
            if (ok && is_transient(resp->status)) {
                reg_describe_failure(resp, req->url, err);
                *status = CORRAL_REGISTRY_FAILED;
                return false;
            }
            return ok;
        }
        reg_backoff(c, attempt);
    }
}

void reg_backoff(const reg_client *c, unsigned attempt)
{
    uint64_t ms = c->opts.backoff_ms;
    for (unsigned i = 1; i < attempt && ms < BACKOFF_CAP_MS; i++)
        ms *= 2;
    if (ms > BACKOFF_CAP_MS)
        ms = BACKOFF_CAP_MS;
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

corral_registry_status reg_status_of_reply(const reg_response *resp)
{
    if (resp->status == 404)
        return CORRAL_REGISTRY_NOT_FOUND;
    if (resp->status == 401 || resp->status == 403)
        return CORRAL_REGISTRY_UNAUTHORIZED;
    return CORRAL_REGISTRY_FAILED;
}

/* The registry's own words: {"errors":[{"code":"…","message":"…"}]}, printable only. */
void reg_describe_failure(const reg_response *resp, const char *what, corral_error *err)
{
    char said[256] = "";
    json_t *root = resp->body ? json_loadb(resp->body, resp->body_len, 0, NULL) : NULL;
    json_t *first = json_array_get(json_object_get(root, "errors"), 0);
    const char *code = json_string_value(json_object_get(first, "code"));
    const char *message = json_string_value(json_object_get(first, "message"));
    if (message)
        snprintf(said, sizeof said, "%s%s%s", code ? code : "", code ? ": " : "", message);
    for (char *p = said; *p; p++)
        if (!isprint((unsigned char)*p))
            *p = '?';
    json_decref(root);
    if (said[0])
        corral_error_set(err, "%s: %s (HTTP %ld)", what, said, resp->status);
    else
        corral_error_set(err, "%s: the registry answered HTTP %ld", what, resp->status);
}

/*
 * libFuzzer target for everything a request body goes through before a model runner is
 * needed: the real HTTP layer of `corral serve` in this process, every route table mounted,
 * on a loopback port, over a store holding a few models (plain, a chat template using every
 * field a request can fill, a GGUF with a Jinja chat template, an embedding model). The
 * input's first byte picks the endpoint ('a' the first), the rest is the body. The scheduler's
 * queue is zero long, so a request that passes every check is answered 503 instead of
 * starting a runner; everything before that is what is fuzzed: the JSON, the OpenAI,
 * Anthropic and Responses translations, option types and the model's parameters under them,
 * keep_alive, format and its grammar, think and tools against the model's capabilities, and
 * the prompt rendered through the model's template or the request's own (which
 * `_debug_render_only` answers without a runner). A crash, sanitizer report, leak or hang is
 * a bug, and so is a connection closed without an answer, a 500 (the request's fault is a
 * 4xx), or a JSON reply that is not JSON.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <ftw.h>
#include <jansson.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "server/models/create.h"
#include "server/sched/scheduler.h"
#include "server/server.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const endpoints[] = {
    "/api/generate", "/api/chat",      "/api/embed",          "/api/embeddings",
    "/api/show",     "/v1/completions", "/v1/chat/completions", "/v1/embeddings",
    "/v1/messages",  "/v1/responses",
};
#define N_ENDPOINTS (sizeof endpoints / sizeof endpoints[0])

/* Reads every field a request can reach: system, tools, each message's parts, the prompt,
 * fill-in-the-middle and thinking; its tags make the model a thinking and tool-calling one. */
static const char chat_template[] =
    "{{- if .System }}<|system|>{{ .System }}{{ end }}"
    "{{- if .Tools }}<|tools|>{{ range .Tools }}{{ .Function.Name }}: {{ .Function.Description }} "
    "{{ .Function.Parameters }}{{ end }}{{ end }}"
    "{{- range $i, $m := .Messages }}"
    "{{- if eq .Role \"user\" }}<|user|>{{ .Content }}"
    "{{- else if eq .Role \"tool\" }}<|tool|>{{ .ToolName }}: {{ .Content }}"
    "{{- else if eq .Role \"assistant\" }}<|assistant|>"
    "{{- if .Thinking }}<think>{{ .Thinking }}</think>{{ end }}{{ .Content }}"
    "{{- range .ToolCalls }}<tool_call>{\"name\": \"{{ .Function.Name }}\", \"arguments\": "
    "{{ .Function.Arguments }}}</tool_call>{{ end }}"
    "{{- end }}{{ end }}"
    "{{- if .Suffix }}<|prefix|>{{ .Prompt }}<|suffix|>{{ .Suffix }}<|middle|>"
    "{{- else }}{{ if .Prompt }}<|user|>{{ .Prompt }}{{ end }}<|assistant|>"
    "{{- if .Think }}<think>{{ end }}{{ end }}";

static char store_root[4096];
static server srv;
static http_route *routes;
static http_server *http;
static unsigned port;

static void die(const char *what, const char *detail)
{
    fprintf(stderr, "fuzz_options setup: %s: %s\n", what, detail);
    abort();
}

static int remove_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)st;
    (void)type;
    (void)ftw;
    return remove(path);
}

static void stop_server(void)
{
    http_server_stop(http);
    scheduler_free(srv.sched);
    corral_store_close(srv.store);
    free(routes);
    nftw(store_root, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* A fixture into the store as a blob; its digest in digest. */
static void add_blob(const char *fixture, char digest[CORRAL_DIGEST_BUF])
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", CORRAL_FIXTURES_DIR, fixture);
    FILE *f = fopen(path, "rb");
    if (!f)
        die(path, strerror(errno));
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    rewind(f);
    char *bytes = malloc((size_t)len);
    if (!bytes || fread(bytes, 1, (size_t)len, f) != (size_t)len)
        die(path, "cannot read");
    fclose(f);
    corral_error err;
    if (corral_store_blob_write(srv.store, bytes, (size_t)len, digest, &err) != CORRAL_STORE_OK)
        die(path, err.message);
    free(bytes);
}

static void create(const char *request_json)
{
    json_error_t jerr;
    json_t *request = json_loads(request_json, 0, &jerr);
    json_t *progress = json_array();
    corral_error err;
    if (!request || !progress)
        die("create request", jerr.text);
    if (create_model(srv.store, request, NULL, progress, &err) != 200)
        die(request_json, err.message);
    json_decref(request);
    json_decref(progress);
}

static void create_models(void)
{
    char stories[CORRAL_DIGEST_BUF], jinja[CORRAL_DIGEST_BUF], bert[CORRAL_DIGEST_BUF];
    add_blob("stories260K.gguf", stories);
    add_blob("vocab-llama3-bpe.gguf", jinja);
    add_blob("arch/bert.gguf", bert);
    char request[8192];
    snprintf(request, sizeof request, "{\"model\": \"plain\", \"files\": {\"m.gguf\": \"%s\"}}",
             stories);
    create(request);
    snprintf(request, sizeof request, "{\"model\": \"jinja\", \"files\": {\"m.gguf\": \"%s\"}}",
             jinja);
    create(request);
    snprintf(request, sizeof request, "{\"model\": \"bert\", \"files\": {\"m.gguf\": \"%s\"}}",
             bert);
    create(request);
    json_t *chat = json_pack(
        "{s:s, s:s, s:s, s:s, s:{s:f, s:i, s:[s,s]}, s:[{s:s,s:s},{s:s,s:s}]}", "model", "chat",
        "from", "plain", "template", chat_template, "system", "You are a tester.", "parameters",
        "temperature", 0.5, "num_ctx", 512, "stop", "<|user|>", "</s>", "messages", "role",
        "user", "content", "hello", "role", "assistant", "content", "hi");
    char *text = json_dumps(chat, 0);
    if (!text)
        die("chat model", "out of memory");
    create(text);
    free(text);
    json_decref(chat);
}

static unsigned free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof addr;
    if (fd < 0 || bind(fd, (struct sockaddr *)&addr, sizeof addr) != 0 ||
        getsockname(fd, (struct sockaddr *)&addr, &len) != 0)
        die("free port", strerror(errno));
    close(fd);
    return ntohs(addr.sin_port);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    signal(SIGPIPE, SIG_IGN);
    const char *tmp = getenv("TMPDIR");
    snprintf(store_root, sizeof store_root, "%s/corral-fuzz-store-XXXXXX",
             tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(store_root))
        die("mkdtemp", strerror(errno));
    corral_error err;
    server_config *c = &srv.config;
    snprintf(c->host, sizeof c->host, "127.0.0.1");
    snprintf(c->models_root, sizeof c->models_root, "%s", store_root);
    c->port = port = free_port();
    c->max_body_bytes = 1u << 20;
    c->keep_alive_ns = 300ll * 1000000000;
    c->num_parallel = 1;
    c->max_loaded_models = 1;
    c->max_queue = 0; /* every request that would reach a runner is answered 503 */
    c->default_num_ctx = 2048;
    c->kv_type = CORRAL_KV_F16;
    if (!(srv.store = corral_store_open(store_root, &err)))
        die("store", err.message);
    create_models();
    if (!(srv.sched = scheduler_create(c, &err)))
        die("scheduler", err.message);
    const route_table *tables[] = {&routes_basic, &routes_generate, &routes_models,
                                   &routes_registry, &routes_openai, &routes_anthropic,
                                   &routes_responses};
    size_t n_routes = 0;
    for (size_t i = 0; i < sizeof tables / sizeof tables[0]; i++)
        n_routes += tables[i]->n_routes;
    if (!(routes = malloc(n_routes * sizeof *routes)))
        die("routes", "out of memory");
    n_routes = 0;
    for (size_t i = 0; i < sizeof tables / sizeof tables[0]; i++)
        for (size_t j = 0; j < tables[i]->n_routes; j++)
            routes[n_routes++] = tables[i]->routes[j];
    http_config hc = {.host = c->host, .port = c->port, .max_body_bytes = c->max_body_bytes};
    if (!(http = http_server_start(&hc, routes, n_routes, &srv, &err)))
        die("http", err.message);
    atexit(stop_server);
    return 0;
}

static bool send_all(int fd, const char *data, size_t len)
{
    while (len > 0) {
        ssize_t n = send(fd, data, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return false;
        data += n;
        len -= (size_t)n;
    }
    return true;
}

/* POST body to path; the whole answer (headers and body) into *reply, NUL-terminated. */
static size_t exchange(const char *path, const uint8_t *body, size_t body_len, char **reply)
{
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                               .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    struct timeval timeout = {.tv_sec = 30};
    int fd;
    for (;;) { /* libFuzzer's timer may interrupt a connect: start again */
        fd = socket(AF_INET, SOCK_STREAM, 0);
        if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout) != 0)
            die("socket", strerror(errno));
        if (connect(fd, (struct sockaddr *)&addr, sizeof addr) == 0)
            break;
        if (errno != EINTR)
            die("connect", strerror(errno));
        close(fd);
    }
    char head[512];
    int n = snprintf(head, sizeof head,
                     "POST %s HTTP/1.1\r\nHost: 127.0.0.1:%u\r\nContent-Type: application/json"
                     "\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n",
                     path, port, body_len);
    if (!send_all(fd, head, (size_t)n) || !send_all(fd, (const char *)body, body_len))
        die("send", strerror(errno));
    size_t len = 0, cap = 4096;
    char *buf = malloc(cap);
    for (;;) {
        if (!buf)
            die("reply", "out of memory");
        if (len + 1 == cap)
            buf = realloc(buf, cap *= 2);
        if (!buf)
            die("reply", "out of memory");
        ssize_t got = recv(fd, buf + len, cap - len - 1, 0);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            fprintf(stderr, "no complete answer from %s: %s\n", path, strerror(errno));
            abort();
        }
        if (got == 0)
            break;
        len += (size_t)got;
    }
    close(fd);
    buf[len] = '\0';
    *reply = buf;
    return len;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0 || size > 65536)
        return 0;
    const char *path = endpoints[(uint8_t)(data[0] - 'a') % N_ENDPOINTS];
    char *reply;
    size_t len = exchange(path, data + 1, size - 1, &reply);
    unsigned status = 0;
    char *body = strstr(reply, "\r\n\r\n");
    if (sscanf(reply, "HTTP/1.1 %u", &status) != 1 || !body) {
        fprintf(stderr, "%s: not an HTTP answer (%zu bytes): %s\n", path, len, reply);
        abort();
    }
    body += 4;
    if (status >= 500 && status != 503) {
        fprintf(stderr, "%s answered %u: %s\n", path, status, body);
        abort();
    }
    /* the answers before a runner are whole bodies; a JSON one must parse */
    char *type = strcasestr(reply, "\r\nContent-Type: application/json");
    if (type && type < body && !strcasestr(reply, "\r\nTransfer-Encoding: chunked")) {
        json_error_t jerr;
        json_t *parsed = json_loads(body, JSON_DECODE_ANY, &jerr);
        if (!parsed) {
            fprintf(stderr, "%s answered %u with broken JSON (%s): %s\n", path, status,
                    jerr.text, body);
            abort();
        }
        json_decref(parsed);
    }
    free(reply);
    return 0;
}

/*
 * `corral serve`: reads the configuration from the environment, opens and tidies the model
 * store, loads the API keys, starts the scheduler and the HTTP server with every route
 * table, then waits for signals: SIGHUP reloads the API key file, SIGINT/SIGTERM shut down
 * in order (HTTP first, then every runner).
 */
#include "server.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "server/gpu_log.h"
#include "server/metrics.h"
#include "server/sched/scheduler.h"
#include "util/checked.h"

#define DEFAULT_PORT 11434
#define SERVER_MAX_PARALLEL 64 /* the engine's most sequences in one context */
#define STARTUP_GC_GRACE_S 3600 /* as ollama: blobs of an unfinished create survive a restart */

/*
 * CORRAL_<suffix>, else OLLAMA_<suffix>; quotes and spaces trimmed. NULL when unset/empty.
 * *prefix (when asked for) says which of the two was read, for error messages.
 */
static const char *env(const char *suffix, char *buf, size_t size, const char **prefix)
{
    const char *prefixes[] = {"CORRAL_", "OLLAMA_"};
    for (size_t i = 0; i < 2; i++) {
        char name[64];
        snprintf(name, sizeof name, "%s%s", prefixes[i], suffix);
        const char *v = getenv(name);
        if (!v)
            continue;
        while (isspace((unsigned char)*v) || *v == '"' || *v == '\'')
            v++;
        snprintf(buf, size, "%s", v);
        size_t n = strlen(buf);
        while (n && (isspace((unsigned char)buf[n - 1]) || buf[n - 1] == '"' || buf[n - 1] == '\''))
            buf[--n] = '\0';
        if (!n)
            continue;
        if (prefix)
            *prefix = prefixes[i];
        return buf;
    }
    return NULL;
}

/* CORRAL_<suffix>, else OLLAMA_<suffix>, as set (untrimmed: a key may hold any printable
 * character); NULL when unset or empty. */
static const char *env_set(const char *suffix)
{
    const char *prefixes[] = {"CORRAL_", "OLLAMA_"};
    for (size_t i = 0; i < 2; i++) {
        char name[64];
        snprintf(name, sizeof name, "%s%s", prefixes[i], suffix);
        const char *v = getenv(name);
        if (v && *v)
            return v;
    }
    return NULL;
}

/* Longest keep-alive taken literally: 2^62 ns, some 146 years; a longer one is forever. Any
 * clock reading plus this stays within 64 bits for a century to come. */
#define DURATION_FOREVER_NS 4611686018427387904.0

int64_t server_duration_ns(double ns)
{
    return ns < 0 || ns >= DURATION_FOREVER_NS ? -1 : (int64_t)ns;
}

bool server_parse_duration(const char *text, int64_t *ns)
{
    char *end;
    errno = 0;
    double seconds = strtod(text, &end);
    if (end != text && *end == '\0' && (errno == 0 || errno == ERANGE)) { /* seconds */
        if (isnan(seconds))
            return false;
        *ns = server_duration_ns(seconds * 1e9);
        return true;
    }
    /* Go duration: [-]{number unit}+, units ns us ms s m h */
    const char *p = text;
    bool negative = *p == '-';
    p += (*p == '-' || *p == '+');
    double total = 0;
    if (!*p)
        return false;
    while (*p) {
        if (!isdigit((unsigned char)*p) && *p != '.') /* no sign, "inf" or "nan" inside */
            return false;
        double v = strtod(p, &end);
        if (end == p)
            return false;
        p = end;
        static const struct { const char *unit; double scale; } units[] = {
            {"ns", 1}, {"us", 1e3}, {"µs", 1e3}, {"ms", 1e6}, {"s", 1e9}, {"m", 60e9}, {"h", 3600e9},
        };
        size_t u = 0;
        while (u < sizeof units / sizeof units[0] && strncmp(p, units[u].unit, strlen(units[u].unit)) != 0)
            u++;
        if (u == sizeof units / sizeof units[0])
            return false;
        total += v * units[u].scale;
        p += strlen(units[u].unit);
    }
    *ns = negative ? (total > 0 ? -1 : 0) : server_duration_ns(total);
    return true;
}

/* A setting taken otherwise than written, added to c->warning ("; " between) to log at start. */
static void add_warning(server_config *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void add_warning(server_config *c, const char *fmt, ...)
{
    size_t used = strlen(c->warning);
    if (used && used + 2 < sizeof c->warning) {
        memcpy(c->warning + used, "; ", 3);
        used += 2;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->warning + used, sizeof c->warning - used, fmt, ap);
    va_end(ap);
}

/*
 * CORRAL_<suffix> as an integer in [min, max] into *out (unset: *out stays). zero_is_default:
 * 0 also leaves *out (ollama's "auto" for these), else 0 must be in the range. clamp: a value
 * above max is taken as max, with a warning in c->warning, because ollama takes any count
 * there and a configuration written for it must still start. Anything else stops the server
 * with a message naming the variable: a typo must not run with a setting nobody chose.
 */
static bool env_u32(server_config *c, const char *suffix, uint32_t min, uint32_t max,
                    bool zero_is_default, bool clamp, uint32_t *out, corral_error *err)
{
    char buf[64];
    const char *prefix;
    if (!env(suffix, buf, sizeof buf, &prefix))
        return true;
    char *end;
    errno = 0;
    long long v = strtoll(buf, &end, 10);
    bool number = end != buf && !*end && errno == 0;
    if (number && v == 0 && zero_is_default)
        return true;
    if (number && clamp && v > (long long)max) {
        add_warning(c, "%s%s=%s is above %u, the most Corral runs: %u", prefix, suffix, buf,
                    max, max);
        v = max;
    }
    if (!number || v < (long long)min || v > (long long)max) {
        corral_error_set(err, "%s%s must be an integer from %u to %u%s, got '%s'", prefix, suffix,
                         min, max, zero_is_default ? " (0: the default)" : "", buf);
        return false;
    }
    *out = (uint32_t)v;
    return true;
}

/* How env_duration takes zero and negative durations. */
typedef enum duration_kind {
    DURATION_POSITIVE,         /* only above zero */
    DURATION_NEGATIVE_FOREVER, /* negative: forever; zero: zero */
    DURATION_NONPOSITIVE_NONE, /* zero or negative: no limit (-1), as ollama's load timeout */
} duration_kind;

/* CORRAL_<suffix> as a duration into *out (unset: *out stays); -1 stands for forever. */
static bool env_duration(const char *suffix, duration_kind kind, int64_t *out, corral_error *err)
{
    char buf[64];
    const char *prefix;
    if (!env(suffix, buf, sizeof buf, &prefix))
        return true;
    int64_t ns;
    if (!server_parse_duration(buf, &ns) || (kind == DURATION_POSITIVE && ns <= 0)) {
        corral_error_set(err, "%s%s must be a %sduration such as 5m, 30s or 1h, got '%s'", prefix,
                         suffix, kind == DURATION_POSITIVE ? "positive " : "", buf);
        return false;
    }
    *out = kind == DURATION_NONPOSITIVE_NONE && ns == 0 ? -1 : ns;
    return true;
}

static bool env_kv_type(corral_kv_type *out, corral_error *err)
{
    char buf[64];
    const char *prefix;
    if (!env("KV_CACHE_TYPE", buf, sizeof buf, &prefix) || corral_kv_type_parse(buf, out))
        return true;
    corral_error_set(err, "%sKV_CACHE_TYPE must be f16, q8_0, q4_0 or f32, got '%s'", prefix, buf);
    return false;
}

/* Go's strconv.ParseBool, the spellings ollama reads: 1 t T TRUE true True and the false ones.
 * *known is false when text is none of them. */
static bool go_parse_bool(const char *text, bool *known)
{
    static const char *const on[] = {"1", "t", "T", "TRUE", "true", "True"};
    static const char *const off[] = {"0", "f", "F", "FALSE", "false", "False"};
    *known = true;
    for (size_t i = 0; i < sizeof on / sizeof on[0]; i++) {
        if (strcmp(text, on[i]) == 0)
            return true;
        if (strcmp(text, off[i]) == 0)
            return false;
    }
    *known = false;
    return false;
}

/*
 * An ollama switch such as NOPRUNE: off when 0, false (any case), no or off; on for any other
 * value, as ollama takes a value it cannot read as true, so a configuration written for it
 * never stops this server.
 */
static void env_switch(const char *suffix, bool *out)
{
    char buf[64];
    if (!env(suffix, buf, sizeof buf, NULL))
        return;
    bool known;
    bool on = go_parse_bool(buf, &known);
    *out = known ? on
                 : !(strcasecmp(buf, "false") == 0 || strcasecmp(buf, "no") == 0 ||
                     strcasecmp(buf, "off") == 0);
}

/*
 * DEBUG: a boolean (1, t, true, yes, on, or their false forms, any case) or ollama's level,
 * where above 0 is debug (2 is ollama's trace, which Corral logs as debug) and 0 or below is
 * the normal log. Other text stops the server, naming the variable.
 */
static bool env_debug(bool *out, corral_error *err)
{
    char buf[64];
    const char *prefix;
    if (!env("DEBUG", buf, sizeof buf, &prefix))
        return true;
    static const char *const on[] = {"1", "t", "true", "yes", "on"};
    static const char *const off[] = {"0", "f", "false", "no", "off"};
    for (size_t i = 0; i < sizeof on / sizeof on[0]; i++) {
        if (strcasecmp(buf, on[i]) == 0 || strcasecmp(buf, off[i]) == 0) {
            *out = strcasecmp(buf, on[i]) == 0;
            return true;
        }
    }
    char *end;
    errno = 0;
    long long level = strtoll(buf, &end, 10);
    if (end == buf || *end || errno) {
        corral_error_set(err, "%sDEBUG must be 1, true, 0, false or a level such as 2, got '%s'",
                         prefix, buf);
        return false;
    }
    *out = level > 0;
    return true;
}

static bool env_log_format(log_format *out, corral_error *err)
{
    char buf[64];
    const char *prefix;
    if (!env("LOG_FORMAT", buf, sizeof buf, &prefix) || log_parse_format(buf, out))
        return true;
    corral_error_set(err, "%sLOG_FORMAT must be text or json, got '%s'", prefix, buf);
    return false;
}

/*
 * [scheme://]host[:port][/path] into host and port, as ollama reads OLLAMA_HOST: the port
 * defaults to 80 after http://, 443 after https://, else 11434; an IPv6 address may stand in
 * brackets or, without a port, bare; a path is the proxy's and ignored; an empty host (":8080")
 * listens on every interface. A port that is not a number from 0 to 65535 is the default one,
 * with a warning, as in ollama; 0 lets the system choose. variable names the setting.
 */
static bool parse_host(const char *variable, const char *text, server_config *c,
                       corral_error *err)
{
    const char *p = strstr(text, "://");
    unsigned default_port = DEFAULT_PORT;
    if (p) {
        size_t scheme = (size_t)(p - text);
        if (scheme == 4 && strncmp(text, "http", 4) == 0)
            default_port = 80;
        else if (scheme == 5 && strncmp(text, "https", 5) == 0)
            default_port = 443;
        p += 3;
    } else {
        p = text;
    }
    char host[256];
    size_t len = strcspn(p, "/");
    if (len >= sizeof host) {
        corral_error_set(err, "%s '%.40s...' is too long", variable, text);
        return false;
    }
    memcpy(host, p, len);
    host[len] = '\0';
    const char *name = host, *port_text = NULL;
    char *colon = strrchr(host, ':');
    if (host[0] == '[') { /* [v6] or [v6]:port */
        char *close = strchr(host, ']');
        if (!close || (close[1] && close[1] != ':')) {
            corral_error_set(err, "invalid address in %s '%s'", variable, text);
            return false;
        }
        *close = '\0';
        name = host + 1;
        port_text = close[1] == ':' ? close + 2 : NULL;
    } else if (colon && colon == strchr(host, ':')) { /* one colon: host:port */
        *colon = '\0';
        port_text = colon + 1;
    } /* else no colon, or a bare IPv6 address: no port */
    c->port = default_port;
    if (port_text) {
        char *end;
        errno = 0;
        long v = strtol(port_text, &end, 10);
        if (end == port_text || *end || errno || v < 0 || v > 65535)
            add_warning(c, "invalid port '%s' in %s, using the default %u", port_text, variable,
                        default_port);
        else
            c->port = (unsigned)v;
    }
    if (!port_text && !*name)
        name = "127.0.0.1"; /* nothing given */
    else if (!*name)
        name = "0.0.0.0"; /* ":port": every interface */
    else if (strcmp(name, "localhost") == 0)
        name = "127.0.0.1";
    snprintf(c->host, sizeof c->host, "%s", name);
    return true;
}

bool server_config_from_env(server_config *c, corral_error *err)
{
    memset(c, 0, sizeof *c);
    snprintf(c->host, sizeof c->host, "127.0.0.1");
    c->port = DEFAULT_PORT;
    c->max_body_bytes = 64u << 20;
    c->keep_alive_ns = 300ll * 1000000000;
    c->num_parallel = 4;
    c->max_loaded_models = 3;
    c->max_queue = 512;
    c->default_num_ctx = 4096;
    c->kv_type = CORRAL_KV_F16;
    c->runner_timeout_ns = 30ll * 1000000000;
    c->load_timeout_ns = 300ll * 1000000000;
    c->sweep_interval_ns = 600ll * 1000000000;
    c->prompt_lookup = 8;
    char buf[4096], variable[64];
    const char *prefix;
    if (env("HOST", buf, sizeof buf, &prefix)) {
        snprintf(variable, sizeof variable, "%sHOST", prefix);
        if (!parse_host(variable, buf, c, err))
            return false;
    }
    uint32_t max_body_mb = (uint32_t)(c->max_body_bytes >> 20);
    if (!env_duration("KEEP_ALIVE", DURATION_NEGATIVE_FOREVER, &c->keep_alive_ns, err) ||
        !env_duration("RUNNER_TIMEOUT", DURATION_POSITIVE, &c->runner_timeout_ns, err) ||
        !env_duration("SWEEP_INTERVAL", DURATION_POSITIVE, &c->sweep_interval_ns, err) ||
        !env_u32(c, "NUM_PARALLEL", 1, SERVER_MAX_PARALLEL, true, true, &c->num_parallel, err) ||
        !env_u32(c, "MAX_LOADED_MODELS", 1, 1024, true, true, &c->max_loaded_models, err) ||
        !env_u32(c, "MAX_QUEUE", 1, 1u << 20, false, true, &c->max_queue, err) ||
        !env_u32(c, "CONTEXT_LENGTH", 1, 1u << 24, true, true, &c->default_num_ctx, err) ||
        !env_u32(c, "MAX_REQUEST_MB", 1, 1u << 14, false, false, &max_body_mb, err) ||
        !env_kv_type(&c->kv_type, err) ||
        !env_u32(c, "MAX_CONNECTIONS", 1, 1u << 24, true, false, &c->max_connections, err) ||
        !env_log_format(&c->log_format, err) || !env_debug(&c->debug, err) ||
        !env_u32(c, "MAX_TRANSFER_STREAMS", 1, 64, true, true, &c->max_transfer_streams, err) ||
        !env_u32(c, "PROMPT_LOOKUP", 0, 16, false, false, &c->prompt_lookup, err) ||
        !env_duration("LOAD_TIMEOUT", DURATION_NONPOSITIVE_NONE, &c->load_timeout_ns, err))
        return false;
    env_switch("NOPRUNE", &c->no_prune);
    c->max_body_bytes = (size_t)max_body_mb << 20;
    if (env("ORIGINS", buf, sizeof buf, NULL))
        snprintf(c->origins, sizeof c->origins, "%s", buf);
    if (!env("MODELS", buf, sizeof buf, NULL)) /* unset: the store's own default */
        return corral_store_default_root(c->models_root, sizeof c->models_root, err);
    if (strlen(buf) >= sizeof c->models_root - 1) {
        corral_error_set(err, "the model store path is longer than %zu bytes",
                         sizeof c->models_root - 2);
        return false;
    }
    snprintf(c->models_root, sizeof c->models_root, "%s", buf);
    return true;
}

/*
 * The sweeper: while the server runs, the temp and partial files of pulls and creates that
 * were interrupted (a client gone, a process killed) are removed once nothing has written
 * them for STARTUP_GC_GRACE_S, every sweep_interval, not only at the next start. A partial
 * download a pull still holds locked is left to it.
 */
typedef struct sweeper {
    corral_store *store;
    int64_t interval_ns;
    pthread_mutex_t lock;
    pthread_cond_t stop_changed;
    bool stop;
    pthread_t thread;
} sweeper;

static void *sweeper_main(void *arg)
{
    sweeper *sw = arg;
    pthread_mutex_lock(&sw->lock);
    while (!sw->stop) {
        struct timespec deadline;
        clock_gettime(CLOCK_MONOTONIC, &deadline);
        int64_t at = saturating_add_i64((int64_t)deadline.tv_nsec, sw->interval_ns);
        deadline.tv_sec += (time_t)(at / 1000000000);
        deadline.tv_nsec = (long)(at % 1000000000);
        if (pthread_cond_timedwait(&sw->stop_changed, &sw->lock, &deadline) != ETIMEDOUT)
            continue;
        pthread_mutex_unlock(&sw->lock);
        size_t n_removed = 0;
        corral_error err;
        if (corral_store_prune_partials(sw->store, STARTUP_GC_GRACE_S, &n_removed, &err) !=
            CORRAL_STORE_OK)
            log_printf(LOG_WARN, "store housekeeping: %s", err.message);
        else if (n_removed)
            log_printf(LOG_INFO, "removed %zu leftover temp or partial files", n_removed);
        pthread_mutex_lock(&sw->lock);
    }
    pthread_mutex_unlock(&sw->lock);
    return NULL;
}

static bool sweeper_start(sweeper *sw, corral_store *store, int64_t interval_ns)
{
    *sw = (sweeper){.store = store, .interval_ns = interval_ns};
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_mutex_init(&sw->lock, NULL);
    pthread_cond_init(&sw->stop_changed, &attr);
    pthread_condattr_destroy(&attr);
    if (pthread_create(&sw->thread, NULL, sweeper_main, sw) == 0)
        return true;
    pthread_cond_destroy(&sw->stop_changed);
    pthread_mutex_destroy(&sw->lock);
    sw->store = NULL;
    return false;
}

static void sweeper_stop(sweeper *sw)
{
    if (!sw->store)
        return;
    pthread_mutex_lock(&sw->lock);
    sw->stop = true;
    pthread_cond_signal(&sw->stop_changed);
    pthread_mutex_unlock(&sw->lock);
    pthread_join(sw->thread, NULL);
    pthread_cond_destroy(&sw->stop_changed);
    pthread_mutex_destroy(&sw->lock);
}

static http_route *mount_routes(size_t *n)
{
    const route_table *tables[] = {&routes_basic, &routes_generate, &routes_models,
                                   &routes_registry, &routes_openai, &routes_anthropic,
                                   &routes_responses, &routes_transcription, &routes_ui};
    size_t total = 0;
    for (size_t i = 0; i < sizeof tables / sizeof tables[0]; i++)
        total += tables[i]->n_routes;
    http_route *all = malloc(total * sizeof *all);
    size_t k = 0;
    for (size_t i = 0; all && i < sizeof tables / sizeof tables[0]; i++)
        for (size_t j = 0; j < tables[i]->n_routes; j++)
            all[k++] = tables[i]->routes[j];
    *n = k;
    return all;
}

/*
 * One log line and the metrics per request. Prompt text never goes here: a model, counts and
 * the path (whose query string libmicrohttpd has taken off) are all a request says of itself.
 */
static void on_request_done(void *ctx, const http_request_done *done)
{
    (void)ctx;
    metrics_observe_request(done->method, done->route, done->status, done->duration_ns);
    log_field fields[10];
    size_t n = 0;
    fields[n++] = LOG_STR("method", done->method);
    fields[n++] = LOG_STR("path", done->path);
    fields[n++] = LOG_INT("status", done->status);
    if (done->facts->model[0])
        fields[n++] = LOG_STR("model", done->facts->model);
    if (done->facts->prompt_tokens >= 0)
        fields[n++] = LOG_INT("prompt_tokens", done->facts->prompt_tokens);
    if (done->facts->generated_tokens >= 0)
        fields[n++] = LOG_INT("generated_tokens", done->facts->generated_tokens);
    if (done->facts->draft_tokens > 0) { /* speculative decoding's yield */
        fields[n++] = LOG_INT("draft_tokens", done->facts->draft_tokens);
        fields[n++] = LOG_INT("draft_accepted", done->facts->draft_accepted);
    }
    fields[n++] = LOG_NUM("duration_ms", (double)done->duration_ns / 1e6);
    if (!done->completed)
        fields[n++] = LOG_STR("outcome", "aborted");
    log_write(LOG_INFO, "request", fields, n);
}

int server_main(int argc, char **argv)
{
    if (argc > 1) {
        fprintf(stderr, "Usage: corral serve\n  Configured by CORRAL_HOST, CORRAL_MODELS, "
                        "CORRAL_KEEP_ALIVE, CORRAL_NUM_PARALLEL, ... (OLLAMA_* work too)\n");
        return strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ? 0 : 2;
    }
    /* Signals go to this thread only (sigwait below); every thread started later inherits. */
    sigset_t stop_signals;
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGINT);
    sigaddset(&stop_signals, SIGTERM);
    sigaddset(&stop_signals, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &stop_signals, NULL);
    signal(SIGPIPE, SIG_IGN);

    server srv = {0};
    corral_error err;
    size_t n_routes = 0;
    http_route *routes = NULL;
    http_server *http = NULL;
    api_keys *keys = NULL;
    sweeper sw = {0};
    int status = 1;
    if (!server_config_from_env(&srv.config, &err) ||
        !(srv.store = corral_store_open(srv.config.models_root, &err))) {
        fprintf(stderr, "corral serve: %s\n", err.message);
        return 1;
    }
    log_configure(srv.config.log_format, srv.config.debug);
    if (srv.config.warning[0])
        log_printf(LOG_WARN, "%s", srv.config.warning);
    size_t n_removed = 0;
    if (corral_store_prune_partials(srv.store, STARTUP_GC_GRACE_S, &n_removed, &err) != CORRAL_STORE_OK ||
        (!srv.config.no_prune &&
         corral_store_gc(srv.store, STARTUP_GC_GRACE_S, &n_removed, &err) != CORRAL_STORE_OK))
        log_printf(LOG_WARN, "store housekeeping: %s", err.message);
    if (!(keys = api_keys_create(env_set("API_KEYS"), env_set("API_KEY_FILE"), &err))) {
        log_printf(LOG_ERROR, "%s", err.message);
        goto done;
    }
    if (!(srv.sched = scheduler_create(&srv.config, &err)) || !(routes = mount_routes(&n_routes))) {
        log_printf(LOG_ERROR, "%s", srv.sched ? "out of memory" : err.message);
        goto done;
    }
    if (!sweeper_start(&sw, srv.store, srv.config.sweep_interval_ns)) {
        log_write(LOG_ERROR, "cannot start the housekeeping thread", NULL, 0);
        goto done;
    }
    http_config hc = {.host = srv.config.host, .port = srv.config.port,
                      .max_body_bytes = srv.config.max_body_bytes,
                      .extra_origins = srv.config.origins[0] ? srv.config.origins : NULL,
                      .keys = keys, .max_connections = srv.config.max_connections,
                      .on_request_done = on_request_done};
    if (!(http = http_server_start(&hc, routes, n_routes, &srv, &err))) {
        log_printf(LOG_ERROR, "%s", err.message);
        goto done;
    }
    bool v6 = strchr(srv.config.host, ':') != NULL;
    log_printf(LOG_INFO, "corral %s listening on %s%s%s:%u (models in %s)", CORRAL_VERSION,
               v6 ? "[" : "", srv.config.host, v6 ? "]" : "", http_server_port(http),
               srv.config.models_root);
    if (api_keys_enabled(keys))
        log_write(LOG_INFO, "API keys required", NULL, 0);
    if (!gpu_log_discovery_start(srv.config.log_format, &err))
        log_printf(LOG_WARN, "%s", err.message);
    int sig;
    while (sigwait(&stop_signals, &sig) == 0 && sig == SIGHUP) {
        if (api_keys_reload(keys, &err))
            log_write(LOG_INFO, "API key file reloaded", NULL, 0);
        else
            log_printf(LOG_WARN, "API key file not reloaded, the old keys stay: %s", err.message);
    }
    log_write(LOG_INFO, "stopping", NULL, 0);
    status = 0;
done:
    http_server_stop(http);
    sweeper_stop(&sw);
    api_keys_free(keys);
    scheduler_free(srv.sched);
    corral_store_close(srv.store);
    free(routes);
    return status;
}

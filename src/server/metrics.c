/*
 * The server's metrics (metrics.h). Histograms keep one non-cumulative count per bucket and
 * their sum in nanoseconds, all atomics, so an observation is a few relaxed additions with no
 * lock; the exposition makes the counts cumulative from one reading of each, so a scrape
 * racing observations still sees le-monotonic buckets whose +Inf equals _count. The request
 * table (labels method, path, status) is fixed-size behind one mutex: it changes once per
 * request, and its label values are bounded by the route table and the statuses handlers use.
 */
#include "server/metrics.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_BUCKETS 16
#define MAX_REQUEST_SERIES 512 /* (method, path, status) triples; the last one is "other" */
#define MAX_ROUTE_SERIES 128   /* paths with a duration histogram; the last one is "other" */
#define LABEL_MAX 64

typedef struct histogram {
    const double *bounds; /* upper bounds in seconds, ascending; +Inf is implied */
    size_t n_bounds;
    atomic_uint_fast64_t counts[MAX_BUCKETS + 1];
    atomic_uint_fast64_t sum_ns;
} histogram;

/* A request can take from a millisecond (/api/version) to many minutes (a long answer). */
static const double request_bounds[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,
                                        2.5,   5,    10,    30,   60,  120,  300, 600};
/* The first token waits for the queue, a model load and the prompt's evaluation. */
static const double first_token_bounds[] = {0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,
                                            2.5,  5,     10,   30,  60,   120};
/* One decode step: well under a millisecond for a tiny model, a second for a large one. */
static const double inter_token_bounds[] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                            0.05,   0.1,   0.25,   0.5,   1,    2.5};

#define N_BOUNDS(a) (sizeof a / sizeof a[0])
_Static_assert(N_BOUNDS(request_bounds) <= MAX_BUCKETS &&
                   N_BOUNDS(first_token_bounds) <= MAX_BUCKETS &&
                   N_BOUNDS(inter_token_bounds) <= MAX_BUCKETS,
               "a histogram's bounds fit its counts");

static histogram first_token = {.bounds = first_token_bounds,
                                .n_bounds = N_BOUNDS(first_token_bounds)};
static histogram inter_token = {.bounds = inter_token_bounds,
                                .n_bounds = N_BOUNDS(inter_token_bounds)};
static atomic_uint_fast64_t prompt_tokens, generated_tokens;

typedef struct request_series {
    char method[8];
    char path[LABEL_MAX];
    char status[8];
    uint64_t count;
} request_series;

typedef struct route_series {
    char path[LABEL_MAX];
    histogram duration;
} route_series;

static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static request_series requests[MAX_REQUEST_SERIES];
static size_t n_requests;
static route_series routes[MAX_ROUTE_SERIES];
static size_t n_routes;

/* n observations of ns each. */
static void histogram_observe_n(histogram *h, int64_t ns, uint64_t n)
{
    if (ns < 0) /* a clock step cannot make time negative */
        ns = 0;
    double seconds = (double)ns / 1e9;
    size_t i = 0;
    while (i < h->n_bounds && seconds > h->bounds[i])
        i++;
    atomic_fetch_add_explicit(&h->counts[i], n, memory_order_relaxed);
    atomic_fetch_add_explicit(&h->sum_ns, (uint64_t)ns * n, memory_order_relaxed);
}

static void histogram_observe(histogram *h, int64_t ns)
{
    histogram_observe_n(h, ns, 1);
}

/* The method as a label: the usual ones as they are, anything else "other". */
static const char *method_label(const char *method)
{
    static const char *const known[] = {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"};
    for (size_t i = 0; method && i < sizeof known / sizeof known[0]; i++)
        if (strcmp(method, known[i]) == 0)
            return known[i];
    return "other";
}

/* The series with these labels, added if new; the last slot (labelled "other") when full. */
static request_series *request_entry(const char *method, const char *path, const char *status)
{
    for (size_t i = 0; i < n_requests; i++) {
        request_series *r = &requests[i];
        if (strcmp(r->method, method) == 0 && strcmp(r->path, path) == 0 &&
            strcmp(r->status, status) == 0)
            return r;
    }
    request_series *r;
    if (n_requests < MAX_REQUEST_SERIES - 1) {
        r = &requests[n_requests++];
    } else {
        r = &requests[MAX_REQUEST_SERIES - 1];
        if (n_requests == MAX_REQUEST_SERIES)
            return r;
        n_requests++;
        method = path = status = "other";
    }
    snprintf(r->method, sizeof r->method, "%s", method);
    snprintf(r->path, sizeof r->path, "%s", path);
    snprintf(r->status, sizeof r->status, "%s", status);
    return r;
}

/* path's histogram, added if new; the table's last slot is "other"'s, which takes every path
 * that finds no room (unmatched requests may have added "other" earlier). */
static histogram *route_duration(const char *path)
{
    for (size_t i = 0; i < n_routes; i++)
        if (strcmp(routes[i].path, path) == 0)
            return &routes[i].duration;
    if (n_routes >= MAX_ROUTE_SERIES - 1 && strcmp(path, "other") != 0)
        return route_duration("other");
    route_series *r = &routes[n_routes++];
    snprintf(r->path, sizeof r->path, "%s", path);
    r->duration.bounds = request_bounds;
    r->duration.n_bounds = N_BOUNDS(request_bounds);
    return &r->duration;
}

void metrics_observe_request(const char *method, const char *route, unsigned status,
                             int64_t duration_ns)
{
    char status_label[8];
    snprintf(status_label, sizeof status_label, "%u", status);
    const char *path = route ? route : "other";
    pthread_mutex_lock(&table_lock);
    request_entry(method_label(method), path, status_label)->count++;
    histogram_observe(route_duration(path), duration_ns);
    pthread_mutex_unlock(&table_lock);
}

void metrics_observe_first_token(int64_t ns)
{
    histogram_observe(&first_token, ns);
}

void metrics_observe_inter_token(int64_t eval_ns, int64_t n_tokens)
{
    if (n_tokens >= 2 && eval_ns >= 0)
        histogram_observe_n(&inter_token, eval_ns / (n_tokens - 1), (uint64_t)(n_tokens - 1));
}

void metrics_add_tokens(int64_t prompt, int64_t generated)
{
    if (prompt > 0)
        atomic_fetch_add_explicit(&prompt_tokens, (uint64_t)prompt, memory_order_relaxed);
    if (generated > 0)
        atomic_fetch_add_explicit(&generated_tokens, (uint64_t)generated, memory_order_relaxed);
}

/* ---- exposition ---- */

static void header(FILE *out, const char *name, const char *type, const char *help)
{
    fprintf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* A label value with \, " and newlines escaped, as the text format requires. */
static void label_value(FILE *out, const char *value)
{
    fputc('"', out);
    for (const char *p = value; *p; p++) {
        if (*p == '\\' || *p == '"')
            fprintf(out, "\\%c", *p);
        else if (*p == '\n')
            fputs("\\n", out);
        else
            fputc(*p, out);
    }
    fputc('"', out);
}

/* name's _bucket, _sum and _count lines; labels: "" or `key="value",` (with the comma). */
static void histogram_lines(FILE *out, const char *name, const char *labels, const histogram *h)
{
    uint64_t cumulative = 0;
    for (size_t i = 0; i <= h->n_bounds; i++) {
        cumulative += atomic_load_explicit(&h->counts[i], memory_order_relaxed);
        if (i < h->n_bounds)
            fprintf(out, "%s_bucket{%sle=\"%g\"} %" PRIu64 "\n", name, labels, h->bounds[i],
                    cumulative);
        else
            fprintf(out, "%s_bucket{%sle=\"+Inf\"} %" PRIu64 "\n", name, labels, cumulative);
    }
    size_t n = strlen(labels);
    uint64_t sum_ns = atomic_load_explicit(&h->sum_ns, memory_order_relaxed);
    /* the labels without their trailing comma */
    fprintf(out, "%s_sum%s%.*s%s %" PRIu64 ".%09" PRIu64 "\n", name, n ? "{" : "",
            (int)(n ? n - 1 : 0), labels, n ? "}" : "", sum_ns / 1000000000,
            sum_ns % 1000000000);
    fprintf(out, "%s_count%s%.*s%s %" PRIu64 "\n", name, n ? "{" : "", (int)(n ? n - 1 : 0),
            labels, n ? "}" : "", cumulative);
}

static void request_lines(FILE *out)
{
    header(out, "corral_http_requests_total", "counter",
           "HTTP requests answered, by method, route path and status.");
    pthread_mutex_lock(&table_lock);
    for (size_t i = 0; i < n_requests; i++) {
        fputs("corral_http_requests_total{method=", out);
        label_value(out, requests[i].method);
        fputs(",path=", out);
        label_value(out, requests[i].path);
        fputs(",status=", out);
        label_value(out, requests[i].status);
        fprintf(out, "} %" PRIu64 "\n", requests[i].count);
    }
    header(out, "corral_http_request_duration_seconds", "histogram",
           "Time from a request's arrival to the last byte of its answer, by route path.");
    for (size_t i = 0; i < n_routes; i++) {
        char *labels = NULL;
        size_t len = 0;
        FILE *l = open_memstream(&labels, &len);
        if (!l)
            continue;
        fputs("path=", l);
        label_value(l, routes[i].path);
        fputc(',', l);
        if (fclose(l) == 0)
            histogram_lines(out, "corral_http_request_duration_seconds", labels,
                            &routes[i].duration);
        free(labels);
    }
    pthread_mutex_unlock(&table_lock);
}

/* The loaded models' lines; a model loaded twice (with different options) is one series. */
static void model_lines(FILE *out, const metrics_sample *s, const char *name, const char *type,
                        const char *help, bool kv, uint64_t (*value)(const metrics_model *))
{
    header(out, name, type, help);
    for (size_t i = 0; i < s->n_models; i++) {
        bool first = true;
        for (size_t j = 0; j < i && first; j++)
            first = strcmp(s->models[j].name, s->models[i].name) != 0;
        if (!first)
            continue;
        uint64_t total = 0;
        bool any = false;
        for (size_t j = i; j < s->n_models; j++)
            if (strcmp(s->models[j].name, s->models[i].name) == 0 && (!kv || s->models[j].has_kv)) {
                total += value(&s->models[j]);
                any = true;
            }
        if (!any)
            continue;
        fprintf(out, "%s{model=", name);
        label_value(out, s->models[i].name);
        fprintf(out, "} %" PRIu64 "\n", total);
    }
}

static uint64_t model_memory(const metrics_model *m) { return m->memory_bytes; }
static uint64_t model_kv_used(const metrics_model *m) { return m->kv_cells_used; }
static uint64_t model_kv_cells(const metrics_model *m) { return m->kv_cells; }

char *metrics_render(const metrics_sample *s)
{
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    if (!out)
        return NULL;
    request_lines(out);
    header(out, "corral_time_to_first_token_seconds", "histogram",
           "Time from a generation request's arrival (queue and model load included) to its "
           "first piece of text.");
    histogram_lines(out, "corral_time_to_first_token_seconds", "", &first_token);
    header(out, "corral_inter_token_latency_seconds", "histogram",
           "Time between consecutive generated tokens; a generation's gaps each count as its "
           "mean gap.");
    histogram_lines(out, "corral_inter_token_latency_seconds", "", &inter_token);
    header(out, "corral_prompt_tokens_total", "counter",
           "Prompt tokens of finished generations and embeddings.");
    fprintf(out, "corral_prompt_tokens_total %" PRIu64 "\n",
            (uint64_t)atomic_load(&prompt_tokens));
    header(out, "corral_generated_tokens_total", "counter",
           "Tokens generated by finished generations.");
    fprintf(out, "corral_generated_tokens_total %" PRIu64 "\n",
            (uint64_t)atomic_load(&generated_tokens));
    header(out, "corral_queue_depth", "gauge",
           "Requests waiting for a model to load or for a free slot.");
    fprintf(out, "corral_queue_depth %" PRIu64 "\n", s->queue_depth);
    header(out, "corral_loaded_models", "gauge", "Models loaded in runners.");
    fprintf(out, "corral_loaded_models %zu\n", s->n_models);
    model_lines(out, s, "corral_model_memory_bytes", "gauge",
                "Estimated memory of a loaded model: weights and KV cache.", false, model_memory);
    model_lines(out, s, "corral_kv_cache_cells_used", "gauge",
                "KV cache cells holding tokens, over all of a model's slots.", true,
                model_kv_used);
    model_lines(out, s, "corral_kv_cache_cells", "gauge",
                "KV cache cells of a loaded model, over all of its slots.", true, model_kv_cells);
    header(out, "corral_runner_restarts_total", "counter",
           "Runners that crashed or failed a request and were stopped; the next request for "
           "their model starts a new one.");
    fprintf(out, "corral_runner_restarts_total %" PRIu64 "\n", s->runner_restarts);
    header(out, "corral_pull_bytes_total", "counter", "Bytes of model blobs downloaded by pulls.");
    fprintf(out, "corral_pull_bytes_total %" PRIu64 "\n", s->pull_bytes);
    if (fclose(out) != 0) {
        free(text);
        return NULL;
    }
    return text;
}

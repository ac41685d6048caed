/*
 * The server's Prometheus metrics: the counters and histograms that requests and generations
 * update as they go (process-wide, thread-safe: atomics on the per-token path, one mutex for
 * the per-request table, nothing allocated while counting), and the text exposition of
 * GET /metrics, which adds the gauges the caller samples at scrape time (queue, loaded
 * models, KV cache). Every series is named corral_..., with its unit in the name.
 */
#ifndef CORRAL_SERVER_METRICS_H
#define CORRAL_SERVER_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A finished HTTP request. route: the matched route's path pattern (NULL: none matched, counted
 * as "other", so a client cannot grow the label set); status 0 when no reply went out. */
void metrics_observe_request(const char *method, const char *route, unsigned status,
                             int64_t duration_ns);

/* Time from a generation request's arrival to its first piece of text. */
void metrics_observe_first_token(int64_t ns);
/*
 * A generation's time between tokens: its n_tokens generated in eval_ns from the first to the
 * last (as the runner measures). Each of the n_tokens - 1 gaps counts as the mean gap: the
 * runner sends text in pieces of one token or several, so the server cannot time each one.
 */
void metrics_observe_inter_token(int64_t eval_ns, int64_t n_tokens);

/* A generation or embedding's prompt tokens and generated tokens. */
void metrics_add_tokens(int64_t prompt, int64_t generated);

/* One loaded model as sampled at scrape time. */
typedef struct metrics_model {
    const char *name;
    uint64_t memory_bytes;
    bool has_kv;           /* the runner answered with its KV cache use */
    uint64_t kv_cells_used, kv_cells;
} metrics_model;

/* What the scrape samples from elsewhere: gauges and counters other parts own. */
typedef struct metrics_sample {
    uint64_t queue_depth;
    const metrics_model *models;
    size_t n_models;
    uint64_t runner_restarts;
    uint64_t pull_bytes;
} metrics_sample;

/* The exposition text (malloc'ed), or NULL when out of memory. */
char *metrics_render(const metrics_sample *sample);

/* The Content-Type of metrics_render's text. */
#define METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

#endif

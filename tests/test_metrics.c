/*
 * The server's metrics (src/server/metrics.c), read back from the exposition text: request
 * counts by method, route and status with unknown routes and methods as "other", cumulative
 * histogram buckets whose +Inf is _count, inter-token gaps counted once per gap, models loaded
 * twice as one series, label values escaped, and a request table that stays bounded and free of
 * duplicate series however many paths it sees. The counters are process-wide, so the tests
 * build on each other in order.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/metrics.h"

static char *render(const metrics_model *models, size_t n_models)
{
    metrics_sample sample = {.queue_depth = 3, .models = models, .n_models = n_models,
                             .runner_restarts = 1, .pull_bytes = 12345};
    char *text = metrics_render(&sample);
    assert_non_null(text);
    return text;
}

/* The value of the sample line that starts with series followed by a space; -1 if none. */
static double value_of(const char *text, const char *series)
{
    size_t n = strlen(series);
    for (const char *line = text; *line;) {
        const char *end = strchr(line, '\n');
        if (strncmp(line, series, n) == 0 && line[n] == ' ')
            return strtod(line + n + 1, NULL);
        line = end ? end + 1 : line + strlen(line);
    }
    return -1;
}

static void test_metrics_fresh_exposition(void **state)
{
    (void)state;
    char *text = render(NULL, 0);
    assert_true(value_of(text, "corral_generated_tokens_total") == 0);
    assert_true(value_of(text, "corral_queue_depth") == 3);
    assert_true(value_of(text, "corral_runner_restarts_total") == 1);
    assert_true(value_of(text, "corral_pull_bytes_total") == 12345);
    assert_true(value_of(text, "corral_loaded_models") == 0);
    assert_true(value_of(text, "corral_time_to_first_token_seconds_bucket{le=\"+Inf\"}") == 0);
    assert_true(value_of(text, "corral_time_to_first_token_seconds_count") == 0);
    assert_non_null(strstr(text, "# TYPE corral_http_requests_total counter\n"));
    assert_non_null(strstr(text, "# TYPE corral_inter_token_latency_seconds histogram\n"));
    free(text);
}

static void test_metrics_requests_by_method_route_and_status(void **state)
{
    (void)state;
    metrics_observe_request("POST", "/api/generate", 200, 30000000);
    metrics_observe_request("POST", "/api/generate", 200, 20000000);
    metrics_observe_request("POST", "/api/generate", 500, 1000000);
    metrics_observe_request("GET", NULL, 404, 1000000);
    metrics_observe_request("BREW", "/api/tags", 405, 1000000);
    char *text = render(NULL, 0);
    assert_true(value_of(text, "corral_http_requests_total{method=\"POST\",path=\"/api/generate\","
                               "status=\"200\"}") == 2);
    assert_true(value_of(text, "corral_http_requests_total{method=\"POST\",path=\"/api/generate\","
                               "status=\"500\"}") == 1);
    assert_true(value_of(text, "corral_http_requests_total{method=\"GET\",path=\"other\","
                               "status=\"404\"}") == 1);
    assert_true(value_of(text, "corral_http_requests_total{method=\"other\",path=\"/api/tags\","
                               "status=\"405\"}") == 1);
    const char *d = "corral_http_request_duration_seconds";
    char series[128];
    snprintf(series, sizeof series, "%s_bucket{path=\"/api/generate\",le=\"0.005\"}", d);
    assert_true(value_of(text, series) == 1);
    snprintf(series, sizeof series, "%s_bucket{path=\"/api/generate\",le=\"0.025\"}", d);
    assert_true(value_of(text, series) == 2);
    snprintf(series, sizeof series, "%s_bucket{path=\"/api/generate\",le=\"0.05\"}", d);
    assert_true(value_of(text, series) == 3);
    snprintf(series, sizeof series, "%s_bucket{path=\"/api/generate\",le=\"+Inf\"}", d);
    assert_true(value_of(text, series) == 3);
    snprintf(series, sizeof series, "%s_count{path=\"/api/generate\"}", d);
    assert_true(value_of(text, series) == 3);
    assert_non_null(strstr(text, "_sum{path=\"/api/generate\"} 0.051000000\n"));
    free(text);
}

static void test_metrics_tokens_and_generation_timings(void **state)
{
    (void)state;
    metrics_add_tokens(23, 8);
    metrics_add_tokens(5, 0);
    metrics_observe_first_token(200000000);
    metrics_observe_inter_token(90000000, 10); /* 9 gaps of 10 ms */
    metrics_observe_inter_token(5000000, 1);   /* one token: no gap */
    char *text = render(NULL, 0);
    assert_true(value_of(text, "corral_prompt_tokens_total") == 28);
    assert_true(value_of(text, "corral_generated_tokens_total") == 8);
    assert_true(value_of(text, "corral_time_to_first_token_seconds_bucket{le=\"0.1\"}") == 0);
    assert_true(value_of(text, "corral_time_to_first_token_seconds_bucket{le=\"0.25\"}") == 1);
    assert_true(value_of(text, "corral_inter_token_latency_seconds_bucket{le=\"0.005\"}") == 0);
    assert_true(value_of(text, "corral_inter_token_latency_seconds_bucket{le=\"0.01\"}") == 9);
    assert_true(value_of(text, "corral_inter_token_latency_seconds_count") == 9);
    assert_non_null(strstr(text, "corral_inter_token_latency_seconds_sum 0.090000000\n"));
    free(text);
}

static void test_metrics_models_summed_by_name_and_escaped(void **state)
{
    (void)state;
    metrics_model models[] = {
        {.name = "llama:latest", .memory_bytes = 100, .has_kv = true, .kv_cells_used = 7,
         .kv_cells = 1024},
        {.name = "odd\"name\\", .memory_bytes = 5, .has_kv = false},
        {.name = "llama:latest", .memory_bytes = 50, .has_kv = true, .kv_cells_used = 3,
         .kv_cells = 512},
    };
    char *text = render(models, 3);
    assert_true(value_of(text, "corral_loaded_models") == 3);
    assert_true(value_of(text, "corral_model_memory_bytes{model=\"llama:latest\"}") == 150);
    assert_true(value_of(text, "corral_kv_cache_cells_used{model=\"llama:latest\"}") == 10);
    assert_true(value_of(text, "corral_kv_cache_cells{model=\"llama:latest\"}") == 1536);
    assert_true(value_of(text, "corral_model_memory_bytes{model=\"odd\\\"name\\\\\"}") == 5);
    assert_null(strstr(text, "corral_kv_cache_cells_used{model=\"odd")); /* it did not say */
    free(text);
}

static int compare_strings(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Far more routes than the table holds: it stays bounded, the rest count as "other", and no
 * label set appears twice (Prometheus rejects such a scrape). */
static void test_metrics_request_table_is_bounded(void **state)
{
    (void)state;
    for (int i = 0; i < 1000; i++) {
        char route[32];
        snprintf(route, sizeof route, "/r%d", i);
        metrics_observe_request("GET", route, 200, 1000);
    }
    metrics_observe_request("GET", NULL, 404, 1000);
    char *text = render(NULL, 0);
    char *lines[4096];
    size_t n = 0, requests = 0, counts = 0;
    for (char *line = strtok(text, "\n"); line && n < 4096; line = strtok(NULL, "\n")) {
        if (line[0] == '#')
            continue;
        char *space = strrchr(line, ' ');
        *space = '\0';
        lines[n++] = line;
        requests += strncmp(line, "corral_http_requests_total{", 27) == 0;
        counts += strncmp(line, "corral_http_request_duration_seconds_count{", 43) == 0;
    }
    assert_true(n < 4096);
    assert_true(requests <= 512 && requests > 100);
    assert_true(counts <= 128 && counts > 100);
    qsort(lines, n, sizeof *lines, compare_strings);
    for (size_t i = 1; i < n; i++)
        if (strcmp(lines[i - 1], lines[i]) == 0)
            fail_msg("series twice: %s", lines[i]);
    free(text);
    text = render(NULL, 0);
    assert_true(value_of(text, "corral_http_requests_total{method=\"other\",path=\"other\","
                               "status=\"other\"}") > 400);
    assert_true(value_of(text, "corral_http_request_duration_seconds_count{path=\"other\"}") >
                800);
    free(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_metrics_fresh_exposition),
        cmocka_unit_test(test_metrics_requests_by_method_route_and_status),
        cmocka_unit_test(test_metrics_tokens_and_generation_timings),
        cmocka_unit_test(test_metrics_models_summed_by_name_and_escaped),
        cmocka_unit_test(test_metrics_request_table_is_bounded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

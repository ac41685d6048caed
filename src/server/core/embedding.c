/*
 * Embedding requests (embedding.h): one runner request with every input, then the vectors
 * cut, normalised and checked here.
 */
#include "server/core/embedding.h"

#include <math.h>
#include <string.h>
#include <time.h>

#include "server/metrics.h"
#include "server/core/model_request.h"
#include "server/sched/runner_client.h"
#include "server/sched/scheduler.h"
#include "util/log.h"

static int64_t monotonic_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

json_t *embedding_inputs(const json_t *input)
{
    if (!input || json_is_null(input))
        return json_array();
    if (json_is_string(input))
        return json_pack("[O]", input);
    if (!json_is_array(input))
        return NULL;
    size_t i;
    json_t *v;
    json_array_foreach(input, i, v)
        if (!json_is_string(v))
            return NULL;
    return json_incref((json_t *)input);
}

/* Cut vector to dimensions (0: all) and L2-normalise it if asked; false if a value is not
 * finite. */
static bool shape_vector(json_t *vector, const embedding_params *params)
{
    while (params->dimensions > 0 && json_array_size(vector) > params->dimensions)
        json_array_remove(vector, json_array_size(vector) - 1);
    double sum = 0;
    size_t i;
    json_t *v;
    json_array_foreach(vector, i, v) {
        double x = json_number_value(v);
        if (!isfinite(x))
            return false;
        sum += x * x;
    }
    if (!params->normalize || sum == 0) /* a zero vector has no direction to keep */
        return true;
    double norm = sqrt(sum);
    json_array_foreach(vector, i, v)
        json_real_set(v, (float)(json_number_value(v) / norm));
    return true;
}

/* scheduler_acquire's question while the request waits in the queue. */
static bool client_left(const void *state)
{
    const embedding_params *params = state;
    return http_client_gone(params->client_fd);
}

/* The runner's vectors (a line each) and count; a status other than 200 with err. */
static unsigned ask_runner(const server *srv, const runner_handle *runner, const json_t *body,
                           const embedding_params *params, embedding_result *result,
                           bool *runner_failed, corral_error *err)
{
    json_t *request = json_pack("{s:s,s:O,s:b}", "op", "embed", "inputs", params->inputs,
                                "truncate", !json_is_false(json_object_get(body, "truncate")));
    runner_conn *conn = request ? runner_conn_open(runner_handle_socket(runner), request,
                                                     srv->config.runner_timeout_ns, err)
                                : NULL;
    json_decref(request);
    if (conn)
        runner_conn_watch(conn, params->client_fd);
    json_t *vectors = json_array();
    unsigned status = conn && vectors ? 0 : 500;
    *runner_failed = request && !conn; /* err says why the connection failed */
    if (!request || !vectors)
        corral_error_set(err, "out of memory");
    while (status == 0) {
        json_t *line = runner_conn_next(conn, err);
        const char *error = json_string_value(json_object_get(line, "error"));
        json_t *vector = json_object_get(line, "embedding");
        size_t at = json_array_size(vectors);
        if (!line && runner_conn_client_gone(conn)) {
            status = SCHEDULER_ABANDONED;
        } else if (!line) {
            *runner_failed = true;
            status = 500;
        } else if (error) {
            corral_error_set(err, "%s", error);
            status = runner_error_status(line);
        } else if (json_is_true(json_object_get(line, "done"))) {
            result->prompt_tokens = json_integer_value(json_object_get(line, "prompt_eval_count"));
            status = 200;
        } else if (!json_is_array(vector) || at >= json_array_size(params->inputs)) {
            corral_error_set(err, "the runner's embed answer is not one vector per input");
            status = 500;
        } else if (!shape_vector(vector, params)) {
            corral_error_set(err, "the embedding of input %zu is not finite", at);
            status = 500;
        } else if (json_array_append(vectors, vector) != 0) {
            corral_error_set(err, "out of memory");
            status = 500;
        }
        json_decref(line);
    }
    runner_conn_close(conn);
    if (status == 200 && json_array_size(vectors) != json_array_size(params->inputs)) {
        corral_error_set(err, "the runner answered %zu embeddings for %zu inputs",
                         json_array_size(vectors), json_array_size(params->inputs));
        status = 500;
    }
    if (status == 200)
        result->vectors = json_incref(vectors);
    json_decref(vectors);
    return status;
}

unsigned embedding_run(server *srv, const json_t *body, const embedding_params *params,
                       embedding_result *result, corral_error *err)
{
    int64_t start = monotonic_ns();
    *result = (embedding_result){0};
    const char *name = json_string_value(json_object_get(body, "model"));
    int64_t keep_alive_ns;
    if (!name || !*name) {
        corral_error_set(err, "model is required");
        return 400;
    }
    if (!model_request_keep_alive(srv, body, &keep_alive_ns)) {
        corral_error_set(err, "invalid keep_alive duration");
        return 400;
    }
    json_t *truncate = json_object_get(body, "truncate");
    if (truncate && !json_is_null(truncate) && !json_is_boolean(truncate)) {
        corral_error_set(err, "truncate must be a boolean");
        return 400;
    }
    if (json_array_size(params->inputs) > EMBEDDING_MAX_INPUTS) {
        corral_error_set(err, "too many inputs: at most %d per request", EMBEDDING_MAX_INPUTS);
        return 400;
    }
    model_ref *ref = NULL;
    unsigned status = model_request_open(srv, name, &ref, err);
    if (status == 200 && params->facts)
        snprintf(params->facts->model, sizeof params->facts->model, "%s", ref->display);
    json_t *caps = status == 200 && ref->model_path ? model_request_capabilities(srv, ref, err)
                                                    : NULL;
    json_t *options = NULL;
    if (status == 200 && ref->model_path && !caps) {
        status = 500;
    } else if (status == 200 && !model_request_has_capability(caps, "embedding")) {
        corral_error_set(err, "\"%s\" does not support embeddings", name);
        status = 400;
    } else if (status == 200 &&
               !(options = model_request_options(ref, json_object_get(body, "options"), err))) {
        status = 400;
    }
    json_decref(caps);
    runner_handle *runner = NULL;
    if (status == 200) {
        load_request load = model_request_load(ref, options);
        load.keep_alive_ns = keep_alive_ns;
        load.abandoned = client_left;
        load.abandoned_ctx = params;
        runner = scheduler_acquire(srv->sched, &load, &status, err);
        status = runner ? 200 : status;
    }
    if (runner) {
        bool runner_failed = false;
        result->load_ns = monotonic_ns() - start; /* queue and load, as generation's */
        if (json_array_size(params->inputs) == 0)
            result->vectors = json_array();
        else
            status = ask_runner(srv, runner, body, params, result, &runner_failed, err);
        if (runner_failed)
            scheduler_report_failure(srv->sched, runner);
        scheduler_release(srv->sched, runner);
    }
    if (status == SCHEDULER_ABANDONED)
        log_write(LOG_INFO, "client left: its request stops",
                  (log_field[]){LOG_STR("model", name),
                                LOG_STR("while", runner ? "embedding" : "queued"),
                                LOG_NUM("after_ms", (double)(monotonic_ns() - start) / 1e6)},
                  3);
    json_decref(options);
    model_ref_free(ref);
    if (status == 200 && !result->vectors) {
        corral_error_set(err, "out of memory");
        status = 500;
    }
    if (status == 200) {
        metrics_add_tokens(result->prompt_tokens, 0);
        if (params->facts)
            params->facts->prompt_tokens = result->prompt_tokens;
    }
    result->total_ns = monotonic_ns() - start;
    return status;
}

void embedding_result_free(embedding_result *result)
{
    json_decref(result->vectors);
    result->vectors = NULL;
}

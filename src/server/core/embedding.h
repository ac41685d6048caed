/*
 * Embedding requests, behind /api/embed, the legacy /api/embeddings and /v1/embeddings:
 * the model checked for the embedding capability, a runner acquired from
 * the scheduler, the runner's pooled vectors read back and, where the endpoint asks,
 * L2-normalised after being cut to `dimensions`, as ollama does. The endpoints shape the
 * answer.
 */
#ifndef CORRAL_SERVER_EMBEDDING_H
#define CORRAL_SERVER_EMBEDDING_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "server/http/http.h"
#include "server/server.h"

/* Inputs one request may embed (OpenAI's limit): a batch's work and answer stay bounded. */
#define EMBEDDING_MAX_INPUTS 2048

typedef struct embedding_params {
    const json_t *inputs; /* array of strings; empty: only load the model */
    bool normalize;       /* L2-normalise each vector (after the cut to dimensions) */
    uint32_t dimensions;  /* keep the first this many values; 0: all */
    http_request_facts *facts; /* the model and prompt tokens go here; NULL: nowhere */
    /* the HTTP client's socket (http_reply_client_fd): its leaving stops the work; -1: none */
    int client_fd;
} embedding_params;

typedef struct embedding_result {
    json_t *vectors;          /* one array of numbers per input */
    json_int_t prompt_tokens; /* over all inputs */
    int64_t total_ns, load_ns;
} embedding_result;

/*
 * Embed params->inputs with the model that body names ("model"; also "options",
 * "keep_alive", "truncate": default true, an input too long for the context is cut).
 * Returns 200 with *result filled (free with embedding_result_free), or the HTTP status of
 * the failure with err set (400 for more than EMBEDDING_MAX_INPUTS inputs; SCHEDULER_ABANDONED
 * when the client left before the vectors came, its runner request then closed).
 */
unsigned embedding_run(server *srv, const json_t *body, const embedding_params *params,
                       embedding_result *result, corral_error *err);
void embedding_result_free(embedding_result *result);

/*
 * `input` of /api/embed and /v1/embeddings as an array of strings (a new reference): a
 * string is one input, absent or null none. NULL for anything else (400 "invalid input
 * type").
 */
json_t *embedding_inputs(const json_t *input);

#endif

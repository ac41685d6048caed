/*
 * What every request that runs a model needs before it reaches a runner, shared by the
 * generation core and the embedding endpoints: the model resolved (with the HTTP status of a
 * failure), its PARAMS layer merged under the request's options, keep_alive, the model's
 * capabilities, and the scheduler's load request.
 */
#ifndef CORRAL_SERVER_MODEL_REQUEST_H
#define CORRAL_SERVER_MODEL_REQUEST_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "server/models/model_ref.h"
#include "server/sched/scheduler.h"
#include "server/server.h"

/* Resolve name: 200 with *ref, else 400 (invalid name), 404 (not found) or 500 with err. */
unsigned model_request_open(const server *srv, const char *name, model_ref **ref,
                            corral_error *err);

/* keep_alive of body: a duration string or seconds; absent or null: the server default.
 * False for a value that is neither. */
bool model_request_keep_alive(const server *srv, const json_t *body, int64_t *ns);

/* The model's PARAMS layer under the request's options (NULL or JSON null: none),
 * normalised and checked (NULL with err: a 400). */
json_t *model_request_options(const model_ref *ref, const json_t *options, corral_error *err);

/* The model's capabilities as /api/show lists them (NULL with err: a 500). */
json_t *model_request_capabilities(const server *srv, const model_ref *ref, corral_error *err);
bool model_request_has_capability(const json_t *caps, const char *name);

/* Whether the config's model_families lists family. */
bool model_request_in_family(const model_ref *ref, const char *family);

/* Whether the model is ollama's retired llama3.2-vision pair: family mllama with a projector
 * layer beside the text model (the library's file now carries the tower itself). True with
 * err set to ollama's words, which the request answers with a 500 as ollama does. */
bool model_request_retired(const model_ref *ref, corral_error *err);

/* What the scheduler loads: the model with the options' num_ctx, num_batch, num_thread,
 * num_gpu. */
load_request model_request_load(const model_ref *ref, const json_t *options);

#endif

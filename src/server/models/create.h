/*
 * /api/create: build a model from uploaded GGUF blobs and/or an existing
 * model, with template, system, parameters, messages and license layers, optionally quantizing
 * its weights with the engine (llama-quantize's recipes), then write its config and manifest.
 * Imports GGUF files, and converts a Hugging Face safetensors checkpoint (src/convert) into one
 * while the reply streams;
 * split GGUFs, PyTorch weights and checkpoints of architectures Corral cannot convert are
 * refused with 400.
 */
#ifndef CORRAL_SERVER_CREATE_H
#define CORRAL_SERVER_CREATE_H

#include <jansson.h>

#include "registry/registry.h"
#include "server/http/http.h"
#include "store/store.h"

/*
 * Run a create request (a parsed JSON object) to the end. Each progress object ollama would
 * stream is appended to progress, ending with {"status": "success"}. Returns 200, or the HTTP
 * status of the failure (400 bad request, 404 unknown model or blob, 500 store failure, 502
 * the registry failed) with err set. A base model ('from') missing from the store is pulled
 * first with pull_opts (may be NULL; the request's "insecure" allows http), its progress
 * reported as /api/pull's. A request refused before the work began (every 400 and 404) left nothing behind.
 */
unsigned create_model(corral_store *store, const json_t *request,
                      const corral_registry_options *pull_opts, json_t *progress,
                      corral_error *err);

/*
 * Answer a create request (a parsed JSON object). A bad request is refused with its status
 * (400 bad request, 404 unknown model or blob, 500 store failure) before anything is written.
 * Otherwise the reply streams the progress objects as NDJSON while the work goes on, one step
 * of work per line sent (a client that leaves stops it), ending with "success", or with
 * {"error": ...} if the work fails after the reply began. With "stream": false it is the last
 * object alone, or the error with its status.
 */
void create_reply(corral_store *store, const json_t *request,
                  const corral_registry_options *pull_opts, http_reply *reply);

#endif

/*
 * /api/create (reference §1.5, §7): build a model from uploaded GGUF blobs and/or an existing
 * model, with template, system, parameters, messages and license layers, then write its
 * config and manifest. Imports GGUF only; quantization, adapters, projectors, split GGUFs
 * and safetensors conversion are refused with 400. The work is synchronous and small (no
 * weights are rewritten), so the caller replies with the collected progress afterwards.
 */
#ifndef CORRAL_SERVER_CREATE_H
#define CORRAL_SERVER_CREATE_H

#include <jansson.h>

#include "store/store.h"

/*
 * Run a create request (a parsed JSON object). Each progress status ollama would stream is
 * appended to progress as {"status": "..."}, ending with "success". Returns 200, or the
 * HTTP status of the failure (400 bad request, 404 unknown model or blob, 500 store
 * failure) with err set; then progress holds what was done before the failure.
 */
unsigned create_model(corral_store *store, const json_t *request, json_t *progress,
                      corral_error *err);

#endif

/*
 * The JSON types of every top-level request field, per API: a field of the wrong type is a
 * 400 naming it, before any of it is read (ollama's decoder refuses such a body too, where a
 * hand-written reader would quietly see "absent" and answer 200). JSON null counts as absent,
 * as it does for ollama. Integer fields that carry a count also have a range.
 */
#ifndef CORRAL_SERVER_REQUEST_FIELDS_H
#define CORRAL_SERVER_REQUEST_FIELDS_H

#include <jansson.h>
#include <stdbool.h>

#include "corral/error.h"

typedef enum request_api {
    REQUEST_API_GENERATE,          /* /api/generate */
    REQUEST_API_CHAT,              /* /api/chat */
    REQUEST_API_EMBED,             /* /api/embed */
    REQUEST_API_EMBEDDINGS,        /* /api/embeddings (legacy) */
    REQUEST_API_OPENAI_CHAT,       /* /v1/chat/completions */
    REQUEST_API_OPENAI_COMPLETION, /* /v1/completions */
    REQUEST_API_OPENAI_EMBEDDINGS, /* /v1/embeddings */
    REQUEST_API_ANTHROPIC,         /* /v1/messages */
    REQUEST_API_RESPONSES,         /* /v1/responses */
    REQUEST_API_CREATE,            /* /api/create */
    REQUEST_API_TRANSFER,          /* /api/pull, /api/push */
} request_api;

/*
 * Check body's known fields against api's table; unknown fields are ignored. False with err
 * (the 400's message, e.g. `field "prompt" must be a string`) on the first wrong one.
 */
bool request_fields_check(request_api api, const json_t *body, corral_error *err);

#endif

/*
 * Server-sent events as the streaming dialects frame them: OpenAI's chat and completion
 * chunks (data lines only, ending in `data: [DONE]`), and the typed events of Anthropic's
 * Messages and OpenAI's Responses streams (`event: TYPE` with {"type": TYPE, ...} as data).
 * One place writes the framing, so every dialect ends its events the same way.
 */
#ifndef CORRAL_SERVER_API_SSE_H
#define CORRAL_SERVER_API_SSE_H

#include <jansson.h>
#include <stdbool.h>

#include "server/core/generation.h"

/* `data: JSON` and a blank line; data is consumed (NULL: out of memory, false). */
bool sse_data(generation_out *out, json_t *data);

/* `data: [DONE]`: the end of an OpenAI stream. */
bool sse_done(generation_out *out);

/*
 * `event: type`, then as data {"type": type, the fields of head, the fields of data}: head
 * (may be NULL) and data are consumed; false when out of memory (data NULL included).
 */
bool sse_typed_event(generation_out *out, const char *type, json_t *head, json_t *data);

#endif

/*
 * OpenAI's Responses API as the generation core's typed request and answer shape
 * (responses.c): the translation is pure, so tests check it field by field.
 */
#ifndef CORRAL_SERVER_API_RESPONSES_H
#define CORRAL_SERVER_API_RESPONSES_H

#include <jansson.h>
#include <stddef.h>

#include "server/core/chat_request.h"
#include "server/core/generation.h"

/* A /v1/responses body (an object) as *out: 200, or the HTTP status with the message. */
unsigned responses_parse(const json_t *body, chat_request **out, char *message, size_t size);

/* The state responses_shape keeps for one answer to body (its free_state frees it); NULL:
 * out of memory. */
void *responses_answer_create(const json_t *body);

extern const generation_shape responses_shape;

#endif

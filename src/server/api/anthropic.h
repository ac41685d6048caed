/*
 * Anthropic's Messages API as the generation core's typed request and answer shape
 * (anthropic.c): the translation is pure, so tests check it field by field.
 */
#ifndef CORRAL_SERVER_API_ANTHROPIC_H
#define CORRAL_SERVER_API_ANTHROPIC_H

#include <jansson.h>
#include <stddef.h>

#include "server/core/chat_request.h"
#include "server/core/generation.h"

/* A /v1/messages body (an object) as *out: 200, or the HTTP status with the message. */
unsigned anthropic_parse(const json_t *body, chat_request **out, char *message, size_t size);

/* A /v1/messages/count_tokens body as *out (count_only; max_tokens not needed). */
unsigned anthropic_parse_count(const json_t *body, chat_request **out, char *message,
                               size_t size);

/* The state anthropic_shape keeps for one answer to body (free()); NULL: out of memory. */
void *anthropic_answer_create(const json_t *body);

/* An error in Anthropic's shape, {"type": "error", "error": {"type", "message"}}, its type
 * named after status. */
void anthropic_reply_error(http_reply *reply, unsigned status, const char *message);

/* The Messages API's answers, count_tokens' {"input_tokens": N} among them. */
extern const generation_shape anthropic_shape;

#endif

/*
 * ollama's native /api/generate and /api/chat as the generation core's typed request and
 * answer shape (native.c): the translation is pure, so tests check it field by field.
 */
#ifndef CORRAL_SERVER_API_NATIVE_H
#define CORRAL_SERVER_API_NATIVE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "server/core/chat_request.h"
#include "server/core/generation.h"

/* body (an object) in /api/chat's (chat) or /api/generate's form as *out: 200, or the HTTP
 * status with the message. */
unsigned native_parse(const json_t *body, bool chat, chat_request **out, char *message,
                      size_t size);

/* NDJSON chunks and ollama's final metrics; no state. */
extern const generation_shape native_shape;

#endif

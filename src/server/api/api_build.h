/*
 * Building a chat request from an OpenAI or Anthropic body (openai.c, responses.c,
 * anthropic.c): where the building stands, that is the caller's message buffer and, once
 * the body is refused, the HTTP status; and the image part the OpenAI dialects both turn
 * into a message of its own.
 */
#ifndef CORRAL_SERVER_API_BUILD_H
#define CORRAL_SERVER_API_BUILD_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "server/core/chat_request.h"

/* The caller's message buffer (size bytes) and the status: 200 until a refusal sets it. */
typedef struct api_build {
    char *message;
    size_t size;
    unsigned status;
} api_build;

/* Refuses the body: the message (printf-style) and status into b. Always false, so that a
 * builder can `return api_refuse(...)`. */
bool api_refuse(api_build *b, unsigned status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define API_OUT_OF_MEMORY(b) api_refuse(b, 500, "out of memory")

/* An image part's URL (a data: URL; url must be a JSON string) as a message of role of its
 * own with the image, added to req. A URL the image input refuses is refused with its status
 * and message, named "FIELD[at].content[k]". */
bool api_build_image_message(chat_request *req, const char *role, const json_t *url,
                             const char *field, size_t at, size_t k, api_build *b);

#endif

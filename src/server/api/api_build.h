/*
 * Building a chat request from an OpenAI or Anthropic body (openai.c, responses.c,
 * anthropic.c): where the building stands, that is the caller's message buffer and, once
 * the body is refused, the HTTP status; and the image parts (data: URLs) the OpenAI dialects
 * share.
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

/*
 * An image part's image_url appended to m's images: a data: URL with base64 data, as a string
 * or as {"url": string} (chat completions' spelling, taken by the Responses API too). Refused
 * with ollama's messages, after where (the part, "messages[0].content[1]"): a remote URL (which
 * is never fetched), a URL that is not base64 data, and an image_url of neither form.
 */
bool api_build_image_url(chat_message *m, const json_t *image_url, const char *where,
                         api_build *b);

/* An image part as a message of role of its own with the image, added to req, as ollama makes
 * one of each of chat completions' image parts; refused as api_build_image_url refuses it. */
bool api_build_image_message(chat_request *req, const char *role, const json_t *image_url,
                             const char *where, api_build *b);

#endif

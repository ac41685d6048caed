/*
 * What the OpenAI-compatible endpoints share (openai.c: chat, completions, models,
 * embeddings; responses.c: the Responses API): OpenAI's error shape, reading a body,
 * and reasoning_effort as ollama's think.
 */
#ifndef CORRAL_SERVER_OPENAI_H
#define CORRAL_SERVER_OPENAI_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "server/api/api_build.h"
#include "server/core/chat_request.h"
#include "server/core/generation.h"
#include "server/http/http.h"

/* A /v1/chat/completions (chat) or /v1/completions body (an object) as *out: 200, or the
 * HTTP status with the message. */
unsigned openai_parse(const json_t *body, bool chat, chat_request **out, char *message,
                      size_t size);

/* The state openai_shape keeps for one answer to body (free()); NULL: out of memory. */
void *openai_answer_create(const json_t *body, bool chat);

/* Chat completion and completion objects, or their chunks as server-sent events. */
extern const generation_shape openai_shape;

/* {"error": {"message", "type", "param": null, "code": null}}, type by status. */
void openai_error(http_reply *reply, unsigned status, const char *message);

/* The request body as a JSON object; NULL when it has answered the error. */
json_t *openai_read_body(const http_request *req, http_reply *reply);

/*
 * reasoning_effort (or the Responses API's reasoning.effort) as *think, left as it is when
 * neither is given: "none" turns thinking off, "minimal" is "low", "xhigh" and "ultra" are
 * "max". False with a message for another value.
 */
bool openai_read_reasoning(const json_t *body, chat_think *think, char *message, size_t size);

/*
 * tool_choice: "none" (the caller withholds the tools) and "auto" leave the choice to the
 * model; "required" and {"type": "function", ...} naming one function force a call (the
 * generation's grammar then allows exactly one, which honours parallel_tool_calls: false).
 * The name is under "function" in the chat API (name_in_function), beside "type" in the
 * Responses API. False with the 400.
 */
bool openai_read_tool_choice(const json_t *choice, bool name_in_function, chat_request *req,
                             api_build *b);

#endif

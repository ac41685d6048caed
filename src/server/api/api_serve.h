/*
 * Answering a request an API dialect has parsed (anthropic.c, openai.c, responses.c): the
 * parse's refusal, or out of memory when the dialect's answer state could not be made, in
 * the dialect's error shape; else the generation, in the dialect's wire shape.
 */
#ifndef CORRAL_SERVER_API_SERVE_H
#define CORRAL_SERVER_API_SERVE_H

#include "server/core/chat_request.h"
#include "server/core/generation.h"
#include "server/http/http.h"
#include "server/server.h"

/* status and message: the parse's (200: request is the parsed request). answer: shape's
 * state for this answer (NULL: out of memory; consumed when the generation runs). Frees
 * request. */
void api_serve_parsed(server *srv, unsigned status, const char *message, chat_request *request,
                      const generation_shape *shape, void *answer, http_reply *reply);

#endif

/*
 * OpenAI's /v1/audio/transcriptions as ollama serves it: a multipart/form-data upload (the
 * clip in `file`, then model, prompt, language, response_format, temperature) becomes a chat
 * request, a system message that asks for the words spoken and a user message carrying the
 * clip, answered whole as {"text": ...} or as plain text.
 */
#ifndef CORRAL_SERVER_API_TRANSCRIPTION_H
#define CORRAL_SERVER_API_TRANSCRIPTION_H

#include <stdbool.h>
#include <stddef.h>

#include "server/core/chat_request.h"
#include "server/core/generation.h"

/* The answer's state: whether response_format asked for plain text. */
typedef struct transcription_answer {
    bool plain_text;
} transcription_answer;

/*
 * A request's body (len bytes, content_type its header, NULL when none) as the chat request
 * *out and the answer's form *answer: 200, or the HTTP status with the message (400 for the
 * client's mistakes, 413 for a clip over AUDIO_MAX_CLIP_BYTES).
 */
unsigned transcription_parse(const char *content_type, const char *body, size_t len,
                             chat_request **out, transcription_answer *answer, char *message,
                             size_t size);

/* {"text": the answer's content without surrounding white space}, or that text as
 * text/plain; errors in OpenAI's shape. */
extern const generation_shape transcription_shape;

#endif

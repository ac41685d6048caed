/*
 * Cogito's chat format (Deep Cogito's v2 models, built on DeepSeek V3 and its special tokens)
 * as ollama's `cogito` renderer lays it out, for models whose config names it. The prompt
 * opens with DeepSeek's begin-of-sentence text and Cogito's own system text (the request's
 * leading system message appended to it), then the offered tools, each as indented JSON in a
 * ```json fence; each user turn ends by opening the assistant's, each assistant turn keeps
 * only its answer and calls and ends with end-of-sentence, and a run of tool results sits
 * between tool-outputs tokens. Thinking is off unless think asks for it (true or a level):
 * then the system text asks for deep thinking and the prompt ends with COGITO_THINK_OPEN and a
 * newline, so the answer starts inside its thinking.
 *
 * Cogito calls in DeepSeek V3's older form: after COGITO_TOOL_OPEN, each call is the call
 * token, "function", the separator token, NAME, then the arguments' JSON in a ```json fence
 * (calls in the history are written so), which the output parser reads as COGITO_CALLS.
 */
#ifndef CORRAL_TEMPLATE_COGITO_H
#define CORRAL_TEMPLATE_COGITO_H

#include <jansson.h>
#include <stddef.h>

#include "corral/error.h"
#include "template/deepseek3.h"
#include "template/template.h"

#define COGITO_THINK_OPEN "<think>"
#define COGITO_THINK_CLOSE "</think>"
#define COGITO_TOOL_OPEN DEEPSEEK3_TOOL_OPEN
#define COGITO_CALLS CORRAL_CALLS_DEEPSEEK_FENCED

/*
 * The prompt for messages (the whole history, as the template path assembles it), tools (the
 * request's; NULL or empty: none) and think (the request's; NULL: absent). A malloc'ed string
 * (length in *len) or NULL with err when out of memory or over limits->max_output_bytes
 * (limits NULL: the template defaults).
 */
char *cogito_render(const json_t *messages, const json_t *tools, const json_t *think,
                    const corral_template_limits *limits, size_t *len, corral_error *err);

#endif

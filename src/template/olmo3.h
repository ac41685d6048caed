/*
 * Olmo 3's chat formats (Ai2's Olmo 3 and 3.1) as ollama's `olmo3`, `olmo3.1`, `olmo3-think`
 * and `olmo3-32b-think` renderers lay them out, for models whose config names one of them.
 * ChatML turns (<|im_start|>ROLE ... <|im_end|>), one system turn first (the request's first
 * system message, else Ai2's default text, which differs by model), later system messages
 * dropped, and a new assistant turn at the end.
 *
 * The instruct models (olmo3, olmo3.1) never think. They are offered tools as one JSON list
 * between <functions> tags in the system turn, call as pythonic NAME(KEY=JSON, ...) lines
 * between OLMO3_TOOL_OPEN and </function_calls> (calls in the history are written so; no
 * corral_call_syntax reads that form), and see tool results as <|im_start|>environment turns;
 * a last assistant message with text is continued rather than closed.
 * The think models (olmo3-think for Olmo-3-7B-Think and Olmo-3.1-32B-Think, olmo3-32b-think
 * for Olmo-3-32B-Think) always think: the prompt ends with OLMO3_THINK_OPEN; they have no
 * tools, so tool results and calls are left out.
 */
#ifndef CORRAL_TEMPLATE_OLMO3_H
#define CORRAL_TEMPLATE_OLMO3_H

#include <jansson.h>
#include <stddef.h>

#include "corral/error.h"
#include "template/template.h"

#define OLMO3_THINK_OPEN "<think>"
#define OLMO3_THINK_CLOSE "</think>"
#define OLMO3_TOOL_OPEN "<function_calls>"

/*
 * The prompt for messages (the whole history, as the template path assembles it), tools (the
 * request's; NULL or empty: none; the think models take none) and think (which none of them
 * reads: whether they think is the model's). A malloc'ed string (length in *len) or NULL with
 * err when out of memory or over limits->max_output_bytes (limits NULL: the template
 * defaults).
 */
char *olmo3_render(const json_t *messages, const json_t *tools, const json_t *think,
                   const corral_template_limits *limits, size_t *len, corral_error *err);
char *olmo31_render(const json_t *messages, const json_t *tools, const json_t *think,
                    const corral_template_limits *limits, size_t *len, corral_error *err);
char *olmo3_think_render(const json_t *messages, const json_t *tools, const json_t *think,
                         const corral_template_limits *limits, size_t *len, corral_error *err);
char *olmo3_32b_think_render(const json_t *messages, const json_t *tools, const json_t *think,
                             const corral_template_limits *limits, size_t *len,
                             corral_error *err);

#endif

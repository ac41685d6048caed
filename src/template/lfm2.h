/*
 * LFM2's chat format (Liquid AI's LFM2 models) as ollama's `lfm2` and `lfm2-thinking`
 * renderers lay it out, for models whose config names one of them. The prompt opens with
 * LFM2's begin-of-text text, then ChatML turns (<|im_start|>ROLE ... <|im_end|>, any role
 * written as it is), the first being the request's leading system message with the offered
 * tools after it (each tool's function as spaced JSON, in one list between the tool-list
 * tokens); tool results are wrapped in the tool-response tokens; a last assistant message is
 * continued, else a new assistant turn ends the prompt. Images are the markers the server
 * placed in the content.
 *
 * LFM2 calls as a pythonic list, [NAME(KEY=JSON,...),...] between LFM2_TOOL_OPEN and
 * <|tool_call_end|>; calls in the history are written so (no corral_call_syntax reads that
 * form). lfm2 never thinks and is sent no thinking. lfm2-thinking decides for itself whether
 * to think (the prompt does not open a thinking block; an answer that thinks starts with
 * LFM2_THINK_OPEN); earlier assistant turns keep their thinking only when think asks for it
 * (true or a level), and the last one always does.
 */
#ifndef CORRAL_TEMPLATE_LFM2_H
#define CORRAL_TEMPLATE_LFM2_H

#include <jansson.h>
#include <stddef.h>

#include "corral/error.h"
#include "template/template.h"

#define LFM2_THINK_OPEN "<think>"
#define LFM2_THINK_CLOSE "</think>"
#define LFM2_TOOL_OPEN "<|tool_call_start|>"

/*
 * The prompt for messages (the whole history, as the template path assembles it), tools (the
 * request's; NULL or empty: none) and think (the request's; NULL: absent). A malloc'ed string
 * (length in *len) or NULL with err when out of memory or over limits->max_output_bytes
 * (limits NULL: the template defaults).
 */
char *lfm2_render(const json_t *messages, const json_t *tools, const json_t *think,
                  const corral_template_limits *limits, size_t *len, corral_error *err);
char *lfm2_thinking_render(const json_t *messages, const json_t *tools, const json_t *think,
                           const corral_template_limits *limits, size_t *len,
                           corral_error *err);

#endif

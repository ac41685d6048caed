/*
 * Cohere's North and Command A 2026 chat format (Cohere2 MoE models) as ollama's `cohere`
 * renderer lays it out, for models whose config names it. The prompt opens with a system turn
 * holding the request's leading system message and an "Available Tools" list (written even
 * when empty: each tool's name, description and parameters as spaced JSON, with a null
 * "responses"); every message's text sits between <|START_TEXT|> and <|END_TEXT|> in a turn
 * of its role (later system messages, user; other roles are left out). An assistant turn with
 * calls writes its thinking and an action block of them instead of its text, the call ids
 * renumbered 0, 1, ... across the whole history; a run of tool results is one result block
 * whose ids point back at those numbers (a result whose call is not found keeps its own id).
 * A last assistant message without calls is continued; otherwise a new assistant turn ends
 * the prompt and opens its thinking, closed at once when think is false (it is on unless
 * told not to). Images are the markers the server placed in the text.
 *
 * The answer thinks up to COHERE_THINK_CLOSE, then writes its text between the text marks
 * or its calls in an action block (CORRAL_CALLS_COHERE).
 */
#ifndef CORRAL_TEMPLATE_COHERE_H
#define CORRAL_TEMPLATE_COHERE_H

#include <jansson.h>
#include <stddef.h>

#include "corral/error.h"
#include "template/template.h"

#define COHERE_THINK_OPEN "<|START_THINKING|>"
#define COHERE_THINK_CLOSE "<|END_THINKING|>"
#define COHERE_TOOL_OPEN "<|START_ACTION|>"

/*
 * The prompt for messages (the whole history, as the template path assembles it), tools (the
 * request's; NULL or empty: none) and think (the request's; NULL: absent). A malloc'ed string
 * (length in *len) or NULL with err when out of memory, over limits->max_output_bytes
 * (limits NULL: the template defaults) or for JSON nested past the writer's depth.
 */
char *cohere_render(const json_t *messages, const json_t *tools, const json_t *think,
                    const corral_template_limits *limits, size_t *len, corral_error *err);

#endif

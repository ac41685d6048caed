/*
 * Glimmer's chat format as ollama's `glimmer` renderer lays it out, for models whose config
 * names it. The prompt opens with <|begin_of_text|>, then messages, each <|start|>HEADER
 * <|message|>TEXT and an end (<|eot|>, or <|eom|> where the same speaker goes on). A system
 * message (the default one, with the knowledge cutoff and today's date, when the request has
 * none) says the reasoning strength (think's level; high when unset or true, none when false)
 * unless its text already does ("reasoning effort" in it is renamed so), the offered tools
 * (their namespaces, the names up to the first '.', then each function as spaced JSON) and
 * the valid recipients. An assistant message is its thinking addressed to=self, then each
 * call addressed to its function as an ATEM block (values as text, lists and mappings as
 * spaced JSON), or its text addressed to=user; a tool result is a message from "tool NAME"
 * (its tool_name, else the function of the call its tool_call_id names, else that id); other
 * roles are left out. <|start|>assistant ends the prompt. Images are the markers the server
 * placed in the text (in place of ollama's <|patch|> tokens).
 *
 * The answer is messages of the same form (CORRAL_CALLS_GLIMMER): to=self thinking
 * (GLIMMER_THINK_OPEN, ended by GLIMMER_THINK_CLOSE), calls in GLIMMER_TOOL_OPEN blocks, the
 * rest content.
 */
#ifndef CORRAL_TEMPLATE_GLIMMER_H
#define CORRAL_TEMPLATE_GLIMMER_H

#include <jansson.h>
#include <stddef.h>

#include "corral/error.h"
#include "template/template.h"

#define GLIMMER_THINK_OPEN "to=self<|message|>"
#define GLIMMER_THINK_CLOSE "<|eom|>"
#define GLIMMER_TOOL_OPEN "<atem:function_calls>"

/*
 * The prompt for messages (the whole history, as the template path assembles it), tools (the
 * request's; NULL or empty: none) and think (the request's; NULL: absent), dated today (local
 * time, as ollama dates it). A malloc'ed string (length in *len) or NULL with err when out of
 * memory, over limits->max_output_bytes (limits NULL: the template defaults) or for JSON
 * nested past the writer's depth.
 */
char *glimmer_render(const json_t *messages, const json_t *tools, const json_t *think,
                     const corral_template_limits *limits, size_t *len, corral_error *err);

/* The same, dated date (YYYY-MM-DD) where the default system message says today's. */
char *glimmer_render_dated(const json_t *messages, const json_t *tools, const json_t *think,
                           const char *date, const corral_template_limits *limits, size_t *len,
                           corral_error *err);

#endif

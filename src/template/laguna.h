/*
 * Laguna's chat format (Poolside's Laguna models, architecture laguna): the prompt as ollama's
 * `laguna` renderer lays it out, for models whose config names that renderer (ollama's
 * library files, which carry no chat template) or whose family is laguna and which have no
 * TEMPLATE. Turns are tagged <system>, <user>, <assistant> and <tool_response>, each tag on
 * its own line; an assistant turn opens with its thinking between <think> and </think>, or a
 * bare </think> when it has none; the prompt ends with "<assistant>\n" and "<think>" when
 * thinking is on, "</think>" when it is off. The model's answer splits at those tags as any
 * template's (corral_output_tags: LAGUNA_THINK_OPEN, LAGUNA_THINK_CLOSE).
 *
 * Tools are offered in the system turn (a line of JSON each, then how to call them); Laguna
 * calls as <tool_call>NAME then <arg_key>/<arg_value> pairs, which the output parser reads
 * (CORRAL_CALLS_ARG_PAIRS), and calls already in the history are written in that form.
 *
 * ollama's `poolside-v1` renderer, for Laguna models whose template is Poolside's later one,
 * writes the same turns without the newlines inside their tags and without the call
 * instructions, keeps an earlier answer's thinking only while thinking is on, and always ends
 * with a new assistant turn (a last assistant message is closed, not continued). Its answers
 * split at the same tags and calls read the same way (ollama pairs it with its Laguna parser,
 * the variant that does not continue a last assistant turn), so the prompt's last tag says
 * again whether the answer starts in thinking.
 */
#ifndef CORRAL_TEMPLATE_LAGUNA_H
#define CORRAL_TEMPLATE_LAGUNA_H

#include <jansson.h>
#include <stddef.h>

#include "corral/error.h"
#include "template/template.h"

#define LAGUNA_THINK_OPEN "<think>"
#define LAGUNA_THINK_CLOSE "</think>"

/*
 * The prompt for messages (the whole history, as the template path assembles it) and tools
 * (the request's, NULL or empty: none) with think (true or one of ollama's levels low,
 * medium, high, max: on; absent, false or any other value: off). A malloc'ed string (length
 * in *len) or NULL with err when out of memory or over limits->max_output_bytes (limits
 * NULL: the template defaults).
 */
char *laguna_render(const json_t *messages, const json_t *tools, const json_t *think,
                    const corral_template_limits *limits, size_t *len, corral_error *err);
/* The same in ollama's `poolside-v1` layout. */
char *poolside_v1_render(const json_t *messages, const json_t *tools, const json_t *think,
                         const corral_template_limits *limits, size_t *len, corral_error *err);

#endif

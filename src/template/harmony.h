/*
 * Harmony, the chat format of gpt-oss: the prompt as ollama renders it for these models, and
 * the model's answer split back into thinking (the analysis channel), content (final) and
 * tool calls (a message addressed to=functions.NAME, ended by <|call|>).
 *
 * A harmony conversation is a run of messages "<|start|>HEADER<|message|>TEXT<|end|>", where
 * the header names the author, the channel ("<|channel|>analysis") and maybe a recipient
 * ("to=functions.get_weather"). Tools are declared to the model as TypeScript-like function
 * types in a namespace, whose names must be identifiers: names with other characters are
 * rewritten (harmony_tool_names) in the prompt and mapped back in the answer.
 */
#ifndef CORRAL_TEMPLATE_HARMONY_H
#define CORRAL_TEMPLATE_HARMONY_H

#include <jansson.h>
#include <stddef.h>

#include "corral/error.h"
#include "template/template.h"

/*
 * The prompt for messages (the whole history: system messages, the model's MESSAGEs, the
 * request's, as the template path assembles them) with request's tools and think (absent,
 * a bool, or "low"/"medium"/"high"/"max"). date is the "Current date:" (YYYY-MM-DD); NULL
 * means today, local time. A malloc'ed string (length in *len) or NULL with err when out of
 * memory or over limits->max_output_bytes (limits NULL: the template defaults).
 */
char *harmony_render(const json_t *messages, const json_t *tools, const json_t *think,
                     const char *date, const corral_template_limits *limits, size_t *len,
                     corral_error *err);

/*
 * The identifier each of tools' function names goes by in the prompt (a new array of
 * strings, in tools' order; NULL when out of memory): space, '-' and '.' become '_', other
 * ASCII characters that cannot be in an identifier are dropped (non-ASCII ones are kept), a leading digit gets a '_' before
 * it, nothing left is "unnamed", and a name already taken gets "_2", "_3"...
 */
json_t *harmony_tool_names(const json_t *tools);

/* The harmony splitter behind a corral_output_parser (output.c wraps it). */
typedef struct harmony_parser harmony_parser;

/*
 * A parser of the answer to prompt: it starts in the message the prompt leaves open (after
 * its last "<|start|>": a new assistant message, or a prefilled analysis or final one).
 * tools: the request's (NULL: none), to map rewritten names back. Feeds give thinking,
 * content and completed calls as corral_output_parser_feed describes.
 */
corral_output_parser *harmony_output_parser_create(const char *prompt, const json_t *tools,
                                                   size_t max_bytes);
harmony_parser *harmony_parser_create(const char *prompt, const json_t *tools, size_t max_bytes);
void harmony_parser_free(harmony_parser *parser);
bool harmony_parser_feed(harmony_parser *parser, const char *chunk, size_t n, bool final,
                         corral_output_delta *delta, corral_error *err);

#endif

/*
 * Forced tool calls: a tool_choice that leaves the model no choice but to call ("required",
 * Anthropic's "any", or one function by name) becomes the GBNF grammar the runner's sampler
 * enforces, accepting exactly what the output parser (template.h) reads back as one call of
 * an allowed tool, its arguments following that tool's parameters schema.
 */
#ifndef CORRAL_SERVER_CORE_TOOL_GRAMMAR_H
#define CORRAL_SERVER_CORE_TOOL_GRAMMAR_H

#include <stdbool.h>
#include <stddef.h>

#include "corral/error.h"
#include "server/core/chat_request.h"
#include "template/template.h"

/* Does the request force a call? */
bool tool_choice_forces(const chat_request *req);

/* Force a call of the function name (copied); false when out of memory. */
bool tool_choice_set_named(chat_request *req, const char *name);

/* A forced choice the request cannot meet (with a format too, which would be a second
 * grammar; without tools; naming a function not among them): false with the 400's message.
 * True when the choice is not forced. */
bool tool_choice_check(const chat_request *req, char *message, size_t size);

/*
 * The grammar of one call of the tools in tools (an array of {"function": {"name",
 * "parameters"}}; only the one called name when name is not NULL), written the way tags
 * say the model's template writes calls: its tool tag first (none for bare JSON), then the
 * call object {"name": ..., "arguments" (or the template's "parameters"): {...}} — in a
 * one-element list after "[TOOL_CALLS]" — then the closing tag of an XML-like tag; or, for a
 * family whose calls are not JSON (tags->calls), one call in that family's syntax, which the
 * output parser reads back as a call with the arguments of the tool's schema. malloc'ed, or
 * NULL with err (a 400's message: a tool's parameters the grammar cannot enforce, a syntax it
 * does not know, Cohere's and Glimmer's among them: tool_grammar_cohere,
 * tool_grammar_glimmer).
 */
char *tool_grammar_create(const json_t *tools, const char *name, const corral_output_tags *tags,
                          corral_error *err);

/*
 * A forced call on a harmony model (gpt-oss): the grammar of the called tool's arguments as
 * JSON, and in *header (malloc'ed) the call message's header, which the prompt must end with
 * (control tokens a grammar cannot write). The function is named there before the answer
 * starts, so the choice must leave one: name, or the only tool. NULL with err (a 400's
 * message: several tools to choose from, parameters the grammar cannot enforce).
 */
char *tool_grammar_harmony(const json_t *tools, const char *name, char **header,
                           corral_error *err);

/*
 * A forced call on a Glimmer model: the grammar of the call message's body (the ATEM block of
 * the called tool, as the renderer writes a call), and in *header (malloc'ed) the message's
 * header, " to=NAME<|message|>", which must follow the "<|start|>assistant" the prompt ends
 * with (its <|message|> is a control token a grammar cannot write). As for harmony, the
 * choice must leave one function: name, or the only tool. NULL with err (a 400's message).
 */
char *tool_grammar_glimmer(const json_t *tools, const char *name, char **header,
                           corral_error *err);

/*
 * A forced call on a Cohere model: the grammar of the action's JSON list of one call (of the
 * tools, or of name alone), in its renderer's layout, and in *tail (malloc'ed) what prompt
 * (the rendered one) must be followed by: what closes the block the prompt leaves open (the
 * turn's thinking, closed empty; an assistant's text it continues; after the bare turn a
 * template opens, an empty thinking), then <|START_ACTION|>, which the tail always ends with
 * and which opens the answer: the output parser reads it first. The tags are control tokens in
 * Cohere's vocabularies, which a grammar cannot ask for; once the list is whole, the grammar
 * allows only the end of the answer. NULL with err (a 400's message).
 */
char *tool_grammar_cohere(const json_t *tools, const char *name, const char *prompt,
                          char **tail, corral_error *err);

#endif

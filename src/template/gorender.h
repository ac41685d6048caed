/*
 * What ollama's Go renderers share, for the renderers written after them (glm.h and the
 * others): JSON as they write it into prompts, a request's tool marshalled as ollama's
 * api.Tool struct (its fields in the struct's order, empty optional ones left out, JSON
 * schema values the struct keeps as Go maps with their keys sorted, everything HTML-escaped
 * as Go's encoder does), and the same text with a space after each ':' and ',' outside
 * strings, the form several renderers print tool lists in; Go's strings.TrimSpace; how they
 * read a request's think value and a message's fields.
 */
#ifndef CORRAL_TEMPLATE_GORENDER_H
#define CORRAL_TEMPLATE_GORENDER_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "template/tbuf.h"

/* tool (one member of a request's tools) as Go's json.Marshal writes ollama's api.Tool, or
 * json.MarshalIndent with indent spaces a level (indent >= 0); false when out doesn't take it
 * (full, out of memory, nested past TFMT_MAX_DEPTH). */
bool gorender_tool(tbuf *out, const json_t *tool, int indent);

/* A function's parameters (a tool's function.parameters) as Go writes ollama's
 * api.ToolFunctionParameters. */
bool gorender_parameters(tbuf *out, const json_t *params);

/* A call's arguments (an object; anything else: {}) as Go writes ollama's
 * api.ToolCallFunctionArguments: the client's order, values as gorender_value writes them. */
bool gorender_arguments(tbuf *out, const json_t *args);

/* A value as Go's json.Marshal writes an `any` holding it (a tool call's argument): compact,
 * object keys sorted, HTML-escaped. */
bool gorender_value(tbuf *out, const json_t *v);

/* json[0..n) (JSON text) with a space after each ':' and ',' that is not inside a string. */
bool gorender_spaced(tbuf *out, const char *json, size_t n);

/* gorender_tool's text, spaced as gorender_spaced spaces it; max_bytes bounds the text between. */
bool gorender_tool_spaced(tbuf *out, const json_t *tool, size_t max_bytes);

/* obj's member key when it is a string, else "" (as Go reads a missing field). */
const char *gorender_str(const json_t *obj, const char *key);

/* Whether message m's role is role. */
bool gorender_is_role(const json_t *m, const char *role);

/* s[0..*n) less the white space Go's strings.TrimSpace drops at either end (ASCII and
 * Unicode's White_Space characters); *n becomes the trimmed length. */
const char *gorender_trim(const char *s, size_t *n);

/* think as ollama's ThinkValue.Bool() reads it: true, or a level (low, medium, high, max). */
bool gorender_think_on(const json_t *think);

/* Whether the request set think at all (absent and null are unset, as a nil *ThinkValue). */
bool gorender_think_set(const json_t *think);

#endif

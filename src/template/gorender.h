/*
 * What ollama's Go renderers share, for the renderers written after them (glm.h, deepseek3.h,
 * cogito.h, olmo3.h, lfm2.h): JSON as they write it into prompts (a request's tool marshalled
 * as ollama's api.Tool struct: its fields in the struct's order, empty optional ones left out,
 * the schema values the struct keeps as Go maps with their keys sorted, HTML-escaped as Go's
 * encoder does unless told not to; the same with a space after each ':' and ',' outside
 * strings, the form several renderers print tools in), Go's strings.TrimSpace and key order,
 * how they read a request's think value and a message's fields, and the refusal of a prompt
 * over the limit.
 */
#ifndef CORRAL_TEMPLATE_GORENDER_H
#define CORRAL_TEMPLATE_GORENDER_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "corral/error.h"
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

/* The same texts with a space after each ':' and ',' outside strings, as several renderers
 * print them: a tool, a tool's function alone, and a value as gorender_value writes it; with
 * Go's HTML escaping or without (an encoder told SetEscapeHTML(false)). max_bytes bounds the
 * compact text written first. */
bool gorender_tool_spaced(tbuf *out, const json_t *tool, bool html_escape, size_t max_bytes);
bool gorender_function_spaced(tbuf *out, const json_t *fn, bool html_escape, size_t max_bytes);
bool gorender_value_spaced(tbuf *out, const json_t *v, bool html_escape, size_t max_bytes);

/* A call (a message's tool call) as Python writes one: NAME(KEY=VALUE...), sep between the
 * arguments, their keys sorted, each value as gorender_value writes it, or spaced and not
 * HTML-escaped when spaced (max_bytes bounding the text between). */
bool gorender_python_call(tbuf *out, const json_t *call, const char *sep, bool spaced,
                          size_t max_bytes);

/* The prompt in out when ok (malloc'ed, its length in *len), else NULL with err saying that
 * renderer's prompt ran out of memory, met JSON nested too deep or went over out's limit; out
 * is emptied either way. */
char *gorender_finish(tbuf *out, bool ok, const char *renderer, size_t *len, corral_error *err);

/* obj's keys (an object; anything else: none) in byte order, as Go's sort.Strings orders
 * them: a malloc'ed array of *n borrowed strings, NULL when out of memory. */
const char **gorender_sorted_keys(const json_t *obj, size_t *n);

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

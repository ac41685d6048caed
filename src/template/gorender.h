/*
 * What ollama's Go renderers share, for the built-in renderers that follow them
 * (qwen_render.c, laguna.h, glm.h, deepseek3.h, cogito.h, olmo3.h, lfm2.h, nemotron.h,
 * functiongemma.h, gemma4.h, cohere.h, glimmer.h): JSON as they write it into prompts (a
 * request's tool marshalled as ollama's api.Tool struct: its fields in the struct's order,
 * empty optional ones left out, the schema values the struct keeps as Go maps with their keys
 * sorted, HTML-escaped as Go's encoder does unless told not to; a call's arguments in the
 * client's order; compact, indented, or with a space after each ':' and ',' outside strings,
 * the form several renderers print tools in), Go's strings.TrimSpace, strings.ToUpper and key
 * order, how they read a request's think value and a message's fields (and find the last
 * message of a role), and the refusal of a prompt over the limit.
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

/* A tool's property, or a function's parameters, as ollama's api.ToolProperty or
 * api.ToolFunctionParameters holds it once decoded: a new object of the fields it knows in its
 * order (empty optional ones left out, values of free form with their keys sorted); NULL when
 * out of memory or nested past TFMT_MAX_DEPTH. */
json_t *gorender_property_object(const json_t *property);
json_t *gorender_parameters_object(const json_t *params);

/* A call's arguments (an object; anything else: {}) as Go writes ollama's
 * api.ToolCallFunctionArguments: the client's order, values as gorender_value writes them. */
bool gorender_arguments(tbuf *out, const json_t *args);

/* A value as Go's json.Marshal writes an `any` holding it (a tool call's argument): compact,
 * object keys sorted, HTML-escaped. */
bool gorender_value(tbuf *out, const json_t *v);

/* The same texts with a space after each ':' and ',' outside strings, as several renderers
 * print them: a tool, a tool's function alone, a call's arguments (HTML-escaped), and any
 * value (keys sorted as Go's maps or in their order, as the struct it stands for); with Go's
 * HTML escaping or without (an encoder told SetEscapeHTML(false)). out's limit bounds the
 * compact text written first too. */
bool gorender_tool_spaced(tbuf *out, const json_t *tool, bool html_escape);
bool gorender_function_spaced(tbuf *out, const json_t *fn, bool html_escape);
bool gorender_arguments_spaced(tbuf *out, const json_t *args);
bool gorender_json_spaced(tbuf *out, const json_t *v, bool html_escape, bool sort_keys);

/* A value as ollama's renderers print a call's argument or a tool field with %v: a string as
 * it is, null (or none) as "null", an object or array as gorender_value writes it, anything
 * else as Go's %v. */
bool gorender_value_text(tbuf *out, const json_t *v);

/* A call (a message's tool call) as Python writes one: NAME(KEY=VALUE...), sep between the
 * arguments, their keys sorted, each value as gorender_value writes it, or spaced and not
 * HTML-escaped when spaced. */
bool gorender_python_call(tbuf *out, const json_t *call, const char *sep, bool spaced);

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

/* text less Go's white space at either end, appended to out. */
bool gorender_put_trimmed(tbuf *out, const char *text);

/* text[0..n) appended as Go's strings.ToUpper writes it: each code point's simple upper case,
 * a byte that is not UTF-8 as U+FFFD. */
bool gorender_put_upper(tbuf *out, const char *text, size_t n);

/* The index of the last message of messages[start..] whose role is role, or the number of
 * messages when none has it. */
size_t gorender_last_role(const json_t *messages, size_t start, const char *role);

/* think as ollama's ThinkValue.Bool() reads it: true, or a level (low, medium, high, max). */
bool gorender_think_on(const json_t *think);

/* Whether the request set think at all (absent and null are unset, as a nil *ThinkValue). */
bool gorender_think_set(const json_t *think);

#endif

/*
 * JSON as ollama's built-in renderers write it into prompts (template/renderer.h): Go's
 * encoding/json output with a space after each ':' and ',' outside strings, an offered tool
 * laid out in the field order of ollama's tool structs (unknown fields dropped, empty optional
 * ones left out), and a call's arguments in the order the client gave them. Values of free
 * form (a property's items or enum, nested arguments) are Go maps there: their keys sorted.
 */
#ifndef CORRAL_TEMPLATE_RENDER_JSON_H
#define CORRAL_TEMPLATE_RENDER_JSON_H

#include <jansson.h>
#include <stdbool.h>

#include "template/tbuf.h"

/* v as Go marshals it (keys sorted or in their order), spaced. */
bool render_json_spaced(tbuf *out, const json_t *v, bool sort_keys);

/* A request's tool as ollama's api.Tool marshals, spaced. */
bool render_json_tool(tbuf *out, const json_t *tool);

/* A tool's property, or its parameters, as ollama's structs hold them once decoded (the
 * fields they know, empty optional ones left out; a value of free form sorted); NULL when
 * out of memory or nested too deep. */
json_t *render_json_property(const json_t *property);
json_t *render_json_parameters(const json_t *parameters);

/* A call's arguments object, its own keys in their order and values within sorted, spaced. */
bool render_json_arguments(tbuf *out, const json_t *arguments);

/* A call's argument value as ollama's renderers print one: a string as it is, null as
 * "null", an object or array as compact JSON (keys sorted), anything else as Go's %v. */
bool render_json_argument_value(tbuf *out, const json_t *value);

#endif

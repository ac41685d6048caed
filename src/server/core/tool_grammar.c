/*
 * Forced tool calls as a grammar (tool_grammar.h). The call is itself described as a JSON
 * schema — an object whose "name" is a const and whose arguments are the tool's parameters,
 * one such object per allowed tool under anyOf — and that schema goes through the `format`
 * grammar builder with the template's tags around it. A tool's parameters may hold local
 * $refs ("#/$defs/..."), which point into the parameters: moved into the call schema, they
 * are rewritten to point at the same place there.
 */
#include "server/core/tool_grammar.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/core/format_grammar.h"

/* A forced choice's tools are few; this bounds the work a hostile request can ask for. */
enum { MAX_FORCED_TOOLS = 256 };

bool tool_choice_forces(const chat_request *req)
{
    return req->tool_choice != CHAT_TOOL_CHOICE_AUTO;
}

bool tool_choice_set_named(chat_request *req, const char *name)
{
    char *copy = strdup(name);
    if (!copy)
        return false;
    free(req->tool_choice_name);
    req->tool_choice_name = copy;
    req->tool_choice = CHAT_TOOL_CHOICE_NAMED;
    return true;
}

static const char *tool_name(const json_t *tool)
{
    return json_string_value(json_object_get(json_object_get(tool, "function"), "name"));
}

bool tool_choice_check(const chat_request *req, char *message, size_t size)
{
    if (!tool_choice_forces(req))
        return true;
    const json_t *format = req->format;
    if (format && !json_is_null(format) &&
        !(json_is_string(format) && json_string_length(format) == 0)) { /* one grammar */
        snprintf(message, size, "tool_choice forces a tool call, which a response format cannot "
                                "constrain too: send one or the other");
        return false;
    }
    if (json_array_size(req->tools) == 0) {
        snprintf(message, size, "tool_choice forces a tool call, but the request has no tools");
        return false;
    }
    if (req->tool_choice != CHAT_TOOL_CHOICE_NAMED)
        return true;
    size_t i;
    json_t *tool;
    json_array_foreach(req->tools, i, tool) {
        const char *name = tool_name(tool);
        if (name && strcmp(name, req->tool_choice_name) == 0)
            return true;
    }
    snprintf(message, size, "tool_choice names the tool \"%.200s\", which is not among the tools",
             req->tool_choice_name);
    return false;
}

static bool is_one_of(const char *keyword, const char *const *list, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(keyword, list[i]) == 0)
            return true;
    return false;
}

/* Keywords whose values are JSON data, not schemas: a "$ref" key inside them is data too. */
static bool holds_data(const char *keyword)
{
    static const char *const data[] = {"const", "enum", "default", "examples"};
    return is_one_of(keyword, data, sizeof data / sizeof data[0]);
}

/* Keywords whose values map names to schemas: their keys are names, never keywords (a
 * property may be called "const" or "$ref"). */
static bool holds_names(const char *keyword)
{
    static const char *const maps[] = {"properties", "patternProperties", "$defs", "definitions",
                                       "dependentSchemas"};
    return is_one_of(keyword, maps, sizeof maps / sizeof maps[0]);
}

/*
 * A copy of node (a schema, or with names a map of names to schemas) with each local $ref
 * ("#...") pointing under prefix (a JSON pointer, "/..." escaped already) instead: a new
 * reference, NULL when out of memory.
 */
static json_t *moved_refs(const json_t *node, const char *prefix, bool names)
{
    if (json_is_array(node)) {
        json_t *out = json_array();
        size_t i;
        json_t *item;
        json_array_foreach(node, i, item) {
            json_t *moved = out ? moved_refs(item, prefix, false) : NULL;
            if (!moved || json_array_append_new(out, moved) != 0) {
                json_decref(out);
                return NULL;
            }
        }
        return out;
    }
    if (!json_is_object(node))
        return json_deep_copy(node);
    json_t *out = json_object();
    const char *key;
    json_t *value;
    json_object_foreach((json_t *)node, key, value) {
        const char *ref = !names && strcmp(key, "$ref") == 0 ? json_string_value(value) : NULL;
        json_t *moved = NULL;
        if (ref && ref[0] == '#') {
            size_t n = strlen(prefix) + strlen(ref) + 2;
            char *text = malloc(n);
            if (text) {
                snprintf(text, n, "#%s%s", prefix, ref + 1);
                moved = json_string(text);
            }
            free(text);
        } else if (out) {
            moved = !names && holds_data(key)
                        ? json_deep_copy(value)
                        : moved_refs(value, prefix, !names && holds_names(key));
        }
        if (!out || !moved || json_object_set_new(out, key, moved) != 0) {
            json_decref(moved);
            json_decref(out);
            return NULL;
        }
    }
    return out;
}

/* A tool's parameters as the schema of its arguments: none, null or {} allow any object. */
static json_t *arguments_schema(const json_t *tool)
{
    json_t *parameters = json_object_get(json_object_get(tool, "function"), "parameters");
    if (!json_is_object(parameters) || json_object_size(parameters) == 0)
        return json_pack("{s:s}", "type", "object");
    return json_incref(parameters);
}

/* Can the grammar enforce schema? False with err naming the tool. */
static bool check_parameters(const json_t *schema, const char *name, corral_error *err)
{
    corral_error inner = {{0}};
    char *grammar = format_grammar_from_schema(schema, &inner);
    free(grammar);
    if (grammar)
        return true;
    const char *why = inner.message;
    if (strncmp(why, "format: ", 8) == 0)
        why += 8;
    corral_error_set(err, "tool \"%.200s\": its parameters cannot be enforced for tool_choice: %s",
                     name, why);
    return false;
}

/* The schema of one call of tool, its arguments under key, their $refs moved to at. */
static json_t *call_schema(const json_t *tool, const char *key, const char *at,
                           corral_error *err)
{
    json_t *arguments = arguments_schema(tool);
    if (arguments && !check_parameters(arguments, tool_name(tool), err)) {
        json_decref(arguments);
        return NULL;
    }
    json_t *moved = arguments ? moved_refs(arguments, at, false) : NULL;
    json_decref(arguments);
    json_t *call = moved ? json_pack("{s:s,s:{s:{s:s},s:o},s:[s,s]}", "type", "object",
                                     "properties", "name", "const", tool_name(tool), key, moved,
                                     "required", "name", key)
                         : NULL;
    if (!call)
        corral_error_set(err, "out of memory");
    return call;
}

/* The closing tag of an XML-like tag ("<tool_call>" closes with "</tool_call>"); "" else. */
static void closing_tag(const char *open, char *close, size_t size)
{
    size_t n = strlen(open);
    close[0] = '\0';
    if (n > 2 && open[0] == '<' && open[1] != '/' && open[n - 1] == '>' &&
        !memchr(open + 1, '<', n - 2) && !memchr(open + 1, '>', n - 2))
        snprintf(close, size, "</%s", open + 1);
}

char *tool_grammar_create(const json_t *tools, const char *name, const corral_output_tags *tags,
                          corral_error *err)
{
    const char *key = tags->tool_arguments[0] ? tags->tool_arguments : "arguments";
    const char *open = tags->tool_open;
    /* Mistral's tag is followed by a list of calls; a bare "[" tag is that list itself */
    bool listed = strcmp(open, "[TOOL_CALLS]") == 0 || strcmp(open, "[") == 0;
    bool bare = strcmp(open, "{") == 0 || strcmp(open, "[") == 0;
    json_t *calls = json_array();
    if (!calls) {
        corral_error_set(err, "out of memory");
        return NULL;
    }
    size_t i;
    json_t *tool;
    json_array_foreach(tools, i, tool) {
        if (!tool_name(tool) || (name && strcmp(tool_name(tool), name) != 0))
            continue;
        if (json_array_size(calls) == MAX_FORCED_TOOLS) {
            corral_error_set(err, "tool_choice can force a call among at most %d tools",
                             MAX_FORCED_TOOLS);
            json_decref(calls);
            return NULL;
        }
        char at[64];
        snprintf(at, sizeof at, "%s/anyOf/%zu/properties/%s", listed ? "/items" : "",
                 json_array_size(calls), key);
        json_t *call = call_schema(tool, key, at, err);
        if (!call || json_array_append_new(calls, call) != 0) {
            if (call)
                corral_error_set(err, "out of memory");
            json_decref(calls);
            return NULL;
        }
    }
    if (json_array_size(calls) == 0) {
        json_decref(calls);
        corral_error_set(err, "tool_choice: no tool to call");
        return NULL;
    }
    json_t *one = json_pack("{s:o}", "anyOf", calls);
    json_t *schema = listed && one ? json_pack("{s:s,s:o,s:i,s:i}", "type", "array", "items", one,
                                               "minItems", 1, "maxItems", 1)
                                   : one;
    if (!schema) {
        corral_error_set(err, "out of memory");
        return NULL;
    }
    char close[sizeof tags->tool_open + 1];
    closing_tag(open, close, sizeof close);
    char *grammar = format_grammar_from_schema_between(schema, bare ? "" : open, close, err);
    json_decref(schema);
    return grammar;
}

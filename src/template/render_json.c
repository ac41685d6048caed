/*
 * JSON for built-in renderers (render_json.h): the compact text is written first, in Go's
 * form, then copied with the spaces ollama's renderers add.
 */
#include "template/render_json.h"

#include <string.h>

#include "template/valuefmt.h"

/* Nesting of tool properties within properties (or anyOf) past which a tool is refused: each
 * level is two of JSON's, which its writer caps. */
#define RENDER_JSON_MAX_DEPTH (TFMT_MAX_DEPTH / 2)
/* Most text of one tool property, or of a tool's parameters, read back as ollama's structs
 * hold them. */
#define RENDER_JSON_MAX_STRUCT_BYTES (16u << 20)

static const tjson_style go_sorted = {.html_escape = true, .sort_keys = true, .indent = -1};
static const tjson_style go_ordered = {.html_escape = true, .indent = -1};

/* compact with a space after each ':' and ',' outside strings. */
static bool add_spaces(tbuf *out, const tbuf *compact)
{
    bool in_string = false, escaped = false, ok = true;
    for (size_t i = 0; ok && i < compact->len; i++) {
        char c = compact->data[i];
        ok = tbuf_putc(out, c);
        if (escaped)
            escaped = false;
        else if (in_string && c == '\\')
            escaped = true;
        else if (c == '"')
            in_string = !in_string;
        else if (!in_string && (c == ':' || c == ','))
            ok = ok && tbuf_putc(out, ' ');
    }
    return ok;
}

/* A string member's value as a JSON string; "" when it is not a string. */
static bool put_string(tbuf *out, const json_t *obj, const char *key)
{
    const json_t *v = json_object_get(obj, key);
    if (json_is_string(v))
        return tfmt_json(out, v, &go_sorted);
    return tbuf_puts(out, "\"\"");
}

static bool nonempty_string(const json_t *obj, const char *key)
{
    return json_string_length(json_object_get(obj, key)) > 0;
}

static bool nonempty_array(const json_t *obj, const char *key)
{
    return json_array_size(json_object_get(obj, key)) > 0;
}

/* A member of free form (Go's any, omitted when nil), after a comma. */
static bool any_member(tbuf *out, const json_t *obj, const char *key)
{
    const json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v))
        return true;
    return tbuf_printf(out, ",\"%s\":", key) && tfmt_json(out, v, &go_sorted);
}

static bool properties(tbuf *out, const json_t *props, int depth);

/* A property (api.ToolProperty): every field optional, in the struct's order. */
static bool property(tbuf *out, const json_t *p, int depth)
{
    if (depth > RENDER_JSON_MAX_DEPTH)
        return false;
    bool ok = tbuf_putc(out, '{');
    const char *sep = "";
    if (nonempty_array(p, "anyOf")) {
        ok = ok && tbuf_puts(out, "\"anyOf\":[");
        size_t i;
        const json_t *alt;
        json_array_foreach(json_object_get(p, "anyOf"), i, alt)
            ok = ok && (i == 0 || tbuf_putc(out, ',')) && property(out, alt, depth + 1);
        ok = ok && tbuf_putc(out, ']');
        sep = ",";
    }
    /* a type is a string, or an array of them written as one string when it has one */
    const json_t *type = json_object_get(p, "type");
    if (json_is_array(type) && json_array_size(type) == 1)
        type = json_array_get(type, 0);
    if (json_string_length(type) > 0 || json_array_size(type) > 1) {
        ok = ok && tbuf_printf(out, "%s\"type\":", sep) && tfmt_json(out, type, &go_sorted);
        sep = ",";
    }
    static const char *const rest[] = {"items", "description", "enum", "properties", "required"};
    for (size_t k = 0; k < sizeof rest / sizeof *rest; k++) {
        const char *key = rest[k];
        const json_t *v = json_object_get(p, key);
        bool present = strcmp(key, "description") == 0 ? nonempty_string(p, key)
                       : strcmp(key, "enum") == 0 || strcmp(key, "required") == 0
                           ? nonempty_array(p, key)
                           : v && !json_is_null(v);
        if (!present)
            continue;
        ok = ok && tbuf_printf(out, "%s\"%s\":", sep, key) &&
             (strcmp(key, "properties") == 0 ? properties(out, v, depth + 1)
                                             : tfmt_json(out, v, &go_sorted));
        sep = ",";
    }
    return ok && tbuf_putc(out, '}');
}

/* An object's members in its order, each value written by value (at depth). */
static bool members(tbuf *out, const json_t *obj, bool (*value)(tbuf *, const json_t *, int),
                    int depth)
{
    bool ok = tbuf_putc(out, '{');
    bool first = true;
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)obj, key, v) {
        json_t *name = json_string(key);
        ok = ok && name && (first || tbuf_putc(out, ',')) && tfmt_json(out, name, &go_sorted) &&
             tbuf_putc(out, ':') && value(out, v, depth);
        json_decref(name);
        first = false;
    }
    return ok && tbuf_putc(out, '}');
}

/* The properties map in the client's order; null when there is none. */
static bool properties(tbuf *out, const json_t *props, int depth)
{
    return json_is_object(props) ? members(out, props, property, depth) : tbuf_puts(out, "null");
}

/* api.ToolFunctionParameters: type, $defs, items, required, properties. */
static bool parameters_compact(tbuf *out, const json_t *params)
{
    bool ok = tbuf_puts(out, "{\"type\":") && put_string(out, params, "type") &&
              any_member(out, params, "$defs") && any_member(out, params, "items");
    if (nonempty_array(params, "required"))
        ok = ok && tbuf_puts(out, ",\"required\":") &&
             tfmt_json(out, json_object_get(params, "required"), &go_sorted);
    return ok && tbuf_puts(out, ",\"properties\":") &&
           properties(out, json_object_get(params, "properties"), 0) && tbuf_putc(out, '}');
}

/* api.Tool: type, items, function (name, description, parameters). */
static bool tool_compact(tbuf *out, const json_t *tool)
{
    const json_t *fn = json_object_get(tool, "function");
    bool ok = tbuf_puts(out, "{\"type\":") && put_string(out, tool, "type") &&
              any_member(out, tool, "items") && tbuf_puts(out, ",\"function\":{\"name\":") &&
              put_string(out, fn, "name");
    if (nonempty_string(fn, "description"))
        ok = ok && tbuf_puts(out, ",\"description\":") && put_string(out, fn, "description");
    return ok && tbuf_puts(out, ",\"parameters\":") &&
           parameters_compact(out, json_object_get(fn, "parameters")) && tbuf_puts(out, "}}");
}

static bool property_compact(tbuf *out, const json_t *p)
{
    return property(out, p, 0);
}

/* what(arg)'s compact text read back as a value, NULL when it fails. */
static json_t *reread(bool (*what)(tbuf *, const json_t *), const json_t *arg)
{
    tbuf compact;
    tbuf_init(&compact, RENDER_JSON_MAX_STRUCT_BYTES);
    json_t *v = what(&compact, arg) ? json_loadb(compact.data, compact.len, 0, NULL) : NULL;
    tbuf_free(&compact);
    return v;
}

json_t *render_json_property(const json_t *property)
{
    return reread(property_compact, property);
}

json_t *render_json_parameters(const json_t *parameters)
{
    return reread(parameters_compact, parameters);
}

/* A value of free form: a Go map's keys sorted. */
static bool free_value(tbuf *out, const json_t *v, int depth)
{
    (void)depth;
    return tfmt_json(out, v, &go_sorted);
}

static bool arguments_compact(tbuf *out, const json_t *arguments)
{
    return members(out, arguments, free_value, 0);
}

/* what(compact, arg) written into a scratch buffer, then spaced into out. */
static bool spaced(tbuf *out, bool (*what)(tbuf *, const json_t *), const json_t *arg)
{
    tbuf compact;
    tbuf_init(&compact, out->max_bytes);
    bool ok = what(&compact, arg) && add_spaces(out, &compact);
    tbuf_free(&compact);
    return ok;
}

static bool sorted_compact(tbuf *out, const json_t *v)
{
    return tfmt_json(out, v, &go_sorted);
}

static bool ordered_compact(tbuf *out, const json_t *v)
{
    return tfmt_json(out, v, &go_ordered);
}

bool render_json_spaced(tbuf *out, const json_t *v, bool sort_keys)
{
    return spaced(out, sort_keys ? sorted_compact : ordered_compact, v);
}

bool render_json_tool(tbuf *out, const json_t *tool)
{
    return spaced(out, tool_compact, tool);
}

bool render_json_arguments(tbuf *out, const json_t *arguments)
{
    return spaced(out, arguments_compact, arguments);
}

bool render_json_argument_value(tbuf *out, const json_t *value)
{
    if (json_is_string(value))
        return tbuf_append(out, json_string_value(value), json_string_length(value));
    if (!value || json_is_null(value))
        return tbuf_puts(out, "null");
    if (json_is_object(value) || json_is_array(value))
        return tfmt_json(out, value, &go_sorted);
    return tfmt_go(out, value);
}

/*
 * What ollama's renderers share (gorender.h). A tool is rebuilt as a jansson object whose members
 * are inserted in api.Tool's field order, so that one unsorted write prints it as Go does;
 * the struct's `any` fields (items, $defs, enum values) are copied with their keys inserted
 * in sorted order, as Go prints maps.
 */
#include "template/gorender.h"

#include <stdlib.h>
#include <string.h>

#include <utf8proc.h>

#include "template/valuefmt.h"

static int key_order(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

const char **gorender_sorted_keys(const json_t *obj, size_t *n)
{
    *n = json_object_size(obj);
    const char **keys = malloc((*n ? *n : 1) * sizeof *keys);
    size_t k = 0;
    const char *key;
    const json_t *member;
    if (!keys)
        return NULL;
    json_object_foreach((json_t *)obj, key, member) keys[k++] = key;
    qsort(keys, *n, sizeof *keys, key_order);
    return keys;
}

/* v with every object's keys inserted in sorted order (a new reference); NULL when out of
 * memory or nested past TFMT_MAX_DEPTH. */
static json_t *sorted_copy(const json_t *v, int depth)
{
    if (depth > TFMT_MAX_DEPTH)
        return NULL;
    if (json_is_array(v)) {
        json_t *a = json_array();
        size_t i;
        const json_t *e;
        json_array_foreach(v, i, e) {
            if (!a || json_array_append_new(a, sorted_copy(e, depth + 1)) != 0) {
                json_decref(a);
                return NULL;
            }
        }
        return a;
    }
    if (!json_is_object(v))
        return json_incref((json_t *)v);
    size_t n;
    const char **keys = gorender_sorted_keys(v, &n);
    json_t *o = json_object();
    bool ok = keys && o;
    for (size_t i = 0; ok && i < n; i++)
        ok = json_object_set_new(o, keys[i],
                                 sorted_copy(json_object_get(v, keys[i]), depth + 1)) == 0;
    free(keys);
    if (!ok) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* An `any` field: left out when absent or null (Go's nil), else its sorted copy. */
static bool put_any(json_t *to, const char *key, const json_t *v, int depth)
{
    return !v || json_is_null(v) || json_object_set_new(to, key, sorted_copy(v, depth)) == 0;
}

/* A string field: left out when empty and omitempty, "" when absent and not. */
static bool put_string(json_t *to, const char *key, const json_t *v, bool omitempty)
{
    const char *s = json_string_value(v);
    if (omitempty && (!s || !*s))
        return true;
    return json_object_set_new(to, key, json_string(s ? s : "")) == 0;
}

/* A slice field with omitempty: left out unless a non-empty array. */
static bool put_list(json_t *to, const char *key, const json_t *v, int depth)
{
    return json_array_size(v) == 0 || json_object_set_new(to, key, sorted_copy(v, depth)) == 0;
}

static json_t *property(const json_t *p, int depth);

/* A properties map: each property in the client's order; NULL when out of memory. */
static json_t *properties(const json_t *props, int depth)
{
    json_t *o = json_object();
    const char *key;
    const json_t *p;
    json_object_foreach((json_t *)props, key, p) {
        if (!o || json_object_set_new(o, key, property(p, depth + 1)) != 0) {
            json_decref(o);
            return NULL;
        }
    }
    return o;
}

/* One schema property in api.ToolProperty's order: anyOf, type (one type as a string, more
 * as a list), items, description, enum, properties, required. */
static json_t *property(const json_t *p, int depth)
{
    if (depth > TFMT_MAX_DEPTH)
        return NULL;
    json_t *o = json_object();
    bool ok = o != NULL;
    const json_t *any_of = json_object_get(p, "anyOf");
    if (ok && json_array_size(any_of) > 0) {
        json_t *list = json_array();
        size_t i;
        const json_t *e;
        ok = list != NULL;
        json_array_foreach(any_of, i, e) ok =
            ok && json_array_append_new(list, property(e, depth + 1)) == 0;
        ok = json_object_set_new(o, "anyOf", list) == 0 && ok;
    }
    const json_t *type = json_object_get(p, "type");
    if (ok && json_is_string(type))
        ok = json_object_set(o, "type", (json_t *)type) == 0;
    else if (ok && json_array_size(type) == 1)
        ok = json_object_set(o, "type", json_array_get(type, 0)) == 0;
    else if (ok && json_array_size(type) > 1)
        ok = put_list(o, "type", type, depth + 1);
    ok = ok && put_any(o, "items", json_object_get(p, "items"), depth + 1) &&
         put_string(o, "description", json_object_get(p, "description"), true) &&
         put_list(o, "enum", json_object_get(p, "enum"), depth + 1);
    const json_t *props = json_object_get(p, "properties");
    if (ok && json_is_object(props))
        ok = json_object_set_new(o, "properties", properties(props, depth)) == 0;
    ok = ok && put_list(o, "required", json_object_get(p, "required"), depth + 1);
    if (!ok) {
        json_decref(o);
        return NULL;
    }
    return o;
}

json_t *gorender_property_object(const json_t *p)
{
    return property(p, 0);
}

/* A function's parameters in api.ToolFunctionParameters' order: type, $defs, items, required,
 * properties (null when it has none). */
json_t *gorender_parameters_object(const json_t *params)
{
    const json_t *props = json_object_get(params, "properties");
    json_t *p = json_object();
    bool ok = p && put_string(p, "type", json_object_get(params, "type"), false) &&
              put_any(p, "$defs", json_object_get(params, "$defs"), 1) &&
              put_any(p, "items", json_object_get(params, "items"), 1) &&
              put_list(p, "required", json_object_get(params, "required"), 1) &&
              json_object_set_new(p, "properties",
                                  json_is_object(props) ? properties(props, 1) : json_null()) == 0;
    if (!ok) {
        json_decref(p);
        return NULL;
    }
    return p;
}

/* A function in api.ToolFunction's order: name, description, parameters. */
static json_t *function_object(const json_t *fn)
{
    const json_t *params = json_object_get(fn, "parameters");
    json_t *f = json_object();
    bool ok = f && put_string(f, "name", json_object_get(fn, "name"), false) &&
              put_string(f, "description", json_object_get(fn, "description"), true) &&
              json_object_set_new(f, "parameters", gorender_parameters_object(params)) == 0;
    if (!ok) {
        json_decref(f);
        return NULL;
    }
    return f;
}

/* tool in api.Tool's order: type, items, function. */
static json_t *tool_object(const json_t *tool)
{
    json_t *t = json_object();
    bool ok = t && put_string(t, "type", json_object_get(tool, "type"), false) &&
              put_any(t, "items", json_object_get(tool, "items"), 1) &&
              json_object_set_new(t, "function",
                                  function_object(json_object_get(tool, "function"))) == 0;
    if (!ok) {
        json_decref(t);
        return NULL;
    }
    return t;
}

/* v (NULL: out of memory) written as Go writes the struct it stands for (indent < 0: on one
 * line), then released. */
static bool put_object(tbuf *out, json_t *v, int indent)
{
    const tjson_style style = {.html_escape = true, .indent = indent};
    bool ok = v && tfmt_json(out, v, &style);
    json_decref(v);
    return ok;
}

bool gorender_parameters(tbuf *out, const json_t *params)
{
    return put_object(out, gorender_parameters_object(params), -1);
}

/* A call's arguments in the client's order, each value's keys sorted; NULL when out of
 * memory. */
static json_t *arguments_object(const json_t *args)
{
    json_t *o = json_object();
    const char *key;
    const json_t *value;
    bool ok = o != NULL;
    json_object_foreach((json_t *)args, key, value) ok =
        ok && json_object_set_new(o, key, sorted_copy(value, 1)) == 0;
    if (!ok) {
        json_decref(o);
        return NULL;
    }
    return o;
}

bool gorender_arguments(tbuf *out, const json_t *args)
{
    return put_object(out, arguments_object(args), -1);
}

bool gorender_tool(tbuf *out, const json_t *tool, int indent)
{
    return put_object(out, tool_object(tool), indent);
}

bool gorender_value(tbuf *out, const json_t *v)
{
    const tjson_style style = {.html_escape = true, .sort_keys = true, .indent = -1};
    return tfmt_json(out, v, &style);
}

/* json[0..n) with a space after each ':' and ',' that is not inside a string. */
static bool spaced(tbuf *out, const char *json, size_t n)
{
    bool ok = true, in_string = false, escaped = false;
    for (size_t i = 0; ok && i < n; i++) {
        char c = json[i];
        ok = tbuf_putc(out, c);
        if (in_string) {
            if (escaped)
                escaped = false;
            else if (c == '\\')
                escaped = true;
            else if (c == '"')
                in_string = false;
        } else if (c == '"') {
            in_string = true;
        } else if (c == ':' || c == ',') {
            ok = ok && tbuf_putc(out, ' ');
        }
    }
    return ok;
}

/* v (NULL: out of memory) written spaced, then released; out's limit bounds the compact text
 * between too. */
static bool put_spaced(tbuf *out, json_t *v, bool html_escape, bool sort_keys)
{
    const tjson_style style = {.html_escape = html_escape, .sort_keys = sort_keys, .indent = -1};
    tbuf compact;
    tbuf_init(&compact, out->max_bytes);
    bool ok = v && tfmt_json(&compact, v, &style) && spaced(out, compact.data, compact.len);
    tbuf_free(&compact);
    json_decref(v);
    return ok;
}

bool gorender_tool_spaced(tbuf *out, const json_t *tool, bool html_escape)
{
    return put_spaced(out, tool_object(tool), html_escape, false);
}

bool gorender_function_spaced(tbuf *out, const json_t *fn, bool html_escape)
{
    return put_spaced(out, function_object(fn), html_escape, false);
}

bool gorender_arguments_spaced(tbuf *out, const json_t *args)
{
    return put_spaced(out, arguments_object(args), true, false);
}

bool gorender_json_spaced(tbuf *out, const json_t *v, bool html_escape, bool sort_keys)
{
    return put_spaced(out, json_incref((json_t *)v), html_escape, sort_keys);
}

bool gorender_value_text(tbuf *out, const json_t *v)
{
    if (json_is_string(v))
        return tbuf_append(out, json_string_value(v), json_string_length(v));
    if (!v || json_is_null(v))
        return tbuf_puts(out, "null");
    if (json_is_object(v) || json_is_array(v))
        return gorender_value(out, v);
    return tfmt_go(out, v);
}

bool gorender_python_call(tbuf *out, const json_t *call, const char *sep, bool spaced)
{
    const json_t *fn = json_object_get(call, "function"), *args = json_object_get(fn, "arguments");
    size_t n;
    const char **keys = gorender_sorted_keys(args, &n);
    if (!keys)
        return false;
    bool ok = tbuf_puts(out, gorender_str(fn, "name")) && tbuf_putc(out, '(');
    for (size_t i = 0; ok && i < n; i++) {
        const json_t *value = json_object_get(args, keys[i]);
        ok = (i == 0 || tbuf_puts(out, sep)) && tbuf_puts(out, keys[i]) && tbuf_putc(out, '=') &&
             (spaced ? gorender_json_spaced(out, value, false, true)
                     : gorender_value(out, value));
    }
    free(keys);
    return ok && tbuf_putc(out, ')');
}

/* The length of the Unicode White_Space character at s (n bytes left), 0 when none. */
static size_t space_at(const unsigned char *s, size_t n)
{
    if (n >= 1 && (s[0] == ' ' || (s[0] >= '\t' && s[0] <= '\r')))
        return 1;
    if (n >= 2 && s[0] == 0xc2 && (s[1] == 0x85 || s[1] == 0xa0))
        return 2;
    if (n < 3)
        return 0;
    unsigned cp = ((s[0] & 0x0fu) << 12) | ((s[1] & 0x3fu) << 6) | (s[2] & 0x3fu);
    bool three = (s[0] & 0xf0) == 0xe0 && (s[1] & 0xc0) == 0x80 && (s[2] & 0xc0) == 0x80;
    return three && (cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 ||
                     cp == 0x2029 || cp == 0x202f || cp == 0x205f || cp == 0x3000)
               ? 3
               : 0;
}

/* The length of the White_Space character ending at s + n, 0 when none. */
static size_t space_before(const unsigned char *s, size_t n)
{
    for (size_t k = 1; k <= 3 && k <= n; k++)
        if (space_at(s + n - k, k) == k)
            return k;
    return 0;
}

const char *gorender_trim(const char *s, size_t *n)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t b = 0, e = *n, k;
    while (b < e && (k = space_at(u + b, e - b)) > 0)
        b += k;
    while (e > b && (k = space_before(u + b, e - b)) > 0)
        e -= k;
    *n = e - b;
    return s + b;
}

bool gorender_put_trimmed(tbuf *out, const char *text)
{
    size_t n = strlen(text);
    const char *s = gorender_trim(text, &n);
    return tbuf_append(out, s, n);
}

size_t gorender_last_role(const json_t *messages, size_t start, const char *role)
{
    size_t n = json_array_size(messages);
    for (size_t i = n; i-- > start;)
        if (gorender_is_role(json_array_get(messages, i), role))
            return i;
    return n;
}

bool gorender_think_on(const json_t *think)
{
    static const char *const levels[] = {"low", "medium", "high", "max"};
    if (json_is_boolean(think))
        return json_is_true(think);
    for (size_t i = 0; json_is_string(think) && i < sizeof levels / sizeof *levels; i++)
        if (strcmp(json_string_value(think), levels[i]) == 0)
            return true;
    return false;
}

bool gorender_think_set(const json_t *think)
{
    return think && !json_is_null(think);
}

const char *gorender_str(const json_t *obj, const char *key)
{
    const char *s = json_string_value(json_object_get(obj, key));
    return s ? s : "";
}

bool gorender_is_role(const json_t *m, const char *role)
{
    return strcmp(gorender_str(m, "role"), role) == 0;
}

char *gorender_finish(tbuf *out, bool ok, const char *renderer, size_t *len, corral_error *err)
{
    if (ok)
        return tbuf_take(out, len);
    corral_error_set(err, "%s prompt: out of memory, JSON nested past %d levels or longer than "
                          "%zu bytes", renderer, TFMT_MAX_DEPTH, out->max_bytes);
    tbuf_free(out);
    return NULL;
}

bool gorender_put_upper(tbuf *out, const char *text, size_t n)
{
    const utf8proc_uint8_t *s = (const utf8proc_uint8_t *)text;
    bool ok = true;
    for (size_t i = 0; ok && i < n;) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t k = utf8proc_iterate(s + i, (utf8proc_ssize_t)(n - i), &cp);
        if (k <= 0) {
            cp = 0xfffd;
            k = 1;
        }
        utf8proc_uint8_t enc[4];
        utf8proc_ssize_t m = utf8proc_encode_char(utf8proc_toupper(cp), enc);
        ok = tbuf_append(out, (const char *)enc, (size_t)m);
        i += (size_t)k;
    }
    return ok;
}

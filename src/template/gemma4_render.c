/*
 * The Gemma 4 prompt (gemma4.h), laid out as ollama's `gemma4` and `gemma4-large` renderers
 * lay it out. A tool's declaration follows the shape ollama gives it: each top-level property
 * is first read as ollama's typed property (a union of types becomes one string such as
 * "['STRING', 'NULL']", a simple anyOf of bare types becomes such a union, fields it does not
 * know are dropped), then written as a schema map, whose items and nested maps are written as
 * the client sent them. Property names that are schema keywords (description, type,
 * properties, required, nullable) are left out, as Gemma's template leaves them out.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>


#include "template/gemma4.h"
#include "template/gorender.h"
#include "template/tbuf.h"
#include "template/valuefmt.h"

#define Q "<|\"|>" /* Gemma's string mark */
#define THOUGHT "<|channel>thought\n"

/* A JSON number as Go's float64 prints in Gemma's values: whole numbers in int64's range as
 * integers, others as %v. */
static bool put_number(tbuf *out, const json_t *v)
{
    double d = json_is_integer(v) ? (double)json_integer_value(v) : json_real_value(v);
    if (d >= -9223372036854775808.0 && d < 9223372036854775808.0 && d == trunc(d))
        return tbuf_printf(out, "%lld", (long long)d);
    return tfmt_go_float(out, d);
}

/* v in Gemma's value syntax: strings between marks, objects with their keys sorted, bare
 * (a call's arguments) or between marks (quote_keys: a schema's values). */
static bool put_value(tbuf *out, const json_t *v, bool quote_keys, int depth)
{
    if (depth > TFMT_MAX_DEPTH)
        return false;
    if (json_is_string(v))
        return tbuf_puts(out, Q) &&
               tbuf_append(out, json_string_value(v), json_string_length(v)) &&
               tbuf_puts(out, Q);
    if (json_is_number(v))
        return put_number(out, v);
    if (json_is_boolean(v))
        return tbuf_puts(out, json_is_true(v) ? "true" : "false");
    if (json_is_array(v)) {
        bool ok = tbuf_putc(out, '[');
        for (size_t i = 0; ok && i < json_array_size(v); i++)
            ok = (i == 0 || tbuf_putc(out, ',')) &&
                 put_value(out, json_array_get(v, i), quote_keys, depth + 1);
        return ok && tbuf_putc(out, ']');
    }
    if (!json_is_object(v))
        return tbuf_puts(out, "null");
    size_t n;
    const char **keys = gorender_sorted_keys(v, &n);
    bool ok = keys && tbuf_putc(out, '{');
    for (size_t i = 0; ok && i < n; i++)
        ok = (i == 0 || tbuf_putc(out, ',')) &&
             (quote_keys ? tbuf_puts(out, Q) && tbuf_puts(out, keys[i]) && tbuf_puts(out, Q)
                         : tbuf_puts(out, keys[i])) &&
             tbuf_putc(out, ':') && put_value(out, json_object_get(v, keys[i]), quote_keys,
                                              depth + 1);
    free(keys);
    return ok && tbuf_putc(out, '}');
}

/* v as Go's %v prints a decoded JSON value (an enum's member). */
static bool put_go_v(tbuf *out, const json_t *v, int depth)
{
    if (depth > TFMT_MAX_DEPTH)
        return false;
    if (json_is_string(v))
        return tbuf_append(out, json_string_value(v), json_string_length(v));
    if (json_is_number(v))
        return tfmt_go_float(out, json_number_value(v));
    if (json_is_boolean(v))
        return tbuf_puts(out, json_is_true(v) ? "true" : "false");
    if (json_is_array(v)) {
        bool ok = tbuf_putc(out, '[');
        for (size_t i = 0; ok && i < json_array_size(v); i++)
            ok = (i == 0 || tbuf_putc(out, ' ')) && put_go_v(out, json_array_get(v, i), depth + 1);
        return ok && tbuf_putc(out, ']');
    }
    if (!json_is_object(v))
        return tbuf_puts(out, "<nil>");
    size_t n;
    const char **keys = gorender_sorted_keys(v, &n);
    bool ok = keys && tbuf_puts(out, "map[");
    for (size_t i = 0; ok && i < n; i++)
        ok = (i == 0 || tbuf_putc(out, ' ')) && tbuf_puts(out, keys[i]) && tbuf_putc(out, ':') &&
             put_go_v(out, json_object_get(v, keys[i]), depth + 1);
    free(keys);
    return ok && tbuf_putc(out, ']');
}

/* The strings of a list (its other members skipped), or a lone string, between marks and
 * commas. */
static bool put_string_list(tbuf *out, const json_t *list, bool upper)
{
    bool ok = true, first = true;
    for (size_t i = 0; ok && i < (json_is_array(list) ? json_array_size(list) : 1); i++) {
        const json_t *s = json_is_array(list) ? json_array_get(list, i) : list;
        if (!json_is_string(s))
            continue;
        ok = (first || tbuf_putc(out, ',')) && tbuf_puts(out, Q) &&
             (upper ? gorender_put_upper(out, json_string_value(s), json_string_length(s))
                    : tbuf_append(out, json_string_value(s), json_string_length(s))) &&
             tbuf_puts(out, Q);
        first = false;
    }
    return ok;
}

/* How many strings v holds: 1 for a string, a list's strings, else none. */
static size_t string_count(const json_t *v)
{
    if (json_is_string(v))
        return 1;
    size_t n = 0;
    for (size_t i = 0; i < json_array_size(v); i++)
        n += json_is_string(json_array_get(v, i));
    return n;
}

/* type:... for a type field naming at least one type: one upper-cased between marks, more in
 * a list. */
static bool put_type(tbuf *out, const json_t *type)
{
    if (string_count(type) == 1)
        return tbuf_puts(out, "type:") && put_string_list(out, type, true);
    return tbuf_puts(out, "type:[") && put_string_list(out, type, true) && tbuf_putc(out, ']');
}

/* The first type a type field names, upper-cased, is word. */
static bool first_type_is(const json_t *type, const char *word, size_t max_bytes)
{
    const json_t *first = type;
    for (size_t i = 0; json_is_array(type) && i < json_array_size(type); i++)
        if (json_is_string(first = json_array_get(type, i)))
            break;
    if (!json_is_string(first))
        return false;
    tbuf upper;
    tbuf_init(&upper, max_bytes);
    bool is = gorender_put_upper(&upper, json_string_value(first), json_string_length(first)) &&
              upper.len == strlen(word) && memcmp(upper.data, word, upper.len) == 0;
    tbuf_free(&upper);
    return is;
}

static bool is_schema_keyword(const char *key)
{
    static const char *const words[] = {"description", "type", "properties", "required",
                                        "nullable"};
    for (size_t i = 0; i < sizeof words / sizeof *words; i++)
        if (strcmp(key, words[i]) == 0)
            return true;
    return false;
}

/* A comma before the next field when one was written; *wrote becomes true. */
static bool comma(tbuf *out, bool *wrote)
{
    bool ok = !*wrote || tbuf_putc(out, ',');
    *wrote = true;
    return ok;
}

static bool put_items(tbuf *out, const json_t *items, int depth);

/* A schema's properties (name -> schema map; members that are not maps left out). */
static bool put_properties(tbuf *out, const json_t *props, int depth)
{
    if (depth > TFMT_MAX_DEPTH)
        return false;
    size_t n;
    const char **keys = gorender_sorted_keys(props, &n);
    bool ok = keys != NULL, first = true;
    size_t max = out->max_bytes;
    for (size_t i = 0; ok && i < n; i++) {
        const json_t *p = json_object_get(props, keys[i]);
        if (is_schema_keyword(keys[i]) || !json_is_object(p))
            continue;
        ok = (first || tbuf_putc(out, ',')) && tbuf_puts(out, keys[i]) && tbuf_puts(out, ":{");
        first = false;
        bool wrote = false;
        const json_t *desc = json_object_get(p, "description"), *type = json_object_get(p, "type");
        const json_t *enums = json_object_get(p, "enum"), *items = json_object_get(p, "items");
        const json_t *nested = json_object_get(p, "properties");
        const json_t *required = json_object_get(p, "required");
        if (ok && json_string_length(desc) > 0)
            ok = comma(out, &wrote) && tbuf_puts(out, "description:" Q) &&
                 tbuf_append(out, json_string_value(desc), json_string_length(desc)) &&
                 tbuf_puts(out, Q);
        if (ok && first_type_is(type, "STRING", max) && json_array_size(enums) > 0) {
            ok = comma(out, &wrote) && tbuf_puts(out, "enum:[");
            for (size_t k = 0; ok && k < json_array_size(enums); k++)
                ok = (k == 0 || tbuf_putc(out, ',')) && tbuf_puts(out, Q) &&
                     put_go_v(out, json_array_get(enums, k), depth + 1) && tbuf_puts(out, Q);
            ok = ok && tbuf_putc(out, ']');
        }
        if (ok && first_type_is(type, "ARRAY", max) && json_object_size(items) > 0)
            ok = comma(out, &wrote) && tbuf_puts(out, "items:{") &&
                 put_items(out, items, depth + 1) && tbuf_putc(out, '}');
        if (ok && json_is_true(json_object_get(p, "nullable")))
            ok = comma(out, &wrote) && tbuf_puts(out, "nullable:true");
        if (ok && first_type_is(type, "OBJECT", max)) {
            /* without properties of its own, the map's other members stand for them */
            ok = comma(out, &wrote) && tbuf_puts(out, "properties:{") &&
                 put_properties(out, json_is_object(nested) ? nested : p, depth + 1) &&
                 tbuf_putc(out, '}');
            if (ok && string_count(required) > 0 && json_is_array(required))
                ok = comma(out, &wrote) && tbuf_puts(out, "required:[") &&
                     put_string_list(out, required, false) && tbuf_putc(out, ']');
        }
        if (ok && string_count(type) > 0)
            ok = (!wrote || tbuf_putc(out, ',')) && put_type(out, type);
        ok = ok && tbuf_putc(out, '}');
    }
    free(keys);
    return ok;
}

/* An array's items map: its members sorted (null ones left out), the schema keywords in
 * Gemma's form and any other member as a value. */
static bool put_items(tbuf *out, const json_t *items, int depth)
{
    if (depth > TFMT_MAX_DEPTH)
        return false;
    size_t n;
    const char **keys = gorender_sorted_keys(items, &n);
    bool ok = keys != NULL, first = true;
    for (size_t i = 0; ok && i < n; i++) {
        const json_t *v = json_object_get(items, keys[i]);
        if (json_is_null(v))
            continue;
        ok = first || tbuf_putc(out, ',');
        first = false;
        if (!ok)
            break;
        if (strcmp(keys[i], "properties") == 0)
            ok = tbuf_puts(out, "properties:{") &&
                 (!json_is_object(v) || put_properties(out, v, depth + 1)) && tbuf_putc(out, '}');
        else if (strcmp(keys[i], "required") == 0)
            ok = tbuf_puts(out, "required:[") &&
                 (!json_is_array(v) || put_string_list(out, v, false)) && tbuf_putc(out, ']');
        else if (strcmp(keys[i], "type") == 0)
            ok = string_count(v) == 0 || put_type(out, v); /* no type: the comma alone */
        else
            ok = tbuf_puts(out, keys[i]) && tbuf_putc(out, ':') &&
                 put_value(out, v, true, depth + 1);
    }
    free(keys);
    return ok;
}

/* Whether an anyOf member is a bare type (a type and nothing else ollama's property
 * holds). */
static bool bare_type(const json_t *p)
{
    const json_t *items = json_object_get(p, "items"), *props = json_object_get(p, "properties");
    return string_count(json_object_get(p, "type")) > 0 &&
           json_array_size(json_object_get(p, "anyOf")) == 0 &&
           (!items || json_is_null(items)) && (!props || json_is_null(props)) &&
           json_string_length(json_object_get(p, "description")) == 0 &&
           json_array_size(json_object_get(p, "enum")) == 0 &&
           json_array_size(json_object_get(p, "required")) == 0;
}

/* The strings of type (a string or a list) added to types, each once. */
static bool add_types(json_t *types, const json_t *type)
{
    bool ok = true;
    for (size_t i = 0; ok && i < (json_is_array(type) ? json_array_size(type) : 1); i++) {
        json_t *t = json_is_array(type) ? json_array_get(type, i) : (json_t *)type;
        bool seen = !json_is_string(t);
        for (size_t k = 0; !seen && k < json_array_size(types); k++)
            seen = json_equal(json_array_get(types, k), t);
        ok = seen || json_array_append(types, t) == 0;
    }
    return ok;
}

/* A property's type as ollama's typed form holds it: its types (or a simple anyOf's, the
 * members' types each once), one as it is, more as one string listing them upper-cased,
 * "['A', 'B']". *type NULL when it names none; false when out of memory. */
static bool typed_type(const json_t *p, size_t max_bytes, json_t **type)
{
    const json_t *own = json_object_get(p, "type"), *any_of = json_object_get(p, "anyOf");
    json_t *types = json_array();
    bool ok = types != NULL, simple = json_array_size(any_of) > 0;
    if (ok && string_count(own) > 0) {
        for (size_t i = 0; ok && i < (json_is_array(own) ? json_array_size(own) : 1); i++) {
            json_t *t = json_is_array(own) ? json_array_get(own, i) : (json_t *)own;
            ok = !json_is_string(t) || json_array_append(types, t) == 0;
        }
    } else {
        for (size_t i = 0; simple && i < json_array_size(any_of); i++)
            simple = bare_type(json_array_get(any_of, i));
        for (size_t i = 0; ok && simple && i < json_array_size(any_of); i++)
            ok = add_types(types, json_object_get(json_array_get(any_of, i), "type"));
    }
    *type = NULL;
    if (ok && json_array_size(types) == 1)
        *type = json_incref(json_array_get(types, 0));
    else if (ok && json_array_size(types) > 1) {
        tbuf s;
        tbuf_init(&s, max_bytes);
        ok = tbuf_putc(&s, '[');
        for (size_t i = 0; ok && i < json_array_size(types); i++) {
            const json_t *t = json_array_get(types, i);
            ok = (i == 0 || tbuf_puts(&s, ", ")) && tbuf_putc(&s, '\'') &&
                 gorender_put_upper(&s, json_string_value(t), json_string_length(t)) &&
                 tbuf_putc(&s, '\'');
        }
        ok = ok && tbuf_putc(&s, ']') && (*type = json_stringn(s.data, s.len)) != NULL;
        tbuf_free(&s);
    }
    json_decref(types);
    return ok;
}

static json_t *typed_properties(const json_t *props, size_t max_bytes, int depth);

/* A property as ollama's typed form holds it (see the top of the file); NULL when out of
 * memory or nested past TFMT_MAX_DEPTH. */
static json_t *typed_property(const json_t *p, size_t max_bytes, int depth)
{
    if (depth > TFMT_MAX_DEPTH)
        return NULL;
    json_t *type;
    if (!typed_type(p, max_bytes, &type))
        return NULL;
    const json_t *desc = json_object_get(p, "description"), *enums = json_object_get(p, "enum");
    const json_t *items = json_object_get(p, "items"), *props = json_object_get(p, "properties");
    const json_t *required = json_object_get(p, "required");
    json_t *o = json_object();
    bool ok = o != NULL && (!type || json_object_set_new(o, "type", type) == 0);
    if (!o)
        json_decref(type);
    if (ok && json_string_length(desc) > 0)
        ok = json_object_set(o, "description", (json_t *)desc) == 0;
    if (ok && json_array_size(enums) > 0)
        ok = json_object_set(o, "enum", (json_t *)enums) == 0;
    if (ok && items && !json_is_null(items))
        ok = json_object_set(o, "items", (json_t *)items) == 0;
    if (ok && json_is_object(props))
        ok = json_object_set_new(o, "properties", typed_properties(props, max_bytes, depth)) == 0;
    if (ok && json_array_size(required) > 0)
        ok = json_object_set(o, "required", (json_t *)required) == 0;
    if (!ok) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static json_t *typed_properties(const json_t *props, size_t max_bytes, int depth)
{
    json_t *o = json_object();
    const char *key;
    const json_t *p;
    json_object_foreach((json_t *)props, key, p) {
        if (!o || json_object_set_new(o, key, typed_property(p, max_bytes, depth + 1)) != 0) {
            json_decref(o);
            return NULL;
        }
    }
    return o;
}

/* One offered tool's declaration. */
static bool put_declaration(tbuf *out, const json_t *tool)
{
    const json_t *fn = json_object_get(tool, "function");
    const json_t *params = json_object_get(fn, "parameters");
    const json_t *props = json_object_get(params, "properties");
    const json_t *required = json_object_get(params, "required");
    const char *type = gorender_str(params, "type");
    bool ok = tbuf_puts(out, "<|tool>declaration:") && tbuf_puts(out, gorender_str(fn, "name")) &&
              tbuf_puts(out, "{description:" Q) &&
              tbuf_puts(out, gorender_str(fn, "description")) && tbuf_puts(out, Q);
    if (ok && (json_is_object(props) || *type)) {
        bool wrote = false;
        ok = tbuf_puts(out, ",parameters:{");
        if (ok && json_object_size(props) > 0) {
            json_t *typed = typed_properties(props, out->max_bytes, 1);
            ok = typed && comma(out, &wrote) && tbuf_puts(out, "properties:{") &&
                 put_properties(out, typed, 1) && tbuf_putc(out, '}');
            json_decref(typed);
        }
        if (ok && json_is_array(required) && string_count(required) > 0)
            ok = comma(out, &wrote) && tbuf_puts(out, "required:[") &&
                 put_string_list(out, required, false) && tbuf_putc(out, ']');
        if (ok && *type)
            ok = comma(out, &wrote) && tbuf_puts(out, "type:" Q) &&
                 gorender_put_upper(out, type, strlen(type)) && tbuf_puts(out, Q);
        ok = ok && tbuf_putc(out, '}');
    }
    return ok && tbuf_puts(out, "}<tool|>");
}

/* A call in the history: its arguments sorted, keys bare. */
static bool put_call(tbuf *out, const json_t *call)
{
    const json_t *fn = json_object_get(call, "function");
    const json_t *args = json_object_get(fn, "arguments");
    return tbuf_puts(out, "<|tool_call>call:") && tbuf_puts(out, gorender_str(fn, "name")) &&
           (json_is_object(args) ? put_value(out, args, false, 1) : tbuf_puts(out, "{}")) &&
           tbuf_puts(out, "<tool_call|>");
}

/* The name a tool result answers to: the call its tool_call_id names, else its tool_name,
 * else "unknown". */
static const char *result_name(const json_t *result, const json_t *calls)
{
    const char *name = gorender_str(result, "tool_name");
    const char *id = gorender_str(result, "tool_call_id");
    if (!*name)
        name = "unknown";
    for (size_t i = 0; *id && i < json_array_size(calls); i++) {
        const json_t *call = json_array_get(calls, i);
        if (strcmp(gorender_str(call, "id"), id) == 0)
            return gorender_str(json_object_get(call, "function"), "name");
    }
    return name;
}

/* text trimmed as Go trims it. */
static bool put_trimmed(tbuf *out, const char *text)
{
    size_t n = strlen(text);
    const char *s = gorender_trim(text, &n);
    return tbuf_append(out, s, n);
}

/* An answer's text less the thinking written into it (each <|channel>...<channel|> block, and
 * everything after an unclosed one), trimmed; *had: anything is left. */
static bool put_answer(tbuf *out, const char *text, bool *had)
{
    static const char open[] = "<|channel>", close[] = "<channel|>";
    tbuf kept;
    tbuf_init(&kept, out->max_bytes);
    bool ok = true;
    for (;;) {
        const char *start = strstr(text, open);
        if (!start) {
            ok = tbuf_puts(&kept, text);
            break;
        }
        ok = tbuf_append(&kept, text, (size_t)(start - text));
        const char *end = strstr(start, close);
        if (!ok || !end)
            break;
        text = end + sizeof close - 1;
    }
    size_t n = kept.len;
    const char *s = kept.data ? gorender_trim(kept.data, &n) : "";
    *had = n > 0;
    ok = ok && tbuf_append(out, s, n);
    tbuf_free(&kept);
    return ok;
}

/* The role of the first message after i that is not a tool result, "" when none. */
static const char *next_role(const json_t *messages, size_t i)
{
    for (size_t k = i + 1; k < json_array_size(messages); k++)
        if (!gorender_is_role(json_array_get(messages, k), "tool"))
            return gorender_str(json_array_get(messages, k), "role");
    return "";
}

enum last_part { PART_TEXT, PART_CALL, PART_RESULT };

static char *render(const json_t *messages, const json_t *tools, const json_t *think,
                    bool empty_block, const corral_template_limits *limits, size_t *len,
                    corral_error *err)
{
    corral_template_limits defaults = corral_template_default_limits();
    tbuf out;
    tbuf_init(&out, (limits ? limits : &defaults)->max_output_bytes);
    size_t n = json_array_size(messages), start = 0;
    const json_t *first = json_array_get(messages, 0);
    bool has_system = gorender_is_role(first, "system") || gorender_is_role(first, "developer");
    bool thinking = gorender_think_on(think);
    start = has_system ? 1 : 0;
    bool ok = tbuf_puts(&out, "<bos>");
    if (has_system || json_array_size(tools) > 0 || thinking) {
        ok = ok && tbuf_puts(&out, "<|turn>system\n") &&
             (!thinking || tbuf_puts(&out, "<|think|>\n")) &&
             (!has_system || put_trimmed(&out, gorender_str(first, "content")));
        for (size_t i = 0; ok && i < json_array_size(tools); i++)
            ok = put_declaration(&out, json_array_get(tools, i));
        ok = ok && tbuf_puts(&out, "<turn|>\n");
    }
    size_t last_user = 0;
    bool any_user = false;
    for (size_t i = start; i < n; i++)
        if (gorender_is_role(json_array_get(messages, i), "user")) {
            last_user = i;
            any_user = true;
        }
    enum last_part last = PART_TEXT;
    const char *prev_role = "";
    for (size_t i = start; ok && i < n; i++) {
        const json_t *m = json_array_get(messages, i);
        if (gorender_is_role(m, "tool"))
            continue;
        last = PART_TEXT;
        bool model = gorender_is_role(m, "assistant");
        const char *thought = gorender_str(m, "thinking");
        const json_t *calls = json_object_get(m, "tool_calls");
        size_t n_calls = json_array_size(calls);
        /* consecutive answers, and the results of their calls, make one model turn */
        if (!(model && strcmp(prev_role, "assistant") == 0))
            ok = tbuf_puts(&out, "<|turn>") &&
                 tbuf_puts(&out, model ? "model" : gorender_str(m, "role")) &&
                 tbuf_putc(&out, '\n');
        if (ok && model && *thought && (!any_user || i > last_user))
            ok = tbuf_puts(&out, THOUGHT) && tbuf_puts(&out, thought) &&
                 tbuf_puts(&out, "\n<channel|>");
        for (size_t k = 0; ok && k < n_calls; k++) {
            ok = put_call(&out, json_array_get(calls, k));
            last = PART_CALL;
        }
        bool results = false;
        for (size_t k = i + 1; ok && n_calls > 0 && k < n; k++) {
            const json_t *r = json_array_get(messages, k);
            if (!gorender_is_role(r, "tool"))
                break;
            const char *content = gorender_str(r, "content");
            ok = tbuf_puts(&out, "<|tool_response>response:") &&
                 tbuf_puts(&out, result_name(r, calls)) && tbuf_puts(&out, "{value:" Q) &&
                 tbuf_puts(&out, content) && tbuf_puts(&out, Q "}<tool_response|>");
            results = true;
            last = PART_RESULT;
        }
        const char *content = gorender_str(m, "content");
        bool had = false;
        if (model && *content)
            ok = ok && put_answer(&out, content, &had);
        else if (!model) {
            size_t k = strlen(content);
            const char *s = gorender_trim(content, &k);
            had = k > 0;
            ok = ok && tbuf_append(&out, s, k);
        }
        const char *next = next_role(messages, i);
        bool continues = model && strcmp(next, "assistant") == 0 && (n_calls == 0 || results);
        if (last == PART_CALL && !results)
            ok = ok && tbuf_puts(&out, "<|tool_response>");
        else if (!continues && !(results && !had && !*next))
            ok = ok && tbuf_puts(&out, "<turn|>\n");
        prev_role = gorender_str(m, "role");
    }
    if (last == PART_TEXT)
        ok = ok && tbuf_puts(&out, "<|turn>model\n") &&
             (!empty_block || thinking || tbuf_puts(&out, THOUGHT "<channel|>"));
    else if (last == PART_RESULT && thinking)
        ok = ok && tbuf_puts(&out, THOUGHT);
    return gorender_finish(&out, ok, "gemma4", len, err);
}

char *gemma4_render(const json_t *messages, const json_t *tools, const json_t *think,
                    const corral_template_limits *limits, size_t *len, corral_error *err)
{
    return render(messages, tools, think, false, limits, len, err);
}

char *gemma4_large_render(const json_t *messages, const json_t *tools, const json_t *think,
                          const corral_template_limits *limits, size_t *len,
                          corral_error *err)
{
    return render(messages, tools, think, true, limits, len, err);
}

/*
 * The FunctionGemma prompt (functiongemma.h), laid out as ollama's `functiongemma` renderer
 * lays it out. Values in declarations, calls and results are FunctionGemma's: a string
 * between <escape> marks, a mapping {KEY:VALUE,...} with its keys sorted, a list [VALUE,...],
 * a whole number without its fraction, anything else as Go's %v prints it.
 */
#include <stdlib.h>
#include <string.h>

#include "template/functiongemma.h"
#include "template/gorender.h"
#include "template/tbuf.h"
#include "template/valuefmt.h"

#define ESCAPE "<escape>"
#define END_TURN "<end_of_turn>\n"
#define RESPONSE_OPEN "<start_function_response>"
#define DEFAULT_SYSTEM "You can do function calling with the following functions:"

/* What the last message left open: nothing, a call awaiting its results, or results the
 * next message continues. */
typedef enum { AFTER_NONE, AFTER_CALL, AFTER_RESPONSE } after;

static bool put_escaped(tbuf *out, const char *s)
{
    return tbuf_puts(out, ESCAPE) && tbuf_puts(out, s) && tbuf_puts(out, ESCAPE);
}

static bool value(tbuf *out, const json_t *v, int depth);

/* A mapping's members KEY:VALUE, keys sorted, with ',' between. */
static bool members(tbuf *out, const json_t *obj, int depth)
{
    size_t n;
    const char **keys = gorender_sorted_keys(obj, &n);
    bool ok = keys != NULL;
    for (size_t i = 0; ok && i < n; i++)
        ok = (i == 0 || tbuf_putc(out, ',')) && tbuf_puts(out, keys[i]) && tbuf_putc(out, ':') &&
             value(out, json_object_get(obj, keys[i]), depth + 1);
    free(keys);
    return ok;
}

static bool value(tbuf *out, const json_t *v, int depth)
{
    if (depth > TFMT_MAX_DEPTH)
        return false;
    switch (json_typeof(v)) {
    case JSON_STRING:
        return put_escaped(out, json_string_value(v));
    case JSON_OBJECT:
        return tbuf_putc(out, '{') && members(out, v, depth) && tbuf_putc(out, '}');
    case JSON_ARRAY: {
        bool ok = tbuf_putc(out, '[');
        size_t i;
        const json_t *e;
        json_array_foreach(v, i, e) ok =
            ok && (i == 0 || tbuf_putc(out, ',')) && value(out, e, depth + 1);
        return ok && tbuf_putc(out, ']');
    }
    case JSON_REAL: {
        /* Go compares the value with its int64 conversion, which holds only in range */
        double d = json_real_value(v);
        if (d >= -9223372036854775808.0 && d < 9223372036854775808.0 && d == (double)(long long)d)
            return tbuf_printf(out, "%lld", (long long)d);
        return tfmt_go_float(out, d);
    }
    case JSON_NULL:
        return tbuf_puts(out, "<nil>"); /* Go's %v of nothing */
    default:
        return tfmt_go(out, v);
    }
}

/* One tool's declaration. */
static bool declaration(tbuf *out, const json_t *tool)
{
    const json_t *fn = json_object_get(tool, "function");
    const json_t *params = json_object_get(fn, "parameters");
    const json_t *props = json_object_get(params, "properties"),
                 *required = json_object_get(params, "required");
    const char *type = gorender_str(params, "type");
    bool ok = tbuf_puts(out, "<start_function_declaration>declaration:") &&
              tbuf_puts(out, gorender_str(fn, "name")) && tbuf_puts(out, "{description:") &&
              put_escaped(out, gorender_str(fn, "description"));
    if (json_is_object(props) || *type) {
        bool comma = false;
        ok = ok && tbuf_puts(out, ",parameters:{");
        if (json_object_size(props) > 0) {
            size_t n;
            const char **names = gorender_sorted_keys(props, &n);
            ok = ok && names && tbuf_puts(out, "properties:{");
            for (size_t i = 0; ok && i < n; i++) {
                const json_t *p = json_object_get(props, names[i]);
                const json_t *ptype = json_object_get(p, "type");
                if (json_is_array(ptype))
                    ptype = json_array_get(ptype, 0);
                ok = (i == 0 || tbuf_putc(out, ',')) && tbuf_puts(out, names[i]) &&
                     tbuf_puts(out, ":{description:") &&
                     put_escaped(out, gorender_str(p, "description")) &&
                     (!json_is_string(ptype) ||
                      (tbuf_puts(out, ",type:" ESCAPE) &&
                       gorender_put_upper(out, json_string_value(ptype),
                                          json_string_length(ptype)) &&
                       tbuf_puts(out, ESCAPE))) &&
                     tbuf_putc(out, '}');
            }
            free(names);
            ok = ok && tbuf_putc(out, '}');
            comma = true;
        }
        if (json_array_size(required) > 0) {
            ok = ok && (!comma || tbuf_putc(out, ',')) && tbuf_puts(out, "required:[");
            size_t i;
            const json_t *r;
            json_array_foreach(required, i, r) ok =
                ok && (i == 0 || tbuf_putc(out, ',')) &&
                put_escaped(out, json_is_string(r) ? json_string_value(r) : "");
            ok = ok && tbuf_putc(out, ']');
            comma = true;
        }
        if (*type)
            ok = ok && (!comma || tbuf_putc(out, ',')) && tbuf_puts(out, "type:" ESCAPE) &&
                 gorender_put_upper(out, type, strlen(type)) && tbuf_puts(out, ESCAPE);
        ok = ok && tbuf_putc(out, '}');
    }
    return ok && tbuf_puts(out, "}<end_function_declaration>");
}

/* The first turn: the system text, the default line and the declarations. */
static bool developer_turn(tbuf *out, const char *system, const json_t *tools)
{
    bool has_tools = json_array_size(tools) > 0;
    if (!*system && !has_tools)
        return true;
    size_t n = strlen(system);
    const char *trimmed = gorender_trim(system, &n);
    bool is_default = n == strlen(DEFAULT_SYSTEM) && memcmp(trimmed, DEFAULT_SYSTEM, n) == 0;
    bool ok = tbuf_puts(out, "<start_of_turn>developer\n") && tbuf_append(out, trimmed, n);
    if (has_tools)
        ok = ok && (!*system || tbuf_putc(out, '\n')) &&
             (is_default || tbuf_puts(out, DEFAULT_SYSTEM));
    size_t i;
    const json_t *tool;
    json_array_foreach(tools, i, tool) ok = ok && declaration(out, tool);
    return ok && tbuf_puts(out, END_TURN);
}

/* The name of the call the result at messages[i] answers: the i-th result after the last
 * answer with calls before it takes that answer's i-th call; "" when there is none. */
static const char *result_name(const json_t *messages, size_t start, size_t i)
{
    for (size_t j = i; j-- > start;) {
        const json_t *m = json_array_get(messages, j);
        const json_t *calls = json_object_get(m, "tool_calls");
        if (!gorender_is_role(m, "assistant") || json_array_size(calls) == 0)
            continue;
        size_t k = 0;
        for (size_t r = j + 1; r < i; r++)
            k += gorender_is_role(json_array_get(messages, r), "tool");
        return gorender_str(json_object_get(json_array_get(calls, k), "function"), "name");
    }
    return "";
}

/* An answer and its calls; the results right after it open here. */
static bool model_turn(tbuf *out, const json_t *m, bool results_follow, after *state)
{
    const json_t *calls = json_object_get(m, "tool_calls");
    bool ok = (*state == AFTER_RESPONSE || tbuf_puts(out, "<start_of_turn>model\n")) &&
              gorender_put_trimmed(out, gorender_str(m, "content"));
    *state = AFTER_NONE;
    size_t i;
    const json_t *call;
    json_array_foreach(calls, i, call) {
        const json_t *fn = json_object_get(call, "function");
        const json_t *args = json_object_get(fn, "arguments");
        ok = ok && tbuf_puts(out, "<start_function_call>call:") &&
             tbuf_puts(out, gorender_str(fn, "name")) && tbuf_putc(out, '{') &&
             (!json_is_object(args) || members(out, args, 0)) &&
             tbuf_puts(out, "}<end_function_call>");
    }
    if (json_array_size(calls) > 0 && results_follow) {
        *state = AFTER_CALL;
        return ok && tbuf_puts(out, RESPONSE_OPEN);
    }
    return ok && tbuf_puts(out, END_TURN);
}

char *functiongemma_render(const json_t *messages, const json_t *tools, const json_t *think,
                           const corral_template_limits *limits, size_t *len,
                           corral_error *err)
{
    (void)think;
    corral_template_limits defaults = corral_template_default_limits();
    tbuf out;
    tbuf_init(&out, (limits ? limits : &defaults)->max_output_bytes);
    size_t n = json_array_size(messages), start = 0;
    const char *system = "";
    const json_t *first = json_array_get(messages, 0);
    if (gorender_is_role(first, "system") || gorender_is_role(first, "developer")) {
        system = gorender_str(first, "content");
        start = 1;
    }
    bool ok = tbuf_puts(&out, "<bos>") && developer_turn(&out, system, tools);
    after state = AFTER_NONE;
    for (size_t i = start; ok && i < n; i++) {
        const json_t *m = json_array_get(messages, i);
        const char *content = gorender_str(m, "content");
        if (gorender_is_role(m, "assistant"))
            ok = model_turn(&out, m,
                            i + 1 < n && gorender_is_role(json_array_get(messages, i + 1), "tool"),
                            &state);
        else if (gorender_is_role(m, "user")) {
            ok = (state == AFTER_RESPONSE || tbuf_puts(&out, "<start_of_turn>user\n")) &&
                 gorender_put_trimmed(&out, content) && tbuf_puts(&out, END_TURN);
            state = AFTER_NONE;
        } else if (gorender_is_role(m, "tool")) {
            ok = (state == AFTER_CALL || tbuf_puts(&out, RESPONSE_OPEN)) &&
                 tbuf_puts(&out, "response:") &&
                 tbuf_puts(&out, result_name(messages, start, i)) && tbuf_putc(&out, '{') &&
                 put_escaped(&out, content) && tbuf_puts(&out, "}<end_function_response>");
            state = AFTER_RESPONSE;
        } else /* any other role is a turn of its own, leaving the state as it was */
            ok = tbuf_puts(&out, "<start_of_turn>") && tbuf_puts(&out, gorender_str(m, "role")) &&
                 tbuf_putc(&out, '\n') && gorender_put_trimmed(&out, content) &&
                 tbuf_puts(&out, END_TURN);
    }
    ok = ok && (state == AFTER_RESPONSE || tbuf_puts(&out, "<start_of_turn>model\n"));
    return gorender_finish(&out, ok, "functiongemma", len, err);
}

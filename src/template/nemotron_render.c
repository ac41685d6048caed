/*
 * The Nemotron 3 Nano prompt (nemotron.h), laid out as ollama's `nemotron-3-nano` and
 * `nemotron-3.5-nano` renderers lay it out. Schema values in the tool list are printed as
 * the model's template prints them: JSON with a space after each ':' and ',' and Go-quoted
 * strings, fields in ollama's tool structs' order; a call's argument as the template's
 * `| string` prints it: JSON for a list or mapping, Python's True, False and None, else the
 * text.
 */
#include <stdlib.h>
#include <string.h>

#include "template/gorender.h"
#include "template/nemotron.h"
#include "template/tbuf.h"
#include "template/valuefmt.h"

#define END_TURN "<|im_end|>\n"

/* v in the template's JSON style (sort: object keys in byte order, as Go prints a map;
 * else in the order they came). */
static bool python_json(tbuf *out, const json_t *v, bool sort, int depth)
{
    if (depth > TFMT_MAX_DEPTH)
        return false;
    switch (json_typeof(v)) {
    case JSON_STRING:
        return tfmt_go_quote(out, json_string_value(v), json_string_length(v));
    case JSON_ARRAY: {
        bool ok = tbuf_putc(out, '[');
        size_t i;
        const json_t *e;
        json_array_foreach(v, i, e) ok =
            ok && (i == 0 || tbuf_puts(out, ", ")) && python_json(out, e, sort, depth + 1);
        return ok && tbuf_putc(out, ']');
    }
    case JSON_OBJECT: {
        size_t n = json_object_size(v);
        const char **keys = sort ? gorender_sorted_keys(v, &n) : NULL;
        if (sort && !keys)
            return false;
        bool ok = tbuf_putc(out, '{');
        size_t i = 0;
        const char *key;
        const json_t *member;
        json_object_foreach((json_t *)v, key, member) {
            const char *k = sort ? keys[i] : key;
            ok = ok && (i == 0 || tbuf_puts(out, ", ")) && tfmt_go_quote(out, k, strlen(k)) &&
                 tbuf_puts(out, ": ") &&
                 python_json(out, sort ? json_object_get(v, k) : member, sort, depth + 1);
            i++;
        }
        free(keys);
        return ok && tbuf_putc(out, '}');
    }
    default: {
        static const tjson_style go = {.python = false, .html_escape = false, .indent = -1};
        return tfmt_json(out, v, &go);
    }
    }
}

/* A value as the template's `| string` prints it. */
static bool template_value(tbuf *out, const json_t *v)
{
    if (!v || json_is_null(v))
        return tbuf_puts(out, "None");
    if (json_is_object(v) || json_is_array(v))
        return python_json(out, v, true, 0);
    if (json_is_boolean(v))
        return tbuf_puts(out, json_is_true(v) ? "True" : "False");
    return tfmt_go(out, v);
}

/* s with every from replaced by to, as Go's strings.ReplaceAll. */
static bool replace_all(tbuf *out, const char *s, const char *from, const char *to)
{
    size_t n = strlen(from);
    bool ok = true;
    for (const char *at; ok && (at = strstr(s, from)); s = at + n)
        ok = tbuf_append(out, s, (size_t)(at - s)) && tbuf_puts(out, to);
    return ok && tbuf_puts(out, s);
}

/* text without the /think and /no_think switches, a real </think> kept. */
static bool strip_switches(tbuf *out, const char *text, size_t max_bytes)
{
    static const char *const steps[][2] = {
        {"</think>", "<_end_think>"},
        {"/think", ""},
        {"/no_think", ""},
        {"<_end_think>", "</think>"},
    };
    tbuf a, b;
    tbuf_init(&a, max_bytes);
    tbuf_init(&b, max_bytes);
    bool ok = tbuf_puts(&a, text);
    for (size_t i = 0; ok && i < sizeof steps / sizeof *steps; i++) {
        tbuf_free(&b);
        tbuf_init(&b, max_bytes);
        ok = replace_all(&b, a.data, steps[i][0], steps[i][1]);
        tbuf t = a;
        a = b;
        b = t;
    }
    ok = ok && tbuf_append(out, a.data, a.len);
    tbuf_free(&a);
    tbuf_free(&b);
    return ok;
}

/* Whether thinking is on: think (unset: on), then for Nemotron 3 Nano the last user or
 * system message that holds a switch. */
static bool thinking_on(const json_t *messages, const json_t *think, bool v35, size_t max_bytes,
                        bool *ok)
{
    bool on = !gorender_think_set(think) || gorender_think_on(think);
    if (v35)
        return on;
    size_t i;
    const json_t *m;
    json_array_foreach(messages, i, m) {
        if (!gorender_is_role(m, "user") && !gorender_is_role(m, "system"))
            continue;
        const char *content = gorender_str(m, "content");
        tbuf bare;
        tbuf_init(&bare, max_bytes);
        *ok = *ok && replace_all(&bare, content, "</think>", "");
        if (*ok && strstr(bare.data, "/think"))
            on = true;
        else if (strstr(content, "/no_think"))
            on = false;
        tbuf_free(&bare);
    }
    return on;
}

/* One parameter of a tool (p: its property as ollama holds it). */
static bool tool_parameter(tbuf *out, const char *name, const json_t *p)
{
    const json_t *type = json_object_get(p, "type");
    bool ok = tbuf_puts(out, "\n<parameter>\n<name>") && tbuf_puts(out, name) &&
              tbuf_puts(out, "</name>");
    if (json_is_string(type))
        ok = ok && tbuf_puts(out, "\n<type>") && tbuf_puts(out, json_string_value(type)) &&
             tbuf_puts(out, "</type>");
    else if (json_is_array(type)) { /* more than one: a Python list */
        ok = ok && tbuf_puts(out, "\n<type>[");
        size_t i;
        const json_t *t;
        json_array_foreach(type, i, t) {
            const char *name_of_type = json_is_string(t) ? json_string_value(t) : "";
            ok = ok && (i == 0 || tbuf_puts(out, ", ")) && tbuf_putc(out, '\'') &&
                 tbuf_puts(out, name_of_type) && tbuf_putc(out, '\'');
        }
        ok = ok && tbuf_puts(out, "]</type>");
    }
    const char *description = gorender_str(p, "description");
    if (*description)
        ok = ok && tbuf_puts(out, "\n<description>") && gorender_put_trimmed(out, description) &&
             tbuf_puts(out, "</description>");
    static const char *const fields[] = {"enum", "anyOf", "items", "properties", "required"};
    for (size_t i = 0; i < sizeof fields / sizeof *fields; i++) {
        const json_t *v = json_object_get(p, fields[i]);
        if (v)
            ok = ok && tbuf_printf(out, "\n<%s>", fields[i]) && python_json(out, v, false, 0) &&
                 tbuf_printf(out, "</%s>", fields[i]);
    }
    return ok && tbuf_puts(out, "\n</parameter>");
}

/* One tool's <function> element. */
static bool tool_function(tbuf *out, const json_t *tool)
{
    const json_t *fn = json_object_get(tool, "function");
    const char *description = gorender_str(fn, "description");
    bool ok = tbuf_puts(out, "\n<function>\n<name>") && tbuf_puts(out, gorender_str(fn, "name")) &&
              tbuf_puts(out, "</name>");
    if (*description)
        ok = ok && tbuf_puts(out, "\n<description>") && gorender_put_trimmed(out, description) &&
             tbuf_puts(out, "</description>");
    json_t *params = gorender_parameters_object(json_object_get(fn, "parameters"));
    ok = ok && params && tbuf_puts(out, "\n<parameters>");
    const char *name;
    const json_t *p;
    json_object_foreach(json_object_get(params, "properties"), name, p) ok =
        ok && tool_parameter(out, name, p);
    static const char *const extras[] = {"$defs", "items"};
    for (size_t i = 0; i < sizeof extras / sizeof *extras; i++) {
        const json_t *v = json_object_get(params, extras[i]);
        if (v)
            ok = ok && tbuf_printf(out, "\n<%s>", extras[i]) && template_value(out, v) &&
                 tbuf_printf(out, "</%s>", extras[i]);
    }
    const json_t *required = json_object_get(params, "required");
    if (required)
        ok = ok && tbuf_puts(out, "\n<required>") && python_json(out, required, false, 0) &&
             tbuf_puts(out, "</required>");
    json_decref(params);
    return ok && tbuf_puts(out, "\n</parameters>\n</function>");
}

static bool tool_list(tbuf *out, const json_t *tools)
{
    bool ok = tbuf_puts(out, "# Tools\n\nYou have access to the following functions:\n\n<tools>");
    size_t i;
    const json_t *tool;
    json_array_foreach(tools, i, tool) ok = ok && tool_function(out, tool);
    return ok &&
           tbuf_puts(out,
                     "\n</tools>\n\nIf you choose to call a function ONLY reply in the following "
                     "format with NO suffix:\n\n<tool_call>\n<function=example_function_name>\n"
                     "<parameter=example_parameter_1>\nvalue_1\n</parameter>\n"
                     "<parameter=example_parameter_2>\nThis is the value for the second "
                     "parameter\nthat can span\nmultiple lines\n</parameter>\n</function>\n"
                     "</tool_call>\n\n<IMPORTANT>\nReminder:\n- Function calls MUST follow the "
                     "specified format: an inner <function=...></function> block must be "
                     "nested within <tool_call></tool_call> XML tags\n- Required parameters "
                     "MUST be specified\n- You may provide optional reasoning for your "
                     "function call in natural language BEFORE the function call, but NOT "
                     "after\n- If there is no function call available, answer the question "
                     "like normal with your current knowledge and do not tell the user about "
                     "function calls\n</IMPORTANT>");
}

/* An answer's text with its thinking in front: its own block, or an empty one when the
 * content holds no thinking tag. */
static bool answer_text(tbuf *out, const json_t *m, bool v35)
{
    const char *content = gorender_str(m, "content"), *thinking = gorender_str(m, "thinking");
    if (*thinking)
        return tbuf_puts(out, "<think>\n") && tbuf_puts(out, thinking) &&
               tbuf_puts(out, v35 ? "</think>" : "\n</think>\n") && tbuf_puts(out, content);
    if (!strstr(content, "<think>") && !strstr(content, "</think>"))
        return tbuf_puts(out, "<think></think>") && tbuf_puts(out, content);
    return tbuf_puts(out, content);
}

/* What follows the last </think> in text, or NULL. */
static const char *after_thinking(const char *text)
{
    const char *after = NULL;
    for (const char *at = strstr(text, "</think>"); at; at = strstr(at + 1, "</think>"))
        after = at + strlen("</think>");
    return after;
}

/* An answer (text: answer_text's) before the last question, its thinking dropped. */
static bool earlier_answer(tbuf *out, const char *text, bool calls)
{
    const char *after = after_thinking(text);
    if (!calls) {
        if (!after || !strstr(text, "<think>"))
            return gorender_put_trimmed(out, text);
        /* Go trims the joined text, which starts with the tag: only after's end */
        size_t n = strlen(after);
        const char *s = gorender_trim(after, &n);
        return tbuf_puts(out, "<think></think>") &&
               tbuf_append(out, after, n ? (size_t)(s + n - after) : 0);
    }
    bool ok = tbuf_puts(out, "<think></think>");
    const char *open = strstr(text, "<think>");
    if (after)
        ok = ok && gorender_put_trimmed(out, after);
    else {
        size_t n = open ? (size_t)(open - text) : strlen(text);
        const char *s = gorender_trim(text, &n);
        ok = ok && tbuf_append(out, s, n);
    }
    return ok && tbuf_putc(out, '\n');
}

/* An assistant turn; earlier: before the last question. */
static bool assistant_turn(tbuf *out, const json_t *m, bool earlier, bool v35, size_t max_bytes)
{
    const json_t *calls = json_object_get(m, "tool_calls");
    bool has_calls = json_array_size(calls) > 0;
    tbuf text;
    tbuf_init(&text, max_bytes);
    bool ok = tbuf_puts(out, "<|im_start|>assistant\n") && answer_text(&text, m, v35);
    if (ok && earlier)
        ok = earlier_answer(out, text.data, has_calls);
    else if (ok)
        ok = gorender_put_trimmed(out, text.data) && (!has_calls || tbuf_putc(out, '\n'));
    tbuf_free(&text);
    size_t i;
    const json_t *call;
    json_array_foreach(calls, i, call) {
        const json_t *fn = json_object_get(call, "function");
        const json_t *args = json_object_get(fn, "arguments");
        ok = ok && tbuf_puts(out, "<tool_call>\n<function=") &&
             tbuf_puts(out, gorender_str(fn, "name")) && tbuf_puts(out, ">\n");
        const char *key;
        const json_t *v;
        if (json_is_object(args))
            json_object_foreach((json_t *)args, key, v) ok =
                ok && tbuf_puts(out, "<parameter=") && tbuf_puts(out, key) &&
                tbuf_puts(out, ">\n") && template_value(out, v) &&
                tbuf_puts(out, "\n</parameter>\n");
        ok = ok && tbuf_puts(out, "</function>\n</tool_call>\n");
    }
    return ok && tbuf_puts(out, END_TURN);
}

/* A user or system turn after the first message; effort: the last question asks for
 * efficient reasoning. */
static bool user_turn(tbuf *out, const json_t *m, bool v35, bool effort, size_t max_bytes)
{
    const char *content = gorender_str(m, "content");
    bool ok = tbuf_puts(out, "<|im_start|>") && tbuf_puts(out, gorender_str(m, "role")) &&
              tbuf_putc(out, '\n');
    if (v35)
        ok = ok && tbuf_puts(out, content) &&
             (!effort || tbuf_puts(out, "\n\n{reasoning effort: efficient}"));
    else {
        tbuf bare;
        tbuf_init(&bare, max_bytes);
        ok = ok && strip_switches(&bare, content, max_bytes) &&
             gorender_put_trimmed(out, bare.data);
        tbuf_free(&bare);
    }
    return ok && tbuf_puts(out, END_TURN);
}

static char *render(const json_t *messages, const json_t *tools, const json_t *think, bool v35,
                    const corral_template_limits *limits, size_t *len, corral_error *err)
{
    corral_template_limits defaults = corral_template_default_limits();
    size_t max_bytes = (limits ? limits : &defaults)->max_output_bytes;
    size_t n = json_array_size(messages);
    const json_t *first = json_array_get(messages, 0);
    bool has_system = gorender_is_role(first, "system");
    const char *system = has_system ? gorender_str(first, "content") : "";
    size_t start = has_system, last_user = gorender_last_role(messages, start, "user");
    bool ok = true, on = thinking_on(messages, think, v35, max_bytes, &ok);
    bool medium = v35 && json_is_string(think) && strcmp(json_string_value(think), "medium") == 0;
    tbuf out;
    tbuf_init(&out, max_bytes);
    ok = ok && tbuf_puts(&out, "<|im_start|>system\n") &&
         (v35 ? tbuf_puts(&out, system) : strip_switches(&out, system, max_bytes));
    if (json_array_size(tools) > 0)
        ok = ok && (!*system || tbuf_puts(&out, "\n\n")) && tool_list(&out, tools);
    ok = ok && tbuf_puts(&out, END_TURN);
    for (size_t i = start; ok && i < n; i++) {
        const json_t *m = json_array_get(messages, i);
        if (gorender_is_role(m, "assistant"))
            ok = assistant_turn(&out, m, last_user < n && i < last_user, v35, max_bytes);
        else if (gorender_is_role(m, "user") || gorender_is_role(m, "system"))
            ok = user_turn(&out, m, v35, medium && i == last_user, max_bytes);
        else if (gorender_is_role(m, "tool")) {
            /* a run of results is one user turn; one with nothing before it opens none */
            bool after_tool =
                i > start && gorender_is_role(json_array_get(messages, i - 1), "tool");
            bool before_tool =
                i + 1 < n && gorender_is_role(json_array_get(messages, i + 1), "tool");
            ok = (i == start || after_tool || tbuf_puts(&out, "<|im_start|>user\n")) &&
                 tbuf_puts(&out, "<tool_response>\n") &&
                 tbuf_puts(&out, gorender_str(m, "content")) &&
                 tbuf_puts(&out, "\n</tool_response>\n") &&
                 (before_tool || tbuf_puts(&out, END_TURN));
        } else
            ok = tbuf_puts(&out, "<|im_start|>") && tbuf_puts(&out, gorender_str(m, "role")) &&
                 tbuf_putc(&out, '\n') && tbuf_puts(&out, gorender_str(m, "content")) &&
                 tbuf_puts(&out, END_TURN);
    }
    ok = ok && tbuf_puts(&out, on ? "<|im_start|>assistant\n<think>\n"
                                  : "<|im_start|>assistant\n<think></think>");
    return gorender_finish(&out, ok, v35 ? "nemotron-3.5-nano" : "nemotron-3-nano", len, err);
}

char *nemotron3_nano_render(const json_t *messages, const json_t *tools, const json_t *think,
                            const corral_template_limits *limits, size_t *len,
                            corral_error *err)
{
    return render(messages, tools, think, false, limits, len, err);
}

char *nemotron35_nano_render(const json_t *messages, const json_t *tools, const json_t *think,
                             const corral_template_limits *limits, size_t *len,
                             corral_error *err)
{
    return render(messages, tools, think, true, limits, len, err);
}

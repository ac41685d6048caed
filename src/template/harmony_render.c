/*
 * The harmony prompt (harmony.h), laid out as ollama's gpt-oss template lays it out: a system
 * message with the model's identity, knowledge cutoff, date, reasoning effort and channels; a
 * developer message with the tools (TypeScript-like types in `namespace functions`) and the
 * system messages as instructions; the history, where an assistant turn is its thinking
 * (analysis channel, kept only after the last user message, as the model was trained), its
 * answer (final channel) and its calls (commentary channel, to=functions.NAME, JSON
 * arguments, <|call|>), and a tool result is a message from functions.NAME to=assistant;
 * then "<|start|>assistant" for the answer, unless the last message is an assistant's to
 * continue (prefill), whose open text ends the prompt instead.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "template/collate.h"
#include "template/harmony.h"
#include "template/tbuf.h"
#include "template/valuefmt.h"

static const char *str_field(const json_t *obj, const char *key)
{
    const char *s = json_string_value(json_object_get(obj, key));
    return s ? s : "";
}

static bool is_role(const json_t *m, const char *role)
{
    return strcmp(str_field(m, "role"), role) == 0;
}

/* An identifier for name: see harmony_tool_names. */
static bool identifier(tbuf *out, const char *name)
{
    for (const unsigned char *c = (const unsigned char *)name; *c; c++) {
        bool ok;
        if (*c == ' ' || *c == '-' || *c == '.')
            ok = tbuf_putc(out, '_');
        else if ((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
                 (*c >= '0' && *c <= '9') || *c == '_' || *c == '$' || *c >= 0x80)
            ok = tbuf_putc(out, (char)*c); /* any non-ASCII character passes whole */
        else
            ok = true;
        if (!ok)
            return false;
    }
    if (out->len == 0)
        return tbuf_puts(out, "unnamed");
    if (out->data[0] >= '0' && out->data[0] <= '9') {
        tbuf fixed;
        tbuf_init(&fixed, out->max_bytes);
        bool ok = tbuf_putc(&fixed, '_') && tbuf_append(&fixed, out->data, out->len);
        tbuf_free(out);
        *out = fixed;
        return ok;
    }
    return true;
}

/* Longest identifier made of a tool's name: names are the client's, and so is their length. */
#define HARMONY_MAX_NAME_BYTES (64u << 10)

json_t *harmony_tool_names(const json_t *tools)
{
    /* taken: the identifiers handed out; next: per base, the first suffix not yet tried, so
     * that many tools of one name cost one lookup each, not a walk over the others */
    json_t *names = json_array(), *taken = json_object(), *next = json_object();
    bool ok = names && taken && next;
    size_t i;
    json_t *tool;
    json_array_foreach(tools, i, tool) {
        const char *name = str_field(json_object_get(tool, "function"), "name");
        tbuf base, candidate;
        tbuf_init(&base, HARMONY_MAX_NAME_BYTES);
        tbuf_init(&candidate, HARMONY_MAX_NAME_BYTES + 24);
        ok = ok && identifier(&base, name) && tbuf_puts(&candidate, base.data);
        json_int_t n = ok ? json_integer_value(json_object_get(next, base.data)) : 0;
        for (n = n < 2 ? 2 : n; ok && json_object_get(taken, candidate.data); n++) {
            candidate.len = 0;
            ok = tbuf_printf(&candidate, "%s_%" JSON_INTEGER_FORMAT, base.data, n);
        }
        ok = ok && json_object_set_new(next, base.data, json_integer(n)) == 0 &&
             json_object_set_new(taken, candidate.data, json_true()) == 0 &&
             json_array_append_new(names, json_string(candidate.data)) == 0;
        tbuf_free(&base);
        tbuf_free(&candidate);
        if (!ok)
            break;
    }
    json_decref(taken);
    json_decref(next);
    if (!ok) {
        json_decref(names);
        return NULL;
    }
    return names;
}

/* The request's function names -> their identifiers (the first tool of a name wins). */
static json_t *identifier_map(const json_t *tools, const json_t *names)
{
    json_t *map = json_object();
    size_t i;
    json_t *tool;
    json_array_foreach(tools, i, tool) {
        const char *name = str_field(json_object_get(tool, "function"), "name");
        if (map && !json_object_get(map, name) &&
            json_object_set(map, name, json_array_get(names, i)) != 0) {
            json_decref(map);
            return NULL;
        }
    }
    return map;
}

/* The prompt's name for a function the history names: its identifier among the request's
 * tools, or the identifier rule applied to it alone. */
static bool history_name(tbuf *out, const json_t *map, const char *name)
{
    const char *known = json_string_value(json_object_get(map, name));
    if (known)
        return tbuf_puts(out, known);
    tbuf id;
    tbuf_init(&id, HARMONY_MAX_NAME_BYTES);
    bool ok = identifier(&id, name) && tbuf_append(out, id.data, id.len);
    tbuf_free(&id);
    return ok;
}

/* The reasoning effort think asks for; NULL: the line is left out (think false). */
static const char *reasoning_level(const json_t *think)
{
    if (json_is_false(think))
        return NULL;
    const char *level = json_string_value(think);
    if (level && strcmp(level, "low") == 0)
        return "low";
    if (level && (strcmp(level, "high") == 0 || strcmp(level, "max") == 0))
        return "high"; /* harmony knows three levels */
    return "medium";
}

static bool system_message(tbuf *out, const json_t *think, const char *date, bool has_tools)
{
    const char *level = reasoning_level(think);
    return tbuf_puts(out, "<|start|>system<|message|>You are ChatGPT, a large language model "
                          "trained by OpenAI.\nKnowledge cutoff: 2024-06\nCurrent date: ") &&
           tbuf_puts(out, date) &&
           (!level || tbuf_printf(out, "\n\nReasoning: %s", level)) &&
           tbuf_puts(out, "\n\n# Valid channels: analysis, commentary, final. Channel must be "
                          "included for every message.") &&
           (!has_tools ||
            tbuf_puts(out, "\nCalls to these tools must go to the commentary channel: "
                           "'functions'.")) &&
           tbuf_puts(out, "<|end|>");
}

/* A property's type: "string", or a union "string | number" of a list of types. */
static bool property_type(tbuf *out, const json_t *type)
{
    if (json_is_string(type))
        return tbuf_puts(out, json_string_value(type));
    if (!json_array_size(type))
        return tbuf_puts(out, "any");
    size_t i;
    json_t *t;
    json_array_foreach(type, i, t) {
        const char *name = json_string_value(t);
        if ((i && !tbuf_puts(out, " | ")) || !tbuf_puts(out, name ? name : "any"))
            return false;
    }
    return true;
}

static int compare_keys(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* One function type: its description as a comment, then its parameters (in key order, as
 * ollama's template ranges over them), each with its description. */
static bool function_type(tbuf *out, const json_t *fn, const char *name)
{
    const char *description = str_field(fn, "description");
    const json_t *properties = json_object_get(json_object_get(fn, "parameters"), "properties");
    size_t n = json_is_object(properties) ? json_object_size(properties) : 0;
    if (!tbuf_puts(out, "\n") || (*description && !tbuf_printf(out, "\n// %s", description)))
        return false;
    if (n == 0)
        return tbuf_printf(out, "\ntype %s = () => any;", name);
    const char **keys = malloc(n * sizeof *keys);
    if (!keys)
        return false;
    size_t k = 0;
    const char *key;
    json_t *prop;
    json_object_foreach((json_t *)properties, key, prop)
        keys[k++] = key;
    qsort(keys, n, sizeof *keys, compare_keys);
    bool ok = tbuf_printf(out, "\ntype %s = (_: {", name);
    for (k = 0; ok && k < n; k++) {
        prop = json_object_get(properties, keys[k]);
        const char *about = str_field(prop, "description");
        ok = (!*about || tbuf_printf(out, "\n  // %s", about)) &&
             tbuf_printf(out, "\n  %s: ", keys[k]) &&
             property_type(out, json_object_get(prop, "type")) && tbuf_putc(out, ',');
    }
    free(keys);
    return ok && tbuf_puts(out, "\n}) => any;");
}

/* The developer message: the tools, then the system messages as instructions. */
static bool developer_message(tbuf *out, const json_t *tools, const json_t *names,
                              const char *system)
{
    if (!json_array_size(tools) && !*system)
        return true;
    bool ok = tbuf_puts(out, "<|start|>developer<|message|>");
    if (ok && json_array_size(tools)) {
        ok = tbuf_puts(out, "# Tools\n\n## functions\n\nnamespace functions {");
        size_t i;
        json_t *tool;
        json_array_foreach(tools, i, tool)
            if (ok)
                ok = function_type(out, json_object_get(tool, "function"),
                                   json_string_value(json_array_get(names, i)));
        ok = ok && tbuf_puts(out, "\n\n} // namespace functions");
    }
    if (ok && *system)
        ok = tbuf_puts(out, "\n\n# Instructions\n\n") && tbuf_puts(out, system);
    return ok && tbuf_puts(out, "<|end|>");
}

/* A call's arguments as ollama prints them into templates: Go's compact JSON, keys sorted. */
static bool arguments_json(tbuf *out, const json_t *arguments)
{
    static const tjson_style go = {.html_escape = true, .sort_keys = true, .indent = -1};
    if (!json_is_object(arguments))
        return tbuf_puts(out, "{}");
    return tfmt_json(out, arguments, &go);
}

static bool tool_calls(tbuf *out, const json_t *calls, const json_t *map)
{
    size_t i;
    json_t *call;
    json_array_foreach(calls, i, call) {
        const json_t *fn = json_object_get(call, "function");
        if (!tbuf_puts(out, "<|start|>assistant<|channel|>commentary to=functions.") ||
            !history_name(out, map, str_field(fn, "name")) ||
            !tbuf_puts(out, " <|constrain|>json<|message|>") ||
            !arguments_json(out, json_object_get(fn, "arguments")) ||
            !tbuf_puts(out, "<|call|>"))
            return false;
    }
    return true;
}

/*
 * The history. An assistant message that ends the history and makes no calls is continued:
 * its last part (the answer, else the thinking) stays open, and no new message starts.
 */
static bool history(tbuf *out, const json_t *messages, const json_t *map)
{
    /* a result without tool_name answers the last call made before it */
    const char *last_call = "";
    size_t n = json_array_size(messages), last_user = 0;
    bool any_user = false;
    for (size_t i = 0; i < n; i++)
        if (is_role(json_array_get(messages, i), "user"))
            last_user = i, any_user = true;
    const json_t *last = json_array_get(messages, n - 1);
    bool prefill = n && is_role(last, "assistant") && !json_array_size(json_object_get(last, "tool_calls")) &&
                   (*str_field(last, "content") || *str_field(last, "thinking"));
    bool ok = true;
    for (size_t i = 0; ok && i < n; i++) {
        const json_t *m = json_array_get(messages, i);
        const char *content = str_field(m, "content"), *thinking = str_field(m, "thinking");
        bool open = prefill && i == n - 1;
        if (is_role(m, "user")) {
            ok = tbuf_puts(out, "<|start|>user<|message|>") && tbuf_puts(out, content) &&
                 tbuf_puts(out, "<|end|>");
        } else if (is_role(m, "tool")) {
            const char *name = str_field(m, "tool_name");
            ok = tbuf_puts(out, "<|start|>functions.") &&
                 history_name(out, map, *name ? name : last_call) &&
                 tbuf_puts(out, " to=assistant<|message|>") && tbuf_puts(out, content) &&
                 tbuf_puts(out, "<|end|>");
        } else if (is_role(m, "assistant")) {
            if (*thinking && (!any_user || i > last_user))
                ok = tbuf_puts(out, "<|start|>assistant<|channel|>analysis<|message|>") &&
                     tbuf_puts(out, thinking) && ((open && !*content) || tbuf_puts(out, "<|end|>"));
            if (ok && *content)
                ok = tbuf_puts(out, "<|start|>assistant<|channel|>final<|message|>") &&
                     tbuf_puts(out, content) && (open || tbuf_puts(out, "<|end|>"));
            const json_t *calls = json_object_get(m, "tool_calls");
            size_t n_calls = json_array_size(calls);
            if (n_calls)
                last_call = str_field(
                    json_object_get(json_array_get(calls, n_calls - 1), "function"), "name");
            ok = ok && tool_calls(out, calls, map);
        }
    }
    return ok && (prefill || tbuf_puts(out, "<|start|>assistant"));
}

char *harmony_render(const json_t *messages, const json_t *tools, const json_t *think,
                     const char *date, const corral_template_limits *limits, size_t *len,
                     corral_error *err)
{
    corral_template_limits defaults = corral_template_default_limits();
    size_t max_bytes = (limits ? limits : &defaults)->max_output_bytes;
    char today[32] = "";
    if (!date) {
        time_t now = time(NULL);
        struct tm tm;
        if (localtime_r(&now, &tm))
            strftime(today, sizeof today, "%Y-%m-%d", &tm);
        date = today;
    }
    if (!json_is_array(tools))
        tools = NULL;
    tbuf system, out;
    tbuf_init(&system, max_bytes);
    tbuf_init(&out, max_bytes);
    json_t *names = harmony_tool_names(tools);
    json_t *map = names ? identifier_map(tools, names) : NULL;
    json_t *collated = map ? collate_messages(messages, &system) : NULL;
    bool ok = collated && system_message(&out, think, date, json_array_size(tools) > 0) &&
              developer_message(&out, tools, names, system.data ? system.data : "") &&
              history(&out, collated, map);
    json_decref(names);
    json_decref(map);
    json_decref(collated);
    tbuf_free(&system);
    if (!ok) {
        corral_error_set(err, "harmony prompt: out of memory or longer than %zu bytes",
                         max_bytes);
        tbuf_free(&out);
        return NULL;
    }
    return tbuf_take(&out, len);
}

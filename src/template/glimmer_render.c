/*
 * The Glimmer prompt (glimmer.h), laid out as ollama's `glimmer` renderer lays it out: its
 * system messages, tool list and ATEM calls with the texts and JSON forms (spaced, not
 * HTML-escaped) of the chat template it follows.
 */
#include <string.h>
#include <strings.h>
#include <time.h>

#include "template/glimmer.h"
#include "template/gorender.h"
#include "template/tbuf.h"

#define START "<|start|>"
#define MESSAGE "<|message|>"
#define EOM "<|eom|>"
#define EOT "<|eot|>"

static const char DEFAULT_SYSTEM[] = "You are a helpful AI assistant.";
static const char KNOWLEDGE_CUTOFF[] = "2026-01-04";

static const char TOOLS_PREFIX[] =
    "In this environment you have access to a set of tools you can use to answer the user's "
    "question.\n\nYou can invoke a function by writing a \"<atem:function_calls>\" block like "
    "the following:\n<atem:function_calls>\n<atem:invoke name=\"$FUNCTION_NAME\">\n"
    "<atem:parameter name=\"$PARAMETER_NAME\">$PARAMETER_VALUE</atem:parameter>\n...\n"
    "</atem:invoke>\n</atem:function_calls>\n\nString and scalar parameters should be "
    "specified as is, while lists and objects should use JSON format. Note that spaces for "
    "string values are not stripped. The output is not expected to be valid XML and is parsed "
    "with regular expressions.\nHere are the functions available in JSONSchema format:\n"
    "// Tool metadata\n";

static const char TOOLS_SUFFIX[] =
    "\n\nHere's an example of how to call a function in the tool set:\n(If the tool namespace "
    "is not specified, invoke the function directly as `example_function_name` rather than "
    "`example_tool_name.example_function_name`)\n\nto=example_tool_name.example_function_name"
    "\n\n<atem:function_calls>\n<atem:invoke name=\"example_tool_name.example_function_name\">"
    "\n<atem:parameter name=\"example_parameter_1\">value_1</atem:parameter>\n"
    "<atem:parameter name=\"example_parameter_2\">This is the value for the second parameter\n"
    "that can span\n\"multiple\" lines\n</atem:parameter>\n</atem:invoke>\n"
    "</atem:function_calls>";

/* v as the template's tojson writes it: spaced, not HTML-escaped, mappings' keys sorted. */
static bool put_json(tbuf *out, const json_t *v)
{
    return gorender_json_spaced(out, v, false, true);
}

static bool put_json_string(tbuf *out, const char *s)
{
    json_t *v = json_string(s);
    bool ok = v && put_json(out, v);
    json_decref(v);
    return ok;
}

/* The namespaces of the tools' functions (each name up to its first '.'), first seen first:
 * a new array of strings, NULL when out of memory. */
static json_t *namespaces(const json_t *tools)
{
    json_t *seen = json_object(), *list = json_array();
    bool ok = seen && list;
    for (size_t i = 0; ok && i < json_array_size(tools); i++) {
        const char *name =
            gorender_str(json_object_get(json_array_get(tools, i), "function"), "name");
        json_t *ns = json_stringn(name, strcspn(name, "."));
        ok = ns != NULL;
        if (ok && !json_object_get(seen, json_string_value(ns)))
            ok = json_object_set(seen, json_string_value(ns), json_true()) == 0 &&
                 json_array_append(list, ns) == 0;
        json_decref(ns);
    }
    json_decref(seen);
    if (!ok) {
        json_decref(list);
        return NULL;
    }
    return list;
}

static bool tool_definitions(tbuf *out, const json_t *tools, const json_t *spaces)
{
    bool ok = tbuf_puts(out, TOOLS_PREFIX);
    for (size_t i = 0; ok && i < json_array_size(spaces); i++)
        ok = tbuf_puts(out, "{\"name\": ") &&
             put_json(out, json_array_get(spaces, i)) &&
             tbuf_puts(out, ", \"description\": \"\"}\n");
    ok = ok && tbuf_puts(out, "// Function schemas");
    for (size_t i = 0; ok && i < json_array_size(tools); i++) {
        const json_t *fn = json_object_get(json_array_get(tools, i), "function");
        json_t *params = gorender_parameters_object(json_object_get(fn, "parameters"));
        ok = params && tbuf_puts(out, "\n{\"name\": ") &&
             put_json_string(out, gorender_str(fn, "name")) &&
             tbuf_puts(out, ", \"description\": ") &&
             put_json_string(out, gorender_str(fn, "description")) &&
             tbuf_puts(out, ", \"parameters\": ") &&
             gorender_json_spaced(out, params, false, false) && tbuf_putc(out, '}');
        json_decref(params);
    }
    return ok && tbuf_puts(out, TOOLS_SUFFIX);
}

/* text with "reasoning effort" renamed "reasoning strength" in the four casings ollama's
 * renderer renames, left to right. */
static bool put_renamed(tbuf *out, const char *text)
{
    static const char *const from[] = {"Reasoning effort", "Reasoning Effort",
                                       "reasoning effort", "REASONING EFFORT"};
    static const char *const to[] = {"Reasoning strength", "Reasoning Strength",
                                     "reasoning strength", "REASONING STRENGTH"};
    const char *at = text;
    bool ok = true;
    while (ok && *at) {
        size_t k = 0;
        while (k < 4 && strncmp(at, from[k], strlen(from[k])) != 0)
            k++;
        if (k < 4) {
            ok = tbuf_puts(out, to[k]);
            at += strlen(from[k]);
        } else {
            ok = tbuf_putc(out, *at++);
        }
    }
    return ok;
}

/* Whether text says "reasoning strength" in any casing. */
static bool says_strength(const char *text, size_t n)
{
    static const char phrase[] = "reasoning strength";
    for (size_t i = 0; i + sizeof phrase - 1 <= n; i++)
        if (strncasecmp(text + i, phrase, sizeof phrase - 1) == 0)
            return true;
    return false;
}

/* A system message: date is NULL for the request's own, else the default one's date. */
static bool system_message(tbuf *out, const char *content, const json_t *tools,
                           const json_t *spaces, const char *strength, const char *date)
{
    size_t start = out->len;
    bool ok = tbuf_puts(out, START "system" MESSAGE) &&
              (date ? tbuf_puts(out, content) : put_renamed(out, content));
    size_t text = start + sizeof START "system" MESSAGE - 1;
    bool says = ok && says_strength(out->data + text, out->len - text);
    if (ok && date)
        ok = tbuf_puts(out, "\nKnowledge cutoff: ") && tbuf_puts(out, KNOWLEDGE_CUTOFF) &&
             tbuf_puts(out, ".\nCurrent date: ") && tbuf_puts(out, date) && tbuf_putc(out, '.');
    if (ok && (date || !says))
        ok = tbuf_puts(out, "\n\nReasoning strength: ") && tbuf_puts(out, strength) &&
             tbuf_putc(out, '.');
    if (ok && json_array_size(tools) > 0)
        ok = tbuf_puts(out, "\n\n") && tool_definitions(out, tools, spaces);
    ok = ok && tbuf_puts(out, "\n\n# Valid recipients: \"self\"");
    for (size_t i = 0; ok && i < json_array_size(spaces); i++)
        ok = tbuf_puts(out, ", \"") &&
             tbuf_puts(out, json_string_value(json_array_get(spaces, i))) && tbuf_puts(out, ".*\"");
    return ok && tbuf_puts(out, ", \"user\"." EOT);
}

/* The name a tool result is from: its tool_name, else the function of the last call in the
 * history with its tool_call_id, else that id. */
static const char *result_name(const json_t *m, const json_t *messages)
{
    const char *name = gorender_str(m, "tool_name"), *id = gorender_str(m, "tool_call_id");
    if (*name || !*id)
        return *name ? name : id;
    name = id;
    for (size_t i = 0; i < json_array_size(messages); i++) {
        const json_t *calls = json_object_get(json_array_get(messages, i), "tool_calls");
        for (size_t k = 0; k < json_array_size(calls); k++) {
            const json_t *call = json_array_get(calls, k);
            if (strcmp(gorender_str(call, "id"), id) == 0)
                name = gorender_str(json_object_get(call, "function"), "name");
        }
    }
    return name;
}

/* One call as an ATEM block: each argument in the client's order, a list or mapping as JSON,
 * anything else as Go prints it. */
static bool atem_call(tbuf *out, const json_t *call)
{
    const json_t *fn = json_object_get(call, "function"), *args = json_object_get(fn, "arguments");
    bool ok = tbuf_puts(out, "<atem:function_calls>\n<atem:invoke name=\"") &&
              tbuf_puts(out, gorender_str(fn, "name")) && tbuf_puts(out, "\">\n");
    const char *key;
    const json_t *value;
    json_object_foreach((json_t *)args, key, value) {
        ok = ok && tbuf_puts(out, "<atem:parameter name=\"") && tbuf_puts(out, key) &&
             tbuf_puts(out, "\">") &&
             (json_is_object(value) || json_is_array(value) ? put_json(out, value)
                                                            : gorender_value_text(out, value)) &&
             tbuf_puts(out, "</atem:parameter>\n");
    }
    return ok && tbuf_puts(out, "</atem:invoke>\n</atem:function_calls>");
}

static bool assistant_message(tbuf *out, const json_t *m, bool more_follow)
{
    const char *content = gorender_str(m, "content"), *thinking = gorender_str(m, "thinking");
    const json_t *calls = json_object_get(m, "tool_calls");
    size_t n = json_array_size(calls);
    bool ok = !*thinking || (tbuf_puts(out, START "assistant to=self" MESSAGE) &&
                             tbuf_puts(out, thinking) && tbuf_puts(out, EOM));
    for (size_t i = 0; ok && i < n; i++) {
        const json_t *call = json_array_get(calls, i);
        ok = tbuf_puts(out, START "assistant to=") &&
             tbuf_puts(out, gorender_str(json_object_get(call, "function"), "name")) &&
             tbuf_puts(out, MESSAGE) && atem_call(out, call) &&
             tbuf_puts(out, i + 1 < n || more_follow ? EOM : EOT);
    }
    if (ok && n == 0 && (*content || !*thinking))
        ok = tbuf_puts(out, START "assistant to=user" MESSAGE) && tbuf_puts(out, content) &&
             tbuf_puts(out, EOT);
    return ok;
}

/* think as the strength the system message states. */
static const char *strength_of(const json_t *think)
{
    if (!gorender_think_set(think))
        return "high";
    if (!gorender_think_on(think))
        return "none";
    return json_is_string(think) ? json_string_value(think) : "high";
}

char *glimmer_render_dated(const json_t *messages, const json_t *tools, const json_t *think,
                           const char *date, const corral_template_limits *limits, size_t *len,
                           corral_error *err)
{
    corral_template_limits defaults = corral_template_default_limits();
    tbuf out;
    tbuf_init(&out, (limits ? limits : &defaults)->max_output_bytes);
    const char *strength = strength_of(think);
    json_t *spaces = namespaces(tools);
    size_t n = json_array_size(messages);
    bool has_system = false;
    for (size_t i = 0; i < n; i++)
        has_system = has_system || gorender_is_role(json_array_get(messages, i), "system");
    bool ok = spaces && tbuf_puts(&out, "<|begin_of_text|>") &&
              (has_system || system_message(&out, DEFAULT_SYSTEM, tools, spaces, strength, date));
    for (size_t i = 0; ok && i < n; i++) {
        const json_t *m = json_array_get(messages, i);
        const char *content = gorender_str(m, "content");
        if (gorender_is_role(m, "system")) {
            ok = system_message(&out, content, tools, spaces, strength, NULL);
        } else if (gorender_is_role(m, "user")) {
            ok = tbuf_puts(&out, START "user" MESSAGE) && tbuf_puts(&out, content) &&
                 tbuf_puts(&out, EOT);
        } else if (gorender_is_role(m, "tool")) {
            const char *name = result_name(m, messages);
            ok = tbuf_puts(&out, START "tool ") && tbuf_puts(&out, name) &&
                 tbuf_puts(&out, MESSAGE "<tool_output name=\"") && tbuf_puts(&out, name) &&
                 tbuf_puts(&out, "\">\n") && tbuf_puts(&out, content) &&
                 tbuf_puts(&out, "\n</tool_output>" EOT);
        } else if (gorender_is_role(m, "assistant")) {
            bool more = i + 1 < n && gorender_is_role(json_array_get(messages, i + 1), "assistant");
            ok = assistant_message(&out, m, more);
        }
    }
    ok = ok && tbuf_puts(&out, START "assistant");
    json_decref(spaces);
    return gorender_finish(&out, ok, "glimmer", len, err);
}

char *glimmer_render(const json_t *messages, const json_t *tools, const json_t *think,
                     const corral_template_limits *limits, size_t *len, corral_error *err)
{
    char date[32] = "";
    time_t now = time(NULL);
    struct tm local;
    if (localtime_r(&now, &local))
        strftime(date, sizeof date, "%Y-%m-%d", &local);
    return glimmer_render_dated(messages, tools, think, date, limits, len, err);
}

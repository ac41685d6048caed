/*
 * The Laguna prompt (laguna.h), laid out as ollama's `laguna` renderer lays it out: the
 * model's begin-of-text marker; a system turn (the request's leading system message, else
 * Poolside's default one, and the offered tools with how to call them) unless it would be
 * empty; the history, where an assistant turn is
 * its thinking (or a bare closing tag), its answer and its calls, and a last assistant turn
 * with something in it is continued rather than closed; then a new assistant turn primed
 * with the thinking tag that says whether to think.
 *
 * ollama's `poolside-v1` renderer (the later Laguna template) is the same outline packed
 * tight: no newlines inside the tags, no call instructions after the tools, a system turn
 * also when only thinking asks for one, every assistant turn's thinking (as it is) only while
 * thinking is on, and each assistant turn closed, a new one always opened after it.
 */
#include <string.h>

#include "template/laguna.h"
#include "template/gorender.h"
#include "template/tbuf.h"

/* The text Laguna's vocabulary spells its begin-of-text token with (tokenizer.ggml.bos). */
static const char laguna_bos[] = "\xe3\x80\x88|EOS|\xe3\x80\x89"; /* 〈|EOS|〉 */

/* The system text Laguna's own template starts from when the request has none. */
static const char laguna_default_system[] =
    "You are a helpful, conversationally-fluent assistant made by Poolside. You are here to "
    "be helpful to users through natural language conversations.";

static bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

/* s[*begin, *end) without the white space at either end (trim_left, trim_right). */
static void trim(const char *s, size_t *begin, size_t *end, bool trim_left, bool trim_right)
{
    while (trim_left && *begin < *end && is_space(s[*begin]))
        (*begin)++;
    while (trim_right && *end > *begin && is_space(s[*end - 1]))
        (*end)--;
}

static bool blank(const char *s)
{
    size_t b = 0, e = strlen(s);
    trim(s, &b, &e, true, true);
    return b == e;
}

/* A span of a string: where it starts and how long it is. */
typedef struct span {
    const char *s;
    size_t n;
} span;

static bool put_span(tbuf *out, span t)
{
    return tbuf_append(out, t.s, t.n);
}

static span trimmed(span t)
{
    size_t b = 0, e = t.n;
    trim(t.s, &b, &e, true, true);
    return (span){t.s + b, e - b};
}

/* Text before the last occurrence of needle in t, or NULL. */
static const char *last_of(span t, const char *needle)
{
    size_t n = strlen(needle);
    for (size_t i = t.n >= n ? t.n - n + 1 : 0; i-- > 0;)
        if (memcmp(t.s + i, needle, n) == 0)
            return t.s + i;
    return NULL;
}

/*
 * An assistant turn's answer and thinking: content that holds a closing thinking tag (a
 * client sending back the model's raw text) is split at it, the text after the last one the
 * answer, and the text before the first one (after any opening tag, less its newlines) the
 * thinking unless the message carries its own.
 */
static void assistant_parts(const json_t *m, span *content, span *thinking)
{
    const char *text = gorender_str(m, "content");
    *content = (span){text, strlen(text)};
    const char *own = gorender_str(m, "thinking");
    *thinking = (span){own, strlen(own)};
    const char *first_close = strstr(text, LAGUNA_THINK_CLOSE);
    if (!first_close)
        return;
    if (!*own) {
        size_t b = 0, e = (size_t)(first_close - text);
        while (e > 0 && text[e - 1] == '\n')
            e--;
        const char *open = last_of((span){text, e}, LAGUNA_THINK_OPEN);
        if (open)
            b = (size_t)(open - text) + strlen(LAGUNA_THINK_OPEN);
        while (b < e && text[b] == '\n')
            b++;
        *thinking = (span){text + b, e - b};
    }
    const char *last_close = last_of(*content, LAGUNA_THINK_CLOSE);
    const char *after = last_close + strlen(LAGUNA_THINK_CLOSE);
    while (*after == '\n')
        after++;
    *content = (span){after, strlen(after)};
}

/* A call in the history: its name, then each argument as a key and a value (strings as they
 * are, other values as JSON), in the order the client gave them; nl ("\n" or "") after the
 * name and each tag that closes. */
static bool tool_call(tbuf *out, const json_t *call, const char *nl)
{
    const json_t *fn = json_object_get(call, "function");
    bool ok = tbuf_puts(out, "<tool_call>") && tbuf_puts(out, gorender_str(fn, "name")) &&
              tbuf_puts(out, nl);
    const char *key;
    const json_t *value;
    json_object_foreach((json_t *)json_object_get(fn, "arguments"), key, value) {
        ok = ok && tbuf_puts(out, "<arg_key>") && tbuf_puts(out, key) &&
             tbuf_puts(out, "</arg_key>") && tbuf_puts(out, nl) &&
             tbuf_puts(out, "<arg_value>") &&
             (json_is_string(value) ? tbuf_puts(out, json_string_value(value))
                                    : gorender_json_spaced(out, value, true, true)) &&
             tbuf_puts(out, "</arg_value>") && tbuf_puts(out, nl);
    }
    return ok && tbuf_puts(out, "</tool_call>") && tbuf_puts(out, nl);
}

static bool assistant_turn(tbuf *out, const json_t *m, bool last)
{
    span content, thinking;
    assistant_parts(m, &content, &thinking);
    const json_t *calls = json_object_get(m, "tool_calls");
    span answer = trimmed(content), thought = trimmed(thinking);
    bool prefill = last && (answer.n > 0 || thought.n > 0 || json_array_size(calls) > 0);
    bool ok = tbuf_puts(out, "<assistant>\n");
    if (thought.n > 0)
        ok = ok && tbuf_puts(out, LAGUNA_THINK_OPEN "\n") && put_span(out, thought) &&
             tbuf_puts(out, "\n" LAGUNA_THINK_CLOSE "\n");
    else
        ok = ok && tbuf_puts(out, LAGUNA_THINK_CLOSE "\n");
    if (answer.n > 0)
        ok = ok && put_span(out, answer) && tbuf_putc(out, '\n');
    size_t i;
    const json_t *call;
    json_array_foreach(calls, i, call) ok = ok && tool_call(out, call, "\n");
    return ok && (prefill || tbuf_puts(out, "</assistant>\n"));
}

/* poolside-v1's assistant turn: its thinking as it is while thinking is on (else the bare
 * closing tag), its answer as it is, its calls, closed. */
static bool packed_assistant_turn(tbuf *out, const json_t *m, bool thinking)
{
    bool ok = tbuf_puts(out, "<assistant>") &&
              (!thinking || (tbuf_puts(out, LAGUNA_THINK_OPEN) &&
                             tbuf_puts(out, gorender_str(m, "thinking")))) &&
              tbuf_puts(out, LAGUNA_THINK_CLOSE) && tbuf_puts(out, gorender_str(m, "content"));
    size_t i;
    const json_t *call;
    json_array_foreach(json_object_get(m, "tool_calls"), i, call) {
        ok = ok && tool_call(out, call, "");
    }
    return ok && tbuf_puts(out, "</assistant>\n");
}

/* A turn of role tag around text (nl: each on its own line). */
static bool tagged(tbuf *out, const char *tag, const char *text, bool nl)
{
    return tbuf_printf(out, nl ? "<%s>\n" : "<%s>", tag) && tbuf_puts(out, text) &&
           tbuf_printf(out, nl ? "\n</%s>\n" : "</%s>\n", tag);
}

/* A copy of obj's member key, when it has one, appended to to (for the fields' order). */
static bool copy_member(json_t *to, const json_t *obj, const char *key)
{
    json_t *v = json_object_get(obj, key);
    return !v || json_object_set(to, key, v) == 0;
}

/* One offered tool on its own line, in the order of ollama's tool fields (type, function:
 * name, description, parameters: type, required, properties), spaced as its renderer writes
 * JSON. */
static bool tool_line(tbuf *out, const json_t *tool)
{
    const json_t *fn = json_object_get(tool, "function");
    const json_t *params = json_object_get(fn, "parameters");
    json_t *line = json_object(), *f = json_object(), *p = json_object();
    bool ok = line && f && p && json_object_set_new(line, "type", json_string("function")) == 0 &&
              copy_member(f, fn, "name") && copy_member(f, fn, "description") &&
              copy_member(p, params, "type") && copy_member(p, params, "required") &&
              copy_member(p, params, "properties");
    ok = ok && (json_object_size(p) == 0 || json_object_set(f, "parameters", p) == 0) &&
         json_object_set(line, "function", f) == 0;
    ok = ok && gorender_json_spaced(out, line, true, false);
    json_decref(line);
    json_decref(f);
    json_decref(p);
    return ok && tbuf_putc(out, '\n');
}

/* The offered tools under their heading, a line each. */
static bool tool_list(tbuf *out, const json_t *tools)
{
    bool ok = tbuf_puts(out, "### Tools\n\nYou may call functions to assist with the user "
                             "query.\nAll available function signatures are listed below:\n"
                             "<available_tools>\n");
    size_t i;
    const json_t *tool;
    json_array_foreach(tools, i, tool) ok = ok && tool_line(out, tool);
    return ok && tbuf_puts(out, "</available_tools>");
}

/* The system text less the white space at its end. */
static bool system_text(tbuf *out, const char *system)
{
    size_t b = 0, e = strlen(system);
    trim(system, &b, &e, false, true);
    return tbuf_append(out, system, e);
}

/* poolside-v1's system turn: its text (unless blank) and the offered tools, or empty when
 * only thinking asks for it. */
static bool packed_system_turn(tbuf *out, const char *system, const json_t *tools,
                               bool thinking)
{
    bool has_tools = json_array_size(tools) > 0, has_text = !blank(system);
    if (!has_text && !has_tools && !thinking)
        return true;
    return tbuf_puts(out, "<system>") && (!has_text || system_text(out, system)) &&
           (!has_text || !has_tools || tbuf_puts(out, "\n\n")) &&
           (!has_tools || tool_list(out, tools)) && tbuf_puts(out, "</system>\n");
}

/* The system turn: its text (unless blank) and the offered tools with how to call them. */
static bool system_turn(tbuf *out, const char *system, const json_t *tools, bool thinking)
{
    bool has_tools = json_array_size(tools) > 0;
    if (blank(system) && !has_tools)
        return true;
    bool ok = tbuf_puts(out, "<system>\n");
    if (!blank(system))
        ok = ok && tbuf_putc(out, '\n') && system_text(out, system);
    if (has_tools) {
        ok = ok && tbuf_puts(out, "\n\n") && tool_list(out, tools) && tbuf_puts(out, "\n\n");
        static const char how[] =
            "For each function call, return an unescaped XML-like object with function name "
            "and arguments within '<tool_call>' and '</tool_call>' tags, like here:\n";
        if (thinking)
            ok = ok && tbuf_puts(out, "Wrap your thinking in '<think>', '</think>' tags, "
                                      "followed by a function call. ") &&
                 tbuf_puts(out, how) && tbuf_puts(out, "<think> your thoughts here </think>\n");
        else
            ok = ok && tbuf_puts(out, how);
        ok = ok && tbuf_puts(out, "<tool_call>function-name\n<arg_key>argument-key</arg_key>\n"
                                  "<arg_value>value-of-argument-key</arg_value>\n</tool_call>");
    }
    return ok && tbuf_puts(out, "\n</system>\n");
}

/* The prompt in ollama's `laguna` layout, or (packed) its `poolside-v1` one. */
static char *laguna_layout(bool packed, const json_t *messages, const json_t *tools,
                           const json_t *think, const corral_template_limits *limits,
                           size_t *len, corral_error *err)
{
    corral_template_limits defaults = corral_template_default_limits();
    size_t max_bytes = (limits ? limits : &defaults)->max_output_bytes;
    size_t n = json_array_size(messages);
    const json_t *first = json_array_get(messages, 0);
    bool leading_system = n > 0 && gorender_is_role(first, "system");
    const char *system = leading_system ? gorender_str(first, "content") : laguna_default_system;
    /* off unless asked for: true or a level ollama knows, as its laguna and poolside-v1
     * renderers read think (the chat template's default is off) */
    bool thinking = gorender_think_on(think);
    tbuf out;
    tbuf_init(&out, max_bytes);
    bool ok = tbuf_puts(&out, laguna_bos) &&
              (packed ? packed_system_turn(&out, system, tools, thinking)
                      : system_turn(&out, system, tools, thinking));
    for (size_t i = leading_system ? 1 : 0; ok && i < n; i++) {
        const json_t *m = json_array_get(messages, i);
        const char *role = gorender_str(m, "role"), *content = gorender_str(m, "content");
        if (strcmp(role, "user") == 0)
            ok = tagged(&out, "user", content, !packed);
        else if (strcmp(role, "assistant") == 0)
            ok = packed ? packed_assistant_turn(&out, m, thinking)
                        : assistant_turn(&out, m, i + 1 == n);
        else if (strcmp(role, "tool") == 0)
            ok = tagged(&out, "tool_response", content, !packed);
        else if (strcmp(role, "system") == 0)
            ok = tagged(&out, "system", content, !packed);
    }
    const json_t *last = json_array_get(messages, n ? n - 1 : 0);
    if (ok && (packed || n == 0 || !gorender_is_role(last, "assistant")))
        ok = tbuf_puts(&out, packed ? "<assistant>" : "<assistant>\n") &&
             tbuf_puts(&out, thinking ? LAGUNA_THINK_OPEN : LAGUNA_THINK_CLOSE);
    return gorender_finish(&out, ok, packed ? "poolside-v1" : "laguna", len, err);
}

char *laguna_render(const json_t *messages, const json_t *tools, const json_t *think,
                    const corral_template_limits *limits, size_t *len, corral_error *err)
{
    return laguna_layout(false, messages, tools, think, limits, len, err);
}

char *poolside_v1_render(const json_t *messages, const json_t *tools, const json_t *think,
                         const corral_template_limits *limits, size_t *len, corral_error *err)
{
    return laguna_layout(true, messages, tools, think, limits, len, err);
}

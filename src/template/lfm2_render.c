/*
 * The LFM2 prompt (lfm2.h), laid out as ollama's `lfm2` and `lfm2-thinking` renderers lay it
 * out. An assistant turn's text is built in steps, each looking at what the one before made:
 * its calls go in front of the content unless the content already holds calls, its thinking
 * in front of that unless it already holds a closing thinking tag, and an earlier turn's
 * thinking is cut off at the last closing tag unless kept.
 */
#include <string.h>

#include "template/gorender.h"
#include "template/lfm2.h"
#include "template/tbuf.h"

#define TOOL_CALL_END "<|tool_call_end|>"
#define RESPONSE_START "<|tool_response_start|>"
#define RESPONSE_END "<|tool_response_end|>"

/* The offered tools after the system text (system: may be empty), in one list. */
static bool tool_list(tbuf *out, const char *system, const json_t *tools)
{
    bool ok = (!*system || tbuf_putc(out, '\n')) &&
              tbuf_puts(out, "List of tools: <|tool_list_start|>[");
    size_t i;
    const json_t *tool;
    json_array_foreach(tools, i, tool) {
        /* the function alone, as LFM2's template expects, unless it has no name */
        const json_t *fn = json_object_get(tool, "function");
        ok = ok && (i == 0 || tbuf_puts(out, ", ")) &&
             (*gorender_str(fn, "name") ? gorender_function_spaced(out, fn, false)
                                        : gorender_tool_spaced(out, tool, false));
    }
    return ok && tbuf_puts(out, "]<|tool_list_end|>");
}

/* The last occurrence of needle in s, or NULL. */
static const char *last_of(const char *s, const char *needle)
{
    const char *found = NULL;
    for (const char *at = strstr(s, needle); at; at = strstr(at + 1, needle))
        found = at;
    return found;
}

/* An assistant turn's text (see the top of the file); thinking_model: lfm2-thinking; keep:
 * its thinking stays. */
static bool assistant_text(tbuf *out, const json_t *m, bool thinking_model, bool keep,
                           size_t max_bytes)
{
    const char *content = gorender_str(m, "content"), *thinking = gorender_str(m, "thinking");
    const json_t *calls = json_object_get(m, "tool_calls");
    tbuf body;
    tbuf_init(&body, max_bytes);
    bool ok = true;
    if (json_array_size(calls) > 0 && !strstr(content, LFM2_TOOL_OPEN)) {
        size_t n = strlen(content);
        gorender_trim(content, &n);
        ok = tbuf_puts(&body, LFM2_TOOL_OPEN "[");
        size_t i;
        const json_t *call;
        json_array_foreach(calls, i, call) ok =
            ok && (i == 0 || tbuf_putc(&body, ',')) &&
            gorender_python_call(&body, call, ",", true);
        ok = ok && tbuf_puts(&body, "]" TOOL_CALL_END) && (n == 0 || tbuf_putc(&body, '\n'));
    }
    ok = ok && tbuf_puts(&body, content);
    bool prefix = ok && thinking_model && *thinking && !strstr(body.data, LFM2_THINK_CLOSE);
    const char *close = keep || !ok ? NULL : last_of(body.data, LFM2_THINK_CLOSE);
    if (close)
        ok = gorender_put_trimmed(out, close + strlen(LFM2_THINK_CLOSE));
    else if (!keep && prefix) /* the last closing tag is the thinking's own */
        ok = ok && gorender_put_trimmed(out, body.data);
    else
        ok = ok &&
             (!prefix || (tbuf_puts(out, LFM2_THINK_OPEN) && tbuf_puts(out, thinking) &&
                          tbuf_puts(out, LFM2_THINK_CLOSE))) &&
             tbuf_append(out, body.data, body.len);
    tbuf_free(&body);
    return ok;
}

static char *render(const json_t *messages, const json_t *tools, const json_t *think,
                    bool thinking_model, const corral_template_limits *limits, size_t *len,
                    corral_error *err)
{
    corral_template_limits defaults = corral_template_default_limits();
    size_t max_bytes = (limits ? limits : &defaults)->max_output_bytes;
    size_t n = json_array_size(messages), start = 0, last_assistant = n;
    const char *system = "";
    if (n > 0 && gorender_is_role(json_array_get(messages, 0), "system")) {
        system = gorender_str(json_array_get(messages, 0), "content");
        start = 1;
    }
    for (size_t i = n; i-- > start && last_assistant == n;)
        if (gorender_is_role(json_array_get(messages, i), "assistant"))
            last_assistant = i;
    bool keep_thinking = thinking_model && gorender_think_on(think);
    bool has_tools = json_array_size(tools) > 0;
    tbuf out;
    tbuf_init(&out, max_bytes);
    bool ok = tbuf_puts(&out, "<|startoftext|>");
    if (*system || has_tools)
        ok = ok && tbuf_puts(&out, "<|im_start|>system\n") && tbuf_puts(&out, system) &&
             (!has_tools || tool_list(&out, system, tools)) &&
             tbuf_puts(&out, "<|im_end|>\n");
    for (size_t i = start; ok && i < n; i++) {
        const json_t *m = json_array_get(messages, i);
        const char *content = gorender_str(m, "content");
        bool assistant = gorender_is_role(m, "assistant");
        ok = tbuf_puts(&out, "<|im_start|>") && tbuf_puts(&out, gorender_str(m, "role")) &&
             tbuf_putc(&out, '\n');
        if (assistant)
            ok = ok && assistant_text(&out, m, thinking_model,
                                      keep_thinking || i == last_assistant, max_bytes);
        else if (gorender_is_role(m, "tool") && !strstr(content, RESPONSE_START))
            ok = ok && tbuf_puts(&out, RESPONSE_START) && tbuf_puts(&out, content) &&
                 tbuf_puts(&out, RESPONSE_END);
        else
            ok = ok && tbuf_puts(&out, content);
        /* a last assistant message is continued */
        if (!(assistant && i + 1 == n))
            ok = ok && tbuf_puts(&out, "<|im_end|>\n");
    }
    if (ok && (n == 0 || !gorender_is_role(json_array_get(messages, n - 1), "assistant")))
        ok = tbuf_puts(&out, "<|im_start|>assistant\n");
    return gorender_finish(&out, ok, "lfm2", len, err);
}

char *lfm2_render(const json_t *messages, const json_t *tools, const json_t *think,
                  const corral_template_limits *limits, size_t *len, corral_error *err)
{
    return render(messages, tools, think, false, limits, len, err);
}

char *lfm2_thinking_render(const json_t *messages, const json_t *tools, const json_t *think,
                           const corral_template_limits *limits, size_t *len,
                           corral_error *err)
{
    return render(messages, tools, think, true, limits, len, err);
}

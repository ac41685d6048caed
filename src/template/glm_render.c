/*
 * The GLM prompts (glm.h), laid out as ollama's `glm-4.7` and `glm-ocr` renderers lay them
 * out: one walk over the history for both, GLM-OCR's differences (a newline after each turn's
 * tag, trimmed assistant text, /nothink, its thinking default) under its flag.
 */
#include <string.h>

#include "template/glm.h"
#include "template/gorender.h"
#include "template/tbuf.h"

/* The tool list and how to call, in a system turn of its own ahead of the history. */
static bool tools_turn(tbuf *out, const json_t *tools)
{
    bool ok = tbuf_puts(out, "<|system|>\n# Tools\n\nYou may call one or more functions to "
                             "assist with the user query.\n\nYou are provided with function "
                             "signatures within <tools></tools> XML tags:\n<tools>\n");
    size_t i;
    const json_t *tool;
    json_array_foreach(tools, i, tool) ok =
        ok && gorender_tool_spaced(out, tool, true) && tbuf_putc(out, '\n');
    return ok &&
           tbuf_puts(out, "</tools>\n\nFor each function call, output the function name and "
                          "arguments within the following XML format:\n"
                          "<tool_call>{function-name}<arg_key>{arg-key-1}</arg_key><arg_value>"
                          "{arg-value-1}</arg_value><arg_key>{arg-key-2}</arg_key><arg_value>"
                          "{arg-value-2}</arg_value>...</tool_call>");
}

/* A call in the history: its name, then each argument as a key and a value (strings as they
 * are, other values as JSON), in the order the client gave them. */
static bool tool_call(tbuf *out, const json_t *call)
{
    const json_t *fn = json_object_get(call, "function");
    bool ok = tbuf_puts(out, GLM_TOOL_OPEN) && tbuf_puts(out, gorender_str(fn, "name"));
    const char *key;
    const json_t *value;
    json_object_foreach((json_t *)json_object_get(fn, "arguments"), key, value) {
        ok = ok && tbuf_puts(out, "<arg_key>") && tbuf_puts(out, key) &&
             tbuf_puts(out, "</arg_key><arg_value>") &&
             (json_is_string(value) ? tbuf_puts(out, json_string_value(value))
                                    : gorender_value(out, value)) &&
             tbuf_puts(out, "</arg_value>");
    }
    return ok && tbuf_puts(out, "</tool_call>");
}

/* text, less Go's white space at either end when trim. */
static bool put_text(tbuf *out, const char *text, bool trim)
{
    size_t n = strlen(text);
    const char *s = trim ? gorender_trim(text, &n) : text;
    return tbuf_append(out, s, n);
}

/* An assistant turn: its thinking (or an empty or bare closing tag), answer and calls. */
static bool assistant_turn(tbuf *out, const json_t *m, bool ocr)
{
    const char *thinking = gorender_str(m, "thinking"), *content = gorender_str(m, "content");
    bool ok = tbuf_puts(out, ocr ? "<|assistant|>\n" : "<|assistant|>");
    if (*thinking)
        ok = ok && tbuf_puts(out, GLM_THINK_OPEN) && put_text(out, thinking, ocr) &&
             tbuf_puts(out, GLM_THINK_CLOSE);
    else
        ok = ok && tbuf_puts(out, ocr ? GLM_THINK_OPEN GLM_THINK_CLOSE : GLM_THINK_CLOSE);
    if (*content)
        ok = ok && (!ocr || tbuf_putc(out, '\n')) && put_text(out, content, ocr);
    size_t i;
    const json_t *call;
    json_array_foreach(json_object_get(m, "tool_calls"), i, call) ok =
        ok && (!ocr || tbuf_putc(out, '\n')) && tool_call(out, call);
    return ok && (!ocr || tbuf_putc(out, '\n'));
}

/* The text ends with suffix. */
static bool ends_with(const char *text, const char *suffix)
{
    size_t n = strlen(text), k = strlen(suffix);
    return n >= k && memcmp(text + n - k, suffix, k) == 0;
}

/* A tool's result; the first of a run opens an observation turn. */
static bool tool_result(tbuf *out, const json_t *messages, size_t i, bool ocr)
{
    bool in_run = i > 0 && gorender_is_role(json_array_get(messages, i - 1), "tool");
    const char *content = gorender_str(json_array_get(messages, i), "content");
    return (in_run || tbuf_puts(out, "<|observation|>")) &&
           tbuf_puts(out, ocr ? "\n<tool_response>\n" : "<tool_response>") &&
           tbuf_puts(out, content) &&
           tbuf_puts(out, ocr ? "\n</tool_response>\n" : "</tool_response>");
}

/* The history, one turn after another (other roles leave nothing); nothink: GLM-OCR asked
 * not to think. */
static bool history(tbuf *out, const json_t *messages, bool ocr, bool nothink)
{
    bool ok = true;
    for (size_t i = 0; ok && i < json_array_size(messages); i++) {
        const json_t *m = json_array_get(messages, i);
        const char *content = gorender_str(m, "content");
        if (gorender_is_role(m, "user"))
            ok = tbuf_puts(out, ocr ? "<|user|>\n" : "<|user|>") && tbuf_puts(out, content) &&
                 (!nothink || ends_with(content, "/nothink") || tbuf_puts(out, "/nothink"));
        else if (gorender_is_role(m, "assistant"))
            ok = assistant_turn(out, m, ocr);
        else if (gorender_is_role(m, "tool"))
            ok = tool_result(out, messages, i, ocr);
        else if (gorender_is_role(m, "system"))
            ok = tbuf_puts(out, ocr ? "<|system|>\n" : "<|system|>") && tbuf_puts(out, content) &&
                 (!ocr || tbuf_putc(out, '\n'));
    }
    return ok;
}

static char *render(const json_t *messages, const json_t *tools, const json_t *think, bool ocr,
                    const corral_template_limits *limits, size_t *len, corral_error *err)
{
    corral_template_limits defaults = corral_template_default_limits();
    size_t max_bytes = (limits ? limits : &defaults)->max_output_bytes;
    /* glm-4.7 thinks unless told not to; GLM-OCR is only ever told not to */
    bool off = gorender_think_set(think) && !gorender_think_on(think);
    tbuf out;
    tbuf_init(&out, max_bytes);
    bool ok = tbuf_puts(&out, "[gMASK]<sop>") &&
              (json_array_size(tools) == 0 || tools_turn(&out, tools)) &&
              history(&out, messages, ocr, ocr && off);
    if (ocr)
        ok = ok && tbuf_puts(&out, "<|assistant|>\n") &&
             (!off || tbuf_puts(&out, GLM_THINK_OPEN GLM_THINK_CLOSE "\n"));
    else
        ok = ok && tbuf_puts(&out, "<|assistant|>") &&
             tbuf_puts(&out, off ? GLM_THINK_CLOSE : GLM_THINK_OPEN);
    return gorender_finish(&out, ok, ocr ? "glm-ocr" : "glm-4.7", len, err);
}

char *glm47_render(const json_t *messages, const json_t *tools, const json_t *think,
                   const corral_template_limits *limits, size_t *len, corral_error *err)
{
    return render(messages, tools, think, false, limits, len, err);
}

char *glmocr_render(const json_t *messages, const json_t *tools, const json_t *think,
                    const corral_template_limits *limits, size_t *len, corral_error *err)
{
    return render(messages, tools, think, true, limits, len, err);
}

/*
 * The DeepSeek V3.1 prompt (deepseek3.h), laid out as ollama's `deepseek3.1` renderer lays it
 * out: the system text and tools first, then the history, where whether an assistant turn
 * opens its own <｜Assistant｜> tag depends on what came before it (a user turn), and a
 * message after tool results is the answer they led to.
 */
#include <string.h>

#include "template/deepseek3.h"
#include "template/gorender.h"
#include "template/tbuf.h"

/* Every system message's text, a blank line between them. */
static bool system_text(tbuf *out, const json_t *messages)
{
    bool ok = true, first = true;
    size_t i;
    const json_t *m;
    json_array_foreach(messages, i, m) {
        if (!gorender_is_role(m, "system"))
            continue;
        ok = ok && (first || tbuf_puts(out, "\n\n")) && tbuf_puts(out, gorender_str(m, "content"));
        first = false;
    }
    return ok;
}

/* Each tool's name, description and parameters, then the call format. */
static bool tools_section(tbuf *out, const json_t *tools)
{
    bool ok = tbuf_puts(out, "\n\n## Tools\nYou have access to the following tools:\n");
    size_t i;
    const json_t *tool;
    json_array_foreach(tools, i, tool) {
        const json_t *fn = json_object_get(tool, "function");
        ok = ok && tbuf_puts(out, "\n### ") && tbuf_puts(out, gorender_str(fn, "name")) &&
             tbuf_puts(out, "\nDescription: ") && tbuf_puts(out, gorender_str(fn, "description")) &&
             tbuf_puts(out, "\n\nParameters: ") &&
             gorender_parameters(out, json_object_get(fn, "parameters")) && tbuf_putc(out, '\n');
    }
    return ok && tbuf_puts(out, "\nIMPORTANT: ALWAYS adhere to this exact format for tool use:\n"
                                DEEPSEEK3_TOOL_OPEN DEEPSEEK3_CALL_BEGIN
                                "tool_call_name" DEEPSEEK3_SEP
                                "tool_call_arguments" DEEPSEEK3_CALL_END
                                "{{additional_tool_calls}}" DEEPSEEK3_CALLS_END
                                "\n\nWhere:\n\n- `tool_call_name` must be an exact match to one "
                                "of the available tools\n- `tool_call_arguments` must be valid "
                                "JSON that strictly follows the tool's Parameters Schema\n- For "
                                "multiple tool calls, chain them directly without separators or "
                                "spaces\n");
}

/* An assistant turn's calls, after its text. */
static bool calls_turn(tbuf *out, const json_t *m)
{
    bool ok = tbuf_puts(out, gorender_str(m, "content")) && tbuf_puts(out, DEEPSEEK3_TOOL_OPEN);
    size_t i;
    const json_t *call;
    json_array_foreach(json_object_get(m, "tool_calls"), i, call) {
        const json_t *fn = json_object_get(call, "function");
        ok = ok && tbuf_puts(out, DEEPSEEK3_CALL_BEGIN) &&
             tbuf_puts(out, gorender_str(fn, "name")) && tbuf_puts(out, DEEPSEEK3_SEP) &&
             gorender_arguments(out, json_object_get(fn, "arguments")) &&
             tbuf_puts(out, DEEPSEEK3_CALL_END);
    }
    return ok && tbuf_puts(out, DEEPSEEK3_CALLS_END DEEPSEEK3_EOS);
}

/* An answer's text: after tool results as it is, else what follows its first closing
 * thinking tag (a client sending back the model's raw text). */
static bool answer_text(tbuf *out, const char *content, bool after_tool)
{
    const char *close = after_tool ? NULL : strstr(content, DEEPSEEK3_THINK_CLOSE);
    return tbuf_puts(out, close ? close + strlen(DEEPSEEK3_THINK_CLOSE) : content) &&
           tbuf_puts(out, DEEPSEEK3_EOS);
}

char *deepseek31_render(const json_t *messages, const json_t *tools, const json_t *think,
                        const corral_template_limits *limits, size_t *len, corral_error *err)
{
    corral_template_limits defaults = corral_template_default_limits();
    size_t max_bytes = (limits ? limits : &defaults)->max_output_bytes;
    bool thinking = gorender_think_on(think);
    size_t n = json_array_size(messages), last_user = n;
    for (size_t i = n; i-- > 0 && last_user == n;)
        if (gorender_is_role(json_array_get(messages, i), "user"))
            last_user = i;
    tbuf out;
    tbuf_init(&out, max_bytes);
    bool ok = tbuf_puts(&out, DEEPSEEK3_BOS) && system_text(&out, messages) &&
              (json_array_size(tools) == 0 || tools_section(&out, tools));
    /* after_user: the last turn was the user's (the assistant's tag is not out yet);
     * after_tool: it was a tool's result */
    bool after_user = false, after_tool = false;
    for (size_t i = 0; ok && i < n; i++) {
        const json_t *m = json_array_get(messages, i);
        if (gorender_is_role(m, "user")) {
            ok = tbuf_puts(&out, DEEPSEEK3_USER) && tbuf_puts(&out, gorender_str(m, "content"));
            after_user = true;
            after_tool = false;
        } else if (gorender_is_role(m, "tool")) {
            ok = tbuf_puts(&out, DEEPSEEK3_OUTPUT_BEGIN) &&
                 tbuf_puts(&out, gorender_str(m, "content")) &&
                 tbuf_puts(&out, DEEPSEEK3_OUTPUT_END);
            after_user = false;
            after_tool = true;
        } else if (gorender_is_role(m, "assistant") &&
                   json_array_size(json_object_get(m, "tool_calls"))) {
            ok = (!after_user || tbuf_puts(&out, DEEPSEEK3_ASSISTANT DEEPSEEK3_THINK_CLOSE)) &&
                 calls_turn(&out, m);
            after_user = after_tool = false;
        } else if (gorender_is_role(m, "assistant")) {
            /* only the answer being continued (after the last user turn) may open thinking */
            bool open =
                thinking && *gorender_str(m, "thinking") && (last_user == n || i > last_user);
            ok = (!after_user || (tbuf_puts(&out, DEEPSEEK3_ASSISTANT) &&
                                  tbuf_puts(&out, open ? DEEPSEEK3_THINK_OPEN
                                                       : DEEPSEEK3_THINK_CLOSE))) &&
                 answer_text(&out, gorender_str(m, "content"), after_tool);
            after_user = after_tool = false;
        }
    }
    if (ok && after_user)
        ok = tbuf_puts(&out, DEEPSEEK3_ASSISTANT) &&
             tbuf_puts(&out, thinking ? DEEPSEEK3_THINK_OPEN : DEEPSEEK3_THINK_CLOSE);
    return gorender_finish(&out, ok, "deepseek3.1", len, err);
}

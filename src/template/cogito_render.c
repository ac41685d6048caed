/*
 * The Cogito prompt (cogito.h), laid out as ollama's `cogito` renderer lays it out: the
 * system text (Cogito's own, the request's leading system message, the thinking request and
 * the tools), then the history, where later system messages and other roles leave nothing.
 */
#include <string.h>

#include "template/cogito.h"
#include "template/gorender.h"
#include "template/tbuf.h"

#define OUTPUTS_BEGIN DEEPSEEK3_TOKEN("tool" DEEPSEEK3_SP "outputs" DEEPSEEK3_SP "begin")
#define OUTPUTS_END DEEPSEEK3_TOKEN("tool" DEEPSEEK3_SP "outputs" DEEPSEEK3_SP "end")

/* The system text Cogito's template starts from. */
static const char cogito_system[] = "You are Cogito, an AI assistant created by Deep Cogito, "
                                    "which is an AI research lab based in San Francisco.";

/* Cogito's system text, the request's (system; may be empty) after it, and the tools. */
static bool system_text(tbuf *out, const char *system, const json_t *tools, bool thinking)
{
    bool ok = (!thinking || tbuf_puts(out, "Enable deep thinking subroutine.\n\n")) &&
              tbuf_puts(out, cogito_system);
    if (*system)
        ok = ok && tbuf_puts(out, "\n\n") && tbuf_puts(out, system) &&
             (!thinking || tbuf_puts(out, "\n\n"));
    if (json_array_size(tools) == 0)
        return ok;
    ok = ok && tbuf_puts(out, "\nYou have the following functions available:\n");
    size_t i;
    const json_t *tool;
    json_array_foreach(tools, i, tool) ok = ok && tbuf_puts(out, "```json\n") &&
                                            gorender_tool(out, tool, 4) &&
                                            tbuf_puts(out, "\n```\n");
    return ok;
}

/* An assistant turn: its text, then its calls (each name with its arguments fenced). */
static bool assistant_turn(tbuf *out, const json_t *m)
{
    const json_t *calls = json_object_get(m, "tool_calls");
    bool ok = tbuf_puts(out, gorender_str(m, "content"));
    if (json_array_size(calls) == 0)
        return ok && tbuf_puts(out, DEEPSEEK3_EOS);
    ok = ok && tbuf_puts(out, COGITO_TOOL_OPEN);
    size_t i;
    const json_t *call;
    json_array_foreach(calls, i, call) {
        const json_t *fn = json_object_get(call, "function");
        ok = ok && (i == 0 || tbuf_putc(out, '\n')) &&
             tbuf_puts(out, DEEPSEEK3_CALL_BEGIN "function" DEEPSEEK3_SEP) &&
             tbuf_puts(out, gorender_str(fn, "name")) && tbuf_puts(out, "\n```json\n") &&
             gorender_arguments(out, json_object_get(fn, "arguments")) &&
             tbuf_puts(out, "\n```" DEEPSEEK3_CALL_END);
    }
    return ok && tbuf_puts(out, DEEPSEEK3_CALLS_END DEEPSEEK3_EOS);
}

/* A tool's result; a run of them between the outputs tokens, a newline between two. */
static bool tool_result(tbuf *out, const json_t *messages, size_t i)
{
    bool first = i == 0 || !gorender_is_role(json_array_get(messages, i - 1), "tool");
    bool last = !gorender_is_role(json_array_get(messages, i + 1), "tool");
    return (!first || tbuf_puts(out, OUTPUTS_BEGIN)) && tbuf_puts(out, DEEPSEEK3_OUTPUT_BEGIN) &&
           tbuf_puts(out, gorender_str(json_array_get(messages, i), "content")) &&
           tbuf_puts(out, DEEPSEEK3_OUTPUT_END) && tbuf_puts(out, last ? OUTPUTS_END : "\n");
}

char *cogito_render(const json_t *messages, const json_t *tools, const json_t *think,
                    const corral_template_limits *limits, size_t *len, corral_error *err)
{
    corral_template_limits defaults = corral_template_default_limits();
    size_t max_bytes = (limits ? limits : &defaults)->max_output_bytes;
    bool thinking = gorender_think_on(think);
    size_t n = json_array_size(messages);
    bool leading_system = n > 0 && gorender_is_role(json_array_get(messages, 0), "system");
    const char *system = leading_system ? gorender_str(json_array_get(messages, 0), "content") : "";
    tbuf out;
    tbuf_init(&out, max_bytes);
    bool ok = tbuf_puts(&out, DEEPSEEK3_BOS) && system_text(&out, system, tools, thinking);
    bool after_user = false;
    for (size_t i = leading_system ? 1 : 0; ok && i < n; i++) {
        const json_t *m = json_array_get(messages, i);
        if (gorender_is_role(m, "user"))
            ok = tbuf_puts(&out, DEEPSEEK3_USER) && tbuf_puts(&out, gorender_str(m, "content")) &&
                 tbuf_puts(&out, DEEPSEEK3_ASSISTANT);
        else if (gorender_is_role(m, "assistant"))
            ok = assistant_turn(&out, m);
        else if (gorender_is_role(m, "tool"))
            ok = tool_result(&out, messages, i);
        /* other roles leave nothing, and leave the last turn as it was */
        if (gorender_is_role(m, "user") || gorender_is_role(m, "assistant") ||
            gorender_is_role(m, "tool"))
            after_user = gorender_is_role(m, "user");
    }
    ok = ok && (after_user || tbuf_puts(&out, DEEPSEEK3_ASSISTANT)) &&
         (!thinking || tbuf_puts(&out, COGITO_THINK_OPEN "\n"));
    return gorender_finish(&out, ok, "cogito", len, err);
}

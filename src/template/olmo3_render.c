/*
 * The Olmo 3 prompts (olmo3.h), laid out as ollama's Olmo 3 renderers lay them out: one walk
 * for the four names, the variant choosing the default system text and whether the model
 * thinks (then it has no tools).
 */
#include <string.h>

#include "template/gorender.h"
#include "template/olmo3.h"
#include "template/tbuf.h"

typedef enum olmo3_variant { OLMO3, OLMO31, OLMO3_THINK, OLMO3_32B_THINK } olmo3_variant;

static const char olmo3_system[] = "You are a helpful function-calling AI assistant. ";
static const char olmo31_system[] = "You are Olmo, a helpful AI assistant built by Ai2. Your date "
                                    "cutoff is December 2024, and your model weights are "
                                    "available at https://huggingface.co/allenai.";
static const char think_32b_system[] = "You are a helpful AI assistant.";
static const char with_functions[] =
    "You are provided with function signatures within <functions></functions> XML tags. You may "
    "call one or more functions to assist with the user query. Output any function calls within "
    "<function_calls></function_calls> XML tags. Do not make assumptions about what values to "
    "plug into functions.";

/* The offered tools as one JSON list, spaced. */
static bool functions(tbuf *out, const json_t *tools)
{
    bool ok = tbuf_puts(out, "<functions>[");
    size_t i;
    const json_t *tool;
    json_array_foreach(tools, i, tool) ok = ok && (i == 0 || tbuf_puts(out, ", ")) &&
                                            gorender_tool_spaced(out, tool, true);
    return ok && tbuf_puts(out, "]</functions>");
}

/* The system turn: system (the request's; NULL: none) or the variant's default text, and what
 * the model may call. */
static bool system_turn(tbuf *out, const json_t *system, const json_t *tools, olmo3_variant v)
{
    bool thinker = v == OLMO3_THINK || v == OLMO3_32B_THINK, has_tools = json_array_size(tools);
    bool ok = tbuf_puts(out, "<|im_start|>system\n");
    if (system)
        ok = ok && tbuf_puts(out, gorender_str(system, "content")) &&
             (thinker ? tbuf_puts(out, " You do not currently have access to any functions. "
                                       "<functions></functions>")
                      : !has_tools || functions(out, tools));
    else if (thinker)
        ok = ok && tbuf_puts(out, v == OLMO3_32B_THINK ? think_32b_system : olmo31_system);
    else
        /* olmo3.1's default is the think models' text and a space, as olmo3's ends in one */
        ok = ok && tbuf_puts(out, v == OLMO31 ? olmo31_system : olmo3_system) &&
             tbuf_puts(out, v == OLMO31 ? " " : "") &&
             (has_tools ? tbuf_puts(out, with_functions) && functions(out, tools)
                        : tbuf_puts(out, "You do not currently have access to any functions. "
                                         "<functions></functions>"));
    return ok && tbuf_puts(out, "<|im_end|>\n");
}

/* An assistant turn; a last one with text only is left open (continued). The think models
 * keep only the text. */
static bool assistant_turn(tbuf *out, const json_t *m, bool last, bool thinker)
{
    const json_t *calls = thinker ? NULL : json_object_get(m, "tool_calls");
    bool ok = tbuf_puts(out, "<|im_start|>assistant\n") &&
              tbuf_puts(out, gorender_str(m, "content"));
    if (json_array_size(calls) > 0) {
        ok = ok && tbuf_puts(out, OLMO3_TOOL_OPEN);
        size_t i;
        const json_t *call;
        json_array_foreach(calls, i, call) ok =
            ok && (i == 0 || tbuf_putc(out, '\n')) &&
            gorender_python_call(out, call, ", ", false);
        ok = ok && tbuf_puts(out, "</function_calls>");
    }
    bool open = !thinker && last && json_array_size(calls) == 0;
    return ok && (open || tbuf_puts(out, "<|im_end|>\n"));
}

static char *render(const json_t *messages, const json_t *tools, olmo3_variant v,
                    const corral_template_limits *limits, size_t *len, corral_error *err)
{
    corral_template_limits defaults = corral_template_default_limits();
    size_t max_bytes = (limits ? limits : &defaults)->max_output_bytes;
    bool thinker = v == OLMO3_THINK || v == OLMO3_32B_THINK;
    const json_t *system = NULL;
    size_t i, n = json_array_size(messages), last = n;
    const json_t *m;
    /* the turns that stay: all but system messages, and the tools' for the think models */
    json_array_foreach(messages, i, m) {
        if (gorender_is_role(m, "system"))
            system = system ? system : m;
        else if (!thinker || !gorender_is_role(m, "tool"))
            last = i;
    }
    tbuf out;
    tbuf_init(&out, max_bytes);
    bool ok = system_turn(&out, system, thinker ? NULL : tools, v);
    json_array_foreach(messages, i, m) {
        if (!ok)
            break;
        if (gorender_is_role(m, "user"))
            ok = tbuf_puts(&out, "<|im_start|>user\n") &&
                 tbuf_puts(&out, gorender_str(m, "content")) && tbuf_puts(&out, "<|im_end|>\n");
        else if (gorender_is_role(m, "assistant"))
            ok = assistant_turn(&out, m, i == last, thinker);
        else if (gorender_is_role(m, "tool") && !thinker)
            ok = tbuf_puts(&out, "<|im_start|>environment\n") &&
                 tbuf_puts(&out, gorender_str(m, "content")) && tbuf_puts(&out, "<|im_end|>\n");
    }
    /* a last assistant message with text only is continued instead of answered anew */
    const json_t *final = json_array_get(messages, last);
    bool continued = !thinker && final && gorender_is_role(final, "assistant") &&
                     json_array_size(json_object_get(final, "tool_calls")) == 0 &&
                     *gorender_str(final, "content");
    if (ok && thinker)
        ok = tbuf_puts(&out, "<|im_start|>assistant\n" OLMO3_THINK_OPEN);
    else if (ok && !continued)
        ok = tbuf_puts(&out, "<|im_start|>assistant\n");
    return gorender_finish(&out, ok, "olmo3", len, err);
}

char *olmo3_render(const json_t *messages, const json_t *tools, const json_t *think,
                   const corral_template_limits *limits, size_t *len, corral_error *err)
{
    (void)think;
    return render(messages, tools, OLMO3, limits, len, err);
}

char *olmo31_render(const json_t *messages, const json_t *tools, const json_t *think,
                    const corral_template_limits *limits, size_t *len, corral_error *err)
{
    (void)think;
    return render(messages, tools, OLMO31, limits, len, err);
}

char *olmo3_think_render(const json_t *messages, const json_t *tools, const json_t *think,
                         const corral_template_limits *limits, size_t *len, corral_error *err)
{
    (void)think;
    return render(messages, tools, OLMO3_THINK, limits, len, err);
}

char *olmo3_32b_think_render(const json_t *messages, const json_t *tools, const json_t *think,
                             const corral_template_limits *limits, size_t *len,
                             corral_error *err)
{
    (void)think;
    return render(messages, tools, OLMO3_32B_THINK, limits, len, err);
}

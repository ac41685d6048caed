/*
 * NVIDIA Nemotron 3 Nano's chat format as ollama's `nemotron-3-nano` and `nemotron-3.5-nano`
 * renderers lay it out, for models whose config names one of them. ChatML turns
 * (<|im_start|>ROLE ... <|im_end|>): a system turn always opens the prompt, holding the
 * request's leading system message and then the offered tools as XML (<tools> of <function>
 * elements, each parameter's fields as tags, schema values printed in Python's JSON style)
 * with how to call them; a run of tool results is one user turn of <tool_response> blocks;
 * every answer starts with a thinking block (an empty <think></think> when it had none), and
 * the answers before the last question keep only what follows their thinking. The history's
 * calls are <tool_call><function=NAME><parameter=KEY> blocks, which is also how the model
 * answers (CORRAL_CALLS_XML_FUNCTION). The prompt ends with an assistant turn opening
 * <think>\n when thinking is on (the default) or closing an empty <think></think> when off.
 * Images are the markers the server placed in the content.
 *
 * Nemotron 3 Nano reads "/think" and "/no_think" in the user and system messages as switches
 * (the last one wins over the request's think) and takes them out of the text, which it
 * trims; Nemotron 3.5 Nano leaves the text alone, follows only think, and asks for efficient
 * reasoning at the last question when think is "medium".
 */
#ifndef CORRAL_TEMPLATE_NEMOTRON_H
#define CORRAL_TEMPLATE_NEMOTRON_H

#include <jansson.h>
#include <stddef.h>

#include "corral/error.h"
#include "template/template.h"

#define NEMOTRON_THINK_OPEN "<think>"
#define NEMOTRON_THINK_CLOSE "</think>"
#define NEMOTRON_TOOL_OPEN "<tool_call>"

/*
 * The prompt for messages (the whole history, as the template path assembles it), tools (the
 * request's; NULL or empty: none) and think (the request's; NULL: absent). A malloc'ed string
 * (length in *len) or NULL with err when out of memory, over limits->max_output_bytes (limits
 * NULL: the template defaults) or nested past TFMT_MAX_DEPTH.
 */
char *nemotron3_nano_render(const json_t *messages, const json_t *tools, const json_t *think,
                            const corral_template_limits *limits, size_t *len,
                            corral_error *err);
char *nemotron35_nano_render(const json_t *messages, const json_t *tools, const json_t *think,
                             const corral_template_limits *limits, size_t *len,
                             corral_error *err);

#endif

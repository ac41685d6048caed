/*
 * Gemma 4's chat format as ollama's `gemma4` (also `gemma4-small`) and `gemma4-large`
 * renderers lay it out, for models whose config names one of them. The prompt is <bos> (the
 * runner's tokenizer keeps one BOS: corral_tokenize_prompt), then <|turn>ROLE ... <turn|>
 * turns (an assistant's role is "model"). A first system turn holds <|think|> when thinking
 * is on, the request's leading system (or developer) message trimmed, and each offered tool as
 * a <|tool>declaration:NAME{...}<tool|> block in Gemma's own value syntax (keys bare and
 * sorted, strings between <|"|> marks, type names upper-cased). An answer's calls go before its
 * text as <|tool_call>call:NAME{KEY:VALUE,...}<tool_call|>, and the tool results that follow
 * them stay in the same model turn as <|tool_response>response:NAME{value:<|"|>TEXT<|"|>}
 * <tool_response|>; consecutive answers continue one model turn. Earlier answers lose the
 * thinking written into their text; the answers after the last question keep their thinking
 * field as a <|channel>thought block. The prompt ends with a new model turn, or, after a
 * call's results, inside the same turn (opening the thinking channel when thinking is on);
 * gemma4-large ends a new turn with an empty thinking block when thinking is off. Images are
 * the markers the server placed in the content.
 *
 * The answer thinks in the channel GEMMA4_THINK_OPEN ... GEMMA4_THINK_CLOSE (the channel's
 * name, "thought", is part of the opening tag so that the thinking starts after it) and calls
 * after GEMMA4_TOOL_OPEN in CORRAL_CALLS_GEMMA4's syntax.
 */
#ifndef CORRAL_TEMPLATE_GEMMA4_H
#define CORRAL_TEMPLATE_GEMMA4_H

#include <jansson.h>
#include <stddef.h>

#include "corral/error.h"
#include "template/template.h"

#define GEMMA4_THINK_OPEN "<|channel>thought"
#define GEMMA4_THINK_CLOSE "<channel|>"
#define GEMMA4_TOOL_OPEN "<|tool_call>"

/*
 * The prompt for messages (the whole history, as the template path assembles it), tools (the
 * request's; NULL or empty: none) and think (the request's; NULL: absent). A malloc'ed string
 * (length in *len) or NULL with err when out of memory, over limits->max_output_bytes (limits
 * NULL: the template defaults) or nested deeper than TFMT_MAX_DEPTH.
 */
char *gemma4_render(const json_t *messages, const json_t *tools, const json_t *think,
                    const corral_template_limits *limits, size_t *len, corral_error *err);
char *gemma4_large_render(const json_t *messages, const json_t *tools, const json_t *think,
                          const corral_template_limits *limits, size_t *len,
                          corral_error *err);

#endif

/*
 * FunctionGemma's chat format (Google's function-calling Gemma 3 270M) as ollama's
 * `functiongemma` renderer lays it out, for models whose config names it. Gemma's turns
 * (<start_of_turn>ROLE ... <end_of_turn>, the model's role `model`): a first `developer` turn
 * holds the request's leading system (or developer) message, FunctionGemma's default line
 * when tools are offered and the system text is not that line already, and a
 * <start_function_declaration> for each tool (its description, its properties' descriptions
 * and types in capitals, the required list and the parameters' type, strings between
 * <escape> marks). The history's calls are <start_function_call>call:NAME{KEY:VALUE,...}
 * <end_function_call>, keys sorted, strings between <escape> marks and the rest bare, which is
 * also how the model answers (CORRAL_CALLS_FUNCTIONGEMMA); the results that follow a call go
 * right after it in the same turn as <start_function_response>response:NAME{<escape>TEXT
 * <escape>}<end_function_response>, NAME being the call's the result answers. The prompt ends
 * opening a model turn, unless it ends with a result, which the model continues. It never
 * thinks. The prompt opens with Gemma's <bos>, as ollama's does: the runner's tokenizer keeps
 * one BOS whether or not the vocabulary adds its own (corral_tokenize_prompt). A type is put in
 * capitals as Go's strings.ToUpper does (gorender_put_upper).
 */
#ifndef CORRAL_TEMPLATE_FUNCTIONGEMMA_H
#define CORRAL_TEMPLATE_FUNCTIONGEMMA_H

#include <jansson.h>
#include <stddef.h>

#include "corral/error.h"
#include "template/template.h"

#define FUNCTIONGEMMA_TOOL_OPEN "<start_function_call>"

/*
 * The prompt for messages (the whole history, as the template path assembles it) and tools
 * (the request's; NULL or empty: none); think is not read. A malloc'ed string (length in
 * *len) or NULL with err when out of memory, over limits->max_output_bytes (limits NULL: the
 * template defaults) or nested past TFMT_MAX_DEPTH.
 */
char *functiongemma_render(const json_t *messages, const json_t *tools, const json_t *think,
                           const corral_template_limits *limits, size_t *len,
                           corral_error *err);

#endif

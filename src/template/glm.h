/*
 * GLM's chat formats as ollama's `glm-4.7` and `glm-ocr` renderers lay them out, for models
 * whose config names one of them (ollama's library files, which may carry no chat template).
 * Both start with [gMASK]<sop>, tag turns <|system|>, <|user|>, <|assistant|> and
 * <|observation|> (a run of tool results, each in <tool_response>), offer tools in a first
 * system turn (a line of JSON each) and end with a new assistant turn. GLM calls as
 * <tool_call>NAME then <arg_key>/<arg_value> pairs, which the output parser reads
 * (CORRAL_CALLS_ARG_PAIRS after GLM_TOOL_OPEN); calls in the history are written so.
 *
 * glm-4.7 thinks unless think is false: the prompt ends with GLM_THINK_OPEN (the answer starts
 * inside its thinking), or GLM_THINK_CLOSE when off; earlier turns keep their thinking.
 * glm-ocr (GLM-OCR, a vision model: its images are the markers the server placed in the
 * content) thinks only on its own: think false closes an empty thinking block and asks
 * /nothink of each user turn.
 */
#ifndef CORRAL_TEMPLATE_GLM_H
#define CORRAL_TEMPLATE_GLM_H

#include <jansson.h>
#include <stddef.h>

#include "corral/error.h"
#include "template/template.h"

#define GLM_THINK_OPEN "<think>"
#define GLM_THINK_CLOSE "</think>"
#define GLM_TOOL_OPEN "<tool_call>"
#define GLM_CALLS CORRAL_CALLS_ARG_PAIRS

/*
 * The prompt for messages (the whole history, as the template path assembles it), tools (the
 * request's; NULL or empty: none) and think (the request's; NULL: absent). A malloc'ed string
 * (length in *len) or NULL with err when out of memory or over limits->max_output_bytes
 * (limits NULL: the template defaults).
 */
char *glm47_render(const json_t *messages, const json_t *tools, const json_t *think,
                   const corral_template_limits *limits, size_t *len, corral_error *err);
char *glmocr_render(const json_t *messages, const json_t *tools, const json_t *think,
                    const corral_template_limits *limits, size_t *len, corral_error *err);

#endif

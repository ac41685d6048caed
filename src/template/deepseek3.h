/*
 * DeepSeek V3.1's chat format as ollama's `deepseek3.1` renderer lays it out, for models whose
 * config names it (ollama's library files, which may carry no chat template). The prompt opens
 * with DeepSeek's begin-of-sentence token text, then every system message (joined by a blank
 * line) and the offered tools (a section each: name, description, parameters' JSON) with how
 * to call them; turns are <｜User｜> and <｜Assistant｜>, each assistant turn closed by
 * end-of-sentence, tool results between tool-output tokens; the prompt ends with a new
 * assistant turn opened by DEEPSEEK3_THINK_OPEN when think asks for thinking (true or a
 * level), DEEPSEEK3_THINK_CLOSE otherwise (thinking is off by default). Earlier turns keep only
 * their answers. DeepSeek calls with its call tokens, NAME and the separator token then JSON
 * arguments, which the output parser reads (CORRAL_CALLS_DEEPSEEK after DEEPSEEK3_TOOL_OPEN);
 * calls in the history are written so.
 */
#ifndef CORRAL_TEMPLATE_DEEPSEEK3_H
#define CORRAL_TEMPLATE_DEEPSEEK3_H

#include <jansson.h>
#include <stddef.h>

#include "corral/error.h"
#include "template/template.h"

/* DeepSeek's special tokens as its vocabulary spells them (fullwidth bars, ▁ for spaces). */
#define DEEPSEEK3_TOKEN(name) "<\xef\xbd\x9c" name "\xef\xbd\x9c>"
#define DEEPSEEK3_SP "\xe2\x96\x81"
#define DEEPSEEK3_BOS DEEPSEEK3_TOKEN("begin" DEEPSEEK3_SP "of" DEEPSEEK3_SP "sentence")
#define DEEPSEEK3_EOS DEEPSEEK3_TOKEN("end" DEEPSEEK3_SP "of" DEEPSEEK3_SP "sentence")
#define DEEPSEEK3_USER DEEPSEEK3_TOKEN("User")
#define DEEPSEEK3_ASSISTANT DEEPSEEK3_TOKEN("Assistant")
#define DEEPSEEK3_TOOL_OPEN DEEPSEEK3_TOKEN("tool" DEEPSEEK3_SP "calls" DEEPSEEK3_SP "begin")
#define DEEPSEEK3_CALLS_END DEEPSEEK3_TOKEN("tool" DEEPSEEK3_SP "calls" DEEPSEEK3_SP "end")
#define DEEPSEEK3_CALL_BEGIN DEEPSEEK3_TOKEN("tool" DEEPSEEK3_SP "call" DEEPSEEK3_SP "begin")
#define DEEPSEEK3_CALL_END DEEPSEEK3_TOKEN("tool" DEEPSEEK3_SP "call" DEEPSEEK3_SP "end")
#define DEEPSEEK3_SEP DEEPSEEK3_TOKEN("tool" DEEPSEEK3_SP "sep")
#define DEEPSEEK3_OUTPUT_BEGIN DEEPSEEK3_TOKEN("tool" DEEPSEEK3_SP "output" DEEPSEEK3_SP "begin")
#define DEEPSEEK3_OUTPUT_END DEEPSEEK3_TOKEN("tool" DEEPSEEK3_SP "output" DEEPSEEK3_SP "end")

#define DEEPSEEK3_THINK_OPEN "<think>"
#define DEEPSEEK3_THINK_CLOSE "</think>"
#define DEEPSEEK3_CALLS CORRAL_CALLS_DEEPSEEK

/*
 * The prompt for messages (the whole history, as the template path assembles it), tools (the
 * request's; NULL or empty: none) and think (the request's; NULL: absent). A malloc'ed string
 * (length in *len) or NULL with err when out of memory or over limits->max_output_bytes
 * (limits NULL: the template defaults).
 */
char *deepseek31_render(const json_t *messages, const json_t *tools, const json_t *think,
                        const corral_template_limits *limits, size_t *len, corral_error *err);

#endif

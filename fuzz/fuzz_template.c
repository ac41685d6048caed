/*
 * libFuzzer target for both template languages: each input is parsed as a Go template and
 * as a Jinja template, and whatever parses is rendered over a chat request with tools under
 * small sandbox limits. The same bytes also go through the output parser (split where the
 * first byte says, in the tool-call syntax the last byte picks), the call-syntax detection
 * and, for some inputs, built-in detection. Any crash, sanitizer report,
 * leak or hang past the limits is a bug.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "template/template.h"

static const char request_json[] =
    "{\"messages\":[{\"role\":\"system\",\"content\":\"sys\"},{\"role\":\"user\",\"content\":\"hi "
    "<tool_call>\"},{\"role\":\"assistant\",\"content\":\"\",\"thinking\":\"hmm\",\"tool_calls\":"
    "[{\"function\":{\"name\":\"f\",\"arguments\":{\"x\":1,\"y\":[\"z\"]}}}]},{\"role\":\"tool\","
    "\"content\":\"42\",\"tool_name\":\"f\"},{\"role\":\"user\",\"content\":[{\"type\":\"text\","
    "\"text\":\"part\"}]}],\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\","
    "\"description\":\"d\",\"parameters\":{\"type\":\"object\",\"required\":[\"x\"],"
    "\"properties\":{\"x\":{\"type\":\"integer\",\"description\":\"an x\"}}}}}],"
    "\"bos_token\":\"<s>\",\"eos_token\":\"</s>\",\"add_generation_prompt\":true,"
    "\"enable_thinking\":true,\"think\":true}";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static json_t *request;
    if (!request)
        request = json_loads(request_json, 0, NULL);
    corral_template_limits limits = corral_template_default_limits();
    limits.max_steps = 50000;
    limits.max_output_bytes = 1u << 16;
    for (int syntax = 0; syntax < 2; syntax++) {
        corral_error err;
        corral_template *tmpl = corral_template_parse(
            syntax ? CORRAL_TEMPLATE_JINJA : CORRAL_TEMPLATE_GO, (const char *)data, size, &err);
        if (!tmpl)
            continue;
        size_t len;
        free(corral_template_render_chat(tmpl, request, &limits, &len, &err));
        corral_template_free(tmpl);
    }
    /* the output parser in the call syntax the last byte picks, typing by the request's tools */
    static const corral_output_tags tags[] = {
        {"<think>", "</think>", "<tool_call>", false, "", CORRAL_CALLS_JSON, false},
        {"<think>", "</think>", "<tool_call>", false, "", CORRAL_CALLS_XML_FUNCTION, false},
        {"<think>", "</think>", "<tool_call>", false, "", CORRAL_CALLS_XML_FUNCTION, true},
        {"<think>", "</think>", "<tool_call>", false, "", CORRAL_CALLS_ARG_PAIRS, false},
        {"<think>", "</think>", "<｜tool▁calls▁begin｜>", false, "", CORRAL_CALLS_DEEPSEEK, false},
        {"[THINK]", "[/THINK]", "[TOOL_CALLS]", false, "", CORRAL_CALLS_NAME_ARGS, false},
        {"<|channel>", "<channel|>", "<|tool_call>", false, "", CORRAL_CALLS_GEMMA4, false},
        {"<think>", "</think>", "<|tool_calls_section_begin|>", false, "", CORRAL_CALLS_KIMI,
         false},
        {"<think>", "</think>", "<minimax:tool_call>", false, "", CORRAL_CALLS_MINIMAX, false},
        {"<think>", "</think>", "<｜DSML｜function_calls>", false, "", CORRAL_CALLS_DSML, false},
        {"<mm:think>", "</mm:think>", "]<]minimax[>[<tool_call>", false, "",
         CORRAL_CALLS_MINIMAX_M3, false},
        {"<think>", "</think>", "<|tool_call_start|>", false, "", CORRAL_CALLS_PYTHON, false},
        {"", "", "<function_calls>", false, "", CORRAL_CALLS_PYTHON, false},
        {"<think>", "</think>", "<｜tool▁calls▁begin｜>", false, "", CORRAL_CALLS_DEEPSEEK_FENCED,
         false},
        {"", "", "<start_function_call>", false, "", CORRAL_CALLS_FUNCTIONGEMMA, false},
        {"<|START_THINKING|>", "<|END_THINKING|>", "<|START_ACTION|>", false, "",
         CORRAL_CALLS_COHERE, false},
        {"to=self<|message|>", "<|eom|>", "<atem:function_calls>", false, "",
         CORRAL_CALLS_GLIMMER, false},
    };
    const corral_output_tags *t = &tags[size ? data[size - 1] % (sizeof tags / sizeof tags[0]) : 0];
    corral_output_parser *parser = corral_output_parser_create(t, size & 1, 1u << 16);
    if (parser) {
        corral_output_parser_set_tools(parser, json_object_get(request, "tools"));
        size_t split = size ? data[0] % (size + 1) : 0;
        corral_output_delta delta;
        corral_error err;
        if (corral_output_parser_feed(parser, (const char *)data, split, false, &delta, &err))
            corral_output_parser_feed(parser, (const char *)data + split, size - split, true,
                                      &delta, &err);
        corral_output_parser_free(parser);
    }
    char open[64];
    (void)corral_template_call_syntax((const char *)data, size, open);
    /* Detection is slow under sanitizers; a quarter of the inputs is plenty. */
    char name[64];
    if (size && (data[size - 1] & 3) == 0)
        corral_builtin_template_detect((const char *)data, size, name, sizeof name);
    return 0;
}

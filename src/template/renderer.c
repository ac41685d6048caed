/* The table of built-in renderers (renderer.h). */
#include "template/renderer.h"

#include <string.h>

#include "template/laguna.h"

static const corral_renderer renderers[] = {
    {{"laguna"}, laguna_render, LAGUNA_THINK_OPEN, LAGUNA_THINK_CLOSE, "<tool_call>",
     CORRAL_CALLS_ARG_PAIRS, true, true},
    {{"qwen3.5"}, qwen35_render, "<think>", "</think>", "<tool_call>", CORRAL_CALLS_XML_FUNCTION,
     true, true},
    {{"qwen3-coder"}, qwen3_coder_render, "", "", "<tool_call>", CORRAL_CALLS_XML_FUNCTION, true,
     false},
    {{"qwen3-vl-instruct"}, qwen3_vl_instruct_render, "", "", "<tool_call>", CORRAL_CALLS_JSON,
     true, false},
    {{"qwen3-vl-thinking"}, qwen3_vl_thinking_render, "<think>", "</think>", "<tool_call>",
     CORRAL_CALLS_JSON, true, true},
};

const corral_renderer *corral_renderer_find(const char *name)
{
    if (!name)
        return NULL;
    for (size_t i = 0; i < sizeof renderers / sizeof *renderers; i++)
        for (size_t k = 0; k < CORRAL_RENDERER_MAX_NAMES && renderers[i].names[k]; k++)
            if (strcmp(renderers[i].names[k], name) == 0)
                return &renderers[i];
    return NULL;
}

void corral_renderer_output_tags(const corral_renderer *r, corral_output_tags *tags)
{
    memset(tags, 0, sizeof *tags);
    /* the table's tags are short literals, well within the fields */
    strcpy(tags->think_open, r->think_open);
    strcpy(tags->think_close, r->think_close);
    strcpy(tags->tool_open, r->tool_open);
    tags->calls = r->calls;
}

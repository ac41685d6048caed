/* The table of built-in renderers (renderer.h). */
#include "template/renderer.h"

#include <string.h>

#include "template/cogito.h"
#include "template/cohere.h"
#include "template/deepseek3.h"
#include "template/functiongemma.h"
#include "template/gemma4.h"
#include "template/glimmer.h"
#include "template/glm.h"
#include "template/laguna.h"
#include "template/lfm2.h"
#include "template/nemotron.h"
#include "template/olmo3.h"

static const corral_renderer renderers[] = {
    {{"laguna"}, laguna_render, LAGUNA_THINK_OPEN, LAGUNA_THINK_CLOSE, "<tool_call>",
     CORRAL_CALLS_ARG_PAIRS, true, true, false, false, false},
    {{"poolside-v1"}, poolside_v1_render, LAGUNA_THINK_OPEN, LAGUNA_THINK_CLOSE, "<tool_call>",
     CORRAL_CALLS_ARG_PAIRS, true, true, false, false, false},
    {{"qwen3.5"}, qwen35_render, "<think>", "</think>", "<tool_call>", CORRAL_CALLS_XML_FUNCTION,
     true, true, true, false, true},
    {{"ornith"}, ornith_render, "<think>", "</think>", "<tool_call>", CORRAL_CALLS_XML_FUNCTION,
     true, true, true, false, true},
    /* ollama reads its answers with its qwen3.5 parser; its system turn is text only */
    {{"qwen3.8"}, qwen38_render, "<think>", "</think>", "<tool_call>", CORRAL_CALLS_XML_FUNCTION,
     true, true, true, true, true},
    {{"qwen3-coder"}, qwen3_coder_render, "", "", "<tool_call>", CORRAL_CALLS_XML_FUNCTION, true,
     false, false, false, false},
    {{"qwen3-vl-instruct"}, qwen3_vl_instruct_render, "", "", "<tool_call>", CORRAL_CALLS_JSON,
     true, false, false, false, true},
    {{"qwen3-vl-thinking"}, qwen3_vl_thinking_render, "<think>", "</think>", "<tool_call>",
     CORRAL_CALLS_JSON, true, true, true, false, true},
    {{"glm-4.7"}, glm47_render, GLM_THINK_OPEN, GLM_THINK_CLOSE, GLM_TOOL_OPEN, GLM_CALLS, true,
     true, false, false, false},
    /* thinks only on its own, which ollama's parser for it does not read */
    {{"glm-ocr"}, glmocr_render, "", "", GLM_TOOL_OPEN, GLM_CALLS, true, false, false, false,
     true},
    {{"deepseek3.1"}, deepseek31_render, DEEPSEEK3_THINK_OPEN, DEEPSEEK3_THINK_CLOSE,
     DEEPSEEK3_TOOL_OPEN, DEEPSEEK3_CALLS, true, true, false, false, false},
    {{"cogito"}, cogito_render, COGITO_THINK_OPEN, COGITO_THINK_CLOSE, COGITO_TOOL_OPEN,
     COGITO_CALLS, true, true, false, false, false},
    {{"olmo3"}, olmo3_render, "", "", OLMO3_TOOL_OPEN, CORRAL_CALLS_PYTHON, true, false, false,
     false, false},
    {{"olmo3.1"}, olmo31_render, "", "", OLMO3_TOOL_OPEN, CORRAL_CALLS_PYTHON, true, false,
     false, false, false},
    {{"olmo3-think"}, olmo3_think_render, OLMO3_THINK_OPEN, OLMO3_THINK_CLOSE, "",
     CORRAL_CALLS_JSON, false, true, false, false, false},
    {{"olmo3-32b-think"}, olmo3_32b_think_render, OLMO3_THINK_OPEN, OLMO3_THINK_CLOSE, "",
     CORRAL_CALLS_JSON, false, true, false, false, false},
    {{"lfm2"}, lfm2_render, "", "", LFM2_TOOL_OPEN, CORRAL_CALLS_PYTHON, true, false, false, false,
     true},
    {{"lfm2-thinking"}, lfm2_thinking_render, LFM2_THINK_OPEN, LFM2_THINK_CLOSE, LFM2_TOOL_OPEN,
     CORRAL_CALLS_PYTHON, true, true, false, false, true},
    {{"nemotron-3-nano"}, nemotron3_nano_render, NEMOTRON_THINK_OPEN, NEMOTRON_THINK_CLOSE,
     NEMOTRON_TOOL_OPEN, CORRAL_CALLS_XML_FUNCTION, true, true, true, false, true},
    {{"nemotron-3.5-nano"}, nemotron35_nano_render, NEMOTRON_THINK_OPEN, NEMOTRON_THINK_CLOSE,
     NEMOTRON_TOOL_OPEN, CORRAL_CALLS_XML_FUNCTION, true, true, true, false, true},
    {{"functiongemma"}, functiongemma_render, "", "", FUNCTIONGEMMA_TOOL_OPEN,
     CORRAL_CALLS_FUNCTIONGEMMA, true, false, false, false, false},
    {{"gemma4", "gemma4-small"}, gemma4_render, GEMMA4_THINK_OPEN, GEMMA4_THINK_CLOSE,
     GEMMA4_TOOL_OPEN, CORRAL_CALLS_GEMMA4, true, true, false, false, true},
    {{"gemma4-large"}, gemma4_large_render, GEMMA4_THINK_OPEN, GEMMA4_THINK_CLOSE,
     GEMMA4_TOOL_OPEN, CORRAL_CALLS_GEMMA4, true, true, false, false, true},
    {{"cohere"}, cohere_render, COHERE_THINK_OPEN, COHERE_THINK_CLOSE, COHERE_TOOL_OPEN,
     CORRAL_CALLS_COHERE, true, true, false, false, false},
    /* answers as messages: the thinking tags are its thinking message's header and end */
    {{"glimmer"}, glimmer_render, GLIMMER_THINK_OPEN, GLIMMER_THINK_CLOSE, GLIMMER_TOOL_OPEN,
     CORRAL_CALLS_GLIMMER, true, true, false, false, true},
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
    tags->tool_ends_thinking = r->tool_ends_thinking;
}

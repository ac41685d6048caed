/*
 * libFuzzer target for structured outputs: an input whose first byte is even is GBNF text,
 * parsed and run against a few texts; an odd one is a JSON schema (as an HTTP body brings
 * it), turned into a grammar that must then parse — or, when it is an array, the tools of a
 * forced tool call, their grammar built under one of the tool tags and call syntaxes (the
 * first byte picks it): a generated grammar the engine refuses for its syntax is a bug (one past the
 * matcher's size limits is not), and so is any crash, sanitizer report, leak or hang.
 */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "corral/engine.h"
#include "server/core/format_grammar.h"
#include "server/core/tool_grammar.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void try_texts(const corral_grammar *g, const uint8_t *data, size_t size)
{
    static const char *const texts[] = {"", "{}", "[1,2]", "{\"a\":[\"x\"]}", "\"\xc3\xa9\"",
                                        "null"};
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++)
        corral_grammar_accepts(g, texts[i], strlen(texts[i]));
    corral_grammar_accepts(g, (const char *)data, size < 64 ? size : 64);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0 || size > 8192)
        return 0;
    char *text = malloc(size);
    if (!text)
        return 0;
    memcpy(text, data + 1, size - 1);
    text[size - 1] = '\0';
    corral_error err;
    if ((data[0] & 1) == 0) {
        corral_grammar *g = corral_grammar_create(text, NULL, &err);
        if (g)
            try_texts(g, data + 1, size - 1);
        corral_grammar_free(g);
    } else {
        json_t *schema = json_loadb(text, size - 1, JSON_DECODE_ANY, NULL);
        static const struct {
            const char *tag;
            corral_call_syntax calls;
        } tool_tags[] = {
            {"{", CORRAL_CALLS_JSON},
            {"<tool_call>", CORRAL_CALLS_JSON},
            {"[TOOL_CALLS]", CORRAL_CALLS_JSON},
            {"<tool_call>", CORRAL_CALLS_XML_FUNCTION},
            {"<tool_call>", CORRAL_CALLS_ARG_PAIRS},
            {"<｜tool▁calls▁begin｜>", CORRAL_CALLS_DEEPSEEK},
            {"[TOOL_CALLS]", CORRAL_CALLS_NAME_ARGS},
            {"<|tool_call>", CORRAL_CALLS_GEMMA4},
        };
        corral_output_tags tags = {0};
        unsigned pick = (data[0] >> 1) % (sizeof tool_tags / sizeof tool_tags[0]);
        strcpy(tags.tool_open, tool_tags[pick].tag);
        tags.calls = tool_tags[pick].calls;
        strcpy(tags.tool_arguments, data[0] & 0x40 ? "parameters" : "arguments");
        char *gbnf = !schema               ? NULL
                     : json_is_array(schema) ? tool_grammar_create(schema, NULL, &tags, &err)
                                             : format_grammar_from_schema(schema, &err);
        if (gbnf) {
            corral_grammar *g = corral_grammar_create(gbnf, NULL, &err);
            if (!g && !strstr(err.message, "expand")) {
                fprintf(stderr, "generated grammar refused: %s\n%s\n", err.message, gbnf);
                abort();
            }
            if (g)
                try_texts(g, data + 1, size - 1);
            corral_grammar_free(g);
        }
        free(gbnf);
        json_decref(schema);
    }
    free(text);
    return 0;
}

/*
 * Which models speak harmony, gpt-oss's chat format, and who lays out their prompts. As
 * ollama decides it: a model whose config names the "harmony" parser or renderer, or whose
 * family is gpt-oss ("gpt-oss" from a GGUF's architecture, "gptoss" from ollama's registry)
 * with a template that writes harmony's message tags (or none at all), has its answers split
 * by the harmony parser. Its prompt comes from the built-in harmony renderer when the config
 * names that renderer or when there is no TEMPLATE layer; a TEMPLATE layer (ollama's
 * gpt-oss models carry one) renders it otherwise.
 */
#ifndef CORRAL_SERVER_HARMONY_MODEL_H
#define CORRAL_SERVER_HARMONY_MODEL_H

#include <jansson.h>
#include <stdbool.h>

/* config: the manifest's config blob; template_text: the TEMPLATE layer (NULL: none). */
bool harmony_model_parses(const json_t *config, const char *template_text);
bool harmony_model_renders(const json_t *config, const char *template_text);

/*
 * tools as ollama hands them to a TEMPLATE that renders harmony: function names made
 * identifiers (harmony_tool_names; the parser maps calls back) and each parameter's "type" a
 * list, as ollama's templates index and range over it. A new array; NULL when out of memory.
 */
json_t *harmony_model_template_tools(const json_t *tools);

#endif

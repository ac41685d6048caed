/*
 * Which models take their prompts from the built-in Laguna renderer (template/laguna.h): as
 * ollama decides it, a model whose config names the "laguna" renderer (ollama's library
 * files carry no chat template and name it); and, since ollama's create names that renderer
 * for every GGUF of architecture laguna, a model of family laguna that has no TEMPLATE layer.
 * A TEMPLATE layer renders the prompt otherwise. Such a model thinks (its answer splits at
 * <think> and </think>) and has no tools capability (laguna.h).
 */
#ifndef CORRAL_SERVER_LAGUNA_MODEL_H
#define CORRAL_SERVER_LAGUNA_MODEL_H

#include <jansson.h>
#include <stdbool.h>

/* config: the manifest's config blob; template_text: the TEMPLATE layer (NULL: none). */
bool laguna_model_renders(const json_t *config, const char *template_text);

#endif

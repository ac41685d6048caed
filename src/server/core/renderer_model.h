/*
 * Which models take their prompts from a built-in renderer (template/renderer.h), as ollama
 * decides it: a model whose config names a renderer Corral has (ollama's library files for
 * the newest models name one and carry no chat template), whatever its TEMPLATE; and, since
 * ollama's create names the laguna renderer for every GGUF of architecture laguna, a model of
 * family laguna that has no TEMPLATE layer. A renderer name Corral does not have leaves the
 * prompt to the templates as before (the GGUF's chat template, else the TEMPLATE layer, else
 * a bare prompt), with a warning in the log the first time each name is met. Harmony's
 * renderer is harmony_model.h's.
 */
#ifndef CORRAL_SERVER_RENDERER_MODEL_H
#define CORRAL_SERVER_RENDERER_MODEL_H

#include <jansson.h>

#include "template/renderer.h"

/* config: the manifest's config blob; template_text: the TEMPLATE layer (NULL: none). The
 * renderer that lays out the model's prompts, or NULL for its templates. */
const corral_renderer *renderer_model_find(const json_t *config, const char *template_text);

#endif

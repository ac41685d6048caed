/* Whether the built-in Laguna renderer lays out a model's prompts: see laguna_model.h. */
#include "laguna_model.h"

#include <string.h>

static bool config_is(const json_t *config, const char *key, const char *value)
{
    const char *s = json_string_value(json_object_get(config, key));
    return s && strcmp(s, value) == 0;
}

bool laguna_model_renders(const json_t *config, const char *template_text)
{
    return config_is(config, "renderer", "laguna") ||
           (config_is(config, "model_family", "laguna") && !template_text);
}

/* Whether a model speaks harmony and who renders its prompts: see harmony_model.h. */
#include "harmony_model.h"

#include <string.h>

static bool config_is(const json_t *config, const char *key, const char *value)
{
    const char *s = json_string_value(json_object_get(config, key));
    return s && strcmp(s, value) == 0;
}

static bool is_gpt_oss(const json_t *config)
{
    return config_is(config, "model_family", "gpt-oss") ||
           config_is(config, "model_family", "gptoss");
}

bool harmony_model_renders(const json_t *config, const char *template_text)
{
    return config_is(config, "renderer", "harmony") || (is_gpt_oss(config) && !template_text);
}

bool harmony_model_parses(const json_t *config, const char *template_text)
{
    return config_is(config, "parser", "harmony") || harmony_model_renders(config, template_text) ||
           (is_gpt_oss(config) && strstr(template_text, "<|start|>") &&
            strstr(template_text, "<|end|>"));
}

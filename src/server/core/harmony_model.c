/* Whether a model speaks harmony and who renders its prompts: see harmony_model.h. */
#include "harmony_model.h"

#include <string.h>

#include "template/harmony.h"

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

json_t *harmony_model_template_tools(const json_t *tools)
{
    json_t *names = harmony_tool_names(tools), *out = json_deep_copy(tools);
    bool ok = names && out;
    size_t i;
    json_t *tool;
    json_array_foreach(out, i, tool) {
        json_t *fn = json_object_get(tool, "function");
        if (!ok || !json_is_object(fn))
            continue;
        ok = json_object_set(fn, "name", json_array_get(names, i)) == 0;
        json_t *properties = json_object_get(json_object_get(fn, "parameters"), "properties");
        const char *key;
        json_t *prop;
        json_object_foreach(properties, key, prop) {
            json_t *type = json_object_get(prop, "type");
            if (ok && json_is_string(type))
                ok = json_object_set_new(prop, "type", json_pack("[O]", type)) == 0;
        }
    }
    json_decref(names);
    if (!ok) {
        json_decref(out);
        return NULL;
    }
    return out;
}

/*
 * Cline's, Qwen Code's and Pi's settings merged with the entries that point them at a Corral
 * server (launch_settings.h).
 */
#include "launch_settings.h"

#include <stdio.h>
#include <string.h>

/* parent's object member key, made a new empty object when it is missing or not an object.
 * NULL when out of memory. */
static json_t *object_member(json_t *parent, const char *key)
{
    json_t *member = json_object_get(parent, key);
    if (json_is_object(member))
        return member;
    member = json_object();
    return member && json_object_set_new(parent, key, member) == 0 ? member : NULL;
}

static bool set_string(json_t *object, const char *key, const char *value)
{
    return json_object_set_new(object, key, json_string(value)) == 0;
}

/* Whether object's member key is the string value. */
static bool string_is(const json_t *object, const char *key, const char *value)
{
    const char *have = json_string_value(json_object_get(object, key));
    return have && strcmp(have, value) == 0;
}

/* "<server>/v1" into out; false when it does not fit. */
static bool v1_url(const launch_target *target, char *out, size_t out_size)
{
    int n = snprintf(out, out_size, "%s/v1", target->server_url);
    return n >= 0 && (size_t)n < out_size;
}

bool launch_cline_providers(json_t *config, const launch_target *target, const char *updated_at)
{
    char base_url[768];
    if (!v1_url(target, base_url, sizeof base_url))
        return false;
    json_t *providers = object_member(config, "providers");
    json_t *provider = providers ? object_member(providers, LAUNCH_CLINE_PROVIDER) : NULL;
    json_t *settings = provider ? object_member(provider, "settings") : NULL;
    if (!settings)
        return false;
    bool same = string_is(settings, "model", target->model) &&
                string_is(settings, "baseUrl", base_url) &&
                string_is(provider, "tokenSource", "manual");
    bool ok = set_string(settings, "provider", LAUNCH_CLINE_PROVIDER) &&
              set_string(settings, "model", target->model) &&
              set_string(settings, "baseUrl", base_url);
    if (ok && target->api_key)
        ok = set_string(settings, "apiKey", target->api_key);
    else
        json_object_del(settings, "apiKey");
    if (ok && (!same || !json_is_string(json_object_get(provider, "updatedAt"))))
        ok = set_string(provider, "updatedAt", updated_at);
    return ok && set_string(provider, "tokenSource", "manual") &&
           json_object_set_new(config, "version", json_integer(1)) == 0 &&
           set_string(config, "lastUsedProvider", LAUNCH_CLINE_PROVIDER);
}

bool launch_cline_state(json_t *state, const launch_target *target)
{
    const char *url = target->server_url;
    return set_string(state, "ollamaBaseUrl", url) &&
           set_string(state, "actModeApiProvider", LAUNCH_CLINE_PROVIDER) &&
           set_string(state, "actModeOllamaModelId", target->model) &&
           set_string(state, "actModeOllamaBaseUrl", url) &&
           set_string(state, "planModeApiProvider", LAUNCH_CLINE_PROVIDER) &&
           set_string(state, "planModeOllamaModelId", target->model) &&
           set_string(state, "planModeOllamaBaseUrl", url) &&
           json_object_set_new(state, "welcomeViewCompleted", json_true()) == 0;
}

/* Whether a Qwen Code provider entry is one launch wrote for base_url (a trailing slash
 * aside). */
static bool qwen_launch_entry(const json_t *entry, const char *base_url)
{
    const char *url = json_string_value(json_object_get(entry, "baseUrl"));
    if (!string_is(entry, "envKey", LAUNCH_QWEN_KEY_VARIABLE) || !url)
        return false;
    size_t len = strlen(url);
    while (len > 0 && url[len - 1] == '/')
        len--;
    return len == strlen(base_url) && strncmp(url, base_url, len) == 0;
}

/* Qwen Code's modelProviders.openai list: entry first, then old's entries but launch's own
 * for base_url. New reference, NULL when out of memory. */
static json_t *qwen_provider_list(const json_t *old, json_t *entry, const char *base_url)
{
    json_t *list = json_array();
    if (!list || !entry || json_array_append_new(list, entry) != 0) {
        json_decref(list);
        return NULL;
    }
    size_t i;
    json_t *item;
    json_array_foreach(old, i, item) {
        if (!qwen_launch_entry(item, base_url) && json_array_append(list, item) != 0) {
            json_decref(list);
            return NULL;
        }
    }
    return list;
}

bool launch_qwen_settings(json_t *settings, const launch_target *target)
{
    char base_url[768], name[1024];
    int n = snprintf(name, sizeof name, "%s (Corral)", target->model);
    if (!v1_url(target, base_url, sizeof base_url) || n < 0 || (size_t)n >= sizeof name)
        return false;
    json_t *env = object_member(settings, "env");
    json_t *providers = object_member(settings, "modelProviders");
    json_t *security = object_member(settings, "security");
    json_t *auth = security ? object_member(security, "auth") : NULL;
    json_t *model = object_member(settings, "model");
    if (!env || !providers || !auth || !model)
        return false;
    json_t *entry = json_pack("{s:s,s:s,s:s,s:s}", "id", target->model, "name", name,
                              "baseUrl", base_url, "envKey", LAUNCH_QWEN_KEY_VARIABLE);
    json_t *list = qwen_provider_list(json_object_get(providers, "openai"), entry, base_url);
    return list && json_object_set_new(providers, "openai", list) == 0 &&
           set_string(env, LAUNCH_QWEN_KEY_VARIABLE,
                      target->api_key ? target->api_key : "corral") &&
           set_string(auth, "selectedType", "openai") && set_string(auth, "baseUrl", base_url) &&
           set_string(model, "name", target->model);
}

bool launch_pi_models(json_t *models, const launch_target *target)
{
    char base_url[768];
    if (!v1_url(target, base_url, sizeof base_url))
        return false;
    json_t *providers = object_member(models, "providers");
    json_t *provider = providers ? object_member(providers, LAUNCH_PI_PROVIDER) : NULL;
    if (!provider || !set_string(provider, "baseUrl", base_url) ||
        !set_string(provider, "api", "openai-completions") ||
        !set_string(provider, "apiKey", target->api_key ? target->api_key : "corral"))
        return false;

    json_t *list = json_array();
    if (!list)
        return false;
    size_t i;
    json_t *item;
    json_array_foreach(json_object_get(provider, "models"), i, item) {
        if (json_is_true(json_object_get(item, LAUNCH_PI_MARK)))
            continue;
        if (json_array_append(list, item) != 0) {
            json_decref(list);
            return false;
        }
    }
    json_t *entry = json_pack("{s:s,s:b,s:o,s:I}", "id", target->model, LAUNCH_PI_MARK, 1,
                              "input",
                              target->vision ? json_pack("[ss]", "text", "image")
                                             : json_pack("[s]", "text"),
                              "contextWindow", (json_int_t)target->context_window);
    if (entry && target->thinking &&
        json_object_set_new(entry, "reasoning", json_true()) != 0) {
        json_decref(entry);
        entry = NULL;
    }
    if (!entry || json_array_append_new(list, entry) != 0) {
        json_decref(list);
        return false;
    }
    return json_object_set_new(provider, "models", list) == 0;
}

bool launch_pi_settings(json_t *settings, const launch_target *target)
{
    return set_string(settings, "defaultProvider", LAUNCH_PI_PROVIDER) &&
           set_string(settings, "defaultModel", target->model);
}

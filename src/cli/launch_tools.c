/*
 * The table of coding agents `corral launch` starts and each one's wiring to the server
 * (launch_tools.h): argument lists, environments, Codex's profile and model catalog, Droid's
 * settings entries, and the context window a tool will get.
 */
#include "launch_tools.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The name of the Codex profile and provider launch manages, apart from the user's own. */
#define CODEX_PROFILE "corral-launch"
#define CODEX_DEFAULT_CONTEXT 128000u
#define DROID_MAX_OUTPUT_TOKENS 64000
#define AGENT_CONTEXT 65536u /* what these agents' own guides ask of a local model */

static const launch_tool tools[] = {
    {"claude", {NULL}, "Claude Code", "claude", {".local/bin/claude", ".claude/local/claude"},
     "curl -fsSL https://claude.ai/install.sh | bash", AGENT_CONTEXT, LAUNCH_WIRING_ENV},
    {"codex", {NULL}, "Codex", "codex", {NULL}, "npm install -g @openai/codex", AGENT_CONTEXT,
     LAUNCH_WIRING_CODEX_PROFILE},
    {"copilot", {"copilot-cli", NULL}, "Copilot CLI", "copilot", {".local/bin/copilot", NULL},
     "see https://docs.github.com/en/copilot/how-tos/set-up/install-copilot-cli", AGENT_CONTEXT,
     LAUNCH_WIRING_ENV},
    {"opencode", {NULL}, "OpenCode", "opencode", {".opencode/bin/opencode", NULL},
     "curl -fsSL https://opencode.ai/install | bash", AGENT_CONTEXT, LAUNCH_WIRING_ENV},
    {"droid", {NULL}, "Droid", "droid", {NULL},
     "see https://docs.factory.ai/cli/getting-started/quickstart", AGENT_CONTEXT,
     LAUNCH_WIRING_DROID_SETTINGS},
    {"cline", {NULL}, "Cline", "cline", {NULL}, "npm install -g cline", AGENT_CONTEXT,
     LAUNCH_WIRING_CLINE_FILES},
    {"qwen", {"qwen-code", NULL}, "Qwen Code", "qwen", {".npm-global/bin/qwen", ".local/bin/qwen"},
     "npm install -g @qwen-code/qwen-code", AGENT_CONTEXT, LAUNCH_WIRING_QWEN_SETTINGS},
    {"kimi", {NULL}, "Kimi Code CLI", "kimi",
     {".local/bin/kimi", "bin/kimi", ".local/share/uv/tools/kimi-cli/bin/kimi"},
     "curl -LsSf https://code.kimi.com/install.sh | bash", AGENT_CONTEXT, LAUNCH_WIRING_ENV},
    {"pi", {NULL}, "Pi", "pi", {NULL}, "npm install -g @earendil-works/pi-coding-agent",
     AGENT_CONTEXT, LAUNCH_WIRING_PI_FILES},
    {"pool", {"poolside", NULL}, "Poolside", "pool", {NULL},
     "see https://github.com/poolsideai/pool", AGENT_CONTEXT, LAUNCH_WIRING_ENV},
};

const launch_tool *launch_tools(size_t *count)
{
    *count = sizeof tools / sizeof tools[0];
    return tools;
}

const launch_tool *launch_tool_find(const char *name)
{
    for (size_t i = 0; i < sizeof tools / sizeof tools[0]; i++) {
        if (strcmp(tools[i].name, name) == 0)
            return &tools[i];
        for (size_t a = 0; a < 2 && tools[i].aliases[a]; a++)
            if (strcmp(tools[i].aliases[a], name) == 0)
                return &tools[i];
    }
    return NULL;
}

bool launch_same_model(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la >= 7 && strcmp(a + la - 7, ":latest") == 0)
        la -= 7;
    if (lb >= 7 && strcmp(b + lb - 7, ":latest") == 0)
        lb -= 7;
    return la == lb && strncmp(a, b, la) == 0;
}

bool launch_strings_add(launch_strings *list, const char *text)
{
    if (list->count + 1 >= list->capacity) {
        size_t capacity = list->capacity ? list->capacity * 2 : 16;
        char **grown = realloc(list->items, capacity * sizeof *grown);
        if (!grown)
            return false;
        list->items = grown;
        list->capacity = capacity;
    }
    char *copy = strdup(text);
    if (!copy)
        return false;
    list->items[list->count++] = copy;
    list->items[list->count] = NULL;
    return true;
}

bool launch_strings_addf(launch_strings *list, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *text = NULL;
    int n = vasprintf(&text, fmt, ap);
    va_end(ap);
    if (n < 0)
        return false;
    bool ok = launch_strings_add(list, text);
    free(text);
    return ok;
}

void launch_strings_free(launch_strings *list)
{
    for (size_t i = 0; i < list->count; i++)
        free(list->items[i]);
    free(list->items);
    *list = (launch_strings){0};
}

bool launch_connectable_url(const char *address_url, char *out, size_t out_size)
{
    static const struct {
        const char *wildcard, *loopback;
    } swaps[] = {{"://0.0.0.0", "://127.0.0.1"}, {"://[::]", "://[::1]"}};
    for (size_t i = 0; i < sizeof swaps / sizeof swaps[0]; i++) {
        const char *at = strstr(address_url, swaps[i].wildcard);
        if (!at)
            continue;
        const char *rest = at + strlen(swaps[i].wildcard);
        if (*rest != ':' && *rest != '/' && *rest != '\0')
            continue;
        int n = snprintf(out, out_size, "%.*s%s%s", (int)(at - address_url), address_url,
                         swaps[i].loopback, rest);
        return n >= 0 && (size_t)n < out_size;
    }
    int n = snprintf(out, out_size, "%s", address_url);
    return n >= 0 && (size_t)n < out_size;
}

/* text as a TOML basic string, quotes included (caller frees); NULL when out of memory. */
static char *toml_quote(const char *text)
{
    size_t len = strlen(text);
    char *out = malloc(len * 6 + 3); /* worst case: every byte a \uXXXX escape */
    if (!out)
        return NULL;
    char *p = out;
    *p++ = '"';
    for (const unsigned char *s = (const unsigned char *)text; *s; s++) {
        if (*s == '"' || *s == '\\') {
            *p++ = '\\';
            *p++ = (char)*s;
        } else if (*s < 0x20 || *s == 0x7f) {
            p += sprintf(p, "\\u%04x", *s);
        } else {
            *p++ = (char)*s;
        }
    }
    *p++ = '"';
    *p = '\0';
    return out;
}

/* "key=<value as TOML>" appended after "-c". */
static bool add_codex_override(launch_strings *args, const char *key, const char *value)
{
    char *quoted = toml_quote(value);
    bool ok = quoted && launch_strings_add(args, "-c") &&
              launch_strings_addf(args, "%s=%s", key, quoted);
    free(quoted);
    return ok;
}

/* Whether a Codex -c override (KEY=VALUE) touches what the launch profile sets. */
static bool codex_override_conflicts(const char *override)
{
    const char *eq = strchr(override, '=');
    if (!eq)
        return false;
    const char *start = override;
    const char *end = eq;
    while (start < end && (*start == ' ' || *start == '\t' || *start == '"' || *start == '\''))
        start++;
    while (end > start && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '"' ||
                           end[-1] == '\''))
        end--;
    size_t len = (size_t)(end - start);
    static const char *const managed[] = {"profile", "model", "model_provider",
                                          "model_catalog_json"};
    for (size_t i = 0; i < sizeof managed / sizeof managed[0]; i++)
        if (len == strlen(managed[i]) && strncmp(start, managed[i], len) == 0)
            return true;
    return len >= strlen("model_providers.") &&
           strncmp(start, "model_providers.", strlen("model_providers.")) == 0;
}

static bool codex_check_extra(char *const *extra, size_t n_extra, corral_error *err)
{
    for (size_t i = 0; i < n_extra; i++) {
        const char *arg = extra[i];
        const char *override = NULL;
        if (strncmp(arg, "-p", 2) == 0 || strcmp(arg, "--profile") == 0 ||
            strncmp(arg, "--profile=", 10) == 0) {
            corral_error_set(err, "conflicting extra argument '%s': corral launch codex sets "
                                  "the profile", arg);
            return false;
        }
        if (strncmp(arg, "-m", 2) == 0 || strcmp(arg, "--model") == 0 ||
            strncmp(arg, "--model=", 8) == 0) {
            corral_error_set(err, "conflicting extra argument '%s': give the model as "
                                  "corral launch codex --model MODEL", arg);
            return false;
        }
        if ((strcmp(arg, "-c") == 0 || strcmp(arg, "--config") == 0) && i + 1 < n_extra)
            override = extra[i + 1];
        else if (strncmp(arg, "-c", 2) == 0 && arg[2])
            override = arg + 2;
        else if (strncmp(arg, "--config=", 9) == 0)
            override = arg + 9;
        if (override && codex_override_conflicts(override)) {
            corral_error_set(err, "conflicting extra config '%s': corral launch codex sets the "
                                  "model, provider and model catalog", override);
            return false;
        }
    }
    return true;
}

/* Whether arg is the flag name, alone or with "=VALUE". */
static bool is_flag(const char *arg, const char *name)
{
    size_t len = strlen(name);
    return strncmp(arg, name, len) == 0 && (arg[len] == '\0' || arg[len] == '=');
}

/* false with err when an extra argument is one of flags (NULL-terminated), which the launch
 * sets itself. */
static bool refuse_flags(const launch_tool *tool, char *const *extra, size_t n_extra,
                         const char *const *flags, corral_error *err)
{
    for (size_t i = 0; i < n_extra; i++) {
        for (const char *const *flag = flags; *flag; flag++) {
            if (!is_flag(extra[i], *flag))
                continue;
            if (strcmp(*flag, "-m") == 0 || strcmp(*flag, "--model") == 0)
                corral_error_set(err, "conflicting extra argument '%s': give the model as "
                                      "corral launch %s --model MODEL", extra[i], tool->name);
            else
                corral_error_set(err, "conflicting extra argument '%s': corral launch %s sets "
                                      "%s itself", extra[i], tool->name, *flag);
            return false;
        }
    }
    return true;
}

bool launch_check_extra(const launch_tool *tool, char *const *extra, size_t n_extra,
                        corral_error *err)
{
    static const char *const qwen[] = {"--model", "-m", "--auth-type", NULL};
    static const char *const kimi[] = {"--model", "-m", "--config", "--config-file", NULL};
    static const char *const pool[] = {"--model", "-m", NULL};
    if (tool->wiring == LAUNCH_WIRING_CODEX_PROFILE)
        return codex_check_extra(extra, n_extra, err);
    if (tool->wiring == LAUNCH_WIRING_QWEN_SETTINGS)
        return refuse_flags(tool, extra, n_extra, qwen, err);
    if (strcmp(tool->name, "kimi") == 0)
        return refuse_flags(tool, extra, n_extra, kimi, err);
    if (strcmp(tool->name, "pool") == 0)
        return refuse_flags(tool, extra, n_extra, pool, err);
    return true;
}

static bool build_claude(const launch_target *t, launch_strings *args, launch_strings *env)
{
    bool ok = launch_strings_addf(env, "ANTHROPIC_BASE_URL=%s", t->server_url) &&
              /* a key of the user's for Anthropic's own service must not reach this server */
              launch_strings_add(env, "ANTHROPIC_API_KEY=") &&
              launch_strings_addf(env, "ANTHROPIC_AUTH_TOKEN=%s",
                                  t->api_key ? t->api_key : "corral") &&
              launch_strings_add(env, "CLAUDE_CODE_ATTRIBUTION_HEADER=0") &&
              launch_strings_add(env, "CLAUDE_CODE_TOTAL_TOKENS_REMINDER=off") &&
              launch_strings_add(env, "DISABLE_ERROR_REPORTING=1") &&
              launch_strings_add(env, "DISABLE_FEEDBACK_COMMAND=1") &&
              launch_strings_add(env, "CLAUDE_CODE_DISABLE_FEEDBACK_SURVEY=1");
    /* every model tier (and subagents) on the one local model */
    static const char *const tiers[] = {"ANTHROPIC_DEFAULT_OPUS_MODEL",
                                        "ANTHROPIC_DEFAULT_SONNET_MODEL",
                                        "ANTHROPIC_DEFAULT_HAIKU_MODEL",
                                        "CLAUDE_CODE_SUBAGENT_MODEL"};
    for (size_t i = 0; ok && i < sizeof tiers / sizeof tiers[0]; i++)
        ok = launch_strings_addf(env, "%s=%s", tiers[i], t->model);
    return ok && launch_strings_add(args, "--model") && launch_strings_add(args, t->model);
}

static bool build_copilot(const launch_target *t, launch_strings *args, launch_strings *env)
{
    return launch_strings_addf(env, "COPILOT_PROVIDER_BASE_URL=%s/v1", t->server_url) &&
           launch_strings_addf(env, "COPILOT_PROVIDER_API_KEY=%s",
                               t->api_key ? t->api_key : "") &&
           launch_strings_add(env, "COPILOT_PROVIDER_WIRE_API=responses") &&
           launch_strings_addf(env, "COPILOT_MODEL=%s", t->model) &&
           launch_strings_add(args, "--model") && launch_strings_add(args, t->model);
}

/* OpenCode reads a whole config from OPENCODE_CONFIG_CONTENT: a provider for this server. */
static bool build_opencode(const launch_target *t, launch_strings *env)
{
    char base_url[768];
    int n = snprintf(base_url, sizeof base_url, "%s/v1", t->server_url);
    if (n < 0 || (size_t)n >= sizeof base_url)
        return false;
    json_t *entry = json_pack("{s:s}", "name", t->model);
    bool ok = entry != NULL;
    if (ok && t->vision)
        ok = json_object_set_new(entry, "modalities",
                                 json_pack("{s:[ss],s:[s]}", "input", "text", "image", "output",
                                           "text")) == 0;
    if (ok && t->thinking)
        ok = json_object_set_new(entry, "reasoning", json_true()) == 0;
    json_t *options = ok ? json_pack("{s:s}", "baseURL", base_url) : NULL;
    if (options && t->api_key)
        ok = json_object_set_new(options, "apiKey", json_string(t->api_key)) == 0;
    json_t *models = ok && options ? json_object() : NULL;
    if (models)
        ok = json_object_set_new(models, t->model, entry) == 0;
    else
        json_decref(entry);
    json_t *config = NULL;
    if (ok && models)
        config = json_pack("{s:s,s:{s:{s:s,s:s,s:o,s:o}},s:s+}", "$schema",
                           "https://opencode.ai/config.json", "provider", "corral", "npm",
                           "@ai-sdk/openai-compatible", "name", "Corral", "options", options,
                           "models", models, "model", "corral/", t->model);
    else {
        json_decref(options);
        json_decref(models);
    }
    char *text = config ? json_dumps(config, JSON_COMPACT) : NULL;
    ok = text && launch_strings_addf(env, "OPENCODE_CONFIG_CONTENT=%s", text);
    free(text);
    json_decref(config);
    return ok;
}

static bool build_codex(const launch_target *t, launch_strings *args, launch_strings *env)
{
    char base_url[768];
    int n = snprintf(base_url, sizeof base_url, "%s/v1/", t->server_url);
    if (n < 0 || (size_t)n >= sizeof base_url)
        return false;
    /* the overrides repeat the profile file, so that a profile Codex fails to load cannot send
     * the requests elsewhere */
    bool ok = launch_strings_add(args, "--profile") && launch_strings_add(args, CODEX_PROFILE) &&
              add_codex_override(args, "model_provider", CODEX_PROFILE) &&
              add_codex_override(args, "model_providers." CODEX_PROFILE ".name", "Corral") &&
              add_codex_override(args, "model_providers." CODEX_PROFILE ".base_url", base_url) &&
              add_codex_override(args, "model_providers." CODEX_PROFILE ".wire_api",
                                 "responses");
    if (ok && t->api_key)
        ok = add_codex_override(args, "model_providers." CODEX_PROFILE ".env_key",
                                "OPENAI_API_KEY");
    if (ok && t->codex_catalog_path)
        ok = add_codex_override(args, "model_catalog_json", t->codex_catalog_path);
    return ok && launch_strings_add(args, "-m") && launch_strings_add(args, t->model) &&
           launch_strings_addf(env, "OPENAI_API_KEY=%s", t->api_key ? t->api_key : "corral");
}

/* Qwen Code: its OpenAI-compatible auth on the server, by arguments and environment, which
 * win over what its settings file says. */
static bool build_qwen(const launch_target *t, launch_strings *args, launch_strings *env)
{
    const char *key = t->api_key ? t->api_key : "corral";
    return launch_strings_addf(env, "OPENAI_BASE_URL=%s/v1", t->server_url) &&
           launch_strings_addf(env, "OPENAI_API_KEY=%s", key) &&
           launch_strings_addf(env, "OPENAI_MODEL=%s", t->model) &&
           launch_strings_addf(env, LAUNCH_QWEN_KEY_VARIABLE "=%s", key) &&
           launch_strings_add(args, "--model") && launch_strings_add(args, t->model) &&
           launch_strings_add(args, "--auth-type") && launch_strings_add(args, "openai");
}

/* Kimi Code CLI takes a whole config as JSON text after --config: a provider for this
 * server and the model under it, with the context it gets so that Kimi compacts in time. Its
 * OpenAI-compatible provider takes OPENAI_BASE_URL and OPENAI_API_KEY over the config: both
 * are set, so that the user's own (an OpenAI key, say) neither redirect it nor reach this
 * server, and the key travels there rather than in the arguments, which any local user can
 * read. */
static bool build_kimi(const launch_target *t, launch_strings *args, launch_strings *env)
{
    char base_url[768];
    int n = snprintf(base_url, sizeof base_url, "%s/v1", t->server_url);
    if (n < 0 || (size_t)n >= sizeof base_url)
        return false;
    json_t *config = json_pack("{s:s,s:{s:{s:s,s:s,s:s}},s:{s:{s:s,s:s,s:I}}}",
                               "default_model", "corral", "providers", "corral", "type",
                               "openai_legacy", "base_url", base_url, "api_key", "corral",
                               "models", "corral", "provider", "corral", "model", t->model,
                               "max_context_size", (json_int_t)t->context_window);
    char *text = config ? json_dumps(config, JSON_COMPACT) : NULL;
    bool ok = text && launch_strings_add(args, "--config") && launch_strings_add(args, text) &&
              launch_strings_addf(env, "OPENAI_BASE_URL=%s", base_url) &&
              launch_strings_addf(env, "OPENAI_API_KEY=%s", t->api_key ? t->api_key : "corral");
    free(text);
    json_decref(config);
    return ok;
}

static bool build_pool(const launch_target *t, launch_strings *args, launch_strings *env)
{
    return launch_strings_addf(env, "POOLSIDE_STANDALONE_BASE_URL=%s/v1", t->server_url) &&
           launch_strings_addf(env, "POOLSIDE_API_KEY=%s", t->api_key ? t->api_key : "corral") &&
           launch_strings_add(args, "-m") && launch_strings_add(args, t->model);
}

bool launch_build_command(const launch_tool *tool, const launch_target *target,
                          char *const *extra, size_t n_extra, launch_strings *args,
                          launch_strings *env, corral_error *err)
{
    bool ok = true;
    if (strcmp(tool->name, "claude") == 0) {
        ok = build_claude(target, args, env);
    } else if (strcmp(tool->name, "copilot") == 0) {
        ok = build_copilot(target, args, env);
    } else if (strcmp(tool->name, "opencode") == 0) {
        ok = build_opencode(target, env);
    } else if (tool->wiring == LAUNCH_WIRING_CODEX_PROFILE) {
        ok = build_codex(target, args, env);
    } else if (tool->wiring == LAUNCH_WIRING_QWEN_SETTINGS) {
        ok = build_qwen(target, args, env);
    } else if (strcmp(tool->name, "kimi") == 0) {
        ok = build_kimi(target, args, env);
    } else if (strcmp(tool->name, "pool") == 0) {
        ok = build_pool(target, args, env);
    }
    /* OpenCode's model is in its config; Droid's, Cline's and Pi's in their settings files:
     * only the user's arguments */
    for (size_t i = 0; ok && i < n_extra; i++)
        ok = launch_strings_add(args, extra[i]);
    if (!ok)
        corral_error_set(err, "out of memory building the %s command line", tool->display_name);
    return ok;
}

char *launch_codex_profile(const launch_target *target)
{
    char base_url[768];
    int n = snprintf(base_url, sizeof base_url, "%s/v1/", target->server_url);
    if (n < 0 || (size_t)n >= sizeof base_url)
        return NULL;
    char *model = toml_quote(target->model);
    char *url = toml_quote(base_url);
    char *catalog = target->codex_catalog_path ? toml_quote(target->codex_catalog_path) : NULL;
    char *text = NULL;
    if (model && url && (catalog || !target->codex_catalog_path)) {
        char catalog_line[4200] = "";
        if (catalog)
            snprintf(catalog_line, sizeof catalog_line, "model_catalog_json = %s\n", catalog);
        if (asprintf(&text,
                     "model = %s\nmodel_provider = \"" CODEX_PROFILE "\"\n%s\n"
                     "[model_providers." CODEX_PROFILE "]\nname = \"Corral\"\nbase_url = %s\n"
                     "wire_api = \"responses\"\n%s",
                     model, catalog_line, url,
                     target->api_key ? "env_key = \"OPENAI_API_KEY\"\n" : "") < 0)
            text = NULL;
    }
    free(model);
    free(url);
    free(catalog);
    return text;
}

json_t *launch_codex_catalog(const char *model, unsigned context_window, bool vision)
{
    json_t *modalities = vision ? json_pack("[ss]", "text", "image") : json_pack("[s]", "text");
    return json_pack("{s:[{s:s,s:s,s:I,s:s,s:s,s:b,s:i,s:{s:s,s:i},s:o,s:s,s:b,s:s,s:b,s:b,"
                     "s:[],s:[]}]}",
                     "models", "slug", model, "display_name", model, "context_window",
                     (json_int_t)(context_window ? context_window : CODEX_DEFAULT_CONTEXT),
                     "shell_type", "default", "visibility", "list", "supported_in_api", 1,
                     "priority", 0, "truncation_policy", "mode", "bytes", "limit", 10000,
                     "input_modalities", modalities, "base_instructions", "",
                     "support_verbosity", 1, "default_verbosity", "low",
                     "supports_parallel_tool_calls", 0, "supports_reasoning_summaries", 0,
                     "supported_reasoning_levels", "experimental_supported_tools");
}

bool launch_droid_settings(json_t *settings, const launch_target *target)
{
    char base_url[768], id[1024];
    int n = snprintf(base_url, sizeof base_url, "%s/v1", target->server_url);
    int m = snprintf(id, sizeof id, "custom:corral-%s", target->model);
    if (n < 0 || (size_t)n >= sizeof base_url || m < 0 || (size_t)m >= sizeof id)
        return false;
    json_t *models = json_array();
    json_t *entry = json_pack("{s:s,s:s,s:s,s:s,s:s,s:i,s:b,s:s,s:i}", "model", target->model,
                              "displayName", target->model, "baseUrl", base_url, "apiKey",
                              target->api_key ? target->api_key : "corral", "provider",
                              "generic-chat-completion-api", "maxOutputTokens",
                              DROID_MAX_OUTPUT_TOKENS, "supportsImages", target->vision, "id", id,
                              "index", 0);
    if (!models || !entry || json_array_append_new(models, entry) != 0) {
        json_decref(models);
        return false;
    }
    /* the user's other entries keep their place after the one this server gets */
    const json_t *old = json_object_get(settings, "customModels");
    size_t i;
    const json_t *item;
    json_array_foreach(old, i, item) {
        const char *url = json_string_value(json_object_get(item, "baseUrl"));
        if (url && strcmp(url, base_url) == 0)
            continue;
        if (json_array_append(models, (json_t *)item) != 0) {
            json_decref(models);
            return false;
        }
    }
    bool ok = json_object_set_new(settings, "customModels", models) == 0;
    json_t *session = json_object_get(settings, "sessionDefaultSettings");
    if (ok && !json_is_object(session)) {
        session = json_object();
        ok = session && json_object_set_new(settings, "sessionDefaultSettings", session) == 0;
    }
    ok = ok && json_object_set_new(session, "model", json_string(id)) == 0;
    const char *effort = json_string_value(json_object_get(session, "reasoningEffort"));
    static const char *const efforts[] = {"high", "medium", "low", "none"};
    bool known = false;
    for (size_t e = 0; effort && e < sizeof efforts / sizeof efforts[0]; e++)
        known |= strcmp(effort, efforts[e]) == 0;
    if (ok && !known)
        ok = json_object_set_new(session, "reasoningEffort", json_string("none")) == 0;
    return ok;
}

/* "MAJOR.MINOR.PATCH" (a suffix such as "-alpha.1" ignored) into v; false when it is not. */
static bool parse_version(const char *text, unsigned long v[3])
{
    for (int i = 0; i < 3; i++) {
        if (*text < '0' || *text > '9')
            return false;
        char *end;
        v[i] = strtoul(text, &end, 10);
        text = end;
        if (i < 2 && *text++ != '.')
            return false;
    }
    return *text == '\0' || *text == '-' || *text == '+' || *text == '\n' || *text == ' ';
}

bool launch_codex_version_ok(const char *output, corral_error *err)
{
    /* the version is the last word of the first line */
    char line[256];
    size_t n = strcspn(output, "\n");
    snprintf(line, sizeof line, "%.*s", (int)(n < sizeof line ? n : sizeof line - 1), output);
    while (n > 0 && n < sizeof line && (line[n - 1] == ' ' || line[n - 1] == '\r'))
        line[--n] = '\0';
    const char *word = strrchr(line, ' ');
    word = word ? word + 1 : line;
    unsigned long have[3], need[3];
    if (!parse_version(word, have) || !parse_version(LAUNCH_CODEX_MIN_VERSION, need)) {
        corral_error_set(err, "unexpected output from codex --version: '%s'", line);
        return false;
    }
    for (int i = 0; i < 3; i++) {
        if (have[i] != need[i]) {
            if (have[i] > need[i])
                return true;
            corral_error_set(err, "codex %s is too old: corral launch needs %s or later; update "
                                  "it with: npm update -g @openai/codex", word,
                             LAUNCH_CODEX_MIN_VERSION);
            return false;
        }
    }
    return true;
}

unsigned launch_context_window(unsigned trained, unsigned loaded, unsigned num_ctx_parameter,
                               unsigned server_default, launch_context_source *source)
{
    unsigned window;
    if (loaded > 0) {
        window = loaded;
        *source = LAUNCH_CONTEXT_LOADED;
    } else if (num_ctx_parameter > 0) {
        window = num_ctx_parameter;
        *source = LAUNCH_CONTEXT_MODELFILE;
    } else {
        window = server_default;
        *source = LAUNCH_CONTEXT_SERVER_DEFAULT;
    }
    return trained > 0 && window > trained ? trained : window;
}

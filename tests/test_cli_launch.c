/*
 * `corral launch`'s wiring of each coding agent (src/cli/launch_tools.c, launch_settings.c),
 * its model picker (launch_picker.c) and its config file writes (src/cli/config_file.c): the
 * environment and arguments each tool gets, Codex's profile, catalog and refused extra
 * arguments, Droid's, Cline's, Qwen Code's and Pi's settings merged into the user's, the
 * context window a tool will see, the model chosen by number, name or default, and config
 * files replaced atomically with a backup.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/config_file.h"
#include "util/file.h"
#include "cli/launch_picker.h"
#include "cli/launch_settings.h"
#include "cli/launch_tools.h"

static bool has(const launch_strings *list, const char *text)
{
    for (size_t i = 0; i < list->count; i++)
        if (strcmp(list->items[i], text) == 0)
            return true;
    return false;
}

/* The index of text in list, count when absent. */
static size_t index_of(const launch_strings *list, const char *text)
{
    size_t i = 0;
    while (i < list->count && strcmp(list->items[i], text) != 0)
        i++;
    return i;
}

static void tools_by_name_and_alias(void **state)
{
    (void)state;
    assert_string_equal(launch_tool_find("claude")->display_name, "Claude Code");
    assert_ptr_equal(launch_tool_find("copilot-cli"), launch_tool_find("copilot"));
    assert_null(launch_tool_find("claude-code"));
    assert_null(launch_tool_find(""));
}

static void wildcard_address_becomes_loopback(void **state)
{
    (void)state;
    char out[128];
    assert_true(launch_connectable_url("http://0.0.0.0:11434", out, sizeof out));
    assert_string_equal(out, "http://127.0.0.1:11434");
    assert_true(launch_connectable_url("http://[::]:8080/corral", out, sizeof out));
    assert_string_equal(out, "http://[::1]:8080/corral");
    assert_true(launch_connectable_url("https://0.0.0.0.example:443", out, sizeof out));
    assert_string_equal(out, "https://0.0.0.0.example:443");
    assert_false(launch_connectable_url("http://127.0.0.1:11434", out, 8));
}

static void claude_gets_every_tier_on_the_model(void **state)
{
    (void)state;
    launch_target target = {.server_url = "http://127.0.0.1:9", .model = "qwen3-coder"};
    launch_strings args = {0}, env = {0};
    char *extra[] = {"--resume", "-p"};
    assert_true(launch_build_command(launch_tool_find("claude"), &target, extra, 2, &args, &env,
                                     NULL));
    assert_true(has(&env, "ANTHROPIC_BASE_URL=http://127.0.0.1:9"));
    assert_true(has(&env, "ANTHROPIC_API_KEY="));
    assert_true(has(&env, "ANTHROPIC_AUTH_TOKEN=corral"));
    assert_true(has(&env, "ANTHROPIC_DEFAULT_OPUS_MODEL=qwen3-coder"));
    assert_true(has(&env, "ANTHROPIC_DEFAULT_SONNET_MODEL=qwen3-coder"));
    assert_true(has(&env, "ANTHROPIC_DEFAULT_HAIKU_MODEL=qwen3-coder"));
    assert_true(has(&env, "CLAUDE_CODE_SUBAGENT_MODEL=qwen3-coder"));
    assert_int_equal(args.count, 4);
    assert_string_equal(args.items[0], "--model");
    assert_string_equal(args.items[1], "qwen3-coder");
    assert_string_equal(args.items[2], "--resume");
    assert_string_equal(args.items[3], "-p");
    assert_null(args.items[4]);
    launch_strings_free(&args);
    launch_strings_free(&env);

    target.api_key = "sekrit";
    assert_true(launch_build_command(launch_tool_find("claude"), &target, NULL, 0, &args, &env,
                                     NULL));
    assert_true(has(&env, "ANTHROPIC_AUTH_TOKEN=sekrit"));
    launch_strings_free(&args);
    launch_strings_free(&env);
}

static void copilot_uses_the_responses_api(void **state)
{
    (void)state;
    launch_target target = {.server_url = "http://h:1", .model = "m", .api_key = "k"};
    launch_strings args = {0}, env = {0};
    assert_true(launch_build_command(launch_tool_find("copilot"), &target, NULL, 0, &args, &env,
                                     NULL));
    assert_true(has(&env, "COPILOT_PROVIDER_BASE_URL=http://h:1/v1"));
    assert_true(has(&env, "COPILOT_PROVIDER_API_KEY=k"));
    assert_true(has(&env, "COPILOT_PROVIDER_WIRE_API=responses"));
    assert_true(has(&env, "COPILOT_MODEL=m"));
    assert_true(has(&args, "--model"));
    launch_strings_free(&args);
    launch_strings_free(&env);
}

/* The JSON after NAME= in env. */
static json_t *env_json(const launch_strings *env, const char *name)
{
    size_t n = strlen(name);
    for (size_t i = 0; i < env->count; i++)
        if (strncmp(env->items[i], name, n) == 0 && env->items[i][n] == '=')
            return json_loads(env->items[i] + n + 1, 0, NULL);
    return NULL;
}

static void opencode_gets_a_provider_in_its_config(void **state)
{
    (void)state;
    launch_target target = {.server_url = "http://h:1", .model = "qwen3", .thinking = true};
    launch_strings args = {0}, env = {0};
    char *extra[] = {"run", "hello"};
    assert_true(launch_build_command(launch_tool_find("opencode"), &target, extra, 2, &args,
                                     &env, NULL));
    assert_int_equal(args.count, 2);
    assert_string_equal(args.items[0], "run");
    json_t *config = env_json(&env, "OPENCODE_CONFIG_CONTENT");
    assert_non_null(config);
    assert_string_equal(json_string_value(json_object_get(config, "model")), "corral/qwen3");
    json_t *provider = json_object_get(json_object_get(config, "provider"), "corral");
    assert_string_equal(json_string_value(json_object_get(provider, "npm")),
                        "@ai-sdk/openai-compatible");
    json_t *options = json_object_get(provider, "options");
    assert_string_equal(json_string_value(json_object_get(options, "baseURL")), "http://h:1/v1");
    assert_null(json_object_get(options, "apiKey"));
    json_t *model = json_object_get(json_object_get(provider, "models"), "qwen3");
    assert_true(json_is_true(json_object_get(model, "reasoning")));
    assert_null(json_object_get(model, "modalities"));
    json_decref(config);
    launch_strings_free(&args);
    launch_strings_free(&env);

    target = (launch_target){.server_url = "http://h:1", .model = "gemma3", .vision = true,
                             .api_key = "k"};
    assert_true(launch_build_command(launch_tool_find("opencode"), &target, NULL, 0, &args,
                                     &env, NULL));
    config = env_json(&env, "OPENCODE_CONFIG_CONTENT");
    provider = json_object_get(json_object_get(config, "provider"), "corral");
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(provider, "options"), "apiKey")), "k");
    model = json_object_get(json_object_get(provider, "models"), "gemma3");
    assert_null(json_object_get(model, "reasoning"));
    assert_string_equal(json_string_value(json_array_get(
                            json_object_get(json_object_get(model, "modalities"), "input"), 1)),
                        "image");
    json_decref(config);
    launch_strings_free(&args);
    launch_strings_free(&env);
}

static void codex_selects_the_launch_profile(void **state)
{
    (void)state;
    launch_target target = {.server_url = "http://h:1", .model = "m",
                            .codex_catalog_path = "/home/u/.codex/corral-launch.model.json"};
    launch_strings args = {0}, env = {0};
    char *extra[] = {"--sandbox", "workspace-write", "-c", "sandbox_mode=\"read-only\""};
    assert_true(launch_build_command(launch_tool_find("codex"), &target, extra, 4, &args, &env,
                                     NULL));
    assert_string_equal(args.items[0], "--profile");
    assert_string_equal(args.items[1], "corral-launch");
    assert_true(has(&args, "model_provider=\"corral-launch\""));
    assert_true(has(&args, "model_providers.corral-launch.base_url=\"http://h:1/v1/\""));
    assert_true(has(&args, "model_providers.corral-launch.wire_api=\"responses\""));
    assert_true(
        has(&args, "model_catalog_json=\"/home/u/.codex/corral-launch.model.json\""));
    assert_false(has(&args, "model_providers.corral-launch.env_key=\"OPENAI_API_KEY\""));
    size_t m = index_of(&args, "-m");
    assert_true(m + 1 < args.count);
    assert_string_equal(args.items[m + 1], "m");
    assert_string_equal(args.items[args.count - 4], "--sandbox");
    assert_string_equal(args.items[args.count - 1], "sandbox_mode=\"read-only\"");
    assert_true(has(&env, "OPENAI_API_KEY=corral"));
    launch_strings_free(&args);
    launch_strings_free(&env);

    /* with a key, Codex sends it from the variable the provider names */
    target.api_key = "k";
    assert_true(launch_build_command(launch_tool_find("codex"), &target, NULL, 0, &args, &env,
                                     NULL));
    assert_true(has(&args, "model_providers.corral-launch.env_key=\"OPENAI_API_KEY\""));
    assert_true(has(&env, "OPENAI_API_KEY=k"));
    launch_strings_free(&args);
    launch_strings_free(&env);
}

static void codex_refuses_arguments_that_undo_the_wiring(void **state)
{
    (void)state;
    static const char *const refused[][2] = {
        {"-m", "other"},          {"--model=other", NULL}, {"--profile", "x"},
        {"-px", NULL},            {"-c", "model=\"x\""},   {"--config", "model_provider=y"},
        {"-cmodel_providers.a.base_url=z", NULL},          {"--config= 'profile' = a", NULL},
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        char *extra[2] = {(char *)refused[i][0], (char *)refused[i][1]};
        corral_error err = {{0}};
        assert_false(launch_check_extra(launch_tool_find("codex"), extra, extra[1] ? 2 : 1,
                                        &err));
        assert_non_null(strstr(err.message, "conflicting extra"));
        /* the same words are the user's own business for another tool */
        assert_true(launch_check_extra(launch_tool_find("claude"), extra, extra[1] ? 2 : 1,
                                       NULL));
    }
    char *allowed[] = {"--sandbox", "workspace-write", "-c", "sandbox_mode=\"read-only\""};
    assert_true(launch_check_extra(launch_tool_find("codex"), allowed, 4, NULL));
}

static void codex_versions(void **state)
{
    (void)state;
    assert_true(launch_codex_version_ok("codex-cli 0.134.0\n", NULL));
    assert_true(launch_codex_version_ok("codex-cli 0.140.2-alpha.3", NULL));
    assert_true(launch_codex_version_ok("codex-cli 1.0.0\nmore\n", NULL));
    corral_error err = {{0}};
    assert_false(launch_codex_version_ok("codex-cli 0.87.0\n", &err));
    assert_non_null(strstr(err.message, "codex 0.87.0 is too old"));
    assert_false(launch_codex_version_ok("codex-cli 0.133.9", &err));
    assert_false(launch_codex_version_ok("", &err));
    assert_non_null(strstr(err.message, "unexpected output"));
    assert_false(launch_codex_version_ok("codex-cli 0.x.1", &err));
    assert_false(launch_codex_version_ok("codex-cli 0.200", &err));
}

static void codex_profile_quotes_its_values(void **state)
{
    (void)state;
    launch_target target = {.server_url = "http://h:1", .model = "we\"ird\\name\n",
                            .codex_catalog_path = "/c.json", .api_key = "k"};
    char *text = launch_codex_profile(&target);
    assert_non_null(text);
    assert_string_equal(text, "model = \"we\\\"ird\\\\name\\u000a\"\n"
                              "model_provider = \"corral-launch\"\n"
                              "model_catalog_json = \"/c.json\"\n\n"
                              "[model_providers.corral-launch]\n"
                              "name = \"Corral\"\n"
                              "base_url = \"http://h:1/v1/\"\n"
                              "wire_api = \"responses\"\n"
                              "env_key = \"OPENAI_API_KEY\"\n");
    free(text);
}

static void codex_catalog_carries_the_context_window(void **state)
{
    (void)state;
    json_t *catalog = launch_codex_catalog("m", 0, false);
    json_t *entry = json_array_get(json_object_get(catalog, "models"), 0);
    assert_string_equal(json_string_value(json_object_get(entry, "slug")), "m");
    assert_int_equal(json_integer_value(json_object_get(entry, "context_window")), 128000);
    assert_int_equal(json_array_size(json_object_get(entry, "input_modalities")), 1);
    json_decref(catalog);
    catalog = launch_codex_catalog("m", 32768, true);
    entry = json_array_get(json_object_get(catalog, "models"), 0);
    assert_int_equal(json_integer_value(json_object_get(entry, "context_window")), 32768);
    assert_string_equal(
        json_string_value(json_array_get(json_object_get(entry, "input_modalities"), 1)),
        "image");
    json_decref(catalog);
}

static void droid_settings_keep_the_users_own(void **state)
{
    (void)state;
    json_error_t parse;
    json_t *settings = json_loads(
        "{\"theme\":\"dark\",\"customModels\":["
        "{\"model\":\"old\",\"baseUrl\":\"http://h:1/v1\",\"apiKey\":\"corral\"},"
        "{\"model\":\"gpt\",\"baseUrl\":\"https://api.example/v1\",\"apiKey\":\"x\",\"extra\":1}],"
        "\"sessionDefaultSettings\":{\"model\":\"gpt\",\"reasoningEffort\":\"ultra\","
        "\"autonomy\":\"high\"}}",
        0, &parse);
    assert_non_null(settings);
    launch_target target = {.server_url = "http://h:1", .model = "qwen3", .vision = true};
    assert_true(launch_droid_settings(settings, &target));
    assert_string_equal(json_string_value(json_object_get(settings, "theme")), "dark");
    json_t *models = json_object_get(settings, "customModels");
    assert_int_equal(json_array_size(models), 2);
    json_t *mine = json_array_get(models, 0);
    assert_string_equal(json_string_value(json_object_get(mine, "model")), "qwen3");
    assert_string_equal(json_string_value(json_object_get(mine, "baseUrl")), "http://h:1/v1");
    assert_string_equal(json_string_value(json_object_get(mine, "apiKey")), "corral");
    assert_string_equal(json_string_value(json_object_get(mine, "provider")),
                        "generic-chat-completion-api");
    assert_true(json_is_true(json_object_get(mine, "supportsImages")));
    json_t *theirs = json_array_get(models, 1);
    assert_int_equal(json_integer_value(json_object_get(theirs, "extra")), 1);
    json_t *session = json_object_get(settings, "sessionDefaultSettings");
    assert_string_equal(json_string_value(json_object_get(session, "model")),
                        json_string_value(json_object_get(mine, "id")));
    assert_string_equal(json_string_value(json_object_get(session, "reasoningEffort")), "none");
    assert_string_equal(json_string_value(json_object_get(session, "autonomy")), "high");
    json_decref(settings);

    /* a known effort stays; a session that is not an object is made one */
    settings = json_loads("{\"sessionDefaultSettings\":{\"reasoningEffort\":\"low\"}}", 0,
                          &parse);
    target.api_key = "k";
    target.vision = false;
    assert_true(launch_droid_settings(settings, &target));
    session = json_object_get(settings, "sessionDefaultSettings");
    assert_string_equal(json_string_value(json_object_get(session, "reasoningEffort")), "low");
    mine = json_array_get(json_object_get(settings, "customModels"), 0);
    assert_string_equal(json_string_value(json_object_get(mine, "apiKey")), "k");
    json_decref(settings);
    settings = json_loads("{\"sessionDefaultSettings\":3}", 0, &parse);
    assert_true(launch_droid_settings(settings, &target));
    assert_true(json_is_object(json_object_get(settings, "sessionDefaultSettings")));
    json_decref(settings);
}

static void context_window_sources(void **state)
{
    (void)state;
    launch_context_source source;
    assert_int_equal(launch_context_window(131072, 32768, 8192, 4096, &source), 32768);
    assert_int_equal(source, LAUNCH_CONTEXT_LOADED);
    assert_int_equal(launch_context_window(131072, 0, 8192, 4096, &source), 8192);
    assert_int_equal(source, LAUNCH_CONTEXT_MODELFILE);
    assert_int_equal(launch_context_window(131072, 0, 0, 4096, &source), 4096);
    assert_int_equal(source, LAUNCH_CONTEXT_SERVER_DEFAULT);
    /* never above what the model was trained for */
    assert_int_equal(launch_context_window(2048, 0, 0, 65536, &source), 2048);
    assert_int_equal(launch_context_window(0, 0, 0, 65536, &source), 65536);
}

static size_t count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    size_t n = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        n += e->d_name[0] != '.';
    if (d)
        closedir(d);
    return n;
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    static char buf[256];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static void config_replaced_with_a_backup(void **state)
{
    (void)state;
    char root[] = "/tmp/corral-launch-test.XXXXXX";
    assert_non_null(mkdtemp(root));
    char dir[128], path[160], backups[160], backup[512];
    snprintf(dir, sizeof dir, "%s/a/b", root);
    snprintf(path, sizeof path, "%s/settings.json", dir);
    snprintf(backups, sizeof backups, "%s/backup/droid", root);
    assert_true(util_mkdirs(dir, NULL));

    bool changed = false;
    assert_true(
        config_file_replace(path, "one", 3, backups, backup, sizeof backup, &changed, NULL));
    assert_true(changed);
    assert_string_equal(backup, "");
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    assert_string_equal(slurp(path), "one");

    assert_int_equal(chmod(path, 0640), 0);
    assert_true(config_file_replace(path, "two", 3, backups, backup, sizeof backup, NULL, NULL));
    assert_string_equal(slurp(path), "two");
    assert_string_equal(slurp(backup), "one");
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0640);
    assert_int_equal(count_entries(dir), 1); /* no temporary file left beside it */

    /* the same contents again: nothing written, no backup */
    assert_true(
        config_file_replace(path, "two", 3, backups, backup, sizeof backup, &changed, NULL));
    assert_false(changed);
    assert_string_equal(backup, "");
    assert_int_equal(count_entries(backups), 1);

    /* many changes within a second: each backup kept apart, the oldest beyond five removed */
    char text[8];
    for (unsigned char i = 0; i < 7; i++) {
        snprintf(text, sizeof text, "v%u", (unsigned)i);
        assert_true(config_file_replace(path, text, strlen(text), backups, NULL, 0, NULL, NULL));
    }
    assert_int_equal(count_entries(backups), CONFIG_FILE_BACKUPS_KEPT);

    /* no backup directory (a file of Corral's own): replaced all the same, no copy kept */
    assert_true(config_file_replace(path, "own", 3, NULL, backup, sizeof backup, &changed, NULL));
    assert_true(changed);
    assert_string_equal(backup, "");
    assert_string_equal(slurp(path), "own");
    assert_int_equal(count_entries(backups), CONFIG_FILE_BACKUPS_KEPT);
    assert_int_equal(count_entries(dir), 1);

    corral_error err = {{0}};
    assert_false(config_file_replace(dir, "x", 1, backups, NULL, 0, NULL, &err));
    assert_non_null(strstr(err.message, "not a regular file"));

    char command[256];
    snprintf(command, sizeof command, "rm -rf '%s'", root);
    assert_int_equal(system(command), 0);
}


/* The string at a slash-separated path of object keys in json, NULL when there is none. */
static const char *str_at(const json_t *json, const char *path)
{
    char key[128];
    while (json && *path) {
        size_t len = strcspn(path, "/");
        snprintf(key, sizeof key, "%.*s", (int)len, path);
        json = json_object_get(json, key);
        path += len + (path[len] == '/');
    }
    return json_string_value(json);
}

static json_t *parse(const char *text)
{
    json_error_t error;
    json_t *json = json_loads(text, 0, &error);
    assert_non_null(json);
    return json;
}

static void qwen_gets_openai_auth_on_the_server(void **state)
{
    (void)state;
    const launch_tool *qwen = launch_tool_find("qwen-code");
    assert_ptr_equal(qwen, launch_tool_find("qwen"));
    launch_target target = {.server_url = "http://h:1", .model = "qwen3-coder"};
    launch_strings args = {0}, env = {0};
    char *extra[] = {"--yolo"};
    assert_true(launch_check_extra(qwen, extra, 1, NULL));
    assert_true(launch_build_command(qwen, &target, extra, 1, &args, &env, NULL));
    assert_true(has(&env, "OPENAI_BASE_URL=http://h:1/v1"));
    assert_true(has(&env, "OPENAI_API_KEY=corral"));
    assert_true(has(&env, "OPENAI_MODEL=qwen3-coder"));
    assert_true(has(&env, LAUNCH_QWEN_KEY_VARIABLE "=corral"));
    assert_int_equal(args.count, 5);
    assert_string_equal(args.items[index_of(&args, "--model") + 1], "qwen3-coder");
    assert_string_equal(args.items[index_of(&args, "--auth-type") + 1], "openai");
    assert_string_equal(args.items[4], "--yolo");
    launch_strings_free(&args);
    launch_strings_free(&env);

    target.api_key = "sekrit";
    assert_true(launch_build_command(qwen, &target, NULL, 0, &args, &env, NULL));
    assert_true(has(&env, "OPENAI_API_KEY=sekrit"));
    assert_true(has(&env, LAUNCH_QWEN_KEY_VARIABLE "=sekrit"));
    launch_strings_free(&args);
    launch_strings_free(&env);

    corral_error err = {{0}};
    char *model[] = {"--model=other"}, *auth[] = {"--auth-type", "qwen-oauth"};
    char *short_model[] = {"-m", "x"}, *lookalike[] = {"--models", "--auth-types"};
    assert_false(launch_check_extra(qwen, model, 1, &err));
    assert_non_null(strstr(err.message, "corral launch qwen --model MODEL"));
    assert_false(launch_check_extra(qwen, short_model, 2, &err));
    assert_false(launch_check_extra(qwen, auth, 2, &err));
    assert_non_null(strstr(err.message, "'--auth-type': corral launch qwen sets --auth-type"));
    assert_true(launch_check_extra(qwen, lookalike, 2, NULL));
}

static void kimi_gets_its_config_inline(void **state)
{
    (void)state;
    const launch_tool *kimi = launch_tool_find("kimi");
    launch_target target = {.server_url = "http://h:1", .model = "kimi-k2", .api_key = "k",
                            .context_window = 32768};
    launch_strings args = {0}, env = {0};
    char *extra[] = {"--yolo"};
    assert_true(launch_build_command(kimi, &target, extra, 1, &args, &env, NULL));
    /* the key by environment, which wins over the config, not in the arguments */
    assert_true(has(&env, "OPENAI_API_KEY=k"));
    assert_true(has(&env, "OPENAI_BASE_URL=http://h:1/v1"));
    assert_int_equal(args.count, 3);
    assert_null(strstr(args.items[1], "\"k\""));
    assert_string_equal(args.items[0], "--config");
    assert_string_equal(args.items[2], "--yolo");
    json_t *config = parse(args.items[1]);
    const char *alias = str_at(config, "default_model");
    assert_non_null(alias);
    const json_t *model = json_object_get(json_object_get(config, "models"), alias);
    assert_string_equal(str_at(model, "model"), "kimi-k2");
    assert_int_equal(json_integer_value(json_object_get(model, "max_context_size")), 32768);
    const json_t *provider =
        json_object_get(json_object_get(config, "providers"), str_at(model, "provider"));
    assert_string_equal(str_at(provider, "base_url"), "http://h:1/v1");

    assert_string_equal(str_at(provider, "type"), "openai_legacy");
    json_decref(config);
    launch_strings_free(&args);
    launch_strings_free(&env);

    corral_error err = {{0}};
    char *config_file[] = {"--config-file=x.toml"}, *inline_config[] = {"--config", "{}"};
    char *short_model[] = {"-m=x"};
    assert_false(launch_check_extra(kimi, config_file, 1, &err));
    assert_non_null(strstr(err.message, "sets --config-file itself"));
    assert_false(launch_check_extra(kimi, inline_config, 2, &err));
    assert_false(launch_check_extra(kimi, short_model, 1, &err));
    assert_true(launch_check_extra(kimi, extra, 1, NULL));
}

static void poolside_gets_the_server_by_environment(void **state)
{
    (void)state;
    const launch_tool *pool = launch_tool_find("poolside");
    assert_ptr_equal(pool, launch_tool_find("pool"));
    launch_target target = {.server_url = "http://h:1", .model = "devstral"};
    launch_strings args = {0}, env = {0};
    assert_true(launch_build_command(pool, &target, NULL, 0, &args, &env, NULL));
    assert_true(has(&env, "POOLSIDE_STANDALONE_BASE_URL=http://h:1/v1"));
    assert_true(has(&env, "POOLSIDE_API_KEY=corral"));
    assert_int_equal(args.count, 2);
    assert_string_equal(args.items[0], "-m");
    assert_string_equal(args.items[1], "devstral");
    launch_strings_free(&args);
    launch_strings_free(&env);
    char *model[] = {"--model", "x"};
    assert_false(launch_check_extra(pool, model, 2, NULL));
}

static void cline_files_keep_the_users_own(void **state)
{
    (void)state;
    json_t *config = parse(
        "{\"providers\":{\"anthropic\":{\"settings\":{\"apiKey\":\"a\"}},"
        "\"ollama\":{\"settings\":{\"model\":\"old\",\"apiKey\":\"stale\",\"keep\":1},"
        "\"updatedAt\":\"2020-01-01T00:00:00Z\",\"tokenSource\":\"manual\"}},"
        "\"lastUsedProvider\":\"anthropic\",\"other\":true}");
    launch_target target = {.server_url = "http://h:1", .model = "qwen3"};
    assert_true(launch_cline_providers(config, &target, "2026-01-01T00:00:00Z"));
    assert_string_equal(str_at(config, "lastUsedProvider"), LAUNCH_CLINE_PROVIDER);
    assert_int_equal(json_integer_value(json_object_get(config, "version")), 1);
    assert_true(json_is_true(json_object_get(config, "other")));
    assert_string_equal(str_at(config, "providers/anthropic/settings/apiKey"), "a");
    assert_string_equal(str_at(config, "providers/ollama/settings/model"), "qwen3");
    assert_string_equal(str_at(config, "providers/ollama/settings/baseUrl"), "http://h:1/v1");
    assert_string_equal(str_at(config, "providers/ollama/settings/provider"), "ollama");
    assert_null(str_at(config, "providers/ollama/settings/apiKey"));
    assert_string_equal(str_at(config, "providers/ollama/updatedAt"), "2026-01-01T00:00:00Z");
    assert_string_equal(str_at(config, "providers/ollama/tokenSource"), "manual");
    /* the same again: the stamp stays, so Cline sees nothing new */
    assert_true(launch_cline_providers(config, &target, "2027-01-01T00:00:00Z"));
    assert_string_equal(str_at(config, "providers/ollama/updatedAt"), "2026-01-01T00:00:00Z");
    target.api_key = "k";
    assert_true(launch_cline_providers(config, &target, "2027-01-01T00:00:00Z"));
    assert_string_equal(str_at(config, "providers/ollama/settings/apiKey"), "k");
    json_decref(config);

    json_t *global = parse("{\"ollamaBaseUrl\":\"http://old:1\",\"mode\":\"act\"}");
    assert_true(launch_cline_state(global, &target));
    assert_string_equal(str_at(global, "ollamaBaseUrl"), "http://h:1");
    assert_string_equal(str_at(global, "actModeApiProvider"), "ollama");
    assert_string_equal(str_at(global, "planModeOllamaModelId"), "qwen3");
    assert_string_equal(str_at(global, "actModeOllamaBaseUrl"), "http://h:1");
    assert_string_equal(str_at(global, "mode"), "act");
    assert_true(json_is_true(json_object_get(global, "welcomeViewCompleted")));
    json_decref(global);
}

static void qwen_settings_keep_the_users_own(void **state)
{
    (void)state;
    json_t *settings = parse(
        "{\"theme\":\"dark\",\"model\":\"not an object\",\"env\":{\"FOO\":\"1\"},"
        "\"modelProviders\":{\"openai\":["
        "{\"id\":\"old\",\"baseUrl\":\"http://h:1/v1/\",\"envKey\":\"" LAUNCH_QWEN_KEY_VARIABLE
        "\"},"
        "{\"id\":\"gpt\",\"baseUrl\":\"https://api.example/v1\",\"envKey\":\"OPENAI_API_KEY\"},"
        "{\"id\":\"far\",\"baseUrl\":\"http://other:1/v1\",\"envKey\":\"" LAUNCH_QWEN_KEY_VARIABLE
        "\"}],\"anthropic\":[]},"
        "\"security\":{\"auth\":{\"selectedType\":\"qwen-oauth\"},\"folderTrust\":true}}");
    launch_target target = {.server_url = "http://h:1", .model = "qwen3-coder"};
    assert_true(launch_qwen_settings(settings, &target));
    assert_string_equal(str_at(settings, "theme"), "dark");
    assert_string_equal(str_at(settings, "model/name"), "qwen3-coder");
    assert_string_equal(str_at(settings, "env/FOO"), "1");
    assert_string_equal(str_at(settings, "env/" LAUNCH_QWEN_KEY_VARIABLE), "corral");
    assert_string_equal(str_at(settings, "security/auth/selectedType"), "openai");
    assert_string_equal(str_at(settings, "security/auth/baseUrl"), "http://h:1/v1");
    assert_true(json_is_true(json_object_get(json_object_get(settings, "security"),
                                             "folderTrust")));
    const json_t *providers = json_object_get(settings, "modelProviders");
    assert_non_null(json_object_get(providers, "anthropic"));
    const json_t *openai = json_object_get(providers, "openai");
    assert_int_equal(json_array_size(openai), 3);
    assert_string_equal(str_at(json_array_get(openai, 0), "id"), "qwen3-coder");
    assert_string_equal(str_at(json_array_get(openai, 0), "baseUrl"), "http://h:1/v1");
    assert_string_equal(str_at(json_array_get(openai, 0), "envKey"), LAUNCH_QWEN_KEY_VARIABLE);
    assert_string_equal(str_at(json_array_get(openai, 1), "id"), "gpt");
    assert_string_equal(str_at(json_array_get(openai, 2), "id"), "far");
    json_decref(settings);

    settings = json_object();
    target.api_key = "sekrit";
    assert_true(launch_qwen_settings(settings, &target));
    assert_string_equal(str_at(settings, "env/" LAUNCH_QWEN_KEY_VARIABLE), "sekrit");
    assert_int_equal(json_array_size(json_object_get(json_object_get(settings, "modelProviders"),
                                                     "openai")),
                     1);
    json_decref(settings);
}

static void pi_files_keep_the_users_own(void **state)
{
    (void)state;
    json_t *models = parse(
        "{\"providers\":{\"openai\":{\"apiKey\":\"x\"},"
        "\"" LAUNCH_PI_PROVIDER "\":{\"baseUrl\":\"http://old:1/v1\",\"models\":["
        "{\"id\":\"mine\",\"contextWindow\":8192},"
        "{\"id\":\"stale\",\"" LAUNCH_PI_MARK "\":true}]}}}");
    launch_target target = {.server_url = "http://h:1", .model = "qwen3", .vision = true,
                            .thinking = true, .context_window = 65536};
    assert_true(launch_pi_models(models, &target));
    const json_t *providers = json_object_get(models, "providers");
    assert_string_equal(str_at(providers, "openai/apiKey"), "x");
    const json_t *corral = json_object_get(providers, LAUNCH_PI_PROVIDER);
    assert_string_equal(str_at(corral, "baseUrl"), "http://h:1/v1");
    assert_string_equal(str_at(corral, "api"), "openai-completions");
    assert_string_equal(str_at(corral, "apiKey"), "corral");
    const json_t *list = json_object_get(corral, "models");
    assert_int_equal(json_array_size(list), 2);
    assert_string_equal(str_at(json_array_get(list, 0), "id"), "mine");
    const json_t *entry = json_array_get(list, 1);
    assert_string_equal(str_at(entry, "id"), "qwen3");
    assert_true(json_is_true(json_object_get(entry, LAUNCH_PI_MARK)));
    assert_true(json_is_true(json_object_get(entry, "reasoning")));
    assert_int_equal(json_integer_value(json_object_get(entry, "contextWindow")), 65536);
    assert_int_equal(json_array_size(json_object_get(entry, "input")), 2);
    json_decref(models);

    models = json_object();
    target.vision = target.thinking = false;
    assert_true(launch_pi_models(models, &target));
    entry = json_array_get(
        json_object_get(json_object_get(json_object_get(models, "providers"),
                                        LAUNCH_PI_PROVIDER),
                        "models"),
        0);
    assert_int_equal(json_array_size(json_object_get(entry, "input")), 1);
    assert_null(json_object_get(entry, "reasoning"));
    json_decref(models);

    json_t *settings = parse("{\"theme\":\"light\",\"defaultModel\":\"gpt\"}");
    assert_true(launch_pi_settings(settings, &target));
    assert_string_equal(str_at(settings, "defaultProvider"), LAUNCH_PI_PROVIDER);
    assert_string_equal(str_at(settings, "defaultModel"), "qwen3");
    assert_string_equal(str_at(settings, "theme"), "light");
    json_decref(settings);
}

/* launch_pick_model reading input; what it wrote into *shown (caller frees). */
static bool pick(const char *input, const char *const *local, size_t n_local,
                 const char *last_used, char *chosen, char **shown, corral_error *err)
{
    FILE *in = fmemopen((void *)input, strlen(input), "r");
    size_t shown_len;
    FILE *out = open_memstream(shown, &shown_len);
    assert_non_null(in);
    assert_non_null(out);
    bool ok = launch_pick_model(in, out, "Qwen Code", local, n_local, last_used, chosen,
                                LAUNCH_PICK_MAX_NAME + 1, err);
    fclose(in);
    fclose(out);
    return ok;
}

static void picker_chooses_by_number_name_or_default(void **state)
{
    (void)state;
    const char *local[] = {"qwen3-coder:30b", "tiny:latest"};
    char chosen[LAUNCH_PICK_MAX_NAME + 1];
    char *shown = NULL;
    corral_error err = {{0}};

    /* Enter takes the model last used with the tool, ":latest" or not */
    assert_true(pick("\n", local, 2, "tiny", chosen, &shown, &err));
    assert_string_equal(chosen, "tiny:latest");
    assert_non_null(strstr(shown, " 1. qwen3-coder:30b\n"));
    assert_non_null(strstr(shown, " 2. tiny:latest  (last used)\n"));
    assert_non_null(strstr(shown, "Enter for tiny:latest"));
    /* ollama's local recommendations the server lacks come after, numbered on */
    assert_non_null(strstr(shown, " 3. gemma4\n"));
    assert_non_null(strstr(shown, " 4. qwen3.5\n"));
    free(shown);

    assert_true(pick("  1 \n", local, 2, NULL, chosen, &shown, &err));
    assert_string_equal(chosen, "qwen3-coder:30b");
    assert_null(strstr(shown, "Enter for"));
    free(shown);

    /* a number out of range, or Enter with no default, asks again */
    assert_true(pick("0\n5\n\n4\n", local, 2, "gone", chosen, &shown, &err));
    assert_string_equal(chosen, "qwen3.5");
    assert_non_null(strstr(shown, "No model 5 here: choose 1 to 4"));
    assert_non_null(strstr(shown, "No model 0 here"));
    free(shown);

    /* a name, listed or not, is taken as typed (the server is asked about it next) */
    assert_true(pick("llama3.2:1b\n", local, 2, NULL, chosen, &shown, &err));
    assert_string_equal(chosen, "llama3.2:1b");
    free(shown);
    assert_true(pick("99999999999999999999999\n1\n", local, 2, NULL, chosen, &shown, &err));
    assert_string_equal(chosen, "qwen3-coder:30b");
    free(shown);

    /* a recommended model the server has is listed once, as its own */
    const char *with_gemma[] = {"gemma4:latest"};
    assert_true(pick("2\n", with_gemma, 1, NULL, chosen, &shown, &err));
    assert_string_equal(chosen, "qwen3.5");
    assert_null(strstr(shown, " 2. gemma4"));
    free(shown);

    /* a line longer than any name is refused whole, then the next one read */
    char input[LAUNCH_PICK_MAX_NAME + 64];
    memset(input, 'a', LAUNCH_PICK_MAX_NAME + 10);
    strcpy(input + LAUNCH_PICK_MAX_NAME + 10, "\n2\n");
    assert_true(pick(input, local, 2, NULL, chosen, &shown, &err));
    assert_string_equal(chosen, "tiny:latest");
    assert_non_null(strstr(shown, "too long"));
    free(shown);

    /* a name from the server never sends control bytes to the terminal */
    const char *hostile[] = {"evil\x1b[2J\x07"};
    assert_true(pick("1\n", hostile, 1, "evil\x1b[2J\x07", chosen, &shown, &err));
    assert_string_equal(chosen, "evil\x1b[2J\x07");
    assert_null(strchr(shown, '\x1b'));
    assert_null(strchr(shown, '\x07'));
    assert_non_null(strstr(shown, " 1. evil?[2J?  (last used)"));
    free(shown);

    /* the end of the input chooses nothing */
    assert_false(pick("", NULL, 0, NULL, chosen, &shown, &err));
    assert_non_null(strstr(err.message, "no model chosen"));
    assert_non_null(strstr(shown, "(none yet)"));
    free(shown);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(tools_by_name_and_alias),
        cmocka_unit_test(wildcard_address_becomes_loopback),
        cmocka_unit_test(claude_gets_every_tier_on_the_model),
        cmocka_unit_test(copilot_uses_the_responses_api),
        cmocka_unit_test(opencode_gets_a_provider_in_its_config),
        cmocka_unit_test(codex_selects_the_launch_profile),
        cmocka_unit_test(codex_refuses_arguments_that_undo_the_wiring),
        cmocka_unit_test(codex_versions),
        cmocka_unit_test(codex_profile_quotes_its_values),
        cmocka_unit_test(codex_catalog_carries_the_context_window),
        cmocka_unit_test(droid_settings_keep_the_users_own),
        cmocka_unit_test(context_window_sources),
        cmocka_unit_test(config_replaced_with_a_backup),
        cmocka_unit_test(qwen_gets_openai_auth_on_the_server),
        cmocka_unit_test(kimi_gets_its_config_inline),
        cmocka_unit_test(poolside_gets_the_server_by_environment),
        cmocka_unit_test(cline_files_keep_the_users_own),
        cmocka_unit_test(qwen_settings_keep_the_users_own),
        cmocka_unit_test(pi_files_keep_the_users_own),
        cmocka_unit_test(picker_chooses_by_number_name_or_default),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

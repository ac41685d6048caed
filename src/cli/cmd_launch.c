/*
 * `corral launch [TOOL] [--model MODEL] [--config] [--yes] [-- ARGS...]`: start a coding
 * agent (launch_tools.c lists them) wired to the Corral server, as ollama's `launch`. Without
 * TOOL it lists the tools and whether each is installed. With one it checks that the tool is
 * installed (it never installs one: it says how), has the model chosen on the terminal when
 * --model is not given (the one last launched with the tool, kept in ~/.corral/launch.json, as
 * the default), checks that the server has the model (pulling it with --yes or on a yes at the
 * prompt), warns when the context window the model will get is below what the tool needs,
 * writes the tool's config files when the tool reads some (launch_tools.h says which), and
 * replaces this process with the tool. --restore removes the Codex profile files launch wrote.
 */
#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli/client.h"
#include "cli/commands.h"
#include "cli/config_file.h"
#include "cli/flags.h"
#include "cli/launch_picker.h"
#include "cli/launch_settings.h"
#include "cli/launch_tools.h"
#include "cli/pull.h"
#include "util/file.h"

#define SERVER_DEFAULT_CONTEXT 4096u /* `corral serve`'s num_ctx when CONTEXT_LENGTH is unset */
#define MAX_SETTINGS_BYTES (16u << 20)

typedef struct launch_args {
    const char *tool;
    const char *model;
    bool configure_only;
    bool restore;
    bool yes;
    char **extra;
    size_t n_extra;
} launch_args;

static void print_usage(FILE *out)
{
    fprintf(out,
            "Usage: corral launch [TOOL] [--model MODEL] [--config] [--yes] [-- ARGS...]\n"
            "       corral launch codex --restore\n\n"
            "Start a coding agent wired to the Corral server (CORRAL_HOST, else OLLAMA_HOST).\n"
            "Without TOOL: list the tools and whether each is installed.\n\n"
            "Flags:\n"
            "      --model MODEL   the model the tool uses (without it: chosen from a list on\n"
            "                      the terminal)\n"
            "      --config        write the tool's config file without launching it\n"
            "      --restore       remove the files launch wrote for the tool (codex)\n"
            "  -y, --yes           pull the model when the server does not have it\n"
            "  -- ARGS...          arguments passed on to the tool\n\n"
            "Examples:\n"
            "  corral launch claude --model qwen3-coder\n"
            "  corral launch codex --model qwen3-coder -- --sandbox workspace-write\n"
            "  corral launch droid --model qwen3-coder --config\n"
            "  corral launch qwen                      # choose the model from a list\n");
}

/* The tool's executable: on PATH, else in one of its usual places under $HOME. */
static bool find_program(const launch_tool *tool, char *out, size_t out_size)
{
    const char *path = getenv("PATH");
    while (path && *path) {
        const char *colon = strchr(path, ':');
        size_t len = colon ? (size_t)(colon - path) : strlen(path);
        int n = snprintf(out, out_size, "%.*s/%s", (int)len, len ? path : ".", tool->program);
        struct stat st;
        if (n > 0 && (size_t)n < out_size && stat(out, &st) == 0 && S_ISREG(st.st_mode) &&
            access(out, X_OK) == 0)
            return true;
        path = colon ? colon + 1 : NULL;
    }
    const char *home = getenv("HOME");
    for (size_t i = 0; home && *home && tool->home_paths[i]; i++) {
        int n = snprintf(out, out_size, "%s/%s", home, tool->home_paths[i]);
        struct stat st;
        if (n > 0 && (size_t)n < out_size && stat(out, &st) == 0 && S_ISREG(st.st_mode) &&
            access(out, X_OK) == 0)
            return true;
    }
    return false;
}

static int list_tools(void)
{
    size_t count;
    const launch_tool *tools = launch_tools(&count);
    printf("Tools corral launch can start:\n\n");
    for (size_t i = 0; i < count; i++) {
        char path[PATH_MAX];
        bool installed = find_program(&tools[i], path, sizeof path);
        printf("  %-10s %-14s %s%s\n", tools[i].name, tools[i].display_name,
               installed ? "installed: " : "not installed; install: ",
               installed ? path : tools[i].install_hint);
    }
    printf("\nRun: corral launch TOOL [--model MODEL] [-- ARGS...]\n");
    return 0;
}

/* 0 when parsed, else the exit status. */
static int parse_args(int argc, char **argv, launch_args *a)
{
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "--") == 0) {
            a->extra = argv + i + 1;
            a->n_extra = (size_t)(argc - i - 1);
            break;
        }
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            print_usage(stdout);
            return -1;
        }
        flag_match match = flag_value(argc, argv, &i, "--model", 0, &a->model);
        if (match == FLAG_OTHER)
            match = flag_bool(arg, "--config", &a->configure_only);
        if (match == FLAG_OTHER)
            match = flag_bool(arg, "--restore", &a->restore);
        if (match == FLAG_OTHER)
            match = flag_bool(arg, "--yes", &a->yes);
        if (match == FLAG_OTHER)
            match = flag_bool(arg, "-y", &a->yes);
        if (match == FLAG_BAD_VALUE)
            return 2;
        if (match == FLAG_SET)
            continue;
        if (arg[0] == '-') {
            fprintf(stderr, "Error: unknown flag '%s'\n", arg);
            return 2;
        }
        if (a->tool) {
            fprintf(stderr, "Error: unexpected argument '%s'\nUse '--' to pass arguments to "
                            "the tool: corral launch %s --model MODEL -- %s\n", arg, a->tool,
                    arg);
            return 2;
        }
        a->tool = arg;
    }
    if (!a->tool && (a->model || a->configure_only || a->restore || a->yes || a->extra)) {
        fprintf(stderr, "Error: flags and arguments need a tool name, for example: "
                        "corral launch claude --model qwen3-coder\n");
        return 2;
    }
    if (a->restore && (a->model || a->configure_only || a->extra)) {
        fprintf(stderr, "Error: --restore goes alone, without --model, --config or arguments "
                        "after --\n");
        return 2;
    }
    return 0;
}

/* Ask on the terminal; false when there is none to ask on. */
static bool confirm(const char *question)
{
    if (!isatty(STDIN_FILENO) || !isatty(STDERR_FILENO))
        return false;
    fprintf(stderr, "%s [y/N] ", question);
    char answer[16];
    return fgets(answer, sizeof answer, stdin) && (answer[0] == 'y' || answer[0] == 'Y');
}

/* The model's /api/show reply, pulling it first when allowed. NULL with err. */
static json_t *find_model(corral_client *client, const char *model, bool yes, corral_error *err)
{
    json_t *request = json_pack("{s:s}", "model", model);
    json_t *reply = NULL;
    long status = request ? client_call(client, "POST", "/api/show", request, &reply, err) : 0;
    if (status == 404) {
        char question[512];
        snprintf(question, sizeof question, "The server does not have '%s'. Pull it now?",
                 model);
        if (!yes && !confirm(question)) {
            corral_error_set(err, "model '%s' not found; pull it with 'corral pull %s', or pass "
                                  "--yes to pull it here", model, model);
        } else if (pull_transfer(client, "/api/pull", model, false, err)) {
            status = client_call(client, "POST", "/api/show", request, &reply, err);
        }
    }
    json_decref(request);
    if (status != 200) {
        json_decref(reply);
        return NULL;
    }
    return reply;
}

/* The integer "<arch>.context_length" of a /api/show reply, 0 when it has none. */
static unsigned trained_context(const json_t *show)
{
    const json_t *info = json_object_get(show, "model_info");
    const char *arch = json_string_value(json_object_get(info, "general.architecture"));
    char key[160];
    if (!arch || snprintf(key, sizeof key, "%s.context_length", arch) >= (int)sizeof key)
        return 0;
    json_int_t v = json_integer_value(json_object_get(info, key));
    return v > 0 && v <= UINT_MAX ? (unsigned)v : 0;
}

/* num_ctx from the "parameters" text of a /api/show reply ("num_ctx   8192" lines). */
static unsigned num_ctx_parameter(const json_t *show)
{
    const char *text = json_string_value(json_object_get(show, "parameters"));
    for (const char *line = text; line && *line;) {
        if (strncmp(line, "num_ctx", 7) == 0 && (line[7] == ' ' || line[7] == '\t')) {
            unsigned long v = strtoul(line + 7, NULL, 10);
            return v <= UINT_MAX ? (unsigned)v : 0;
        }
        line = strchr(line, '\n');
        line = line ? line + 1 : NULL;
    }
    return 0;
}

/* The context the server runs the model with now (/api/ps), 0 when it is not loaded. */
static unsigned loaded_context(corral_client *client, const char *model)
{
    json_t *reply = NULL;
    corral_error ignored = {{0}};
    unsigned found = 0;
    if (client_call(client, "GET", "/api/ps", NULL, &reply, &ignored) == 200) {
        size_t i;
        const json_t *m;
        json_array_foreach(json_object_get(reply, "models"), i, m) {
            const char *name = json_string_value(json_object_get(m, "name"));
            json_int_t ctx = json_integer_value(json_object_get(m, "context_length"));
            if (name && launch_same_model(name, model) && ctx > 0 && ctx <= UINT_MAX)
                found = (unsigned)ctx;
        }
    }
    json_decref(reply);
    return found;
}

/* The server's default context as this environment sets it for a server it starts. */
static unsigned server_default_context(void)
{
    const char *text = getenv("CORRAL_CONTEXT_LENGTH");
    if (!text || !*text)
        text = getenv("OLLAMA_CONTEXT_LENGTH");
    char *end;
    unsigned long v = text ? strtoul(text, &end, 10) : 0;
    return v > 0 && v <= UINT_MAX && !*end ? (unsigned)v : SERVER_DEFAULT_CONTEXT;
}

/* What launch needs to know of the model, from the server. */
typedef struct model_facts {
    unsigned trained; /* context it was trained for, 0 when unknown */
    unsigned window;  /* context a tool's requests will get */
    launch_context_source source;
    bool vision, thinking;
} model_facts;

static void warn_small_context(const launch_tool *tool, const char *model,
                               const model_facts *facts)
{
    if (facts->window >= tool->recommended_context)
        return;
    if (facts->trained && facts->trained < tool->recommended_context) {
        fprintf(stderr, "Warning: %s was trained for a context of %u tokens; %s needs at least "
                        "%u: choose a model with a longer context.\n", model, facts->trained,
                tool->display_name, tool->recommended_context);
        return;
    }
    static const char *const why[] = {
        [LAUNCH_CONTEXT_LOADED] = "as the server runs it now",
        [LAUNCH_CONTEXT_MODELFILE] = "from its num_ctx parameter",
        [LAUNCH_CONTEXT_SERVER_DEFAULT] = "the server's default, as the tool sets none",
    };
    fprintf(stderr, "Warning: %s gets a context window of %u tokens (%s); %s needs at least "
                    "%u.\n  Start the server with CORRAL_CONTEXT_LENGTH=%u, or create the model "
                    "with PARAMETER num_ctx %u.\n", model, facts->window, why[facts->source],
            tool->display_name, tool->recommended_context, tool->recommended_context,
            tool->recommended_context);
}

static bool has_capability(const json_t *show, const char *capability)
{
    size_t i;
    const json_t *c;
    json_array_foreach(json_object_get(show, "capabilities"), i, c) {
        const char *name = json_string_value(c);
        if (name && strcmp(name, capability) == 0)
            return true;
    }
    return false;
}

static model_facts read_model_facts(corral_client *client, const char *model,
                                    const json_t *show)
{
    model_facts facts = {.trained = trained_context(show),
                         .vision = has_capability(show, "vision"),
                         .thinking = has_capability(show, "thinking")};
    facts.window = launch_context_window(facts.trained, loaded_context(client, model),
                                         num_ctx_parameter(show), server_default_context(),
                                         &facts.source);
    return facts;
}

/* Write one config file, saying so (and where the old one went) on stderr. */
static bool write_config(const char *path, const char *text, const char *tool_name,
                         corral_error *err)
{
    const char *home = getenv("HOME");
    char backup_dir[4096], backup[4096];
    snprintf(backup_dir, sizeof backup_dir, "%s/.corral/backup/%s", home, tool_name);
    bool changed;
    if (!config_file_replace(path, text, strlen(text), backup_dir, backup, sizeof backup,
                             &changed, err))
        return false;
    if (changed)
        fprintf(stderr, "Wrote %s%s%s%s\n", path, backup[0] ? " (the old one is in " : "",
                backup, backup[0] ? ")" : "");
    return true;
}

/* Codex: its launch profile and model catalog beside ~/.codex/config.toml, which stays. */
static bool configure_codex(launch_target *target, const model_facts *facts, char *catalog_path,
                            size_t catalog_size, corral_error *err)
{
    const char *home = getenv("HOME");
    char dir[4096], profile_path[4200];
    snprintf(dir, sizeof dir, "%s/.codex", home);
    snprintf(catalog_path, catalog_size, "%s/corral-launch.model.json", dir);
    snprintf(profile_path, sizeof profile_path, "%s/corral-launch.config.toml", dir);
    target->codex_catalog_path = catalog_path;
    json_t *catalog = launch_codex_catalog(target->model, facts->window, facts->vision);
    char *catalog_text = catalog ? json_dumps(catalog, JSON_INDENT(2)) : NULL;
    char *profile = launch_codex_profile(target);
    bool ok = catalog_text && profile;
    if (!ok)
        corral_error_set(err, "out of memory writing the Codex configuration");
    ok = ok && util_mkdirs(dir, err) &&
         write_config(catalog_path, catalog_text, "codex", err) &&
         write_config(profile_path, profile, "codex", err);
    json_decref(catalog);
    free(catalog_text);
    free(profile);
    return ok;
}

/* The JSON object in the file at path, an empty one when there is no file. NULL with err: a
 * file that is not a JSON object is left for the user to fix. */
static json_t *read_settings(const char *path, corral_error *err)
{
    if (access(path, F_OK) != 0) {
        json_t *settings = json_object();
        if (!settings)
            corral_error_set(err, "out of memory reading %s", path);
        return settings;
    }
    size_t len;
    char *text = util_read_file(path, MAX_SETTINGS_BYTES, &len, err);
    if (!text)
        return NULL;
    json_error_t parse;
    json_t *settings = json_loadb(text, len, 0, &parse);
    free(text);
    if (!json_is_object(settings)) {
        corral_error_set(err, "%s is not a JSON object (%s, line %d); fix or move it, then run "
                              "this again", path, settings ? "another JSON value" : parse.text,
                         parse.line);
        json_decref(settings);
        return NULL;
    }
    return settings;
}

/* Cline's providers.json, stamped with the time now. */
static bool merge_cline_providers(json_t *config, const launch_target *target)
{
    char now[32];
    time_t t = time(NULL);
    struct tm tm;
    if (!gmtime_r(&t, &tm) || strftime(now, sizeof now, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
        return false;
    return launch_cline_providers(config, target, now);
}

/* One JSON settings file a tool reads, under $HOME, and launch's entries for it. */
typedef struct settings_file {
    const char *dir;  /* under $HOME */
    const char *name; /* in dir */
    bool (*merge)(json_t *settings, const launch_target *target);
} settings_file;

/*
 * Merge launch's entries into each of the n files (the user's other settings kept), all read
 * and merged before any is written, so that one the user must fix stops the launch with
 * nothing changed.
 */
static bool configure_settings(const launch_tool *tool, const settings_file *files, size_t n,
                               const launch_target *target, corral_error *err)
{
    enum { MAX_FILES = 2 };
    assert(n <= MAX_FILES);
    const char *home = getenv("HOME");
    char dirs[MAX_FILES][4096], paths[MAX_FILES][4400];
    json_t *settings[MAX_FILES] = {NULL};
    char *texts[MAX_FILES] = {NULL};
    bool ok = true;
    for (size_t i = 0; ok && i < n; i++) {
        snprintf(dirs[i], sizeof dirs[i], "%s/%s", home, files[i].dir);
        snprintf(paths[i], sizeof paths[i], "%s/%s", dirs[i], files[i].name);
        settings[i] = read_settings(paths[i], err);
        ok = settings[i] != NULL;
        if (ok && (!files[i].merge(settings[i], target) ||
                   !(texts[i] = json_dumps(settings[i], JSON_INDENT(2))))) {
            corral_error_set(err, "out of memory writing %s's settings", tool->display_name);
            ok = false;
        }
    }
    for (size_t i = 0; ok && i < n; i++)
        ok = util_mkdirs(dirs[i], err) && write_config(paths[i], texts[i], tool->name, err);
    for (size_t i = 0; i < n; i++) {
        json_decref(settings[i]);
        free(texts[i]);
    }
    return ok;
}

/* The settings files of a tool wired by them (Codex's are written by configure_codex). */
static bool configure_tool_files(const launch_tool *tool, const launch_target *target,
                                 corral_error *err)
{
    static const settings_file droid[] = {{".factory", "settings.json", launch_droid_settings}};
    static const settings_file cline[] = {
        {".cline/data/settings", "providers.json", merge_cline_providers},
        {".cline/data", "globalState.json", launch_cline_state}};
    static const settings_file qwen[] = {{".qwen", "settings.json", launch_qwen_settings}};
    static const settings_file pi[] = {{".pi/agent", "models.json", launch_pi_models},
                                       {".pi/agent", "settings.json", launch_pi_settings}};
    switch (tool->wiring) {
    case LAUNCH_WIRING_DROID_SETTINGS:
        return configure_settings(tool, droid, 1, target, err);
    case LAUNCH_WIRING_CLINE_FILES:
        return configure_settings(tool, cline, 2, target, err);
    case LAUNCH_WIRING_QWEN_SETTINGS:
        return configure_settings(tool, qwen, 1, target, err);
    case LAUNCH_WIRING_PI_FILES:
        return configure_settings(tool, pi, 2, target, err);
    case LAUNCH_WIRING_ENV:
    case LAUNCH_WIRING_CODEX_PROFILE:
        break;
    }
    return true;
}

/* ~/.corral/launch.json's path into out, which keeps the model last launched with each tool;
 * false when HOME is unusable. */
static bool state_path(char *out, size_t out_size)
{
    const char *home = getenv("HOME");
    int n = home && *home ? snprintf(out, out_size, "%s/.corral/launch.json", home) : -1;
    return n > 0 && (size_t)n < out_size;
}

/* The model last launched with tool (caller frees), NULL when none is known. A state file
 * that cannot be read only loses the default. */
static char *last_used_model(const launch_tool *tool)
{
    char path[4200];
    corral_error ignored = {{0}};
    json_t *state = state_path(path, sizeof path) ? read_settings(path, &ignored) : NULL;
    const char *model =
        json_string_value(json_object_get(json_object_get(state, "last_model"), tool->name));
    char *copy = model && *model ? strdup(model) : NULL;
    json_decref(state);
    return copy;
}

/* Remember model as the one last launched with tool; a failure is only warned about. */
static void remember_model(const launch_tool *tool, const char *model)
{
    char path[4200], dir[4200];
    corral_error err = {{0}};
    if (!state_path(path, sizeof path))
        return;
    snprintf(dir, sizeof dir, "%.*s", (int)(strrchr(path, '/') - path), path);
    corral_error unreadable = {{0}};
    json_t *state = read_settings(path, &unreadable);
    if (!state) /* launch's own file, unreadable: start it again */
        state = json_object();
    json_t *last = json_object_get(state, "last_model");
    if (state && !json_is_object(last)) {
        last = json_object();
        if (json_object_set_new(state, "last_model", last) != 0)
            last = NULL;
    }
    char *text = state && last && json_object_set_new(last, tool->name, json_string(model)) == 0
                     ? json_dumps(state, JSON_INDENT(2))
                     : NULL;
    if (!text)
        corral_error_set(&err, "out of memory");
    else if (util_mkdirs(dir, &err))
        config_file_replace(path, text, strlen(text), NULL, NULL, 0, NULL, &err);
    if (err.message[0])
        fprintf(stderr, "Warning: cannot remember the model for next time: %s\n", err.message);
    free(text);
    json_decref(state);
}

/* The model chosen on the terminal from the server's list into out. false with err. */
static bool pick_model(corral_client *client, const launch_tool *tool, char *out,
                       size_t out_size, corral_error *err)
{
    json_t *reply = NULL;
    if (client_call(client, "GET", "/api/tags", NULL, &reply, err) != 200) {
        json_decref(reply);
        return false;
    }
    const json_t *models = json_object_get(reply, "models");
    size_t count = json_array_size(models), n = 0;
    const char **names = calloc(count ? count : 1, sizeof *names);
    if (!names) {
        corral_error_set(err, "out of memory listing the models");
        json_decref(reply);
        return false;
    }
    size_t i;
    const json_t *m;
    json_array_foreach(models, i, m) {
        const char *name = json_string_value(json_object_get(m, "name"));
        if (name)
            names[n++] = name;
    }
    char *last = last_used_model(tool);
    bool ok = launch_pick_model(stdin, stderr, tool->display_name, names, n, last, out,
                                out_size, err);
    free(last);
    free(names);
    json_decref(reply);
    return ok;
}

/* The first bytes `program --version` prints on stdout (NUL-terminated). false with err. */
static bool read_version(const char *program, char *out, size_t out_size, corral_error *err)
{
    int pipe_fds[2];
    if (pipe(pipe_fds) != 0) {
        corral_error_set(err, "cannot run %s --version: %s", program, strerror(errno));
        return false;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(pipe_fds[1], STDOUT_FILENO);
        close(pipe_fds[0]);
        close(pipe_fds[1]);
        execl(program, program, "--version", (char *)NULL);
        _exit(127);
    }
    close(pipe_fds[1]);
    /* read to the end (past out_size, dropped) so that a talkative tool never blocks */
    size_t got = 0;
    char chunk[4096];
    ssize_t n;
    while (pid > 0 && ((n = read(pipe_fds[0], chunk, sizeof chunk)) > 0 ||
                       (n < 0 && errno == EINTR))) {
        size_t take = n > 0 && got + 1 < out_size ? out_size - 1 - got : 0;
        take = take < (size_t)(n > 0 ? n : 0) ? take : (size_t)(n > 0 ? n : 0);
        memcpy(out + got, chunk, take);
        got += take;
    }
    out[got] = '\0';
    close(pipe_fds[0]);
    int status = 0;
    while (pid > 0 && waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (pid < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        corral_error_set(err, "%s --version failed", program);
        return false;
    }
    return true;
}

/* Set env's NAME=VALUE entries and replace this process with the tool. Returns only on error. */
static void run_tool(const char *program, launch_strings *args, const launch_strings *env,
                     corral_error *err)
{
    for (size_t i = 0; i < env->count; i++) {
        char *eq = strchr(env->items[i], '=');
        *eq = '\0';
        int rc = setenv(env->items[i], eq + 1, 1);
        *eq = '=';
        if (rc != 0) {
            corral_error_set(err, "cannot set %s: %s", env->items[i], strerror(errno));
            return;
        }
    }
    fflush(NULL);
    execv(program, args->items);
    corral_error_set(err, "cannot run %s: %s", program, strerror(errno));
}

/* Codex without launch's profile: the two files launch owns go, the user's config stays. */
static int restore(const launch_tool *tool)
{
    const char *home = getenv("HOME");
    if (tool->wiring != LAUNCH_WIRING_CODEX_PROFILE) {
        fprintf(stderr, "Error: %s has nothing to restore: corral launch %s\n",
                tool->display_name, tool->wiring == LAUNCH_WIRING_ENV
                                        ? "changes no file of it"
                                        : "keeps its other settings as they are");
        return 2;
    }
    if (!home || !*home) {
        fprintf(stderr, "Error: HOME is not set: cannot find %s's config\n",
                tool->display_name);
        return 1;
    }
    static const char *const owned[] = {"corral-launch.config.toml", "corral-launch.model.json"};
    for (size_t i = 0; i < sizeof owned / sizeof owned[0]; i++) {
        char path[4200];
        snprintf(path, sizeof path, "%s/.codex/%s", home, owned[i]);
        if (unlink(path) != 0 && errno != ENOENT) {
            fprintf(stderr, "Error: cannot remove %s: %s\n", path, strerror(errno));
            return 1;
        }
    }
    fprintf(stderr, "Removed Codex's corral-launch profile; ~/.codex/config.toml is as it was.\n");
    return 0;
}

static int launch(const launch_args *a, const launch_tool *tool)
{
    char program[PATH_MAX];
    if (!a->configure_only && !find_program(tool, program, sizeof program)) {
        fprintf(stderr, "Error: %s is not installed (no '%s' on PATH); install it with:\n  %s\n"
                        "then run this again.\n", tool->display_name, tool->program,
                tool->install_hint);
        return 1;
    }
    if (a->configure_only && tool->wiring == LAUNCH_WIRING_ENV) {
        fprintf(stderr, "Error: %s has no config file to write: corral launch sets it up with "
                        "environment variables or arguments each time it starts it\n",
                tool->display_name);
        return 2;
    }
    if (!a->model && (!isatty(STDIN_FILENO) || !isatty(STDERR_FILENO))) {
        fprintf(stderr, "Error: which model? With no terminal to choose one on, name it: "
                        "corral launch %s --model MODEL (see 'corral list')\n", tool->name);
        return 2;
    }
    corral_error err = {{0}};
    if (!launch_check_extra(tool, a->extra, a->n_extra, &err)) {
        fprintf(stderr, "Error: %s\n", err.message);
        return 2;
    }
    char version[4096];
    if (!a->configure_only && tool->wiring == LAUNCH_WIRING_CODEX_PROFILE &&
        (!read_version(program, version, sizeof version, &err) ||
         !launch_codex_version_ok(version, &err))) {
        fprintf(stderr, "Error: %s\n", err.message);
        return 1;
    }
    const char *home = getenv("HOME");
    if (tool->wiring != LAUNCH_WIRING_ENV && (!home || !*home)) {
        fprintf(stderr, "Error: HOME is not set: cannot find %s's config\n",
                tool->display_name);
        return 1;
    }

    corral_client *client = client_connect(&err);
    char picked[LAUNCH_PICK_MAX_NAME + 1];
    const char *model = a->model;
    if (client && !model && pick_model(client, tool, picked, sizeof picked, &err))
        model = picked;
    json_t *show = client && model ? find_model(client, model, a->yes, &err) : NULL;
    char url[700], catalog[4200];
    const char *key = getenv("CORRAL_API_KEY");
    if (!key || !*key)
        key = getenv("OLLAMA_API_KEY");
    launch_target target = {.server_url = url, .api_key = key && *key ? key : NULL,
                            .model = model};
    bool ok = show != NULL;
    if (ok && !launch_connectable_url(client_get_address(client)->url, url, sizeof url)) {
        corral_error_set(&err, "server address too long");
        ok = false;
    }
    model_facts facts = {0};
    if (ok) {
        facts = read_model_facts(client, model, show);
        target.vision = facts.vision;
        target.thinking = facts.thinking;
        target.context_window = facts.window;
        warn_small_context(tool, model, &facts);
    }
    if (ok && tool->wiring == LAUNCH_WIRING_CODEX_PROFILE)
        ok = configure_codex(&target, &facts, catalog, sizeof catalog, &err);
    else if (ok)
        ok = configure_tool_files(tool, &target, &err);
    json_decref(show);
    client_close(client);
    if (ok)
        remember_model(tool, model);
    if (ok && a->configure_only) {
        fprintf(stderr, "%s is set up for %s. Start it with: corral launch %s --model %s\n",
                tool->display_name, model, tool->name, model);
        return 0;
    }

    launch_strings args = {0}, env = {0};
    ok = ok && launch_strings_add(&args, program) &&
         launch_build_command(tool, &target, a->extra, a->n_extra, &args, &env, &err);
    if (ok)
        run_tool(program, &args, &env, &err);
    launch_strings_free(&args);
    launch_strings_free(&env);
    fprintf(stderr, "Error: %s\n", err.message[0] ? err.message : "out of memory");
    return 1;
}

int cmd_launch(int argc, char **argv)
{
    launch_args a = {0};
    int status = parse_args(argc, argv, &a);
    if (status)
        return status < 0 ? 0 : status;
    if (!a.tool)
        return list_tools();
    const launch_tool *tool = launch_tool_find(a.tool);
    if (!tool) {
        size_t count;
        const launch_tool *tools = launch_tools(&count);
        fprintf(stderr, "Error: unknown tool '%s'; corral launch knows:", a.tool);
        for (size_t i = 0; i < count; i++)
            fprintf(stderr, " %s", tools[i].name);
        fprintf(stderr, "\n");
        return 2;
    }
    return a.restore ? restore(tool) : launch(&a, tool);
}

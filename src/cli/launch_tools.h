/*
 * The coding agents `corral launch` knows and how each one is wired to a Corral server, as
 * ollama's `launch` wires them: the program and where it is usually installed, how to
 * install it, the context window it needs, and the arguments, environment and config file
 * contents that point it at the server. Pure: no process, file or network access here
 * (cmd_launch.c does those), so each wiring is checked by unit tests.
 */
#ifndef CORRAL_CLI_LAUNCH_TOOLS_H
#define CORRAL_CLI_LAUNCH_TOOLS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "corral/error.h"

#define LAUNCH_MAX_HOME_PATHS 3

/* How a tool learns where the server is. */
typedef enum launch_wiring {
    LAUNCH_WIRING_ENV,           /* environment variables and arguments only */
    LAUNCH_WIRING_CODEX_PROFILE, /* a profile file and model catalog beside Codex's config */
    LAUNCH_WIRING_DROID_SETTINGS, /* entries in Droid's settings.json */
    LAUNCH_WIRING_CLINE_FILES,    /* Cline's providers.json and globalState.json */
    LAUNCH_WIRING_QWEN_SETTINGS,  /* Qwen Code's settings.json, and its environment */
    LAUNCH_WIRING_PI_FILES        /* Pi's models.json and settings.json */
} launch_wiring;

typedef struct launch_tool {
    const char *name;         /* as typed: "claude" */
    const char *aliases[2];   /* other accepted names, NULL-terminated */
    const char *display_name; /* "Claude Code" */
    const char *program;      /* the executable looked up on PATH */
    /* usual install places under $HOME when not on PATH, NULL-terminated */
    const char *home_paths[LAUNCH_MAX_HOME_PATHS + 1];
    const char *install_hint; /* what to run or read to install it */
    unsigned recommended_context; /* tokens of context the tool needs to work well */
    launch_wiring wiring;
} launch_tool;

/* The variable that holds the server's key for Qwen Code (its provider's envKey): launch's own,
 * so that a command the agent runs never sees a CORRAL_API_KEY it did not set. */
#define LAUNCH_QWEN_KEY_VARIABLE "CORRAL_LAUNCH_API_KEY"

/* The known tools, in listing order. */
const launch_tool *launch_tools(size_t *count);

/* The tool called name (or one of its aliases), NULL when none is. */
const launch_tool *launch_tool_find(const char *name);

/* Whether two model names are one, an explicit ":latest" aside. */
bool launch_same_model(const char *a, const char *b);

/* A growable NULL-terminated list of owned strings (an argv or a list of NAME=VALUE). */
typedef struct launch_strings {
    char **items;
    size_t count, capacity;
} launch_strings;

bool launch_strings_add(launch_strings *list, const char *text);
bool launch_strings_addf(launch_strings *list, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void launch_strings_free(launch_strings *list);

/* What a launch needs to know about the server and the model. */
typedef struct launch_target {
    const char *server_url; /* scheme://host:port[/path], no trailing slash */
    const char *api_key;    /* CORRAL_API_KEY, or NULL when the server needs none */
    const char *model;
    const char *codex_catalog_path; /* Codex only: the model catalog file written */
    unsigned context_window; /* tokens of context the model gets (Kimi and Pi are told) */
    bool vision;   /* the model takes images */
    bool thinking; /* the model thinks before it answers */
} launch_target;

/*
 * The server URL a tool should use for address (client.h's url): a wildcard listening
 * address (0.0.0.0, [::]) becomes its loopback one, which a client can connect to. false when
 * it does not fit out_size.
 */
bool launch_connectable_url(const char *address_url, char *out, size_t out_size);

/*
 * Whether the user's extra arguments leave tool's wiring alone: false with err for one that
 * would undo it (Codex's --profile, -m, or -c for the model, provider or catalog; the model
 * flag of Qwen Code, Kimi and Poolside; Qwen Code's --auth-type; Kimi's --config and
 * --config-file).
 */
bool launch_check_extra(const launch_tool *tool, char *const *extra, size_t n_extra,
                        corral_error *err);

/*
 * The argument list (after the program) and environment (NAME=VALUE, set on top of the
 * caller's) that run tool against target, with the user's extra arguments (passed by
 * launch_check_extra) last. false with err when memory ran out.
 */
bool launch_build_command(const launch_tool *tool, const launch_target *target,
                          char *const *extra, size_t n_extra, launch_strings *args,
                          launch_strings *env, corral_error *err);

/* Codex's profile file for target (TOML text, caller frees), NULL when out of memory. */
char *launch_codex_profile(const launch_target *target);

/*
 * Codex's model catalog for target's model: a context window of context_window tokens
 * (0: Codex's usual 128000) and image input when vision is true. New reference.
 */
json_t *launch_codex_catalog(const char *model, unsigned context_window, bool vision);

/*
 * Droid's settings with target's model as the session default: the Corral entry (apiKey,
 * baseUrl <server>/v1) replaces any entry with that base URL, the user's other entries and
 * settings stay, and a reasoning effort Droid does not know becomes "none". settings is a
 * JSON object (an empty one for a new file); modified in place. false when out of memory.
 */
bool launch_droid_settings(json_t *settings, const launch_target *target);

/* The oldest Codex that reads a profile file (--profile NAME: NAME.config.toml). */
#define LAUNCH_CODEX_MIN_VERSION "0.134.0"

/*
 * Whether `codex --version` printed (output: "codex-cli 0.140.0") names a version at least
 * LAUNCH_CODEX_MIN_VERSION. false with err saying what is wrong (too old: how to update).
 */
bool launch_codex_version_ok(const char *output, corral_error *err);

/* Where the context window that launch warns about comes from. */
typedef enum launch_context_source {
    LAUNCH_CONTEXT_LOADED,     /* the server runs the model with it now (/api/ps) */
    LAUNCH_CONTEXT_MODELFILE,  /* the model's num_ctx parameter */
    LAUNCH_CONTEXT_SERVER_DEFAULT, /* the server's default: no request from a tool sets one */
} launch_context_source;

/*
 * The context window the model gets when a tool talks to it: the loaded one when it runs
 * (loaded > 0), else its num_ctx parameter (> 0), else server_default; none above the
 * model's trained length (trained > 0).
 */
unsigned launch_context_window(unsigned trained, unsigned loaded, unsigned num_ctx_parameter,
                               unsigned server_default, launch_context_source *source);

#endif

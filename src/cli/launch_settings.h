/*
 * The settings files of the agents that read their server from a JSON file of their own
 * (Cline, Qwen Code, Pi; Droid's is in launch_tools.h), merged into what the user has: the
 * entries `corral launch` manages are set or replaced, everything else stays. Pure: each
 * takes the parsed file (an empty object for a new one), changes it in place and returns
 * false only when memory ran out; cmd_launch.c reads and writes the files.
 */
#ifndef CORRAL_CLI_LAUNCH_SETTINGS_H
#define CORRAL_CLI_LAUNCH_SETTINGS_H

#include <jansson.h>
#include <stdbool.h>

#include "cli/launch_tools.h"

/* Cline's provider id for an ollama-compatible server, which Corral is. */
#define LAUNCH_CLINE_PROVIDER "ollama"

/* The Pi provider launch manages in models.json, and the mark on the model entries it wrote. */
#define LAUNCH_PI_PROVIDER "corral"
#define LAUNCH_PI_MARK "_launch"

/*
 * Cline's ~/.cline/data/settings/providers.json: the "ollama" provider on the server's /v1
 * with the model, the key (or none), a manual token source, and made the last used one.
 * updated_at (RFC 3339) is stamped on the provider when its model, address or token source
 * changes, or when it has no stamp.
 */
bool launch_cline_providers(json_t *config, const launch_target *target, const char *updated_at);

/* Cline's older ~/.cline/data/globalState.json: the ollama provider at the server's root
 * address, with the model, in both act and plan mode; the welcome view marked done. */
bool launch_cline_state(json_t *state, const launch_target *target);

/*
 * Qwen Code's ~/.qwen/settings.json: an OpenAI-compatible provider entry for the model on the
 * server's /v1 first in modelProviders.openai (an older entry of launch's for that address
 * dropped, the user's kept after it), its key in LAUNCH_QWEN_KEY_VARIABLE, OpenAI auth on
 * that address selected and the model made the default.
 */
bool launch_qwen_settings(json_t *settings, const launch_target *target);

/*
 * Pi's ~/.pi/agent/models.json: the "corral" provider on the server's /v1 (chat completions)
 * with the model's entry (images, reasoning and context window as the model has them),
 * marked as launch's; launch's entries for other models go, the user's own stay.
 */
bool launch_pi_models(json_t *models, const launch_target *target);

/* Pi's ~/.pi/agent/settings.json: the corral provider and the model as the defaults. */
bool launch_pi_settings(json_t *settings, const launch_target *target);

#endif

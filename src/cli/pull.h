/*
 * Pulling and pushing a model through the server (/api/pull, /api/push) with the progress
 * display: shared by `corral pull`, `corral push` and `corral run`, which pulls a model it
 * does not have.
 */
#ifndef CORRAL_CLI_PULL_H
#define CORRAL_CLI_PULL_H

#include <stdbool.h>

#include "cli/client.h"

/* Stream path ("/api/pull" or "/api/push") for model, showing progress on stderr. */
bool pull_transfer(corral_client *client, const char *path, const char *model, bool insecure,
                   corral_error *err);

#endif

/*
 * A pull running on its own thread whose progress another thread collects in batches: what
 * /api/create uses when its base model ('from') is not in the store yet, so the pull's
 * progress streams to the client as ollama's NDJSON statuses while the download goes on.
 */
#ifndef CORRAL_SERVER_BACKGROUND_PULL_H
#define CORRAL_SERVER_BACKGROUND_PULL_H

#include <jansson.h>
#include <stdbool.h>

#include "registry/registry.h"

typedef struct background_pull background_pull;

/* A registry progress report as the NDJSON object ollama streams (NULL when out of memory). */
json_t *registry_progress_json(const corral_registry_progress *p);

/* Start pulling name into store (the demo model's name imports the bundled copy). opts'
 * progress callback is replaced by the collector's. NULL with err set if no thread started. */
background_pull *background_pull_start(corral_store *store, const char *name,
                                       const corral_registry_options *opts, corral_error *err);

/* Wait until there is progress to report or the pull ended, then move the progress objects
 * into the array out. Returns true once the pull has ended and everything was moved. */
bool background_pull_collect(background_pull *bp, json_t *out);

/* After background_pull_collect returned true: how the pull ended (err set unless OK). */
corral_registry_status background_pull_result(const background_pull *bp, corral_error *err);

/* Cancel a pull still running (its partial files stay for the next pull) and free it. */
void background_pull_free(background_pull *bp);

#endif

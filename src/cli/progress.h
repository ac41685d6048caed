/*
 * Progress display on stderr for pull, push, create and model loading: one spinner line per
 * status and one bar per layer (percentage, size, rate, ETA). On a terminal the lines are
 * redrawn in place (cursor hidden, synchronized updates) and the spinner turns every 100 ms
 * on its own thread; otherwise each status and each finished layer is printed once.
 */
#ifndef CORRAL_CLI_PROGRESS_H
#define CORRAL_CLI_PROGRESS_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

typedef struct progress progress;

/* A display on out (a terminal or not). NULL only out of memory. */
progress *progress_create(FILE *out);

/*
 * Report a status. Without a digest it is a spinner line that ends the previous one; with a
 * digest it updates that layer's bar (created on first sight, shown once completed > 0).
 */
void progress_update(progress *p, const char *status, const char *digest, uint64_t total,
                     uint64_t completed);

/* progress_update from an NDJSON object {status, digest, total, completed}. */
void progress_update_json(progress *p, const json_t *line);

/* Stop the spinner; keep the lines on screen (keep) or erase them. Accepts NULL. */
void progress_free(progress *p, bool keep);

#endif

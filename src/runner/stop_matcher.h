/*
 * Stop strings over streamed text: generated text is pushed piece by piece; whatever cannot
 * be the start of a stop string is released for the client, the rest is held back until it
 * either completes a stop string (generation ends, the stop string and everything after it
 * are dropped, as ollama does) or turns out not to.
 */
#ifndef CORRAL_RUNNER_STOP_MATCHER_H
#define CORRAL_RUNNER_STOP_MATCHER_H

#include <stdbool.h>
#include <stddef.h>

#include "corral/error.h"

#define STOP_MAX_STRINGS 16
#define STOP_MAX_BYTES 256 /* per stop string */

typedef struct stop_matcher {
    char *stops[STOP_MAX_STRINGS];
    size_t stop_len[STOP_MAX_STRINGS];
    size_t n_stops;
    size_t max_len;
    char *held; /* text not yet released; at most max_len - 1 bytes between pushes */
    size_t n_held;
    char *out; /* released text of the last push */
    size_t n_out;
    bool stopped;
    int matched; /* the index of the stop string that ended the text; -1: none */
} stop_matcher;

/* Empty strings are ignored. Fails on too many or too long strings. */
bool stop_matcher_init(stop_matcher *m, const char *const *stops, size_t n_stops,
                       corral_error *err);
void stop_matcher_free(stop_matcher *m);

/*
 * Add text; returns the bytes that are now safe to send (valid until the next call) in
 * *len. After a stop string is seen, m->stopped is set and later pushes release nothing.
 * Held-back bytes never split a UTF-8 character that was whole in the input.
 */
const char *stop_matcher_push(stop_matcher *m, const char *text, size_t n, size_t *len);

/* End of generation without a stop: release everything held. */
const char *stop_matcher_flush(stop_matcher *m, size_t *len);

#endif

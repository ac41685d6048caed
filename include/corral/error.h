/*
 * corral_error: the one way every Corral layer reports a failure to its caller.
 * A function that can fail on bad input returns false/NULL/an error code and fills the
 * caller's corral_error with a message a user can read. Callers may pass NULL to ignore it.
 */
#ifndef CORRAL_ERROR_H
#define CORRAL_ERROR_H

#include <stddef.h>

#define CORRAL_ERROR_MAX 512

typedef struct corral_error {
    char message[CORRAL_ERROR_MAX];
} corral_error;

/* Replace err's message (printf-style). A NULL err is ignored. */
void corral_error_set(corral_error *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Prepend context to err's existing message: "context: old message". */
void corral_error_prefix(corral_error *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#endif

/*
 * A corral_cancel for tests that counts the checks an encoding makes and asks it to stop at
 * a chosen one: the engine's and runner's cancellation tests count with it.
 */
#ifndef CORRAL_TESTS_COUNTING_CANCEL_H
#define CORRAL_TESTS_COUNTING_CANCEL_H

#include <stdbool.h>

/* checks made so far; stop at the stop_at-th (0: never) */
typedef struct counting_cancel {
    int checks, stop_at;
} counting_cancel;

/* corral_cancel.requested for a counting_cancel as its user pointer */
static inline bool count_check(void *user)
{
    counting_cancel *c = user;
    c->checks++;
    return c->stop_at > 0 && c->checks >= c->stop_at;
}

#endif

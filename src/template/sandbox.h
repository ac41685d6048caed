/*
 * tsandbox: the budget one render runs under (steps, depth, bytes) and the error it stops
 * with. Both engines call tsandbox_step on every node they evaluate and bracket recursion
 * with tsandbox_enter/leave; the first failure wins and later ones are ignored, so the
 * message the user sees is the cause, not a consequence.
 */
#ifndef CORRAL_TEMPLATE_SANDBOX_H
#define CORRAL_TEMPLATE_SANDBOX_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

#include "corral/error.h"
#include "template/template.h"

typedef struct tsandbox {
    const char *src; /* template source, to turn byte offsets into line and column */
    size_t src_len;
    size_t steps_left;
    unsigned depth;
    unsigned max_depth;
    size_t max_bytes;
    corral_error *err;
    bool failed;
    bool raised; /* the failure is the template's own raise_exception */
} tsandbox;

void tsandbox_init(tsandbox *s, const char *src, size_t src_len,
                   const corral_template_limits *limits, corral_error *err);
bool tsandbox_step(tsandbox *s, size_t pos);
bool tsandbox_enter(tsandbox *s, size_t pos);
void tsandbox_leave(tsandbox *s);
/* Record an error at byte offset pos of the source; always returns false. */
bool tsandbox_fail(tsandbox *s, size_t pos, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* An error the template asked for (raise_exception): the message is kept verbatim. */
bool tsandbox_raise(tsandbox *s, const char *message);
/* Line and column (1-based) of byte offset pos in src. */
void tsandbox_where(const char *src, size_t src_len, size_t pos, unsigned *line, unsigned *col);
/* Set err to "template line L, column C: <message>" for byte offset pos of src (the parsers'
 * and the sandbox's one error format). */
void tsandbox_vset_error(corral_error *err, const char *src, size_t src_len, size_t pos,
                         const char *fmt, va_list ap) __attribute__((format(printf, 5, 0)));

#endif

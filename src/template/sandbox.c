/* Render budget and error reporting shared by the Go and Jinja engines; see sandbox.h. */
#include "template/sandbox.h"

#include <stdarg.h>
#include <stdio.h>

corral_template_limits corral_template_default_limits(void)
{
    corral_template_limits limits = {
        .max_output_bytes = 8u << 20,
        .max_steps = 2u * 1000 * 1000,
        .max_depth = 64,
    };
    return limits;
}

void tsandbox_init(tsandbox *s, const char *src, size_t src_len,
                   const corral_template_limits *limits, corral_error *err)
{
    corral_template_limits defaults = corral_template_default_limits();
    if (!limits)
        limits = &defaults;
    s->src = src;
    s->src_len = src_len;
    s->steps_left = limits->max_steps;
    s->depth = 0;
    s->max_depth = limits->max_depth;
    s->max_bytes = limits->max_output_bytes;
    s->err = err;
    s->failed = false;
    s->raised = false;
}

void tsandbox_where(const char *src, size_t src_len, size_t pos, unsigned *line, unsigned *col)
{
    unsigned l = 1, c = 1;
    for (size_t i = 0; i < pos && i < src_len; i++) {
        if (src[i] == '\n') {
            l++;
            c = 1;
        } else {
            c++;
        }
    }
    *line = l;
    *col = c;
}

void tsandbox_vset_error(corral_error *err, const char *src, size_t src_len, size_t pos,
                         const char *fmt, va_list ap)
{
    char message[CORRAL_ERROR_MAX];
    vsnprintf(message, sizeof message, fmt, ap);
    unsigned line, col;
    tsandbox_where(src, src_len, pos, &line, &col);
    corral_error_set(err, "template line %u, column %u: %s", line, col, message);
}

bool tsandbox_fail(tsandbox *s, size_t pos, const char *fmt, ...)
{
    if (s->failed)
        return false;
    s->failed = true;
    va_list ap;
    va_start(ap, fmt);
    tsandbox_vset_error(s->err, s->src, s->src_len, pos, fmt, ap);
    va_end(ap);
    return false;
}

bool tsandbox_raise(tsandbox *s, const char *message)
{
    if (s->failed)
        return false;
    s->failed = true;
    s->raised = true;
    corral_error_set(s->err, "%s", message);
    return false;
}

bool tsandbox_step(tsandbox *s, size_t pos)
{
    if (s->failed)
        return false;
    if (s->steps_left == 0)
        return tsandbox_fail(s, pos, "evaluation step limit reached (template loops too long)");
    s->steps_left--;
    return true;
}

bool tsandbox_enter(tsandbox *s, size_t pos)
{
    if (s->failed)
        return false;
    if (s->depth >= s->max_depth)
        return tsandbox_fail(s, pos, "nesting deeper than %u levels", s->max_depth);
    s->depth++;
    return true;
}

void tsandbox_leave(tsandbox *s)
{
    if (s->depth)
        s->depth--;
}

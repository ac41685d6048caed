/* Formatting of corral_error messages; see include/corral/error.h. */
#include "corral/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void corral_error_set(corral_error *err, const char *fmt, ...)
{
    if (!err)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
}

void corral_error_prefix(corral_error *err, const char *fmt, ...)
{
    if (!err)
        return;
    char old[CORRAL_ERROR_MAX];
    memcpy(old, err->message, sizeof old);
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
    /* Messages longer than the buffer are cut; the start says the most. */
    size_t used = n < 0 ? 0 : (size_t)n;
    if (used + 2 < sizeof err->message) {
        memcpy(err->message + used, ": ", 2);
        used += 2;
        size_t room = sizeof err->message - used - 1;
        size_t len = strnlen(old, room);
        memcpy(err->message + used, old, len);
        err->message[used + len] = '\0';
    }
}

/*
 * Overflow-checked size arithmetic. Every size computed from outside input (file headers,
 * request bodies, tensor shapes) goes through these so a wrap-around becomes an error, not
 * a short allocation.
 */
#ifndef CORRAL_UTIL_CHECKED_H
#define CORRAL_UTIL_CHECKED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

static inline bool checked_mul_size(size_t a, size_t b, size_t *out)
{
    return !__builtin_mul_overflow(a, b, out);
}

static inline bool checked_add_size(size_t a, size_t b, size_t *out)
{
    return !__builtin_add_overflow(a, b, out);
}

/* a + b for times and durations in ns: a sum past either end sticks there (INT64_MAX is
 * "never" for an expiry), so a huge duration from a client cannot wrap into the past. */
static inline int64_t saturating_add_i64(int64_t a, int64_t b)
{
    int64_t sum;
    if (!__builtin_add_overflow(a, b, &sum))
        return sum;
    return b > 0 ? INT64_MAX : INT64_MIN;
}

/* Round x up to a multiple of align (a power of two); false on overflow. */
static inline bool checked_align_up(size_t x, size_t align, size_t *out)
{
    size_t padded;
    if (__builtin_add_overflow(x, align - 1, &padded))
        return false;
    *out = padded & ~(align - 1);
    return true;
}

#endif

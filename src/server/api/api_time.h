/*
 * Moments in the native API's answers (/api/tags' and /api/show's modified_at, /api/ps'
 * expires_at) as ollama's Go server writes a time.Time in local time, so clients that parse
 * or compare them see one format.
 */
#ifndef CORRAL_SERVER_API_TIME_H
#define CORRAL_SERVER_API_TIME_H

#include <jansson.h>
#include <time.h>

/* RFC 3339 in the local zone with the nanoseconds, trailing zeros dropped (none when zero),
 * and the offset, "Z" when it is zero: Go's time.RFC3339Nano. Years past 9999 are written as
 * 9999-12-31T23:59:59 local, RFC 3339's last moment. NULL when out of memory. */
json_t *api_local_time(struct timespec t);

#endif

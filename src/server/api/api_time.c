/* Local times in Go's RFC3339Nano (api_time.h). */
#include "server/api/api_time.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

json_t *api_local_time(struct timespec t)
{
    struct tm tm;
    time_t seconds = t.tv_sec;
    long nanoseconds = t.tv_nsec;
    if (!localtime_r(&seconds, &tm) || tm.tm_year > 9999 - 1900) {
        /* RFC 3339 has four-digit years; a later moment (a keep-alive of forever) is the last */
        tm = (struct tm){.tm_year = 9999 - 1900, .tm_mon = 11, .tm_mday = 31, .tm_hour = 23,
                         .tm_min = 59, .tm_sec = 59, .tm_isdst = -1};
        seconds = mktime(&tm);
        localtime_r(&seconds, &tm);
        nanoseconds = 0;
    }
    char date[32], fraction[16] = "", zone[16] = "Z";
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%S", &tm);
    if (nanoseconds > 0 && nanoseconds < 1000000000) {
        snprintf(fraction, sizeof fraction, ".%09ld", nanoseconds);
        size_t n = strlen(fraction);
        while (n > 2 && fraction[n - 1] == '0') /* Go drops the trailing zeros */
            fraction[--n] = '\0';
    }
    if (tm.tm_gmtoff != 0) {
        long minutes = labs(tm.tm_gmtoff) / 60;
        snprintf(zone, sizeof zone, "%c%02ld:%02ld", tm.tm_gmtoff < 0 ? '-' : '+',
                 minutes / 60 % 100, minutes % 60);
    }
    char out[sizeof date + sizeof fraction + sizeof zone];
    snprintf(out, sizeof out, "%s%s%s", date, fraction, zone);
    return json_string(out);
}

/* Number and time formatting for CLI output; see format.h. */
#include "format.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

void format_bytes(uint64_t bytes, char *out, size_t size)
{
    static const struct { uint64_t scale; const char *unit; } units[] = {
        {1000000000000ull, "TB"}, {1000000000ull, "GB"}, {1000000ull, "MB"}, {1000ull, "KB"},
    };
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        if (bytes < units[i].scale)
            continue;
        double value = (double)bytes / (double)units[i].scale;
        if (value >= 10 || value == trunc(value))
            snprintf(out, size, "%d %s", (int)value, units[i].unit);
        else
            snprintf(out, size, "%.1f %s", value, units[i].unit);
        return;
    }
    snprintf(out, size, "%llu B", (unsigned long long)bytes);
}

/* ollama's humanDuration */
static void format_span(double seconds, char *out, size_t size)
{
    long s = (long)seconds;
    if (s < 1) {
        snprintf(out, size, "Less than a second");
        return;
    }
    if (s == 1) {
        snprintf(out, size, "1 second");
        return;
    }
    if (s < 60) {
        snprintf(out, size, "%ld seconds", s);
        return;
    }
    long minutes = s / 60;
    if (minutes == 1) {
        snprintf(out, size, "About a minute");
        return;
    }
    if (minutes < 60) {
        snprintf(out, size, "%ld minutes", minutes);
        return;
    }
    long hours = lround(seconds / 3600);
    if (hours == 1)
        snprintf(out, size, "About an hour");
    else if (hours < 48)
        snprintf(out, size, "%ld hours", hours);
    else if (hours < 24 * 7 * 2)
        snprintf(out, size, "%ld days", hours / 24);
    else if (hours < 24 * 30 * 2)
        snprintf(out, size, "%ld weeks", hours / 24 / 7);
    else if (hours < 24 * 365 * 2)
        snprintf(out, size, "%ld months", hours / 24 / 30);
    else
        snprintf(out, size, "%ld years", (long)(seconds / 3600 / 24 / 365));
}

void format_relative_time(time_t when, time_t now, char *out, size_t size)
{
    double delta = difftime(now, when);
    if (delta < -20.0 * 365 * 24 * 3600) {
        snprintf(out, size, "Forever");
        return;
    }
    char span[64];
    format_span(fabs(delta), span, sizeof span);
    snprintf(out, size, "%s %s", span, delta < 0 ? "from now" : "ago");
}

/* "%.9f" with trailing zeros (and a bare point) removed */
static void trimmed_number(double v, const char *unit, char *out, size_t size)
{
    char num[64];
    snprintf(num, sizeof num, "%.9f", v);
    size_t n = strlen(num);
    while (n && num[n - 1] == '0')
        num[--n] = '\0';
    if (n && num[n - 1] == '.')
        num[--n] = '\0';
    snprintf(out, size, "%s%s", num, unit);
}

void format_duration_ns(int64_t ns, char *out, size_t size)
{
    if (ns == 0) {
        snprintf(out, size, "0s");
        return;
    }
    if (ns < 1000) {
        snprintf(out, size, "%lldns", (long long)ns);
        return;
    }
    if (ns < 1000000) {
        trimmed_number((double)ns / 1e3, "µs", out, size);
        return;
    }
    if (ns < 1000000000) {
        trimmed_number((double)ns / 1e6, "ms", out, size);
        return;
    }
    int64_t hours = ns / 3600000000000ll;
    int64_t minutes = ns / 60000000000ll % 60;
    double seconds = (double)(ns % 60000000000ll) / 1e9;
    char sec[64];
    trimmed_number(seconds, "s", sec, sizeof sec);
    if (hours)
        snprintf(out, size, "%lldh%lldm%s", (long long)hours, (long long)minutes, sec);
    else if (minutes)
        snprintf(out, size, "%lldm%s", (long long)minutes, sec);
    else
        snprintf(out, size, "%s", sec);
}

void format_eta(double seconds, char *out, size_t size)
{
    if (!(seconds >= 0) || seconds >= 99 * 3600) {
        snprintf(out, size, "99h+");
        return;
    }
    long s = lround(seconds);
    if (s < 60)
        snprintf(out, size, "%lds", s);
    else if (s < 3600)
        snprintf(out, size, "%ldm%lds", s / 60, s % 60);
    else
        snprintf(out, size, "%ldh%ldm", s / 3600, s / 60 % 60);
}

bool format_parse_rfc3339(const char *text, time_t *out)
{
    struct tm tm = {0};
    int used = 0;
    if (sscanf(text, "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
               &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &used) != 6 || used == 0)
        return false;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    const char *p = text + used;
    if (*p == '.')
        for (p++; *p >= '0' && *p <= '9'; p++)
            ;
    long offset_s = 0;
    if (*p == '+' || *p == '-') {
        int hh, mm;
        if (sscanf(p + 1, "%2d:%2d", &hh, &mm) != 2)
            return false;
        offset_s = (hh * 3600L + mm * 60L) * (*p == '-' ? -1 : 1);
    } else if (*p != 'Z' && *p != 'z') {
        return false;
    }
    *out = timegm(&tm) - offset_s;
    return true;
}

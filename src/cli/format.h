/*
 * How the CLI prints numbers and times the way ollama's does: decimal byte sizes ("4.7 GB"),
 * relative times ("2 days ago", "4 minutes from now", "Forever"), Go-style durations
 * ("1.234s") and RFC 3339 timestamps from the server.
 */
#ifndef CORRAL_CLI_FORMAT_H
#define CORRAL_CLI_FORMAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* ollama's format.HumanBytes: "999 B", "1.2 KB", "18 MB", "4.7 GB" (1 KB = 1000 B). */
void format_bytes(uint64_t bytes, char *out, size_t size);

/* ollama's format.HumanTime relative to now: "2 days ago", "4 minutes from now", "Forever". */
void format_relative_time(time_t when, time_t now, char *out, size_t size);

/* A Go time.Duration's String() for ns: "1.5s", "230.1ms", "1m2.5s". */
void format_duration_ns(int64_t ns, char *out, size_t size);

/* A compact ETA for a progress bar: "45s", "1m20s", "2h3m", "99h+". */
void format_eta(double seconds, char *out, size_t size);

/* Parse an RFC 3339 time ("2026-01-02T03:04:05.123Z", "…+01:00"); false if malformed. */
bool format_parse_rfc3339(const char *text, time_t *out);

#endif

/*
 * The server's log on stderr: one line per event, with a level (debug lines only when debug
 * logging is on), a message and named fields, written as logfmt-style text
 * (time=... level=INFO msg=request method=POST ...) or as one JSON object per line. Lines from
 * different threads never interleave. Until log_configure runs: text, no debug.
 */
#ifndef CORRAL_UTIL_LOG_H
#define CORRAL_UTIL_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum log_level { LOG_DEBUG, LOG_INFO, LOG_WARN, LOG_ERROR } log_level;
typedef enum log_format { LOG_FORMAT_TEXT, LOG_FORMAT_JSON } log_format;

/* "text" or "json" (any case); false for anything else. */
bool log_parse_format(const char *text, log_format *format);

/* A level by the name its lines carry ("DEBUG", "INFO", "WARN", "ERROR"); false for
 * anything else. */
bool log_parse_level(const char *name, log_level *level);

void log_configure(log_format format, bool debug);
bool log_debug_enabled(void);

/* A named value of a line. Strings may hold any bytes: they are escaped as the format needs. */
typedef struct log_field {
    const char *key;
    enum { LOG_STRING, LOG_INT, LOG_NUMBER } type;
    union {
        const char *string;
        int64_t integer;
        double number;
    } value;
} log_field;

#define LOG_STR(k, v) ((log_field){.key = (k), .type = LOG_STRING, .value.string = (v)})
#define LOG_INT(k, v) ((log_field){.key = (k), .type = LOG_INT, .value.integer = (v)})
#define LOG_NUM(k, v) ((log_field){.key = (k), .type = LOG_NUMBER, .value.number = (v)})

/* One line: msg and fields (n may be 0). Debug lines are dropped unless debug is on. */
void log_write(log_level level, const char *msg, const log_field *fields, size_t n);

/* One line whose message is formatted, without fields. */
void log_printf(log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif

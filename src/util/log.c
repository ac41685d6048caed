/*
 * The server's log (log.h). A line is built in memory, then written to stderr with one call
 * under stderr's lock, so concurrent lines stay whole. Values come from outside (paths, model
 * names): text format quotes and escapes them, JSON escapes them and replaces bytes that are
 * not UTF-8 with U+FFFD, so every line parses.
 */
#include "util/log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

static atomic_int configured_format = LOG_FORMAT_TEXT;
static atomic_bool debug_on;

bool log_parse_format(const char *text, log_format *format)
{
    if (strcasecmp(text, "text") == 0)
        *format = LOG_FORMAT_TEXT;
    else if (strcasecmp(text, "json") == 0)
        *format = LOG_FORMAT_JSON;
    else
        return false;
    return true;
}

void log_configure(log_format format, bool debug)
{
    atomic_store(&configured_format, (int)format);
    atomic_store(&debug_on, debug);
}

bool log_debug_enabled(void)
{
    return atomic_load(&debug_on);
}

/* The length of the well-formed UTF-8 sequence at s (n bytes left), 0 if there is none. */
static size_t utf8_length(const unsigned char *s, size_t n)
{
    size_t len = s[0] < 0x80 ? 1 : s[0] >= 0xc2 && s[0] <= 0xdf ? 2
               : s[0] >= 0xe0 && s[0] <= 0xef ? 3 : s[0] >= 0xf0 && s[0] <= 0xf4 ? 4 : 0;
    if (len == 0 || len > n)
        return 0;
    for (size_t i = 1; i < len; i++)
        if ((s[i] & 0xc0) != 0x80)
            return 0;
    if ((s[0] == 0xe0 && s[1] < 0xa0) || (s[0] == 0xed && s[1] > 0x9f) || /* overlong, surrogate */
        (s[0] == 0xf0 && s[1] < 0x90) || (s[0] == 0xf4 && s[1] > 0x8f))   /* overlong, > U+10FFFF */
        return 0;
    return len;
}

static void json_string(FILE *out, const char *text)
{
    const unsigned char *s = (const unsigned char *)text;
    size_t n = strlen(text);
    fputc('"', out);
    for (size_t i = 0; i < n;) {
        unsigned char c = s[i];
        size_t len = utf8_length(s + i, n - i);
        if (c == '"' || c == '\\')
            fprintf(out, "\\%c", c);
        else if (c == '\n')
            fputs("\\n", out);
        else if (c < 0x20 || c == 0x7f)
            fprintf(out, "\\u%04x", c);
        else if (len == 0)
            fputs("\\ufffd", out);
        else
            fwrite(s + i, 1, len, out);
        i += len ? len : 1;
    }
    fputc('"', out);
}

/* logfmt: a bare value when it is plain printable ASCII without quotes, spaces or '='. */
static void text_value(FILE *out, const char *text)
{
    const unsigned char *s = (const unsigned char *)text;
    bool bare = *s != '\0';
    for (const unsigned char *p = s; *p && bare; p++)
        bare = *p > 0x20 && *p < 0x7f && *p != '"' && *p != '=' && *p != '\\';
    if (bare) {
        fputs(text, out);
        return;
    }
    size_t n = strlen(text);
    fputc('"', out);
    for (size_t i = 0; i < n;) {
        unsigned char c = s[i];
        size_t len = utf8_length(s + i, n - i);
        if (c == '"' || c == '\\')
            fprintf(out, "\\%c", c);
        else if (c == '\n')
            fputs("\\n", out);
        else if (c < 0x20 || c == 0x7f || len == 0)
            fprintf(out, "\\x%02x", c);
        else
            fwrite(s + i, 1, len, out);
        i += len ? len : 1;
    }
    fputc('"', out);
}

static const char *const level_names[] = {"DEBUG", "INFO", "WARN", "ERROR"};

static const char *level_name(log_level level)
{
    return level_names[level];
}

bool log_parse_level(const char *name, log_level *level)
{
    for (size_t i = 0; i < sizeof level_names / sizeof level_names[0]; i++)
        if (strcmp(name, level_names[i]) == 0) {
            *level = (log_level)i;
            return true;
        }
    return false;
}

static void write_field(FILE *out, bool json, const log_field *f)
{
    if (json) {
        fputc(',', out);
        json_string(out, f->key);
        fputc(':', out);
    } else {
        fprintf(out, " %s=", f->key);
    }
    switch (f->type) {
    case LOG_STRING:
        if (json)
            json_string(out, f->value.string ? f->value.string : "");
        else
            text_value(out, f->value.string ? f->value.string : "");
        break;
    case LOG_INT:
        fprintf(out, "%lld", (long long)f->value.integer);
        break;
    case LOG_NUMBER:
        fprintf(out, "%.6g", f->value.number);
        break;
    }
}

void log_write(log_level level, const char *msg, const log_field *fields, size_t n)
{
    if (level == LOG_DEBUG && !log_debug_enabled())
        return;
    bool json = atomic_load(&configured_format) == LOG_FORMAT_JSON;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char date[32];
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%S", &tm);
    char *line = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&line, &len);
    if (!out) { /* out of memory: the message alone, unformatted, is better than nothing */
        fprintf(stderr, "%s %s\n", level_name(level), msg);
        return;
    }
    if (json) {
        fprintf(out, "{\"time\":\"%s.%03ldZ\",\"level\":\"%s\",\"msg\":", date,
                ts.tv_nsec / 1000000, level_name(level));
        json_string(out, msg);
    } else {
        fprintf(out, "time=%s.%03ldZ level=%s msg=", date, ts.tv_nsec / 1000000,
                level_name(level));
        text_value(out, msg);
    }
    for (size_t i = 0; i < n; i++)
        write_field(out, json, &fields[i]);
    fputs(json ? "}\n" : "\n", out);
    if (fclose(out) == 0) {
        flockfile(stderr);
        fwrite(line, 1, len, stderr);
        fflush(stderr);
        funlockfile(stderr);
    }
    free(line);
}

void log_printf(log_level level, const char *fmt, ...)
{
    if (level == LOG_DEBUG && !log_debug_enabled())
        return;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    log_write(level, msg, NULL, 0);
}

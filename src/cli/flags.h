/*
 * Flag values read as ollama's command line (Go's pflag) reads them, so that a script written
 * for ollama runs unchanged: a boolean flag is `--name` or `--name=VALUE` with VALUE one of
 * Go's boolean spellings (1 t T TRUE true True, 0 f F FALSE false False), and --think takes
 * the levels ollama's `run` takes.
 */
#ifndef CORRAL_CLI_FLAGS_H
#define CORRAL_CLI_FLAGS_H

#include <stdbool.h>

typedef enum flag_match {
    FLAG_OTHER,     /* arg is not this flag */
    FLAG_SET,       /* arg is this flag; *value holds what it says */
    FLAG_BAD_VALUE, /* arg is this flag with a value that is no boolean (said on stderr) */
} flag_match;

/* Whether text is one of Go's boolean spellings; *value what it means. */
bool flag_parse_bool(const char *text, bool *value);

/* arg against the boolean flag name ("--verbose"): bare, or with "=VALUE". */
flag_match flag_bool(const char *arg, const char *name, bool *value);

/* --think's value as the request's think field says it ("true", "false", "low", "medium",
 * "high", "max"; empty is "true"), or NULL for a value ollama refuses. */
const char *flag_think_level(const char *text);

#endif

/*
 * Flag values read as ollama's command line (Go's pflag) reads them, so that a script written
 * for ollama runs unchanged: a boolean flag is `--name` or `--name=VALUE` with VALUE one of
 * Go's boolean spellings (1 t T TRUE true True, 0 f F FALSE false False), a flag with a value
 * is `--name VALUE` or `--name=VALUE` (and `-s VALUE`, `-s=VALUE` or `-sVALUE` for its one-letter
 * form), and --think takes the levels ollama's `run` takes.
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

/*
 * argv[*i] against a flag that takes a value, name ("--file") and short_name ('f', or 0 for
 * none). On FLAG_SET *value points into argv, and *i has moved past a value that was the next
 * word (taken even when it starts with a dash, as "--keepalive -1"). FLAG_BAD_VALUE when no
 * word follows (said on stderr).
 */
flag_match flag_value(int argc, char **argv, int *i, const char *name, char short_name,
                      const char **value);

/* --think's value as the request's think field says it ("true", "false", "low", "medium",
 * "high", "max"; empty is "true"), or NULL for a value ollama refuses. */
const char *flag_think_level(const char *text);

#endif

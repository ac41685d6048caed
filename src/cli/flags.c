/*
 * Flag values (booleans, flags with a value, --think) read as ollama reads them (see flags.h).
 */
#include "flags.h"

#include <stdio.h>
#include <string.h>

bool flag_parse_bool(const char *text, bool *value)
{
    static const char *const yes[] = {"1", "t", "T", "TRUE", "true", "True"};
    static const char *const no[] = {"0", "f", "F", "FALSE", "false", "False"};
    for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++) {
        if (strcmp(text, yes[i]) == 0) {
            *value = true;
            return true;
        }
        if (strcmp(text, no[i]) == 0) {
            *value = false;
            return true;
        }
    }
    return false;
}

flag_match flag_bool(const char *arg, const char *name, bool *value)
{
    size_t n = strlen(name);
    if (strncmp(arg, name, n) != 0 || (arg[n] != '\0' && arg[n] != '='))
        return FLAG_OTHER;
    if (arg[n] == '\0') {
        *value = true;
        return FLAG_SET;
    }
    if (!flag_parse_bool(arg + n + 1, value)) {
        fprintf(stderr, "Error: invalid value \"%s\" for %s: use true or false\n", arg + n + 1,
                name);
        return FLAG_BAD_VALUE;
    }
    return FLAG_SET;
}

flag_match flag_value(int argc, char **argv, int *i, const char *name, char short_name,
                      const char **value)
{
    const char *arg = argv[*i];
    size_t n = strlen(name);
    const char *attached; /* the value in the same word, or NULL: it is the next word */
    if (strncmp(arg, name, n) == 0 && (arg[n] == '\0' || arg[n] == '='))
        attached = arg[n] ? arg + n + 1 : NULL;
    else if (short_name && arg[0] == '-' && arg[1] == short_name)
        attached = arg[2] == '\0' ? NULL : arg + 2 + (arg[2] == '=');
    else
        return FLAG_OTHER;
    if (attached) {
        *value = attached;
        return FLAG_SET;
    }
    if (*i + 1 >= argc) {
        fprintf(stderr, "Error: %s needs a value\n", arg);
        return FLAG_BAD_VALUE;
    }
    *value = argv[++*i];
    return FLAG_SET;
}

const char *flag_think_level(const char *text)
{
    static const char *const levels[] = {"true", "false", "low", "medium", "high", "max"};
    if (!*text)
        return "true";
    for (size_t i = 0; i < sizeof levels / sizeof levels[0]; i++)
        if (strcmp(text, levels[i]) == 0)
            return levels[i];
    return NULL;
}

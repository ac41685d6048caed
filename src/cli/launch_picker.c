/*
 * The model picker of `corral launch` (launch_picker.h): the list it shows and the answers it
 * takes.
 */
#include "launch_picker.h"

#include <ctype.h>
#include <string.h>

#include "cli/launch_tools.h"

/* ollama's recommendations that run locally; its cloud ones have no place on a Corral
 * server. */
static const char *const recommended[] = {"gemma4", "qwen3.5"};
#define N_RECOMMENDED (sizeof recommended / sizeof recommended[0])

static bool listed(const char *const *names, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (launch_same_model(names[i], name))
            return true;
    return false;
}

/* name as the server gave it, a control byte shown as '?' so that none reaches the
 * terminal. */
static void print_name(FILE *out, const char *name)
{
    for (const unsigned char *p = (const unsigned char *)name; *p; p++)
        fputc(*p < 0x20 || *p == 0x7f ? '?' : *p, out);
}

/* One answer line from in, trimmed, into line; false at the end of in. *too_long when the
 * line did not fit (the rest of it read and dropped). */
static bool read_answer(FILE *in, char *line, size_t size, bool *too_long)
{
    *too_long = false;
    if (!fgets(line, (int)size, in))
        return false;
    size_t len = strlen(line);
    if (len == size - 1 && line[len - 1] != '\n') {
        int c;
        while ((c = fgetc(in)) != EOF && c != '\n')
            ;
        *too_long = true;
    }
    while (len > 0 && isspace((unsigned char)line[len - 1]))
        line[--len] = '\0';
    size_t start = 0;
    while (isspace((unsigned char)line[start]))
        start++;
    memmove(line, line + start, len - start + 1);
    return true;
}

/* The number the digits of text make, 0 when it is beyond limit. */
static size_t parse_number(const char *text, size_t limit)
{
    size_t n = 0;
    for (const char *p = text; *p; p++) {
        if (n > limit)
            return 0;
        n = n * 10 + (size_t)(*p - '0');
    }
    return n <= limit ? n : 0;
}

bool launch_pick_model(FILE *in, FILE *out, const char *tool_display_name,
                       const char *const *local, size_t n_local, const char *last_used,
                       char *chosen, size_t chosen_size, corral_error *err)
{
    const char *fallback = NULL;
    fprintf(out, "Models on the server for %s:\n", tool_display_name);
    if (n_local == 0)
        fprintf(out, "  (none yet)\n");
    for (size_t i = 0; i < n_local; i++) {
        bool last = last_used && launch_same_model(local[i], last_used);
        if (last)
            fallback = local[i];
        fprintf(out, "  %2zu. ", i + 1);
        print_name(out, local[i]);
        fprintf(out, "%s\n", last ? "  (last used)" : "");
    }
    /* numbered after the server's models */
    const char *missing[N_RECOMMENDED];
    size_t n_missing = 0;
    for (size_t i = 0; i < N_RECOMMENDED; i++) {
        if (listed(local, n_local, recommended[i]))
            continue;
        if (n_missing == 0)
            fprintf(out, "Recommended, not on the server yet (pulled once chosen):\n");
        missing[n_missing++] = recommended[i];
        fprintf(out, "  %2zu. %s\n", n_local + n_missing, recommended[i]);
    }
    size_t n = n_local + n_missing;
    for (;;) {
        fprintf(out, "Model (number or name%s", fallback ? "; Enter for " : "");
        if (fallback)
            print_name(out, fallback);
        fprintf(out, "): ");
        fflush(out);
        char line[LAUNCH_PICK_MAX_NAME + 2];
        bool too_long;
        if (!read_answer(in, line, sizeof line, &too_long)) {
            corral_error_set(err, "no model chosen");
            return false;
        }
        const char *name = line;
        if (too_long) {
            fprintf(out, "That name is too long (at most %d bytes).\n", LAUNCH_PICK_MAX_NAME);
            continue;
        }
        if (!line[0]) {
            if (!fallback)
                continue;
            name = fallback;
        } else if (line[strspn(line, "0123456789")] == '\0') {
            size_t number = parse_number(line, n);
            if (number == 0) {
                fprintf(out, "No model %s here: choose 1 to %zu, or type a name.\n", line, n);
                continue;
            }
            name = number <= n_local ? local[number - 1] : missing[number - n_local - 1];
        }
        int written = snprintf(chosen, chosen_size, "%s", name);
        if (written < 0 || (size_t)written >= chosen_size) {
            corral_error_set(err, "model name too long: '%s'", name);
            return false;
        }
        return true;
    }
}

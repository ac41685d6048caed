/*
 * `corral list` (alias `ls`) and `corral ps`: the local models (/api/tags) and the loaded
 * ones (/api/ps) as ollama's tables, optionally only names starting with a prefix.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "cli/client.h"
#include "cli/commands.h"
#include "cli/format.h"

#define MAX_COLUMNS 6
#define CELL_BYTES 128
#define COLUMN_GAP 4

typedef struct table {
    size_t n_columns, n_rows, cap_rows;
    char (*cells)[MAX_COLUMNS][CELL_BYTES];
} table;

static bool table_add(table *t, const char *const *row)
{
    if (t->n_rows == t->cap_rows) {
        size_t cap = t->cap_rows ? t->cap_rows * 2 : 16;
        void *grown = realloc(t->cells, cap * sizeof t->cells[0]);
        if (!grown)
            return false;
        t->cells = grown;
        t->cap_rows = cap;
    }
    for (size_t c = 0; c < t->n_columns; c++)
        snprintf(t->cells[t->n_rows][c], CELL_BYTES, "%s", row[c] ? row[c] : "");
    t->n_rows++;
    return true;
}

static size_t display_width(const char *s)
{
    size_t cols = 0;
    for (; *s; s++)
        cols += ((unsigned char)*s & 0xC0) != 0x80;
    return cols;
}

static void table_print(const table *t)
{
    size_t width[MAX_COLUMNS] = {0};
    for (size_t r = 0; r < t->n_rows; r++)
        for (size_t c = 0; c < t->n_columns; c++) {
            size_t w = display_width(t->cells[r][c]);
            width[c] = w > width[c] ? w : width[c];
        }
    for (size_t r = 0; r < t->n_rows; r++) {
        for (size_t c = 0; c < t->n_columns; c++) {
            const char *cell = t->cells[r][c];
            if (c + 1 == t->n_columns)
                printf("%s\n", cell);
            else
                printf("%s%*s", cell, (int)(width[c] - display_width(cell) + COLUMN_GAP), "");
        }
    }
}

/* 0: parsed; 1: --help shown; 2: usage error */
static int parse_args(const char *command, const char *usage, int argc, char **argv,
                      const char **prefix)
{
    *prefix = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            printf("%s", usage);
            return 1;
        }
        if (argv[i][0] == '-' || *prefix) {
            fprintf(stderr, "Error: corral %s: unexpected argument '%s'\n%s", command, argv[i],
                    usage);
            return 2;
        }
        *prefix = argv[i];
    }
    return 0;
}

static json_t *fetch_models(const char *path, corral_error *err)
{
    corral_client *client = client_connect(err);
    if (!client)
        return NULL;
    json_t *reply = NULL;
    long status = client_call(client, "GET", path, NULL, &reply, err);
    client_close(client);
    if (status != 200 || !json_is_array(json_object_get(reply, "models"))) {
        if (status == 200)
            corral_error_set(err, "the server's %s reply has no models list", path);
        json_decref(reply);
        return NULL;
    }
    return reply;
}

static const char *string_field(const json_t *obj, const char *key, const char *fallback)
{
    const char *v = json_string_value(json_object_get(obj, key));
    return v ? v : fallback;
}

/* Names compare without case, as `ollama list` does: `corral list Llama` finds llama3. */
static bool matches_prefix(const char *name, const char *prefix)
{
    return !prefix || strncasecmp(name, prefix, strlen(prefix)) == 0;
}

static const char *short_id(const json_t *model, char *out)
{
    snprintf(out, 13, "%s", string_field(model, "digest", ""));
    return out;
}

static const char *relative(const json_t *model, const char *key, char *out, size_t size)
{
    time_t when;
    const char *text = json_string_value(json_object_get(model, key));
    if (!text || !format_parse_rfc3339(text, &when))
        snprintf(out, size, "?");
    else
        format_relative_time(when, time(NULL), out, size);
    return out;
}

int cmd_list(int argc, char **argv)
{
    static const char usage[] = "Usage: corral list [PREFIX]\n\n"
                                "List the local models (alias: ls).\n";
    const char *prefix;
    int parsed = parse_args("list", usage, argc, argv, &prefix);
    if (parsed)
        return parsed == 1 ? 0 : 2;
    corral_error err = {0};
    json_t *reply = fetch_models("/api/tags", &err);
    if (!reply) {
        fprintf(stderr, "Error: %s\n", err.message);
        return 1;
    }
    table t = {.n_columns = 4};
    const char *header[] = {"NAME", "ID", "SIZE", "MODIFIED"};
    bool ok = table_add(&t, header);
    size_t i;
    json_t *model;
    json_array_foreach(json_object_get(reply, "models"), i, model) {
        const char *name = string_field(model, "name", "?");
        if (!matches_prefix(name, prefix))
            continue;
        char id[13], size[32], modified[64];
        format_bytes((uint64_t)json_integer_value(json_object_get(model, "size")), size,
                     sizeof size);
        const char *row[] = {name, short_id(model, id), size,
                             relative(model, "modified_at", modified, sizeof modified)};
        ok = ok && table_add(&t, row);
    }
    if (ok)
        table_print(&t);
    else
        fprintf(stderr, "Error: out of memory\n");
    free(t.cells);
    json_decref(reply);
    return ok ? 0 : 1;
}

static void until_text(const json_t *model, char *out, size_t size)
{
    time_t when;
    const char *text = json_string_value(json_object_get(model, "expires_at"));
    if (!text || !format_parse_rfc3339(text, &when)) {
        snprintf(out, size, "?");
        return;
    }
    time_t now = time(NULL);
    if (when < now)
        snprintf(out, size, "Stopping...");
    else
        format_relative_time(when, now, out, size);
}

static void processor_text(const json_t *model, char *out, size_t size)
{
    json_int_t total = json_integer_value(json_object_get(model, "size"));
    json_int_t vram = json_integer_value(json_object_get(model, "size_vram"));
    if (vram <= 0)
        snprintf(out, size, "100%% CPU");
    else if (vram == total)
        snprintf(out, size, "100%% GPU");
    else if (vram > total) /* a server's inconsistent figures: no share to show */
        snprintf(out, size, "Unknown");
    else { /* the CPU share rounded to the nearest percent, as ollama prints it */
        int cpu = (int)lround((double)(total - vram) * 100 / (double)total);
        snprintf(out, size, "%d%%/%d%% CPU/GPU", cpu, 100 - cpu);
    }
}

int cmd_ps(int argc, char **argv)
{
    static const char usage[] = "Usage: corral ps [PREFIX]\n\nList the models in memory.\n";
    const char *prefix;
    int parsed = parse_args("ps", usage, argc, argv, &prefix);
    if (parsed)
        return parsed == 1 ? 0 : 2;
    corral_error err = {0};
    json_t *reply = fetch_models("/api/ps", &err);
    if (!reply) {
        fprintf(stderr, "Error: %s\n", err.message);
        return 1;
    }
    table t = {.n_columns = 6};
    const char *header[] = {"NAME", "ID", "SIZE", "PROCESSOR", "CONTEXT", "UNTIL"};
    bool ok = table_add(&t, header);
    size_t i;
    json_t *model;
    json_array_foreach(json_object_get(reply, "models"), i, model) {
        const char *name = string_field(model, "name", "?");
        if (!matches_prefix(name, prefix))
            continue;
        char id[13], size[32], processor[32], context[32], until[64];
        format_bytes((uint64_t)json_integer_value(json_object_get(model, "size")), size,
                     sizeof size);
        processor_text(model, processor, sizeof processor);
        snprintf(context, sizeof context, "%lld",
                 (long long)json_integer_value(json_object_get(model, "context_length")));
        until_text(model, until, sizeof until);
        const char *row[] = {name, short_id(model, id), size, processor, context, until};
        ok = ok && table_add(&t, row);
    }
    if (ok)
        table_print(&t);
    else
        fprintf(stderr, "Error: out of memory\n");
    free(t.cells);
    json_decref(reply);
    return ok ? 0 : 1;
}

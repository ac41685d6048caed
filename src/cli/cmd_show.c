/*
 * `corral show MODEL` and the shared printing of /api/show replies (show.h): the sections view
 * with two-column aligned rows, or one raw field (--license, --modelfile, --parameters,
 * --template, --system). Long license and system texts are cut to their first lines.
 */
#include "show.h"

#include <stdlib.h>
#include <string.h>

#include "cli/client.h"
#include "cli/commands.h"
#include "cli/flags.h"
#include "server/models/model_info.h"

#define PREVIEW_LINES 2
#define MAX_ROWS 4096

typedef struct row {
    char key[128];
    char value[256];
} row;

static void print_rows(const row *rows, size_t n, FILE *out)
{
    size_t width = 0;
    for (size_t i = 0; i < n; i++)
        width = strlen(rows[i].key) > width ? strlen(rows[i].key) : width;
    for (size_t i = 0; i < n; i++)
        fprintf(out, "    %-*s    %s\n", (int)width, rows[i].key, rows[i].value);
}

static const json_t *info_value(const json_t *model_info, const char *arch, const char *suffix)
{
    char key[160];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    return json_object_get(model_info, key);
}

static void add_row(row *rows, size_t *n, const char *key, const char *value)
{
    snprintf(rows[*n].key, sizeof rows[*n].key, "%s", key);
    snprintf(rows[*n].value, sizeof rows[*n].value, "%s", value);
    (*n)++;
}

/* The integer "<arch>.<suffix>" of info, when it has one, as a row of label. */
static void add_integer_row(row *rows, size_t *n, const json_t *info, const char *arch,
                            const char *suffix, const char *label)
{
    const json_t *v = info_value(info, arch, suffix);
    char number[32];
    snprintf(number, sizeof number, "%lld", (long long)json_integer_value(v));
    if (json_is_integer(v))
        add_row(rows, n, label, number);
}

static void print_model_section(const json_t *reply, FILE *out)
{
    const json_t *info = json_object_get(reply, "model_info");
    const json_t *details = json_object_get(reply, "details");
    const char *arch = json_string_value(json_object_get(info, "general.architecture"));
    if (!arch)
        arch = json_string_value(json_object_get(details, "family"));
    row rows[6];
    size_t n = 0;
    if (arch)
        add_row(rows, &n, "architecture", arch);
    const char *params = json_string_value(json_object_get(details, "parameter_size"));
    if (params && *params)
        add_row(rows, &n, "parameters", params);
    if (arch) {
        add_integer_row(rows, &n, info, arch, "context_length", "context length");
        add_integer_row(rows, &n, info, arch, "embedding_length", "embedding length");
    }
    const char *quant = json_string_value(json_object_get(details, "quantization_level"));
    if (quant && *quant)
        add_row(rows, &n, "quantization", quant);
    const char *requires = json_string_value(json_object_get(reply, "requires"));
    if (requires && *requires)
        add_row(rows, &n, "requires", requires);
    fprintf(out, "  Model\n");
    print_rows(rows, n, out);
    fprintf(out, "\n");
}

/* A model with a vision projector: the projector's architecture, size and widths. */
static void print_projector_section(const json_t *reply, FILE *out)
{
    const json_t *info = json_object_get(reply, "projector_info");
    if (!json_is_object(info))
        return;
    const char *arch = json_string_value(json_object_get(info, "general.architecture"));
    row rows[4];
    size_t n = 0;
    if (arch)
        add_row(rows, &n, "architecture", arch);
    const json_t *count = json_object_get(info, "general.parameter_count");
    if (json_is_integer(count) && json_integer_value(count) >= 0) {
        char params[32];
        model_info_human_number((uint64_t)json_integer_value(count), params, sizeof params);
        add_row(rows, &n, "parameters", params);
    }
    if (arch) {
        add_integer_row(rows, &n, info, arch, "vision.embedding_length", "embedding length");
        add_integer_row(rows, &n, info, arch, "vision.projection_dim", "dimensions");
    }
    fprintf(out, "  Projector\n");
    print_rows(rows, n, out);
    fprintf(out, "\n");
}

/* The first PREVIEW_LINES non-empty lines of text, then "..." if there is more. */
static void print_preview(const char *title, const char *text, FILE *out)
{
    if (!text || !*text)
        return;
    fprintf(out, "  %s\n", title);
    size_t shown = 0;
    const char *p = text;
    while (*p) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        if (len) {
            if (shown == PREVIEW_LINES) {
                fprintf(out, "    ...\n");
                break;
            }
            fprintf(out, "    %.*s\n", (int)len, p);
            shown++;
        }
        p += len + (nl != NULL);
    }
    fprintf(out, "\n");
}

/* The parameters text ("key<spaces>value" lines) as aligned rows. */
static void print_parameters_section(const char *text, FILE *out)
{
    if (!text || !*text)
        return;
    row *rows = calloc(MAX_ROWS, sizeof *rows);
    if (!rows)
        return;
    size_t n = 0;
    for (const char *p = text; *p && n < MAX_ROWS;) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        size_t key_len = strcspn(p, " \t\n");
        if (key_len > len)
            key_len = len;
        const char *value = p + key_len;
        while (value < p + len && (*value == ' ' || *value == '\t'))
            value++;
        if (len) {
            snprintf(rows[n].key, sizeof rows[n].key, "%.*s", (int)key_len, p);
            snprintf(rows[n].value, sizeof rows[n].value, "%.*s", (int)(p + len - value), value);
            n++;
        }
        p += len + (nl != NULL);
    }
    fprintf(out, "  Parameters\n");
    print_rows(rows, n, out);
    fprintf(out, "\n");
    free(rows);
}

static void print_metadata_section(const json_t *reply, FILE *out)
{
    const json_t *info = json_object_get(reply, "model_info");
    if (!json_object_size(info))
        return;
    fprintf(out, "  Metadata\n");
    const char *key;
    const json_t *value;
    json_object_foreach((json_t *)info, key, value) {
        char *text = json_is_string(value) ? NULL : json_dumps(value, JSON_ENCODE_ANY | JSON_COMPACT);
        const char *shown = json_is_string(value) ? json_string_value(value) : text ? text : "?";
        fprintf(out, "    %-44s %.200s%s\n", key, shown, strlen(shown) > 200 ? "..." : "");
        free(text);
    }
    fprintf(out, "\n");
    const json_t *tensors = json_object_get(reply, "tensors");
    if (!json_array_size(tensors))
        return;
    fprintf(out, "  Tensors\n");
    size_t i;
    const json_t *tensor;
    json_array_foreach(tensors, i, tensor) {
        char *shape = json_dumps(json_object_get(tensor, "shape"), JSON_ENCODE_ANY | JSON_COMPACT);
        const char *name = json_string_value(json_object_get(tensor, "name"));
        const char *type = json_string_value(json_object_get(tensor, "type"));
        fprintf(out, "    %-44s %-8s %s\n", name ? name : "?", type ? type : "?",
                shape ? shape : "");
        free(shape);
    }
    fprintf(out, "\n");
}

static void print_info(const json_t *reply, bool verbose, FILE *out)
{
    print_model_section(reply, out);
    const json_t *caps = json_object_get(reply, "capabilities");
    if (json_array_size(caps)) {
        fprintf(out, "  Capabilities\n");
        size_t i;
        const json_t *cap;
        json_array_foreach(caps, i, cap)
            fprintf(out, "    %s\n", json_string_value(cap) ? json_string_value(cap) : "?");
        fprintf(out, "\n");
    }
    print_projector_section(reply, out);
    print_parameters_section(json_string_value(json_object_get(reply, "parameters")), out);
    print_preview("System", json_string_value(json_object_get(reply, "system")), out);
    print_preview("License", json_string_value(json_object_get(reply, "license")), out);
    if (verbose)
        print_metadata_section(reply, out);
}

bool show_has_capability(const json_t *reply, const char *name)
{
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(reply, "capabilities"), i, v)
        if (json_is_string(v) && strcmp(json_string_value(v), name) == 0)
            return true;
    return false;
}

void show_print(const json_t *reply, show_view view, bool verbose, FILE *out)
{
    static const char *const fields[] = {
        [SHOW_LICENSE] = "license", [SHOW_MODELFILE] = "modelfile",
        [SHOW_PARAMETERS] = "parameters", [SHOW_SYSTEM] = "system", [SHOW_TEMPLATE] = "template",
    };
    if (view == SHOW_INFO) {
        print_info(reply, verbose, out);
        return;
    }
    const char *text = json_string_value(json_object_get(reply, fields[view]));
    if (text && *text)
        fprintf(out, "%s%s", text, text[strlen(text) - 1] == '\n' ? "" : "\n");
}

static void usage(FILE *out)
{
    fputs("Usage: corral show MODEL [flags]\n\n"
          "Show information for a model.\n\n"
          "Flags:\n"
          "      --license      show the license\n"
          "      --modelfile    show the Modelfile\n"
          "      --parameters   show the parameters\n"
          "      --system       show the system message\n"
          "      --template     show the template\n"
          "  -v, --verbose      show the metadata and tensors too\n",
          out);
}

int cmd_show(int argc, char **argv)
{
    static const struct { const char *flag; show_view view; } flags[] = {
        {"--license", SHOW_LICENSE},   {"--modelfile", SHOW_MODELFILE},
        {"--parameters", SHOW_PARAMETERS}, {"--system", SHOW_SYSTEM},
        {"--template", SHOW_TEMPLATE},
    };
    const char *model = NULL;
    show_view view = SHOW_INFO;
    int n_views = 0;
    bool verbose = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 0;
        }
        if (strcmp(a, "-v") == 0) {
            verbose = true;
            continue;
        }
        flag_match match = flag_bool(a, "--verbose", &verbose);
        for (size_t f = 0; match == FLAG_OTHER && f < sizeof flags / sizeof flags[0]; f++) {
            bool on = false;
            match = flag_bool(a, flags[f].flag, &on);
            if (match == FLAG_SET && on) { /* --license=false asks for no view */
                view = flags[f].view;
                n_views++;
            }
        }
        if (match == FLAG_BAD_VALUE)
            return 2;
        if (match == FLAG_SET)
            continue;
        if (a[0] == '-' || model) {
            fprintf(stderr, "Error: unexpected argument '%s'\n\n", a);
            usage(stderr);
            return 2;
        }
        model = a;
    }
    if (!model) {
        usage(stderr);
        return 2;
    }
    if (n_views > 1) {
        fprintf(stderr, "Error: only one of '--license', '--modelfile', '--parameters', "
                        "'--system', or '--template' can be specified\n");
        return 2;
    }
    corral_error err = {{0}};
    corral_client *client = client_connect(&err);
    if (!client) {
        fprintf(stderr, "Error: %s\n", err.message);
        return 1;
    }
    json_t *request = json_pack("{s:s,s:b}", "model", model, "verbose", verbose);
    json_t *reply = NULL;
    long status = client_call(client, "POST", "/api/show", request, &reply, &err);
    json_decref(request);
    client_close(client);
    if (status != 200 || !json_is_object(reply)) {
        fprintf(stderr, "Error: %s\n", status == 200 ? "the server's show reply is empty"
                                                     : err.message);
        json_decref(reply);
        return 1;
    }
    show_print(reply, view, verbose, stdout);
    json_decref(reply);
    return 0;
}

/*
 * `corral rm`, `corral cp` and `corral stop`: the one-request model commands (/api/delete,
 * /api/copy, and /api/generate with keep_alive 0 to unload).
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "cli/client.h"
#include "cli/commands.h"

/* Positional arguments into names; false (status in *exit_code) for --help or a wrong count. */
static bool take_names(int argc, char **argv, const char *usage, int min, int max,
                       int *exit_code)
{
    int n = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            printf("%s", usage);
            *exit_code = 0;
            return false;
        }
        if (argv[i][0] == '-') {
            fprintf(stderr, "Error: unknown flag '%s'\n%s", argv[i], usage);
            *exit_code = 2;
            return false;
        }
        n++;
    }
    if (n < min || (max && n > max)) {
        fprintf(stderr, "%s", usage);
        *exit_code = 2;
        return false;
    }
    return true;
}

/* name with ":latest" when its last part has no tag, for comparing with /api/ps names */
static void with_tag(const char *name, char *out, size_t size)
{
    const char *slash = strrchr(name, '/');
    bool tagged = strchr(slash ? slash : name, ':') != NULL;
    snprintf(out, size, "%s%s", name, tagged ? "" : ":latest");
}

/* Whether the server has model in memory (the server's unload would load it first). */
static bool is_loaded(corral_client *client, const char *model)
{
    json_t *reply = NULL;
    corral_error ignored;
    if (client_call(client, "GET", "/api/ps", NULL, &reply, &ignored) != 200)
        return true; /* unknown: let the unload request decide */
    char wanted[512];
    with_tag(model, wanted, sizeof wanted);
    bool found = false;
    size_t i;
    json_t *entry;
    json_array_foreach(json_object_get(reply, "models"), i, entry) {
        const char *name = json_string_value(json_object_get(entry, "name"));
        char loaded[512];
        with_tag(name ? name : "", loaded, sizeof loaded);
        found = found || strcasecmp(wanted, loaded) == 0;
    }
    json_decref(reply);
    return found;
}

/* Unload model; 404 is reported as ollama words it. */
static long unload(corral_client *client, const char *model, corral_error *err)
{
    json_t *request = json_pack("{s:s,s:i,s:b}", "model", model, "keep_alive", 0, "stream", 0);
    long status = client_call(client, "POST", "/api/generate", request, NULL, err);
    json_decref(request);
    if (status == 404)
        corral_error_set(err, "couldn't find model \"%s\" to stop", model);
    return status;
}

/* A model that is not loaded: stopping it is fine if it exists at all. */
static bool model_exists(corral_client *client, const char *model, corral_error *err)
{
    json_t *request = json_pack("{s:s}", "model", model);
    long status = client_call(client, "POST", "/api/show", request, NULL, err);
    json_decref(request);
    if (status == 404)
        corral_error_set(err, "couldn't find model \"%s\" to stop", model);
    return status == 200;
}

int cmd_stop(int argc, char **argv)
{
    static const char usage[] = "Usage: corral stop MODEL\n\nStop (unload) a running model.\n";
    int code;
    if (!take_names(argc, argv, usage, 1, 1, &code))
        return code;
    corral_error err = {{0}};
    corral_client *client = client_connect(&err);
    bool ok = client && (is_loaded(client, argv[1]) ? unload(client, argv[1], &err) == 200
                                                    : model_exists(client, argv[1], &err));
    client_close(client);
    if (!ok) {
        fprintf(stderr, "Error: %s\n", err.message);
        return 1;
    }
    return 0;
}

int cmd_rm(int argc, char **argv)
{
    static const char usage[] = "Usage: corral rm MODEL [MODEL...]\n\nRemove models.\n";
    int code;
    if (!take_names(argc, argv, usage, 1, 0, &code))
        return code;
    corral_error err = {{0}};
    corral_client *client = client_connect(&err);
    if (!client) {
        fprintf(stderr, "Error: %s\n", err.message);
        return 1;
    }
    int status = 0;
    for (int i = 1; i < argc; i++) {
        corral_error ignored;
        if (is_loaded(client, argv[i])) /* as ollama: a loaded model is unloaded first */
            unload(client, argv[i], &ignored);
        json_t *request = json_pack("{s:s}", "model", argv[i]);
        long got = client_call(client, "DELETE", "/api/delete", request, NULL, &err);
        json_decref(request);
        if (got != 200) {
            fprintf(stderr, "Error: %s\n", err.message);
            status = 1;
            continue;
        }
        printf("deleted '%s'\n", argv[i]);
    }
    client_close(client);
    return status;
}

int cmd_cp(int argc, char **argv)
{
    static const char usage[] = "Usage: corral cp SOURCE DESTINATION\n\nCopy a model.\n";
    int code;
    if (!take_names(argc, argv, usage, 2, 2, &code))
        return code;
    corral_error err = {{0}};
    corral_client *client = client_connect(&err);
    bool ok = false;
    if (client) {
        json_t *request = json_pack("{s:s,s:s}", "source", argv[1], "destination", argv[2]);
        ok = client_call(client, "POST", "/api/copy", request, NULL, &err) == 200;
        json_decref(request);
        client_close(client);
    }
    if (!ok) {
        fprintf(stderr, "Error: %s\n", err.message);
        return 1;
    }
    printf("copied '%s' to '%s'\n", argv[1], argv[2]);
    return 0;
}

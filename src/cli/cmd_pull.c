/*
 * `corral pull MODEL` and `corral push MODEL`: ask the server to move a model from or to a
 * registry and draw its NDJSON progress (statuses as spinners, layers as bars).
 */
#include "pull.h"

#include <stdio.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/flags.h"
#include "cli/progress.h"

static bool on_progress_line(void *user, const json_t *line)
{
    progress_update_json(user, line);
    return true;
}

bool pull_transfer(corral_client *client, const char *path, const char *model, bool insecure,
                   corral_error *err)
{
    json_t *request = json_pack("{s:s,s:b,s:b}", "model", model, "insecure", insecure,
                                "stream", 1);
    progress *bars = progress_create(stderr);
    long status = client_stream(client, path, request, on_progress_line, bars, err);
    progress_free(bars, true);
    json_decref(request);
    return status >= 200 && status <= 299;
}

static int run_transfer(const char *command, const char *path, int argc, char **argv)
{
    const char *model = NULL;
    bool insecure = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            printf("Usage: corral %s MODEL [--insecure]\n\n%s a model %s a registry.\n\n"
                   "Flags:\n      --insecure   allow an http registry (no TLS)\n", command,
                   strcmp(command, "pull") == 0 ? "Pull" : "Push",
                   strcmp(command, "pull") == 0 ? "from" : "to");
            return 0;
        }
        flag_match match = flag_bool(argv[i], "--insecure", &insecure);
        if (match == FLAG_BAD_VALUE)
            return 2;
        if (match == FLAG_SET)
            continue;
        if (argv[i][0] == '-' || model) {
            fprintf(stderr, "Error: unexpected argument '%s'\nUsage: corral %s MODEL "
                            "[--insecure]\n", argv[i], command);
            return 2;
        } else {
            model = argv[i];
        }
    }
    if (!model) {
        fprintf(stderr, "Usage: corral %s MODEL [--insecure]\n", command);
        return 2;
    }
    corral_error err = {{0}};
    corral_client *client = client_connect(&err);
    bool ok = client && pull_transfer(client, path, model, insecure, &err);
    client_close(client);
    if (!ok) {
        fprintf(stderr, "Error: %s\n", err.message);
        return 1;
    }
    return 0;
}

int cmd_pull(int argc, char **argv)
{
    return run_transfer("pull", "/api/pull", argc, argv);
}

int cmd_push(int argc, char **argv)
{
    return run_transfer("push", "/api/push", argc, argv);
}

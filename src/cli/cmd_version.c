/*
 * `corral --version`: the client's version and, when a server answers, the server's, with a
 * warning when they differ (as ollama). Never starts a server.
 */
#include <stdio.h>
#include <string.h>

#include "cli/client.h"
#include "cli/commands.h"

int cmd_version(int argc, char **argv)
{
    (void)argc, (void)argv;
    corral_error err = {{0}};
    corral_client *client = client_open(&err);
    json_t *reply = NULL;
    long status = client ? client_call(client, "GET", "/api/version", NULL, &reply, &err) : 0;
    const char *server_version = json_string_value(json_object_get(reply, "corral_version"));
    const char *api_version = json_string_value(json_object_get(reply, "version"));
    if (status == 200 && server_version) {
        printf("corral version is %s (ollama API %s)\n", server_version,
               api_version ? api_version : "unknown");
        if (strcmp(server_version, CORRAL_VERSION) != 0)
            fprintf(stderr, "Warning: client version is %s\n", CORRAL_VERSION);
    } else {
        fprintf(stderr, "Warning: could not connect to a running corral server\n");
        fprintf(stderr, "Warning: client version is %s\n", CORRAL_VERSION);
    }
    json_decref(reply);
    client_close(client);
    return 0;
}

/* `corral serve`: the ollama-compatible REST server. */
#include "cli/commands.h"
#include "server/server.h"

int cmd_serve(int argc, char **argv)
{
    return server_main(argc, argv);
}

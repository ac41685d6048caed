/*
 * `corral serve`: the ollama-compatible REST server. Its --help is answered here, on stdout,
 * with every setting the server reads from the environment, as `ollama serve --help` lists
 * its own; anything else goes to the server.
 */
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"
#include "server/server.h"

static void usage(void)
{
    fputs("Usage: corral serve\n\n"
          "Start the ollama-compatible server (alias: start).\n\n"
          "Environment variables, each read as CORRAL_NAME, else OLLAMA_NAME:\n"
          "      HOST                  address to listen on (default 127.0.0.1:11434)\n"
          "      MODELS                the model store (default ~/.corral/models)\n"
          "      KEEP_ALIVE            how long an idle model stays loaded (default 5m)\n"
          "      NUM_PARALLEL          requests one loaded model serves at once (default 4)\n"
          "      MAX_LOADED_MODELS     models loaded at once (default 3)\n"
          "      MAX_QUEUE             requests waiting before 503 (default 512)\n"
          "      CONTEXT_LENGTH        num_ctx when a request sets none (default 4096)\n"
          "      KV_CACHE_TYPE         KV cache: f16, q8_0, q4_0 or f32 (default f16)\n"
          "      ORIGINS               more browser origins allowed, comma-separated\n"
          "      MAX_REQUEST_MB        largest request body (default 64)\n"
          "      MAX_CONNECTIONS       open connections (default 4096)\n"
          "      API_KEYS              comma-separated keys every request must carry\n"
          "      API_KEY_FILE          a file of such keys, one per line\n"
          "      LOG_FORMAT            text or json (default text)\n"
          "      DEBUG                 1: debug lines too, prompts among them\n"
          "      RUNNER_TIMEOUT        a silent model runner's health-check limit (default 30s)\n"
          "      LOAD_TIMEOUT          longest model load (default 5m)\n"
          "      PROMPT_LOOKUP         longest guess taken from earlier text, 0: off (default 8)\n"
          "      MAX_TRANSFER_STREAMS  connections one download uses (default 8)\n"
          "      NOPRUNE               1: keep unused blobs at startup\n"
          "      SWEEP_INTERVAL        how often interrupted transfers are swept (default 10m)\n",
          stdout);
}

int cmd_serve(int argc, char **argv)
{
    if (argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        usage();
        return 0;
    }
    return server_main(argc, argv);
}

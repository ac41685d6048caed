/* `corral gguf-info FILE.gguf [--tensors] [--all]`: a GGUF file's metadata and tensor table. */
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"
#include "corral/engine.h"

#define DEFAULT_ARRAY_ITEMS 8

static void usage(FILE *out)
{
    fprintf(out, "Usage: corral gguf-info FILE.gguf [--tensors] [--all]\n"
                 "  --tensors  also list every tensor: name, type, shape, size, offset\n"
                 "  --all      print arrays in full (default: the first %d items)\n",
            DEFAULT_ARRAY_ITEMS);
}

int cmd_gguf_info(int argc, char **argv)
{
    const char *path = NULL;
    bool tensors = false;
    size_t max_items = DEFAULT_ARRAY_ITEMS;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--tensors") == 0) {
            tensors = true;
        } else if (strcmp(argv[i], "--all") == 0) {
            max_items = (size_t)-1;
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (argv[i][0] == '-' || path) {
            fprintf(stderr, "corral gguf-info: unexpected argument '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        } else {
            path = argv[i];
        }
    }
    if (!path) {
        usage(stderr);
        return 2;
    }
    corral_error err;
    corral_model_file *file = corral_model_file_open(path, &err);
    if (!file) {
        fprintf(stderr, "corral gguf-info: %s\n", err.message);
        return 1;
    }
    corral_model_file_print(file, stdout, tensors, max_items);
    corral_model_file_close(file);
    return 0;
}

/*
 * `corral gpus`: the machine's GPUs (Vulkan devices) as the engine finds them, which one it
 * would use, and why the others are skipped (CPU implementations such as lavapipe need
 * CORRAL_VULKAN_ALLOW_CPU=1; CORRAL_GPU_DEVICES or GGML_VK_VISIBLE_DEVICES hide others);
 * with --log, the lines `corral serve` logs at start, which it runs in a child process.
 */
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"
#include "corral/engine.h"
#include "server/gpu_log.h"
#include "util/log.h"

int cmd_gpus(int argc, char **argv)
{
    if (argc > 1 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        puts("Usage: corral gpus [--log]\nList the GPUs (Vulkan devices) the engine can offload "
             "to.\n  --log [text|json]  as log lines on stderr, as `corral serve` writes them at "
             "start");
        return 0;
    }
    if (argc > 1 && strcmp(argv[1], "--log") == 0) {
        log_format format = LOG_FORMAT_TEXT;
        if (argc > 2 && !log_parse_format(argv[2], &format)) {
            fprintf(stderr, "corral gpus --log: unknown log format '%s' (text or json)\n", argv[2]);
            return 2;
        }
        log_configure(format, false);
        gpu_log_discovery();
        return 0;
    }
    corral_gpu_info gpus[16];
    size_t n;
    corral_error err = {{0}};
    if (!corral_gpu_list(gpus, 16, &n, &err)) {
        printf("no GPU: %s\n", err.message);
        return 0;
    }
    if (n == 0)
        puts("no GPU: the Vulkan loader lists no device");
    for (size_t i = 0; i < n; i++) {
        const corral_gpu_info *g = &gpus[i];
        printf("vulkan:%u  %s  %s  %.1f GiB, %.1f GiB free%s  %s%s\n", g->index, g->name,
               g->type, (double)g->total_bytes / (1u << 30), (double)g->free_bytes / (1u << 30),
               g->has_budget ? "" : " (no budget: total)",
               g->chosen ? "chosen" : g->usable ? "usable" : "skipped: ",
               g->usable ? "" : g->why_not);
    }
    return 0;
}

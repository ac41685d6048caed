/* The device options of corral infer and corral bench (device_option.h). */
#include "cli/device_option.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int device_option_parse(device_option *d, const char *cmd, const char *flag, const char *value)
{
    if (strcmp(flag, "--device") == 0) {
        d->device_set = true;
        d->index = -1;
        if (strcmp(value, "cpu") == 0) {
            d->vulkan = false;
            return 1;
        }
        if (strncmp(value, "vulkan", 6) == 0 && (value[6] == '\0' || value[6] == ':')) {
            d->vulkan = true;
            if (value[6] == '\0')
                return 1;
            char *end;
            errno = 0;
            long n = strtol(value + 7, &end, 10);
            if (!errno && end != value + 7 && !*end && n >= 0 && n < 64) {
                d->index = (int)n;
                return 1;
            }
        }
        fprintf(stderr, "corral %s: --device expects cpu, vulkan or vulkan:N, got '%s'\n", cmd,
                value);
        return -1;
    }
    if (strcmp(flag, "--gpu-layers") == 0) {
        char *end;
        errno = 0;
        long n = strtol(value, &end, 10);
        if (errno || end == value || *end || n < -1 || n > 100000) {
            fprintf(stderr, "corral %s: --gpu-layers expects -1 (all that fit) or a count, "
                            "got '%s'\n", cmd, value);
            return -1;
        }
        d->gpu_layers_set = true;
        d->gpu_layers = n;
        return 1;
    }
    return 0;
}

void device_option_apply(const device_option *d, corral_context_params *p)
{
    if (d->device_set && !d->vulkan) {
        p->n_gpu_layers = 0;
        return;
    }
    if (!d->device_set && !d->gpu_layers_set)
        return;
    p->gpu_device = d->index;
    p->n_gpu_layers = d->gpu_layers_set ? (int)d->gpu_layers : -1;
    if (!d->device_set)
        p->gpu_device = -1;
}

/* --device cpu|vulkan[:N] and --gpu-layers N, as corral infer and corral bench take them. */
#ifndef CORRAL_CLI_DEVICE_OPTION_H
#define CORRAL_CLI_DEVICE_OPTION_H

#include <stdbool.h>

#include "corral/engine.h"

typedef struct device_option {
    bool device_set, vulkan;
    int index;             /* vulkan:N, or -1 */
    bool gpu_layers_set;
    long gpu_layers;       /* -1: as many as fit */
} device_option;

/* 1 when flag is one of these and value was taken, 0 when it is not, -1 (message printed,
 * naming cmd) on a bad value. */
int device_option_parse(device_option *d, const char *cmd, const char *flag, const char *value);
/* The choice into context parameters: --device vulkan alone offloads every layer that fits,
 * --gpu-layers alone picks the best device, --device cpu offloads nothing. */
void device_option_apply(const device_option *d, corral_context_params *p);

#endif

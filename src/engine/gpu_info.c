/* The machine's GPUs as the public API lists them (corral_gpu_list), from the Vulkan
 * backend's discovery; a build without the backend has none. */
#include <string.h>

#include "corral/engine.h"

#ifdef CORRAL_VULKAN
#include "vk_device.h"

bool corral_gpu_list(corral_gpu_info *out, size_t cap, size_t *n_out, corral_error *err)
{
    vk_device_info infos[VK_MAX_DEVICES];
    size_t n;
    *n_out = 0;
    if (!vk_enumerate(infos, &n, err))
        return false;
    int chosen = vk_choose(infos, n);
    for (size_t i = 0; i < n && i < cap; i++) {
        corral_gpu_info *g = &out[i];
        *g = (corral_gpu_info){.index = infos[i].index,
                               .type = vk_device_type_name(infos[i].type),
                               .total_bytes = infos[i].total_bytes,
                               .free_bytes = infos[i].free_bytes,
                               .has_budget = infos[i].has_budget,
                               .usable = infos[i].usable,
                               .why_not = infos[i].why_not,
                               .chosen = (int)i == chosen};
        _Static_assert(sizeof g->name >= sizeof infos[i].name, "device names fit");
        memcpy(g->name, infos[i].name, sizeof infos[i].name);
        (*n_out)++;
    }
    return true;
}

void corral_gpu_release(void)
{
    vk_device_close();
}
#else
bool corral_gpu_list(corral_gpu_info *out, size_t cap, size_t *n_out, corral_error *err)
{
    (void)out, (void)cap;
    *n_out = 0;
    corral_error_set(err, "this build has no GPU backend (built without CORRAL_VULKAN)");
    return false;
}

void corral_gpu_release(void)
{
}
#endif

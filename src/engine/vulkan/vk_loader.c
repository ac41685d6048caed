/* The Vulkan loader opened at run time, and the entry points of vk_loader.h. */
#include "vk_loader.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>

vk_functions vk;

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static const char *load_failure;

static void load(void)
{
    /* CORRAL_VULKAN_LOADER names another loader (a path, or a name the linker finds);
     * RTLD_LOCAL: the loader's symbols must not resolve anything else in the process */
    const char *name = getenv("CORRAL_VULKAN_LOADER");
    void *lib = dlopen(name && *name ? name : "libvulkan.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        load_failure = "no Vulkan loader (libvulkan.so.1, or CORRAL_VULKAN_LOADER) here";
        return;
    }
    /* dlsym returns void *; the loader's ABI says this symbol is that function */
    *(void **)&vk.vkGetInstanceProcAddr = dlsym(lib, "vkGetInstanceProcAddr");
    if (!vk.vkGetInstanceProcAddr) {
        load_failure = "the Vulkan loader has no vkGetInstanceProcAddr";
        return;
    }
#define VK_LOAD(name)                                                                         \
    if (!(vk.name = (PFN_##name)vk.vkGetInstanceProcAddr(NULL, #name))) {                     \
        load_failure = "the Vulkan loader lacks " #name;                                      \
        return;                                                                               \
    }
    VK_GLOBAL_FUNCTIONS(VK_LOAD)
#undef VK_LOAD
}

bool vk_load_loader(const char **why)
{
    pthread_once(&load_once, load);
    if (load_failure && why)
        *why = load_failure;
    return !load_failure;
}

bool vk_load_instance(VkInstance instance)
{
#define VK_LOAD(name)                                                                         \
    if (!(vk.name = (PFN_##name)vk.vkGetInstanceProcAddr(instance, #name)))                   \
        return false;
    VK_INSTANCE_FUNCTIONS(VK_LOAD)
#undef VK_LOAD
    return true;
}

bool vk_load_device(VkDevice device)
{
#define VK_LOAD(name)                                                                         \
    if (!(vk.name = (PFN_##name)vk.vkGetDeviceProcAddr(device, #name)))                       \
        return false;
    VK_DEVICE_FUNCTIONS(VK_LOAD)
#undef VK_LOAD
    return true;
}

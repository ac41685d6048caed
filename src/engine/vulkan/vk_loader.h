/*
 * The Vulkan entry points Corral calls, loaded at run time from the system's loader
 * (libvulkan.so.1) with dlopen: the binary then starts on a machine without one and runs on
 * the CPU. Linking the loader instead would make its absence a start-up failure of the whole
 * program, serve and the CLI included, for a backend most users never turn on.
 */
#ifndef CORRAL_ENGINE_VK_LOADER_H
#define CORRAL_ENGINE_VK_LOADER_H

#define VK_NO_PROTOTYPES
#include <stdbool.h>
#include <vulkan/vulkan.h>

#define VK_GLOBAL_FUNCTIONS(X) X(vkCreateInstance) X(vkEnumerateInstanceExtensionProperties)

#define VK_INSTANCE_FUNCTIONS(X)                                                              \
    X(vkDestroyInstance) X(vkEnumeratePhysicalDevices) X(vkGetPhysicalDeviceProperties)       \
    X(vkGetPhysicalDeviceProperties2) X(vkGetPhysicalDeviceFeatures2)                         \
    X(vkGetPhysicalDeviceMemoryProperties)                                                    \
    X(vkGetPhysicalDeviceMemoryProperties2) X(vkGetPhysicalDeviceQueueFamilyProperties)       \
    X(vkEnumerateDeviceExtensionProperties) X(vkCreateDevice) X(vkGetDeviceProcAddr)

#define VK_DEVICE_FUNCTIONS(X)                                                                \
    X(vkDestroyDevice) X(vkGetDeviceQueue) X(vkCreateBuffer) X(vkDestroyBuffer)               \
    X(vkGetBufferMemoryRequirements) X(vkAllocateMemory) X(vkFreeMemory)                      \
    X(vkBindBufferMemory) X(vkMapMemory) X(vkUnmapMemory) X(vkCreateShaderModule)             \
    X(vkDestroyShaderModule) X(vkCreateDescriptorSetLayout) X(vkDestroyDescriptorSetLayout)   \
    X(vkCreatePipelineLayout) X(vkDestroyPipelineLayout) X(vkCreateComputePipelines)          \
    X(vkDestroyPipeline) X(vkCreateCommandPool) X(vkDestroyCommandPool)                       \
    X(vkAllocateCommandBuffers) X(vkBeginCommandBuffer) X(vkEndCommandBuffer)                 \
    X(vkCmdBindPipeline) X(vkCmdPushConstants) X(vkCmdPushDescriptorSetKHR)                   \
    X(vkCmdDispatch) X(vkCmdPipelineBarrier) X(vkCmdCopyBuffer) X(vkCmdFillBuffer)            \
    X(vkQueueSubmit) X(vkCreateFence) X(vkDestroyFence) X(vkWaitForFences) X(vkResetFences) \
    X(vkCreateDescriptorPool) X(vkDestroyDescriptorPool) X(vkAllocateDescriptorSets)          \
    X(vkUpdateDescriptorSets) X(vkCmdBindDescriptorSets)

typedef struct vk_functions {
#define VK_DECLARE(name) PFN_##name name;
    PFN_vkGetInstanceProcAddr vkGetInstanceProcAddr;
    VK_GLOBAL_FUNCTIONS(VK_DECLARE)
    VK_INSTANCE_FUNCTIONS(VK_DECLARE)
    VK_DEVICE_FUNCTIONS(VK_DECLARE)
#undef VK_DECLARE
} vk_functions;

/* The table every Vulkan call goes through (filled by the three loads below). */
extern vk_functions vk;

/* dlopen the loader and read its global entry points; false (with why in *why, static
 * text) when there is none. Idempotent and thread-safe. */
bool vk_load_loader(const char **why);
/* The instance's and the device's entry points, once each has been created. False when one
 * is missing (a driver without an extension we asked for would be a bug of ours). */
bool vk_load_instance(VkInstance instance);
bool vk_load_device(VkDevice device);

#endif

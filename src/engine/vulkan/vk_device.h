/*
 * Vulkan devices: discovery (every physical device with its name, type and memory, the free
 * memory from VK_EXT_memory_budget where the driver has it), the choice (a discrete GPU
 * before an integrated one; CPU implementations such as Mesa's lavapipe only when
 * CORRAL_VULKAN_ALLOW_CPU=1; CORRAL_GPU_DEVICES or GGML_VK_VISIBLE_DEVICES restrict the
 * candidates to listed indices), and the one device the process opens: its queue, buffers,
 * the compute pipelines of the embedded shaders and the submission of recorded work.
 */
#ifndef CORRAL_ENGINE_VK_DEVICE_H
#define CORRAL_ENGINE_VK_DEVICE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "corral/engine.h"
#include "vk_loader.h"

enum { VK_MAX_DEVICES = 16 };

typedef struct vk_device_info {
    uint32_t index;          /* in vkEnumeratePhysicalDevices' order */
    char name[VK_MAX_PHYSICAL_DEVICE_NAME_SIZE];
    VkPhysicalDeviceType type;
    uint64_t total_bytes;    /* device-local heaps */
    uint64_t free_bytes;     /* the budget left, or total_bytes without VK_EXT_memory_budget */
    bool has_budget;
    bool visible;            /* listed by CORRAL_GPU_DEVICES / GGML_VK_VISIBLE_DEVICES (or no list) */
    bool usable;             /* visible, and a GPU or CPU devices allowed, with what we need */
    const char *why_not;     /* static text when !usable */
} vk_device_info;

/* "discrete", "integrated", "virtual", "cpu" or "other". */
const char *vk_device_type_name(VkPhysicalDeviceType type);

/*
 * Every Vulkan device of the machine into out (up to VK_MAX_DEVICES), *n_out the count.
 * False (with the reason) when there is no loader or no instance; that is not an error of
 * the caller's, only a machine without Vulkan.
 */
bool vk_enumerate(vk_device_info *out, size_t *n_out, corral_error *err);

/* The usable device of the highest rank in infos, or -1: discrete > integrated > virtual >
 * CPU, the lowest index first among equals. */
int vk_choose(const vk_device_info *infos, size_t n);

/* The pipelines, one per shader (shaders/NAME.comp), in vk_device.c's order. */
enum vk_pipeline {
    VK_PIPE_RMSNORM,
    VK_PIPE_QUANTIZE_Q8_0,
    VK_PIPE_MATMUL_F32,
    VK_PIPE_MATMUL_F16,
    VK_PIPE_MATMUL_Q4_0,
    VK_PIPE_MATMUL_Q8_0,
    VK_PIPE_QUANTIZE_Q8_K,
    VK_PIPE_MATMUL_Q4_K,
    VK_PIPE_MATMUL_Q6_K,
    VK_PIPE_MATMUL_BF16,
    VK_PIPE_MATMUL_Q5_0,
    VK_PIPE_MATMUL_Q5_K,
    VK_PIPE_MATMUL_Q4_1,
    VK_PIPE_MATMUL_Q5_1,
    VK_PIPE_MATMUL_Q2_K,
    VK_PIPE_MATMUL_Q3_K,
    VK_PIPE_MATMUL_MXFP4,
    VK_PIPE_MATMUL_IQ4_NL,
    VK_PIPE_MATMUL_IQ4_XS,
    VK_PIPE_MATMUL_IQ2_XXS,
    VK_PIPE_MATMUL_IQ2_XS,
    VK_PIPE_MATMUL_IQ2_S,
    VK_PIPE_MATMUL_IQ3_XXS,
    VK_PIPE_MATMUL_IQ3_S,
    VK_PIPE_MATMUL_IQ1_S,
    VK_PIPE_MATMUL_IQ1_M,
    VK_PIPE_ROPE,
    VK_PIPE_KV_STORE,
    VK_PIPE_KV_SHIFT,
    VK_PIPE_ATTENTION,
    VK_PIPE_SWIGLU,
    VK_PIPE_BINARY,
    VK_PIPE_SOFTMAX,
    VK_PIPE_GET_ROWS,
    VK_PIPE_MOE_ROUTE,
    VK_PIPE_MOE_COMBINE,
    VK_PIPE_MOE_BIAS,
    VK_PIPE_SWIGLU_OAI,
    VK_PIPE_LAYERNORM,
    VK_PIPE_GELU,
    VK_PIPE_COPY_ROWS,
    VK_PIPE_MOE_GROUP,
    VK_PIPE_DELTA_CONV,
    VK_PIPE_DELTA_GATES,
    VK_PIPE_DELTA_RULE,
    VK_PIPE_L2NORM,
    VK_PIPE_MAMBA2_SCAN,
    /* the tiled products of prompts (matmul_tiled.glsl) */
    VK_PIPE_MATMUL_TILED_F32,
    VK_PIPE_MATMUL_TILED_F16,
    VK_PIPE_MATMUL_TILED_Q4_0,
    VK_PIPE_MATMUL_TILED_Q8_0,
    VK_PIPE_MATMUL_TILED_Q4_K,
    VK_PIPE_MATMUL_TILED_Q6_K,
    VK_PIPE_MATMUL_TILED_BF16,
    VK_PIPE_MATMUL_TILED_Q5_0,
    VK_PIPE_MATMUL_TILED_Q5_K,
    VK_PIPE_MATMUL_TILED_Q4_1,
    VK_PIPE_MATMUL_TILED_Q5_1,
    VK_PIPE_MATMUL_TILED_Q2_K,
    VK_PIPE_MATMUL_TILED_Q3_K,
    VK_PIPE_MATMUL_TILED_MXFP4,
    VK_PIPE_MATMUL_TILED_IQ4_NL,
    VK_PIPE_MATMUL_TILED_IQ4_XS,
    VK_PIPE_MATMUL_TILED_IQ2_XXS,
    VK_PIPE_MATMUL_TILED_IQ2_XS,
    VK_PIPE_MATMUL_TILED_IQ2_S,
    VK_PIPE_MATMUL_TILED_IQ3_XXS,
    VK_PIPE_MATMUL_TILED_IQ3_S,
    VK_PIPE_MATMUL_TILED_IQ1_S,
    VK_PIPE_MATMUL_TILED_IQ1_M,
    VK_PIPE_ADD_RMSNORM,
    VK_PIPE_RMSNORM_QUANTIZE,
    VK_PIPE_SWIGLU_QUANTIZE,
    VK_PIPE_AUDIO_ATTENTION,
    VK_PIPE_AUDIO_CONV,
    VK_PIPE_ALTUP,
    VK_PIPE_SPARSE_GATE,
    VK_PIPE_MATCH_MAGNITUDE,
    VK_PIPE_COUNT
};

/* The tiled products' workgroup (matmul_tiled.glsl): its invocations, and the most shared
 * memory a variant declares (a lattice IQ type's: the runs of weights and activations with
 * their scales, 6 KiB, and its grid's copy, up to 8 KiB; lattice.glsl). */
enum { VK_TILED_INVOCATIONS = 256, VK_TILED_SHARED_BYTES = 6 * 1024 + 8 * 1024 };

/* A pipeline's layout: set 0, VK_BINDINGS storage buffers pushed per dispatch (unused ones
 * bound to a small dummy), and VK_PUSH_BYTES of push constants. A pipeline whose shader reads
 * the lattice IQ types' grids (lattice.glsl) has one more set, VK_GRIDS_SET, of one storage
 * buffer: the device's grids, written once at device open and bound once per command buffer,
 * before its first such dispatch. */
enum { VK_BINDINGS = 6, VK_GRIDS_SET = 1, VK_PUSH_BYTES = 64 };

typedef struct vk_buffer {
    VkBuffer buffer;
    VkDeviceMemory memory;
    VkDeviceSize size;
    void *mapped; /* host-visible buffers: mapped for their lifetime; else NULL */
    VkDeviceSize allocated; /* the memory bound to it, padding and alignment included */
} vk_buffer;

typedef struct vk_device {
    vk_device_info info;
    VkInstance instance;
    VkPhysicalDevice physical;
    VkDevice device;
    VkQueue queue;
    uint32_t queue_family;
    VkPhysicalDeviceMemoryProperties memory;
    VkDeviceSize max_range;    /* maxStorageBufferRange: the most one binding may span */
    VkDeviceSize align;        /* minStorageBufferOffsetAlignment */
    uint32_t max_groups[3];    /* maxComputeWorkGroupCount */
    /* the most invocations a workgroup of local_size_x may have (the lower of
     * maxComputeWorkGroupInvocations and maxComputeWorkGroupSize[0]), and
     * maxComputeSharedMemorySize: what decides whether the tiled products fit */
    uint32_t max_invocations, max_shared_bytes;
    VkDescriptorSetLayout set_layout;
    VkPipelineLayout layout; /* set 0 alone */
    /* the grids' set: its layout, the pipeline layout of set 0 and it, the set itself */
    VkDescriptorSetLayout grids_set_layout;
    VkPipelineLayout grids_layout;
    VkDescriptorPool grids_pool;
    VkDescriptorSet grids_set;
    VkPipeline pipelines[VK_PIPE_COUNT];
    /* The quantized matrix products come in two variants: integer dot product instructions
     * (shaderIntegerDotProduct, enabled where the device has it) or plain multiplies. int_dot
     * says which pipelines[] holds; other[] keeps the rest once vk_device_use_int_dot made
     * them. */
    bool has_int_dot, int_dot;
    VkPipeline other[VK_PIPE_COUNT];
    /* per pipeline, bit b set where its shader may write binding b (vk_spirv.h) */
    uint32_t written[VK_PIPE_COUNT];
    /* per pipeline, whether its shader reads the grids: its layout is grids_layout */
    bool reads_grids[VK_PIPE_COUNT];
    vk_buffer dummy;
    /* the lattice IQ types' grids (quant_iq_grids.h) in lattice.glsl's layout, read-only */
    vk_buffer grids;
    pthread_mutex_t queue_lock; /* the queue is shared by every context of the process */
    VkDeviceSize memory_align; /* the alignment of a buffer's memory (the dummy's) */
    uint64_t allocated; /* bytes of memory the live buffers hold (updated atomically) */
    uint64_t submits;   /* submissions to the queue, each waited for (updated atomically) */
} vk_device;

/*
 * The process's device, opened on first use and kept until exit: index -1 chooses
 * (vk_choose), else that index if it is usable. NULL with the reason when there is none.
 * Thread-safe; later calls with another index fail (one device per process).
 */
vk_device *vk_device_open(int index, corral_error *err);

/* The quantized matrix products' variant from now on: the integer dot product one (on) or
 * the plain one. Both give the same bits; the device opens with the first where it has the
 * feature, unless CORRAL_VULKAN_NO_INT_DOT=1. False when on and the device lacks the
 * feature, or a pipeline cannot be built. No work may be recorded or in flight (a test's
 * way to run both). */
bool vk_device_use_int_dot(vk_device *dev, bool on, corral_error *err);

/* Whether the device's limits take the tiled products' workgroup (VK_TILED_INVOCATIONS
 * invocations, VK_TILED_SHARED_BYTES of shared memory); where they do not, their pipelines
 * are not built and every product takes the per-row kernel. */
bool vk_device_fits_tiled(const vk_device *dev);

/* Close the process's device, for a clean exit: nothing may use it any more (every context
 * with GPU layers freed). A later vk_device_open opens it again. The instance stays until
 * the process ends: destroying it unloads the driver, whose own allocations then read as
 * leaks of an unknown module. */
void vk_device_close(void);

/* A buffer of size bytes: device-local, or host-visible and coherent (mapped) when
 * host_visible. False with the reason when memory runs out. */
bool vk_buffer_create(vk_device *dev, VkDeviceSize size, bool host_visible, vk_buffer *out,
                      corral_error *err);
void vk_buffer_free(vk_device *dev, vk_buffer *b);
/* The memory vk_buffer_create binds to a buffer of size bytes (its allocated): what an
 * estimate of a set of buffers counts for each. */
VkDeviceSize vk_buffer_footprint(const vk_device *dev, VkDeviceSize size);
/* Bytes of memory the device's live buffers hold (vk_device.allocated, read atomically). */
uint64_t vk_device_allocated(const vk_device *dev);
/* Bytes into or out of a device-local buffer through a staging buffer (one submit and wait
 * per staging load: for uploads at load time, and tests). */
bool vk_buffer_write(vk_device *dev, vk_buffer *b, VkDeviceSize offset, const void *data,
                     size_t size, corral_error *err);
bool vk_buffer_read(vk_device *dev, vk_buffer *b, VkDeviceSize offset, void *data, size_t size,
                    corral_error *err);

/* Buffer ranges the dispatches since a command buffer's last barrier read or wrote, that
 * many at most: a dispatch that would need more comes after a barrier. */
enum { VK_ACCESSES = 48 };

typedef struct vk_access {
    VkBuffer buffer;
    VkDeviceSize begin, end;
    bool written;
} vk_access;

/* What the command buffer being recorded holds: the dispatches since its last barrier and
 * what they touched (vk_ops.c's record puts a barrier before a dispatch only where it reads
 * or writes what one of them wrote, or writes what one read), and its dispatches and
 * barriers in all. */
typedef struct vk_recording {
    vk_access accesses[VK_ACCESSES];
    uint32_t n_accesses;
    uint32_t dispatches, barriers;
    bool grids_bound; /* the grids' set is bound (VK_GRIDS_SET) */
    /* The last quantization of a product's input (vk_ops.c), while the buffers still hold
     * it: from the floats of x, n_values of them, into quants and scales (whole buffers) as
     * `kind` (0: none), so that the next product of the same input reads it as it is. Any
     * dispatch writing one of the three ends it; nothing else of the recording may write
     * them between dispatches. */
    vk_access quantized_x;
    VkBuffer quants, scales;
    VkDeviceSize quants_offset, scales_offset;
    uint32_t quantized_values, quantized_kind;
} vk_recording;

/* A command buffer with its own pool and fence: the work of one context, recorded and
 * submitted from one thread at a time. */
typedef struct vk_commands {
    vk_device *dev;
    VkCommandPool pool;
    VkCommandBuffer cmd;
    VkFence fence;
    vk_recording rec; /* cmd's */
} vk_commands;

bool vk_commands_create(vk_device *dev, vk_commands *c, corral_error *err);
void vk_commands_free(vk_commands *c);
void vk_commands_begin(vk_commands *c);
/* A barrier after every dispatch recorded so far, before whatever comes next: in the same
 * command buffer, in a later one, a copy or the host's reads after the fence. */
void vk_commands_barrier(vk_commands *c);
/* End the command buffer (after a barrier, where a dispatch came since the last one). False
 * with the reason when the driver refuses it. */
bool vk_commands_end(vk_commands *c, corral_error *err);
/* End, submit and wait for the work recorded since vk_commands_begin. */
bool vk_commands_submit(vk_commands *c, corral_error *err);
/* Submit n command buffers already recorded and ended (c's, or others of c's pool), in that
 * order in one submission, and wait for them with c's fence (vk_device.submits counts it). */
bool vk_commands_submit_recorded(vk_commands *c, const VkCommandBuffer *cmds, uint32_t n,
                                 corral_error *err);

#endif

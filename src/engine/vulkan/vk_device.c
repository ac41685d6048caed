/* Discovery, choice and the process's one Vulkan device (vk_device.h). */
#include "vk_device.h"

#include <stdlib.h>
#include <string.h>

#include "quant_iq_grids.h"
#include "util/log.h"
#include "vk_shaders.h"
#include "vk_spirv.h"

const char *vk_device_type_name(VkPhysicalDeviceType type)
{
    switch (type) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return "discrete";
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return "integrated";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return "virtual";
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return "cpu";
    default: return "other";
    }
}

/* ---- the instance (one per process, kept until exit) ---- */

static pthread_mutex_t open_lock = PTHREAD_MUTEX_INITIALIZER;
static VkInstance instance;

static bool instance_get(corral_error *err)
{
    if (instance)
        return true;
    const char *why = NULL;
    if (!vk_load_loader(&why)) {
        corral_error_set(err, "%s", why);
        return false;
    }
    VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
                             .pApplicationName = "corral",
                             .apiVersion = VK_API_VERSION_1_1};
    VkInstanceCreateInfo info = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
                                 .pApplicationInfo = &app};
    VkInstance made;
    VkResult r = vk.vkCreateInstance(&info, NULL, &made);
    if (r != VK_SUCCESS) {
        corral_error_set(err, "no Vulkan instance (VkResult %d): no driver installed?", (int)r);
        return false;
    }
    if (!vk_load_instance(made)) {
        corral_error_set(err, "the Vulkan loader lacks an instance function");
        return false;
    }
    instance = made;
    return true;
}

/* ---- discovery ---- */

static bool device_has_extension(VkPhysicalDevice pd, const char *name)
{
    uint32_t n = 0;
    if (vk.vkEnumerateDeviceExtensionProperties(pd, NULL, &n, NULL) != VK_SUCCESS || n == 0)
        return false;
    VkExtensionProperties *ext = calloc(n, sizeof *ext);
    bool found = false;
    if (ext && vk.vkEnumerateDeviceExtensionProperties(pd, NULL, &n, ext) == VK_SUCCESS)
        for (uint32_t i = 0; i < n && !found; i++)
            found = strcmp(ext[i].extensionName, name) == 0;
    free(ext);
    return found;
}

/* Indices listed in CORRAL_GPU_DEVICES (or else GGML_VK_VISIBLE_DEVICES): "0,2". No list:
 * every device is visible. An empty list hides them all. */
static bool listed(uint32_t index)
{
    const char *list = getenv("CORRAL_GPU_DEVICES");
    if (!list)
        list = getenv("GGML_VK_VISIBLE_DEVICES");
    if (!list)
        return true;
    for (const char *p = list; *p;) {
        char *end;
        unsigned long v = strtoul(p, &end, 10);
        if (end != p && v == index)
            return true;
        p = end != p ? end : p + 1;
        while (*p == ',' || *p == ' ')
            p++;
    }
    return false;
}

static bool cpu_devices_allowed(void)
{
    const char *v = getenv("CORRAL_VULKAN_ALLOW_CPU");
    return v && strcmp(v, "1") == 0;
}

/* CORRAL_VULKAN_NO_INT_DOT=1: the plain quantized products even where the device has
 * integer dot products (to compare the two, or to step around a driver's bug). */
static bool int_dot_refused(void)
{
    const char *v = getenv("CORRAL_VULKAN_NO_INT_DOT");
    return v && strcmp(v, "1") == 0;
}

static void describe(VkPhysicalDevice pd, uint32_t index, vk_device_info *out)
{
    VkPhysicalDeviceProperties props;
    vk.vkGetPhysicalDeviceProperties(pd, &props);
    *out = (vk_device_info){.index = index, .type = props.deviceType};
    memcpy(out->name, props.deviceName, sizeof out->name);
    out->name[sizeof out->name - 1] = '\0';

    VkPhysicalDeviceMemoryBudgetPropertiesEXT budget = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_BUDGET_PROPERTIES_EXT};
    out->has_budget = device_has_extension(pd, VK_EXT_MEMORY_BUDGET_EXTENSION_NAME);
    VkPhysicalDeviceMemoryProperties2 mem = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_PROPERTIES_2,
        .pNext = out->has_budget ? &budget : NULL};
    vk.vkGetPhysicalDeviceMemoryProperties2(pd, &mem);
    for (uint32_t h = 0; h < mem.memoryProperties.memoryHeapCount; h++) {
        if (!(mem.memoryProperties.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT))
            continue;
        out->total_bytes += mem.memoryProperties.memoryHeaps[h].size;
        if (out->has_budget) {
            VkDeviceSize b = budget.heapBudget[h], u = budget.heapUsage[h];
            out->free_bytes += b > u ? b - u : 0;
        }
    }
    if (!out->has_budget)
        out->free_bytes = out->total_bytes;

    out->visible = listed(index);
    if (!out->visible)
        out->why_not = "not listed in CORRAL_GPU_DEVICES / GGML_VK_VISIBLE_DEVICES";
    else if (props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU && !cpu_devices_allowed())
        out->why_not = "a CPU implementation (CORRAL_VULKAN_ALLOW_CPU=1 allows it)";
    else if (VK_API_VERSION_MINOR(props.apiVersion) < 1 && VK_API_VERSION_MAJOR(props.apiVersion) == 1)
        out->why_not = "Vulkan 1.0 only (1.1 needed)";
    else if (!device_has_extension(pd, VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME))
        out->why_not = "no VK_KHR_push_descriptor";
    else if (props.limits.maxPerStageDescriptorStorageBuffers < VK_BINDINGS + 1)
        out->why_not = "fewer storage buffers a shader than the kernels bind (7)";
    else
        out->usable = true;
}

bool vk_enumerate(vk_device_info *out, size_t *n_out, corral_error *err)
{
    *n_out = 0;
    pthread_mutex_lock(&open_lock);
    bool ok = instance_get(err);
    pthread_mutex_unlock(&open_lock);
    if (!ok)
        return false;
    VkPhysicalDevice pds[VK_MAX_DEVICES];
    uint32_t n = VK_MAX_DEVICES;
    VkResult r = vk.vkEnumeratePhysicalDevices(instance, &n, pds);
    if (r != VK_SUCCESS && r != VK_INCOMPLETE) {
        corral_error_set(err, "cannot list Vulkan devices (VkResult %d)", (int)r);
        return false;
    }
    for (uint32_t i = 0; i < n; i++)
        describe(pds[i], i, &out[i]);
    *n_out = n;
    return true;
}

static int rank(VkPhysicalDeviceType type)
{
    switch (type) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return 4;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return 3;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return 2;
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return 1;
    default: return 0;
    }
}

int vk_choose(const vk_device_info *infos, size_t n)
{
    int best = -1;
    for (size_t i = 0; i < n; i++)
        if (infos[i].usable && (best < 0 || rank(infos[i].type) > rank(infos[best].type)))
            best = (int)i;
    return best;
}

/* ---- the device ---- */

static vk_device *opened;
/* Why opening failed once (then later calls fail alike instead of retrying): "" until then. */
static char open_failure[CORRAL_ERROR_MAX];

static const char *const pipeline_shader[VK_PIPE_COUNT] = {
    [VK_PIPE_RMSNORM] = "rmsnorm.spv",
    [VK_PIPE_QUANTIZE_Q8_0] = "quantize_q8_0.spv",
    [VK_PIPE_MATMUL_F32] = "matmul_f32.spv",
    [VK_PIPE_MATMUL_F16] = "matmul_f16.spv",
    [VK_PIPE_MATMUL_Q4_0] = "matmul_q4_0.spv",
    [VK_PIPE_MATMUL_Q8_0] = "matmul_q8_0.spv",
    [VK_PIPE_QUANTIZE_Q8_K] = "quantize_q8_k.spv",
    [VK_PIPE_MATMUL_Q4_K] = "matmul_q4_k.spv",
    [VK_PIPE_MATMUL_Q6_K] = "matmul_q6_k.spv",
    [VK_PIPE_MATMUL_BF16] = "matmul_bf16.spv",
    [VK_PIPE_MATMUL_Q5_0] = "matmul_q5_0.spv",
    [VK_PIPE_MATMUL_Q5_K] = "matmul_q5_k.spv",
    [VK_PIPE_MATMUL_Q4_1] = "matmul_q4_1.spv",
    [VK_PIPE_MATMUL_Q5_1] = "matmul_q5_1.spv",
    [VK_PIPE_MATMUL_Q2_K] = "matmul_q2_k.spv",
    [VK_PIPE_MATMUL_Q3_K] = "matmul_q3_k.spv",
    [VK_PIPE_MATMUL_MXFP4] = "matmul_mxfp4.spv",
    [VK_PIPE_MATMUL_IQ4_NL] = "matmul_iq4_nl.spv",
    [VK_PIPE_MATMUL_IQ4_XS] = "matmul_iq4_xs.spv",
    [VK_PIPE_MATMUL_IQ2_XXS] = "matmul_iq2_xxs.spv",
    [VK_PIPE_MATMUL_IQ2_XS] = "matmul_iq2_xs.spv",
    [VK_PIPE_MATMUL_IQ2_S] = "matmul_iq2_s.spv",
    [VK_PIPE_MATMUL_IQ3_XXS] = "matmul_iq3_xxs.spv",
    [VK_PIPE_MATMUL_IQ3_S] = "matmul_iq3_s.spv",
    [VK_PIPE_MATMUL_IQ1_S] = "matmul_iq1_s.spv",
    [VK_PIPE_MATMUL_IQ1_M] = "matmul_iq1_m.spv",
    [VK_PIPE_ROPE] = "rope.spv",
    [VK_PIPE_KV_STORE] = "kv_store.spv",
    [VK_PIPE_KV_SHIFT] = "kv_shift.spv",
    [VK_PIPE_ATTENTION] = "attention.spv",
    [VK_PIPE_SWIGLU] = "swiglu.spv",
    [VK_PIPE_BINARY] = "binary.spv",
    [VK_PIPE_SOFTMAX] = "softmax.spv",
    [VK_PIPE_GET_ROWS] = "get_rows.spv",
    [VK_PIPE_MOE_ROUTE] = "moe_route.spv",
    [VK_PIPE_MOE_COMBINE] = "moe_combine.spv",
    [VK_PIPE_MOE_BIAS] = "moe_bias.spv",
    [VK_PIPE_SWIGLU_OAI] = "swiglu_oai.spv",
    [VK_PIPE_LAYERNORM] = "layernorm.spv",
    [VK_PIPE_GELU] = "gelu.spv",
    [VK_PIPE_COPY_ROWS] = "copy_rows.spv",
    [VK_PIPE_MOE_GROUP] = "moe_group.spv",
    [VK_PIPE_DELTA_CONV] = "delta_conv.spv",
    [VK_PIPE_DELTA_GATES] = "delta_gates.spv",
    [VK_PIPE_DELTA_RULE] = "delta_rule.spv",
    [VK_PIPE_L2NORM] = "l2norm.spv",
    [VK_PIPE_MAMBA2_SCAN] = "mamba2_scan.spv",
    [VK_PIPE_MATMUL_TILED_F32] = "matmul_tiled_f32.spv",
    [VK_PIPE_MATMUL_TILED_F16] = "matmul_tiled_f16.spv",
    [VK_PIPE_MATMUL_TILED_Q4_0] = "matmul_tiled_q4_0.spv",
    [VK_PIPE_MATMUL_TILED_Q8_0] = "matmul_tiled_q8_0.spv",
    [VK_PIPE_MATMUL_TILED_Q4_K] = "matmul_tiled_q4_k.spv",
    [VK_PIPE_MATMUL_TILED_Q6_K] = "matmul_tiled_q6_k.spv",
    [VK_PIPE_MATMUL_TILED_BF16] = "matmul_tiled_bf16.spv",
    [VK_PIPE_MATMUL_TILED_Q5_0] = "matmul_tiled_q5_0.spv",
    [VK_PIPE_MATMUL_TILED_Q5_K] = "matmul_tiled_q5_k.spv",
    [VK_PIPE_MATMUL_TILED_Q4_1] = "matmul_tiled_q4_1.spv",
    [VK_PIPE_MATMUL_TILED_Q5_1] = "matmul_tiled_q5_1.spv",
    [VK_PIPE_MATMUL_TILED_Q2_K] = "matmul_tiled_q2_k.spv",
    [VK_PIPE_MATMUL_TILED_Q3_K] = "matmul_tiled_q3_k.spv",
    [VK_PIPE_MATMUL_TILED_MXFP4] = "matmul_tiled_mxfp4.spv",
    [VK_PIPE_MATMUL_TILED_IQ4_NL] = "matmul_tiled_iq4_nl.spv",
    [VK_PIPE_MATMUL_TILED_IQ4_XS] = "matmul_tiled_iq4_xs.spv",
    [VK_PIPE_MATMUL_TILED_IQ2_XXS] = "matmul_tiled_iq2_xxs.spv",
    [VK_PIPE_MATMUL_TILED_IQ2_XS] = "matmul_tiled_iq2_xs.spv",
    [VK_PIPE_MATMUL_TILED_IQ2_S] = "matmul_tiled_iq2_s.spv",
    [VK_PIPE_MATMUL_TILED_IQ3_XXS] = "matmul_tiled_iq3_xxs.spv",
    [VK_PIPE_MATMUL_TILED_IQ3_S] = "matmul_tiled_iq3_s.spv",
    [VK_PIPE_MATMUL_TILED_IQ1_S] = "matmul_tiled_iq1_s.spv",
    [VK_PIPE_MATMUL_TILED_IQ1_M] = "matmul_tiled_iq1_m.spv",
    [VK_PIPE_ADD_RMSNORM] = "add_rmsnorm.spv",
    [VK_PIPE_RMSNORM_QUANTIZE] = "rmsnorm_quantize.spv",
    [VK_PIPE_SWIGLU_QUANTIZE] = "swiglu_quantize.spv",
    [VK_PIPE_AUDIO_ATTENTION] = "audio_attention.spv",
    [VK_PIPE_AUDIO_CONV] = "audio_conv.spv",
    [VK_PIPE_ALTUP] = "altup.spv",
    [VK_PIPE_SPARSE_GATE] = "sparse_gate.spv",
    [VK_PIPE_MATCH_MAGNITUDE] = "match_magnitude.spv",
};

static const vk_shader_code *shader_named(const char *name)
{
    for (size_t i = 0; i < vk_shader_count; i++)
        if (strcmp(vk_shader_table[i].name, name) == 0)
            return &vk_shader_table[i];
    return NULL;
}

/* The pipelines whose shader has an integer dot product variant, NAME_dot.spv (built with
 * INT_DOT, vulkan.cmake's VK_DOT_SHADERS). */
static bool has_dot_variant(int p)
{
    switch (p) {
    case VK_PIPE_MATMUL_Q4_0: case VK_PIPE_MATMUL_Q4_1: case VK_PIPE_MATMUL_Q5_0:
    case VK_PIPE_MATMUL_Q5_1: case VK_PIPE_MATMUL_Q8_0: case VK_PIPE_MATMUL_Q2_K:
    case VK_PIPE_MATMUL_Q3_K: case VK_PIPE_MATMUL_Q4_K: case VK_PIPE_MATMUL_Q5_K:
    case VK_PIPE_MATMUL_Q6_K: case VK_PIPE_MATMUL_MXFP4: case VK_PIPE_MATMUL_IQ4_NL:
    case VK_PIPE_MATMUL_IQ4_XS: case VK_PIPE_MATMUL_IQ2_XXS: case VK_PIPE_MATMUL_IQ2_XS:
    case VK_PIPE_MATMUL_IQ2_S: case VK_PIPE_MATMUL_IQ3_XXS: case VK_PIPE_MATMUL_IQ3_S:
    case VK_PIPE_MATMUL_IQ1_S: case VK_PIPE_MATMUL_IQ1_M:
    case VK_PIPE_MATMUL_TILED_Q4_0: case VK_PIPE_MATMUL_TILED_Q4_1:
    case VK_PIPE_MATMUL_TILED_Q5_0: case VK_PIPE_MATMUL_TILED_Q5_1:
    case VK_PIPE_MATMUL_TILED_Q8_0: case VK_PIPE_MATMUL_TILED_Q2_K:
    case VK_PIPE_MATMUL_TILED_Q3_K: case VK_PIPE_MATMUL_TILED_Q4_K:
    case VK_PIPE_MATMUL_TILED_Q5_K: case VK_PIPE_MATMUL_TILED_Q6_K:
    case VK_PIPE_MATMUL_TILED_MXFP4: case VK_PIPE_MATMUL_TILED_IQ4_NL:
    case VK_PIPE_MATMUL_TILED_IQ4_XS: case VK_PIPE_MATMUL_TILED_IQ2_XXS:
    case VK_PIPE_MATMUL_TILED_IQ2_XS: case VK_PIPE_MATMUL_TILED_IQ2_S:
    case VK_PIPE_MATMUL_TILED_IQ3_XXS: case VK_PIPE_MATMUL_TILED_IQ3_S:
    case VK_PIPE_MATMUL_TILED_IQ1_S: case VK_PIPE_MATMUL_TILED_IQ1_M:
        return true;
    default:
        return false;
    }
}

bool vk_device_fits_tiled(const vk_device *d)
{
    return d->max_invocations >= VK_TILED_INVOCATIONS &&
           d->max_shared_bytes >= VK_TILED_SHARED_BYTES;
}

/* Pipeline p from its shader, the integer dot product variant where int_dot and it has one;
 * none (VK_NULL_HANDLE) for a tiled product the device's limits do not take. */
static bool build_pipeline(vk_device *d, int p, bool int_dot, VkPipeline *out, corral_error *err)
{
    *out = VK_NULL_HANDLE;
    if (p >= VK_PIPE_MATMUL_TILED_F32 && p <= VK_PIPE_MATMUL_TILED_IQ1_M &&
        !vk_device_fits_tiled(d))
        return true;
    char dot_name[64];
    const char *name = pipeline_shader[p];
    if (int_dot && has_dot_variant(p)) {
        snprintf(dot_name, sizeof dot_name, "%.*s_dot.spv", (int)(strlen(name) - strlen(".spv")),
                 name);
        name = dot_name;
    }
    const vk_shader_code *code = shader_named(name);
    if (!code) {
        corral_error_set(err, "shader %s is not embedded", name);
        return false;
    }
    VkShaderModuleCreateInfo mi = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
                                   .codeSize = code->size,
                                   .pCode = (const uint32_t *)(const void *)code->code};
    VkShaderModule module;
    if (vk.vkCreateShaderModule(d->device, &mi, NULL, &module) != VK_SUCCESS) {
        corral_error_set(err, "cannot load shader %s", code->name);
        return false;
    }
    VkComputePipelineCreateInfo pi = {
        .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
        .stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                  .stage = VK_SHADER_STAGE_COMPUTE_BIT, .module = module, .pName = "main"},
        .layout = d->reads_grids[p] ? d->grids_layout : d->layout};
    VkResult r = vk.vkCreateComputePipelines(d->device, VK_NULL_HANDLE, 1, &pi, NULL, out);
    vk.vkDestroyShaderModule(d->device, module, NULL);
    if (r != VK_SUCCESS) {
        *out = VK_NULL_HANDLE;
        corral_error_set(err, "cannot build pipeline %s (VkResult %d)", code->name, (int)r);
        return false;
    }
    return true;
}

/* A storage buffer binding of the compute stage. */
static VkDescriptorSetLayoutBinding storage_binding(uint32_t b)
{
    return (VkDescriptorSetLayoutBinding){.binding = b,
                                          .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                          .descriptorCount = 1,
                                          .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT};
}

/* The two pipeline layouts (vk_device.h): set 0 pushed per dispatch, and set 0 with the
 * grids' set; both with the same push constants, so that set 0 and the push constants
 * recorded under either serve a pipeline of the other. */
static bool create_layouts(vk_device *d, corral_error *err)
{
    VkDescriptorSetLayoutBinding bindings[VK_BINDINGS];
    for (uint32_t b = 0; b < VK_BINDINGS; b++)
        bindings[b] = storage_binding(b);
    VkDescriptorSetLayoutBinding grids_binding = storage_binding(0);
    VkDescriptorSetLayoutCreateInfo set_info = {
        .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
        .flags = VK_DESCRIPTOR_SET_LAYOUT_CREATE_PUSH_DESCRIPTOR_BIT_KHR,
        .bindingCount = VK_BINDINGS, .pBindings = bindings};
    VkDescriptorSetLayoutCreateInfo grids_set_info = {
        .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO, .bindingCount = 1,
        .pBindings = &grids_binding};
    if (vk.vkCreateDescriptorSetLayout(d->device, &set_info, NULL, &d->set_layout) != VK_SUCCESS ||
        vk.vkCreateDescriptorSetLayout(d->device, &grids_set_info, NULL,
                                       &d->grids_set_layout) != VK_SUCCESS) {
        corral_error_set(err, "cannot create the Vulkan descriptor set layouts");
        return false;
    }
    VkDescriptorSetLayout sets[2] = {d->set_layout, d->grids_set_layout};
    VkPushConstantRange push = {VK_SHADER_STAGE_COMPUTE_BIT, 0, VK_PUSH_BYTES};
    VkPipelineLayoutCreateInfo layout_info = {
        .sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO, .setLayoutCount = 1,
        .pSetLayouts = sets, .pushConstantRangeCount = 1, .pPushConstantRanges = &push};
    VkPipelineLayoutCreateInfo grids_layout_info = layout_info;
    grids_layout_info.setLayoutCount = 2;
    if (vk.vkCreatePipelineLayout(d->device, &layout_info, NULL, &d->layout) != VK_SUCCESS ||
        vk.vkCreatePipelineLayout(d->device, &grids_layout_info, NULL, &d->grids_layout) !=
            VK_SUCCESS) {
        corral_error_set(err, "cannot create the Vulkan pipeline layouts");
        return false;
    }
    return true;
}

static bool create_pipelines(vk_device *d, corral_error *err)
{
    if (!create_layouts(d, err))
        return false;
    for (int p = 0; p < VK_PIPE_COUNT; p++) {
        /* both variants of a product bind the same buffers the same way */
        const vk_shader_code *code = shader_named(pipeline_shader[p]);
        vk_spirv_buffers buffers;
        if (!code || !vk_spirv_read_buffers(code->code, code->size, &buffers) ||
            (buffers.sets & ~(1u << 0 | 1u << VK_GRIDS_SET))) {
            corral_error_set(err, "cannot read the bindings of shader %s", pipeline_shader[p]);
            return false;
        }
        d->written[p] = buffers.written;
        d->reads_grids[p] = buffers.sets >> VK_GRIDS_SET & 1;
        if (!build_pipeline(d, p, d->int_dot, &d->pipelines[p], err))
            return false;
    }
    return true;
}

bool vk_device_use_int_dot(vk_device *d, bool on, corral_error *err)
{
    if (on && !d->has_int_dot) {
        corral_error_set(err, "%s has no integer dot products", d->info.name);
        return false;
    }
    if (on == d->int_dot)
        return true;
    for (int p = 0; p < VK_PIPE_COUNT; p++)
        if (has_dot_variant(p) && !d->other[p] && !build_pipeline(d, p, on, &d->other[p], err))
            return false;
    for (int p = 0; p < VK_PIPE_COUNT; p++) {
        if (has_dot_variant(p)) {
            VkPipeline was = d->pipelines[p];
            d->pipelines[p] = d->other[p];
            d->other[p] = was;
        }
    }
    d->int_dot = on;
    return true;
}

/* The lattice IQ types' grids as lattice.glsl's Grids buffer: the tables one after another
 * (the offsets its GRID_* constants name), an IQ2 entry of 8 elements as two 32-bit words and
 * an IQ3 entry of 4 as one, element j in byte j; an IQ1 entry of 8 elements (-1, 0, 1) as
 * one word of nibbles, each element plus one, element j in the low nibble of byte j and
 * element j + 4 in its high one. The words little-endian whatever the host's order. */
static void put_grid8(uint8_t *out, const uint64_t *grid, size_t entries)
{
    for (size_t e = 0; e < entries; e++)
        for (int j = 0; j < 8; j++)
            out[8 * e + (size_t)j] = (uint8_t)(grid[e] >> (8 * j));
}

static void put_grid4(uint8_t *out, const uint32_t *grid, size_t entries)
{
    for (size_t e = 0; e < entries; e++)
        for (int j = 0; j < 4; j++)
            out[4 * e + (size_t)j] = (uint8_t)(grid[e] >> (8 * j));
}

static void put_grid_iq1(uint8_t *out, const uint64_t *grid, size_t entries)
{
    for (size_t e = 0; e < entries; e++)
        for (int j = 0; j < 4; j++) {
            int low = (int8_t)(uint8_t)(grid[e] >> (8 * j));
            int high = (int8_t)(uint8_t)(grid[e] >> (8 * (j + 4)));
            out[4 * e + (size_t)j] = (uint8_t)((low + 1) | (high + 1) << 4);
        }
}

/* The grids' buffer, and the set that binds it (VK_GRIDS_SET), written once. */
static bool upload_grids(vk_device *d, corral_error *err)
{
    enum {
        IQ2_XXS = 0, IQ2_XS = IQ2_XXS + 256 * 8, IQ2_S = IQ2_XS + 512 * 8,
        IQ3_XXS = IQ2_S + 1024 * 8, IQ3_S = IQ3_XXS + 256 * 4, IQ1_S = IQ3_S + 512 * 4,
        GRID_BYTES = IQ1_S + 2048 * 4
    };
    uint8_t *bytes = malloc(GRID_BYTES);
    if (!bytes) {
        corral_error_set(err, "out of memory for the IQ grids");
        return false;
    }
    put_grid8(bytes + IQ2_XXS, quant_iq2xxs_grid, 256);
    put_grid8(bytes + IQ2_XS, quant_iq2xs_grid, 512);
    put_grid8(bytes + IQ2_S, quant_iq2s_grid, 1024);
    put_grid4(bytes + IQ3_XXS, quant_iq3xxs_grid, 256);
    put_grid4(bytes + IQ3_S, quant_iq3s_grid, 512);
    put_grid_iq1(bytes + IQ1_S, quant_iq1s_grid, 2048);
    bool ok = vk_buffer_create(d, GRID_BYTES, false, &d->grids, err) &&
              vk_buffer_write(d, &d->grids, 0, bytes, GRID_BYTES, err);
    free(bytes);
    if (!ok)
        return false;
    VkDescriptorPoolSize size = {VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1};
    VkDescriptorPoolCreateInfo pool_info = {
        .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO, .maxSets = 1,
        .poolSizeCount = 1, .pPoolSizes = &size};
    if (vk.vkCreateDescriptorPool(d->device, &pool_info, NULL, &d->grids_pool) != VK_SUCCESS) {
        corral_error_set(err, "cannot create the Vulkan descriptor pool of the IQ grids");
        return false;
    }
    VkDescriptorSetAllocateInfo set_info = {
        .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
        .descriptorPool = d->grids_pool, .descriptorSetCount = 1,
        .pSetLayouts = &d->grids_set_layout};
    if (vk.vkAllocateDescriptorSets(d->device, &set_info, &d->grids_set) != VK_SUCCESS) {
        corral_error_set(err, "cannot allocate the Vulkan descriptor set of the IQ grids");
        return false;
    }
    VkDescriptorBufferInfo info = {d->grids.buffer, 0, VK_WHOLE_SIZE};
    VkWriteDescriptorSet write = {.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
                                  .dstSet = d->grids_set, .dstBinding = 0,
                                  .descriptorCount = 1,
                                  .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                  .pBufferInfo = &info};
    vk.vkUpdateDescriptorSets(d->device, 1, &write, 0, NULL);
    return true;
}

static bool open_device(vk_device *d, VkPhysicalDevice pd, corral_error *err)
{
    d->physical = pd;
    VkPhysicalDeviceProperties props;
    vk.vkGetPhysicalDeviceProperties(pd, &props);
    d->max_range = props.limits.maxStorageBufferRange;
    d->align = props.limits.minStorageBufferOffsetAlignment;
    memcpy(d->max_groups, props.limits.maxComputeWorkGroupCount, sizeof d->max_groups);
    d->max_invocations = props.limits.maxComputeWorkGroupInvocations;
    if (props.limits.maxComputeWorkGroupSize[0] < d->max_invocations)
        d->max_invocations = props.limits.maxComputeWorkGroupSize[0];
    d->max_shared_bytes = props.limits.maxComputeSharedMemorySize;
    vk.vkGetPhysicalDeviceMemoryProperties(pd, &d->memory);

    VkQueueFamilyProperties families[16];
    uint32_t n_families = 16;
    vk.vkGetPhysicalDeviceQueueFamilyProperties(pd, &n_families, families);
    d->queue_family = UINT32_MAX;
    for (uint32_t f = 0; f < n_families && d->queue_family == UINT32_MAX; f++)
        if (families[f].queueFlags & VK_QUEUE_COMPUTE_BIT)
            d->queue_family = f;
    if (d->queue_family == UINT32_MAX) {
        corral_error_set(err, "%s has no compute queue", d->info.name);
        return false;
    }
    float priority = 1.0f;
    VkDeviceQueueCreateInfo qi = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                                  .queueFamilyIndex = d->queue_family, .queueCount = 1,
                                  .pQueuePriorities = &priority};
    /* integer dot products (the extension's feature) enabled where the device has them */
    VkPhysicalDeviceShaderIntegerDotProductFeaturesKHR dot = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES_KHR};
    if (device_has_extension(pd, VK_KHR_SHADER_INTEGER_DOT_PRODUCT_EXTENSION_NAME)) {
        VkPhysicalDeviceFeatures2 features = {
            .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &dot};
        vk.vkGetPhysicalDeviceFeatures2(pd, &features);
    }
    d->has_int_dot = dot.shaderIntegerDotProduct == VK_TRUE;
    d->int_dot = d->has_int_dot && !int_dot_refused();
    const char *extensions[] = {VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME,
                                VK_KHR_SHADER_INTEGER_DOT_PRODUCT_EXTENSION_NAME};
    VkDeviceCreateInfo di = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
                             .pNext = d->has_int_dot ? &dot : NULL,
                             .queueCreateInfoCount = 1, .pQueueCreateInfos = &qi,
                             .enabledExtensionCount = d->has_int_dot ? 2 : 1,
                             .ppEnabledExtensionNames = extensions};
    VkResult r = vk.vkCreateDevice(pd, &di, NULL, &d->device);
    if (r != VK_SUCCESS) {
        corral_error_set(err, "cannot open %s (VkResult %d)", d->info.name, (int)r);
        return false;
    }
    if (!vk_load_device(d->device)) {
        corral_error_set(err, "the Vulkan driver lacks a device function");
        return false;
    }
    vk.vkGetDeviceQueue(d->device, d->queue_family, 0, &d->queue);
    pthread_mutex_init(&d->queue_lock, NULL);
    if (!create_pipelines(d, err) || !vk_buffer_create(d, 256, false, &d->dummy, err) ||
        !upload_grids(d, err))
        return false;
    VkMemoryRequirements req;
    vk.vkGetBufferMemoryRequirements(d->device, d->dummy.buffer, &req);
    d->memory_align = req.alignment ? req.alignment : 1;
    return true;
}

/* What open_device made of a device that then failed (a driver lacking a device function
 * may have left the table without the destroyers: then the handles stay to the driver). */
static void close_device(vk_device *d)
{
    if (d->device && vk.vkDestroyDevice) {
        if (d->dummy.buffer)
            vk_buffer_free(d, &d->dummy);
        if (d->grids.buffer)
            vk_buffer_free(d, &d->grids);
        for (int p = 0; p < VK_PIPE_COUNT; p++) {
            if (d->pipelines[p])
                vk.vkDestroyPipeline(d->device, d->pipelines[p], NULL);
            if (d->other[p])
                vk.vkDestroyPipeline(d->device, d->other[p], NULL);
        }
        if (d->grids_pool) /* frees grids_set */
            vk.vkDestroyDescriptorPool(d->device, d->grids_pool, NULL);
        if (d->layout)
            vk.vkDestroyPipelineLayout(d->device, d->layout, NULL);
        if (d->grids_layout)
            vk.vkDestroyPipelineLayout(d->device, d->grids_layout, NULL);
        if (d->set_layout)
            vk.vkDestroyDescriptorSetLayout(d->device, d->set_layout, NULL);
        if (d->grids_set_layout)
            vk.vkDestroyDescriptorSetLayout(d->device, d->grids_set_layout, NULL);
        vk.vkDestroyDevice(d->device, NULL);
    }
    free(d);
}

vk_device *vk_device_open(int index, corral_error *err)
{
    pthread_mutex_lock(&open_lock);
    vk_device *result = NULL;
    if (open_failure[0]) {
        corral_error_set(err, "%s", open_failure);
        pthread_mutex_unlock(&open_lock);
        return NULL;
    }
    if (opened) {
        if (index < 0 || (uint32_t)index == opened->info.index)
            result = opened;
        else
            corral_error_set(err, "Vulkan device %u is already in use; this process opens one",
                             opened->info.index);
        pthread_mutex_unlock(&open_lock);
        return result;
    }
    pthread_mutex_unlock(&open_lock);

    vk_device_info infos[VK_MAX_DEVICES];
    size_t n;
    if (!vk_enumerate(infos, &n, err))
        return NULL;
    int chosen = index < 0 ? vk_choose(infos, n) : index;
    if (chosen < 0 || (size_t)chosen >= n) {
        corral_error_set(err, index < 0 ? "no usable Vulkan device" : "no Vulkan device %d",
                         index);
        return NULL;
    }
    if (!infos[chosen].usable) {
        corral_error_set(err, "Vulkan device %d (%s) is not usable: %s", chosen,
                         infos[chosen].name, infos[chosen].why_not);
        return NULL;
    }
    VkPhysicalDevice pds[VK_MAX_DEVICES];
    uint32_t count = VK_MAX_DEVICES;
    vk.vkEnumeratePhysicalDevices(instance, &count, pds);

    pthread_mutex_lock(&open_lock);
    if (!opened) {
        vk_device *d = calloc(1, sizeof *d);
        if (!d) {
            corral_error_set(err, "out of memory");
        } else {
            d->info = infos[chosen];
            d->instance = instance;
            corral_error why = {{0}};
            if (!open_device(d, pds[chosen], &why)) {
                snprintf(open_failure, sizeof open_failure, "%s", why.message);
                corral_error_set(err, "%s", why.message);
                close_device(d);
            } else {
                opened = d;
                log_printf(LOG_INFO,
                           "vulkan: using device %u, %s (%s, %.1f GiB free, integer dot "
                           "products %s)",
                           d->info.index, d->info.name, vk_device_type_name(d->info.type),
                           (double)d->info.free_bytes / (1024.0 * 1024.0 * 1024.0),
                           d->int_dot ? "on" : d->has_int_dot ? "off" : "absent");
            }
        }
    }
    result = opened;
    pthread_mutex_unlock(&open_lock);
    return result;
}

void vk_device_close(void)
{
    pthread_mutex_lock(&open_lock);
    if (opened) {
        pthread_mutex_destroy(&opened->queue_lock);
        close_device(opened);
        opened = NULL;
    }
    pthread_mutex_unlock(&open_lock);
}

/* ---- buffers ---- */

static int memory_type(const vk_device *d, uint32_t bits, VkMemoryPropertyFlags want)
{
    for (uint32_t i = 0; i < d->memory.memoryTypeCount; i++)
        if ((bits & (1u << i)) && (d->memory.memoryTypes[i].propertyFlags & want) == want)
            return (int)i;
    return -1;
}

/* The Vulkan size of a buffer of size bytes: whole words and then some, as the shaders
 * read every type as 32-bit words. */
static VkDeviceSize created_size(VkDeviceSize size)
{
    return (size + 15) / 16 * 16 + 16;
}

VkDeviceSize vk_buffer_footprint(const vk_device *dev, VkDeviceSize size)
{
    VkDeviceSize align = dev->memory_align ? dev->memory_align : 1;
    return (created_size(size) + align - 1) / align * align;
}

uint64_t vk_device_allocated(const vk_device *dev)
{
    return __atomic_load_n(&dev->allocated, __ATOMIC_RELAXED);
}

bool vk_buffer_create(vk_device *dev, VkDeviceSize size, bool host_visible, vk_buffer *out,
                      corral_error *err)
{
    *out = (vk_buffer){.size = size};
    VkBufferCreateInfo bi = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
                             .size = created_size(size),
                             .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT |
                                      VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                                      VK_BUFFER_USAGE_TRANSFER_DST_BIT,
                             .sharingMode = VK_SHARING_MODE_EXCLUSIVE};
    if (vk.vkCreateBuffer(dev->device, &bi, NULL, &out->buffer) != VK_SUCCESS) {
        corral_error_set(err, "cannot create a Vulkan buffer of %llu bytes",
                         (unsigned long long)size);
        return false;
    }
    VkMemoryRequirements req;
    vk.vkGetBufferMemoryRequirements(dev->device, out->buffer, &req);
    VkMemoryPropertyFlags host = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT |
                                 VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    int type = host_visible ? memory_type(dev, req.memoryTypeBits, host)
                            : memory_type(dev, req.memoryTypeBits,
                                          VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
    VkMemoryAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
                               .allocationSize = req.size, .memoryTypeIndex = (uint32_t)type};
    if (type < 0 || vk.vkAllocateMemory(dev->device, &ai, NULL, &out->memory) != VK_SUCCESS) {
        corral_error_set(err, "out of %s memory for %llu bytes on %s",
                         host_visible ? "host-visible" : "device", (unsigned long long)size,
                         dev->info.name);
        vk_buffer_free(dev, out);
        return false;
    }
    out->allocated = req.size;
    __atomic_add_fetch(&dev->allocated, (uint64_t)req.size, __ATOMIC_RELAXED);
    if (vk.vkBindBufferMemory(dev->device, out->buffer, out->memory, 0) != VK_SUCCESS ||
        (host_visible &&
         vk.vkMapMemory(dev->device, out->memory, 0, VK_WHOLE_SIZE, 0, &out->mapped) != VK_SUCCESS)) {
        corral_error_set(err, "cannot bind or map a Vulkan buffer");
        vk_buffer_free(dev, out);
        return false;
    }
    return true;
}

void vk_buffer_free(vk_device *dev, vk_buffer *b)
{
    if (b->mapped)
        vk.vkUnmapMemory(dev->device, b->memory);
    if (b->buffer)
        vk.vkDestroyBuffer(dev->device, b->buffer, NULL);
    if (b->memory)
        vk.vkFreeMemory(dev->device, b->memory, NULL);
    __atomic_sub_fetch(&dev->allocated, (uint64_t)b->allocated, __ATOMIC_RELAXED);
    *b = (vk_buffer){0};
}

enum { STAGING_BYTES = 32u << 20 };

/* Copies between b and a host-visible staging buffer, staging load by staging load. */
static bool staged_copy(vk_device *dev, vk_buffer *b, VkDeviceSize offset, void *host,
                        size_t size, bool to_device, corral_error *err)
{
    vk_buffer staging;
    vk_commands c;
    size_t cap = size < STAGING_BYTES ? size : STAGING_BYTES;
    if (!vk_buffer_create(dev, cap ? cap : 4, true, &staging, err))
        return false;
    if (!vk_commands_create(dev, &c, err)) {
        vk_buffer_free(dev, &staging);
        return false;
    }
    bool ok = true;
    for (size_t done = 0; done < size && ok; done += cap) {
        size_t n = size - done < cap ? size - done : cap;
        if (to_device)
            memcpy(staging.mapped, (const char *)host + done, n);
        vk_commands_begin(&c);
        VkBufferCopy region = to_device ? (VkBufferCopy){0, offset + done, n}
                                        : (VkBufferCopy){offset + done, 0, n};
        if (to_device)
            vk.vkCmdCopyBuffer(c.cmd, staging.buffer, b->buffer, 1, &region);
        else
            vk.vkCmdCopyBuffer(c.cmd, b->buffer, staging.buffer, 1, &region);
        ok = vk_commands_submit(&c, err);
        if (ok && !to_device)
            memcpy((char *)host + done, staging.mapped, n);
    }
    vk_commands_free(&c);
    vk_buffer_free(dev, &staging);
    return ok;
}

bool vk_buffer_write(vk_device *dev, vk_buffer *b, VkDeviceSize offset, const void *data,
                     size_t size, corral_error *err)
{
    if (b->mapped) {
        memcpy((char *)b->mapped + offset, data, size);
        return true;
    }
    return staged_copy(dev, b, offset, (void *)data, size, true, err);
}

bool vk_buffer_read(vk_device *dev, vk_buffer *b, VkDeviceSize offset, void *data, size_t size,
                    corral_error *err)
{
    if (b->mapped) {
        memcpy(data, (const char *)b->mapped + offset, size);
        return true;
    }
    return staged_copy(dev, b, offset, data, size, false, err);
}

/* ---- commands ---- */

bool vk_commands_create(vk_device *dev, vk_commands *c, corral_error *err)
{
    *c = (vk_commands){.dev = dev};
    VkCommandPoolCreateInfo pi = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                  .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
                                  .queueFamilyIndex = dev->queue_family};
    VkFenceCreateInfo fi = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    if (vk.vkCreateCommandPool(dev->device, &pi, NULL, &c->pool) != VK_SUCCESS ||
        vk.vkCreateFence(dev->device, &fi, NULL, &c->fence) != VK_SUCCESS) {
        corral_error_set(err, "cannot create a Vulkan command pool");
        vk_commands_free(c);
        return false;
    }
    VkCommandBufferAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                      .commandPool = c->pool,
                                      .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                      .commandBufferCount = 1};
    if (vk.vkAllocateCommandBuffers(dev->device, &ai, &c->cmd) != VK_SUCCESS) {
        corral_error_set(err, "cannot allocate a Vulkan command buffer");
        vk_commands_free(c);
        return false;
    }
    return true;
}

void vk_commands_free(vk_commands *c)
{
    if (!c->dev)
        return;
    if (c->fence)
        vk.vkDestroyFence(c->dev->device, c->fence, NULL);
    if (c->pool)
        vk.vkDestroyCommandPool(c->dev->device, c->pool, NULL); /* frees c->cmd */
    *c = (vk_commands){0};
}

void vk_commands_begin(vk_commands *c)
{
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                   .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
    vk.vkBeginCommandBuffer(c->cmd, &bi);
    c->rec = (vk_recording){0};
}

void vk_commands_barrier(vk_commands *c)
{
    VkMemoryBarrier barrier = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                               .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT,
                               .dstAccessMask = VK_ACCESS_SHADER_READ_BIT |
                                                VK_ACCESS_SHADER_WRITE_BIT |
                                                VK_ACCESS_HOST_READ_BIT |
                                                VK_ACCESS_TRANSFER_READ_BIT};
    vk.vkCmdPipelineBarrier(c->cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                            VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_HOST_BIT |
                                VK_PIPELINE_STAGE_TRANSFER_BIT,
                            0, 1, &barrier, 0, NULL, 0, NULL);
    c->rec.n_accesses = 0;
    c->rec.barriers++;
}

bool vk_commands_end(vk_commands *c, corral_error *err)
{
    if (c->rec.n_accesses > 0)
        vk_commands_barrier(c);
    if (vk.vkEndCommandBuffer(c->cmd) != VK_SUCCESS) {
        corral_error_set(err, "cannot record Vulkan commands on %s", c->dev->info.name);
        return false;
    }
    return true;
}

bool vk_commands_submit(vk_commands *c, corral_error *err)
{
    return vk_commands_end(c, err) && vk_commands_submit_recorded(c, &c->cmd, 1, err);
}

bool vk_commands_submit_recorded(vk_commands *c, const VkCommandBuffer *cmds, uint32_t n,
                                 corral_error *err)
{
    vk_device *d = c->dev;
    VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = n,
                       .pCommandBuffers = cmds};
    pthread_mutex_lock(&d->queue_lock);
    VkResult r = vk.vkQueueSubmit(d->queue, 1, &si, c->fence);
    pthread_mutex_unlock(&d->queue_lock);
    __atomic_add_fetch(&d->submits, 1, __ATOMIC_RELAXED);
    if (r == VK_SUCCESS)
        r = vk.vkWaitForFences(d->device, 1, &c->fence, VK_TRUE, UINT64_MAX);
    if (r == VK_SUCCESS)
        r = vk.vkResetFences(d->device, 1, &c->fence);
    if (r != VK_SUCCESS) {
        corral_error_set(err, "Vulkan submission failed on %s (VkResult %d)", d->info.name,
                         (int)r);
        return false;
    }
    return true;
}

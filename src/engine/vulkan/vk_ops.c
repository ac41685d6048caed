/* Recording the backend's operations (vk_ops.h). */
#include "vk_ops.h"

#include <assert.h>
#include <math.h>
#include <string.h>

#include "tensor_type.h"

bool vk_type_supported(uint32_t type)
{
    switch (type) {
    case TENSOR_TYPE_F32: case TENSOR_TYPE_F16: case TENSOR_TYPE_BF16: case TENSOR_TYPE_Q4_0:
    case TENSOR_TYPE_Q5_0: case TENSOR_TYPE_Q8_0: case TENSOR_TYPE_Q4_K: case TENSOR_TYPE_Q5_K:
    case TENSOR_TYPE_Q6_K: case TENSOR_TYPE_Q4_1: case TENSOR_TYPE_Q5_1: case TENSOR_TYPE_Q2_K:
    case TENSOR_TYPE_Q3_K: case TENSOR_TYPE_MXFP4: case TENSOR_TYPE_IQ4_NL:
    case TENSOR_TYPE_IQ4_XS: case TENSOR_TYPE_IQ2_XXS: case TENSOR_TYPE_IQ2_XS:
    case TENSOR_TYPE_IQ2_S: case TENSOR_TYPE_IQ3_XXS: case TENSOR_TYPE_IQ3_S:
    case TENSOR_TYPE_IQ1_S: case TENSOR_TYPE_IQ1_M:
        return true;
    default:
        return false;
    }
}

/* The byte range [begin, end) of a span. */
static vk_access access_of(vk_span s, bool written)
{
    VkDeviceSize end = s.size == VK_WHOLE_SIZE || s.size > UINT64_MAX - s.offset
                           ? UINT64_MAX : s.offset + s.size;
    return (vk_access){s.buffer, s.offset, end, written};
}

static bool overlap(const vk_access *a, const vk_access *b)
{
    return a->buffer == b->buffer && a->begin < b->end && b->begin < a->end;
}

/* Whether a dispatch touching these must wait for those since the last barrier: it reads
 * or writes what one of them wrote, or writes what one of them read. */
static bool hazard(const vk_recording *r, const vk_access *touched, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        for (uint32_t j = 0; j < r->n_accesses; j++)
            if ((touched[i].written || r->accesses[j].written) &&
                overlap(&touched[i], &r->accesses[j]))
                return true;
    return false;
}

/* The quantization kept in r no longer what its buffers hold once `w` is written. */
static void forget_quantized(vk_recording *r, const vk_access *w)
{
    if (r->quantized_kind && (overlap(w, &r->quantized_x) || w->buffer == r->quants ||
                              w->buffer == r->scales))
        r->quantized_kind = 0;
}

/* Bind, push and dispatch, after a barrier where the dispatch depends on one recorded since
 * the last (the recording ends with one: vk_commands_end). */
static void record(vk_commands *c, enum vk_pipeline pipe, const vk_span spans[VK_BINDINGS],
                   const void *params, size_t params_bytes, uint32_t gx, uint32_t gy,
                   uint32_t gz)
{
    const vk_device *d = c->dev;
    vk_recording *r = &c->rec;
    VkDescriptorBufferInfo infos[VK_BINDINGS];
    VkWriteDescriptorSet writes[VK_BINDINGS];
    vk_access touched[VK_BINDINGS];
    uint32_t n_touched = 0;
    for (uint32_t b = 0; b < VK_BINDINGS; b++) {
        vk_span s = spans[b].buffer ? spans[b] : vk_whole(&d->dummy);
        bool written = d->written[pipe] >> b & 1;
        /* an unbound binding is read as garbage by design; only a write to it is tracked */
        if (spans[b].buffer || written)
            touched[n_touched++] = access_of(s, written);
        infos[b] = (VkDescriptorBufferInfo){s.buffer, s.offset, s.size};
        writes[b] = (VkWriteDescriptorSet){.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
                                           .dstBinding = b, .descriptorCount = 1,
                                           .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                           .pBufferInfo = &infos[b]};
    }
    if (r->n_accesses + n_touched > VK_ACCESSES || hazard(r, touched, n_touched))
        vk_commands_barrier(c);
    for (uint32_t i = 0; i < n_touched; i++) {
        r->accesses[r->n_accesses++] = touched[i];
        if (touched[i].written)
            forget_quantized(r, &touched[i]);
    }
    uint8_t push[VK_PUSH_BYTES] = {0};
    memcpy(push, params, params_bytes);
    vk.vkCmdBindPipeline(c->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, d->pipelines[pipe]);
    vk.vkCmdPushDescriptorSetKHR(c->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, d->layout, 0,
                                 VK_BINDINGS, writes);
    /* after set 0: pushing set 0 again under either layout (compatible for set 0) leaves the
     * grids' set bound for the rest of the command buffer */
    if (d->reads_grids[pipe] && !r->grids_bound) {
        vk.vkCmdBindDescriptorSets(c->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, d->grids_layout,
                                   VK_GRIDS_SET, 1, &d->grids_set, 0, NULL);
        r->grids_bound = true;
    }
    vk.vkCmdPushConstants(c->cmd, d->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, VK_PUSH_BYTES, push);
    vk.vkCmdDispatch(c->cmd, gx, gy, gz);
    r->dispatches++;
}

/* Groups of a grid-stride loop over n elements, threads_per_group each. */
static uint32_t stride_groups(uint32_t n, uint32_t threads_per_group)
{
    uint32_t groups = (n + threads_per_group - 1) / threads_per_group;
    return groups < 1 ? 1 : groups > 4096 ? 4096 : groups;
}

void vk_op_rmsnorm(vk_commands *c, vk_span w, vk_span x, vk_span out, uint32_t n, uint32_t rows,
                   float eps)
{
    struct { uint32_t n; float eps; } p = {n, eps};
    vk_span spans[VK_BINDINGS] = {[0] = w, [1] = x, [4] = out};
    record(c, VK_PIPE_RMSNORM, spans, &p, sizeof p, rows, 1, 1);
}

void vk_op_add_rmsnorm(vk_commands *c, vk_span w, vk_span x, vk_span d, vk_span out, uint32_t n,
                       uint32_t rows, float eps)
{
    struct { uint32_t n; float eps; } p = {n, eps};
    vk_span spans[VK_BINDINGS] = {[0] = w, [1] = x, [2] = d, [4] = out};
    record(c, VK_PIPE_ADD_RMSNORM, spans, &p, sizeof p, rows, 1, 1);
}

void vk_op_layernorm(vk_commands *c, vk_span w, vk_span b, vk_span x, vk_span out, uint32_t n,
                     uint32_t rows, float eps)
{
    struct { uint32_t n; float eps; uint32_t has_bias; } p = {n, eps, b.buffer != VK_NULL_HANDLE};
    vk_span spans[VK_BINDINGS] = {[0] = w, [1] = x, [2] = b, [4] = out};
    record(c, VK_PIPE_LAYERNORM, spans, &p, sizeof p, rows, 1, 1);
}

VkDeviceSize vk_matmul_quants_bytes(uint64_t n_values)
{
    return n_values / 32 * 32 + 4;
}

VkDeviceSize vk_matmul_scales_bytes(uint64_t n_values)
{
    return n_values / 32 * 2 * sizeof(float) + 4; /* Q8_1's two floats a block */
}

static void quantize_q8(vk_commands *c, vk_span x, vk_span quants, vk_span scales,
                        uint32_t n_values, bool sums)
{
    struct { uint32_t n_blocks, sums; } p = {n_values / 32, sums};
    vk_span spans[VK_BINDINGS] = {[0] = x, [1] = quants, [2] = scales};
    record(c, VK_PIPE_QUANTIZE_Q8_0, spans, &p, sizeof p, stride_groups(p.n_blocks, 64), 1, 1);
}

void vk_op_quantize_q8_0(vk_commands *c, vk_span x, vk_span quants, vk_span scales,
                         uint32_t n_values)
{
    quantize_q8(c, x, quants, scales, n_values, false);
}

void vk_op_quantize_q8_1(vk_commands *c, vk_span x, vk_span quants, vk_span scales,
                         uint32_t n_values)
{
    quantize_q8(c, x, quants, scales, n_values, true);
}

void vk_op_quantize_q8_k(vk_commands *c, vk_span x, vk_span quants, vk_span scales,
                         uint32_t n_values)
{
    uint32_t n_blocks = n_values / 256;
    vk_span spans[VK_BINDINGS] = {[0] = x, [1] = quants, [2] = scales};
    record(c, VK_PIPE_QUANTIZE_Q8_K, spans, &n_blocks, sizeof n_blocks,
           stride_groups(n_blocks, 64), 1, 1);
}

/* Tokens a matrix product's workgroup takes, each weight read once for all of them (TOKENS
 * in matmul.glsl). */
enum { MATMUL_TOKENS = 8 };

/* The tiled product's tile (TILE_ROWS, TILE_TOKENS in matmul_tiled.glsl), and the tokens
 * from which it takes over: below them most of a tile's tokens would be padding, and the
 * per-row kernel, whose groups of 8 tokens waste little, spreads fewer tokens over more
 * groups. */
enum { TILED_ROWS = 64, TILED_TOKENS = 64, TILED_FROM_TOKENS = 32 };

static enum vk_pipeline matmul_pipeline(uint32_t type)
{
    switch (type) {
    case TENSOR_TYPE_F32: return VK_PIPE_MATMUL_F32;
    case TENSOR_TYPE_F16: return VK_PIPE_MATMUL_F16;
    case TENSOR_TYPE_Q4_0: return VK_PIPE_MATMUL_Q4_0;
    case TENSOR_TYPE_BF16: return VK_PIPE_MATMUL_BF16;
    case TENSOR_TYPE_Q5_0: return VK_PIPE_MATMUL_Q5_0;
    case TENSOR_TYPE_Q4_K: return VK_PIPE_MATMUL_Q4_K;
    case TENSOR_TYPE_Q5_K: return VK_PIPE_MATMUL_Q5_K;
    case TENSOR_TYPE_Q6_K: return VK_PIPE_MATMUL_Q6_K;
    case TENSOR_TYPE_Q4_1: return VK_PIPE_MATMUL_Q4_1;
    case TENSOR_TYPE_Q5_1: return VK_PIPE_MATMUL_Q5_1;
    case TENSOR_TYPE_Q2_K: return VK_PIPE_MATMUL_Q2_K;
    case TENSOR_TYPE_Q3_K: return VK_PIPE_MATMUL_Q3_K;
    case TENSOR_TYPE_MXFP4: return VK_PIPE_MATMUL_MXFP4;
    case TENSOR_TYPE_IQ4_NL: return VK_PIPE_MATMUL_IQ4_NL;
    case TENSOR_TYPE_IQ4_XS: return VK_PIPE_MATMUL_IQ4_XS;
    case TENSOR_TYPE_IQ2_XXS: return VK_PIPE_MATMUL_IQ2_XXS;
    case TENSOR_TYPE_IQ2_XS: return VK_PIPE_MATMUL_IQ2_XS;
    case TENSOR_TYPE_IQ2_S: return VK_PIPE_MATMUL_IQ2_S;
    case TENSOR_TYPE_IQ3_XXS: return VK_PIPE_MATMUL_IQ3_XXS;
    case TENSOR_TYPE_IQ3_S: return VK_PIPE_MATMUL_IQ3_S;
    case TENSOR_TYPE_IQ1_S: return VK_PIPE_MATMUL_IQ1_S;
    case TENSOR_TYPE_IQ1_M: return VK_PIPE_MATMUL_IQ1_M;
    default: return VK_PIPE_MATMUL_Q8_0;
    }
}

/* The tiled product's pipeline for `type` weights (matmul_tiled.glsl). */
static enum vk_pipeline matmul_tiled_pipeline(uint32_t type)
{
    switch (type) {
    case TENSOR_TYPE_F32: return VK_PIPE_MATMUL_TILED_F32;
    case TENSOR_TYPE_F16: return VK_PIPE_MATMUL_TILED_F16;
    case TENSOR_TYPE_Q4_0: return VK_PIPE_MATMUL_TILED_Q4_0;
    case TENSOR_TYPE_BF16: return VK_PIPE_MATMUL_TILED_BF16;
    case TENSOR_TYPE_Q5_0: return VK_PIPE_MATMUL_TILED_Q5_0;
    case TENSOR_TYPE_Q4_K: return VK_PIPE_MATMUL_TILED_Q4_K;
    case TENSOR_TYPE_Q5_K: return VK_PIPE_MATMUL_TILED_Q5_K;
    case TENSOR_TYPE_Q6_K: return VK_PIPE_MATMUL_TILED_Q6_K;
    case TENSOR_TYPE_Q4_1: return VK_PIPE_MATMUL_TILED_Q4_1;
    case TENSOR_TYPE_Q5_1: return VK_PIPE_MATMUL_TILED_Q5_1;
    case TENSOR_TYPE_Q2_K: return VK_PIPE_MATMUL_TILED_Q2_K;
    case TENSOR_TYPE_Q3_K: return VK_PIPE_MATMUL_TILED_Q3_K;
    case TENSOR_TYPE_MXFP4: return VK_PIPE_MATMUL_TILED_MXFP4;
    case TENSOR_TYPE_IQ4_NL: return VK_PIPE_MATMUL_TILED_IQ4_NL;
    case TENSOR_TYPE_IQ4_XS: return VK_PIPE_MATMUL_TILED_IQ4_XS;
    case TENSOR_TYPE_IQ2_XXS: return VK_PIPE_MATMUL_TILED_IQ2_XXS;
    case TENSOR_TYPE_IQ2_XS: return VK_PIPE_MATMUL_TILED_IQ2_XS;
    case TENSOR_TYPE_IQ2_S: return VK_PIPE_MATMUL_TILED_IQ2_S;
    case TENSOR_TYPE_IQ3_XXS: return VK_PIPE_MATMUL_TILED_IQ3_XXS;
    case TENSOR_TYPE_IQ3_S: return VK_PIPE_MATMUL_TILED_IQ3_S;
    case TENSOR_TYPE_IQ1_S: return VK_PIPE_MATMUL_TILED_IQ1_S;
    case TENSOR_TYPE_IQ1_M: return VK_PIPE_MATMUL_TILED_IQ1_M;
    default: return VK_PIPE_MATMUL_TILED_Q8_0;
    }
}

/* What a product's activations are quantized to first: the CPU's partner of each type (the
 * float types round their floats in the shader itself). */
enum activations { ACT_F32, ACT_Q8_0, ACT_Q8_1, ACT_Q8_K };

static enum activations matmul_activations(uint32_t type)
{
    switch (type) {
    case TENSOR_TYPE_Q4_0: case TENSOR_TYPE_Q5_0: case TENSOR_TYPE_Q8_0: case TENSOR_TYPE_MXFP4:
    case TENSOR_TYPE_IQ4_NL:
        return ACT_Q8_0;
    case TENSOR_TYPE_Q4_1: case TENSOR_TYPE_Q5_1:
        return ACT_Q8_1;
    case TENSOR_TYPE_Q2_K: case TENSOR_TYPE_Q3_K: case TENSOR_TYPE_Q4_K: case TENSOR_TYPE_Q5_K:
    case TENSOR_TYPE_Q6_K: case TENSOR_TYPE_IQ4_XS: case TENSOR_TYPE_IQ2_XXS:
    case TENSOR_TYPE_IQ2_XS: case TENSOR_TYPE_IQ2_S: case TENSOR_TYPE_IQ3_XXS:
    case TENSOR_TYPE_IQ3_S: case TENSOR_TYPE_IQ1_S: case TENSOR_TYPE_IQ1_M:
        return ACT_Q8_K;
    default:
        return ACT_F32;
    }
}

void vk_op_matmul(vk_commands *c, uint32_t type, vk_span w, size_t row_bytes, vk_span x,
                  vk_span quants, vk_span scales, vk_span y, uint32_t n_in, uint32_t n_out,
                  uint32_t n_tokens)
{
    vk_op_matmul_rows(c, type, w, row_bytes, x, quants, scales, y, n_in, n_out, n_tokens, 0,
                      n_out);
}

/* The buffers' quantization of `from` (n_values floats) as `kind`, for the products after
 * it (quantize_input). */
static void remember_quantized(vk_recording *r, vk_access from, vk_span quants, vk_span scales,
                               uint32_t n_values, enum activations kind)
{
    r->quantized_x = from;
    r->quants = quants.buffer;
    r->scales = scales.buffer;
    r->quants_offset = quants.offset;
    r->scales_offset = scales.offset;
    r->quantized_values = n_values;
    r->quantized_kind = kind;
}

/* x quantized for a product with `type` weights (nothing for the float types); whether it
 * was. Products of one input in a row (the q, k and v projections, the gate and up ones, the
 * parts of a split matrix) quantize it once: the same floats give the same quants. */
static bool quantize_input(vk_commands *c, uint32_t type, vk_span x, vk_span quants,
                           vk_span scales, uint32_t n_values)
{
    enum activations partner = matmul_activations(type);
    if (partner == ACT_F32)
        return false;
    vk_recording *r = &c->rec;
    vk_access from = access_of(x, false);
    if (r->quantized_kind == partner && r->quantized_values == n_values &&
        r->quantized_x.buffer == from.buffer && r->quantized_x.begin == from.begin &&
        r->quantized_x.end == from.end && r->quants == quants.buffer &&
        r->quants_offset == quants.offset && r->scales == scales.buffer &&
        r->scales_offset == scales.offset)
        return true;
    if (partner == ACT_Q8_K)
        vk_op_quantize_q8_k(c, x, quants, scales, n_values);
    else if (partner == ACT_Q8_1)
        vk_op_quantize_q8_1(c, x, quants, scales, n_values);
    else
        vk_op_quantize_q8_0(c, x, quants, scales, n_values);
    remember_quantized(r, from, quants, scales, n_values, partner);
    return true;
}

void vk_op_rmsnorm_quantize(vk_commands *c, vk_span w, vk_span x, vk_span d, vk_span out,
                            uint32_t n, uint32_t rows, float eps, uint32_t type,
                            vk_span quants, vk_span scales)
{
    enum activations partner = matmul_activations(type);
    uint32_t block = partner == ACT_Q8_K ? 256 : 32;
    if (partner == ACT_F32 || n % block != 0) {
        if (d.buffer)
            vk_op_add_rmsnorm(c, w, x, d, out, n, rows, eps);
        else
            vk_op_rmsnorm(c, w, x, out, n, rows, eps);
        return;
    }
    /* rmsnorm_quantize.comp's kinds */
    uint32_t kind = partner == ACT_Q8_K ? 2 : partner == ACT_Q8_1 ? 1 : 0;
    struct { uint32_t n; float eps; uint32_t add, kind; } p = {n, eps, d.buffer != VK_NULL_HANDLE,
                                                               kind};
    vk_span spans[VK_BINDINGS] = {w, x, d, quants, out, scales};
    record(c, VK_PIPE_RMSNORM_QUANTIZE, spans, &p, sizeof p, rows, 1, 1);
    remember_quantized(&c->rec, access_of(out, false), quants, scales, n * rows, partner);
}

void vk_op_swiglu_quantize(vk_commands *c, vk_span gate, vk_span up, uint32_t n, uint32_t type,
                           vk_span quants, vk_span scales)
{
    enum activations partner = matmul_activations(type);
    uint32_t block = partner == ACT_Q8_K ? 256 : 32;
    if (partner == ACT_F32 || n % block != 0) {
        vk_op_swiglu(c, gate, up, n);
        return;
    }
    /* swiglu_quantize.comp's kinds, one thread a block */
    struct { uint32_t n, kind; } p = {n, partner == ACT_Q8_K ? 2 : partner == ACT_Q8_1 ? 1 : 0};
    vk_span spans[VK_BINDINGS] = {gate, up, quants, scales};
    record(c, VK_PIPE_SWIGLU_QUANTIZE, spans, &p, sizeof p, stride_groups(n / block, 64), 1, 1);
    remember_quantized(&c->rec, access_of(gate, false), quants, scales, n, partner);
}

void vk_op_matmul_rows(vk_commands *c, uint32_t type, vk_span w, size_t row_bytes, vk_span x,
                       vk_span quants, vk_span scales, vk_span y, uint32_t n_in, uint32_t n_out,
                       uint32_t n_tokens, uint32_t row0, uint32_t ldy)
{
    bool quantized = quantize_input(c, type, x, quants, scales, n_in * n_tokens);
    vk_span spans[VK_BINDINGS] = {[0] = w, [1] = x, [4] = y};
    if (quantized) {
        spans[2] = quants;
        spans[3] = scales;
    }
    const vk_device *d = c->dev;
    if (n_tokens >= TILED_FROM_TOKENS && vk_device_fits_tiled(d)) {
        /* tiles of rows beyond the device's group count go to further z layers */
        uint32_t row_tiles = (n_out + TILED_ROWS - 1) / TILED_ROWS;
        uint32_t tiles_per_z = row_tiles < d->max_groups[0] ? row_tiles : d->max_groups[0];
        struct { uint32_t n_in, n_out, n_tokens, row_bytes, tiles_per_z, row0, ldy; } p = {
            n_in, n_out, n_tokens, (uint32_t)row_bytes, tiles_per_z, row0, ldy};
        record(c, matmul_tiled_pipeline(type), spans, &p, sizeof p, tiles_per_z,
               (n_tokens + TILED_TOKENS - 1) / TILED_TOKENS,
               (row_tiles + tiles_per_z - 1) / tiles_per_z);
        return;
    }
    /* rows beyond the device's group count go to further z layers */
    uint32_t rows_per_z = n_out < d->max_groups[0] ? n_out : d->max_groups[0];
    struct { uint32_t n_in, n_out, n_tokens, row_bytes, rows_per_z, row0, ldy; } p = {
        n_in, n_out, n_tokens, (uint32_t)row_bytes, rows_per_z, row0, ldy};
    record(c, matmul_pipeline(type), spans, &p, sizeof p, rows_per_z,
           (n_tokens + MATMUL_TOKENS - 1) / MATMUL_TOKENS, (n_out + rows_per_z - 1) / rows_per_z);
}

void vk_op_matmul_experts(vk_commands *c, uint32_t type, vk_span w, size_t row_bytes, vk_span x,
                          vk_span quants, vk_span scales, vk_span ids, vk_span y, uint32_t n_in,
                          uint32_t expert_rows, uint32_t n_pairs, uint32_t pairs_per_x,
                          uint32_t expert0, uint32_t n_experts)
{
    bool quantized = quantize_input(c, type, x, quants, scales, n_in * (n_pairs / pairs_per_x));
    uint32_t rows_per_z = expert_rows < c->dev->max_groups[0] ? expert_rows
                                                               : c->dev->max_groups[0];
    struct {
        uint32_t n_in, n_out, n_tokens, row_bytes, rows_per_z, row0, ldy, pairs_per_x, expert0,
            n_experts;
    } p = {n_in, expert_rows, n_pairs, (uint32_t)row_bytes, rows_per_z, 0, expert_rows,
           pairs_per_x, expert0, n_experts};
    vk_span spans[VK_BINDINGS] = {[0] = w, [1] = x, [4] = y, [5] = ids};
    if (quantized) {
        spans[2] = quants;
        spans[3] = scales;
    }
    record(c, matmul_pipeline(type), spans, &p, sizeof p, rows_per_z, n_pairs,
           (expert_rows + rows_per_z - 1) / rows_per_z);
}

_Static_assert((int)VK_MOE_ROW_TILE == (int)MATMUL_TOKENS, "the per-row kernel's tile");
_Static_assert((int)VK_MOE_TILED_TILE == (int)TILED_TOKENS, "the tiled kernel's tile");

uint32_t vk_moe_tile(const vk_device *d, uint32_t n_pairs, uint32_t n_expert)
{
    /* as for a dense product, from TILED_FROM_TOKENS tokens an expert on average: below,
     * most of a tile's tokens would be padding */
    return vk_device_fits_tiled(d) && (uint64_t)n_pairs >= (uint64_t)TILED_FROM_TOKENS * n_expert
               ? VK_MOE_TILED_TILE : VK_MOE_ROW_TILE;
}

uint32_t vk_moe_max_tiles(uint32_t n_pairs, uint32_t n_expert, uint32_t tile)
{
    /* an expert's run of c slots takes ceil(c / tile) tiles: at most its whole tiles and
     * one more, and no tile is empty */
    uint32_t bound = n_pairs / tile + n_expert;
    return bound < n_pairs ? bound : n_pairs;
}

void vk_op_moe_group(vk_commands *c, vk_span ids, vk_span slot_of, vk_span slot_rows,
                     vk_span slot_ids, vk_span tiles, uint32_t n_pairs, uint32_t n_expert,
                     uint32_t pairs_per_row, uint32_t tile)
{
    assert(tile == VK_MOE_ROW_TILE || tile == VK_MOE_TILED_TILE);
    struct { uint32_t n_pairs, n_expert, pairs_per_row, tile, max_tiles; } p = {
        n_pairs, n_expert, pairs_per_row, tile, vk_moe_max_tiles(n_pairs, n_expert, tile)};
    vk_span spans[VK_BINDINGS] = {ids, slot_of, slot_rows, slot_ids, tiles};
    record(c, VK_PIPE_MOE_GROUP, spans, &p, sizeof p, 1, 1, 1);
}

void vk_op_matmul_expert_tiles(vk_commands *c, uint32_t type, vk_span w, size_t row_bytes,
                               vk_span x, vk_span quants, vk_span scales, vk_span tiles,
                               vk_span y, uint32_t n_in, uint32_t expert_rows,
                               uint32_t n_slots, uint32_t max_tiles, uint32_t tile,
                               uint32_t expert0, uint32_t n_experts)
{
    bool quantized = quantize_input(c, type, x, quants, scales, n_in * n_slots);
    const vk_device *d = c->dev;
    if (tile == VK_MOE_TILED_TILE) {
        assert(vk_device_fits_tiled(d));
        uint32_t row_tiles = (expert_rows + TILED_ROWS - 1) / TILED_ROWS;
        uint32_t tiles_per_z = row_tiles < d->max_groups[0] ? row_tiles : d->max_groups[0];
        struct {
            uint32_t n_in, n_out, n_tokens, row_bytes, tiles_per_z, row0, ldy, expert0,
                n_experts, experts;
        } p = {n_in, expert_rows, n_slots, (uint32_t)row_bytes, tiles_per_z, 0, expert_rows,
               expert0, n_experts, 1};
        vk_span spans[VK_BINDINGS] = {[0] = w, [1] = x, [4] = y, [5] = tiles};
        if (quantized) {
            spans[2] = quants;
            spans[3] = scales;
        }
        record(c, matmul_tiled_pipeline(type), spans, &p, sizeof p, tiles_per_z, max_tiles,
               (row_tiles + tiles_per_z - 1) / tiles_per_z);
        return;
    }
    assert(tile == VK_MOE_ROW_TILE);
    uint32_t rows_per_z = expert_rows < d->max_groups[0] ? expert_rows : d->max_groups[0];
    struct {
        uint32_t n_in, n_out, n_tokens, row_bytes, rows_per_z, row0, ldy, pairs_per_x, expert0,
            n_experts, tiled;
    } p = {n_in, expert_rows, n_slots, (uint32_t)row_bytes, rows_per_z, 0, expert_rows, 1,
           expert0, n_experts, 1};
    vk_span spans[VK_BINDINGS] = {[0] = w, [1] = x, [4] = y, [5] = tiles};
    if (quantized) {
        spans[2] = quants;
        spans[3] = scales;
    }
    record(c, matmul_pipeline(type), spans, &p, sizeof p, rows_per_z, max_tiles,
           (expert_rows + rows_per_z - 1) / rows_per_z);
}

void vk_op_rope(vk_commands *c, vk_span cos_sin, vk_span x, uint32_t n_tokens, uint32_t n_heads,
                uint32_t head_dim, uint32_t n_rot, bool neox)
{
    struct { uint32_t n_heads, head_dim, n_rot, mode; } p = {n_heads, head_dim, n_rot, neox};
    vk_span spans[VK_BINDINGS] = {[0] = cos_sin, [1] = x};
    record(c, VK_PIPE_ROPE, spans, &p, sizeof p, n_tokens, n_heads, 1);
}

void vk_op_rope_halves(vk_commands *c, vk_span cos_sin, vk_span x, uint32_t n_tokens,
                       uint32_t n_heads, uint32_t head_dim)
{
    struct { uint32_t n_heads, head_dim, n_rot, mode; } p = {n_heads, head_dim, head_dim, 2};
    vk_span spans[VK_BINDINGS] = {[0] = cos_sin, [1] = x};
    record(c, VK_PIPE_ROPE, spans, &p, sizeof p, n_tokens, n_heads, 1);
}

void vk_op_clamp(vk_commands *c, vk_span x, uint32_t n, float lo, float hi)
{
    struct { uint32_t n, y_n, op; float lo, hi; } p = {n, 1, 7, lo, hi};
    vk_span spans[VK_BINDINGS] = {[0] = x};
    record(c, VK_PIPE_BINARY, spans, &p, sizeof p, stride_groups(n, 256), 1, 1);
}

void vk_op_kv_store(vk_commands *c, vk_span tokens, vk_span x, vk_span cache,
                    const vk_cache_shape *shape, uint32_t n_tokens)
{
    vk_rope none = {0}; /* n_rot 0: nothing turned */
    vk_op_kv_store_rope(c, tokens, x, cache, shape, n_tokens, &none);
}

void vk_op_kv_store_rope(vk_commands *c, vk_span tokens, vk_span x, vk_span cache,
                         const vk_cache_shape *shape, uint32_t n_tokens, const vk_rope *rope)
{
    struct { uint32_t n_head_kv, head_dim, n_cells, f16, n_rot, mode; } p = {
        shape->n_head_kv, shape->head_dim, shape->n_cells, shape->f16, rope->n_rot,
        rope->neox};
    vk_span spans[VK_BINDINGS] = {[0] = tokens, [1] = x, [2] = rope->cos_sin, [4] = cache};
    record(c, VK_PIPE_KV_STORE, spans, &p, sizeof p, n_tokens, shape->n_head_kv, 1);
}

void vk_op_kv_shift(vk_commands *c, vk_span cos_sin, vk_span cache, const vk_cache_shape *shape,
                    const vk_shift *s)
{
    struct {
        uint32_t n_head_kv, head_dim, n_cells, f16, seq, src, dst, n_rot, mode, rotate;
    } p = {shape->n_head_kv, shape->head_dim, shape->n_cells, shape->f16, s->seq, s->src,
           s->dst, s->n_rot, s->neox, s->rotate};
    vk_span spans[VK_BINDINGS] = {[0] = cos_sin, [4] = cache};
    record(c, VK_PIPE_KV_SHIFT, spans, &p, sizeof p, s->n, shape->n_head_kv, 1);
}

/* attention.comp's push constants: the shape's, then what each variant adds. */
typedef struct attention_params {
    uint32_t n_head, n_head_kv, head_dim_k, head_dim_v, n_cells, f16;
    float scale, softcap;
    uint32_t window, last_at, has_sinks, first_at, around, alibi;
} attention_params;

static attention_params attention_params_of(const vk_attention_shape *s)
{
    return (attention_params){s->n_head, s->n_head_kv, s->head_dim_k, s->head_dim_v, s->n_cells,
                              s->f16, s->scale, s->softcap, s->window, s->last_at,
                              .around = s->around};
}

void vk_op_attention(vk_commands *c, vk_span tokens, vk_span q, vk_span k, vk_span v,
                     vk_span out, const vk_attention_shape *s)
{
    attention_params p = attention_params_of(s);
    vk_span spans[VK_BINDINGS] = {tokens, q, k, v, out};
    record(c, VK_PIPE_ATTENTION, spans, &p, sizeof p, s->n_tokens, s->n_head, 1);
}

void vk_op_attention_sinks(vk_commands *c, vk_span tokens, vk_span q, vk_span k, vk_span v,
                           vk_span sinks, vk_span out, const vk_attention_shape *s)
{
    attention_params p = attention_params_of(s);
    p.has_sinks = sinks.buffer != VK_NULL_HANDLE;
    vk_span spans[VK_BINDINGS] = {tokens, q, k, v, out, sinks};
    record(c, VK_PIPE_ATTENTION, spans, &p, sizeof p, s->n_tokens, s->n_head, 1);
}

void vk_op_attention_alibi(vk_commands *c, vk_span tokens, vk_span q, vk_span k, vk_span v,
                           vk_span slopes, vk_span out, const vk_attention_shape *s)
{
    attention_params p = attention_params_of(s);
    p.alibi = 1;
    vk_span spans[VK_BINDINGS] = {tokens, q, k, v, out, slopes};
    record(c, VK_PIPE_ATTENTION, spans, &p, sizeof p, s->n_tokens, s->n_head, 1);
}

void vk_op_attention_from(vk_commands *c, vk_span tokens, vk_span q, vk_span k, vk_span v,
                          vk_span out, const vk_attention_shape *s, uint32_t first_at)
{
    attention_params p = attention_params_of(s);
    p.first_at = first_at;
    vk_span spans[VK_BINDINGS] = {tokens, q, k, v, out};
    record(c, VK_PIPE_ATTENTION, spans, &p, sizeof p, s->n_tokens, s->n_head, 1);
}

void vk_op_swiglu(vk_commands *c, vk_span gate, vk_span up, uint32_t n)
{
    vk_span spans[VK_BINDINGS] = {[0] = gate, [1] = up};
    record(c, VK_PIPE_SWIGLU, spans, &n, sizeof n, stride_groups(n, 256), 1, 1);
}

static void gelu_table_op(vk_commands *c, vk_span table, vk_span x, vk_span up, uint32_t n,
                          bool whole)
{
    struct { uint32_t n, gated, whole; } p = {n, up.buffer != VK_NULL_HANDLE, whole};
    vk_span spans[VK_BINDINGS] = {[0] = x, [1] = up, [2] = table};
    record(c, VK_PIPE_GELU, spans, &p, sizeof p, stride_groups(n, 256), 1, 1);
}

void vk_op_gelu(vk_commands *c, vk_span table, vk_span x, vk_span up, uint32_t n)
{
    gelu_table_op(c, table, x, up, n, false);
}

void vk_op_gelu_quick(vk_commands *c, vk_span table, vk_span x, vk_span up, uint32_t n)
{
    gelu_table_op(c, table, x, up, n, true);
}

void vk_op_binary(vk_commands *c, enum vk_binary op, vk_span x, vk_span y, uint32_t n,
                  uint32_t y_n, float scale)
{
    struct { uint32_t n, y_n, op; float scale; } p = {n, y_n ? y_n : 1, (uint32_t)op, scale};
    vk_span spans[VK_BINDINGS] = {[0] = x, [1] = y};
    record(c, VK_PIPE_BINARY, spans, &p, sizeof p, stride_groups(n, 256), 1, 1);
}

void vk_op_softmax(vk_commands *c, vk_span x, uint32_t n, uint32_t rows, float scale)
{
    struct { uint32_t n; float scale; } p = {n, scale};
    vk_span spans[VK_BINDINGS] = {[0] = x};
    record(c, VK_PIPE_SOFTMAX, spans, &p, sizeof p, rows, 1, 1);
}

void vk_op_get_rows(vk_commands *c, uint32_t type, vk_span w, size_t row_bytes, vk_span ids,
                    vk_span out, uint32_t n, uint32_t n_ids)
{
    struct { uint32_t n, row_bytes, type; } p = {n, (uint32_t)row_bytes, type};
    vk_span spans[VK_BINDINGS] = {[0] = w, [1] = ids, [4] = out};
    record(c, VK_PIPE_GET_ROWS, spans, &p, sizeof p, n_ids, 1, 1);
}

void vk_op_swiglu_oai(vk_commands *c, vk_span gate, vk_span up, uint32_t n, float alpha,
                      float limit)
{
    struct { uint32_t n; float alpha, limit; } p = {n, alpha, limit};
    vk_span spans[VK_BINDINGS] = {[0] = gate, [1] = up};
    record(c, VK_PIPE_SWIGLU_OAI, spans, &p, sizeof p, stride_groups(n, 256), 1, 1);
}

void vk_op_copy_rows(vk_commands *c, vk_span src, vk_span dst, const vk_rows *r)
{
    struct { uint32_t count, width, src_offset, src_stride, dst_offset, dst_stride; } p = {
        r->rows * r->width, r->width, r->src_offset, r->src_stride, r->dst_offset,
        r->dst_stride};
    vk_span spans[VK_BINDINGS] = {[0] = src, [4] = dst};
    record(c, VK_PIPE_COPY_ROWS, spans, &p, sizeof p, stride_groups(p.count, 256), 1, 1);
}

void vk_op_moe_route(vk_commands *c, enum vk_route mode, vk_span logits, vk_span ids,
                     vk_span weights, uint32_t n_expert, uint32_t n_used, uint32_t n_tokens)
{
    struct { uint32_t n_expert, n_used, mode; } p = {n_expert, n_used, (uint32_t)mode};
    vk_span spans[VK_BINDINGS] = {[0] = logits, [2] = ids, [3] = weights};
    record(c, VK_PIPE_MOE_ROUTE, spans, &p, sizeof p, n_tokens, 1, 1);
}

/* moe_route.comp's mode 2 and its flags. */
enum { ROUTE_MODE_SCORED = 2, ROUTE_SIGMOID = 1, ROUTE_NORM = 2, ROUTE_BIAS = 4 };

void vk_op_moe_route_scored(vk_commands *c, const vk_route_scored *r, vk_span logits,
                            vk_span bias, vk_span ids, vk_span weights, uint32_t n_tokens)
{
    struct {
        uint32_t n_expert, n_used, mode, n_groups, n_group_used, flags;
        float scale;
    } p = {r->n_expert, r->n_used, ROUTE_MODE_SCORED, r->n_groups, r->n_group_used,
           (r->sigmoid ? ROUTE_SIGMOID : 0u) | (r->norm ? ROUTE_NORM : 0u) |
               (bias.buffer ? ROUTE_BIAS : 0u),
           r->scale};
    vk_span spans[VK_BINDINGS] = {[0] = logits, [1] = bias, [2] = ids, [3] = weights};
    record(c, VK_PIPE_MOE_ROUTE, spans, &p, sizeof p, n_tokens, 1, 1);
}

void vk_op_moe_bias(vk_commands *c, vk_span bias, vk_span ids, vk_span y, uint32_t n,
                    uint32_t n_pairs)
{
    struct { uint32_t count, n; } p = {n * n_pairs, n};
    vk_span spans[VK_BINDINGS] = {[0] = bias, [1] = ids, [4] = y};
    record(c, VK_PIPE_MOE_BIAS, spans, &p, sizeof p, stride_groups(p.count, 256), 1, 1);
}

void vk_op_moe_combine(vk_commands *c, vk_span experts, vk_span weights, vk_span out,
                       uint32_t n, uint32_t n_used, uint32_t n_tokens)
{
    vk_op_moe_combine_slots(c, experts, weights, (vk_span){0}, out, n, n_used, n_tokens);
}

/* moe_combine.comp's modes */
enum { MOE_COMBINE, MOE_COMBINE_UNWEIGHTED, MOE_WEIGH_INPUTS };

static void moe_rows(vk_commands *c, uint32_t mode, vk_span rows, vk_span weights,
                     vk_span slot_of, vk_span out, uint32_t count, uint32_t n, uint32_t n_used)
{
    struct { uint32_t count, n, n_used, slotted, mode; } p = {
        count, n, n_used, slot_of.buffer != VK_NULL_HANDLE, mode};
    vk_span spans[VK_BINDINGS] = {[0] = rows, [1] = weights, [2] = slot_of, [4] = out};
    record(c, VK_PIPE_MOE_COMBINE, spans, &p, sizeof p, stride_groups(p.count, 256), 1, 1);
}

void vk_op_moe_combine_slots(vk_commands *c, vk_span experts, vk_span weights, vk_span slot_of,
                             vk_span out, uint32_t n, uint32_t n_used, uint32_t n_tokens)
{
    moe_rows(c, weights.buffer != VK_NULL_HANDLE ? MOE_COMBINE : MOE_COMBINE_UNWEIGHTED,
             experts, weights, slot_of, out, n * n_tokens, n, n_used);
}

void vk_op_moe_weigh_inputs(vk_commands *c, vk_span x, vk_span weights, vk_span slot_of,
                            vk_span out, uint32_t n, uint32_t n_used, uint32_t n_tokens)
{
    moe_rows(c, MOE_WEIGH_INPUTS, x, weights, slot_of, out, n * n_used * n_tokens, n, n_used);
}

/* Every conv is one shader: `channels` floats at `offset` of rows `stride` apart, a bias or
 * none, and LFM2's rows and gates (gated) or silu. */
typedef struct conv_params {
    uint32_t channels, taps, n_tokens, stride, offset, gated, has_bias;
} conv_params;

static void short_conv(vk_commands *c, vk_span kernels, vk_span bias, vk_span tokens,
                       vk_span window, vk_span x, const conv_params *p)
{
    vk_span spans[VK_BINDINGS] = {[0] = kernels, [1] = tokens, [2] = window, [3] = bias,
                                  [4] = x};
    record(c, VK_PIPE_DELTA_CONV, spans, p, sizeof *p, (p->channels + 63) / 64, 1, 1);
}

void vk_op_delta_conv(vk_commands *c, vk_span kernels, vk_span tokens, vk_span window,
                      vk_span x, uint32_t channels, uint32_t taps, uint32_t n_tokens)
{
    conv_params p = {channels, taps, n_tokens, channels, 0, false, false};
    short_conv(c, kernels, (vk_span){0}, tokens, window, x, &p);
}

void vk_op_gated_short_conv(vk_commands *c, vk_span kernels, vk_span tokens, vk_span window,
                            vk_span x, uint32_t channels, uint32_t taps, uint32_t n_tokens)
{
    conv_params p = {channels, taps, n_tokens, 3 * channels, 0, true, false};
    short_conv(c, kernels, (vk_span){0}, tokens, window, x, &p);
}

void vk_op_mamba2_conv(vk_commands *c, vk_span kernels, vk_span bias, vk_span tokens,
                       vk_span window, vk_span x, const vk_mamba2_shape *s)
{
    uint32_t value_width = s->n_heads * s->head_dim;
    conv_params p = {s->channels, s->taps, s->n_tokens, value_width + s->channels + s->n_heads,
                     value_width, false, bias.buffer != VK_NULL_HANDLE};
    short_conv(c, kernels, bias, tokens, window, x, &p);
}

void vk_op_mamba2_scan(vk_commands *c, vk_span tokens, vk_span proj, vk_span heads,
                       vk_span state, vk_span out, const vk_mamba2_shape *s)
{
    struct { uint32_t head_dim, n_heads, n_groups, state_size, channels, n_tokens; } p = {
        s->head_dim, s->n_heads, s->n_groups, s->state_size, s->channels, s->n_tokens};
    vk_span spans[VK_BINDINGS] = {[0] = tokens, [1] = proj, [2] = heads, [4] = out, [5] = state};
    record(c, VK_PIPE_MAMBA2_SCAN, spans, &p, sizeof p, (s->head_dim + 63) / 64, s->n_heads,
           s->n_seq);
}

void vk_op_delta_gates(vk_commands *c, vk_span alpha, vk_span beta, vk_span dt, vk_span a,
                       uint32_t n_heads, uint32_t n_tokens)
{
    struct { uint32_t n, n_heads; } p = {n_heads * n_tokens, n_heads};
    vk_span spans[VK_BINDINGS] = {[0] = alpha, [1] = beta, [2] = dt, [3] = a};
    record(c, VK_PIPE_DELTA_GATES, spans, &p, sizeof p, stride_groups(p.n, 256), 1, 1);
}

void vk_op_l2norm(vk_commands *c, vk_span x, uint32_t n, uint32_t spans, uint32_t rows,
                  uint32_t row_stride, float eps)
{
    struct { uint32_t n, row_stride; float eps; } p = {n, row_stride, eps};
    vk_span bound[VK_BINDINGS] = {[4] = x};
    record(c, VK_PIPE_L2NORM, bound, &p, sizeof p, spans, rows, 1);
}

void vk_op_delta_rule(vk_commands *c, vk_span tokens, vk_span qkv, vk_span decay,
                      vk_span strength, vk_span state, vk_span out, const vk_delta_shape *s)
{
    struct {
        uint32_t head_dim, n_heads, n_key_heads, channels, n_tokens;
        float scale;
        uint32_t grouped;
    } p = {s->head_dim, s->n_heads, s->n_key_heads, s->channels, s->n_tokens,
           1.0f / sqrtf((float)s->head_dim), s->grouped};
    vk_span spans[VK_BINDINGS] = {tokens, qkv, decay, strength, out, state};
    record(c, VK_PIPE_DELTA_RULE, spans, &p, sizeof p, (s->head_dim + 63) / 64, s->n_heads,
           s->n_seq);
}

void vk_op_audio_attention(vk_commands *c, vk_span q, vk_span k, vk_span v, vk_span rel,
                           vk_span out, const vk_audio_attention *a)
{
    assert(a->past < VK_AUDIO_MAX_PAST);
    struct { uint32_t n_rows, n_head, head_dim, past; float cap; } p = {
        a->n_rows, a->n_head, a->head_dim, a->past, a->cap};
    vk_span spans[VK_BINDINGS] = {[0] = q, [1] = k, [2] = v, [3] = rel, [4] = out};
    record(c, VK_PIPE_AUDIO_ATTENTION, spans, &p, sizeof p, (a->n_rows * a->n_head + 63) / 64,
           1, 1);
}

void vk_op_audio_conv(vk_commands *c, vk_span x, vk_span kernels, vk_span out,
                      uint32_t n_rows, uint32_t channels, uint32_t taps)
{
    struct { uint32_t n_rows, channels, taps; } p = {n_rows, channels, taps};
    vk_span spans[VK_BINDINGS] = {[0] = x, [1] = kernels, [4] = out};
    record(c, VK_PIPE_AUDIO_CONV, spans, &p, sizeof p, (n_rows * channels + 255) / 256, 1, 1);
}

void vk_op_altup_predict(vk_commands *c, vk_span streams, vk_span coef, vk_span pred,
                         uint32_t n, uint32_t n_altup, uint32_t n_tokens, uint32_t stride)
{
    struct { uint32_t n, n_altup, n_tokens, stride, op; } p = {n, n_altup, n_tokens, stride, 0};
    vk_span spans[VK_BINDINGS] = {[0] = coef, [1] = streams, [4] = pred};
    record(c, VK_PIPE_ALTUP, spans, &p, sizeof p, stride_groups(n * n_tokens, 256), 1, 1);
}

void vk_op_altup_correct(vk_commands *c, vk_span x, vk_span pred, vk_span coef,
                         vk_span streams, uint32_t n, uint32_t n_altup, uint32_t n_tokens,
                         uint32_t stride)
{
    struct { uint32_t n, n_altup, n_tokens, stride, op; } p = {n, n_altup, n_tokens, stride, 1};
    vk_span spans[VK_BINDINGS] = {[0] = coef, [1] = pred, [2] = x, [4] = streams};
    record(c, VK_PIPE_ALTUP, spans, &p, sizeof p, stride_groups(n * n_tokens, 256), 1, 1);
}

void vk_op_altup_add(vk_commands *c, vk_span x, vk_span streams, uint32_t n, uint32_t n_altup,
                     uint32_t n_tokens, uint32_t stride)
{
    struct { uint32_t n, n_altup, n_tokens, stride, op; } p = {n, n_altup, n_tokens, stride, 2};
    vk_span spans[VK_BINDINGS] = {[2] = x, [4] = streams};
    record(c, VK_PIPE_ALTUP, spans, &p, sizeof p, stride_groups(n * n_tokens, 256), 1, 1);
}

void vk_op_sparse_gate(vk_commands *c, vk_span x, uint32_t n, uint32_t rows, float std_mul)
{
    assert(n > 1);
    struct { uint32_t n; float std_mul; } p = {n, std_mul};
    vk_span spans[VK_BINDINGS] = {[4] = x};
    record(c, VK_PIPE_SPARSE_GATE, spans, &p, sizeof p, rows, 1, 1);
}

void vk_op_match_magnitude(vk_commands *c, vk_span target, vk_span y, uint32_t n,
                           uint32_t rows)
{
    struct { uint32_t n; } p = {n};
    vk_span spans[VK_BINDINGS] = {[0] = target, [4] = y};
    record(c, VK_PIPE_MATCH_MAGNITUDE, spans, &p, sizeof p, rows, 1, 1);
}

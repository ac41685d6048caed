/*
 * The mixture-of-experts FFN on the Vulkan device (vk_moe.h), as moe.c computes it on the
 * CPU, recorded into the layers' command buffer with no wait for the CPU: the router's
 * product (plus its bias, gpt-oss), the routing (moe_route.comp: softmax, the n_used best,
 * their weights; or deepseek2's scored router with its selection bias and expert groups),
 * then the batch's (token, expert) pairs, row t * n_used + j, through their experts' gate
 * and up rows, per-expert biases (gpt-oss), the SwiGLU, gpt-oss's clamped one or gemma4's
 * GeGLU (experts without a gate: nemotron_h_moe's relu(up)², nomic-bert-moe's gelu(up)),
 * and the down rows (latent
 * experts, Nemotron 3 Super's: on the input projected into the latent, their weighted sum
 * projected back up), and each token's outputs weighted (gemma4: times each expert's
 * own output scale, folded into the weight) and summed from its most probable expert on
 * (moe_combine.comp), the shared expert's output added after; llama4's experts take each
 * pair's input times its weight instead (moe_combine.comp's other way) and sum their outputs
 * unweighted. A few tokens' pairs take a
 * workgroup each, their expert picked on the device by the pair's id (matmul.glsl's expert
 * products); a prompt's are first grouped by expert on the device (moe_group.comp), their
 * inputs gathered in that order, and each expert's rows read once for a tile of up to 8 of
 * its pairs (matmul.glsl's tiled expert products, every value as the pair by pair path's)
 * or, from vk_moe_tile's threshold, unpacked once for a tile of up to 64 of its pairs by
 * 64 rows (matmul_tiled.glsl's expert products). An expert
 * matrix larger than one buffer is split by whole experts; each part's product leaves the
 * pairs of the other parts' experts alone.
 */
#include "vk_moe.h"

#include <stdlib.h>
#include <string.h>

#include "tensor_type.h"

/* gpt-oss's clamped SwiGLU constants (as moe.c's: its files do not carry them). */
#define SWIGLU_OAI_ALPHA 1.702f
#define SWIGLU_OAI_LIMIT 7.0f

/* A micro-batch's pairs go grouped by expert from this many a expert on (on average). */
enum { GROUP_MIN_PAIRS_PER_EXPERT = 2 };

/* A matrix or vector in one buffer (no buffer: the model has no such tensor). */
typedef struct moe_weight {
    vk_buffer buf;
    uint32_t type, n_in, n_out;
    size_t row_bytes;
} moe_weight;

/* One kind of a layer's experts: rows an expert, experts_per_part experts a buffer. */
typedef struct moe_matrix {
    vk_buffer *parts;
    uint32_t n_parts, experts_per_part;
    uint32_t type, n_in, rows;
    size_t row_bytes;
} moe_matrix;

typedef struct moe_layer {
    moe_weight router, router_bias, gate_bias, up_bias, down_bias, selection_bias;
    moe_weight shared_gate, shared_up, shared_down;
    moe_weight shared_gate_inp; /* qwen2moe's gate of the shared expert's output */
    moe_weight expert_scale;    /* gemma4's scale of each expert's output (F32, optional) */
    moe_weight latent_down, latent_up; /* latent experts' projections (Nemotron 3 Super) */
    moe_matrix gate, up, down;
} moe_layer;

struct vk_moe {
    vk_device *dev;
    uint32_t first, n_layer;
    moe_layer *layers; /* n_layer - first; a dense layer's router has no buffer */
    /* the micro-batch's routing, the pairs' rows and the shared expert's */
    vk_buffer logits, ids, weights, gate, up, out, quants, scales;
    vk_buffer shared_gate, shared_up, shared_out;
    /* latent experts: the input projected into the latent, the experts' weighted sum there */
    vk_buffer latent_in, latent_sum;
    /* a prompt's pairs grouped by expert (vk_op_moe_group): its slots and their tiles */
    vk_buffer slot_of, slot_rows, slot_ids, tiles;
};

/* ---- what the device takes ---- */

static bool type_ok(const weight *w)
{
    return !w->data || (vk_type_supported(w->type) && !w->lora);
}

static bool f32_ok(const weight *w)
{
    return !w->data || w->type == TENSOR_TYPE_F32;
}

const char *vk_moe_unsupported(const corral_model *m)
{
    const hparams *hp = &m->hp;
    if (hp->n_expert == 0)
        return NULL;
    bool biased = m->arch->tensors & ARCH_EXPERT_BIASES;
    /* gemma4's experts beside its dense FFN take the family's GeGLU; a GELU family's
     * (nomic-bert-moe's) have no gate, and gelu(up) goes to down */
    bool geglu = m->arch->tensors & ARCH_DENSE_AND_EXPERTS;
    if (biased ? m->arch->ffn != FFN_SWIGLU_OAI
               : m->arch->ffn != (geglu ? FFN_GEGLU : FFN_SWIGLU) && m->arch->ffn != FFN_GELU)
        return "an expert FFN other than SwiGLU (or gpt-oss's, gemma4's GeGLU, or "
               "nomic-bert-moe's GELU)";
    if (hp->n_expert_used == 0 || hp->n_expert_used > hp->n_expert)
        return "no experts used";
    for (uint32_t il = 0; il < hp->n_layer; il++) {
        const layer_weights *l = &m->layers[il];
        if (!l->ffn_gate_inp.data) {
            if (biased)
                return "dense layers beside gpt-oss's experts";
            continue;
        }
        if (!f32_ok(&l->exp_probs_b))
            return "a selection bias of the router other than F32";
        if (!f32_ok(&l->ffn_down_exps_s))
            return "experts' output scales other than F32";
        const weight *ws[] = {&l->ffn_gate_inp, &l->ffn_gate_exps, &l->ffn_up_exps,
                              &l->ffn_down_exps, &l->ffn_gate_shexp, &l->ffn_up_shexp,
                              &l->ffn_down_shexp, &l->ffn_gate_inp_shexp,
                              &l->ffn_latent_down, &l->ffn_latent_up};
        for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++)
            if (!type_ok(ws[i]))
                return "an expert weight type the device kernels lack, or a LoRA adapter";
        const weight *vs[] = {&l->ffn_gate_inp_b, &l->ffn_gate_exps_b, &l->ffn_up_exps_b,
                              &l->ffn_down_exps_b};
        for (size_t i = 0; i < sizeof vs / sizeof vs[0]; i++)
            if (!f32_ok(vs[i]))
                return "expert biases other than F32";
    }
    return NULL;
}

static uint64_t bytes_of(const weight *w)
{
    return w->data ? (uint64_t)w->row_bytes * w->n_out : 0;
}

/* The width of the experts' input and output: the latent's, or n_embd. */
static uint32_t expert_width(const hparams *hp)
{
    return hp->moe_latent > 0 ? hp->moe_latent : hp->n_embd;
}

/* Experts a buffer of an expert matrix holds (upload_experts), at least 1. */
static uint32_t experts_a_part(const weight *w, size_t rows, uint32_t n_expert,
                               uint64_t part_bytes)
{
    uint64_t expert_bytes = (uint64_t)rows * w->row_bytes;
    uint64_t per_part = expert_bytes ? part_bytes / expert_bytes : 0;
    return per_part == 0 ? 1 : per_part < n_expert ? (uint32_t)per_part : n_expert;
}

/* The memory upload_experts allocates for an expert matrix's buffers (none: no matrix). */
static uint64_t experts_footprint(const vk_device *dev, const weight *w, size_t rows,
                                  uint32_t n_expert, uint64_t part_bytes)
{
    if (!w->data)
        return 0;
    uint64_t expert_bytes = (uint64_t)rows * w->row_bytes, sum = 0;
    uint32_t per_part = experts_a_part(w, rows, n_expert, part_bytes);
    for (uint32_t e0 = 0; e0 < n_expert; e0 += per_part) {
        uint32_t count = n_expert - e0 < per_part ? n_expert - e0 : per_part;
        sum += vk_buffer_footprint(dev, count * expert_bytes);
    }
    return sum;
}

uint64_t vk_moe_layer_bytes(const vk_device *dev, const corral_model *m, uint32_t il,
                            uint64_t part_bytes)
{
    const hparams *hp = &m->hp;
    const layer_weights *l = &m->layers[il];
    if (!l->ffn_gate_inp.data)
        return 0;
    const weight *ws[] = {&l->ffn_gate_inp,   &l->ffn_gate_inp_b, &l->ffn_gate_exps_b,
                          &l->ffn_up_exps_b,  &l->ffn_down_exps_b, &l->ffn_gate_shexp,
                          &l->ffn_up_shexp,   &l->ffn_down_shexp, &l->exp_probs_b,
                          &l->ffn_gate_inp_shexp, &l->ffn_down_exps_s, &l->ffn_latent_down,
                          &l->ffn_latent_up};
    uint64_t sum = 0;
    for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++)
        if (ws[i]->data)
            sum += vk_buffer_footprint(dev, bytes_of(ws[i]));
    return sum +
           experts_footprint(dev, &l->ffn_gate_exps, hp->n_ff_exp, hp->n_expert, part_bytes) +
           experts_footprint(dev, &l->ffn_up_exps, hp->n_ff_exp, hp->n_expert, part_bytes) +
           experts_footprint(dev, &l->ffn_down_exps, expert_width(hp), hp->n_expert,
                             part_bytes);
}

/* ---- creation ---- */

static bool buffer(vk_moe *moe, VkDeviceSize size, uint64_t *bytes, vk_buffer *out,
                   corral_error *err)
{
    if (size > moe->dev->max_range) {
        corral_error_set(err, "a buffer of %llu bytes is beyond %s's binding range (%llu)",
                         (unsigned long long)size, moe->dev->info.name,
                         (unsigned long long)moe->dev->max_range);
        return false;
    }
    if (!vk_buffer_create(moe->dev, size, false, out, err))
        return false;
    *bytes += out->allocated;
    return true;
}

static bool upload_weight(vk_moe *moe, const weight *w, uint64_t part_bytes, uint64_t *bytes,
                          moe_weight *out, corral_error *err)
{
    *out = (moe_weight){.type = w->type, .n_in = (uint32_t)w->n_in, .n_out = (uint32_t)w->n_out,
                        .row_bytes = w->row_bytes};
    if (!w->data)
        return true;
    if (bytes_of(w) > part_bytes) {
        corral_error_set(err, "a router or shared expert of %llu bytes is larger than one "
                         "buffer (%llu)", (unsigned long long)bytes_of(w),
                         (unsigned long long)part_bytes);
        return false;
    }
    return buffer(moe, bytes_of(w), bytes, &out->buf, err) &&
           vk_buffer_write(moe->dev, &out->buf, 0, w->data, bytes_of(w), err);
}

/* An expert matrix in parts of whole experts, each at most part_bytes; none (no parts) where
 * the layer has no such matrix (ungated experts' gate). */
static bool upload_experts(vk_moe *moe, const weight *w, const void **expert_rows, size_t rows,
                           uint32_t n_expert, uint64_t part_bytes, uint64_t *bytes,
                           moe_matrix *out, corral_error *err)
{
    uint64_t expert_bytes = (uint64_t)rows * w->row_bytes;
    *out = (moe_matrix){.type = w->type, .n_in = (uint32_t)w->n_in, .rows = (uint32_t)rows,
                        .row_bytes = w->row_bytes};
    if (!w->data)
        return true;
    if (expert_bytes == 0 || expert_bytes > part_bytes) {
        corral_error_set(err, "an expert of %llu bytes is larger than one buffer (%llu)",
                         (unsigned long long)expert_bytes, (unsigned long long)part_bytes);
        return false;
    }
    out->experts_per_part = experts_a_part(w, rows, n_expert, part_bytes);
    out->n_parts = (n_expert + out->experts_per_part - 1) / out->experts_per_part;
    if (!(out->parts = calloc(out->n_parts, sizeof *out->parts))) {
        corral_error_set(err, "out of memory");
        return false;
    }
    for (uint32_t part = 0; part < out->n_parts; part++) {
        uint32_t e0 = part * out->experts_per_part;
        uint32_t count = n_expert - e0 < out->experts_per_part ? n_expert - e0
                                                               : out->experts_per_part;
        if (!buffer(moe, count * expert_bytes, bytes, &out->parts[part], err))
            return false;
        for (uint32_t e = e0; e < e0 + count; e++) {
            const char *from = expert_rows ? expert_rows[e]
                                           : (const char *)w->data + e * expert_bytes;
            if (!vk_buffer_write(moe->dev, &out->parts[part], (e - e0) * expert_bytes, from,
                                 expert_bytes, err))
                return false;
        }
    }
    return true;
}

static bool upload_layer(vk_moe *moe, const corral_model *m, uint32_t il, uint64_t part_bytes,
                         uint64_t *bytes, moe_layer *ml, corral_error *err)
{
    const hparams *hp = &m->hp;
    const layer_weights *l = &m->layers[il];
    if (!l->ffn_gate_inp.data)
        return true;
    const weight *from[] = {&l->ffn_gate_inp,   &l->ffn_gate_inp_b, &l->ffn_gate_exps_b,
                            &l->ffn_up_exps_b,  &l->ffn_down_exps_b, &l->ffn_gate_shexp,
                            &l->ffn_up_shexp,   &l->ffn_down_shexp, &l->exp_probs_b,
                            &l->ffn_gate_inp_shexp, &l->ffn_down_exps_s, &l->ffn_latent_down,
                            &l->ffn_latent_up};
    moe_weight *to[] = {&ml->router,    &ml->router_bias, &ml->gate_bias,  &ml->up_bias,
                        &ml->down_bias, &ml->shared_gate, &ml->shared_up, &ml->shared_down,
                        &ml->selection_bias, &ml->shared_gate_inp, &ml->expert_scale,
                        &ml->latent_down, &ml->latent_up};
    for (size_t i = 0; i < sizeof from / sizeof from[0]; i++)
        if (!upload_weight(moe, from[i], part_bytes, bytes, to[i], err))
            return false;
    return upload_experts(moe, &l->ffn_gate_exps, l->gate_exps_rows, hp->n_ff_exp,
                          hp->n_expert, part_bytes, bytes, &ml->gate, err) &&
           upload_experts(moe, &l->ffn_up_exps, l->up_exps_rows, hp->n_ff_exp, hp->n_expert,
                          part_bytes, bytes, &ml->up, err) &&
           upload_experts(moe, &l->ffn_down_exps, l->down_exps_rows, expert_width(hp),
                          hp->n_expert, part_bytes, bytes, &ml->down, err);
}

static uint64_t max_u64(uint64_t a, uint64_t b)
{
    return a > b ? a : b;
}

/* The scratch buffers for ctx's micro-batch and their sizes (a buffer of size 0 is not
 * made); the count. */
enum { MAX_SCRATCH = 17 };
static size_t scratch_list(vk_moe *moe, const corral_context *ctx, vk_buffer **bufs,
                           uint64_t *sizes)
{
    const hparams *hp = &ctx->model->hp;
    uint64_t nb = ctx->n_batch, pairs = nb * hp->n_expert_used, f = sizeof(float);
    uint64_t tiles = vk_moe_max_tiles((uint32_t)pairs, hp->n_expert, VK_MOE_ROW_TILE);
    /* the widest input a product quantizes; a prompt's expert products take each pair's row
     * of the input gathered (into out) */
    uint64_t W = max_u64(hp->n_embd, expert_width(hp)); /* n_embd, or a wider latent */
    uint64_t widest = max_u64(max_u64(pairs * W, pairs * hp->n_ff_exp), nb * hp->n_ff_shexp);
    uint64_t shared = hp->n_ff_shexp > 0;
    struct { vk_buffer *buf; uint64_t size; } list[] = {
        {&moe->logits, nb * hp->n_expert * f},
        {&moe->ids, pairs * sizeof(uint32_t)},
        {&moe->weights, pairs * f},
        {&moe->gate, pairs * hp->n_ff_exp * f},
        {&moe->up, pairs * hp->n_ff_exp * f},
        {&moe->out, pairs * W * f},
        {&moe->quants, vk_matmul_quants_bytes(widest)},
        {&moe->scales, vk_matmul_scales_bytes(widest)},
        {&moe->shared_gate, shared * nb * hp->n_ff_shexp * f},
        {&moe->shared_up, shared * nb * hp->n_ff_shexp * f},
        {&moe->shared_out, shared * nb * hp->n_embd * f},
        {&moe->slot_of, pairs * sizeof(uint32_t)},
        {&moe->slot_rows, pairs * sizeof(uint32_t)},
        {&moe->slot_ids, pairs * sizeof(uint32_t)},
        {&moe->tiles, tiles * 3 * sizeof(uint32_t)},
        {&moe->latent_in, nb * hp->moe_latent * f},
        {&moe->latent_sum, nb * hp->moe_latent * f},
    };
    _Static_assert(sizeof list / sizeof list[0] <= MAX_SCRATCH, "MAX_SCRATCH");
    size_t n = 0;
    for (size_t i = 0; i < sizeof list / sizeof list[0]; i++)
        if (list[i].size > 0) {
            bufs[n] = list[i].buf;
            sizes[n++] = list[i].size;
        }
    return n;
}

uint64_t vk_moe_scratch_bytes(const vk_device *dev, const corral_context *ctx)
{
    if (ctx->model->hp.n_expert == 0)
        return 0;
    vk_moe sizing = {0};
    vk_buffer *bufs[MAX_SCRATCH];
    uint64_t sizes[MAX_SCRATCH], sum = 0;
    size_t n = scratch_list(&sizing, ctx, bufs, sizes);
    for (size_t i = 0; i < n; i++)
        sum += vk_buffer_footprint(dev, sizes[i]);
    return sum;
}

static bool alloc_scratch(vk_moe *moe, const corral_context *ctx, uint64_t *bytes,
                          corral_error *err)
{
    vk_buffer *bufs[MAX_SCRATCH];
    uint64_t sizes[MAX_SCRATCH];
    size_t n = scratch_list(moe, ctx, bufs, sizes);
    for (size_t i = 0; i < n; i++)
        if (!buffer(moe, sizes[i], bytes, bufs[i], err))
            return false;
    return true;
}

vk_moe *vk_moe_create(vk_device *dev, const corral_context *ctx, uint32_t first,
                      uint64_t part_bytes, uint64_t *bytes, corral_error *err)
{
    const corral_model *m = ctx->model;
    vk_moe *moe = calloc(1, sizeof *moe);
    if (!moe || !(moe->layers = calloc(m->hp.n_layer - first, sizeof *moe->layers))) {
        free(moe);
        corral_error_set(err, "out of memory");
        return NULL;
    }
    moe->dev = dev;
    moe->first = first;
    moe->n_layer = m->hp.n_layer;
    if (m->hp.n_expert == 0)
        return moe;
    for (uint32_t il = first; il < m->hp.n_layer; il++)
        if (!upload_layer(moe, m, il, part_bytes, bytes, &moe->layers[il - first], err))
            goto fail;
    if (!alloc_scratch(moe, ctx, bytes, err))
        goto fail;
    return moe;
fail:
    vk_moe_free(moe);
    return NULL;
}

static void free_buffer(vk_device *dev, vk_buffer *b)
{
    if (b->buffer)
        vk_buffer_free(dev, b);
}

static void free_matrix(vk_device *dev, moe_matrix *mat)
{
    for (uint32_t part = 0; mat->parts && part < mat->n_parts; part++)
        free_buffer(dev, &mat->parts[part]);
    free(mat->parts);
}

void vk_moe_free(vk_moe *moe)
{
    if (!moe)
        return;
    vk_device *dev = moe->dev;
    for (uint32_t i = 0; moe->layers && i < moe->n_layer - moe->first; i++) {
        moe_layer *ml = &moe->layers[i];
        moe_weight *ws[] = {&ml->router,    &ml->router_bias, &ml->gate_bias,
                            &ml->up_bias,   &ml->down_bias,   &ml->shared_gate,
                            &ml->shared_up, &ml->shared_down, &ml->selection_bias,
                            &ml->shared_gate_inp, &ml->expert_scale, &ml->latent_down,
                            &ml->latent_up};
        for (size_t k = 0; k < sizeof ws / sizeof ws[0]; k++)
            free_buffer(dev, &ws[k]->buf);
        free_matrix(dev, &ml->gate);
        free_matrix(dev, &ml->up);
        free_matrix(dev, &ml->down);
    }
    free(moe->layers);
    vk_buffer *bufs[] = {&moe->logits,      &moe->ids,       &moe->weights,    &moe->gate,
                         &moe->up,          &moe->out,       &moe->quants,     &moe->scales,
                         &moe->shared_gate, &moe->shared_up, &moe->shared_out, &moe->slot_of,
                         &moe->slot_rows,   &moe->slot_ids,  &moe->tiles,      &moe->latent_in,
                         &moe->latent_sum};
    for (size_t k = 0; k < sizeof bufs / sizeof bufs[0]; k++)
        free_buffer(dev, bufs[k]);
    free(moe);
}

bool vk_moe_layer(const vk_moe *moe, uint32_t il)
{
    return moe && il >= moe->first && moe->layers[il - moe->first].router.buf.buffer;
}

/* ---- recording ---- */

static void product(vk_moe *moe, vk_commands *c, const moe_weight *w, vk_buffer *x,
                    vk_buffer *y, uint32_t n)
{
    vk_op_matmul(c, w->type, vk_whole(&w->buf), w->row_bytes, vk_whole(x), vk_whole(&moe->quants),
                 vk_whole(&moe->scales), vk_whole(y), w->n_in, w->n_out, n);
}

/* The pairs' products with their experts' rows of mat, part by part; x has a row per
 * pairs_per_x pairs. */
static void expert_product(vk_moe *moe, vk_commands *c, const moe_matrix *mat, vk_buffer *x,
                           vk_buffer *y, uint32_t n_pairs, uint32_t pairs_per_x,
                           uint32_t n_expert)
{
    for (uint32_t part = 0; part < mat->n_parts; part++) {
        uint32_t e0 = part * mat->experts_per_part;
        uint32_t count = n_expert - e0 < mat->experts_per_part ? n_expert - e0
                                                               : mat->experts_per_part;
        vk_op_matmul_experts(c, mat->type, vk_whole(&mat->parts[part]), mat->row_bytes,
                             vk_whole(x), vk_whole(&moe->quants), vk_whole(&moe->scales),
                             vk_whole(&moe->ids), vk_whole(y), mat->n_in, mat->rows, n_pairs,
                             pairs_per_x, e0, count);
    }
}

/* The same for a prompt's slots (vk_op_moe_group), in tiles: x has a row per slot. */
static void expert_tiles_product(vk_moe *moe, vk_commands *c, const moe_matrix *mat,
                                 vk_buffer *x, vk_buffer *y, uint32_t n_pairs,
                                 uint32_t n_expert, uint32_t tile)
{
    uint32_t max_tiles = vk_moe_max_tiles(n_pairs, n_expert, tile);
    for (uint32_t part = 0; part < mat->n_parts; part++) {
        uint32_t e0 = part * mat->experts_per_part;
        uint32_t count = n_expert - e0 < mat->experts_per_part ? n_expert - e0
                                                               : mat->experts_per_part;
        vk_op_matmul_expert_tiles(c, mat->type, vk_whole(&mat->parts[part]), mat->row_bytes,
                                  vk_whole(x), vk_whole(&moe->quants), vk_whole(&moe->scales),
                                  vk_whole(&moe->tiles), vk_whole(y), mat->n_in, mat->rows,
                                  n_pairs, max_tiles, tile, e0, count);
    }
}

/* y's rows (pairs, or slots whose experts are in ids) plus their experts' biases. */
static void expert_bias(vk_commands *c, const moe_weight *bias, vk_buffer *ids, vk_buffer *y,
                        uint32_t n_pairs)
{
    if (bias->buf.buffer)
        vk_op_moe_bias(c, vk_whole(&bias->buf), vk_whole(ids), vk_whole(y), bias->n_in,
                       n_pairs);
}

/* Whether the layer routes by moe.c's scored router rather than its plain softmax one (as
 * moe.c decides). */
static bool routes_scored(const hparams *hp, const moe_layer *ml)
{
    return hp->expert_gating_sigmoid || !hp->expert_weights_norm ||
           hp->expert_weights_scale != 1.0f || hp->n_expert_groups > 1 ||
           ml->selection_bias.buf.buffer;
}

void vk_moe_record(vk_moe *moe, vk_commands *c, const corral_context *ctx, uint32_t il,
                   vk_buffer *in, vk_buffer *router_in, vk_span gelu_table, vk_buffer *out,
                   uint32_t n)
{
    const corral_model *m = ctx->model;
    const hparams *hp = &m->hp;
    const moe_layer *ml = &moe->layers[il - moe->first];
    uint32_t k = hp->n_expert_used, n_pairs = n * k;
    bool oai = m->arch->ffn == FFN_SWIGLU_OAI;

    bool shared = ml->shared_up.buf.buffer;
    if (ml->shared_gate.buf.buffer) {
        product(moe, c, &ml->shared_gate, in, &moe->shared_gate, n);
        product(moe, c, &ml->shared_up, in, &moe->shared_up, n);
        vk_op_swiglu(c, vk_whole(&moe->shared_gate), vk_whole(&moe->shared_up),
                     n * hp->n_ff_shexp);
    } else if (shared) { /* ungated (nemotron_h_moe): relu(up . x)² */
        product(moe, c, &ml->shared_up, in, &moe->shared_gate, n);
        vk_op_binary(c, VK_RELU_SQR, vk_whole(&moe->shared_gate), (vk_span){0},
                     n * hp->n_ff_shexp, 0, 0.0f);
    }
    if (shared)
        product(moe, c, &ml->shared_down, &moe->shared_gate, &moe->shared_out, n);
    if (ml->shared_gate_inp.buf.buffer) {
        /* qwen2moe: the output times sigmoid(gate . x) per token, the sigmoid taken by the
         * scored router over one expert (in place in shared_up, free again; ids and weights
         * are the main routing's scratch, written again below) */
        product(moe, c, &ml->shared_gate_inp, in, &moe->shared_up, n);
        vk_route_scored sigmoid = {.n_expert = 1, .n_used = 1, .sigmoid = true, .scale = 1.0f};
        vk_op_moe_route_scored(c, &sigmoid, vk_whole(&moe->shared_up), (vk_span){0},
                               vk_whole(&moe->ids), vk_whole(&moe->weights), n);
        vk_op_binary(c, VK_MUL_ROWS, vk_whole(&moe->shared_out), vk_whole(&moe->shared_up),
                     n * hp->n_embd, hp->n_embd, 0.0f);
    }
    product(moe, c, &ml->router, router_in ? router_in : in, &moe->logits, n);
    if (ml->router_bias.buf.buffer)
        vk_op_binary(c, VK_ADD, vk_whole(&moe->logits), vk_whole(&ml->router_bias.buf),
                     n * hp->n_expert, hp->n_expert, 0.0f);
    if (!oai && routes_scored(hp, ml)) {
        vk_route_scored r = {.n_expert = hp->n_expert, .n_used = k,
                             .n_groups = hp->n_expert_groups, .n_group_used = hp->n_group_used,
                             .sigmoid = hp->expert_gating_sigmoid,
                             .norm = hp->expert_weights_norm,
                             .scale = hp->expert_weights_scale};
        vk_span bias = ml->selection_bias.buf.buffer ? vk_whole(&ml->selection_bias.buf)
                                                     : (vk_span){0};
        vk_op_moe_route_scored(c, &r, vk_whole(&moe->logits), bias, vk_whole(&moe->ids),
                               vk_whole(&moe->weights), n);
    } else {
        vk_op_moe_route(c, oai ? VK_ROUTE_SOFTMAX_CHOSEN : VK_ROUTE_SOFTMAX,
                        vk_whole(&moe->logits), vk_whole(&moe->ids), vk_whole(&moe->weights),
                        hp->n_expert, k, n);
    }
    if (ml->expert_scale.buf.buffer) {
        /* each pair's weight times its expert's scale (the router's logits, read, hold the
         * scales gathered) */
        vk_op_get_rows(c, TENSOR_TYPE_F32, vk_whole(&ml->expert_scale.buf), sizeof(float),
                       vk_whole(&moe->ids), vk_whole(&moe->logits), 1, n_pairs);
        vk_op_binary(c, VK_MUL, vk_whole(&moe->weights), vk_whole(&moe->logits), n_pairs,
                     n_pairs, 0.0f);
    }
    /* latent experts take the input projected into the latent, W wide, and give a latent */
    bool latent = ml->latent_down.buf.buffer;
    vk_buffer *pair_in = latent ? &moe->latent_in : in;
    uint32_t W = expert_width(hp);
    if (latent)
        product(moe, c, &ml->latent_down, in, &moe->latent_in, n);
    /* a prompt's pairs grouped by expert, each expert's rows read once a tile of its pairs;
     * a few tokens' pairs one by one (the grouping would cost more than it saves) */
    bool grouped = n_pairs >= GROUP_MIN_PAIRS_PER_EXPERT * hp->n_expert;
    vk_buffer *ids = grouped ? &moe->slot_ids : &moe->ids;
    uint32_t tile = vk_moe_tile(moe->dev, n_pairs, hp->n_expert);
    uint32_t pairs_per_x = k; /* the pair by pair products read their token's row */
    if (grouped)
        vk_op_moe_group(c, vk_whole(&moe->ids), vk_whole(&moe->slot_of),
                        vk_whole(&moe->slot_rows), vk_whole(&moe->slot_ids),
                        vk_whole(&moe->tiles), n_pairs, hp->n_expert, k, tile);
    if (hp->expert_weight_input) {
        /* llama4: each pair's (or slot's) own input, its token's row times its weight, in
         * out (free until the down product) */
        vk_op_moe_weigh_inputs(c, vk_whole(pair_in), vk_whole(&moe->weights),
                               grouped ? vk_whole(&moe->slot_of) : (vk_span){0},
                               vk_whole(&moe->out), W, k, n);
        pair_in = &moe->out;
        pairs_per_x = 1;
    } else if (grouped) {
        /* each slot's input row gathered into out, free until the down product */
        vk_op_get_rows(c, TENSOR_TYPE_F32, vk_whole(pair_in), (size_t)W * sizeof(float),
                       vk_whole(&moe->slot_rows), vk_whole(&moe->out), W, n_pairs);
    }
    /* ungated experts: up alone, into the gate's rows, then relu(up)² (nemotron_h_moe) or,
     * in a GELU family, gelu(up) (nomic-bert-moe), as moe.c's */
    bool gated = ml->gate.n_parts > 0;
    vk_buffer *up_rows = gated ? &moe->up : &moe->gate;
    if (gated && grouped)
        expert_tiles_product(moe, c, &ml->gate, &moe->out, &moe->gate, n_pairs, hp->n_expert,
                             tile);
    else if (gated)
        expert_product(moe, c, &ml->gate, pair_in, &moe->gate, n_pairs, pairs_per_x,
                       hp->n_expert);
    if (grouped)
        expert_tiles_product(moe, c, &ml->up, &moe->out, up_rows, n_pairs, hp->n_expert, tile);
    else
        expert_product(moe, c, &ml->up, pair_in, up_rows, n_pairs, pairs_per_x,
                       hp->n_expert);
    expert_bias(c, &ml->gate_bias, ids, &moe->gate, n_pairs);
    expert_bias(c, &ml->up_bias, ids, up_rows, n_pairs);
    if (!gated && m->arch->ffn == FFN_GELU)
        vk_op_gelu(c, gelu_table, vk_whole(&moe->gate), (vk_span){0}, n_pairs * hp->n_ff_exp);
    else if (!gated)
        vk_op_binary(c, VK_RELU_SQR, vk_whole(&moe->gate), (vk_span){0},
                     n_pairs * hp->n_ff_exp, 0, 0.0f);
    else if (oai)
        vk_op_swiglu_oai(c, vk_whole(&moe->gate), vk_whole(&moe->up), n_pairs * hp->n_ff_exp,
                         SWIGLU_OAI_ALPHA, SWIGLU_OAI_LIMIT);
    else if (m->arch->ffn == FFN_GEGLU)
        vk_op_gelu(c, gelu_table, vk_whole(&moe->gate), vk_whole(&moe->up),
                   n_pairs * hp->n_ff_exp);
    else
        vk_op_swiglu(c, vk_whole(&moe->gate), vk_whole(&moe->up), n_pairs * hp->n_ff_exp);
    if (grouped)
        expert_tiles_product(moe, c, &ml->down, &moe->gate, &moe->out, n_pairs, hp->n_expert,
                             tile);
    else
        expert_product(moe, c, &ml->down, &moe->gate, &moe->out, n_pairs, 1, hp->n_expert);
    expert_bias(c, &ml->down_bias, ids, &moe->out, n_pairs);
    /* llama4's outputs unweighted: the inputs carried the weights */
    vk_op_moe_combine_slots(c, vk_whole(&moe->out),
                            hp->expert_weight_input ? (vk_span){0} : vk_whole(&moe->weights),
                            grouped ? vk_whole(&moe->slot_of) : (vk_span){0},
                            vk_whole(latent ? &moe->latent_sum : out), W, k, n);
    if (latent) /* the weighted sum projected back up to n_embd */
        product(moe, c, &ml->latent_up, &moe->latent_sum, out, n);
    if (shared)
        vk_op_binary(c, VK_ADD, vk_whole(out), vk_whole(&moe->shared_out), n * hp->n_embd,
                     n * hp->n_embd, 0.0f);
}

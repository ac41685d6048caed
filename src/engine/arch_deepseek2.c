/*
 * deepseek2 (DeepSeek-V2, V2-Lite, V2.5, V3, R1 and their distillations into this shape):
 * multi-head latent attention (mla.c) with RoPE on a separate part of each head, leading
 * dense layers, then a mixture of experts with shared experts (moe.c). V2 routes with a
 * softmax; V3 says expert_gating_func 2: sigmoid scores, a selection bias, expert groups,
 * renormalised and scaled weights. With YaRN, llama.cpp leaves the rotation's magnitude at
 * 1 and puts YaRN's correction, squared, into the attention scale instead. glm4moelite is
 * the same model as ollama's library files of GLM-4.7-Flash name and describe it.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "forward.h"
#include "mla.h"
#include "util/checked.h"

bool deepseek2_read_routing(model_loader *ld, bool lead_required, bool sigmoid_default,
                            bool widths_required, uint32_t n_shared)
{
    hparams *hp = &ld->model->hp;
    uint32_t gating = GATING_NONE;
    hp->expert_weights_norm = false;
    if (!model_read_u32(ld, "leading_dense_block_count", &hp->n_layer_dense_lead,
                        lead_required) ||
        !model_read_u32(ld, "expert_feed_forward_length", &hp->n_ff_exp, widths_required) ||
        !model_read_u32(ld, "expert_shared_count", &n_shared, false) ||
        !model_read_f32(ld, "expert_weights_scale", &hp->expert_weights_scale, false) ||
        !model_read_bool(ld, "expert_weights_norm", &hp->expert_weights_norm, false) ||
        !model_read_u32(ld, "expert_gating_func", &gating, false))
        return false;
    const char *path = gguf_path(ld->model->file);
    /* as llama.cpp: "none" (or no key) is the family's gating, and a scale of 0 none */
    if (gating == GATING_NONE)
        gating = sigmoid_default ? GATING_SIGMOID : GATING_SOFTMAX;
    if (hp->expert_weights_scale == 0.0f)
        hp->expert_weights_scale = 1.0f;
    if (gating != GATING_SOFTMAX && gating != GATING_SIGMOID) {
        corral_error_set(ld->err, "%s: expert gating function %u is not supported (1 softmax, 2 sigmoid)",
                         path, gating);
        return false;
    }
    hp->expert_gating_sigmoid = gating == GATING_SIGMOID;
    uint64_t shared = (uint64_t)hp->n_ff_exp * n_shared;
    if (hp->n_layer_dense_lead > hp->n_layer || shared > UINT32_MAX ||
        !isfinite(hp->expert_weights_scale)) {
        corral_error_set(ld->err, "%s: inconsistent experts (%u leading dense layers of %u, %u shared of width %u, scale %g)",
                         path, hp->n_layer_dense_lead, hp->n_layer, n_shared, hp->n_ff_exp,
                         hp->expert_weights_scale);
        return false;
    }
    hp->n_ff_shexp = (uint32_t)shared;
    return expert_groups_read(ld);
}

bool expert_groups_read(model_loader *ld)
{
    hparams *hp = &ld->model->hp;
    if (!model_read_u32(ld, "expert_group_count", &hp->n_expert_groups, false) ||
        !model_read_u32(ld, "expert_group_used_count", &hp->n_group_used, false))
        return false;
    if (hp->n_expert_groups > 1) {
        uint32_t groups = hp->n_expert_groups, size = hp->n_expert / groups;
        if (hp->n_expert % groups != 0 || hp->n_group_used == 0 ||
            hp->n_group_used > groups || (uint64_t)hp->n_group_used * size < hp->n_expert_used) {
            corral_error_set(ld->err, "%s: inconsistent expert groups (%u experts in %u groups, %u used, %u experts a token)",
                             gguf_path(ld->model->file), hp->n_expert, groups, hp->n_group_used,
                             hp->n_expert_used);
            return false;
        }
    }
    return true;
}

/* The latent attention's keys, with qk and v each head's key and value widths. */
static bool mla_hparams(model_loader *ld, uint32_t qk, uint32_t v)
{
    corral_model *m = ld->model;
    hparams *hp = &m->hp;
    float log_mul = 0.0f;
    if (!model_read_u32(ld, "attention.q_lora_rank", &hp->mla_q_lora, false) ||
        !model_read_u32(ld, "attention.kv_lora_rank", &hp->mla_kv_lora, true) ||
        !model_read_f32(ld, "rope.scaling.yarn_log_multiplier", &log_mul, false) ||
        !deepseek2_read_routing(ld, true, false, true, 0))
        return false;
    if (hp->mla_kv_lora == 0 || hp->n_rot == 0 || qk <= hp->n_rot || v == 0 ||
        hp->mla_kv_lora > UINT32_MAX - hp->n_rot || !isfinite(log_mul)) {
        corral_error_set(ld->err, "%s: inconsistent latent attention (kv latent %u, key %u of which rotated %u, value %u)",
                         gguf_path(m->file), hp->mla_kv_lora, qk, hp->n_rot, v);
        return false;
    }
    hp->mla_nope = qk - hp->n_rot;
    hp->mla_v = v;
    /* the cache's row: [k_rope | latent] under one KV head, the latent as its value */
    hp->n_head_kv = 1;
    hp->head_dim_k = hp->n_rot + hp->mla_kv_lora;
    hp->head_dim_v = hp->mla_kv_lora;
    /* llama.cpp folds this factor into both the rotation and the q.k scale of the latent
     * attention; no converter writes it for these models */
    float attn_factor = 1.0f;
    if (!model_read_f32(ld, "rope.scaling.attn_factor", &attn_factor, false))
        return false;
    if (attn_factor != 1.0f) {
        corral_error_set(ld->err, "%s: rope.scaling.attn_factor %g with latent attention is not supported",
                         gguf_path(m->file), attn_factor);
        return false;
    }
    float mscale = 1.0f + log_mul * logf(1.0f / hp->rope_freq_scale);
    hp->kq_scale = mscale * mscale / sqrtf((float)qk);
    if (m->rope[0].yarn)
        m->rope[0].yarn_mscale = 1.0f;
    return true;
}

static bool deepseek2_hparams(model_loader *ld)
{
    const hparams *hp = &ld->model->hp;
    /* without the _mla keys (older conversions, with attn_kv_b) key_length and value_length
     * are the heads' */
    uint32_t qk = hp->head_dim_k, v = hp->head_dim_v;
    return model_read_u32(ld, "attention.key_length_mla", &qk, false) &&
           model_read_u32(ld, "attention.value_length_mla", &v, false) && mla_hparams(ld, qk, v);
}

/* ollama's glm4moelite files (GLM-4.7-Flash as its engine ran it) are deepseek2's under
 * another name, with the widths the other way round: key_length and value_length are each
 * head's and the _mla keys the cache row's, which the latent cache's shape gives anyway;
 * head_count_kv is the checkpoint's (one cache row serves all heads here). */
static bool glm4moelite_hparams(model_loader *ld)
{
    const hparams *hp = &ld->model->hp;
    return mla_hparams(ld, hp->head_dim_k, hp->head_dim_v);
}

/*
 * The older combined attn_kv_b [kv latent, n_head * (nope + v)], each head's nope key rows
 * then its v value rows: the value rows serve as wv_b in place; the key rows are copied,
 * transposed to what attn_k_b holds (per head, a latent x nope matrix) and in F32, since the
 * absorbed form multiplies the query by their transpose.
 */
static bool bind_combined_kv_b(model_loader *ld, uint32_t il, const char *name)
{
    const hparams *hp = &ld->model->hp;
    layer_weights *l = &ld->model->layers[il];
    size_t H = hp->n_head, nope = hp->mla_nope, latent = hp->mla_kv_lora;
    size_t head_rows = nope + hp->mla_v, floats;
    weight kv_b;
    if (!model_bind_matrix(ld, &kv_b, name, latent, H * head_rows, 1, true))
        return false;
    float *row = malloc(latent * sizeof *row);
    float *copy = checked_mul_size(H * latent, nope, &floats) ? malloc(floats * sizeof *copy)
                                                               : NULL;
    if (!row || !copy || !kv_b.ops->dequantize) {
        corral_error_set(ld->err, "%s: cannot unpack tensor '%s'", gguf_path(ld->model->file),
                         name);
        free(row);
        free(copy);
        return false;
    }
    for (size_t h = 0; h < H; h++)
        for (size_t j = 0; j < nope; j++) {
            kv_b.ops->dequantize((const char *)kv_b.data + (h * head_rows + j) * kv_b.row_bytes,
                                 row, latent);
            for (size_t i = 0; i < latent; i++)
                copy[(h * latent + i) * nope + j] = row[i];
        }
    free(row);
    l->owned_k_b = copy;
    l->wk_b = (weight){.data = copy,
                       .type = TENSOR_TYPE_F32,
                       .n_in = nope,
                       .n_out = latent * H,
                       .row_bytes = nope * sizeof(float),
                       .ops = quant_ops_active(TENSOR_TYPE_F32)};
    l->wv_b = kv_b;
    return true;
}

static bool deepseek2_bind_attention(model_loader *ld, uint32_t il)
{
    const hparams *hp = &ld->model->hp;
    layer_weights *l = &ld->model->layers[il];
    char name[GGUF_MAX_NAME_BYTES + 1];
    size_t E = hp->n_embd, H = hp->n_head, rot = hp->n_rot, latent = hp->mla_kv_lora;
    size_t qk = hp->mla_nope + rot;
#define NAME(suffix) (snprintf(name, sizeof name, "blk.%u." suffix, il), name)
    bool combined = !gguf_find_tensor(ld->model->file, NAME("attn_k_b.weight")) &&
                    gguf_find_tensor(ld->model->file, NAME("attn_kv_b.weight"));
    if (combined && !bind_combined_kv_b(ld, il, name))
        return false;
    bool q_latent = hp->mla_q_lora > 0;
    return model_bind_vector(ld, &l->attn_norm, NAME("attn_norm.weight"), E, true) &&
           (q_latent
                ? model_bind_matrix(ld, &l->wq_a, NAME("attn_q_a.weight"), E, hp->mla_q_lora, 1,
                                    true) &&
                      model_bind_vector(ld, &l->q_a_norm, NAME("attn_q_a_norm.weight"),
                                        hp->mla_q_lora, true) &&
                      model_bind_matrix(ld, &l->wq, NAME("attn_q_b.weight"), hp->mla_q_lora,
                                        H * qk, 1, true)
                : model_bind_matrix(ld, &l->wq, NAME("attn_q.weight"), E, H * qk, 1, true)) &&
           model_bind_matrix(ld, &l->wkv_a, NAME("attn_kv_a_mqa.weight"), E, latent + rot, 1,
                             true) &&
           model_bind_vector(ld, &l->kv_a_norm, NAME("attn_kv_a_norm.weight"), latent, true) &&
           (combined || (model_bind_matrix(ld, &l->wk_b, NAME("attn_k_b.weight"), hp->mla_nope,
                                           latent, H, true) &&
                         model_bind_matrix(ld, &l->wv_b, NAME("attn_v_b.weight"), latent,
                                           hp->mla_v, H, true))) &&
           model_bind_matrix(ld, &l->wo, NAME("attn_output.weight"), H * hp->mla_v, E, 1, true);
#undef NAME
}

/* x += attn(norm(x)); x += ffn(norm(x)), the attention latent. */
static void deepseek2_layer(corral_context *ctx, uint32_t il)
{
    const layer_weights *l = &ctx->model->layers[il];
    forward_rmsnorm(ctx, &l->attn_norm, ctx->x, ctx->xn);
    forward_mla_attention(ctx, il);
    forward_residual(ctx);
    forward_rmsnorm(ctx, &l->ffn_norm, ctx->x, ctx->xn);
    forward_ffn(ctx, il);
    forward_residual(ctx);
}

const model_arch arch_deepseek2 = {
    .name = "deepseek2",
    .rope = ROPE_NORMAL,
    .ffn = FFN_SWIGLU,
    .tensors = ARCH_EXPERTS,
    .read_hparams = deepseek2_hparams,
    .layer = deepseek2_layer,
    .bind_attention = deepseek2_bind_attention,
};

const model_arch arch_glm4moelite = {
    .name = "glm4moelite",
    .rope = ROPE_NORMAL,
    .ffn = FFN_SWIGLU,
    .tensors = ARCH_EXPERTS,
    .read_hparams = glm4moelite_hparams,
    .layer = deepseek2_layer,
    .bind_attention = deepseek2_bind_attention,
};

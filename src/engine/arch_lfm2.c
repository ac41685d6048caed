/*
 * lfm2 (Liquid AI's LFM2 and LFM2.5 350M-2.6B, ollama's lfm2 models): a hybrid of gated short
 * convolution layers and GQA attention layers. A layer whose attention.head_count_kv entry is
 * 0 is a convolution layer; the others are attention with RMSNormed q and k per head and NeoX
 * RoPE. Every layer is x += mixer(rmsnorm(x)); x += SwiGLU(rmsnorm(x)). A convolution layer,
 * per token of a sequence:
 *
 *   [b; c; x] = in_proj . h;  y = c * causal conv (shortconv.l_cache taps, no bias, no
 *   activation) of b * x over the sequence's previous inputs;  out_proj . y
 *
 * The conv's window of the last l_cache - 1 inputs is the layer's per-sequence state, kept in
 * the recurrent storage of delta_net.h (one "head" of n_embd channels and no state matrix), so
 * the recurrent rules apply: a sequence is continued or cleared, never cut back. The final
 * norm is token_embd_norm in llama.cpp's files and output_norm in ollama's. Sliding-window
 * attention (LFM2's ColBERT and audio variants) is not supported yet.
 *
 * lfm2moe (LFM2-8B-A1B): the same layers, the FFN of all but the first
 * leading_dense_block_count a mixture of SwiGLU experts (moe.c) scored as expert_gating_func
 * says (sigmoid in LFM2-8B-A1B), chosen with a selection bias (exp_probs_b) and weighted by
 * their unbiased scores, renormalised.
 */
#include <stdio.h>

#include "delta_net.h"
#include "forward.h"
#include "tensor_type.h"

static bool lfm2_hparams(model_loader *ld)
{
    corral_model *m = ld->model;
    hparams *hp = &m->hp;
    uint32_t taps = 0, window = 0;
    if (!model_read_u32(ld, "shortconv.l_cache", &taps, true) ||
        !model_read_u32(ld, "attention.sliding_window", &window, false))
        return false;
    const char *path = gguf_path(m->file);
    if (taps < 2 || taps > 64) {
        corral_error_set(ld->err, "%s: %s.shortconv.l_cache is %u; 2 to 64 taps are supported",
                         path, m->arch->name, taps);
        return false;
    }
    if (window > 0) {
        corral_error_set(ld->err, "%s: %s with sliding-window attention (window %u) is not supported yet",
                         path, m->arch->name, window);
        return false;
    }
    hp->ssm_conv_kernel = taps;
    hp->ssm_v_heads = 1;
    hp->ssm_head_dim = hp->n_embd;
    hp->ssm_shortconv = true;
    /* which layers convolve: head_count_kv 0 in the per-layer array (model.c checked it); a
     * single count means attention everywhere */
    char key[128];
    snprintf(key, sizeof key, "%s.attention.head_count_kv", m->arch->name);
    const gguf_kv *kv = gguf_find_kv(m->file, key);
    for (uint32_t il = 0; kv && kv->type == GGUF_TYPE_ARRAY && il < hp->n_layer; il++)
        m->layers[il].recurrent = gguf_kv_i64(kv, il) == 0;
    return true;
}

/* ollama's first LFM2 conversions wrote the checkpoint's feed_forward_length before LFM2's
 * adjustment (two thirds, rounded up to a multiple), e.g. 12288 for FFNs 8192 wide: the width
 * is the FFN tensors', as llama.cpp's reading of those files takes it. */
static bool lfm2_dense_hparams(model_loader *ld)
{
    hparams *hp = &ld->model->hp;
    const gguf_tensor *gate = gguf_find_tensor(ld->model->file, "blk.0.ffn_gate.weight");
    if (!lfm2_hparams(ld))
        return false;
    if (gate && gate->ne[1] > 0 && gate->ne[1] < hp->n_ff)
        hp->n_ff = (uint32_t)gate->ne[1];
    return true;
}

/* lfm2moe's routing, as llama.cpp reads it: the leading dense layers, the experts' width and a
 * gating it must name; the chosen weights always renormalised, never scaled (llama.cpp reads
 * no expert_weights_norm or _scale for it), and expert groups where the file has them. */
static bool lfm2moe_hparams(model_loader *ld)
{
    hparams *hp = &ld->model->hp;
    uint32_t gating = GATING_NONE;
    if (!lfm2_hparams(ld) ||
        !model_read_u32(ld, "leading_dense_block_count", &hp->n_layer_dense_lead, false) ||
        !model_read_u32(ld, "expert_feed_forward_length", &hp->n_ff_exp, true) ||
        !model_read_u32(ld, "expert_gating_func", &gating, true))
        return false;
    const char *path = gguf_path(ld->model->file);
    if (gating != GATING_SOFTMAX && gating != GATING_SIGMOID) {
        corral_error_set(ld->err, "%s: expert gating function %u is not supported (1 softmax, 2 sigmoid)",
                         path, gating);
        return false;
    }
    if (hp->n_layer_dense_lead > hp->n_layer) {
        corral_error_set(ld->err, "%s: %u leading dense layers of %u layers", path,
                         hp->n_layer_dense_lead, hp->n_layer);
        return false;
    }
    hp->expert_gating_sigmoid = gating == GATING_SIGMOID;
    hp->expert_weights_norm = true;
    hp->expert_weights_scale = 1.0f;
    return expert_groups_read(ld);
}

#define NAME(suffix) (snprintf(name, sizeof name, "blk.%u." suffix, il), name)

static bool bind_shortconv(model_loader *ld, uint32_t il)
{
    const hparams *hp = &ld->model->hp;
    layer_weights *l = &ld->model->layers[il];
    char name[GGUF_MAX_NAME_BYTES + 1];
    size_t E = hp->n_embd;
    if (!model_bind_matrix(ld, &l->ssm_in, NAME("shortconv.in_proj.weight"), E, 3 * E, 1, true) ||
        !model_bind_matrix(ld, &l->ssm_conv, NAME("shortconv.conv.weight"), hp->ssm_conv_kernel,
                           E, 1, true))
        return false;
    /* the conv's taps are read as floats once per context (delta_net.c) */
    if (l->ssm_conv.type != TENSOR_TYPE_F32 && l->ssm_conv.type != TENSOR_TYPE_F16) {
        corral_error_set(ld->err, "%s: tensor '%s' has type %s, which is not supported (F32 and F16 are)",
                         gguf_path(ld->model->file), name, tensor_type_name(l->ssm_conv.type));
        return false;
    }
    return model_bind_matrix(ld, &l->ssm_out, NAME("shortconv.out_proj.weight"), E, E, 1, true);
}

static bool bind_attention(model_loader *ld, uint32_t il)
{
    const hparams *hp = &ld->model->hp;
    layer_weights *l = &ld->model->layers[il];
    char name[GGUF_MAX_NAME_BYTES + 1];
    return model_bind_attention_projections(ld, il) &&
           model_bind_vector(ld, &l->q_norm, NAME("attn_q_norm.weight"), hp->head_dim_k, true) &&
           model_bind_vector(ld, &l->k_norm, NAME("attn_k_norm.weight"), hp->head_dim_k, true);
}

static bool lfm2_bind_attention(model_loader *ld, uint32_t il)
{
    layer_weights *l = &ld->model->layers[il];
    char name[GGUF_MAX_NAME_BYTES + 1];
    return model_bind_vector(ld, &l->attn_norm, NAME("attn_norm.weight"), ld->model->hp.n_embd,
                             true) &&
           (l->recurrent ? bind_shortconv(ld, il) : bind_attention(ld, il));
}

#undef NAME

/* ctx->xn becomes layer il's short convolution over ctx->xn, the batch's tokens taken in
 * order, each moving its sequence's window on. */
static void forward_shortconv(corral_context *ctx, uint32_t il)
{
    const layer_weights *l = &ctx->model->layers[il];
    delta_net_context *d = ctx->delta;
    size_t n = ctx->n_tokens, E = d->channels, taps = ctx->model->hp.ssm_conv_kernel;
    const matrix_product in = {&l->ssm_in, NULL, 0, d->proj};
    forward_matmul(ctx, &in, 1, ctx->xn, n);
    for (size_t t = 0; t < n; t++) {
        uint32_t seq = ctx->tok_seq[t];
        d->dirty[seq] = true;
        delta_net_gated_conv_token(d, il, taps, delta_net_conv_state(d, seq, il),
                                   d->proj + t * 3 * E, d->out + t * E);
    }
    const matrix_product out = {&l->ssm_out, NULL, 0, ctx->xn};
    forward_matmul(ctx, &out, 1, d->out, n);
}

/* x += mixer(norm(x)); x += ffn(norm(x)), the mixer a short convolution or attention. */
static void lfm2_layer(corral_context *ctx, uint32_t il)
{
    layer_pre_norm_hybrid(ctx, il, forward_shortconv, forward_attention);
}

const model_arch arch_lfm2 = {
    .name = "lfm2",
    .rope = ROPE_NEOX,
    .ffn = FFN_SWIGLU,
    .tensors = ARCH_KV_HEADS_PER_LAYER | ARCH_OUTPUT_NORM_TOKEN_EMBD,
    .read_hparams = lfm2_dense_hparams,
    .layer = lfm2_layer,
    .bind_attention = lfm2_bind_attention,
};

const model_arch arch_lfm2moe = {
    .name = "lfm2moe",
    .rope = ROPE_NEOX,
    .ffn = FFN_SWIGLU,
    .tensors = ARCH_KV_HEADS_PER_LAYER | ARCH_OUTPUT_NORM_TOKEN_EMBD | ARCH_EXPERTS,
    .read_hparams = lfm2moe_hparams,
    .layer = lfm2_layer,
    .bind_attention = lfm2_bind_attention,
};

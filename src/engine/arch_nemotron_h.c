/*
 * nemotron_h (NVIDIA Nemotron-H 8B/47B/56B, Nemotron Nano 2 9B/12B): a hybrid whose layers
 * are each ONE of a Mamba2 mixer (mamba2.c), an attention mixer (no RoPE: the Mamba2 layers
 * carry the order) or an FFN (ReLU² of up, then down; no gate), each x += f(rmsnorm(x)) with
 * the layer's one attn_norm. The per-layer arrays attention.head_count_kv and
 * feed_forward_length tell them apart as llama.cpp does: both 0 is a Mamba2 layer, KV heads
 * an attention layer, an FFN width an FFN layer. Unlike granitehybrid, an FFN layer keeps no
 * state at all.
 *
 * nemotron_h_moe (Nemotron 3 Nano 30B-A3B, ollama's nemotron-3-nano): the FFN layers are a
 * mixture of ungated ReLU² experts (moe.c) routed by sigmoid scores, chosen with a selection
 * bias (exp_probs_b), normalised and scaled as the file says, beside an ungated ReLU² shared
 * expert. Nemotron 3 Super's routed experts are latent (moe_latent_size): the router and the
 * shared expert read the normed input at full width, the routed experts that input projected
 * down into the latent (ffn_latent_down), and their weighted sum is projected back up
 * (ffn_latent_up) before the shared expert's output is added, as llama.cpp runs them.
 * ollama's files name the projections ffn_latent_in and ffn_latent_out and carry no
 * moe_latent_size: the in projection's width is the latent's. The multi-token prediction
 * head (llama.cpp's blocks past block_count - nextn_predict_layers, ollama's mtp.* tensors)
 * is not loaded.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "forward.h"
#include "mamba2.h"

/* Layer il's entry of a per-layer array key, or `scalar` (what model.c read) where the key is
 * one value or absent: model.c checked the arrays' lengths and values. */
static uint32_t layer_value(const corral_model *m, const char *suffix, uint32_t il,
                            uint32_t scalar)
{
    char key[128];
    snprintf(key, sizeof key, "%s.%s", m->arch->name, suffix);
    const gguf_kv *kv = gguf_find_kv(m->file, key);
    return kv && kv->type == GGUF_TYPE_ARRAY ? (uint32_t)gguf_kv_u64(kv, il) : scalar;
}

/* The FFN width of an FFN layer; 0 for a mixer layer. */
static uint32_t ffn_width(const corral_model *m, uint32_t il)
{
    return layer_value(m, "feed_forward_length", il, m->hp.n_ff);
}

/* The latent's width from the first layer's down projection under either name, where the
 * file has no moe_latent_size (ollama's); 0 where it has none. */
static bool latent_from_tensors(model_loader *ld, uint32_t *latent)
{
    const gguf_file *f = ld->model->file;
    static const char *const suffixes[] = {".ffn_latent_down.weight", ".ffn_latent_in.weight"};
    for (size_t i = 0; i < gguf_n_tensors(f); i++) {
        const gguf_tensor *t = gguf_tensor_at(f, i);
        size_t n = strlen(t->name);
        for (size_t k = 0; k < sizeof suffixes / sizeof suffixes[0]; k++) {
            size_t suffix = strlen(suffixes[k]);
            if (n <= suffix || strcmp(t->name + n - suffix, suffixes[k]) != 0)
                continue;
            if (t->ne[1] <= 0 || t->ne[1] > UINT32_MAX) {
                corral_error_set(ld->err, "%s: tensor '%s' gives no usable latent width (%lld)",
                                 gguf_path(f), t->name, (long long)t->ne[1]);
                return false;
            }
            *latent = (uint32_t)t->ne[1];
            return true;
        }
    }
    return true;
}

/* The experts' keys, with llama.cpp's defaults: no normalisation, scale 1. */
static bool read_experts(model_loader *ld)
{
    hparams *hp = &ld->model->hp;
    hp->expert_gating_sigmoid = true;
    hp->expert_weights_norm = false;
    hp->expert_weights_scale = 0.0f;
    if (hp->n_expert_used > 0)
        hp->n_ff_exp = hp->n_ff / hp->n_expert_used;
    if (!model_read_u32(ld, "expert_feed_forward_length", &hp->n_ff_exp, false) ||
        !model_read_u32(ld, "expert_shared_feed_forward_length", &hp->n_ff_shexp, false) ||
        !model_read_bool(ld, "expert_weights_norm", &hp->expert_weights_norm, false) ||
        !model_read_f32(ld, "expert_weights_scale", &hp->expert_weights_scale, false) ||
        !model_read_u32(ld, "expert_group_count", &hp->n_expert_groups, false) ||
        !model_read_u32(ld, "expert_group_used_count", &hp->n_group_used, false) ||
        !model_read_u32(ld, "moe_latent_size", &hp->moe_latent, false) ||
        (hp->moe_latent == 0 && !latent_from_tensors(ld, &hp->moe_latent)))
        return false;
    const char *path = gguf_path(ld->model->file);
    if (hp->expert_weights_scale == 0.0f)
        hp->expert_weights_scale = 1.0f;
    if (hp->n_ff_shexp == 0 || !isfinite(hp->expert_weights_scale) ||
        (hp->n_expert_groups > 1 &&
         (hp->n_expert % hp->n_expert_groups != 0 || hp->n_group_used == 0 ||
          hp->n_group_used > hp->n_expert_groups))) {
        corral_error_set(ld->err, "%s: inconsistent experts (shared width %u, scale %g, %u groups, %u used)",
                         path, hp->n_ff_shexp, hp->expert_weights_scale, hp->n_expert_groups,
                         hp->n_group_used);
        return false;
    }
    return true;
}

static bool nemotron_h_hparams(model_loader *ld)
{
    corral_model *m = ld->model;
    uint32_t n_predict = 0;
    if (!model_read_u32(ld, "nextn_predict_layers", &n_predict, false))
        return false;
    /* block_count counts the multi-token prediction blocks llama.cpp's converter appends after
     * the trunk (Super's: one block with both an attention and an FFN width), which only
     * speculative drafting would run */
    if (n_predict >= m->hp.n_layer) {
        corral_error_set(ld->err, "%s: %u prediction layers of %u layers leave no model",
                         gguf_path(m->file), n_predict, m->hp.n_layer);
        return false;
    }
    m->hp.n_layer -= n_predict;
    if (!mamba2_hparams(ld) || (m->hp.n_expert > 0 && !read_experts(ld)))
        return false;
    for (uint32_t il = 0; il < m->hp.n_layer; il++) {
        layer_weights *l = &m->layers[il];
        uint32_t kv_heads = layer_value(m, "attention.head_count_kv", il, m->hp.n_head_kv);
        uint32_t n_ff = ffn_width(m, il);
        if (kv_heads > 0 && n_ff > 0) {
            corral_error_set(ld->err, "%s: layer %u has both KV heads (%u) and an FFN width (%u): a nemotron_h layer is one of Mamba2, attention or FFN",
                             gguf_path(m->file), il, kv_heads, n_ff);
            return false;
        }
        l->recurrent = kv_heads == 0 && n_ff == 0;
        l->no_rope = true;
        l->n_ff = n_ff;
    }
    return true;
}

#define NAME(suffix) (snprintf(name, sizeof name, "blk.%u." suffix, il), name)

/* The projections, then their optional biases at the widths just bound. */
static bool bind_attention(model_loader *ld, uint32_t il)
{
    layer_weights *l = &ld->model->layers[il];
    char name[GGUF_MAX_NAME_BYTES + 1];
    return model_bind_attention_projections(ld, il) &&
           model_bind_vector(ld, &l->bq, NAME("attn_q.bias"), l->wq.n_out, false) &&
           model_bind_vector(ld, &l->bk, NAME("attn_k.bias"), l->wk.n_out, false) &&
           model_bind_vector(ld, &l->bv, NAME("attn_v.bias"), l->wv.n_out, false) &&
           model_bind_vector(ld, &l->bo, NAME("attn_output.bias"), l->wo.n_out, false);
}

/* Every layer's norm, and its mixer where it has one (the FFN layers' tensors: below). */
static bool nemotron_h_bind_attention(model_loader *ld, uint32_t il)
{
    const corral_model *m = ld->model;
    layer_weights *l = &ld->model->layers[il];
    char name[GGUF_MAX_NAME_BYTES + 1];
    if (!model_bind_vector(ld, &l->attn_norm, NAME("attn_norm.weight"), m->hp.n_embd, true))
        return false;
    if (l->recurrent)
        return mamba2_bind_layer(ld, il);
    return ffn_width(m, il) > 0 || bind_attention(ld, il);
}

/* An FFN layer's router, experts (3-D tensors, at the latent's width where there is one, with
 * its two projections) and shared expert. */
static bool bind_experts(model_loader *ld, uint32_t il)
{
    const hparams *hp = &ld->model->hp;
    layer_weights *l = &ld->model->layers[il];
    char name[GGUF_MAX_NAME_BYTES + 1];
    size_t E = hp->n_embd, F = hp->n_ff_exp, S = hp->n_ff_shexp, n = hp->n_expert;
    size_t W = hp->moe_latent > 0 ? hp->moe_latent : E; /* the experts' input and output */
    if (hp->moe_latent > 0 &&
        (!model_bind_matrix(ld, &l->ffn_latent_down, NAME("ffn_latent_down.weight"), E, W, 1,
                            true) ||
         !model_bind_matrix(ld, &l->ffn_latent_up, NAME("ffn_latent_up.weight"), W, E, 1,
                            true)))
        return false;
    return model_bind_matrix(ld, &l->ffn_gate_inp, NAME("ffn_gate_inp.weight"), E, n, 1, true) &&
           model_bind_vector(ld, &l->exp_probs_b, NAME("exp_probs_b.bias"), n, true) &&
           model_bind_matrix(ld, &l->ffn_up_exps, NAME("ffn_up_exps.weight"), W, F, n, true) &&
           model_bind_matrix(ld, &l->ffn_down_exps, NAME("ffn_down_exps.weight"), F, W, n,
                             true) &&
           model_bind_matrix(ld, &l->ffn_up_shexp, NAME("ffn_up_shexp.weight"), E, S, 1, true) &&
           model_bind_matrix(ld, &l->ffn_down_shexp, NAME("ffn_down_shexp.weight"), S, E, 1,
                             true);
}

/* An FFN layer's up and down (biases optional), or its experts; a mixer layer has none. */
static bool nemotron_h_bind_ffn(model_loader *ld, uint32_t il)
{
    const corral_model *m = ld->model;
    layer_weights *l = &ld->model->layers[il];
    char name[GGUF_MAX_NAME_BYTES + 1];
    size_t E = m->hp.n_embd, F = ffn_width(m, il);
    if (F == 0)
        return true;
    if (m->hp.n_expert > 0)
        return bind_experts(ld, il);
    return model_bind_matrix(ld, &l->ffn_up, NAME("ffn_up.weight"), E, F, 1, true) &&
           model_bind_vector(ld, &l->ffn_up_b, NAME("ffn_up.bias"), F, false) &&
           model_bind_matrix(ld, &l->ffn_down, NAME("ffn_down.weight"), F, E, 1, true) &&
           model_bind_vector(ld, &l->ffn_down_b, NAME("ffn_down.bias"), E, false);
}

#undef NAME

/* ollama's names of the latent projections: ffn_latent_in for llama.cpp's ffn_latent_down,
 * ffn_latent_out for its ffn_latent_up. */
static const char *nemotron_h_alias(const char *name, char *buf, size_t size)
{
    static const char *const names[][2] = {{".ffn_latent_down.weight", ".ffn_latent_in.weight"},
                                           {".ffn_latent_up.weight", ".ffn_latent_out.weight"}};
    size_t n = strlen(name);
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        size_t suffix = strlen(names[i][0]);
        if (n > suffix && strcmp(name + n - suffix, names[i][0]) == 0) {
            snprintf(buf, size, "%.*s%s", (int)(n - suffix), name, names[i][1]);
            return buf;
        }
    }
    return NULL;
}

/* x += mixer(norm(x)), the mixer Mamba2, attention or the FFN. */
static void nemotron_h_layer(corral_context *ctx, uint32_t il)
{
    const layer_weights *l = &ctx->model->layers[il];
    forward_rmsnorm(ctx, &l->attn_norm, ctx->x, ctx->xn);
    if (l->recurrent)
        forward_mamba2(ctx, il);
    else if (l->wq.data)
        forward_attention(ctx, il);
    else
        forward_ffn(ctx, il); /* ReLU² of up, or the experts */
    forward_residual(ctx);
}

const model_arch arch_nemotron_h = {
    .name = "nemotron_h",
    .rope = ROPE_NORMAL,
    .ffn = FFN_RELU_SQR,
    .tensors = ARCH_KV_HEADS_PER_LAYER | ARCH_PER_LAYER_WIDTHS,
    .read_hparams = nemotron_h_hparams,
    .layer = nemotron_h_layer,
    .bind_attention = nemotron_h_bind_attention,
    .ffn_length_optional = true,
    .bind_ffn = nemotron_h_bind_ffn,
};

const model_arch arch_nemotron_h_moe = {
    .name = "nemotron_h_moe",
    .rope = ROPE_NORMAL,
    .ffn = FFN_SWIGLU, /* unused: the experts have no gate, which moe.c takes for ReLU² */
    .tensors = ARCH_KV_HEADS_PER_LAYER | ARCH_PER_LAYER_WIDTHS | ARCH_EXPERTS,
    .read_hparams = nemotron_h_hparams,
    .layer = nemotron_h_layer,
    .bind_attention = nemotron_h_bind_attention,
    .ffn_length_optional = true,
    .bind_ffn = nemotron_h_bind_ffn,
    .tensor_alias = nemotron_h_alias,
};

/*
 * granitehybrid (IBM Granite 4.0 "-h" models: micro-h, tiny-h, small-h): a hybrid of Mamba2
 * and attention layers. A layer whose attention.head_count_kv entry is 0 is a Mamba2 layer
 * (mamba2.c), whose per-sequence state takes the place of a KV cache; the others are plain
 * attention (q, k, v, output; no RoPE when rope.scaling.finetuned is false, as Granite 4.0's
 * converters write it). Every layer is a pre-norm block with a SwiGLU FFN, dense or a
 * mixture of experts with a shared expert (expert_count, expert_shared_feed_forward_length),
 * and Granite's four scalars as the granite family reads them (arch_granite.c).
 */
#include <stdio.h>

#include "forward.h"
#include "mamba2.h"
#include "tensor_type.h"

/* Which layers are Mamba2: head_count_kv 0 in the per-layer array (model.c checked it). A
 * single count means attention everywhere. */
static bool mark_recurrent_layers(model_loader *ld)
{
    corral_model *m = ld->model;
    char key[128];
    snprintf(key, sizeof key, "%s.attention.head_count_kv", m->arch->name);
    const gguf_kv *kv = gguf_find_kv(m->file, key);
    if (!kv || kv->type != GGUF_TYPE_ARRAY)
        return true;
    for (uint32_t il = 0; il < m->hp.n_layer; il++)
        m->layers[il].recurrent = gguf_kv_i64(kv, il) == 0;
    return true;
}

bool mamba2_hparams(model_loader *ld)
{
    corral_model *m = ld->model;
    hparams *hp = &m->hp;
    uint32_t inner = 0;
    if (!model_read_u32(ld, "ssm.conv_kernel", &hp->ssm_conv_kernel, true) ||
        !model_read_u32(ld, "ssm.state_size", &hp->ssm_state, true) ||
        !model_read_u32(ld, "ssm.group_count", &hp->ssm_k_heads, true) ||
        !model_read_u32(ld, "ssm.time_step_rank", &hp->ssm_v_heads, true) ||
        !model_read_u32(ld, "ssm.inner_size", &inner, true))
        return false;
    /* the caps keep a layer's state (inner x state_size floats) and the conv's window well
     * inside size_t */
    if (hp->ssm_conv_kernel == 0 || hp->ssm_conv_kernel > 64 || hp->ssm_state == 0 ||
        hp->ssm_state > 4096 || hp->ssm_k_heads == 0 || hp->ssm_v_heads == 0 ||
        hp->ssm_v_heads > 4096 || hp->ssm_v_heads % hp->ssm_k_heads != 0 || inner == 0 ||
        inner % hp->ssm_v_heads != 0 || inner / hp->ssm_v_heads > 4096) {
        corral_error_set(ld->err, "%s: inconsistent Mamba2 sizes (conv %u, state %u, %u groups, %u heads, inner %u)",
                         gguf_path(m->file), hp->ssm_conv_kernel, hp->ssm_state,
                         hp->ssm_k_heads, hp->ssm_v_heads, inner);
        return false;
    }
    hp->ssm_head_dim = inner / hp->ssm_v_heads;
    hp->ssm_mamba2 = true;
    return true;
}

static bool granitehybrid_hparams(model_loader *ld)
{
    return granite_hparams(ld) &&
           model_read_u32(ld, "expert_shared_feed_forward_length", &ld->model->hp.n_ff_shexp,
                          false) &&
           mamba2_hparams(ld) && mark_recurrent_layers(ld);
}

/* Bound with the shape checks of a matrix, read as floats (ssm_a, ssm_d, ssm_norm). */
static bool bind_f32(model_loader *ld, weight *w, const char *name, size_t n_in, size_t n_out,
                     bool required)
{
    if (!model_bind_matrix(ld, w, name, n_in, n_out, 1, required))
        return false;
    if (w->data && w->type != TENSOR_TYPE_F32) {
        corral_error_set(ld->err, "%s: tensor '%s' has type %s, which is not supported (F32 is)",
                         gguf_path(ld->model->file), name, tensor_type_name(w->type));
        return false;
    }
    return true;
}

#define NAME(suffix) (snprintf(name, name_size, "blk.%u." suffix, il), name)

bool mamba2_bind_layer(model_loader *ld, uint32_t il)
{
    char name[GGUF_MAX_NAME_BYTES + 1];
    size_t name_size = sizeof name;
    const hparams *hp = &ld->model->hp;
    layer_weights *l = &ld->model->layers[il];
    size_t E = hp->n_embd, H = hp->ssm_v_heads, G = hp->ssm_k_heads;
    size_t inner = H * hp->ssm_head_dim, channels = inner + 2 * G * hp->ssm_state;
    bool ok = model_bind_matrix(ld, &l->ssm_in, NAME("ssm_in.weight"), E, inner + channels + H,
                                1, true) &&
              model_bind_matrix(ld, &l->ssm_conv, NAME("ssm_conv1d.weight"),
                                hp->ssm_conv_kernel, channels, 1, true);
    /* the conv's taps are read as floats once per context (delta_net.c) */
    if (ok && l->ssm_conv.type != TENSOR_TYPE_F32 && l->ssm_conv.type != TENSOR_TYPE_F16) {
        corral_error_set(ld->err, "%s: tensor '%s' has type %s, which is not supported (F32 and F16 are)",
                         gguf_path(ld->model->file), name, tensor_type_name(l->ssm_conv.type));
        return false;
    }
    return ok &&
           model_bind_vector(ld, &l->ssm_conv_b, NAME("ssm_conv1d.bias"), channels, false) &&
           model_bind_vector(ld, &l->ssm_dt, NAME("ssm_dt.bias"), H, true) &&
           bind_f32(ld, &l->ssm_a, NAME("ssm_a"), 1, H, true) &&
           bind_f32(ld, &l->ssm_d, NAME("ssm_d"), 1, H, true) &&
           bind_f32(ld, &l->ssm_norm, NAME("ssm_norm.weight"), inner / G, G, true) &&
           model_bind_matrix(ld, &l->ssm_out, NAME("ssm_out.weight"), inner, E, 1, true);
}

static bool granitehybrid_bind_attention(model_loader *ld, uint32_t il)
{
    layer_weights *l = &ld->model->layers[il];
    char name[GGUF_MAX_NAME_BYTES + 1];
    size_t name_size = sizeof name;
    return model_bind_vector(ld, &l->attn_norm, NAME("attn_norm.weight"), ld->model->hp.n_embd,
                             true) &&
           (l->recurrent ? mamba2_bind_layer(ld, il) : model_bind_attention_projections(ld, il));
#undef NAME
}

/* x += s * mixer(norm(x)); x += s * ffn(norm(x)), the mixer Mamba2 or attention and s the
 * residual scale. */
static void granitehybrid_layer(corral_context *ctx, uint32_t il)
{
    layer_pre_norm_hybrid(ctx, il, forward_mamba2, forward_attention);
}

const model_arch arch_granitehybrid = {
    .name = "granitehybrid",
    .rope = ROPE_NORMAL,
    .ffn = FFN_SWIGLU,
    .tensors = ARCH_KV_HEADS_PER_LAYER,
    .read_hparams = granitehybrid_hparams,
    .layer = granitehybrid_layer,
    .bind_attention = granitehybrid_bind_attention,
};

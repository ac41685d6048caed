/*
 * laguna (Poolside's Laguna XS.2, S.2 and M.1): a pre-norm block whose attention has per-head
 * q/k RMSNorms before NeoX RoPE and an output gate: before attn_output the heads' values are
 * multiplied by softplus(attn_gate . the attention's input), one gate per head (XS.2) or per
 * element (M.1), as the tensor's width says. attention.head_count may hold a value per layer
 * (XS.2's full layers have 48 heads, its sliding ones 64), over one count of KV heads. With
 * attention.sliding_window, the layers sliding_window_pattern marks (a period, 4 by default,
 * whose first layer is global; or ollama's boolean per layer) attend through the window and
 * rotate plain RoPE with their own base and dimensions (rope.freq_base_swa,
 * rope.dimension_count_swa; ollama's rope.swa.freq_base and rope.swa.dimension_count), the
 * global layers the file's (YaRN on XS.2). The first leading_dense_block_count layers have a
 * dense SwiGLU FFN, the others DeepSeek-V3's routing (moe.c: sigmoid scores, a selection bias,
 * the chosen weights normalised and scaled) beside one shared expert of
 * expert_shared_feed_forward_length. ollama's files name the gate attn_g. As llama.cpp, YaRN's
 * betas are always 32 and 1 (model_arch.yarn_default_betas).
 */
#include <stdio.h>

#include "forward.h"

/* XS.2: a global layer, then three sliding ones */
enum { LAGUNA_SWA_PERIOD = 4 };

/* Each layer's query heads: one count, or one per layer; each a multiple of the KV heads. */
static bool laguna_heads(model_loader *ld)
{
    corral_model *m = ld->model;
    hparams *hp = &m->hp;
    uint32_t heads[MODEL_MAX_LAYERS];
    for (uint32_t il = 0; il < hp->n_layer; il++)
        heads[il] = hp->n_head;
    if (!model_read_u32_layers(ld, "attention.head_count", heads, true))
        return false;
    for (uint32_t il = 0; il < hp->n_layer; il++) {
        if (heads[il] == 0 || heads[il] % hp->n_head_kv != 0) {
            corral_error_set(ld->err, "%s: layer %u has %u query heads for %u KV heads",
                             gguf_path(m->file), il, heads[il], hp->n_head_kv);
            return false;
        }
        m->layers[il].n_head = heads[il];
    }
    if (hp->head_dim_k != hp->head_dim_v) { /* llama.cpp asserts them equal */
        corral_error_set(ld->err, "%s: laguna's key and value heads must be of one width (%u, %u)",
                         gguf_path(m->file), hp->head_dim_k, hp->head_dim_v);
        return false;
    }
    return true;
}

/* The sliding layers: ollama's boolean per layer, or a period whose first layer is global (0:
 * every layer slides), as llama.cpp's set_swa_pattern(period, dense_first). */
static bool laguna_mark_sliding_layers(model_loader *ld)
{
    corral_model *m = ld->model;
    uint32_t n_layer = m->hp.n_layer;
    char key[128];
    snprintf(key, sizeof key, "%s.attention.sliding_window_pattern", m->arch->name);
    const gguf_kv *kv = gguf_find_kv(m->file, key);
    if (kv && kv->type == GGUF_TYPE_ARRAY) {
        if (!gguf_get_array(m->file, key, GGUF_TYPE_BOOL, &kv, ld->err))
            return false;
        if (kv->n != n_layer) {
            corral_error_set(ld->err, "%s: %s has %llu values for %u layers",
                             gguf_path(m->file), key, (unsigned long long)kv->n, n_layer);
            return false;
        }
        for (uint32_t il = 0; il < n_layer; il++)
            m->layers[il].sliding = gguf_kv_bool(kv, il);
        return true;
    }
    uint32_t period = LAGUNA_SWA_PERIOD;
    if (!model_read_u32(ld, "attention.sliding_window_pattern", &period, false))
        return false;
    for (uint32_t il = 0; il < n_layer; il++)
        m->layers[il].sliding = period == 0 || il % period != 0;
    return true;
}

/* `<arch>.<name>` or, where the file lacks it, ollama's `<arch>.<ollama_name>`. */
static bool read_u32_either(model_loader *ld, const char *name, const char *ollama_name,
                            uint32_t *out)
{
    char key[128];
    snprintf(key, sizeof key, "%s.%s", ld->model->arch->name, name);
    return model_read_u32(ld, gguf_find_kv(ld->model->file, key) ? name : ollama_name, out, false);
}

static bool read_f32_either(model_loader *ld, const char *name, const char *ollama_name,
                            float *out)
{
    char key[128];
    snprintf(key, sizeof key, "%s.%s", ld->model->arch->name, name);
    return model_read_f32(ld, gguf_find_kv(ld->model->file, key) ? name : ollama_name, out, false);
}

/* The sliding layers' window, kind and RoPE: plain, their own base and dimensions, no scaling
 * (llama.cpp zeroes YaRN's extrapolation and magnitude for them). */
static bool laguna_sliding(model_loader *ld)
{
    corral_model *m = ld->model;
    hparams *hp = &m->hp;
    hp->n_swa = 0;
    if (!model_read_u32(ld, "attention.sliding_window", &hp->n_swa, false))
        return false;
    /* llama.cpp passes no frequency factors to either kind of layer */
    m->rope[0].n_rot = hp->n_rot;
    m->rope[0].no_freq_factors = true;
    if (hp->n_swa == 0) /* M.1: every layer global */
        return true;
    float base = hp->rope_freq_base;
    uint32_t n_rot = hp->n_rot;
    if (!laguna_mark_sliding_layers(ld) ||
        !read_f32_either(ld, "rope.freq_base_swa", "rope.swa.freq_base", &base) ||
        !read_u32_either(ld, "rope.dimension_count_swa", "rope.swa.dimension_count", &n_rot))
        return false;
    if (n_rot == 0 || n_rot % 2 != 0 || n_rot > hp->head_dim_k || !(base > 1.0f)) {
        corral_error_set(ld->err, "%s: inconsistent RoPE of the sliding layers (%u dimensions of %u, base %g)",
                         gguf_path(m->file), n_rot, hp->head_dim_k, base);
        return false;
    }
    m->rope[1] = (rope_variant){
        .freq_base = base, .freq_scale = 1.0f, .n_rot = n_rot, .no_freq_factors = true};
    m->n_rope_variants = 2;
    /* the context's cos/sin rows are as wide as the widest variant's */
    hp->n_rot = n_rot > hp->n_rot ? n_rot : hp->n_rot;
    for (uint32_t il = 0; il < hp->n_layer; il++)
        m->layers[il].rope_variant = m->layers[il].sliding ? 1 : 0;
    return true;
}

/* deepseek2's routing (sigmoid by default, leading dense layers required), with one shared
 * expert unless the file says more, of its own width where the file gives it. */
static bool laguna_experts(model_loader *ld)
{
    hparams *hp = &ld->model->hp;
    uint32_t n_shared = 1, width = 0;
    if (!deepseek2_read_routing(ld, true, true, true, 0) ||
        !model_read_u32(ld, "expert_shared_count", &n_shared, false) ||
        !model_read_u32(ld, "expert_shared_feed_forward_length", &width, false))
        return false;
    uint64_t shared = width ? width : (uint64_t)hp->n_ff_exp * n_shared;
    if (shared == 0 || shared > UINT32_MAX) {
        corral_error_set(ld->err, "%s: inconsistent shared expert (%u of width %u)",
                         gguf_path(ld->model->file), n_shared, width);
        return false;
    }
    hp->n_ff_shexp = (uint32_t)shared;
    return true;
}

static bool laguna_hparams(model_loader *ld)
{
    return laguna_heads(ld) && laguna_sliding(ld) && laguna_experts(ld);
}

const model_arch arch_laguna = {
    .name = "laguna",
    .rope = ROPE_NEOX,
    .ffn = FFN_SWIGLU,
    .tensors = ARCH_QK_NORM | ARCH_EXPERTS | ARCH_ATTN_OUT_GATE,
    .read_hparams = laguna_hparams,
    .layer = layer_pre_norm,
    .head_count_per_layer = true,
    .yarn_default_betas = true,
};

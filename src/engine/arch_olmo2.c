/*
 * olmo2 (OLMo 2 and Olmo 3): no norm before attention or FFN; instead each branch output is
 * RMS-normed (post_attention_norm, post_ffw_norm) before its residual, and q and k are
 * RMS-normed over the whole projection (all heads at once) before the head split and NeoX
 * RoPE. Olmo 3 files add attention.sliding_window: the layers that attention.sliding_window_pattern
 * marks (three of every four by default) attend through the window and rotate with the plain
 * rope.freq_base, with neither the file's RoPE scaling nor its magnitude factor; the global
 * layers take the file's scaling (YaRN on Olmo 3). ollama's first Olmo 3 files say olmo3,
 * with the same keys under that name.
 */
#include <stdio.h>

#include "forward.h"

/* Olmo 3's layers when the file names no pattern: three sliding, then a global one. */
enum { OLMO3_SWA_PERIOD = 4 };

/* Marks the sliding layers: per-layer booleans, or a period whose last layer is global (0:
 * every layer slides), as llama.cpp reads the pattern key. */
static bool olmo3_mark_sliding_layers(model_loader *ld)
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
    uint32_t period = OLMO3_SWA_PERIOD;
    if (!model_read_u32(ld, "attention.sliding_window_pattern", &period, false))
        return false;
    for (uint32_t il = 0; il < n_layer; il++)
        m->layers[il].sliding = period == 0 || il % period < period - 1;
    return true;
}

static bool olmo2_hparams(model_loader *ld)
{
    corral_model *m = ld->model;
    hparams *hp = &m->hp;
    uint32_t window = 0;
    if (!model_read_u32(ld, "attention.sliding_window", &window, false))
        return false;
    if (window == 0) /* OLMo 2 */
        return true;
    hp->n_swa = window;
    if (!olmo3_mark_sliding_layers(ld))
        return false;
    m->rope[1] = (rope_variant){.freq_base = hp->rope_freq_base, .freq_scale = 1.0f};
    m->n_rope_variants = 2;
    for (uint32_t il = 0; il < hp->n_layer; il++)
        m->layers[il].rope_variant = m->layers[il].sliding ? 1 : 0;
    return true;
}

const model_arch arch_olmo2 = {
    .name = "olmo2",
    .rope = ROPE_NEOX,
    .ffn = FFN_SWIGLU,
    .tensors = ARCH_QK_NORM_FULL | ARCH_NO_PRE_NORMS | ARCH_POST_NORMS,
    .read_hparams = olmo2_hparams,
    .layer = layer_normed_branches, /* x += norm(attn(x)); x += norm(ffn(x)) */
};

const model_arch arch_olmo3 = {
    .name = "olmo3",
    .rope = ROPE_NEOX,
    .ffn = FFN_SWIGLU,
    .tensors = ARCH_QK_NORM_FULL | ARCH_NO_PRE_NORMS | ARCH_POST_NORMS,
    .read_hparams = olmo2_hparams,
    .layer = layer_normed_branches,
};

/*
 * exaone4 (EXAONE 4.0): no norms on the block inputs; the attention and FFN outputs are
 * RMS-normed before their residuals. Per-head q/k RMSNorm before NeoX RoPE, optional
 * Llama-3 rope_freqs. Only the 64-layer model (32B) has sliding layers, as in llama.cpp: three
 * of every four, with RoPE, and global layers without it; other sizes ignore the
 * sliding_window key and rotate every layer.
 */
#include "forward.h"

enum { EXAONE4_SWA_LAYERS = 64, EXAONE4_SWA_PATTERN = 4, EXAONE4_SWA_DEFAULT = 4096 };

static bool exaone4_hparams(model_loader *ld)
{
    corral_model *m = ld->model;
    hparams *hp = &m->hp;
    uint32_t window = EXAONE4_SWA_DEFAULT;
    if (!model_read_u32(ld, "attention.sliding_window", &window, false))
        return false;
    if (hp->n_layer != EXAONE4_SWA_LAYERS)
        return true;
    hp->n_swa = window;
    for (uint32_t il = 0; il < hp->n_layer; il++) {
        m->layers[il].sliding = il % EXAONE4_SWA_PATTERN < EXAONE4_SWA_PATTERN - 1;
        m->layers[il].no_rope = !m->layers[il].sliding;
    }
    return true;
}

const model_arch arch_exaone4 = {
    .name = "exaone4",
    .rope = ROPE_NEOX,
    .ffn = FFN_SWIGLU,
    .tensors = ARCH_QK_NORM | ARCH_POST_NORMS | ARCH_NO_PRE_NORMS,
    .read_hparams = exaone4_hparams,
    .layer = layer_normed_branches,
};

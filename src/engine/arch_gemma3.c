/*
 * gemma3: the gemma2 block without soft-capping, with per-head q/k RMSNorm, a sliding window
 * on five layers of every six (il % 6 < 5) whose RoPE has base 10000 and no scaling, and
 * global layers with rope.freq_base and the file's scaling. Only the text model: a vision
 * projector lives in another file.
 */
#include "forward.h"

static bool gemma3_hparams(model_loader *ld)
{
    corral_model *m = ld->model;
    hparams *hp = &m->hp;
    if (!model_read_u32(ld, "attention.sliding_window", &hp->n_swa, true))
        return false;
    gemma_common_hparams(m, 62);
    hp->image_bidirectional = true;
    m->rope[1] = (rope_variant){.freq_base = 10000.0f, .freq_scale = 1.0f};
    m->n_rope_variants = 2;
    for (uint32_t il = 0; il < hp->n_layer; il++) {
        m->layers[il].sliding = il % 6 < 5;
        m->layers[il].rope_variant = m->layers[il].sliding ? 1 : 0;
    }
    return true;
}

const model_arch arch_gemma3 = {
    .name = "gemma3",
    .rope = ROPE_NEOX,
    .ffn = FFN_GEGLU,
    .tensors = ARCH_QK_NORM | ARCH_POST_NORMS,
    .read_hparams = gemma3_hparams,
    .layer = layer_sandwich_norm,
};

/*
 * cohere2 (Command R7B, Command A): attention and SwiGLU FFN run side by side on one
 * LayerNorm (weight only) of the residual. Three layers of every four attend through a
 * sliding window with "normal" RoPE; the fourth attends globally and has no positional
 * encoding at all. Logits are multiplied by logit_scale, and the output is always tied to
 * token_embd.
 */
#include "forward.h"

/* Fixed in llama.cpp, not read from the file: three sliding layers, then a global one. */
enum { COHERE2_SWA_PATTERN = 4 };

static bool cohere2_hparams(model_loader *ld)
{
    corral_model *m = ld->model;
    hparams *hp = &m->hp;
    if (!model_read_u32(ld, "attention.sliding_window", &hp->n_swa, true) ||
        !model_read_f32(ld, "logit_scale", &hp->logit_scale, true))
        return false;
    /* variant 1: the global layers, which rotate nothing */
    m->rope[1] = (rope_variant){m->rope[0].freq_base, m->rope[0].freq_scale, true};
    m->n_rope_variants = 2;
    for (uint32_t il = 0; il < hp->n_layer; il++) {
        m->layers[il].sliding = il % COHERE2_SWA_PATTERN < COHERE2_SWA_PATTERN - 1;
        m->layers[il].rope_variant = m->layers[il].sliding ? 0 : 1;
    }
    return true;
}

const model_arch arch_cohere2 = {
    .name = "cohere2",
    .rope = ROPE_NORMAL,
    .ffn = FFN_SWIGLU,
    .tensors = ARCH_LAYER_NORM | ARCH_TIED_OUTPUT | ARCH_PARALLEL,
    .read_hparams = cohere2_hparams,
    .layer = layer_parallel,
};

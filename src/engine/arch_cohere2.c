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
        !model_read_f32(ld, "logit_scale", &hp->logit_mult, true))
        return false;
    for (uint32_t il = 0; il < hp->n_layer; il++) { /* the global layers rotate nothing */
        m->layers[il].sliding = il % COHERE2_SWA_PATTERN < COHERE2_SWA_PATTERN - 1;
        m->layers[il].no_rope = !m->layers[il].sliding;
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

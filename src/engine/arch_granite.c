/*
 * granite (IBM Granite 3.x dense): the llama block with four scalars from the file, all
 * required as llama.cpp requires them: embeddings times embedding_scale, each branch output
 * times residual_scale before its residual, attention.scale in place of 1/sqrt(head_dim),
 * and logits divided by logit_scale. rope.scaling.finetuned = false turns RoPE off.
 * granitemoe reads the same scalars (granite_hparams).
 */
#include <math.h>

#include "forward.h"

bool granite_hparams(model_loader *ld)
{
    corral_model *m = ld->model;
    hparams *hp = &m->hp;
    float embedding_scale, residual_scale, attention_scale, logit_scale;
    bool rope = true;
    if (!model_read_f32(ld, "embedding_scale", &embedding_scale, true) ||
        !model_read_f32(ld, "residual_scale", &residual_scale, true) ||
        !model_read_f32(ld, "attention.scale", &attention_scale, true) ||
        !model_read_f32(ld, "logit_scale", &logit_scale, true) ||
        !model_read_bool(ld, "rope.scaling.finetuned", &rope, false))
        return false;
    if (!isfinite(embedding_scale) || !isfinite(residual_scale) || !isfinite(attention_scale) ||
        !isfinite(logit_scale) || logit_scale == 0.0f) {
        corral_error_set(ld->err, "%s: granite scales must be finite and logit_scale not 0 (embedding %g, residual %g, attention %g, logit %g)",
                         gguf_path(m->file), embedding_scale, residual_scale, attention_scale,
                         logit_scale);
        return false;
    }
    hp->embd_scale = embedding_scale;
    /* 0 means "not scaled" for these two, as in llama.cpp */
    if (residual_scale != 0.0f)
        hp->residual_scale = residual_scale;
    if (attention_scale != 0.0f)
        hp->kq_scale = attention_scale;
    hp->logit_mult = 1.0f / logit_scale;
    for (uint32_t il = 0; il < hp->n_layer; il++)
        m->layers[il].no_rope = !rope;
    return true;
}

const model_arch arch_granite = {
    .name = "granite",
    .rope = ROPE_NORMAL,
    .ffn = FFN_SWIGLU,
    .read_hparams = granite_hparams,
    .layer = layer_pre_norm,
};

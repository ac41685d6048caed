/*
 * gemma2: embeddings scaled by sqrt(n_embd), attention and FFN outputs normed before their
 * residuals, GeGLU, attention scores and final logits soft-capped, a sliding window on even
 * layers, output always tied to token_embd. Norm weights are used as stored: the converter
 * already folded gemma's (1 + w) into them. Also the gemma pieces gemma3 shares.
 */
#include <math.h>

#include "forward.h"

void gemma_common_hparams(corral_model *m, uint32_t n_layer_27b)
{
    hparams *hp = &m->hp;
    hp->embd_scale = sqrtf((float)hp->n_embd);
    /* query_pre_attn_scalar: n_embd / n_head on the 27B model, key_length on the others */
    hp->q_scale = hp->n_layer == n_layer_27b ? 1.0f / sqrtf((float)(hp->n_embd / hp->n_head))
                                             : 1.0f / sqrtf((float)hp->head_dim_k);
    hp->kq_scale = 1.0f;
}

static bool gemma2_hparams(model_loader *ld)
{
    corral_model *m = ld->model;
    hparams *hp = &m->hp;
    hp->n_swa = 4096;
    hp->attn_softcap = 50.0f; /* llama.cpp's defaults when the keys are absent */
    hp->final_softcap = 30.0f;
    if (!model_read_u32(ld, "attention.sliding_window", &hp->n_swa, false) ||
        !model_read_f32(ld, "attn_logit_softcapping", &hp->attn_softcap, false) ||
        !model_read_f32(ld, "final_logit_softcapping", &hp->final_softcap, false))
        return false;
    gemma_common_hparams(m, 46);
    for (uint32_t il = 0; il < hp->n_layer; il++)
        m->layers[il].sliding = il % 2 == 0;
    return true;
}

const model_arch arch_gemma2 = {
    .name = "gemma2",
    .rope = ROPE_NEOX,
    .ffn = FFN_GEGLU,
    .tensors = ARCH_POST_NORMS | ARCH_TIED_OUTPUT,
    .read_hparams = gemma2_hparams,
    .layer = layer_sandwich_norm,
};

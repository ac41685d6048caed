/*
 * gemma (Gemma 1: gemma:2b/7b, codegemma): the llama block with GeGLU, embeddings scaled by
 * sqrt(n_embd), q scaled by 1/sqrt(head size) before Q.K, NeoX RoPE and the output always tied
 * to token_embd. Norm weights are used as stored: the converter already folded gemma's
 * (1 + w) into them. No soft-caps, no sliding window (those came with gemma2).
 */
#include <math.h>

#include "forward.h"

static bool gemma_hparams(model_loader *ld)
{
    hparams *hp = &ld->model->hp;
    hp->embd_scale = sqrtf((float)hp->n_embd);
    hp->q_scale = 1.0f / sqrtf((float)hp->head_dim_v); /* llama.cpp scales by the value size */
    hp->kq_scale = 1.0f;
    return true;
}

const model_arch arch_gemma = {
    .name = "gemma",
    .rope = ROPE_NEOX,
    .ffn = FFN_GEGLU,
    .tensors = ARCH_TIED_OUTPUT,
    .read_hparams = gemma_hparams,
    .layer = layer_pre_norm,
};

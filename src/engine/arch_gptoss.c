/*
 * gpt-oss (OpenAI gpt-oss 20B and 120B; llama.cpp's OPENAI_MOE): a pre-norm block whose
 * attention has q/k/v/o biases and a learned sink logit per head (the softmax weights then
 * sum to less than 1), a sliding window on even layers and full attention on odd ones, and
 * YaRN RoPE (model.c). The FFN is a mixture of experts (moe.c) whose input norm the file
 * calls post_attention_norm, with a biased router, the chosen experts weighted by the softmax
 * of their biased logits, biased expert matrices and the clamped SwiGLU variant.
 */
#include "forward.h"

static bool gptoss_hparams(model_loader *ld)
{
    corral_model *m = ld->model;
    hparams *hp = &m->hp;
    if (!model_read_u32(ld, "expert_feed_forward_length", &hp->n_ff_exp, true) ||
        !model_read_u32(ld, "attention.sliding_window", &hp->n_swa, true))
        return false;
    for (uint32_t il = 0; il < hp->n_layer; il++)
        m->layers[il].sliding = il % 2 == 0;
    return true;
}

const model_arch arch_gptoss = {
    .name = "gpt-oss",
    .rope = ROPE_NEOX,
    .ffn = FFN_SWIGLU_OAI,
    .tensors = ARCH_QKV_BIAS | ARCH_OUTPUT_FFN_BIAS | ARCH_EXPERTS | ARCH_ATTN_SINKS |
               ARCH_EXPERT_BIASES | ARCH_FFN_NORM_POST_ATTN,
    .read_hparams = gptoss_hparams,
    .layer = layer_pre_norm,
};

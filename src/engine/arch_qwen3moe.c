/*
 * qwen3moe (Qwen3 30B-A3B, 235B-A22B, Qwen3-Coder 30B): qwen3's attention (per-head q/k
 * RMSNorm before NeoX RoPE) with a mixture-of-experts FFN in every layer (moe.c). An expert's
 * width is expert_feed_forward_length; without the key llama.cpp takes feed_forward_length
 * shared among the experts a token uses.
 */
#include "forward.h"

static bool qwen3moe_hparams(model_loader *ld)
{
    hparams *hp = &ld->model->hp;
    if (hp->n_expert_used > 0)
        hp->n_ff_exp = hp->n_ff / hp->n_expert_used;
    return model_read_u32(ld, "expert_feed_forward_length", &hp->n_ff_exp, false);
}

const model_arch arch_qwen3moe = {
    .name = "qwen3moe",
    .rope = ROPE_NEOX,
    .ffn = FFN_SWIGLU,
    .tensors = ARCH_QK_NORM | ARCH_EXPERTS,
    .read_hparams = qwen3moe_hparams,
    .layer = layer_pre_norm,
};

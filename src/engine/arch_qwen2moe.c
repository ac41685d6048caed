/*
 * qwen2moe (Qwen1.5-MoE-A2.7B, qwen2:57b-a14b): qwen2's attention (q/k/v biases, NeoX RoPE)
 * with a mixture of experts in every layer (moe.c) beside a shared expert that every token
 * runs. The router's softmax probabilities of the chosen experts weight them as they are, not
 * divided by their sum. The shared expert's output is scaled per token by the sigmoid of
 * ffn_gate_inp_shexp's product with the FFN input. Widths: expert_feed_forward_length, else
 * feed_forward_length shared among the experts a token uses; the shared expert's
 * expert_shared_feed_forward_length, else feed_forward_length, as llama.cpp reads them.
 */
#include "forward.h"

static bool qwen2moe_hparams(model_loader *ld)
{
    hparams *hp = &ld->model->hp;
    if (hp->n_expert_used > 0)
        hp->n_ff_exp = hp->n_ff / hp->n_expert_used;
    hp->n_ff_shexp = hp->n_ff;
    hp->expert_weights_norm = false;
    return model_read_u32(ld, "expert_feed_forward_length", &hp->n_ff_exp, false) &&
           model_read_u32(ld, "expert_shared_feed_forward_length", &hp->n_ff_shexp, false);
}

const model_arch arch_qwen2moe = {
    .name = "qwen2moe",
    .rope = ROPE_NEOX,
    .ffn = FFN_SWIGLU,
    .tensors = ARCH_EXPERTS | ARCH_SHARED_EXPERT_GATE,
    .read_hparams = qwen2moe_hparams,
    .layer = layer_pre_norm,
};

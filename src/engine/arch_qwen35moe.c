/*
 * qwen35moe (Qwen 3.5 MoE: 35B-A3B, 122B-A10B, 397B-A17B): qwen35's hybrid of Gated DeltaNet
 * and gated attention layers (arch_qwen35.c) with a mixture of experts (moe.c) in every
 * layer's FFN in place of the dense SwiGLU. The router's softmax picks each token's experts,
 * whose weights are their probabilities divided by their sum; a shared expert that every token
 * runs is scaled per token by the sigmoid of ffn_gate_inp_shexp's product with the FFN input
 * and added. Widths: expert_feed_forward_length, else feed_forward_length shared among the
 * experts a token uses; the shared expert's expert_shared_feed_forward_length, else
 * feed_forward_length, as llama.cpp reads them. feed_forward_length itself may be absent, as
 * llama.cpp lets it be: the model has no dense FFN, and converters write it only where the
 * checkpoint's configuration names a dense width.
 */
#include "forward.h"

bool qwen35moe_expert_widths(model_loader *ld)
{
    hparams *hp = &ld->model->hp;
    if (hp->n_expert_used > 0)
        hp->n_ff_exp = hp->n_ff / hp->n_expert_used;
    hp->n_ff_shexp = hp->n_ff;
    if (!model_read_u32(ld, "expert_feed_forward_length", &hp->n_ff_exp, false) ||
        !model_read_u32(ld, "expert_shared_feed_forward_length", &hp->n_ff_shexp, false))
        return false;
    /* the shared expert and its gate are part of every layer, as llama.cpp requires them */
    if (hp->n_ff_shexp == 0) {
        corral_error_set(ld->err, "%s: the shared expert has no width (neither "
                         "%s.expert_shared_feed_forward_length nor feed_forward_length)",
                         gguf_path(ld->model->file), ld->model->arch->name);
        return false;
    }
    return true;
}

static bool qwen35moe_hparams(model_loader *ld)
{
    return qwen35_hparams(ld) && qwen35moe_expert_widths(ld);
}

const model_arch arch_qwen35moe = {
    .name = "qwen35moe",
    .rope = ROPE_NEOX,
    .ffn = FFN_SWIGLU,
    .tensors = ARCH_FFN_NORM_POST_ATTN | ARCH_EXPERTS | ARCH_SHARED_EXPERT_GATE |
               ARCH_KV_HEADS_PER_LAYER,
    .read_hparams = qwen35moe_hparams,
    .layer = qwen35_layer,
    .bind_attention = qwen35_bind_attention,
    .ffn_length_optional = true,
};

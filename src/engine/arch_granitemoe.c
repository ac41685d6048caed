/*
 * granitemoe (IBM Granite 3.x MoE: granite3-moe 1B and 3B; Granite-MoE-shared): the llama
 * block with a mixture-of-experts FFN of feed_forward_length wide experts (moe.c) and
 * Granite's four scalars, all required as llama.cpp requires them: embeddings times
 * embedding_scale, each branch output times residual_scale before its residual,
 * attention.scale in place of 1/sqrt(head_dim), and logits divided by logit_scale, read as the
 * dense family reads them (arch_granite.c). The shared variant says
 * expert_shared_feed_forward_length and has a shared expert that every token also runs. The
 * output is tied to token_embd when the file has no output.weight.
 */
#include "forward.h"

static bool granitemoe_hparams(model_loader *ld)
{
    return granite_hparams(ld) &&
           model_read_u32(ld, "expert_shared_feed_forward_length", &ld->model->hp.n_ff_shexp,
                          false);
}

const model_arch arch_granitemoe = {
    .name = "granitemoe",
    .rope = ROPE_NORMAL,
    .ffn = FFN_SWIGLU,
    .tensors = ARCH_EXPERTS,
    .read_hparams = granitemoe_hparams,
    .layer = layer_pre_norm,
};

/*
 * command-r (Command R, Command R+, Aya 23, Aya Expanse): cohere2's parallel block without
 * its sliding window: attention and SwiGLU FFN both read one LayerNorm (weight only) of the
 * residual, every layer rotates with "normal" RoPE, and the output is always tied to
 * token_embd. Logits are multiplied by logit_scale where the file gives one (0 or absent:
 * unscaled). Command R+ files (64 layers and more) add attn_q_norm and attn_k_norm: a
 * LayerNorm of each head of q and k before RoPE, each head with a weight row of its own.
 */
#include "forward.h"

static bool command_r_hparams(model_loader *ld)
{
    float scale = 0.0f;
    if (!model_read_f32(ld, "logit_scale", &scale, false))
        return false;
    if (scale != 0.0f)
        ld->model->hp.logit_mult = scale;
    return true;
}

const model_arch arch_command_r = {
    .name = "command-r",
    .rope = ROPE_NORMAL,
    .ffn = FFN_SWIGLU,
    .tensors = ARCH_LAYER_NORM | ARCH_TIED_OUTPUT | ARCH_PARALLEL | ARCH_QK_NORM_HEADS,
    .read_hparams = command_r_hparams,
    .layer = layer_parallel,
};

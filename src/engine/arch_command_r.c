/*
 * command-r (Command R, Aya 23, Aya Expanse): cohere2's parallel block without its sliding
 * window: attention and SwiGLU FFN both read one LayerNorm (weight only) of the residual,
 * every layer rotates with "normal" RoPE, and the output is always tied to token_embd.
 * Logits are multiplied by logit_scale where the file gives one (0 or absent: unscaled).
 * Command R+ (64 layers and more) adds per-head LayerNorms of q and k, each head with its own
 * weights, which the blocks here do not have: those files are refused.
 */
#include "forward.h"

/* llama.cpp gives a command-r of this many layers the per-head q/k norms. */
enum { COMMAND_R_QK_NORM_LAYERS = 64 };

static bool command_r_hparams(model_loader *ld)
{
    corral_model *m = ld->model;
    hparams *hp = &m->hp;
    if (hp->n_layer >= COMMAND_R_QK_NORM_LAYERS) {
        corral_error_set(ld->err, "%s: command-r with %u layers (Command R+, per-head q/k norms) is not supported yet",
                         gguf_path(m->file), hp->n_layer);
        return false;
    }
    float scale = 0.0f;
    if (!model_read_f32(ld, "logit_scale", &scale, false))
        return false;
    if (scale != 0.0f)
        hp->logit_mult = scale;
    return true;
}

const model_arch arch_command_r = {
    .name = "command-r",
    .rope = ROPE_NORMAL,
    .ffn = FFN_SWIGLU,
    .tensors = ARCH_LAYER_NORM | ARCH_TIED_OUTPUT | ARCH_PARALLEL,
    .read_hparams = command_r_hparams,
    .layer = layer_parallel,
};

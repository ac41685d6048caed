/*
 * olmo2 (OLMo 2): no norm before attention or FFN; instead each branch output is RMS-normed
 * (post_attention_norm, post_ffw_norm) before its residual, and q and k are RMS-normed over
 * the whole projection (all heads at once) before the head split and NeoX RoPE. A
 * sliding_window key marks Olmo 3's local/global layers, which are not supported yet.
 */
#include "forward.h"

static bool olmo2_hparams(model_loader *ld)
{
    uint32_t window = 0;
    if (!model_read_u32(ld, "attention.sliding_window", &window, false))
        return false;
    if (window > 0) {
        corral_error_set(ld->err, "%s: olmo2 with a sliding window (Olmo 3) is not supported yet",
                         gguf_path(ld->model->file));
        return false;
    }
    return true;
}

const model_arch arch_olmo2 = {
    .name = "olmo2",
    .rope = ROPE_NEOX,
    .ffn = FFN_SWIGLU,
    .tensors = ARCH_QK_NORM_FULL | ARCH_NO_PRE_NORMS | ARCH_POST_NORMS,
    .read_hparams = olmo2_hparams,
    .layer = layer_normed_branches, /* x += norm(attn(x)); x += norm(ffn(x)) */
};

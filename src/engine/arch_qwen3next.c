/*
 * qwen3next (Qwen3-Next-80B-A3B, ollama's qwen3-next): the hybrid Qwen 3.5 grew from, and
 * the same layers as qwen35moe (arch_qwen35.c, arch_qwen35moe.c): Gated DeltaNet layers
 * (delta_net.c) with gated attention every full_attention_interval-th layer, and in every
 * layer experts picked by a softmax router beside a shared expert gated per token by a
 * sigmoid. What differs:
 *  - the DeltaNet's value heads are grouped by key head: value head h reads key head
 *    h / (value heads / key heads), where Qwen 3.5 tiles them (h mod key heads);
 *  - beta's and alpha's projections are one matrix, ssm_ba, and older converters also fuse
 *    q, k, v and z into one ssm_in, both with their rows grouped by key head (delta_net.c);
 *    newer ones write attn_qkv and attn_gate, laid out as qwen35's;
 *  - RoPE is NeoX's on the first rope.dimension_count components, with no M-RoPE sections.
 * The norms are plain RMSNorms with the weights as stored: the converter has already added
 * the one that the checkpoint's zero-centred norms leave out, as for Qwen 3.5.
 */
#include "forward.h"

static bool qwen3next_hparams(model_loader *ld)
{
    /* ollama's key for value heads moved to qwen35's tiled order, which llama.cpp does not
     * know of: such a file would run with the wrong key head per value head */
    bool reordered = false;
    if (!qwen35_linear_hparams(ld) || !qwen35moe_expert_widths(ld) ||
        !model_read_bool(ld, "ssm.v_head_reordered", &reordered, false))
        return false;
    if (reordered) {
        corral_error_set(ld->err, "%s: value heads in the tiled order (qwen3next.ssm."
                         "v_head_reordered) are not supported", gguf_path(ld->model->file));
        return false;
    }
    return true;
}

const model_arch arch_qwen3next = {
    .name = "qwen3next",
    .rope = ROPE_NEOX,
    .ffn = FFN_SWIGLU,
    .tensors = ARCH_FFN_NORM_POST_ATTN | ARCH_EXPERTS | ARCH_SHARED_EXPERT_GATE | ARCH_SSM_GROUPED |
               ARCH_KV_HEADS_PER_LAYER,
    .read_hparams = qwen3next_hparams,
    .layer = qwen35_layer,
    .bind_attention = qwen35_bind_attention,
    .ffn_length_optional = true,
};

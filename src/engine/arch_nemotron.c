/*
 * nemotron (NVIDIA Minitron 4B/8B, Nemotron-Mini-4B: ollama's nemotron-mini): the pre-norm
 * block with LayerNorms that have biases (the converter has already folded the checkpoint's
 * 1 + weight into the weights), a non-gated FFN of ReLU² (down(relu(up . h)²)), and NeoX RoPE
 * on the first rope.dimension_count dims of each head only (half of them in Minitron). q, k
 * and v come separate or fused in attn_qkv, each with optional biases, and the attention
 * output and the FFN's up and down may each have a bias, layer by layer, as llama.cpp reads
 * them.
 */
#include "forward.h"

static bool nemotron_hparams(model_loader *ld)
{
    const hparams *hp = &ld->model->hp;
    /* llama.cpp asserts equal widths and binds q and the attention output at n_embd */
    if (hp->head_dim_k != hp->head_dim_v || (size_t)hp->n_head * hp->head_dim_k != hp->n_embd) {
        corral_error_set(ld->err, "%s: nemotron needs equal key and value widths (%u, %u) and its %u heads to span embedding_length (%u)",
                         gguf_path(ld->model->file), hp->head_dim_k, hp->head_dim_v, hp->n_head,
                         hp->n_embd);
        return false;
    }
    return true;
}

const model_arch arch_nemotron = {
    .name = "nemotron",
    .rope = ROPE_NEOX,
    .ffn = FFN_RELU_SQR,
    .tensors = ARCH_QKV_EITHER | ARCH_LAYER_NORM | ARCH_NORM_BIAS | ARCH_OUTPUT_FFN_BIAS,
    .read_hparams = nemotron_hparams,
    .layer = layer_pre_norm,
    .output_ffn_bias_optional = true,
};

/*
 * falcon (Falcon 7B, 40B and 180B): attention and a non-gated GELU MLP side by side on the
 * same block input, both added to the residual; LayerNorms with biases, and no bias on any
 * projection. q/k/v come fused in attn_qkv as rows q;k;v (the converter has already undone
 * Falcon's interleaved groups), with one KV head in 7B (multi-query) and 8 in 40B and 180B.
 * NeoX RoPE on whole heads. 40B and 180B norm the block input twice: attn_norm_2 (their
 * ln_attn) feeds the attention and attn_norm (ln_mlp) the MLP; 7B's one norm feeds both.
 */
#include "forward.h"

static bool falcon_hparams(model_loader *ld)
{
    const hparams *hp = &ld->model->hp;
    /* llama.cpp asserts both: its graph rotates whole heads of one width */
    if (hp->head_dim_k != hp->head_dim_v || hp->n_rot != hp->head_dim_k) {
        corral_error_set(ld->err, "%s: falcon needs equal key and value widths (%u, %u) rotated whole (rope.dimension_count %u)",
                         gguf_path(ld->model->file), hp->head_dim_k, hp->head_dim_v, hp->n_rot);
        return false;
    }
    return true;
}

const model_arch arch_falcon = {
    .name = "falcon",
    .rope = ROPE_NEOX,
    .ffn = FFN_GELU,
    .tensors = ARCH_FUSED_QKV | ARCH_LAYER_NORM | ARCH_NORM_BIAS | ARCH_PARALLEL |
               ARCH_ATTN_NORM_2,
    .read_hparams = falcon_hparams,
    .layer = layer_parallel,
};

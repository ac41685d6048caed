/*
 * glm4 (GLM-4-0414, GLM-Z1): gemma's sandwich block (norms before and after each branch) with
 * RMSNorm and SwiGLU, gate and up fused in one ffn_up, q/k/v biases when the file has them,
 * and "normal" RoPE on the first rope.dimension_count dimensions of each head only (the rest
 * pass through). The vision variant's M-RoPE (rope.dimension_sections) is not supported.
 */
#include "forward.h"

static bool glm4_hparams(model_loader *ld)
{
    corral_model *m = ld->model;
    if (gguf_find_kv(m->file, "glm4.rope.dimension_sections")) {
        corral_error_set(ld->err, "%s: glm4.rope.dimension_sections: multimodal RoPE (GLM-4V) is not supported yet",
                         gguf_path(m->file));
        return false;
    }
    return true;
}

const model_arch arch_glm4 = {
    .name = "glm4",
    .rope = ROPE_NORMAL,
    .ffn = FFN_SWIGLU,
    .tensors = ARCH_POST_NORMS | ARCH_FUSED_GATE_UP,
    .read_hparams = glm4_hparams,
    .layer = layer_sandwich_norm,
};

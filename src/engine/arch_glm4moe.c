/*
 * glm4moe (GLM-4.5 355B-A32B, GLM-4.5-Air 106B-A12B, GLM-4.6, GLM-4.7): a pre-norm block
 * whose FFN norm the file calls post_attention_norm, attention with q/k/v biases and, where
 * the file has them (GLM-4.5 and its successors, not Air), per-head q/k RMSNorms, GQA and NeoX
 * RoPE on the first rope.dimension_count components of each head. The first
 * leading_dense_block_count layers have a dense SwiGLU FFN; the others a mixture of experts
 * routed as DeepSeek-V3's (moe.c): sigmoid scores, a per-expert selection bias
 * (exp_probs_b) for choosing only, the chosen scores renormalised and scaled, plus the shared
 * expert(s) every token runs. Unlike glm4 (arch_glm4.c) there are no norms after the
 * branches and the gate and up matrices are apart. Layers past block_count -
 * nextn_predict_layers are the multi-token prediction head, which only speculative drafting
 * would run: it is not loaded. The vision variant's M-RoPE (rope.dimension_sections) is not
 * supported.
 */
#include "forward.h"

static bool glm4moe_hparams(model_loader *ld)
{
    corral_model *m = ld->model;
    hparams *hp = &m->hp;
    uint32_t n_predict = 0;
    if (gguf_find_kv(m->file, "glm4moe.rope.dimension_sections")) {
        corral_error_set(ld->err, "%s: glm4moe.rope.dimension_sections: multimodal RoPE (GLM-4.5V) is not supported yet",
                         gguf_path(m->file));
        return false;
    }
    if (!model_read_u32(ld, "nextn_predict_layers", &n_predict, false))
        return false;
    /* block_count counts the prediction layers the converter appends after the trunk */
    if (n_predict >= hp->n_layer) {
        corral_error_set(ld->err, "%s: %u prediction layers of %u layers leave no model",
                         gguf_path(m->file), n_predict, hp->n_layer);
        return false;
    }
    hp->n_layer -= n_predict;
    return deepseek2_read_routing(ld, false, true, true, 0);
}

const model_arch arch_glm4moe = {
    .name = "glm4moe",
    .rope = ROPE_NEOX,
    .ffn = FFN_SWIGLU,
    .tensors = ARCH_FFN_NORM_POST_ATTN | ARCH_EXPERTS,
    .read_hparams = glm4moe_hparams,
    .layer = layer_pre_norm,
};

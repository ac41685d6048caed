/*
 * bert and nomic-bert: encoders (embedding models). Tokens see the whole input (unless the
 * file says attention.causal), each block is x = LN(x + attn(x)), then LN(x + ffn(x)), and
 * the final states are pooled as pooling_type says. bert adds learned position embeddings and
 * has q/k/v biases and a GELU FFN with biases; nomic-bert fuses q/k/v, uses NeoX RoPE and a
 * SwiGLU FFN without biases. Embedding and pooling are embed.c's.
 */
#include "forward.h"

bool model_read_pooling(model_loader *ld)
{
    corral_model *m = ld->model;
    uint32_t pooling = POOLING_NONE;
    if (!model_read_u32(ld, "pooling_type", &pooling, false))
        return false;
    if (pooling > POOLING_LAST) {
        corral_error_set(ld->err, "%s: %s.pooling_type %u is not supported (%s)",
                         gguf_path(m->file), m->arch->name, pooling,
                         pooling == 4 ? "rank needs a reranker's classification head"
                                      : "0 none, 1 mean, 2 cls or 3 last");
        return false;
    }
    m->pooling = (enum pooling_type)pooling;
    return true;
}

static bool encoder_hparams(model_loader *ld)
{
    return model_read_bool(ld, "attention.causal", &ld->model->hp.causal, true) &&
           model_read_pooling(ld);
}

static bool bert_hparams(model_loader *ld)
{
    /* positions come from position_embd: no rotary dimensions makes RoPE a no-op */
    ld->model->hp.n_rot = 0;
    return encoder_hparams(ld);
}

const model_arch arch_bert = {
    .name = "bert",
    .rope = ROPE_NEOX, /* unused: n_rot is 0 */
    .ffn = FFN_GELU,
    .tensors = ARCH_ENCODER | ARCH_POS_EMBD | ARCH_QKV_BIAS,
    .read_hparams = bert_hparams,
    .layer = layer_post_norm,
};

const model_arch arch_nomic_bert = {
    .name = "nomic-bert",
    .rope = ROPE_NEOX,
    .ffn = FFN_SWIGLU,
    .tensors = ARCH_ENCODER | ARCH_FUSED_QKV,
    .read_hparams = encoder_hparams,
    .layer = layer_post_norm,
};

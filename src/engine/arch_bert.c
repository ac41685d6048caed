/*
 * bert and nomic-bert: encoders (embedding models). Tokens see the whole input (unless the
 * file says attention.causal), each block is x = LN(x + attn(x)), then LN(x + ffn(x)), and
 * the final states are pooled as pooling_type says. bert adds learned position embeddings and
 * has q/k/v biases and a GELU FFN with biases; nomic-bert fuses q/k/v, uses NeoX RoPE and a
 * SwiGLU FFN without biases. nomic-bert-moe (nomic-embed-text-v2-moe) is nomic-bert with
 * bert's GELU FFN (biases where the file has them), except in every moe_every_n_layers-th layer
 * (il % n == 1), where a mixture of ungated GELU experts replaces it: a softmax router without
 * a bias, the expert_used_count most probable experts weighted by their probabilities as they
 * are (not renormalised), each expert down(gelu(up . x)), as llama.cpp runs it. Embedding and
 * pooling are embed.c's.
 */
#include <stdio.h>

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

static bool nomic_moe_hparams(model_loader *ld)
{
    hparams *hp = &ld->model->hp;
    if (!model_read_u32(ld, "moe_every_n_layers", &hp->n_moe_layer_step, false))
        return false;
    hp->expert_weights_norm = false;
    return encoder_hparams(ld);
}

#define NAME(suffix) (snprintf(name, sizeof name, "blk.%u." suffix, il), name)

/* The dense GELU FFN (its biases are bound with the encoder's norms), or the router and the
 * experts' up and down. */
static bool nomic_moe_bind_ffn(model_loader *ld, uint32_t il)
{
    const hparams *hp = &ld->model->hp;
    layer_weights *l = &ld->model->layers[il];
    char name[GGUF_MAX_NAME_BYTES + 1];
    size_t E = hp->n_embd, F = hp->n_ff, n = hp->n_expert;
    if (hp->n_moe_layer_step == 0 || il % hp->n_moe_layer_step != 1)
        return model_bind_matrix(ld, &l->ffn_up, NAME("ffn_up.weight"), E, l->n_ff, 1, true) &&
               model_bind_matrix(ld, &l->ffn_down, NAME("ffn_down.weight"), l->n_ff, E, 1, true);
    return model_bind_matrix(ld, &l->ffn_gate_inp, NAME("ffn_gate_inp.weight"), E, n, 1, true) &&
           model_bind_matrix(ld, &l->ffn_up_exps, NAME("ffn_up_exps.weight"), E, F, n, true) &&
           model_bind_matrix(ld, &l->ffn_down_exps, NAME("ffn_down_exps.weight"), F, E, n, true);
}

#undef NAME

const model_arch arch_nomic_bert_moe = {
    .name = "nomic-bert-moe",
    .rope = ROPE_NEOX,
    .ffn = FFN_GELU,
    .tensors = ARCH_ENCODER | ARCH_FUSED_QKV | ARCH_EXPERTS,
    .read_hparams = nomic_moe_hparams,
    .layer = layer_post_norm,
    .bind_ffn = nomic_moe_bind_ffn,
};

const model_arch arch_nomic_bert = {
    .name = "nomic-bert",
    .rope = ROPE_NEOX,
    .ffn = FFN_SWIGLU,
    .tensors = ARCH_ENCODER | ARCH_FUSED_QKV,
    .read_hparams = encoder_hparams,
    .layer = layer_post_norm,
};

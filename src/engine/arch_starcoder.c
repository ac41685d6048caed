/*
 * starcoder (GPT-BigCode: StarCoder 1B to 15B, StarCoderBase, sqlcoder): GPT-2's pre-norm
 * block. No RoPE: a learned table of absolute position embeddings (position_embd, a row per
 * trained position) is added to the token embeddings, so a context never outgrows
 * context_length (context.c caps it). LayerNorms with biases, q/k/v fused in attn_qkv with
 * one bias, multi-query attention (the converter writes one KV head), a biased attention
 * output and a non-gated GELU MLP with biases. The output is tied to token_embd when the file
 * has no output.weight.
 */
#include "forward.h"

static bool starcoder_hparams(model_loader *ld)
{
    corral_model *m = ld->model;
    const hparams *hp = &m->hp;
    /* llama.cpp refuses these too: its graph has no key width apart from the value width */
    if (hp->head_dim_k != hp->head_dim_v || hp->n_ctx_train == 0) {
        corral_error_set(ld->err, "%s: starcoder needs equal key and value widths (%u, %u) and a context_length (%u) for its position table",
                         gguf_path(m->file), hp->head_dim_k, hp->head_dim_v, hp->n_ctx_train);
        return false;
    }
    for (uint32_t il = 0; il < hp->n_layer; il++)
        m->layers[il].no_rope = true; /* positions came with the embeddings */
    return true;
}

const model_arch arch_starcoder = {
    .name = "starcoder",
    .rope = ROPE_NORMAL, /* unused: no layer rotates */
    .ffn = FFN_GELU,
    .tensors = ARCH_FUSED_QKV | ARCH_QKV_BIAS | ARCH_LAYER_NORM | ARCH_NORM_BIAS |
               ARCH_OUTPUT_FFN_BIAS | ARCH_POS_EMBD,
    .read_hparams = starcoder_hparams,
    .layer = layer_pre_norm,
};

/*
 * mllama (Llama 3.2 Vision, ollama's llama3.2-vision; its text model): the llama block, with
 * the layers listed in attention.cross_attention_layers being cross-attention layers that read
 * an image's states instead of the text before them. Corral takes no image for this family,
 * so every sequence is text alone, and a cross-attention layer is then left out entirely
 * (transformers' MllamaTextModel and ollama's engine skip it while there is no image), its
 * tensors unread and no KV cache kept for it (context.c). The vocabulary is cut to output.weight's rows (vocab.c): the files keep the
 * image token past them, and token_embd has eight spare rows past that.
 */
#include <stdio.h>

#include "forward.h"

static bool mllama_hparams(model_loader *ld)
{
    corral_model *m = ld->model;
    const char *path = gguf_path(m->file);
    const gguf_kv *cross;
    if (!gguf_get_array(m->file, "mllama.attention.cross_attention_layers", GGUF_TYPE_COUNT,
                        &cross, ld->err))
        return false;
    if (!gguf_type_is_integer(cross->elem_type)) {
        corral_error_set(ld->err, "%s: mllama.attention.cross_attention_layers must hold integers",
                         path);
        return false;
    }
    for (uint64_t i = 0; i < cross->n; i++) {
        int64_t il = gguf_kv_i64(cross, i);
        if (il < 0 || il >= (int64_t)m->hp.n_layer) {
            corral_error_set(ld->err,
                             "%s: cross-attention layer %lld is not one of the %u layers", path,
                             (long long)il, m->hp.n_layer);
            return false;
        }
        m->layers[il].cross_attn = true;
    }
    return true;
}

/* A self-attention layer's tensors; a cross-attention layer's are not read (the file top). */
static bool mllama_bind_attention(model_loader *ld, uint32_t il)
{
    layer_weights *l = &ld->model->layers[il];
    char name[GGUF_MAX_NAME_BYTES + 1];
    if (l->cross_attn)
        return true;
    snprintf(name, sizeof name, "blk.%u.attn_norm.weight", il);
    return model_bind_vector(ld, &l->attn_norm, name, ld->model->hp.n_embd, true) &&
           model_bind_attention_projections(ld, il);
}

/* The FFN of a self-attention layer; a cross-attention layer's belongs to it and is not read
 * either. */
static bool mllama_bind_ffn(model_loader *ld, uint32_t il)
{
    const hparams *hp = &ld->model->hp;
    layer_weights *l = &ld->model->layers[il];
    char name[GGUF_MAX_NAME_BYTES + 1];
    if (l->cross_attn)
        return true;
#define NAME(suffix) (snprintf(name, sizeof name, "blk.%u." suffix, il), name)
    return model_bind_vector(ld, &l->ffn_norm, NAME("ffn_norm.weight"), hp->n_embd, true) &&
           model_bind_matrix(ld, &l->ffn_gate, NAME("ffn_gate.weight"), hp->n_embd, l->n_ff, 1,
                             true) &&
           model_bind_matrix(ld, &l->ffn_up, NAME("ffn_up.weight"), hp->n_embd, l->n_ff, 1,
                             true) &&
           model_bind_matrix(ld, &l->ffn_down, NAME("ffn_down.weight"), l->n_ff, hp->n_embd, 1,
                             true);
#undef NAME
}

static void mllama_layer(corral_context *ctx, uint32_t il)
{
    if (!ctx->model->layers[il].cross_attn)
        layer_pre_norm(ctx, il);
}

const model_arch arch_mllama = {
    .name = "mllama",
    .rope = ROPE_NORMAL,
    .ffn = FFN_SWIGLU,
    .read_hparams = mllama_hparams,
    .layer = mllama_layer,
    .bind_attention = mllama_bind_attention,
    .bind_ffn = mllama_bind_ffn,
    .token_embd_spare_rows = true,
};

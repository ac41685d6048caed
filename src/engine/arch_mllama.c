/*
 * mllama (Llama 3.2 Vision, ollama's llama3.2-vision; its text model): the llama block, with
 * the layers listed in attention.cross_attention_layers being cross-attention layers that read
 * an image's states instead of the text before them (cross_attn.h): q, k, v and o projections
 * (cross_attn_{q,k,v,o}_proj) with per-head RMS norms of q and k, an FFN of their own, and the
 * two outputs scaled by tanh of the gates cross_attn_attn_gate and cross_attn_mlp_gate. A
 * sequence without an image passes through them unchanged (transformers' MllamaTextModel and
 * ollama's engine skip them while there is no image), and they keep no KV cache (context.c).
 * The vocabulary is cut to output.weight's rows (vocab.c): the files keep the image token
 * <|image|> just past them, and token_embd has eight rows more, the image token's the first.
 */
#include <stdio.h>
#include <string.h>

#include "cross_attn.h"
#include "forward.h"

#define IMAGE_TOKEN "<|image|>"

/* The image token: the file's token just past the cut vocabulary, with a row of token_embd. */
static void find_image_token(corral_model *m)
{
    const gguf_kv *tokens = gguf_find_kv(m->file, "tokenizer.ggml.tokens");
    const gguf_tensor *embd = gguf_find_tensor(m->file, "token_embd.weight");
    uint32_t id = m->hp.n_vocab;
    if (!tokens || tokens->elem_type != GGUF_TYPE_STRING || tokens->n <= id || !embd ||
        embd->ne[1] <= (int64_t)id)
        return;
    gguf_str text = gguf_kv_str(tokens, id);
    if (text.size == strlen(IMAGE_TOKEN) && memcmp(text.data, IMAGE_TOKEN, text.size) == 0)
        m->image_token = id;
}

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
    find_image_token(m);
    return true;
}

#define NAME(suffix) (snprintf(name, sizeof name, "blk.%u." suffix, il), name)

/* A self-attention layer's q, k, v and o, or a cross-attention layer's, its q/k norms and its
 * gates; each with its attention norm. */
static bool mllama_bind_attention(model_loader *ld, uint32_t il)
{
    const hparams *hp = &ld->model->hp;
    layer_weights *l = &ld->model->layers[il];
    char name[GGUF_MAX_NAME_BYTES + 1];
    size_t E = hp->n_embd, D = hp->head_dim_k, q_width = (size_t)l->n_head * D;
    size_t kv_width = (size_t)hp->n_head_kv * D;
    if (!model_bind_vector(ld, &l->attn_norm, NAME("attn_norm.weight"), E, true))
        return false;
    if (!l->cross_attn)
        return model_bind_attention_projections(ld, il);
    return model_bind_matrix(ld, &l->wq, NAME("cross_attn_q_proj.weight"), E, q_width, 1, true) &&
           model_bind_matrix(ld, &l->wk, NAME("cross_attn_k_proj.weight"), E, kv_width, 1, true) &&
           model_bind_matrix(ld, &l->wv, NAME("cross_attn_v_proj.weight"), E, kv_width, 1, true) &&
           model_bind_matrix(ld, &l->wo, NAME("cross_attn_o_proj.weight"), q_width, E, 1, true) &&
           model_bind_vector(ld, &l->q_norm, NAME("cross_attn_q_norm.weight"), D, true) &&
           model_bind_vector(ld, &l->k_norm, NAME("cross_attn_k_norm.weight"), D, true) &&
           model_bind_vector(ld, &l->xattn_gate, NAME("cross_attn_attn_gate"), 1, true) &&
           model_bind_vector(ld, &l->xmlp_gate, NAME("cross_attn_mlp_gate"), 1, true);
}

#undef NAME

static void mllama_layer(corral_context *ctx, uint32_t il)
{
    if (ctx->model->layers[il].cross_attn)
        cross_attention_layer(ctx, il);
    else
        layer_pre_norm(ctx, il);
}

const model_arch arch_mllama = {
    .name = "mllama",
    .rope = ROPE_NORMAL,
    .ffn = FFN_SWIGLU,
    .read_hparams = mllama_hparams,
    .layer = mllama_layer,
    .bind_attention = mllama_bind_attention,
    .token_embd_spare_rows = true,
};

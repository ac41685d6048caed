/*
 * gemma-embedding: EmbeddingGemma (ollama's embeddinggemma, 300M), gemma3's text stack run as
 * an encoder. What differs from gemma3: no causal mask, and a sliding layer sees the
 * attention.sliding_window / 2 positions on either side of a token (llama.cpp's symmetric
 * window); sliding layers are il % P < P - 1 for attention.sliding_window_pattern P (6 by
 * default), rotating with rope.freq_base_swa (10000 by default); q is scaled by
 * 1/sqrt(key_length) whatever the layer count. The final states are RMS-normed by
 * output_norm, pooled (pooling_type), then, where the file has them, go through the two
 * dense projections of sentence-transformers (dense_2: n_embd -> width, dense_3: width ->
 * n_embd, no bias or activation) as llama.cpp applies them after pooling. Embedding and
 * pooling are embed.c's.
 *
 * ollama's library files (converted before llama.cpp had the architecture) say gemma3 and
 * hold the projections as dense.0 / dense.1; model.c recognises them by dense.0.weight. They
 * are read as ollama now has llama.cpp read them: gemma3.* keys, their sliding window
 * pattern key ignored (the default period of 6 applies).
 */
#include <math.h>

#include "forward.h"

/* The projections, both or neither: dense_in [n_embd, width], dense_out [width, n_embd]. */
static bool bind_dense(model_loader *ld, const char *dense_in, const char *dense_out)
{
    corral_model *m = ld->model;
    const gguf_tensor *in = gguf_find_tensor(m->file, dense_in);
    const gguf_tensor *out = gguf_find_tensor(m->file, dense_out);
    if (!in && !out)
        return true;
    if (!in || !out || in->ne[1] <= 0 || in->ne[1] > (1 << 20)) {
        corral_error_set(ld->err, "%s: %s needs both %s and %s, of [%u, width] and [width, %u]",
                         gguf_path(m->file), m->arch->name, dense_in, dense_out, m->hp.n_embd,
                         m->hp.n_embd);
        return false;
    }
    size_t width = (size_t)in->ne[1];
    return model_bind_matrix(ld, &m->dense_out[0], dense_in, m->hp.n_embd, width, 1, true) &&
           model_bind_matrix(ld, &m->dense_out[1], dense_out, width, m->hp.n_embd, 1, true);
}

/* What both layouts share; the sliding layers every `period`. */
static bool embedding_hparams(model_loader *ld, uint32_t period)
{
    corral_model *m = ld->model;
    hparams *hp = &m->hp;
    float swa_base = 10000.0f;
    if (!model_read_u32(ld, "attention.sliding_window", &hp->n_swa, true) ||
        !model_read_f32(ld, "rope.freq_base_swa", &swa_base, false) || !model_read_pooling(ld))
        return false;
    if (!(swa_base > 0.0f) || !isfinite(swa_base)) {
        corral_error_set(ld->err, "%s: inconsistent RoPE base %g of the sliding layers",
                         gguf_path(m->file), swa_base);
        return false;
    }
    hp->causal = false; /* llama.cpp's, whatever attention.causal says */
    hp->embd_scale = sqrtf((float)hp->n_embd);
    hp->q_scale = 1.0f / sqrtf((float)hp->head_dim_k);
    hp->kq_scale = 1.0f;
    m->rope[1] = (rope_variant){.freq_base = swa_base, .freq_scale = 1.0f};
    m->n_rope_variants = 2;
    for (uint32_t il = 0; il < hp->n_layer; il++) {
        /* llama.cpp's pattern: period 0 makes every layer sliding, 1 none */
        m->layers[il].sliding = period == 0 || il % period < period - 1;
        m->layers[il].rope_variant = m->layers[il].sliding ? 1 : 0;
    }
    return true;
}

static bool gemma_embedding_hparams(model_loader *ld)
{
    uint32_t period = 6;
    return model_read_u32(ld, "attention.sliding_window_pattern", &period, false) &&
           embedding_hparams(ld, period) && bind_dense(ld, "dense_2.weight", "dense_3.weight");
}

static bool gemma3_embedding_ollama_hparams(model_loader *ld)
{
    return embedding_hparams(ld, 6) && bind_dense(ld, "dense.0.weight", "dense.1.weight");
}

const model_arch arch_gemma_embedding = {
    .name = "gemma-embedding",
    .rope = ROPE_NEOX,
    .ffn = FFN_GEGLU,
    .tensors = ARCH_ENCODER | ARCH_EMBED_DECODER | ARCH_QK_NORM | ARCH_POST_NORMS,
    .read_hparams = gemma_embedding_hparams,
    .layer = layer_sandwich_norm,
};

const model_arch arch_gemma3_embedding_ollama = {
    .name = "gemma3",
    .rope = ROPE_NEOX,
    .ffn = FFN_GEGLU,
    .tensors = ARCH_ENCODER | ARCH_EMBED_DECODER | ARCH_QK_NORM | ARCH_POST_NORMS,
    .read_hparams = gemma3_embedding_ollama_hparams,
    .layer = layer_sandwich_norm,
};

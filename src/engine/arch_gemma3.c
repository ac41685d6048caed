/*
 * gemma3: the gemma2 block without soft-capping, with per-head q/k RMSNorm, a sliding window
 * on five layers of every six (il % 6 < 5) whose RoPE has base 10000 and no scaling, and
 * global layers with rope.freq_base and the file's scaling. Only the text model: a vision
 * projector lives in another file.
 *
 * ollama's library files leave out what Gemma 3 always has, which llama.cpp's reading of them
 * (ollama's llama/compat) supplies: with a vision tower (4B and up) no norm epsilon (1e-6,
 * arch_gemma3's default), no rope.freq_base (1e6) and no linear scaling by 8 of the global
 * layers' 128K context; the 1B's first conversions name the base rope.global.freq_base.
 */
#include "forward.h"

/* The global layers' RoPE of an ollama file that has no rope.freq_base (see above). */
static bool gemma3_ollama_rope(model_loader *ld)
{
    corral_model *m = ld->model;
    hparams *hp = &m->hp;
    if (gguf_find_kv(m->file, "gemma3.rope.freq_base"))
        return true;
    hp->rope_freq_base = 1000000.0f;
    if (!model_read_f32(ld, "rope.global.freq_base", &hp->rope_freq_base, false))
        return false;
    m->rope[0].freq_base = hp->rope_freq_base;
    if (hp->n_ctx_train >= 131072 && !gguf_find_kv(m->file, "gemma3.rope.scaling.type")) {
        hp->rope_freq_scale = 1.0f / 8.0f;
        m->rope[0].freq_scale = hp->rope_freq_scale;
    }
    return true;
}

static bool gemma3_hparams(model_loader *ld)
{
    corral_model *m = ld->model;
    hparams *hp = &m->hp;
    if (!model_read_u32(ld, "attention.sliding_window", &hp->n_swa, true) ||
        !gemma3_ollama_rope(ld))
        return false;
    gemma_common_hparams(m, 62);
    hp->image_bidirectional = true;
    m->rope[1] = (rope_variant){.freq_base = 10000.0f, .freq_scale = 1.0f};
    m->n_rope_variants = 2;
    for (uint32_t il = 0; il < hp->n_layer; il++) {
        m->layers[il].sliding = il % 6 < 5;
        m->layers[il].rope_variant = m->layers[il].sliding ? 1 : 0;
    }
    return true;
}

const model_arch arch_gemma3 = {
    .name = "gemma3",
    .rope = ROPE_NEOX,
    .ffn = FFN_GEGLU,
    .tensors = ARCH_QK_NORM | ARCH_POST_NORMS,
    .read_hparams = gemma3_hparams,
    .layer = layer_sandwich_norm,
    .norm_eps_default = 1e-6f,
};

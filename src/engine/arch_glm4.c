/*
 * glm4 (GLM-4-0414, GLM-Z1, GLM-OCR's text model): gemma's sandwich block (norms before and
 * after each branch) with RMSNorm and SwiGLU, gate and up fused in one ffn_up, q/k/v biases
 * when the file has them, and "normal" RoPE on the first rope.dimension_count dimensions of
 * each head only (the rest pass through). Layers past block_count - nextn_predict_layers are
 * GLM-OCR's multi-token prediction head, which only speculative drafting would run: it is
 * not loaded.
 *
 * A file with rope.dimension_sections (GLM-OCR, GLM-4V) turns with M-RoPE instead, as
 * llama.cpp runs it: NeoX's pairs, split into sections that turn with a token's temporal,
 * height and width positions. A text token has all three equal, so only an image's tokens
 * (corral_decode_image, at the grid positions projector_glm4v.c's merger gives) turn
 * differently from plain NeoX RoPE; the converter permuted q and k for that pairing.
 *
 * ollama's GLM-OCR files (architecture `glmocr`, keys under `glmocr.`) are the same model:
 * the sections as rope.mrope_section (three of them), no rope.dimension_count (the head's
 * width), gate and up apart, and in its older files attn_out, post_attn_norm and
 * post_ffn_norm for llama.cpp's attn_output, post_attention_norm and post_ffw_norm, so each
 * of those is looked up under either name. Its vocabulary's pre-tokenizer is chatglm-bpe
 * whatever the file says (vocab.c), and its vision tower (v.*, mm.*) is the projector's
 * (mmproj_ollama.c).
 */
#include <stdio.h>

#include "forward.h"

/* The prediction layers the converter appends after the trunk are left out. */
static bool glm4_trunk(model_loader *ld)
{
    hparams *hp = &ld->model->hp;
    uint32_t n_predict = 0;
    if (!model_read_u32(ld, "nextn_predict_layers", &n_predict, false))
        return false;
    if (n_predict >= hp->n_layer) {
        corral_error_set(ld->err, "%s: %u prediction layers of %u layers leave no model",
                         gguf_path(ld->model->file), n_predict, hp->n_layer);
        return false;
    }
    hp->n_layer -= n_predict;
    return true;
}

static bool glm4_mrope_hparams(model_loader *ld)
{
    return glm4_trunk(ld) &&
           mrope_read_sections(ld, "glm4.rope.dimension_sections", 4);
}

/* ollama's key, three sections; or llama.cpp's four where a file has them */
static bool glmocr_mrope_hparams(model_loader *ld)
{
    if (!glm4_trunk(ld))
        return false;
    if (gguf_find_kv(ld->model->file, "glmocr.rope.dimension_sections"))
        return mrope_read_sections(ld, "glmocr.rope.dimension_sections", 4);
    return mrope_read_sections(ld, "glmocr.rope.mrope_section", 3);
}

/* Layer il's tensor `suffix`, or else `other` (ollama's older name): the name to bind. */
static const char *either(model_loader *ld, uint32_t il, const char *suffix, const char *other,
                          char *name, size_t size)
{
    snprintf(name, size, "blk.%u.%s", il, suffix);
    if (!gguf_find_tensor(ld->model->file, name))
        snprintf(name, size, "blk.%u.%s", il, other);
    return name;
}

static bool glmocr_bind_attention(model_loader *ld, uint32_t il)
{
    const hparams *hp = &ld->model->hp;
    layer_weights *l = &ld->model->layers[il];
    size_t E = hp->n_embd, q = (size_t)hp->n_head * hp->head_dim_k;
    size_t k = (size_t)hp->n_head_kv * hp->head_dim_k, v = (size_t)hp->n_head_kv * hp->head_dim_v;
    size_t o = (size_t)hp->n_head * hp->head_dim_v;
    char name[GGUF_MAX_NAME_BYTES + 1];
    size_t n = sizeof name;
#define NAME(suffix) (snprintf(name, sizeof name, "blk.%u." suffix, il), name)
    return model_bind_vector(ld, &l->attn_norm, NAME("attn_norm.weight"), E, true) &&
           model_bind_matrix(ld, &l->wq, NAME("attn_q.weight"), E, q, 1, true) &&
           model_bind_matrix(ld, &l->wk, NAME("attn_k.weight"), E, k, 1, true) &&
           model_bind_matrix(ld, &l->wv, NAME("attn_v.weight"), E, v, 1, true) &&
           model_bind_vector(ld, &l->bq, NAME("attn_q.bias"), q, false) &&
           model_bind_vector(ld, &l->bk, NAME("attn_k.bias"), k, false) &&
           model_bind_vector(ld, &l->bv, NAME("attn_v.bias"), v, false) &&
           model_bind_matrix(ld, &l->wo,
                             either(ld, il, "attn_output.weight", "attn_out.weight", name, n), o,
                             E, 1, true) &&
           model_bind_vector(ld, &l->post_attn_norm,
                             either(ld, il, "post_attention_norm.weight",
                                    "post_attn_norm.weight", name, n),
                             E, true);
#undef NAME
}

/* gate and up apart (ollama's converter splits llama.cpp's fused ffn_up) */
static bool glmocr_bind_ffn(model_loader *ld, uint32_t il)
{
    const hparams *hp = &ld->model->hp;
    layer_weights *l = &ld->model->layers[il];
    size_t E = hp->n_embd, F = l->n_ff;
    char name[GGUF_MAX_NAME_BYTES + 1];
    size_t n = sizeof name;
#define NAME(suffix) (snprintf(name, sizeof name, "blk.%u." suffix, il), name)
    return model_bind_vector(ld, &l->ffn_norm, NAME("ffn_norm.weight"), E, true) &&
           model_bind_matrix(ld, &l->ffn_gate, NAME("ffn_gate.weight"), E, F, 1, true) &&
           model_bind_matrix(ld, &l->ffn_up, NAME("ffn_up.weight"), E, F, 1, true) &&
           model_bind_matrix(ld, &l->ffn_down, NAME("ffn_down.weight"), F, E, 1, true) &&
           model_bind_vector(ld, &l->post_ffn_norm,
                             either(ld, il, "post_ffw_norm.weight", "post_ffn_norm.weight", name,
                                    n),
                             E, true);
#undef NAME
}

const model_arch arch_glm4 = {
    .name = "glm4",
    .rope = ROPE_NORMAL,
    .ffn = FFN_SWIGLU,
    .tensors = ARCH_POST_NORMS | ARCH_FUSED_GATE_UP,
    .read_hparams = glm4_trunk,
    .layer = layer_sandwich_norm,
};

static const model_arch arch_glm4_mrope = {
    .name = "glm4",
    .rope = ROPE_NEOX,
    .ffn = FFN_SWIGLU,
    .tensors = ARCH_POST_NORMS | ARCH_FUSED_GATE_UP,
    .read_hparams = glm4_mrope_hparams,
    .layer = layer_sandwich_norm,
};

const model_arch arch_glmocr = {
    .name = "glmocr",
    .rope = ROPE_NORMAL,
    .ffn = FFN_SWIGLU,
    .tensors = ARCH_POST_NORMS,
    .read_hparams = glm4_trunk,
    .layer = layer_sandwich_norm,
    .bind_attention = glmocr_bind_attention,
    .bind_ffn = glmocr_bind_ffn,
};

static const model_arch arch_glmocr_mrope = {
    .name = "glmocr",
    .rope = ROPE_NEOX,
    .ffn = FFN_SWIGLU,
    .tensors = ARCH_POST_NORMS,
    .read_hparams = glmocr_mrope_hparams,
    .layer = layer_sandwich_norm,
    .bind_attention = glmocr_bind_attention,
    .bind_ffn = glmocr_bind_ffn,
};

const model_arch *glm4_rope_variant(const gguf_file *file, const model_arch *arch)
{
    if (arch == &arch_glm4 && gguf_find_kv(file, "glm4.rope.dimension_sections"))
        return &arch_glm4_mrope;
    if (arch == &arch_glmocr && (gguf_find_kv(file, "glmocr.rope.mrope_section") ||
                                 gguf_find_kv(file, "glmocr.rope.dimension_sections")))
        return &arch_glmocr_mrope;
    return arch;
}

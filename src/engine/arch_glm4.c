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
 * width), gate and up apart (ffn_gate and ffn_up, the common binding's) or, as its current
 * converter writes them, in one ffn_up as llama.cpp's, and in its older
 * files attn_out, post_attn_norm and post_ffn_norm for llama.cpp's attn_output,
 * post_attention_norm and post_ffw_norm, which are taken where llama.cpp's are absent
 * (glmocr_alias). Its vocabulary's pre-tokenizer is chatglm-bpe whatever the file says
 * (vocab.c), and its vision tower (v.*, mm.*) is the projector's (mmproj_ollama.c).
 */
#include <stdio.h>
#include <string.h>

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
    return glm4_trunk(ld) && mrope_read_sections(ld, "glm4.rope.dimension_sections", 4);
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

/* ollama's older names for a layer's tensors: "blk.N.attn_output.weight" as
 * "blk.N.attn_out.weight", and the sandwich's post-norms likewise */
static const char *glmocr_alias(const char *name, char *buf, size_t size)
{
    static const char *const renames[][2] = {{".attn_output.", ".attn_out."},
                                             {".post_attention_norm.", ".post_attn_norm."},
                                             {".post_ffw_norm.", ".post_ffn_norm."}};
    if (strncmp(name, "blk.", 4) != 0)
        return NULL;
    for (size_t i = 0; i < sizeof renames / sizeof renames[0]; i++) {
        const char *at = strstr(name, renames[i][0]);
        if (!at)
            continue;
        int n = snprintf(buf, size, "%.*s%s%s", (int)(at - name), name, renames[i][1],
                         at + strlen(renames[i][0]));
        return n > 0 && (size_t)n < size ? buf : NULL;
    }
    return NULL;
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
    .tensors = ARCH_POST_NORMS | ARCH_GATE_UP_EITHER,
    .read_hparams = glm4_trunk,
    .layer = layer_sandwich_norm,
    .tensor_alias = glmocr_alias,
};

static const model_arch arch_glmocr_mrope = {
    .name = "glmocr",
    .rope = ROPE_NEOX,
    .ffn = FFN_SWIGLU,
    .tensors = ARCH_POST_NORMS | ARCH_GATE_UP_EITHER,
    .read_hparams = glmocr_mrope_hparams,
    .layer = layer_sandwich_norm,
    .tensor_alias = glmocr_alias,
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

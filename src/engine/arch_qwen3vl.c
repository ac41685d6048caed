/*
 * qwen3vl and qwen3vlmoe: the language models of Qwen3-VL (ollama's qwen3-vl, 2B to 32B dense,
 * 30B-A3B and 235B-A22B with experts), which are qwen3's and qwen3moe's blocks with two
 * additions for images. Positions are M-RoPE with interleaved sections
 * (rope.dimension_sections), but a text token has the same temporal, height and width
 * position, so while the sections cover every rotated pair the rotation is NeoX's at the
 * token's position (imrope_check_sections); an image's tokens turn with their own grid
 * positions (corral_decode_image). Deepstack adds an image token's extra visual features
 * (the rows after its embedding, projector_qwen3vl.c) to the first n_deepstack_layers
 * layers' outputs; a text token's are zero, so text runs the plain blocks.
 *
 * ollama's own files carry the vision tower (v.*, ignored here) in the same file and write
 * the sections as rope.mrope_section, or not at all when its engine takes 24, 20, 20.
 */
#include <stdio.h>

#include "forward.h"

/* The sections (kept for an image's positions) and the deepstack layers, fewer than the
 * layers: each adds to a layer's output. */
static bool qwen3vl_hparams(model_loader *ld)
{
    hparams *hp = &ld->model->hp;
    if (!imrope_check_sections(ld, true, hp->mrope_sections))
        return false;
    /* ollama's files may leave the count out: as many as its tower lists deepstack layers */
    char key[64];
    const gguf_kv *kv;
    snprintf(key, sizeof key, "%s.vision.deepstack_visual_indexes", ld->model->arch->name);
    if (!gguf_get_array_opt(ld->model->file, key, GGUF_TYPE_COUNT, &kv, ld->err))
        return false;
    hp->n_deepstack = kv && kv->n < UINT32_MAX ? (uint32_t)kv->n : 0;
    if (!model_read_u32(ld, "n_deepstack_layers", &hp->n_deepstack, false))
        return false;
    hp->mrope_interleaved = true;
    if (hp->n_deepstack >= hp->n_layer) {
        corral_error_set(ld->err, "%s: %u deepstack layers for a model of %u layers",
                         gguf_path(ld->model->file), hp->n_deepstack, hp->n_layer);
        return false;
    }
    return true;
}

/* qwen3moe's experts' width: expert_feed_forward_length, else llama.cpp's
 * feed_forward_length / expert_used_count (which ollama's files, without the key, rely on) */
static bool qwen3vlmoe_hparams(model_loader *ld)
{
    hparams *hp = &ld->model->hp;
    if (hp->n_expert_used > 0)
        hp->n_ff_exp = hp->n_ff / hp->n_expert_used;
    return model_read_u32(ld, "expert_feed_forward_length", &hp->n_ff_exp, false) &&
           qwen3vl_hparams(ld);
}

const model_arch arch_qwen3vl = {
    .name = "qwen3vl",
    .rope = ROPE_NEOX,
    .ffn = FFN_SWIGLU,
    .tensors = ARCH_QK_NORM,
    .read_hparams = qwen3vl_hparams,
    .layer = layer_pre_norm,
};

const model_arch arch_qwen3vlmoe = {
    .name = "qwen3vlmoe",
    .rope = ROPE_NEOX,
    .ffn = FFN_SWIGLU,
    .tensors = ARCH_QK_NORM | ARCH_EXPERTS,
    .read_hparams = qwen3vlmoe_hparams,
    .layer = layer_pre_norm,
};

/*
 * deepseek2-ocr (DeepSeek-OCR's language model, a 3B DeepSeek-V2 with 64 experts): deepseek2's
 * layers (arch_deepseek2.c) without the latent attention. Each layer attends with plain
 * multi-head q/k/v/o projections, no biases and no GQA, and rotates the whole of each head the
 * NeoX way at the file's base: llama.cpp does so whatever rope.dimension_count says (the
 * converter writes the checkpoint's qk_rope_head_dim there, which is not the head's width), and
 * without the YaRN or linear scaling it would apply to deepseek2. The FFN is deepseek2's:
 * leading dense layers, then softmax-routed experts (unless the file says otherwise) beside
 * shared experts.
 *
 * deepseekocr is the same model as ollama's library files name and describe it (a single
 * file that also holds the vision tower, whose s.*, v.* and mm.* tensors the text model leaves
 * alone): no norm epsilon (1e-6), and no expert_feed_forward_length or expert_shared_count,
 * which the first expert layer's down matrices give.
 */
#include "forward.h"

/* The heads as llama.cpp's graph for this model takes them, and RoPE without scaling. */
static bool ocr_attention(model_loader *ld)
{
    corral_model *m = ld->model;
    hparams *hp = &m->hp;
    uint32_t head = hp->n_embd / hp->n_head;
    if (hp->n_embd % hp->n_head != 0 || hp->head_dim_k != head || hp->head_dim_v != head ||
        hp->n_head_kv != hp->n_head) {
        corral_error_set(ld->err, "%s: %s attends with %u heads of %u (n_embd / n_head), not %u kv heads, key %u and value %u",
                         gguf_path(m->file), m->arch->name, hp->n_head, head, hp->n_head_kv,
                         hp->head_dim_k, hp->head_dim_v);
        return false;
    }
    if (hp->rope_freq_scale != 1.0f || m->rope[0].yarn || m->rope[0].attn_factor != 1.0f) {
        corral_error_set(ld->err, "%s: rope scaling with %s is not supported", gguf_path(m->file),
                         m->arch->name);
        return false;
    }
    hp->n_rot = head;
    return true;
}

static bool deepseek2ocr_hparams(model_loader *ld)
{
    return ocr_attention(ld) && deepseek2_read_routing(ld, false, false, true, 0);
}

/* ne[0] of blk.<il>.<name>.weight, or 0 when there is no such tensor. */
static uint32_t tensor_width(const model_loader *ld, uint32_t il, const char *name)
{
    char full[GGUF_MAX_NAME_BYTES + 1];
    snprintf(full, sizeof full, "blk.%u.%s.weight", il, name);
    const gguf_tensor *t = gguf_find_tensor(ld->model->file, full);
    return t && t->ne[0] > 0 && (uint64_t)t->ne[0] <= UINT32_MAX ? (uint32_t)t->ne[0] : 0;
}

static bool deepseekocr_hparams(model_loader *ld)
{
    hparams *hp = &ld->model->hp;
    uint32_t lead = 0;
    if (!ocr_attention(ld) ||
        !model_read_u32(ld, "leading_dense_block_count", &lead, false))
        return false;
    /* an expert's width, and the shared experts' together; the keys win where present */
    uint32_t width = lead < hp->n_layer ? tensor_width(ld, lead, "ffn_down_exps") : 0;
    uint32_t shared = lead < hp->n_layer ? tensor_width(ld, lead, "ffn_down_shexp") : 0;
    if (width > 0)
        hp->n_ff_exp = width;
    if (width > 0 && shared % width != 0) {
        corral_error_set(ld->err, "%s: the shared experts' width %u is not a multiple of an expert's %u",
                         gguf_path(ld->model->file), shared, width);
        return false;
    }
    return deepseek2_read_routing(ld, false, false, false, width > 0 ? shared / width : 0);
}

const model_arch arch_deepseek2ocr = {
    .name = "deepseek2-ocr",
    .rope = ROPE_NEOX,
    .ffn = FFN_SWIGLU,
    .tensors = ARCH_EXPERTS,
    .read_hparams = deepseek2ocr_hparams,
    .layer = layer_pre_norm,
};

const model_arch arch_deepseekocr = {
    .name = "deepseekocr",
    .rope = ROPE_NEOX,
    .ffn = FFN_SWIGLU,
    .tensors = ARCH_EXPERTS,
    .read_hparams = deepseekocr_hparams,
    .layer = layer_pre_norm,
    .norm_eps_default = 1e-6f,
};

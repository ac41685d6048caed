/*
 * qwen2vl: the qwen2 block with M-RoPE, the text model of Qwen2-VL and Qwen2.5-VL. Rotation
 * pairs are split into sections (rope.dimension_sections) that turn with a token's temporal,
 * height and width positions; a text token has all three equal, so only an image's tokens
 * (corral_decode_image) turn differently from plain NeoX RoPE. ollama names the same model
 * "qwen25vl" and stores the sections as rope.mrope_section, three of them (no fourth).
 */
#include <string.h>

#include "forward.h"

bool mrope_read_sections(model_loader *ld, const char *key, uint64_t n_min)
{
    hparams *hp = &ld->model->hp;
    const gguf_kv *kv;
    if (!gguf_get_array(ld->model->file, key, GGUF_TYPE_COUNT, &kv, ld->err))
        return false;
    uint64_t sum = 0;
    bool ok = kv->n >= n_min && kv->n <= 4 && gguf_type_is_integer(kv->elem_type);
    memset(hp->mrope_sections, 0, sizeof hp->mrope_sections);
    for (uint64_t i = 0; ok && i < kv->n; i++) {
        int64_t v = gguf_kv_i64(kv, i);
        ok = v >= 0 && v <= hp->n_rot;
        hp->mrope_sections[i] = ok ? (uint32_t)v : 0;
        sum += ok ? (uint64_t)v : 0;
    }
    if (!ok || sum == 0 || sum > hp->n_rot / 2) {
        corral_error_set(ld->err, "%s: %s must be %llu to 4 sizes adding up to at most %u "
                         "rotation pairs", gguf_path(ld->model->file), key,
                         (unsigned long long)n_min, hp->n_rot / 2);
        return false;
    }
    return true;
}

static bool qwen2vl_hparams(model_loader *ld)
{
    return mrope_read_sections(ld, "qwen2vl.rope.dimension_sections", 4);
}

static bool qwen25vl_hparams(model_loader *ld)
{
    return mrope_read_sections(ld, "qwen25vl.rope.mrope_section", 3);
}

const model_arch arch_qwen2vl = {
    .name = "qwen2vl",
    .rope = ROPE_NEOX,
    .ffn = FFN_SWIGLU,
    .tensors = ARCH_QKV_BIAS,
    .read_hparams = qwen2vl_hparams,
    .layer = layer_pre_norm,
};

const model_arch arch_qwen25vl = {
    .name = "qwen25vl",
    .rope = ROPE_NEOX,
    .ffn = FFN_SWIGLU,
    .tensors = ARCH_QKV_BIAS,
    .read_hparams = qwen25vl_hparams,
    .layer = layer_pre_norm,
};

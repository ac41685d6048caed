/*
 * mistral3 (Ministral 3, Mistral Small 3.x text model): the llama block, usually with YaRN
 * RoPE (model.c reads it for any family) and key_length != n_embd / n_head, plus an
 * attention temperature: after RoPE, q is multiplied by
 * 1 + temperature_scale * ln(1 + floor(pos / original_context_length)). Only the text
 * model: the vision tower (another file, or v.* / mm.* tensors in ollama's) is not read.
 */
#include <math.h>

#include "forward.h"

static bool mistral3_hparams(model_loader *ld)
{
    corral_model *m = ld->model;
    hparams *hp = &m->hp;
    /* rope.scaling_beta: the same value as ollama's converter names it */
    if (!model_read_f32(ld, "rope.scaling_beta", &hp->attn_temp_scale, false) ||
        !model_read_f32(ld, "attention.temperature_scale", &hp->attn_temp_scale, false))
        return false;
    if (hp->attn_temp_scale == 0.0f)
        return true;
    /* the temperature steps every original context length, by default the trained one */
    hp->attn_temp_floor = hp->n_ctx_train;
    if (!model_read_u32(ld, "rope.scaling.original_context_length", &hp->attn_temp_floor, false))
        return false;
    if (hp->attn_temp_floor == 0 || !isfinite(hp->attn_temp_scale)) {
        corral_error_set(ld->err, "%s: the attention temperature %g needs a finite scale and rope.scaling.original_context_length",
                         gguf_path(m->file), hp->attn_temp_scale);
        return false;
    }
    return true;
}

const model_arch arch_mistral3 = {
    .name = "mistral3",
    .rope = ROPE_NORMAL,
    .ffn = FFN_SWIGLU,
    .read_hparams = mistral3_hparams,
    .layer = layer_pre_norm,
};

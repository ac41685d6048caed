/*
 * llama4 (Llama 4 Scout 17B-16E and Maverick 17B-128E, ollama's llama4; text model only): the
 * llama block, except that
 * - layers come in groups of four (attention.sliding_window_pattern, when a file says
 *   otherwise): three with RoPE and chunked attention (a token sees only the positions of
 *   its own chunk of 8192, chunk = floor(pos / 8192)), their q and k L2-normed per head after
 *   RoPE (not on Maverick, recognised by its 128 experts, as llama.cpp does); the last with
 *   no RoPE and all positions, its q multiplied by the attention temperature
 *   1 + 0.1 * ln(1 + floor((pos + 1) / 8192));
 * - every interleave_moe_layer_step-th layer has experts instead of the dense FFN: a sigmoid
 *   router picks the top expert(s), whose input (not output) is scaled by its weight, beside a
 *   shared expert as wide as an expert.
 * The chunk size and the temperature's constants are llama.cpp's fixed values (the files
 * carry no keys for them; a sliding_window key's value other than 0 is not used). A file whose attention.sliding_window is 0
 * (MobileLLM-R1, no chunks) is refused. Ollama's files name the FFN widths
 * intermediate_size and intermediate_size_moe and carry use_qk_norm: both are read.
 */
#include <stdio.h>

#include "forward.h"

enum {
    LLAMA4_CHUNK = 8192,     /* positions of a chunk */
    LLAMA4_NOPE_STEP = 4,    /* every fourth layer: no RoPE, all positions */
    LLAMA4_TEMP_FLOOR = 8192 /* the temperature steps every this many positions */
};
#define LLAMA4_TEMP_SCALE 0.1f
#define LLAMA4_MAVERICK_EXPERTS 128

static bool llama4_hparams(model_loader *ld)
{
    corral_model *m = ld->model;
    hparams *hp = &m->hp;
    const char *path = gguf_path(m->file);
    uint32_t window = LLAMA4_CHUNK, nope_step = LLAMA4_NOPE_STEP;
    uint32_t *moe_step = &hp->n_moe_layer_step;
    /* ollama's files: feed_forward_length is the experts' width there, intermediate_size
     * the dense layers' */
    if (!model_read_u32(ld, "expert_feed_forward_length", &hp->n_ff_exp, false) ||
        !model_read_u32(ld, "intermediate_size_moe", &hp->n_ff_exp, false) ||
        !model_read_u32(ld, "intermediate_size", &hp->n_ff, false) ||
        !model_read_u32(ld, "interleave_moe_layer_step", moe_step, true) ||
        !model_read_u32(ld, "attention.sliding_window", &window, false) ||
        !model_read_u32(ld, "attention.sliding_window_pattern", &nope_step, false))
        return false;
    if (nope_step == 0) {
        corral_error_set(ld->err, "%s: llama4 attention.sliding_window_pattern must not be 0",
                         path);
        return false;
    }
    if (window == 0) {
        corral_error_set(ld->err,
                         "%s: llama4 without chunked attention (attention.sliding_window 0) "
                         "is not supported",
                         path);
        return false;
    }
    if (hp->n_expert == 0 || *moe_step == 0 || *moe_step > hp->n_layer || hp->n_ff == 0 ||
        hp->n_ff_exp == 0) {
        corral_error_set(ld->err,
                         "%s: llama4 needs experts every interleave_moe_layer_step (%u) layers "
                         "and FFN widths (%u, experts %u)",
                         path, *moe_step, hp->n_ff, hp->n_ff_exp);
        return false;
    }
    bool qk_norm = hp->n_expert != LLAMA4_MAVERICK_EXPERTS;
    if (!model_read_bool(ld, "use_qk_norm", &qk_norm, false))
        return false;
    hp->n_ff_shexp = hp->n_ff_exp;
    hp->n_swa = LLAMA4_CHUNK; /* llama.cpp's, whatever the key says */
    hp->attn_temp_scale = LLAMA4_TEMP_SCALE;
    hp->attn_temp_floor = LLAMA4_TEMP_FLOOR;
    hp->attn_temp_offset = 1.0f;
    hp->expert_gating_sigmoid = true;
    hp->expert_weights_norm = false;
    hp->expert_weights_scale = 1.0f;
    hp->expert_weight_input = true;
    for (uint32_t il = 0; il < hp->n_layer; il++) {
        layer_weights *l = &m->layers[il];
        bool nope = (il + 1) % nope_step == 0;
        l->no_rope = nope;
        l->sliding = l->chunked = !nope;
        l->l2_qk = !nope && qk_norm;
        l->no_attn_temp = !nope;
    }
    return true;
}

#define NAME(suffix) (snprintf(name, sizeof name, "blk.%u." suffix, il), name)

/* A dense layer's SwiGLU FFN, or an expert layer's router, experts and shared expert. */
static bool llama4_bind_ffn(model_loader *ld, uint32_t il)
{
    const hparams *hp = &ld->model->hp;
    layer_weights *l = &ld->model->layers[il];
    char name[GGUF_MAX_NAME_BYTES + 1];
    size_t E = hp->n_embd, F = hp->n_ff_exp, n = hp->n_expert;
    if (!model_bind_vector(ld, &l->ffn_norm, NAME("ffn_norm.weight"), E, true))
        return false;
    if ((il + 1) % hp->n_moe_layer_step != 0)
        return model_bind_matrix(ld, &l->ffn_gate, NAME("ffn_gate.weight"), E, l->n_ff, 1, true) &&
               model_bind_matrix(ld, &l->ffn_up, NAME("ffn_up.weight"), E, l->n_ff, 1, true) &&
               model_bind_matrix(ld, &l->ffn_down, NAME("ffn_down.weight"), l->n_ff, E, 1, true);
    return model_bind_matrix(ld, &l->ffn_gate_inp, NAME("ffn_gate_inp.weight"), E, n, 1, true) &&
           model_bind_matrix(ld, &l->ffn_gate_exps, NAME("ffn_gate_exps.weight"), E, F, n, true) &&
           model_bind_matrix(ld, &l->ffn_up_exps, NAME("ffn_up_exps.weight"), E, F, n, true) &&
           model_bind_matrix(ld, &l->ffn_down_exps, NAME("ffn_down_exps.weight"), F, E, n, true) &&
           model_bind_matrix(ld, &l->ffn_gate_shexp, NAME("ffn_gate_shexp.weight"), E, F, 1, true) &&
           model_bind_matrix(ld, &l->ffn_up_shexp, NAME("ffn_up_shexp.weight"), E, F, 1, true) &&
           model_bind_matrix(ld, &l->ffn_down_shexp, NAME("ffn_down_shexp.weight"), F, E, 1, true);
}

#undef NAME

const model_arch arch_llama4 = {
    .name = "llama4",
    .rope = ROPE_NORMAL,
    .ffn = FFN_SWIGLU,
    .tensors = ARCH_EXPERTS,
    .read_hparams = llama4_hparams,
    .layer = layer_pre_norm,
    .bind_ffn = llama4_bind_ffn,
};

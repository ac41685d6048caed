/*
 * phi3: the llama block with q, k and v in one attn_qkv matrix and gate and up in one ffn_up
 * (both sliced at load), NeoX RoPE, and q scaled before Q.K as llama.cpp does. Its
 * sliding_window key is ignored, as llama.cpp ignores it. <|end|> ends a turn (vocab.c).
 * The 128k models' LongRoPE (rope_factors_long / _short and rope.scaling.attn_factor) is the
 * shared RoPE's (model.c, blocks.c).
 */
#include <math.h>

#include "forward.h"

static bool phi3_hparams(model_loader *ld)
{
    corral_model *m = ld->model;
    m->hp.q_scale = 1.0f / sqrtf((float)m->hp.head_dim_k);
    m->hp.kq_scale = 1.0f;
    return true;
}

const model_arch arch_phi3 = {
    .name = "phi3",
    .rope = ROPE_NEOX,
    .ffn = FFN_SWIGLU,
    .tensors = ARCH_FUSED_QKV | ARCH_FUSED_GATE_UP,
    .read_hparams = phi3_hparams,
    .layer = layer_pre_norm,
};

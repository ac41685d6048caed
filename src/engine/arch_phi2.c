/*
 * phi2 (Phi-2, dolphin-phi, the text model of moondream): attention and a
 * non-gated GELU MLP side by side on one LayerNorm (with bias) of the residual, biases on
 * q/k/v, the attention output, the MLP and the logits, and NeoX RoPE on the first
 * rope.dimension_count dims of each head only. Files carry q, k and v fused in attn_qkv (the
 * original conversion) or as three tensors (later ones). q is scaled before Q.K, as
 * llama.cpp does.
 */
#include <math.h>

#include "forward.h"

static bool phi2_hparams(model_loader *ld)
{
    hparams *hp = &ld->model->hp;
    hp->q_scale = 1.0f / sqrtf((float)hp->head_dim_k);
    hp->kq_scale = 1.0f;
    return true;
}

const model_arch arch_phi2 = {
    .name = "phi2",
    .rope = ROPE_NEOX,
    .ffn = FFN_GELU,
    .tensors = ARCH_QKV_EITHER | ARCH_QKV_BIAS | ARCH_LAYER_NORM | ARCH_NORM_BIAS |
               ARCH_OUTPUT_FFN_BIAS | ARCH_PARALLEL | ARCH_OUTPUT_BIAS,
    .read_hparams = phi2_hparams,
    .layer = layer_parallel,
};

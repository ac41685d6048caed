/*
 * stablelm (StableLM 2 1.6B and 12B, stablelm-zephyr, stable-code): the pre-norm block with
 * LayerNorms that have biases, a SwiGLU FFN, and NeoX RoPE on the first
 * rope.dimension_count dims of each head only; q/k/v biases where the file has them. The 12B
 * model LayerNorms each head of q and k with weights of its own, and has no ffn_norm: its FFN
 * reads the attention's normed input beside the attention (layer_pre_norm_or_parallel).
 */
#include "forward.h"

const model_arch arch_stablelm = {
    .name = "stablelm",
    .rope = ROPE_NEOX,
    .ffn = FFN_SWIGLU,
    .tensors = ARCH_LAYER_NORM | ARCH_NORM_BIAS | ARCH_QK_NORM_HEADS | ARCH_FFN_NORM_OPTIONAL,
    .layer = layer_pre_norm_or_parallel,
};

/* qwen2: the llama block with q/k/v biases and NeoX RoPE. */
#include "forward.h"

const model_arch arch_qwen2 = {
    .name = "qwen2",
    .rope = ROPE_NEOX,
    .ffn = FFN_SWIGLU,
    .tensors = ARCH_QKV_BIAS,
    .layer = layer_pre_norm,
};

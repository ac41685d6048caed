/* qwen3: the llama block with per-head RMSNorm on q and k before NeoX RoPE; key_length may
 * differ from n_embd / n_head. */
#include "forward.h"

const model_arch arch_qwen3 = {
    .name = "qwen3",
    .rope = ROPE_NEOX,
    .ffn = FFN_SWIGLU,
    .tensors = ARCH_QK_NORM,
    .layer = layer_pre_norm,
};

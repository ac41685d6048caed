/*
 * starcoder2 (StarCoder2, also the Granite code models): the pre-norm block with LayerNorms
 * that have biases (in the blocks and before the output), biases on q, k, v and the
 * attention output, and a non-gated MLP down(gelu(up(x) + b)) + b. NeoX RoPE. The output is
 * tied to token_embd when the file has no output.weight.
 */
#include "forward.h"

const model_arch arch_starcoder2 = {
    .name = "starcoder2",
    .rope = ROPE_NEOX,
    .ffn = FFN_GELU,
    .tensors = ARCH_QKV_BIAS | ARCH_LAYER_NORM | ARCH_NORM_BIAS | ARCH_OUTPUT_FFN_BIAS,
    .layer = layer_pre_norm,
};

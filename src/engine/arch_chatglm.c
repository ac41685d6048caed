/*
 * chatglm (GLM-4-9B of 2024, CodeGeeX4, ChatGLM3; ollama's glm4:9b and codegeex4): llama's
 * pre-norm block with RMSNorm and SwiGLU, but q, k and v fused in one attn_qkv with its biases
 * (GlmForCausalLM conversions write the three separately, also with biases: both load),
 * gate and up fused in one ffn_up of 2 * feed_forward_length rows (gate first), and "normal"
 * RoPE on adjacent pairs of the first rope.dimension_count dims of each head only (the
 * converter writes half the head), the rest passed through. The biases are optional, as
 * llama.cpp reads them; a fused tensor must match the heads' widths (model.c checks).
 */
#include "forward.h"

const model_arch arch_chatglm = {
    .name = "chatglm",
    .rope = ROPE_NORMAL,
    .ffn = FFN_SWIGLU,
    .tensors = ARCH_QKV_EITHER | ARCH_FUSED_GATE_UP,
    .layer = layer_pre_norm,
};

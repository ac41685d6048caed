/*
 * internlm2 (InternLM2 and InternLM2.5 chat and base models; ollama's internlm2): llama's block.
 * The converter splits InternLM2's fused wqkv, whose rows are grouped by KV head, into
 * attn_q, attn_k and attn_v in llama's row order, so the file is read as llama's: grouped-query
 * attention, RMSNorm, SwiGLU, "normal" RoPE. A fused attn_qkv (rows q;k;v) and q/k/v biases
 * load where a file has them, as llama.cpp allows. RoPE must cover the whole head: llama.cpp
 * asserts it, so a file saying otherwise is refused here rather than run in a way nothing
 * else would.
 */
#include "forward.h"

static bool internlm2_hparams(model_loader *ld)
{
    const hparams *hp = &ld->model->hp;
    if (hp->n_rot != hp->head_dim_k || hp->head_dim_v != hp->head_dim_k) {
        corral_error_set(ld->err, "%s: internlm2 rotates whole heads of equal key and value width (key %u, value %u, rope %u)",
                         gguf_path(ld->model->file), hp->head_dim_k, hp->head_dim_v, hp->n_rot);
        return false;
    }
    return true;
}

const model_arch arch_internlm2 = {
    .name = "internlm2",
    .rope = ROPE_NORMAL,
    .ffn = FFN_SWIGLU,
    .tensors = ARCH_QKV_EITHER,
    .read_hparams = internlm2_hparams,
    .layer = layer_pre_norm,
};

/*
 * olmo2 (OLMo 2): no norm before attention or FFN; instead each branch output is RMS-normed
 * (post_attention_norm, post_ffw_norm) before its residual, and q and k are RMS-normed over
 * the whole projection (all heads at once) before the head split and NeoX RoPE. A
 * sliding_window key marks Olmo 3's local/global layers, which are not supported yet.
 */
#include <string.h>

#include "forward.h"

static bool olmo2_hparams(model_loader *ld)
{
    uint32_t window = 0;
    if (!model_read_u32(ld, "attention.sliding_window", &window, false))
        return false;
    if (window > 0) {
        corral_error_set(ld->err, "%s: olmo2 with a sliding window (Olmo 3) is not supported yet",
                         gguf_path(ld->model->file));
        return false;
    }
    return true;
}

/* x += norm(attn(x)); x += norm(ffn(x)) */
static void layer_olmo2(corral_context *ctx, uint32_t il)
{
    const layer_weights *l = &ctx->model->layers[il];
    size_t bytes = ctx->n_tokens * ctx->model->hp.n_embd * sizeof(float);
    memcpy(ctx->xn, ctx->x, bytes);
    forward_attention(ctx, il);
    forward_rmsnorm(ctx, &l->post_attn_norm, ctx->xn, ctx->xn);
    forward_residual(ctx);
    memcpy(ctx->xn, ctx->x, bytes);
    forward_ffn(ctx, il);
    forward_rmsnorm(ctx, &l->post_ffn_norm, ctx->xn, ctx->xn);
    forward_residual(ctx);
}

const model_arch arch_olmo2 = {
    .name = "olmo2",
    .rope = ROPE_NEOX,
    .ffn = FFN_SWIGLU,
    .tensors = ARCH_QK_NORM_FULL | ARCH_NO_PRE_NORMS | ARCH_POST_NORMS,
    .read_hparams = olmo2_hparams,
    .layer = layer_olmo2,
};

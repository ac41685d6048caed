/*
 * jina-bert-v2 (Jina AI's jina-embeddings-v2, small and base, en, de and es, and
 * jina-embeddings-v2-base-code): bert's encoder block (arch_bert.c: x = LN(x + attn(x)), then
 * LN(x + ffn(x)), token types and a LayerNorm of the embeddings, the final states pooled),
 * except that
 * - there are no position embeddings: ALiBi biases each score by -slope * |distance|
 *   (attention_shape.alibi), with ALiBi's slopes for a largest bias of 8, the value llama.cpp
 *   fixes for this family (the files carry no key for it);
 * - the FFN is gelu(gate . x) * (up . x), then down with its bias: gate and up are the two
 *   halves of one ffn_up of 2 * feed_forward_length rows (gate first, as HF's gated_layers),
 *   or, in files converted before llama.cpp fused them, ffn_gate and ffn_up;
 * - jina-v2-code's layers LayerNorm q and k over all heads (weights and biases), and norm
 *   once more after the attention's norm: x = LN2(LN(x + attn(x)) + x).
 * FFN biases before the activation and an FFN without a gate, which llama.cpp would take but
 * no released model has, are refused by name.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "forward.h"

#define JINA_ALIBI_MAX_BIAS 8.0f

/* ALiBi's slopes: for the largest power of two p <= n_head heads, 2^(-8(h+1)/p); the heads
 * past it take the odd steps of the sequence for 2p, 2^(-4(2(h-p)+1)/p). */
static bool jina_alibi_slopes(model_loader *ld)
{
    corral_model *m = ld->model;
    uint32_t n_head = m->hp.n_head, p = 1;
    while (p * 2 <= n_head)
        p *= 2;
    m->alibi_slopes = malloc(n_head * sizeof *m->alibi_slopes);
    if (!m->alibi_slopes) {
        corral_error_set(ld->err, "out of memory");
        return false;
    }
    float m0 = powf(2.0f, -JINA_ALIBI_MAX_BIAS / (float)p);
    float m1 = powf(2.0f, -(JINA_ALIBI_MAX_BIAS / 2.0f) / (float)p);
    for (uint32_t h = 0; h < n_head; h++)
        m->alibi_slopes[h] = h < p ? powf(m0, (float)(h + 1)) : powf(m1, (float)(2 * (h - p) + 1));
    return true;
}

static bool refuse_present(model_loader *ld, const char *name, const char *what)
{
    if (!gguf_find_tensor(ld->model->file, name))
        return true;
    corral_error_set(ld->err, "%s: jina-bert-v2 with %s (%s) is not supported",
                     gguf_path(ld->model->file), what, name);
    return false;
}

static bool jina_hparams(model_loader *ld)
{
    corral_model *m = ld->model;
    char name[GGUF_MAX_NAME_BYTES + 1];
    for (uint32_t il = 0; il < m->hp.n_layer; il++) {
        static const char *const absent[][2] = {
            {"ffn_up.bias", "a bias before the FFN's activation"},
            {"ffn_gate.bias", "a bias before the FFN's activation"},
        };
        for (size_t i = 0; i < sizeof absent / sizeof absent[0]; i++) {
            snprintf(name, sizeof name, "blk.%u.%s", il, absent[i][0]);
            if (!refuse_present(ld, name, absent[i][1]))
                return false;
        }
    }
    m->hp.n_rot = 0; /* no rotation: the positions are ALiBi's */
    return model_read_bool(ld, "attention.causal", &m->hp.causal, true) &&
           model_read_pooling(ld) && jina_alibi_slopes(ld);
}

/* Gate and up, fused or not, then down and its bias. */
static bool jina_bind_ffn(model_loader *ld, uint32_t il)
{
    corral_model *m = ld->model;
    const hparams *hp = &m->hp;
    layer_weights *l = &m->layers[il];
    char name[GGUF_MAX_NAME_BYTES + 1];
    size_t E = hp->n_embd, F = hp->n_ff;
#define NAME(suffix) (snprintf(name, sizeof name, "blk.%u." suffix, il), name)
    if (!model_bind_matrix(ld, &l->ffn_gate, NAME("ffn_gate.weight"), E, F, 1, false))
        return false;
    if (l->ffn_gate.data) {
        if (!model_bind_matrix(ld, &l->ffn_up, NAME("ffn_up.weight"), E, F, 1, true))
            return false;
    } else {
        const gguf_tensor *t = gguf_find_tensor(m->file, NAME("ffn_up.weight"));
        if (t && t->n_dims == 2 && t->ne[1] == (int64_t)F) {
            corral_error_set(ld->err, "%s: jina-bert-v2 with an FFN without a gate (%s) is not "
                             "supported", gguf_path(m->file), name);
            return false;
        }
        weight gate_up;
        if (!model_bind_matrix(ld, &gate_up, name, E, 2 * F, 1, true))
            return false;
        l->ffn_gate = gate_up;
        l->ffn_gate.n_out = F;
        l->ffn_up = gate_up;
        l->ffn_up.data = (const uint8_t *)gate_up.data + F * gate_up.row_bytes;
        l->ffn_up.n_out = F;
    }
    return model_bind_matrix(ld, &l->ffn_down, NAME("ffn_down.weight"), F, E, 1, true) &&
           model_bind_vector(ld, &l->ffn_down_b, NAME("ffn_down.bias"), E, true);
#undef NAME
}

/* layer_post_norm's steps, with jina-v2-code's second norm of the attention's output plus
 * the layer's input where the layer has one. */
static void jina_layer(corral_context *ctx, uint32_t il)
{
    const layer_weights *l = &ctx->model->layers[il];
    if (!l->attn_norm_2.data) {
        layer_post_norm(ctx, il);
        return;
    }
    size_t n = ctx->n_tokens * ctx->model->hp.n_embd;
    memcpy(ctx->branch, ctx->x, n * sizeof *ctx->x);
    memcpy(ctx->xn, ctx->x, n * sizeof *ctx->x);
    forward_attention(ctx, il);
    forward_residual(ctx);
    forward_layernorm(ctx, &l->attn_out_norm, &l->attn_out_norm_b, ctx->x, ctx->x);
    for (size_t i = 0; i < n; i++)
        ctx->x[i] += ctx->branch[i];
    forward_layernorm(ctx, &l->attn_norm_2, &l->attn_norm_2_b, ctx->x, ctx->x);
    memcpy(ctx->xn, ctx->x, n * sizeof *ctx->x);
    forward_ffn(ctx, il);
    forward_residual(ctx);
    forward_layernorm(ctx, &l->layer_out_norm, &l->layer_out_norm_b, ctx->x, ctx->x);
}

const model_arch arch_jina_bert_v2 = {
    .name = "jina-bert-v2",
    .rope = ROPE_NEOX, /* unused: n_rot is 0 */
    .ffn = FFN_GEGLU,
    .tensors = ARCH_ENCODER | ARCH_QKV_BIAS | ARCH_QK_NORM_FULL | ARCH_LAYER_NORM |
               ARCH_ATTN_NORM_2,
    .qk_norm_optional = true,
    .read_hparams = jina_hparams,
    .layer = jina_layer,
    .bind_ffn = jina_bind_ffn,
};

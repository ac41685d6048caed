/*
 * corral_embed: an encoder's one input through the model in a single batch (its context is
 * made for that: context.c), from the token embeddings (plus token type row 0 and learned
 * positions, then a LayerNorm; or, for a decoder's blocks (ARCH_EMBED_DECODER), scaled as the
 * decoder scales them) through the blocks to the final states (RMS-normed by output_norm
 * where the model has one), pooled as the model says, then through its dense projections if
 * any. The result is not normalised: that, and truncating dimensions, are the caller's.
 */
#include <stdlib.h>
#include <string.h>

#include "forward.h"
#include "gpu.h"

static void add_row(const weight *table, size_t row, float *x, float *scratch)
{
    const uint8_t *at = (const uint8_t *)table->data + row * table->row_bytes;
    table->ops->dequantize(at, scratch, table->n_in);
    for (size_t i = 0; i < table->n_in; i++)
        x[i] += scratch[i];
}

/* The layers' input in ctx->x for tokens ids[0..n) at positions 0..n-1. */
static void embed_input(corral_context *ctx, const corral_token *ids, size_t n)
{
    const corral_model *m = ctx->model;
    const hparams *hp = &m->hp;
    size_t E = hp->n_embd;
    float *row = ctx->xn; /* scratch until the blocks begin */
    ctx->n_tokens = n;
    for (size_t t = 0; t < n; t++) {
        ctx->tok_seq[t] = 0;
        ctx->tok_pos[t] = (uint32_t)t;
        float *x = ctx->x + t * E;
        const weight *tok = &m->tok_embd;
        tok->ops->dequantize((const uint8_t *)tok->data + (size_t)ids[t] * tok->row_bytes, x, E);
        /* llama.cpp gives every token type 0 ("sentence A") */
        if (m->type_embd.data)
            add_row(&m->type_embd, 0, x, row);
        if (m->pos_embd.data)
            add_row(&m->pos_embd, t, x, row);
        if (m->tok_norm.data)
            block_layernorm(x, m->tok_norm.data, m->tok_norm_b.data, E, hp->norm_eps, x);
        if (hp->embd_scale != 1.0f)
            for (size_t i = 0; i < E; i++)
                x[i] *= hp->embd_scale;
        for (uint32_t r = 0; r < m->n_rope_variants; r++)
            rope_cache(&ctx->rope[r], (float)t, ctx->rope_cs[r] + t * hp->n_rot);
    }
}

/* The final states of ctx->x pooled into out, in double where a sum is long. */
static void pool(const corral_context *ctx, float *out)
{
    const corral_model *m = ctx->model;
    size_t E = m->hp.n_embd, n = ctx->n_tokens;
    switch (m->pooling) {
    case POOLING_MEAN:
        /* ggml multiplies by a matrix of 1/n: each state scaled, then summed */
        for (size_t i = 0; i < E; i++) {
            double sum = 0.0;
            float scale = 1.0f / (float)n;
            for (size_t t = 0; t < n; t++)
                sum += (double)(ctx->x[t * E + i] * scale);
            out[i] = (float)sum;
        }
        return;
    case POOLING_CLS:
        memcpy(out, ctx->x, E * sizeof *out);
        return;
    case POOLING_NONE: /* ollama then takes the last token's state */
    case POOLING_LAST:
        memcpy(out, ctx->x + (n - 1) * E, E * sizeof *out);
        return;
    }
}

/* y = w . x for one vector, on this thread: the projections after pooling are two products
 * of one row, wider than anything the context's scratch is sized for. */
static bool project(const weight *w, const float *x, float *y, corral_error *err)
{
    size_t act_bytes = quant_act_row_bytes(w->type, w->n_in);
    void *act = act_bytes ? malloc(act_bytes) : NULL;
    if (!act) {
        corral_error_set(err, act_bytes ? "out of memory for the embedding's projection"
                                        : "the embedding's projection has rows of %zu values, "
                                          "which its type cannot multiply", w->n_in);
        return false;
    }
    quant_quantize_activations(w->ops, x, w->n_in, 1, act);
    quant_matmul_rows(w->ops, w->data, w->n_in, 0, w->n_out, act, 1, y, w->n_out);
    free(act);
    return true;
}

/* sentence-transformers' dense projections, n_embd -> width -> n_embd, in place. */
static bool project_pooled(const corral_model *m, float *out, corral_error *err)
{
    if (!m->dense_out[0].data)
        return true;
    float *wide = malloc(m->dense_out[0].n_out * sizeof *wide);
    bool ok = wide && project(&m->dense_out[0], out, wide, err) &&
              project(&m->dense_out[1], wide, out, err);
    if (!wide)
        corral_error_set(err, "out of memory for the embedding's projection");
    free(wide);
    return ok;
}

bool corral_embed(corral_context *ctx, const corral_token *ids, size_t n_ids, float *out,
                  corral_error *err)
{
    const corral_model *m = ctx->model;
    if (!(m->arch->tensors & ARCH_ENCODER)) {
        corral_error_set(err, "%s is not an embedding model", m->arch->name);
        return false;
    }
    if (n_ids == 0) {
        corral_error_set(err, "nothing to embed: the input has no tokens");
        return false;
    }
    if (n_ids > ctx->n_ctx) {
        corral_error_set(err, "the input has %zu tokens, more than the context's %u", n_ids,
                         ctx->n_ctx);
        return false;
    }
    for (size_t i = 0; i < n_ids; i++)
        if (ids[i] < 0 || (uint32_t)ids[i] >= m->hp.n_vocab) {
            corral_error_set(err, "token %d at index %zu is outside the vocabulary (%u tokens)",
                             ids[i], i, m->hp.n_vocab);
            return false;
        }
    embed_input(ctx, ids, n_ids);
    uint32_t n_cpu_layers = ctx->gpu ? gpu_layers_first(ctx->gpu) : m->hp.n_layer;
    for (uint32_t il = 0; il < n_cpu_layers; il++)
        m->arch->layer(ctx, il);
    bool logits_done; /* an encoder has none */
    if (ctx->gpu && !gpu_forward(ctx->gpu, ctx, 0, &logits_done, err))
        return false;
    if (m->output_norm.data)
        forward_rmsnorm(ctx, &m->output_norm, ctx->x, ctx->x);
    pool(ctx, out);
    return project_pooled(m, out, err);
}

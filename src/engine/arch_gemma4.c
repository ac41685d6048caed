/*
 * gemma4: gemma3's sandwich-normed block with layers of two kinds. A per-layer flag array
 * (attention.sliding_window_pattern) marks the sliding ones; global layers have heads of
 * their own width (attention.key_length, against key_length_swa on sliding ones), KV heads
 * of their own count (attention.head_count_kv may be per layer), RoPE of their own base
 * (rope.freq_base against rope.freq_base_swa) over their own dimensions, and the
 * "proportional" RoPE of rope_freqs.weight, whose huge divisors leave the dimensions past
 * the rotated fraction in place. In every layer q and k are RMS-normed per head with a
 * weight and v without one; q . k is not scaled (the norms set its size); a layer's k
 * projection serves as its v when the file has no attn_v; q, k and v may be one fused
 * attn_qkv; an optional one-value layer_output_scale multiplies the layer's output; the
 * logits may be soft-capped. The small models (E2B, E4B) add per-layer token inputs: each
 * token's row of per_layer_token_embd plus a normed projection of its embedding give every
 * layer a short vector, which gates a branch added after the FFN; and their last
 * attention.shared_kv_layers layers compute no keys or values but attend over the cache of
 * the last earlier layer of their kind. The 26B-A4B model runs a mixture of experts (GEGLU
 * experts, routed on rms(x) / sqrt(E) times a per-channel scale) beside the dense FFN on every
 * layer, each branch post-normed before they are summed. Only the text model.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "forward.h"
#include "moe.h"

/* The flag array that marks sliding layers: one bool per layer. */
static bool read_sliding_pattern(model_loader *ld)
{
    corral_model *m = ld->model;
    const char *key = "gemma4.attention.sliding_window_pattern";
    const gguf_kv *kv = gguf_find_kv(m->file, key);
    if (!kv || kv->type != GGUF_TYPE_ARRAY || kv->elem_type != GGUF_TYPE_BOOL ||
        kv->n != m->hp.n_layer) {
        corral_error_set(ld->err, "%s: '%s' must be an array of one bool for each of the %u layers",
                         gguf_path(m->file), key, m->hp.n_layer);
        return false;
    }
    for (uint32_t il = 0; il < m->hp.n_layer; il++)
        m->layers[il].sliding = gguf_kv_bool(kv, il);
    return true;
}

/* The sliding layers' head widths and rotated dimensions, which default to the global
 * layers'; each kind's key and value widths must agree, as llama.cpp requires. */
static bool read_head_widths(model_loader *ld, uint32_t *head_swa, uint32_t *n_rot_swa)
{
    hparams *hp = &ld->model->hp;
    uint32_t value_swa = hp->head_dim_v;
    *head_swa = hp->head_dim_k;
    *n_rot_swa = hp->n_rot;
    if (!model_read_u32(ld, "attention.key_length_swa", head_swa, false) ||
        !model_read_u32(ld, "attention.value_length_swa", &value_swa, false) ||
        !model_read_u32(ld, "rope.dimension_count_swa", n_rot_swa, false))
        return false;
    if (hp->head_dim_k != hp->head_dim_v || *head_swa != value_swa || *head_swa == 0 ||
        *n_rot_swa > *head_swa || *n_rot_swa % 2 != 0 || *n_rot_swa > hp->n_rot) {
        corral_error_set(ld->err, "%s: inconsistent gemma4 head widths (global key %u, value %u, rope %u; sliding key %u, value %u, rope %u)",
                         gguf_path(ld->model->file), hp->head_dim_k, hp->head_dim_v, hp->n_rot,
                         *head_swa, value_swa, *n_rot_swa);
        return false;
    }
    return true;
}

/* 26B-A4B's experts: their width (they run on every layer, beside the dense FFN). */
static bool read_experts(model_loader *ld)
{
    hparams *hp = &ld->model->hp;
    return hp->n_expert == 0 ||
           model_read_u32(ld, "expert_feed_forward_length", &hp->n_ff_exp, true);
}

/*
 * The last n_shared layers reuse the cache of the last layer before them of their own kind,
 * as llama.cpp maps them (the one before the first shared layer for a global layer, the one
 * before that for a sliding one); that layer must have the same kind and heads.
 */
bool gemma4_share_kv_layers(model_loader *ld, uint32_t n_shared)
{
    corral_model *m = ld->model;
    uint32_t n_layer = m->hp.n_layer;
    if (n_shared == 0)
        return true;
    if (n_layer < 2 || n_shared > n_layer - 2) {
        corral_error_set(ld->err, "%s: %u shared KV layers of %u leave fewer than two with a cache",
                         gguf_path(m->file), n_shared, n_layer);
        return false;
    }
    uint32_t first_shared = n_layer - n_shared;
    for (uint32_t il = first_shared; il < n_layer; il++) {
        layer_weights *l = &m->layers[il];
        uint32_t src = first_shared - (l->sliding ? 2 : 1);
        const layer_weights *s = &m->layers[src];
        if (s->sliding != l->sliding || s->head_dim_k != l->head_dim_k ||
            s->n_head_kv != l->n_head_kv) {
            corral_error_set(ld->err, "%s: shared KV layer %u would read layer %u's cache, which is of another kind",
                             gguf_path(m->file), il, src);
            return false;
        }
        l->kv_shared = true;
        l->kv_source = src;
    }
    return true;
}

/* The per-layer token inputs' global tensors (hp.n_embd_per_layer > 0). */
static bool bind_per_layer_inputs(model_loader *ld)
{
    corral_model *m = ld->model;
    const hparams *hp = &m->hp;
    size_t P = hp->n_embd_per_layer, all = P * hp->n_layer;
    if (P == 0)
        return true;
    if (P > hp->n_embd) {
        corral_error_set(ld->err, "%s: per-layer inputs of %zu values are wider than the embedding (%u)",
                         gguf_path(m->file), P, hp->n_embd);
        return false;
    }
    return model_bind_matrix(ld, &m->per_layer_tok_embd, "per_layer_token_embd.weight", all,
                             hp->n_vocab, 1, true) &&
           model_bind_matrix(ld, &m->per_layer_model_proj, "per_layer_model_proj.weight",
                             hp->n_embd, all, 1, true) &&
           model_bind_vector(ld, &m->per_layer_proj_norm, "per_layer_proj_norm.weight", P, true);
}

static bool gemma4_hparams(model_loader *ld)
{
    corral_model *m = ld->model;
    hparams *hp = &m->hp;
    uint32_t head_swa, n_rot_swa, *n_head_kv = NULL, *n_ff = NULL;
    float freq_base_swa = 10000.0f; /* llama.cpp's defaults */
    hp->final_softcap = 30.0f;
    uint32_t n_shared = 0;
    bool ok = read_experts(ld) && read_sliding_pattern(ld) &&
              model_read_u32(ld, "attention.sliding_window", &hp->n_swa, true) &&
              model_read_u32(ld, "embedding_length_per_layer_input", &hp->n_embd_per_layer,
                             false) &&
              model_read_u32(ld, "attention.shared_kv_layers", &n_shared, false) &&
              model_read_f32(ld, "rope.freq_base_swa", &freq_base_swa, false) &&
              model_read_f32(ld, "final_logit_softcapping", &hp->final_softcap, false) &&
              read_head_widths(ld, &head_swa, &n_rot_swa);
    if (ok) {
        n_head_kv = calloc(hp->n_layer, sizeof *n_head_kv);
        n_ff = calloc(hp->n_layer, sizeof *n_ff);
        if (!n_head_kv || !n_ff) {
            corral_error_set(ld->err, "out of memory");
            ok = false;
        }
    }
    if (ok) {
        for (uint32_t il = 0; il < hp->n_layer; il++) {
            n_head_kv[il] = hp->n_head_kv;
            n_ff[il] = hp->n_ff;
        }
        ok = model_read_u32_layers(ld, "attention.head_count_kv", n_head_kv, false) &&
             model_read_u32_layers(ld, "feed_forward_length", n_ff, true);
    }
    for (uint32_t il = 0; ok && il < hp->n_layer; il++) {
        layer_weights *l = &m->layers[il];
        if (n_head_kv[il] == 0 || hp->n_head % n_head_kv[il] != 0 || n_ff[il] == 0) {
            corral_error_set(ld->err, "%s: layer %u has %u KV heads for %u heads and an FFN of %u",
                             gguf_path(m->file), il, n_head_kv[il], hp->n_head, n_ff[il]);
            ok = false;
            break;
        }
        l->n_head_kv = n_head_kv[il];
        l->n_ff = n_ff[il];
        l->head_dim_k = l->head_dim_v = l->sliding ? head_swa : hp->head_dim_k;
        l->rope_variant = l->sliding ? 1 : 0;
    }
    free(n_head_kv);
    free(n_ff);
    if (!ok || !gemma4_share_kv_layers(ld, n_shared) || !bind_per_layer_inputs(ld))
        return false;
    /* hp holds the widest of each, which the context sizes its scratch by */
    if (head_swa > hp->head_dim_k)
        hp->head_dim_k = hp->head_dim_v = head_swa;
    m->rope[1] = (rope_variant){.freq_base = freq_base_swa, .freq_scale = 1.0f,
                                .n_rot = n_rot_swa, .no_freq_factors = true};
    m->n_rope_variants = 2;
    hp->embd_scale = sqrtf((float)hp->n_embd);
    hp->q_scale = 1.0f;
    hp->kq_scale = 1.0f;
    /* an image's tokens see each other both ways (llama.cpp decodes a gemma4v image's batch
     * without causality); its rows go in unscaled and take token 0's per-layer inputs */
    hp->image_bidirectional = true;
    return true;
}

/* A layer's attention tensors at its own widths: q/k/v fused or not, v optional, k and its
 * norm too on a shared KV layer (which computes neither); and its per-layer input branch. */
static bool gemma4_bind_attention(model_loader *ld, uint32_t il)
{
    const hparams *hp = &ld->model->hp;
    layer_weights *l = &ld->model->layers[il];
    size_t E = hp->n_embd, d = l->head_dim_k, P = hp->n_embd_per_layer;
    bool own_kv = !l->kv_shared;
    size_t q_width = (size_t)hp->n_head * d, kv_width = (size_t)l->n_head_kv * d;
    char name[GGUF_MAX_NAME_BYTES + 1];
#define NAME(suffix) (snprintf(name, sizeof name, "blk.%u." suffix, il), name)
    if (gguf_find_tensor(ld->model->file, NAME("attn_qkv.weight"))) {
        weight qkv;
        if (!model_bind_matrix(ld, &qkv, name, E, q_width + 2 * kv_width, 1, true))
            return false;
        size_t row = qkv.row_bytes;
        l->wq = l->wk = l->wv = qkv;
        l->wq.n_out = q_width;
        l->wk.data = (const uint8_t *)qkv.data + q_width * row;
        l->wk.n_out = kv_width;
        l->wv.data = (const uint8_t *)qkv.data + (q_width + kv_width) * row;
        l->wv.n_out = kv_width;
    } else if (!model_bind_matrix(ld, &l->wq, NAME("attn_q.weight"), E, q_width, 1, true) ||
               !model_bind_matrix(ld, &l->wk, NAME("attn_k.weight"), E, kv_width, 1, own_kv) ||
               !model_bind_matrix(ld, &l->wv, NAME("attn_v.weight"), E, kv_width, 1, false)) {
        return false;
    }
    return model_bind_vector(ld, &l->attn_norm, NAME("attn_norm.weight"), E, true) &&
           model_bind_matrix(ld, &l->wo, NAME("attn_output.weight"), q_width, E, 1, true) &&
           model_bind_vector(ld, &l->q_norm, NAME("attn_q_norm.weight"), d, true) &&
           model_bind_vector(ld, &l->k_norm, NAME("attn_k_norm.weight"), d, own_kv) &&
           model_bind_vector(ld, &l->post_attn_norm, NAME("post_attention_norm.weight"), E,
                             true) &&
           model_bind_vector(ld, &l->out_scale, NAME("layer_output_scale.weight"), 1, false) &&
           (P == 0 ||
            (model_bind_matrix(ld, &l->inp_gate, NAME("inp_gate.weight"), E, P, 1, true) &&
             model_bind_matrix(ld, &l->per_layer_proj, NAME("proj.weight"), P, E, 1, true) &&
             model_bind_vector(ld, &l->per_layer_post_norm, NAME("post_norm.weight"), E, true)));
#undef NAME
}

/*
 * A layer's experts beside its dense FFN: the router (ffn_gate_inp, with its per-channel
 * input scale), the experts' input norm and both branches' output norms, the experts as
 * separate gate and up or as one ffn_gate_up_exps (per expert its gate rows, then its up
 * rows), and an optional scale of each expert's output.
 */
static bool gemma4_bind_moe(model_loader *ld, uint32_t il)
{
    const hparams *hp = &ld->model->hp;
    layer_weights *l = &ld->model->layers[il];
    size_t E = hp->n_embd, F = hp->n_ff_exp, n = hp->n_expert;
    char name[GGUF_MAX_NAME_BYTES + 1];
#define NAME(suffix) (snprintf(name, sizeof name, "blk.%u." suffix, il), name)
    bool ok = model_bind_matrix(ld, &l->ffn_gate_inp, NAME("ffn_gate_inp.weight"), E, n, 1, true) &&
              model_bind_vector(ld, &l->ffn_gate_inp_s, NAME("ffn_gate_inp.scale"), E, true) &&
              model_bind_vector(ld, &l->ffn_pre_norm_2, NAME("pre_ffw_norm_2.weight"), E, true) &&
              model_bind_vector(ld, &l->ffn_post_norm_1, NAME("post_ffw_norm_1.weight"), E, true) &&
              model_bind_vector(ld, &l->ffn_post_norm_2, NAME("post_ffw_norm_2.weight"), E, true) &&
              model_bind_vector(ld, &l->ffn_down_exps_s, NAME("ffn_down_exps.scale"), n, false) &&
              /* ollama's files name the experts' output scales so */
              (l->ffn_down_exps_s.data ||
               model_bind_vector(ld, &l->ffn_down_exps_s, NAME("ffn_gate_inp.per_expert_scale"),
                                 n, false)) &&
              model_bind_matrix(ld, &l->ffn_down_exps, NAME("ffn_down_exps.weight"), F, E, n, true);
    if (!ok)
        return false;
    if (!gguf_find_tensor(ld->model->file, NAME("ffn_gate_up_exps.weight")))
        return model_bind_matrix(ld, &l->ffn_gate_exps, NAME("ffn_gate_exps.weight"), E, F, n,
                                 true) &&
               model_bind_matrix(ld, &l->ffn_up_exps, NAME("ffn_up_exps.weight"), E, F, n, true);
    weight both;
    if (!model_bind_matrix(ld, &both, name, E, 2 * F, n, true))
        return false;
    l->gate_exps_rows = calloc(n, sizeof *l->gate_exps_rows);
    l->up_exps_rows = calloc(n, sizeof *l->up_exps_rows);
    if (!l->gate_exps_rows || !l->up_exps_rows) {
        corral_error_set(ld->err, "out of memory");
        return false;
    }
    for (size_t e = 0; e < n; e++) {
        l->gate_exps_rows[e] = (const uint8_t *)both.data + e * 2 * F * both.row_bytes;
        l->up_exps_rows[e] = (const uint8_t *)both.data + (e * 2 + 1) * F * both.row_bytes;
    }
    l->ffn_gate_exps = l->ffn_up_exps = both;
    l->ffn_gate_exps.n_out = l->ffn_up_exps.n_out = F * n;
    return true;
#undef NAME
}

/* ctx->xn becomes layer il's attention over ctx->xn. */
void gemma4_attention(corral_context *ctx, uint32_t il)
{
    const hparams *hp = &ctx->model->hp;
    const layer_weights *l = &ctx->model->layers[il];
    size_t n = ctx->n_tokens, d = l->head_dim_k;
    size_t q_width = (size_t)hp->n_head * d, kv_width = (size_t)l->n_head_kv * d;
    matrix_product products[3] = {forward_layer_product(ctx, il, LM_WQ, &l->wq, ctx->q),
                                  forward_layer_product(ctx, il, LM_WK, &l->wk, ctx->k),
                                  forward_layer_product(ctx, il, LM_WV, &l->wv, ctx->v)};
    bool own_kv = !l->kv_shared; /* else q alone: the keys and values are in the cache */
    forward_matmul(ctx, products, !own_kv ? 1 : l->wv.data ? 3 : 2, ctx->xn, n);
    if (own_kv && !l->wv.data) /* the keys as they leave the projection serve as values */
        memcpy(ctx->v, ctx->k, n * kv_width * sizeof(float));
    const rope_params *rope = &ctx->rope[l->rope_variant];
    for (size_t t = 0; t < n; t++) {
        float *q = ctx->q + t * q_width, *k = ctx->k + t * kv_width, *v = ctx->v + t * kv_width;
        for (size_t h = 0; h < hp->n_head; h++)
            block_rmsnorm(q + h * d, l->q_norm.data, d, hp->norm_eps, q + h * d);
        for (size_t h = 0; h < l->n_head_kv && own_kv; h++) {
            block_rmsnorm(k + h * d, l->k_norm.data, d, hp->norm_eps, k + h * d);
            block_rmsnorm(v + h * d, NULL, d, hp->norm_eps, v + h * d);
        }
        const float *cs = ctx->rope_cs[l->rope_variant] + t * hp->n_rot;
        rope_apply(rope, cs, q, hp->n_head, d);
        if (own_kv)
            rope_apply(rope, cs, k, l->n_head_kv, d);
    }
    forward_attend(ctx, il);
    const matrix_product wo = forward_layer_product(ctx, il, LM_WO, &l->wo, ctx->xn);
    forward_matmul(ctx, &wo, 1, ctx->attn, n);
}

/*
 * Before the first layer, while ctx->x holds the scaled embeddings: each token's inputs of
 * every layer, (norm(proj . x / sqrt(E)) + its row of per_layer_token_embd * sqrt(P)) / sqrt(2),
 * the norm over each layer's P values.
 */
void gemma4_per_layer_inputs(corral_context *ctx)
{
    const corral_model *m = ctx->model;
    const hparams *hp = &m->hp;
    const weight *tok = &m->per_layer_tok_embd;
    size_t n = ctx->n_tokens, P = hp->n_embd_per_layer, all = P * hp->n_layer;
    const matrix_product proj = {&m->per_layer_model_proj, NULL, 0, ctx->per_layer_in};
    forward_matmul(ctx, &proj, 1, ctx->x, n);
    float proj_scale = 1.0f / sqrtf((float)hp->n_embd), tok_scale = sqrtf((float)P);
    float mix = 1.0f / sqrtf(2.0f);
    float *row = ctx->per_layer_gate; /* free until the first layer's branch */
    for (size_t t = 0; t < n; t++) {
        float *in = ctx->per_layer_in + t * all;
        for (size_t i = 0; i < all; i++)
            in[i] *= proj_scale;
        for (size_t at = 0; at < all; at += P)
            block_rmsnorm(in + at, m->per_layer_proj_norm.data, P, hp->norm_eps, in + at);
        tok->ops->dequantize((const uint8_t *)tok->data + (size_t)ctx->tok_id[t] * tok->row_bytes,
                             row, all);
        for (size_t i = 0; i < all; i++)
            in[i] = (in[i] + row[i] * tok_scale) * mix;
    }
}

/* ctx->xn = norm(per_layer_proj . (gelu(inp_gate . in) * the layer's inputs)) */
void gemma4_per_layer_branch(corral_context *ctx, uint32_t il, const float *in)
{
    const hparams *hp = &ctx->model->hp;
    const layer_weights *l = &ctx->model->layers[il];
    size_t n = ctx->n_tokens, P = hp->n_embd_per_layer, all = P * hp->n_layer;
    const matrix_product gate = {&l->inp_gate, NULL, 0, ctx->per_layer_gate};
    forward_matmul(ctx, &gate, 1, in, n);
    block_gelu(ctx->per_layer_gate, n * P);
    for (size_t t = 0; t < n; t++) {
        float *g = ctx->per_layer_gate + t * P;
        const float *in = ctx->per_layer_in + t * all + il * P;
        for (size_t i = 0; i < P; i++)
            g[i] *= in[i];
    }
    const matrix_product proj = {&l->per_layer_proj, NULL, 0, ctx->xn};
    forward_matmul(ctx, &proj, 1, ctx->per_layer_gate, n);
    forward_rmsnorm(ctx, &l->per_layer_post_norm, ctx->xn, ctx->xn);
}

/*
 * ctx->xn becomes the FFN of a layer with experts over ctx->x (the attention's residual):
 * post_norm_1(dense(ffn_norm(x))) + post_norm_2(experts(pre_norm_2(x))), the router reading
 * rms(x) / sqrt(E) * its input scale.
 */
static void ffn_with_experts(corral_context *ctx, uint32_t il)
{
    const hparams *hp = &ctx->model->hp;
    const layer_weights *l = &ctx->model->layers[il];
    size_t n = ctx->n_tokens, E = hp->n_embd;
    float *dense = ctx->branch, *router_in = ctx->branch + (size_t)ctx->n_batch * E;
    forward_rmsnorm(ctx, &l->ffn_norm, ctx->x, ctx->xn);
    forward_ffn_dense(ctx, il);
    forward_rmsnorm(ctx, &l->ffn_post_norm_1, ctx->xn, dense);
    const float *scale = l->ffn_gate_inp_s.data;
    float inv_sqrt_e = 1.0f / sqrtf((float)E);
    for (size_t t = 0; t < n; t++) {
        float *r = router_in + t * E;
        block_rmsnorm(ctx->x + t * E, NULL, E, hp->norm_eps, r);
        for (size_t i = 0; i < E; i++)
            r[i] = r[i] * inv_sqrt_e * scale[i];
    }
    forward_rmsnorm(ctx, &l->ffn_pre_norm_2, ctx->x, ctx->xn);
    forward_moe_routed(ctx, il, router_in);
    forward_rmsnorm(ctx, &l->ffn_post_norm_2, ctx->xn, ctx->xn);
    for (size_t i = 0; i < n * E; i++)
        ctx->xn[i] = dense[i] + ctx->xn[i];
}

static void layer_gemma4(corral_context *ctx, uint32_t il)
{
    const layer_weights *l = &ctx->model->layers[il];
    if (il == 0 && ctx->per_layer_in)
        gemma4_per_layer_inputs(ctx);
    forward_rmsnorm(ctx, &l->attn_norm, ctx->x, ctx->xn);
    gemma4_attention(ctx, il);
    forward_rmsnorm(ctx, &l->post_attn_norm, ctx->xn, ctx->xn);
    forward_residual(ctx);
    if (l->ffn_gate_inp.data) {
        ffn_with_experts(ctx, il);
    } else {
        forward_rmsnorm(ctx, &l->ffn_norm, ctx->x, ctx->xn);
        forward_ffn(ctx, il);
    }
    forward_rmsnorm(ctx, &l->post_ffn_norm, ctx->xn, ctx->xn);
    forward_residual(ctx);
    if (ctx->per_layer_in) { /* x += norm(per_layer_proj . (gelu(inp_gate . x) * inputs)) */
        gemma4_per_layer_branch(ctx, il, ctx->x);
        forward_residual(ctx);
    }
    if (l->out_scale.data) {
        float scale = *(const float *)l->out_scale.data;
        for (size_t i = 0; i < ctx->n_tokens * ctx->model->hp.n_embd; i++)
            ctx->x[i] *= scale;
    }
}

const model_arch arch_gemma4 = {
    .name = "gemma4",
    .rope = ROPE_NEOX,
    .ffn = FFN_GEGLU,
    .tensors = ARCH_POST_NORMS | ARCH_PER_LAYER_WIDTHS | ARCH_DENSE_AND_EXPERTS,
    .read_hparams = gemma4_hparams,
    .layer = layer_gemma4,
    .bind_attention = gemma4_bind_attention,
    .bind_moe = gemma4_bind_moe,
};

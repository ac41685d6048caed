/*
 * gemma3n (Gemma 3n E2B and E4B, text only): gemma4's attention (q and k normed per head with
 * weights, v without, q . k unscaled), its per-layer token inputs and its shared KV layers,
 * inside AltUp. Each token's state is n_altup streams (altup.num_inputs, 4): the embedding
 * times sqrt(E) and n_altup - 1 projections of it (altup_proj) rescaled to its magnitude.
 * Every layer predicts all streams from all of them with coefficients a router makes of the
 * active stream (stream 0), runs the active prediction through a block, and corrects every
 * stream by the block's innovation with coefficients the router makes of the block's output;
 * the per-layer input branch, on the corrected active stream, is added to the others. The
 * block: a laurel branch (x + norm(laurel_r . laurel_l . x), x the normed input) beside the
 * attention, the two averaged by 1/sqrt(2) with the attention's residual; then the sandwiched
 * GEGLU FFN, whose gate on the layers activation_sparsity_scale names keeps only what exceeds
 * its mean by that many standard deviations. After the last layer the extra streams come back
 * through altup_unembd_proj, rescaled to the active stream's magnitude, and the n_altup are
 * averaged. Sliding layers per attention.sliding_window_pattern with rope.freq_base_swa (or
 * ollama's rope.freq_base_local); the
 * logits soft-capped at final_logit_softcapping (30).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "forward.h"

/* llama.cpp's for what the file does not say: the streams, the per-layer input width, the
 * sliding period, the layers with a cache of their own, the sparse layers and their cutoff
 * (the normal distribution's 95th percentile). */
enum { GEMMA3N_ALTUP = 4, GEMMA3N_PER_LAYER = 256, GEMMA3N_SWA_PERIOD = 5,
       GEMMA3N_KV_LAYERS = 20, GEMMA3N_SPARSE_LAYERS = 10 };
static const float gemma3n_sparsity_std_mul = 1.6448533535003662f;
/* The most streams a file may ask for (the converter writes 4). */
enum { GEMMA3N_MAX_ALTUP = 16 };

/* Sliding layers: a bool per layer as the converter writes them, or one period (the last
 * layer of each period global, as llama.cpp reads a number; 0: every layer sliding). */
static bool read_sliding_layers(model_loader *ld)
{
    corral_model *m = ld->model;
    const char *key = "gemma3n.attention.sliding_window_pattern";
    const gguf_kv *kv = gguf_find_kv(m->file, key);
    if (kv && kv->type == GGUF_TYPE_ARRAY) {
        if (kv->elem_type != GGUF_TYPE_BOOL || kv->n != m->hp.n_layer) {
            corral_error_set(ld->err, "%s: '%s' must be one period or one bool for each of the %u layers",
                             gguf_path(m->file), key, m->hp.n_layer);
            return false;
        }
        for (uint32_t il = 0; il < m->hp.n_layer; il++)
            m->layers[il].sliding = gguf_kv_bool(kv, il);
        return true;
    }
    uint32_t period = GEMMA3N_SWA_PERIOD;
    if (!model_read_u32(ld, "attention.sliding_window_pattern", &period, false))
        return false;
    for (uint32_t il = 0; il < m->hp.n_layer; il++)
        m->layers[il].sliding = period == 0 || il % period < period - 1;
    return true;
}

/* activation_sparsity_scale: per layer the cutoff's standard deviations, -inf where the gate
 * is dense (the converter's normal quantile of a sparsity of 0). */
static bool read_sparsity(model_loader *ld)
{
    corral_model *m = ld->model;
    const char *key = "gemma3n.activation_sparsity_scale";
    const gguf_kv *kv = gguf_find_kv(m->file, key);
    if (!kv) {
        for (uint32_t il = 0; il < m->hp.n_layer && il < GEMMA3N_SPARSE_LAYERS; il++) {
            m->layers[il].sparse_gate = true;
            m->layers[il].sparsity_std_mul = gemma3n_sparsity_std_mul;
        }
        return true;
    }
    bool ok = kv->type == GGUF_TYPE_ARRAY && kv->n == m->hp.n_layer &&
              (kv->elem_type == GGUF_TYPE_FLOAT32 || kv->elem_type == GGUF_TYPE_FLOAT64);
    for (uint32_t il = 0; ok && il < m->hp.n_layer; il++) {
        double s = gguf_kv_f64(kv, il);
        ok = isfinite(s) || s == -INFINITY;
        m->layers[il].sparse_gate = isfinite(s);
        m->layers[il].sparsity_std_mul = isfinite(s) ? (float)s : 0.0f;
    }
    if (!ok)
        corral_error_set(ld->err, "%s: '%s' must hold one finite number or -inf for each of the %u layers",
                         gguf_path(m->file), key, m->hp.n_layer);
    return ok;
}

/* AltUp's streams, the per-layer inputs' width and the laurel rank (laurel_l's rows). */
static bool read_widths(model_loader *ld)
{
    corral_model *m = ld->model;
    hparams *hp = &m->hp;
    uint32_t active = 0;
    hp->n_altup = GEMMA3N_ALTUP;
    hp->n_embd_per_layer = GEMMA3N_PER_LAYER;
    if (!model_read_u32(ld, "altup.num_inputs", &hp->n_altup, false) ||
        !model_read_u32(ld, "altup.active_idx", &active, false) ||
        !model_read_u32(ld, "embedding_length_per_layer_input", &hp->n_embd_per_layer, false))
        return false;
    const gguf_tensor *laurel = gguf_find_tensor(m->file, "blk.0.laurel_l.weight");
    if (!laurel) {
        corral_error_set(ld->err, "%s: missing tensor 'blk.0.laurel_l.weight'", gguf_path(m->file));
        return false;
    }
    hp->laurel_rank = laurel->ne[1] > 0 && laurel->ne[1] <= UINT32_MAX ? (uint32_t)laurel->ne[1] : 0;
    /* llama.cpp's graph makes stream 0 the active one whatever the key says */
    if (hp->n_altup < 2 || hp->n_altup > GEMMA3N_MAX_ALTUP || active != 0 ||
        hp->n_embd_per_layer == 0 || hp->laurel_rank == 0) {
        corral_error_set(ld->err, "%s: inconsistent gemma3n widths (%u AltUp streams, at most %d, active %u; per-layer inputs %u; laurel rank %u)",
                         gguf_path(m->file), hp->n_altup, GEMMA3N_MAX_ALTUP, active,
                         hp->n_embd_per_layer, hp->laurel_rank);
        return false;
    }
    return true;
}

static bool gemma3n_hparams(model_loader *ld)
{
    corral_model *m = ld->model;
    hparams *hp = &m->hp;
    float freq_base_swa = 10000.0f;
    uint32_t n_shared = hp->n_layer > GEMMA3N_KV_LAYERS ? hp->n_layer - GEMMA3N_KV_LAYERS : 0;
    hp->final_softcap = 30.0f;
    if (!model_read_u32(ld, "attention.sliding_window", &hp->n_swa, true) ||
        /* ollama's converter names it rope.freq_base_local */
        !model_read_f32(ld, "rope.freq_base_local", &freq_base_swa, false) ||
        !model_read_f32(ld, "rope.freq_base_swa", &freq_base_swa, false) ||
        !model_read_f32(ld, "final_logit_softcapping", &hp->final_softcap, false) ||
        !model_read_u32(ld, "attention.shared_kv_layers", &n_shared, false) ||
        !read_widths(ld) || !read_sliding_layers(ld) || !read_sparsity(ld))
        return false;
    for (uint32_t il = 0; il < hp->n_layer; il++)
        m->layers[il].rope_variant = m->layers[il].sliding ? 1 : 0;
    if (!gemma4_share_kv_layers(ld, n_shared))
        return false;
    m->rope[0].no_freq_factors = true; /* llama.cpp rotates gemma3n without rope_freqs */
    m->rope[1] = (rope_variant){.freq_base = freq_base_swa, .freq_scale = 1.0f,
                                .no_freq_factors = true};
    m->n_rope_variants = 2;
    hp->embd_scale = sqrtf((float)hp->n_embd);
    hp->q_scale = 1.0f;
    hp->kq_scale = 1.0f;
    size_t E = hp->n_embd, all = (size_t)hp->n_embd_per_layer * hp->n_layer;
    return model_bind_matrix(ld, &m->altup_proj, "altup_proj.weight", E, E, hp->n_altup - 1,
                             true) &&
           model_bind_matrix(ld, &m->altup_unembd_proj, "altup_unembd_proj.weight", E, E,
                             hp->n_altup - 1, true) &&
           model_bind_matrix(ld, &m->per_layer_tok_embd, "per_layer_token_embd.weight", all,
                             hp->n_vocab, 1, true) &&
           model_bind_matrix(ld, &m->per_layer_model_proj, "per_layer_model_proj.weight", E,
                             all, 1, true) &&
           model_bind_vector(ld, &m->per_layer_proj_norm, "per_layer_proj_norm.weight",
                             hp->n_embd_per_layer, true);
}

/* A layer's attention (q, k and v on every layer, as llama.cpp requires them, though a shared
 * KV layer uses q alone), its AltUp, laurel and per-layer input tensors. */
static bool gemma3n_bind_attention(model_loader *ld, uint32_t il)
{
    const hparams *hp = &ld->model->hp;
    layer_weights *l = &ld->model->layers[il];
    size_t E = hp->n_embd, d = hp->head_dim_k, A = hp->n_altup, P = hp->n_embd_per_layer;
    size_t q_width = (size_t)hp->n_head * d, kv_width = (size_t)hp->n_head_kv * d;
    char name[GGUF_MAX_NAME_BYTES + 1];
#define NAME(suffix) (snprintf(name, sizeof name, "blk.%u." suffix, il), name)
    return model_bind_vector(ld, &l->attn_norm, NAME("attn_norm.weight"), E, true) &&
           model_bind_matrix(ld, &l->wq, NAME("attn_q.weight"), E, q_width, 1, true) &&
           model_bind_matrix(ld, &l->wk, NAME("attn_k.weight"), E, kv_width, 1, true) &&
           model_bind_matrix(ld, &l->wv, NAME("attn_v.weight"), E, kv_width, 1, true) &&
           model_bind_matrix(ld, &l->wo, NAME("attn_output.weight"), q_width, E, 1, true) &&
           model_bind_vector(ld, &l->q_norm, NAME("attn_q_norm.weight"), d, true) &&
           model_bind_vector(ld, &l->k_norm, NAME("attn_k_norm.weight"), d, true) &&
           model_bind_vector(ld, &l->post_attn_norm, NAME("post_attention_norm.weight"), E,
                             true) &&
           model_bind_matrix(ld, &l->inp_gate, NAME("inp_gate.weight"), E, P, 1, true) &&
           model_bind_matrix(ld, &l->per_layer_proj, NAME("proj.weight"), P, E, 1, true) &&
           model_bind_vector(ld, &l->per_layer_post_norm, NAME("post_norm.weight"), E, true) &&
           model_bind_matrix(ld, &l->altup_correct_coef, NAME("altup_correct_coef.weight"), A,
                             A, 1, true) &&
           model_bind_vector(ld, &l->altup_correct_scale, NAME("altup_correct_scale.weight"), E,
                             true) &&
           model_bind_matrix(ld, &l->altup_predict_coef, NAME("altup_predict_coef.weight"), A,
                             A * A, 1, true) &&
           model_bind_matrix(ld, &l->altup_router, NAME("altup_router.weight"), E, A, 1, true) &&
           model_bind_vector(ld, &l->altup_router_norm, NAME("altup_router_norm.weight"), E,
                             true) &&
           model_bind_matrix(ld, &l->laurel_l, NAME("laurel_l.weight"), E, hp->laurel_rank, 1,
                             true) &&
           model_bind_matrix(ld, &l->laurel_r, NAME("laurel_r.weight"), hp->laurel_rank, E, 1,
                             true) &&
           model_bind_vector(ld, &l->laurel_post_norm, NAME("laurel_post_norm.weight"), E, true);
#undef NAME
}

/* Stream s of a block of streams (ctx->altup or ctx->altup_pred). */
static float *stream(const corral_context *ctx, float *streams, size_t s)
{
    return streams + s * ctx->n_batch * ctx->model->hp.n_embd;
}

/* The Euclidean length of a row, summed in double as ggml's row sums are. */
static float magnitude(const float *x, size_t n)
{
    double sum = 0.0;
    for (size_t i = 0; i < n; i++)
        sum += (double)(x[i] * x[i]);
    return sqrtf((float)sum);
}

void gemma3n_match_magnitude(const float *target, float *y, size_t n)
{
    float want = magnitude(target, n), now = magnitude(y, n);
    for (size_t i = 0; i < n; i++)
        y[i] = y[i] * want / now;
}

/* y = slab s of a stack of [n_embd, n_embd] matrices (altup_proj, altup_unembd_proj) . x */
static void slab_product(corral_context *ctx, const weight *stack, size_t s, const float *x,
                         float *y)
{
    size_t E = ctx->model->hp.n_embd;
    weight slab = *stack;
    slab.data = (const uint8_t *)stack->data + s * E * stack->row_bytes;
    slab.n_out = E;
    const matrix_product p = {&slab, NULL, 0, y};
    forward_matmul(ctx, &p, 1, x, ctx->n_tokens);
}

void gemma3n_altup_streams(corral_context *ctx)
{
    const corral_model *m = ctx->model;
    size_t n = ctx->n_tokens, E = m->hp.n_embd;
    memcpy(ctx->altup, ctx->x, n * E * sizeof(float));
    for (size_t s = 1; s < m->hp.n_altup; s++) {
        float *y = stream(ctx, ctx->altup, s);
        slab_product(ctx, &m->altup_proj, s - 1, ctx->x, y);
        for (size_t t = 0; t < n; t++)
            gemma3n_match_magnitude(ctx->x + t * E, y + t * E, E);
    }
}

/* Per token, tanh(altup_router . (norm(x) / E)): the router's n_altup outputs, into out. */
static void router(corral_context *ctx, const layer_weights *l, const float *x, float *out)
{
    size_t n = ctx->n_tokens, E = ctx->model->hp.n_embd;
    forward_rmsnorm(ctx, &l->altup_router_norm, x, ctx->xn);
    float scale = 1.0f / (float)E;
    for (size_t i = 0; i < n * E; i++)
        ctx->xn[i] *= scale;
    const matrix_product p = {&l->altup_router, NULL, 0, out};
    forward_matmul(ctx, &p, 1, ctx->xn, n);
    for (size_t i = 0; i < n * ctx->model->hp.n_altup; i++)
        out[i] = tanhf(out[i]);
}

void gemma3n_altup_predict_rows(const float *streams, size_t stride, const float *coef,
                                size_t A, size_t E, size_t n, float *pred)
{
    for (size_t j = 0; j < A; j++)
        for (size_t t = 0; t < n; t++) {
            const float *c = coef + t * A * A + j * A;
            for (size_t e = t * E; e < (t + 1) * E; e++) {
                float sum = 0.0f;
                for (size_t i = 0; i < A; i++)
                    sum += streams[i * stride + e] * c[i];
                pred[j * stride + e] = sum + streams[j * stride + e];
            }
        }
}

/* ctx->altup_pred: the streams' predictions, with coefficients altup_predict_coef .
 * router(stream 0). */
static void altup_predict(corral_context *ctx, const layer_weights *l)
{
    size_t n = ctx->n_tokens, E = ctx->model->hp.n_embd, A = ctx->model->hp.n_altup;
    float *routed = ctx->altup_coef, *coef = ctx->altup_coef + ctx->n_batch * A;
    router(ctx, l, ctx->altup, routed);
    const matrix_product p = {&l->altup_predict_coef, NULL, 0, coef};
    forward_matmul(ctx, &p, 1, routed, n);
    gemma3n_altup_predict_rows(ctx->altup, ctx->n_batch * E, coef, A, E, n, ctx->altup_pred);
}

void gemma3n_altup_correct_rows(const float *x, const float *pred, size_t stride,
                                const float *coef, size_t A, size_t E, size_t n, float *streams)
{
    for (size_t j = 0; j < A; j++)
        for (size_t t = 0; t < n; t++) {
            float c = coef[t * A + j] + 1.0f;
            for (size_t i = t * E; i < (t + 1) * E; i++)
                streams[j * stride + i] = (x[i] - pred[i]) * c + pred[j * stride + i];
        }
}

/* The streams corrected by the block's output in ctx->x, with coefficients
 * altup_correct_coef . router(ctx->x). */
static void altup_correct(corral_context *ctx, const layer_weights *l)
{
    size_t n = ctx->n_tokens, E = ctx->model->hp.n_embd, A = ctx->model->hp.n_altup;
    float *routed = ctx->altup_coef, *coef = ctx->altup_coef + ctx->n_batch * A;
    router(ctx, l, ctx->x, routed);
    const matrix_product p = {&l->altup_correct_coef, NULL, 0, coef};
    forward_matmul(ctx, &p, 1, routed, n);
    gemma3n_altup_correct_rows(ctx->x, ctx->altup_pred, ctx->n_batch * E, coef, A, E, n,
                               ctx->altup);
}

/* ctx->branch = xn + norm(laurel_r . laurel_l . xn) */
static void laurel(corral_context *ctx, const layer_weights *l)
{
    size_t n = ctx->n_tokens, E = ctx->model->hp.n_embd;
    const matrix_product low = {&l->laurel_l, NULL, 0, ctx->laurel};
    forward_matmul(ctx, &low, 1, ctx->xn, n);
    const matrix_product back = {&l->laurel_r, NULL, 0, ctx->branch};
    forward_matmul(ctx, &back, 1, ctx->laurel, n);
    forward_rmsnorm(ctx, &l->laurel_post_norm, ctx->branch, ctx->branch);
    for (size_t i = 0; i < n * E; i++)
        ctx->branch[i] += ctx->xn[i];
}

void gemma3n_sparse_gate(float *x, size_t n, float std_mul)
{
    double sum = 0.0;
    for (size_t i = 0; i < n; i++)
        sum += x[i];
    float mean = (float)sum / (float)n;
    double squares = 0.0;
    for (size_t i = 0; i < n; i++) {
        float d = x[i] - mean;
        squares += (double)(d * d);
    }
    float cutoff = mean + sqrtf((float)squares * (1.0f / (float)(n - 1))) * std_mul;
    for (size_t i = 0; i < n; i++)
        x[i] = x[i] - cutoff > 0.0f ? x[i] - cutoff : 0.0f;
}

/* ctx->xn becomes layer il's GEGLU FFN over ctx->xn, its gate sparsified first where the
 * layer says. */
static void gemma3n_ffn(corral_context *ctx, uint32_t il)
{
    const layer_weights *l = &ctx->model->layers[il];
    size_t n = ctx->n_tokens, F = l->ffn_gate.n_out;
    if (!l->sparse_gate) {
        forward_ffn_dense(ctx, il);
        return;
    }
    const matrix_product gate_up[] = {
        forward_layer_product(ctx, il, LM_GATE, &l->ffn_gate, ctx->gate),
        forward_layer_product(ctx, il, LM_UP, &l->ffn_up, ctx->up)};
    forward_matmul(ctx, gate_up, 2, ctx->xn, n);
    for (size_t t = 0; t < n; t++)
        gemma3n_sparse_gate(ctx->gate + t * F, F, l->sparsity_std_mul);
    block_geglu(ctx->gate, ctx->up, n * F);
    const matrix_product down = forward_layer_product(ctx, il, LM_DOWN, &l->ffn_down, ctx->xn);
    forward_matmul(ctx, &down, 1, ctx->gate, n);
}

/* After the last layer: ctx->x = the mean of stream 0 and, for s > 0, altup_unembd_proj's
 * slab s - 1 . stream s rescaled to stream 0's magnitude. */
static void altup_merge(corral_context *ctx)
{
    const corral_model *m = ctx->model;
    size_t n = ctx->n_tokens, E = m->hp.n_embd, A = m->hp.n_altup;
    const float *active = ctx->altup;
    for (size_t s = 1; s < A; s++) /* the predictions are spent: their blocks take these */
        slab_product(ctx, &m->altup_unembd_proj, s - 1, stream(ctx, ctx->altup, s),
                     stream(ctx, ctx->altup_pred, s));
    float inv = 1.0f / (float)A;
    for (size_t t = 0; t < n; t++) {
        for (size_t s = 1; s < A; s++)
            gemma3n_match_magnitude(active + t * E, stream(ctx, ctx->altup_pred, s) + t * E, E);
        for (size_t i = 0; i < E; i++) {
            float sum = active[t * E + i];
            for (size_t s = 1; s < A; s++)
                sum += stream(ctx, ctx->altup_pred, s)[t * E + i];
            ctx->x[t * E + i] = sum * inv;
        }
    }
}

static void layer_gemma3n(corral_context *ctx, uint32_t il)
{
    const corral_model *m = ctx->model;
    const layer_weights *l = &m->layers[il];
    size_t n = ctx->n_tokens, E = m->hp.n_embd;
    if (il == 0) {
        gemma4_per_layer_inputs(ctx);
        gemma3n_altup_streams(ctx);
    }
    altup_predict(ctx, l);
    const float *active = ctx->altup_pred;
    forward_rmsnorm(ctx, &l->attn_norm, active, ctx->xn);
    laurel(ctx, l);
    gemma4_attention(ctx, il);
    forward_rmsnorm(ctx, &l->post_attn_norm, ctx->xn, ctx->xn);
    float mix = 1.0f / sqrtf(2.0f);
    for (size_t i = 0; i < n * E; i++)
        ctx->x[i] = (ctx->xn[i] + active[i] + ctx->branch[i]) * mix;
    forward_rmsnorm(ctx, &l->ffn_norm, ctx->x, ctx->xn);
    gemma3n_ffn(ctx, il);
    forward_rmsnorm(ctx, &l->post_ffn_norm, ctx->xn, ctx->xn);
    forward_residual(ctx);
    altup_correct(ctx, l);
    /* the per-layer input branch on the corrected active stream, added to the others */
    const float *scale = l->altup_correct_scale.data;
    for (size_t t = 0; t < n; t++)
        for (size_t i = 0; i < E; i++)
            ctx->xn[t * E + i] = ctx->altup[t * E + i] * scale[i];
    gemma4_per_layer_branch(ctx, il, ctx->xn);
    for (size_t s = 1; s < m->hp.n_altup; s++) {
        float *y = stream(ctx, ctx->altup, s);
        for (size_t i = 0; i < n * E; i++)
            y[i] += ctx->xn[i];
    }
    if (il + 1 == m->hp.n_layer)
        altup_merge(ctx);
}

const model_arch arch_gemma3n = {
    .name = "gemma3n",
    .rope = ROPE_NEOX,
    .ffn = FFN_GEGLU,
    .tensors = ARCH_POST_NORMS | ARCH_PER_LAYER_WIDTHS,
    .read_hparams = gemma3n_hparams,
    .layer = layer_gemma3n,
    .bind_attention = gemma3n_bind_attention,
};

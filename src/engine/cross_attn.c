/* Cross-attention to an image's states (cross_attn.h). */
#include "cross_attn.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "forward.h"

/* A sequence's image: per cross-attention layer (in layer order) its keys, K-normed, and its
 * values, n_rows rows of n_head_kv * head_dim each, in one allocation. */
typedef struct cross_image {
    float *kv;          /* NULL: no image */
    uint32_t n_rows, n_attended, at;
} cross_image;

struct cross_context {
    uint32_t n_layers;  /* cross-attention layers */
    uint32_t *index;    /* per model layer: its place among them */
    size_t row_floats;  /* a key's (or a value's) floats: n_head_kv * head_dim */
    cross_image *seq;
    uint32_t n_seq;
    float *scores;      /* per pool thread, scores_floats for a query's weights */
    size_t scores_floats, n_threads;
};

cross_context *cross_context_create(const corral_model *m, uint32_t n_seq, size_t n_threads,
                                    bool *ok, corral_error *err)
{
    *ok = true;
    uint32_t n = 0;
    for (uint32_t il = 0; il < m->hp.n_layer; il++)
        n += m->layers[il].cross_attn;
    if (n == 0)
        return NULL;
    cross_context *c = calloc(1, sizeof *c);
    if (c) {
        c->index = calloc(m->hp.n_layer, sizeof *c->index);
        c->seq = calloc(n_seq, sizeof *c->seq);
    }
    if (!c || !c->index || !c->seq) {
        cross_context_free(c);
        corral_error_set(err, "out of memory");
        *ok = false;
        return NULL;
    }
    c->n_layers = n;
    c->n_seq = n_seq;
    c->n_threads = n_threads;
    for (uint32_t il = 0, k = 0; il < m->hp.n_layer; il++)
        if (m->layers[il].cross_attn)
            c->index[il] = k++;
    c->row_floats = (size_t)m->hp.n_head_kv * m->hp.head_dim_k;
    return c;
}

void cross_context_free(cross_context *c)
{
    if (!c)
        return;
    for (uint32_t s = 0; c->seq && s < c->n_seq; s++)
        free(c->seq[s].kv);
    free(c->seq);
    free(c->index);
    free(c->scores);
    free(c);
}

static void drop(cross_image *img)
{
    free(img->kv);
    *img = (cross_image){0};
}

void cross_seq_truncate(cross_context *c, uint32_t seq, uint32_t n_keep)
{
    if (c && c->seq[seq].kv && c->seq[seq].at >= n_keep)
        drop(&c->seq[seq]);
}

void cross_seq_shift(cross_context *c, uint32_t seq, uint32_t n_keep, uint32_t n_discard)
{
    cross_image *img = c ? &c->seq[seq] : NULL;
    if (!img || !img->kv || img->at < n_keep)
        return;
    if (img->at < n_keep + n_discard)
        drop(img);
    else
        img->at -= n_discard;
}

bool cross_any_image(const cross_context *c)
{
    for (uint32_t s = 0; c && s < c->n_seq; s++)
        if (c->seq[s].kv)
            return true;
    return false;
}

/* The keys (K-normed per head) and values of cross-attention layer il for rows, in chunks of
 * the context's batch (its scratch holds that many rows). */
static void project_rows(corral_context *ctx, uint32_t il, const float *rows, uint32_t n_rows,
                         float *keys, float *values)
{
    const hparams *hp = &ctx->model->hp;
    const layer_weights *l = &ctx->model->layers[il];
    size_t E = hp->n_embd, D = l->head_dim_k, width = (size_t)l->n_head_kv * D;
    for (uint32_t first = 0; first < n_rows; first += ctx->n_batch) {
        uint32_t n = n_rows - first < ctx->n_batch ? n_rows - first : ctx->n_batch;
        memcpy(ctx->xn, rows + (size_t)first * E, (size_t)n * E * sizeof *ctx->xn);
        const matrix_product kv[] = {forward_layer_product(ctx, il, LM_WK, &l->wk, ctx->k),
                                     forward_layer_product(ctx, il, LM_WV, &l->wv, ctx->v)};
        forward_matmul(ctx, kv, 2, ctx->xn, n);
        for (size_t r = 0; r < (size_t)n * l->n_head_kv; r++)
            block_rmsnorm(ctx->k + r * D, l->k_norm.data, D, hp->norm_eps, ctx->k + r * D);
        memcpy(keys + (size_t)first * width, ctx->k, (size_t)n * width * sizeof *keys);
        memcpy(values + (size_t)first * width, ctx->v, (size_t)n * width * sizeof *values);
    }
}

bool cross_seq_set_image(corral_context *ctx, uint32_t seq, const float *rows, uint32_t n_rows,
                         uint32_t n_attended, uint32_t at, corral_error *err)
{
    cross_context *c = ctx->cross;
    const corral_model *m = ctx->model;
    size_t floats = 2 * (size_t)n_rows * c->row_floats * c->n_layers; /* bounded: rows <= 65536 */
    float *kv = malloc(floats * sizeof *kv);
    if (c->scores_floats < n_rows) {
        float *scores = malloc(c->n_threads * n_rows * sizeof *scores);
        if (scores) {
            free(c->scores);
            c->scores = scores;
            c->scores_floats = n_rows;
        }
    }
    if (!kv || c->scores_floats < n_rows) {
        free(kv);
        corral_error_set(err, "out of memory for an image's %u cross-attention rows", n_rows);
        return false;
    }
    size_t layer_floats = 2 * (size_t)n_rows * c->row_floats;
    for (uint32_t il = 0; il < m->hp.n_layer; il++)
        if (m->layers[il].cross_attn) {
            float *keys = kv + c->index[il] * layer_floats;
            project_rows(ctx, il, rows, n_rows, keys, keys + (size_t)n_rows * c->row_floats);
        }
    drop(&c->seq[seq]);
    c->seq[seq] = (cross_image){kv, n_rows, n_attended, at};
    return true;
}

/* The tokens of a batch that see an image, and the attention over it. */
typedef struct cross_job {
    corral_context *ctx;
    uint32_t il;
} cross_job;

/* Task (token t, query head h): the weights of the image's rows the token sees, then their
 * values into ctx->attn; a token whose sequence has no image is left alone. */
static void cross_task(void *arg, size_t task, size_t thread)
{
    const cross_job *job = arg;
    corral_context *ctx = job->ctx;
    const cross_context *c = ctx->cross;
    const layer_weights *l = &ctx->model->layers[job->il];
    size_t H = l->n_head, D = l->head_dim_k, t = task / H, h = task % H;
    const cross_image *img = &c->seq[ctx->tok_seq[t]];
    if (!img->kv)
        return;
    size_t width = c->row_floats, kv_head = h / (H / l->n_head_kv);
    const float *keys = img->kv + c->index[job->il] * 2 * (size_t)img->n_rows * width;
    const float *values = keys + (size_t)img->n_rows * width;
    uint32_t n = ctx->tok_pos[t] >= img->at ? img->n_attended : img->n_rows;
    const float *q = ctx->q + (t * H + h) * D;
    float *w = c->scores + thread * c->scores_floats, scale = 1.0f / sqrtf((float)D);
    float top = -INFINITY;
    for (uint32_t j = 0; j < n; j++) {
        const float *k = keys + j * width + kv_head * D;
        float s = 0.0f;
        for (size_t i = 0; i < D; i++)
            s += q[i] * k[i];
        w[j] = s * scale;
        top = w[j] > top ? w[j] : top;
    }
    float sum = 0.0f;
    for (uint32_t j = 0; j < n; j++) {
        w[j] = expf(w[j] - top);
        sum += w[j];
    }
    float *out = ctx->attn + (t * H + h) * D;
    memset(out, 0, D * sizeof *out);
    for (uint32_t j = 0; j < n; j++) {
        const float *v = values + j * width + kv_head * D;
        float p = w[j] / sum;
        for (size_t i = 0; i < D; i++)
            out[i] += p * v[i];
    }
}

void cross_attention_layer(corral_context *ctx, uint32_t il)
{
    const cross_context *c = ctx->cross;
    const hparams *hp = &ctx->model->hp;
    const layer_weights *l = &ctx->model->layers[il];
    size_t n = ctx->n_tokens, E = hp->n_embd, H = l->n_head, D = l->head_dim_k;
    bool any = false;
    for (size_t t = 0; t < n; t++)
        any = any || c->seq[ctx->tok_seq[t]].kv;
    if (!any)
        return;
    forward_rmsnorm(ctx, &l->attn_norm, ctx->x, ctx->xn);
    const matrix_product q = forward_layer_product(ctx, il, LM_WQ, &l->wq, ctx->q);
    forward_matmul(ctx, &q, 1, ctx->xn, n);
    for (size_t r = 0; r < n * H; r++)
        block_rmsnorm(ctx->q + r * D, l->q_norm.data, D, hp->norm_eps, ctx->q + r * D);
    cross_job job = {ctx, il};
    threadpool_run(ctx->pool, n * H, cross_task, &job);
    const matrix_product o = forward_layer_product(ctx, il, LM_WO, &l->wo, ctx->xn);
    forward_matmul(ctx, &o, 1, ctx->attn, n);
    float attn_gate = tanhf(*(const float *)l->xattn_gate.data);
    float mlp_gate = tanhf(*(const float *)l->xmlp_gate.data);
    for (size_t t = 0; t < n; t++)
        if (c->seq[ctx->tok_seq[t]].kv)
            for (size_t i = 0; i < E; i++)
                ctx->x[t * E + i] += attn_gate * ctx->xn[t * E + i];
    forward_rmsnorm(ctx, &l->ffn_norm, ctx->x, ctx->xn);
    forward_ffn(ctx, il);
    for (size_t t = 0; t < n; t++) {
        const cross_image *img = &c->seq[ctx->tok_seq[t]];
        if (img->kv && ctx->tok_pos[t] >= img->at)
            for (size_t i = 0; i < E; i++)
                ctx->x[t * E + i] += mlp_gate * ctx->xn[t * E + i];
    }
}

/*
 * Multi-head latent attention (mla.h), in the absorbed form: a position's cache row is
 * [k_rope | latent] (head_dim_k = n_rot + kv latent, one KV head) and its value row the
 * latent. A head's key is never formed: its query's non-rotated part goes through the head's
 * wk_b into latent space, so that query . [k_rope | latent] is the head's score, and the
 * attention's weighted sum of latents goes through the head's wv_b to become its values'
 * sum. Every head then attends to the one cached row per position, which the attention
 * steps (forward_attend) run as grouped-query attention with one KV head.
 */
#include "mla.h"

#include <stdlib.h>
#include <string.h>

#include "forward.h"
#include "util/checked.h"

struct mla_context {
    float *q_latent; /* per token, mla_q_lora: the normed q latent */
    float *q;        /* per token and head, mla_nope + n_rot: the query before absorption */
    float *kv;       /* per token, mla_kv_lora + n_rot: [latent | k_rope] as projected */
    float *out;      /* per token and head, mla_v: the values' weighted sum */
    /* per pool thread: one head's inputs for the batch, gathered, and quantized */
    float *gather;
    size_t gather_floats;
    char *act;
    size_t act_bytes;
};

static float *alloc_floats(size_t n, size_t m, bool *ok)
{
    size_t count, bytes;
    float *p = NULL;
    if (*ok && checked_mul_size(n ? n : 1, m ? m : 1, &count) &&
        checked_mul_size(count, sizeof(float), &bytes))
        p = calloc(1, bytes);
    *ok = *ok && p != NULL;
    return p;
}

static size_t max_size(size_t a, size_t b)
{
    return a > b ? a : b;
}

bool mla_context_init(corral_context *ctx, corral_error *err)
{
    const corral_model *m = ctx->model;
    const hparams *hp = &m->hp;
    if (hp->mla_kv_lora == 0)
        return true;
    mla_context *mla = calloc(1, sizeof *mla);
    if (!mla) {
        corral_error_set(err, "out of memory");
        return false;
    }
    ctx->mla = mla;
    size_t nb = ctx->n_batch, n_threads = threadpool_size(ctx->pool), act_row = 0;
    for (uint32_t il = 0; il < hp->n_layer; il++) {
        const layer_weights *l = &m->layers[il];
        act_row = max_size(act_row, quant_act_row_bytes(l->wk_b.type, l->wk_b.n_in));
        act_row = max_size(act_row, quant_act_row_bytes(l->wv_b.type, l->wv_b.n_in));
    }
    bool ok = act_row > 0;
    mla->q_latent = alloc_floats(nb, hp->mla_q_lora, &ok);
    mla->q = alloc_floats(nb, (size_t)hp->n_head * (hp->mla_nope + hp->n_rot), &ok);
    mla->kv = alloc_floats(nb, hp->mla_kv_lora + hp->n_rot, &ok);
    mla->out = alloc_floats(nb, (size_t)hp->n_head * hp->mla_v, &ok);
    mla->gather_floats = nb * max_size(hp->mla_nope, hp->mla_kv_lora);
    mla->gather = alloc_floats(mla->gather_floats, n_threads, &ok);
    size_t act_total = 0;
    ok = ok && checked_mul_size(act_row, nb, &mla->act_bytes) &&
         checked_mul_size(mla->act_bytes, n_threads, &act_total);
    if (ok)
        ok = (mla->act = malloc(act_total)) != NULL;
    if (!ok)
        corral_error_set(err, "cannot allocate the latent attention's activations for a batch of %u tokens",
                         ctx->n_batch);
    return ok;
}

void mla_context_free(mla_context *mla)
{
    if (!mla)
        return;
    free(mla->q_latent);
    free(mla->q);
    free(mla->kv);
    free(mla->out);
    free(mla->gather);
    free(mla->act);
    free(mla);
}

/* One head's rows of a per-head matrix (rows_per_head rows from row first_row of the head's
 * head_rows) times that head's part of every token's input: a task per head. */
typedef struct head_job {
    const mla_context *mla;
    const weight *w;
    size_t rows_per_head, head_rows, first_row;
    const float *x; /* head h's input of token t at x[t * ldx + h * x_head] */
    size_t ldx, x_head;
    float *y; /* its output at y[t * ldy + h * y_head] */
    size_t ldy, y_head;
    size_t n_tokens;
} head_job;

static void head_task(void *arg, size_t h, size_t thread)
{
    const head_job *job = arg;
    const weight *w = job->w;
    size_t n_in = w->n_in, n = job->n_tokens;
    float *gathered = job->mla->gather + thread * job->mla->gather_floats;
    char *act = job->mla->act + thread * job->mla->act_bytes;
    for (size_t t = 0; t < n; t++)
        memcpy(gathered + t * n_in, job->x + t * job->ldx + h * job->x_head,
               n_in * sizeof(float));
    quant_quantize_activations(w->ops, gathered, n_in, n, act);
    const char *rows =
        (const char *)w->data + (h * job->head_rows + job->first_row) * w->row_bytes;
    quant_matmul_rows(w->ops, rows, n_in, 0, job->rows_per_head, act, n,
                      job->y + h * job->y_head, job->ldy);
}

/* The query latent (or the query straight from x) and the key/value latent with k_rope. */
static void project(corral_context *ctx, uint32_t il)
{
    const hparams *hp = &ctx->model->hp;
    const layer_weights *l = &ctx->model->layers[il];
    mla_context *mla = ctx->mla;
    size_t n = ctx->n_tokens;
    const matrix_product kv = {&l->wkv_a, NULL, 0, mla->kv};
    if (!l->wq_a.data) {
        const matrix_product both[] = {
            forward_layer_product(ctx, il, LM_WQ, &l->wq, mla->q), kv};
        forward_matmul(ctx, both, 2, ctx->xn, n);
        return;
    }
    const matrix_product both[] = {{&l->wq_a, NULL, 0, mla->q_latent}, kv};
    forward_matmul(ctx, both, 2, ctx->xn, n);
    for (size_t t = 0; t < n; t++) {
        float *q = mla->q_latent + t * hp->mla_q_lora;
        block_rmsnorm(q, l->q_a_norm.data, hp->mla_q_lora, hp->norm_eps, q);
    }
    const matrix_product q = forward_layer_product(ctx, il, LM_WQ, &l->wq, mla->q);
    forward_matmul(ctx, &q, 1, mla->q_latent, n);
}

void forward_mla_attention(corral_context *ctx, uint32_t il)
{
    const hparams *hp = &ctx->model->hp;
    const layer_weights *l = &ctx->model->layers[il];
    mla_context *mla = ctx->mla;
    size_t n = ctx->n_tokens, H = hp->n_head, rot = hp->n_rot, nope = hp->mla_nope;
    size_t latent = hp->mla_kv_lora, dk = hp->head_dim_k, qk = nope + rot;
    project(ctx, il);

    /* the cache rows [k_rope | normed latent], the value rows (the latent), and each head's
     * rotated query part in front of where its absorbed part will go */
    const rope_params *rope = &ctx->rope[l->rope_variant];
    for (size_t t = 0; t < n; t++) {
        const float *kv = mla->kv + t * (latent + rot);
        float *k = ctx->k + t * dk, *q = ctx->q + t * H * dk;
        memcpy(k, kv + latent, rot * sizeof(float));
        block_rmsnorm(kv, l->kv_a_norm.data, latent, hp->norm_eps, k + rot);
        memcpy(ctx->v + t * latent, k + rot, latent * sizeof(float));
        for (size_t h = 0; h < H; h++)
            memcpy(q + h * dk, mla->q + (t * H + h) * qk + nope, rot * sizeof(float));
        if (!l->no_rope) {
            const float *cs = ctx->rope_cs[l->rope_variant] + t * rot;
            rope_apply(rope, cs, q, H, dk);
            rope_apply(rope, cs, k, 1, dk);
        }
    }
    head_job absorb = {.mla = mla,
                       .w = &l->wk_b,
                       .rows_per_head = latent,
                       .head_rows = latent,
                       .x = mla->q,
                       .ldx = H * qk,
                       .x_head = qk,
                       .y = ctx->q + rot,
                       .ldy = H * dk,
                       .y_head = dk,
                       .n_tokens = n};
    threadpool_run(ctx->pool, H, head_task, &absorb);

    forward_attend(ctx, il);

    size_t value_head_rows = l->wv_b.n_out / H; /* more than mla_v in a combined attn_kv_b */
    head_job values = {.mla = mla,
                       .w = &l->wv_b,
                       .rows_per_head = hp->mla_v,
                       .head_rows = value_head_rows,
                       .first_row = value_head_rows - hp->mla_v,
                       .x = ctx->attn,
                       .ldx = H * latent,
                       .x_head = latent,
                       .y = mla->out,
                       .ldy = H * hp->mla_v,
                       .y_head = hp->mla_v,
                       .n_tokens = n};
    threadpool_run(ctx->pool, H, head_task, &values);
    const matrix_product wo = forward_layer_product(ctx, il, LM_WO, &l->wo, ctx->xn);
    forward_matmul(ctx, &wo, 1, mla->out, n);
}

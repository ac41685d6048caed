/*
 * The mixture-of-experts FFN (moe.h). Routing follows llama.cpp's for these families: a
 * softmax over the router's logits, the n_expert_used most probable experts, their
 * probabilities renormalised to sum 1 (deepseek2's other routers: moe_route_scored). The
 * micro-batch's (token, expert) pairs are then grouped by expert, so each chosen expert's matrices stream once per micro-batch however
 * many tokens chose it (a prompt of 512 tokens routed 8 ways among 128 experts gives each
 * about 32): one pool job computes every chosen expert's gate and up with the SwiGLU, one its
 * down, and each token sums its experts' outputs in order of probability, as llama.cpp adds
 * them. Expert e of a matrix is rows [e * rows, (e + 1) * rows) of its 3-D tensor, or its
 * own 2-D tensor in older files. A shared expert, where a layer has one, runs on every token
 * and adds to that sum. Latent experts (Nemotron 3 Super) take the FFN input projected into
 * their latent and give a latent: the weighted sum is projected back before the shared
 * expert's output is added. gpt-oss (ARCH_EXPERT_BIASES) adds a bias to the router's logits,
 * weights its chosen experts by the softmax of their logits alone, adds each expert's biases
 * to its gate, up and down rows and gates with the clamped SwiGLU. nemotron_h_moe's experts
 * and shared expert have no gate: relu(up . x)² goes to down; nomic-bert-moe's experts have
 * none either, and gelu(up . x) goes to down.
 */
#include "moe.h"

#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "forward.h"
#include "util/checked.h"

enum moe_matrix { MOE_GATE, MOE_UP, MOE_DOWN, MOE_COUNT };

/* One kind of a layer's experts: the bound rows, and their packed copy when the level has
 * packed kernels for them, each expert cut in blocks of MATMUL_TASK_ROWS rows as the dense
 * copies are (forward.h). */
typedef struct expert_matrix {
    const weight *w;     /* all experts' rows */
    const void **expert_rows; /* where each expert's rows begin; NULL: in w, one after another */
    const expert_source *src; /* the file's own layout to pack from, when its data is set */
    size_t rows;         /* per expert */
    const char *packed;  /* NULL: the rows in the model's mapping */
    size_t block_bytes;  /* MATMUL_TASK_ROWS rows */
    size_t expert_bytes; /* one expert's blocks */
} expert_matrix;

/* The input of an expert job's products, one row per pair, quantized for a matrix. */
typedef struct pair_input {
    const void *act, *sums;
    size_t act_bytes, sums_bytes; /* per pair */
} pair_input;

struct moe_context {
    expert_matrix *mats; /* n_layer * MOE_COUNT */
    void *packed_memory;
    /* a micro-batch's routing, n_used slots per token */
    float *probs;           /* per token, n_expert router logits, then probabilities */
    uint32_t *chosen;       /* per token and slot, the expert, most probable first */
    float *weights;         /* per token and slot, renormalised */
    uint32_t *pair_of;      /* per token and slot, its pair */
    uint32_t *pair_token;   /* per pair, the token; the pairs grouped by expert */
    uint32_t *expert_first; /* n_expert + 1: expert e owns pairs [first[e], first[e + 1]) */
    uint32_t *cursor;       /* n_expert: scratch of the grouping */
    uint32_t *active;       /* the experts with pairs, in order */
    size_t n_active;
    /* per pair: the FFN input quantized for gate, then the SwiGLU quantized for down (act,
     * sums); the input for up where up takes another activation type (act_up, sums_up) */
    void *act, *sums, *act_up, *sums_up;
    float *gate, *up; /* n_ff_exp per pair */
    float *out;       /* per pair its expert's output (expert_width), or llama4's input */
    /* latent experts, per token: the FFN input projected into the latent, and the experts'
     * weighted sum (hp.moe_latent each) */
    float *latent_in, *latent_sum;
    /* per token: the shared expert's gate and up (n_ff_shexp), and its output (n_embd) */
    float *shared_gate, *shared_up, *shared_out;
};

/* ---- creation ---- */

/* Expert e's rows in the model's mapping. */
static const char *expert_data(const expert_matrix *mat, size_t e)
{
    if (mat->expert_rows)
        return mat->expert_rows[e];
    return (const char *)mat->w->data + e * mat->rows * mat->w->row_bytes;
}

static size_t max_size(size_t a, size_t b)
{
    return a > b ? a : b;
}

/* The width of the experts' input and output: the latent's, or n_embd. */
static size_t expert_width(const hparams *hp)
{
    return hp->moe_latent > 0 ? hp->moe_latent : hp->n_embd;
}

static void *alloc_array(size_t n, size_t size, bool *ok)
{
    void *p = NULL;
    if (*ok)
        p = calloc(n ? n : 1, size);
    *ok = *ok && p != NULL;
    return p;
}

/* Whether up needs its own quantized input: another activation type or other packed sums. */
static bool up_has_own_input(const expert_matrix *gate, const expert_matrix *up)
{
    const quant_ops *g = gate->w->ops, *u = up->w->ops;
    return g->quantize_act != u->quantize_act ||
           (up->packed && (!gate->packed || g->act_sums != u->act_sums));
}

/* The per-pair buffers, for the widest rows any layer quantizes. */
static bool alloc_pair_buffers(moe_context *moe, const corral_model *m, size_t n_pairs)
{
    const hparams *hp = &m->hp;
    size_t act = 0, act_up = 0, sums = 0, sums_up = 0;
    bool own_up = false;
    for (uint32_t il = 0; il < hp->n_layer; il++) {
        const expert_matrix *mats = &moe->mats[il * MOE_COUNT];
        if (!mats[MOE_DOWN].w->data)
            continue; /* a dense layer (deepseek2's leading ones) */
        for (size_t k = 0; k < MOE_COUNT; k++) {
            const weight *w = mats[k].w;
            if (!w->data)
                continue; /* the gate of ungated experts */
            size_t bytes = quant_act_row_bytes(w->type, w->n_in);
            if (bytes == 0)
                return false;
            act = max_size(act, bytes);
            sums = max_size(sums, quant_packed_sums_bytes(w->n_in));
        }
        if (mats[MOE_GATE].w->data && up_has_own_input(&mats[MOE_GATE], &mats[MOE_UP])) {
            own_up = true;
            const weight *w = mats[MOE_UP].w;
            act_up = max_size(act_up, quant_act_row_bytes(w->type, w->n_in));
            sums_up = max_size(sums_up, quant_packed_sums_bytes(w->n_in));
        }
    }
    /* out holds llama4's full-width inputs too */
    size_t act_total, sums_total, ff, embd, out_width = max_size(expert_width(hp), hp->n_embd);
    if (!checked_mul_size(act, n_pairs, &act_total) ||
        !checked_mul_size(sums, n_pairs, &sums_total) ||
        !checked_mul_size(hp->n_ff_exp, n_pairs, &ff) ||
        !checked_mul_size(out_width, n_pairs, &embd))
        return false;
    bool ok = true;
    moe->act = alloc_array(act_total, 1, &ok);
    moe->sums = alloc_array(sums_total, 1, &ok);
    if (own_up) {
        moe->act_up = alloc_array(act_up, n_pairs, &ok);
        moe->sums_up = alloc_array(sums_up, n_pairs, &ok);
    }
    moe->gate = alloc_array(ff, sizeof(float), &ok);
    moe->up = alloc_array(ff, sizeof(float), &ok);
    moe->out = alloc_array(embd, sizeof(float), &ok);
    return ok;
}

/* One expert of one matrix: task = (matrix, expert) over all packed matrices. */
typedef struct pack_job {
    const moe_context *moe;
    const size_t *packed_mats; /* indices into moe->mats of the packed ones */
    size_t n_expert;
    char *scratch; /* per thread, QUANT_PACK_ROWS rows converted from a source */
    size_t scratch_bytes;
} pack_job;

static void pack_task(void *arg, size_t task, size_t thread)
{
    const pack_job *job = arg;
    const expert_matrix *mat = &job->moe->mats[job->packed_mats[task / job->n_expert]];
    size_t e = task % job->n_expert;
    const weight *w = mat->w;
    const char *rows = expert_data(mat, e);
    char *to = (char *)mat->packed + e * mat->expert_bytes;
    if (mat->src->data) { /* a group of rows at a time through this thread's scratch */
        char *scratch = job->scratch + thread * job->scratch_bytes;
        for (size_t r = 0; r < mat->rows; r += QUANT_PACK_ROWS) {
            expert_source_rows(mat->src, w->row_bytes, e * mat->rows + r, QUANT_PACK_ROWS,
                               scratch);
            quant_pack_rows(w->ops, scratch, w->n_in, 0, QUANT_PACK_ROWS,
                            to + r / MATMUL_TASK_ROWS * mat->block_bytes +
                                r % MATMUL_TASK_ROWS * w->row_bytes);
        }
        return;
    }
    for (size_t b = 0; b < mat->rows; b += MATMUL_TASK_ROWS) {
        size_t n = mat->rows - b < MATMUL_TASK_ROWS ? mat->rows - b : MATMUL_TASK_ROWS;
        quant_pack_rows(w->ops, rows + b * w->row_bytes, w->n_in, 0, n,
                        to + b / MATMUL_TASK_ROWS * mat->block_bytes);
    }
}

/* The file's bytes of a source's rows, dropped once they are packed. */
static void release_source_pages(const expert_matrix *mat)
{
    size_t n = mat->w->n_out;
    if (n > 0)
        release_file_pages(mat->src->data, (n - 1) * mat->src->stride + mat->w->row_bytes);
}

/* The expert matrices of the level's packed kernels, copied in one allocation (converted
 * there from a file's own layout); the file's pages of those tensors are then released. */
static bool pack_experts(corral_context *ctx, moe_context *moe)
{
    const corral_model *m = ctx->model;
    size_t n_mats = (size_t)m->hp.n_layer * MOE_COUNT, n_packed = 0, total = 0, widest = 0;
    size_t *packed_mats = calloc(n_mats, sizeof *packed_mats);
    size_t *offset = calloc(n_mats, sizeof *offset);
    bool ok = packed_mats && offset;
    for (size_t i = 0; ok && i < n_mats; i++) {
        expert_matrix *mat = &moe->mats[i];
        if (!mat->w->data || !quant_packable(mat->w->ops, mat->w->n_in, mat->rows))
            continue;
        widest = max_size(widest, mat->src->data ? mat->w->row_bytes : 0);
        size_t blocks = (mat->rows + MATMUL_TASK_ROWS - 1) / MATMUL_TASK_ROWS, bytes;
        mat->block_bytes = MATMUL_TASK_ROWS * mat->w->row_bytes;
        ok = checked_mul_size(blocks, mat->block_bytes, &mat->expert_bytes) &&
             checked_mul_size(mat->expert_bytes, m->hp.n_expert, &bytes);
        offset[i] = total;
        ok = ok && checked_add_size(total, (bytes + 63) & ~(size_t)63, &total);
        packed_mats[n_packed++] = i;
    }
    if (ok && n_packed > 0)
        ok = (moe->packed_memory = alloc_huge(&total)) != NULL;
    pack_job job = {moe, packed_mats, m->hp.n_expert, NULL, QUANT_PACK_ROWS * widest};
    if (ok && widest > 0)
        ok = (job.scratch = calloc(threadpool_size(ctx->pool), job.scratch_bytes)) != NULL;
    if (ok && n_packed > 0) {
        for (size_t k = 0; k < n_packed; k++)
            moe->mats[packed_mats[k]].packed = (char *)moe->packed_memory + offset[packed_mats[k]];
        threadpool_run(ctx->pool, n_packed * m->hp.n_expert, pack_task, &job);
        for (size_t k = 0; k < n_packed; k++) {
            const expert_matrix *mat = &moe->mats[packed_mats[k]];
            if (mat->src->data) {
                release_source_pages(mat);
                continue;
            }
            for (size_t e = 0; e < m->hp.n_expert && !mat->w->model_owned; e++)
                release_file_pages(expert_data(mat, e), mat->rows * mat->w->row_bytes);
        }
    }
    free(job.scratch);
    free(packed_mats);
    free(offset);
    return ok;
}

bool moe_context_init(corral_context *ctx, corral_error *err)
{
    const corral_model *m = ctx->model;
    const hparams *hp = &m->hp;
    if (hp->n_expert == 0)
        return true;
    moe_context *moe = calloc(1, sizeof *moe);
    if (!moe) {
        corral_error_set(err, "out of memory");
        return false;
    }
    ctx->moe = moe;
    size_t n_pairs = (size_t)ctx->n_batch * hp->n_expert_used, probs;
    bool ok = checked_mul_size(ctx->n_batch, hp->n_expert, &probs);
    moe->mats = alloc_array((size_t)hp->n_layer * MOE_COUNT, sizeof *moe->mats, &ok);
    for (uint32_t il = 0; ok && il < hp->n_layer; il++) {
        const layer_weights *l = &m->layers[il];
        expert_matrix *mats = &moe->mats[il * MOE_COUNT];
        mats[MOE_GATE] = (expert_matrix){
            .w = &l->ffn_gate_exps, .expert_rows = l->gate_exps_rows, .rows = hp->n_ff_exp};
        mats[MOE_UP] = (expert_matrix){
            .w = &l->ffn_up_exps, .expert_rows = l->up_exps_rows, .rows = hp->n_ff_exp};
        mats[MOE_DOWN] = (expert_matrix){
            .w = &l->ffn_down_exps, .expert_rows = l->down_exps_rows, .rows = expert_width(hp)};
        mats[MOE_GATE].src = &l->gate_exps_src;
        mats[MOE_UP].src = &l->up_exps_src;
        mats[MOE_DOWN].src = &l->down_exps_src;
    }
    if (!ok || !pack_experts(ctx, moe)) {
        corral_error_set(err, "cannot allocate the repacked experts");
        return false;
    }
    moe->probs = alloc_array(probs, sizeof *moe->probs, &ok);
    moe->chosen = alloc_array(n_pairs, sizeof *moe->chosen, &ok);
    moe->weights = alloc_array(n_pairs, sizeof *moe->weights, &ok);
    moe->pair_of = alloc_array(n_pairs, sizeof *moe->pair_of, &ok);
    moe->pair_token = alloc_array(n_pairs, sizeof *moe->pair_token, &ok);
    moe->expert_first = alloc_array((size_t)hp->n_expert + 1, sizeof *moe->expert_first, &ok);
    moe->cursor = alloc_array(hp->n_expert, sizeof *moe->cursor, &ok);
    moe->active = alloc_array(hp->n_expert, sizeof *moe->active, &ok);
    if (hp->n_ff_shexp > 0) {
        size_t shared = 0, embd = 0;
        ok = ok && checked_mul_size(ctx->n_batch, hp->n_ff_shexp, &shared) &&
             checked_mul_size(ctx->n_batch, hp->n_embd, &embd);
        moe->shared_gate = alloc_array(shared, sizeof(float), &ok);
        moe->shared_up = alloc_array(shared, sizeof(float), &ok);
        moe->shared_out = alloc_array(embd, sizeof(float), &ok);
    }
    if (hp->moe_latent > 0) {
        size_t latent = 0;
        ok = ok && checked_mul_size(ctx->n_batch, hp->moe_latent, &latent);
        moe->latent_in = alloc_array(latent, sizeof(float), &ok);
        moe->latent_sum = alloc_array(latent, sizeof(float), &ok);
    }
    if (!ok || !alloc_pair_buffers(moe, m, n_pairs)) {
        corral_error_set(err, "cannot allocate the experts' activations for a batch of %u tokens",
                         ctx->n_batch);
        return false;
    }
    return true;
}

void moe_context_free(moe_context *moe)
{
    if (!moe)
        return;
    void *buffers[] = {moe->mats,       moe->packed_memory, moe->probs,        moe->chosen,
                       moe->weights,    moe->pair_of,       moe->pair_token,   moe->expert_first,
                       moe->cursor,     moe->active,        moe->act,          moe->sums,
                       moe->act_up,     moe->sums_up,       moe->gate,         moe->up,
                       moe->out,        moe->shared_gate,   moe->shared_up,    moe->shared_out,
                       moe->latent_in,  moe->latent_sum};
    for (size_t i = 0; i < sizeof buffers / sizeof buffers[0]; i++)
        free(buffers[i]);
    free(moe);
}

/* ---- routing (moe.h: the device's routers are tested against these) ---- */

/* The k largest of n values, largest first (the lower index first among equals). */
static void choose_largest(const float *v, size_t n, size_t k, uint32_t *chosen)
{
    for (size_t j = 0; j < k; j++) {
        size_t best = n;
        for (size_t e = 0; e < n; e++) {
            bool taken = false;
            for (size_t i = 0; i < j && !taken; i++)
                taken = chosen[i] == e;
            if (!taken && (best == n || v[e] > v[best]))
                best = e;
        }
        chosen[j] = (uint32_t)best;
    }
}

/* p[0..n) replaced by its softmax (the sum in double, as ggml keeps it). */
static void softmax_in_place(float *p, size_t n)
{
    float max = -INFINITY;
    for (size_t e = 0; e < n; e++)
        max = p[e] > max ? p[e] : max;
    double sum = 0.0;
    for (size_t e = 0; e < n; e++) {
        p[e] = expf(p[e] - max);
        sum += (double)p[e];
    }
    float inv = (float)(1.0 / sum);
    for (size_t e = 0; e < n; e++)
        p[e] *= inv;
}

void moe_route_softmax(float *p, size_t n, size_t k, uint32_t *chosen, float *w)
{
    softmax_in_place(p, n);
    choose_largest(p, n, k, chosen);
    double chosen_sum = 0.0;
    for (size_t j = 0; j < k; j++) {
        w[j] = p[chosen[j]];
        chosen_sum += (double)w[j];
    }
    for (size_t j = 0; j < k; j++)
        w[j] /= (float)chosen_sum;
}

void moe_route_softmax_chosen(const float *logits, size_t n, size_t k, uint32_t *chosen, float *w)
{
    choose_largest(logits, n, k, chosen);
    float max = logits[chosen[0]];
    double sum = 0.0;
    for (size_t j = 0; j < k; j++) {
        w[j] = expf(logits[chosen[j]] - max);
        sum += (double)w[j];
    }
    float inv = (float)(1.0 / sum);
    for (size_t j = 0; j < k; j++)
        w[j] *= inv;
}

void moe_route_scored(const moe_scored_router *r, float *p, const float *bias, uint32_t *chosen,
                      float *w)
{
    size_t n = r->n_expert, k = r->n_used;
    if (r->sigmoid) {
        for (size_t e = 0; e < n; e++)
            p[e] = 1.0f / (1.0f + expf(-p[e]));
    } else {
        softmax_in_place(p, n);
    }
    float select[MODEL_MAX_EXPERTS];
    for (size_t e = 0; e < n; e++)
        select[e] = p[e] + (bias ? bias[e] : 0.0f);
    if (r->n_groups > 1) {
        size_t n_groups = r->n_groups, size = n / n_groups;
        float group_score[MODEL_MAX_EXPERTS];
        bool kept[MODEL_MAX_EXPERTS] = {false};
        for (size_t g = 0; g < n_groups; g++) {
            float best = -INFINITY, second = -INFINITY;
            for (size_t e = g * size; e < (g + 1) * size; e++) {
                if (select[e] > best) {
                    second = best;
                    best = select[e];
                } else if (select[e] > second) {
                    second = select[e];
                }
            }
            group_score[g] = size > 1 ? best + second : best;
        }
        for (size_t j = 0; j < r->n_group_used; j++) {
            size_t top = n_groups;
            for (size_t g = 0; g < n_groups; g++)
                if (!kept[g] && (top == n_groups || group_score[g] > group_score[top]))
                    top = g;
            kept[top] = true;
        }
        for (size_t e = 0; e < n; e++)
            if (!kept[e / size])
                select[e] = -INFINITY;
    }
    choose_largest(select, n, k, chosen);
    double chosen_sum = 0.0;
    for (size_t j = 0; j < k; j++) {
        w[j] = p[chosen[j]];
        chosen_sum += (double)w[j];
    }
    float sum = (float)chosen_sum > 6.103515625e-5f ? (float)chosen_sum : 6.103515625e-5f;
    for (size_t j = 0; j < k; j++) {
        if (r->norm)
            w[j] /= sum;
        w[j] *= r->scale;
    }
}

/* Whether layer il routes as moe.c's header says (softmax, renormalised top-k). */
static bool routes_plainly(const hparams *hp, const layer_weights *l)
{
    return !hp->expert_gating_sigmoid && hp->expert_weights_norm &&
           hp->expert_weights_scale == 1.0f && hp->n_expert_groups <= 1 && !l->exp_probs_b.data;
}

/* The shared expert's SwiGLU FFN (ungated: ReLU² of up) of every token of ctx->xn into
 * moe->shared_out. */
static void run_shared_expert(corral_context *ctx, const layer_weights *l)
{
    moe_context *moe = ctx->moe;
    size_t n = ctx->n_tokens;
    if (l->ffn_gate_shexp.data) {
        const matrix_product gate_up[] = {{&l->ffn_gate_shexp, NULL, 0, moe->shared_gate},
                                          {&l->ffn_up_shexp, NULL, 0, moe->shared_up}};
        forward_matmul(ctx, gate_up, 2, ctx->xn, n);
        block_swiglu(moe->shared_gate, moe->shared_up, n * ctx->model->hp.n_ff_shexp);
    } else {
        const matrix_product up = {&l->ffn_up_shexp, NULL, 0, moe->shared_gate};
        forward_matmul(ctx, &up, 1, ctx->xn, n);
        block_relu_sqr(moe->shared_gate, n * ctx->model->hp.n_ff_shexp);
    }
    const matrix_product down = {&l->ffn_down_shexp, NULL, 0, moe->shared_out};
    forward_matmul(ctx, &down, 1, moe->shared_gate, n);
    if (!l->ffn_gate_inp_shexp.data)
        return;
    /* qwen2moe's gate: a logit per token (into shared_up, free again), its sigmoid the
     * output's scale */
    size_t E = ctx->model->hp.n_embd;
    const matrix_product gate = {&l->ffn_gate_inp_shexp, NULL, 0, moe->shared_up};
    forward_matmul(ctx, &gate, 1, ctx->xn, n);
    for (size_t t = 0; t < n; t++) {
        float scale = 1.0f / (1.0f + expf(-moe->shared_up[t]));
        for (size_t i = 0; i < E; i++)
            moe->shared_out[t * E + i] *= scale;
    }
}

/* The pairs grouped by expert, tokens in batch order within an expert, and the experts
 * that have any. */
static void group_pairs(moe_context *moe, const hparams *hp, size_t n_tokens)
{
    size_t n = hp->n_expert, k = hp->n_expert_used;
    memset(moe->expert_first, 0, (n + 1) * sizeof *moe->expert_first);
    for (size_t i = 0; i < n_tokens * k; i++)
        moe->expert_first[moe->chosen[i] + 1]++;
    moe->n_active = 0;
    for (size_t e = 0; e < n; e++) {
        if (moe->expert_first[e + 1] > 0)
            moe->active[moe->n_active++] = (uint32_t)e;
        moe->expert_first[e + 1] += moe->expert_first[e];
        moe->cursor[e] = moe->expert_first[e];
    }
    for (size_t t = 0; t < n_tokens; t++)
        for (size_t j = 0; j < k; j++) {
            uint32_t p = moe->cursor[moe->chosen[t * k + j]]++;
            moe->pair_token[p] = (uint32_t)t;
            moe->pair_of[t * k + j] = p;
        }
}

/* ---- the experts on the pool ---- */

/* Rows of x quantized for a matrix, one per pair: row pair_token[p] of x when token_rows is
 * set (the FFN input), else row p (the SwiGLU). Tasks of PAIRS_PER_TASK pairs. */
enum { PAIRS_PER_TASK = 16 };

typedef struct quantize_job {
    const expert_matrix *mat;
    const float *x;
    size_t n_in;
    const uint32_t *token_rows;
    void *act, *sums;
    size_t n_pairs;
} quantize_job;

static void quantize_task(void *arg, size_t task, size_t thread)
{
    (void)thread;
    const quantize_job *job = arg;
    const quant_ops *ops = job->mat->w->ops;
    size_t act_bytes = quant_act_row_bytes(ops->type, job->n_in);
    size_t sums_bytes = quant_packed_sums_bytes(job->n_in);
    size_t end = (task + 1) * PAIRS_PER_TASK < job->n_pairs ? (task + 1) * PAIRS_PER_TASK
                                                           : job->n_pairs;
    for (size_t p = task * PAIRS_PER_TASK; p < end; p++) {
        size_t row = job->token_rows ? job->token_rows[p] : p;
        void *act = (char *)job->act + p * act_bytes;
        quant_quantize_activations(ops, job->x + row * job->n_in, job->n_in, 1, act);
        if (job->mat->packed)
            quant_prepare_packed_act(ops, act, job->n_in, 1, (char *)job->sums + p * sums_bytes);
    }
}

static pair_input quantize_pairs(corral_context *ctx, const expert_matrix *mat, const float *x,
                                 const uint32_t *token_rows, void *act, void *sums,
                                 size_t n_pairs)
{
    size_t n_in = mat->w->n_in;
    quantize_job job = {mat, x, n_in, token_rows, act, sums, n_pairs};
    threadpool_run(ctx->pool, (n_pairs + PAIRS_PER_TASK - 1) / PAIRS_PER_TASK, quantize_task,
                   &job);
    return (pair_input){act, sums, quant_act_row_bytes(mat->w->type, n_in),
                        quant_packed_sums_bytes(n_in)};
}

/* y rows [begin, end) of expert e for n activation rows from `in`'s pair `first` on. */
static void multiply_expert(const expert_matrix *mat, size_t e, size_t begin, size_t end,
                            const pair_input *in, size_t first, size_t n, float *y, size_t ldy)
{
    const weight *w = mat->w;
    const char *act = (const char *)in->act + first * in->act_bytes;
    if (mat->packed) {
        const char *block = mat->packed + e * mat->expert_bytes +
                            begin / MATMUL_TASK_ROWS * mat->block_bytes;
        quant_matmul_packed_rows(w->ops, block, w->n_in, 0, end - begin, act,
                                 (const char *)in->sums + first * in->sums_bytes, n, y + begin,
                                 ldy);
    } else {
        assert(!mat->src->data); /* a file's own layout is read through its packed copy only */
        quant_matmul_rows(w->ops, expert_data(mat, e), w->n_in, begin, end, act, n, y, ldy);
    }
}

/* Every active expert's rows of one matrix, or, in the gated job, of gate and up with the
 * SwiGLU of the rows just written: a task is a block of MATMUL_TASK_ROWS rows of one expert
 * for all its pairs. */
typedef struct expert_job {
    const moe_context *moe;
    const expert_matrix *mat, *up; /* up: NULL but in the gated job */
    const weight *bias, *bias_up;  /* per expert, a bias of mat's / up's rows; NULL: none */
    bool clamped;                  /* the gated job's activation is FFN_SWIGLU_OAI's */
    bool geglu;                    /* ... or FFN_GEGLU's (gemma4) */
    bool relu_sqr;                 /* up's job of ungated experts: relu(y)² of its rows */
    bool gelu;                     /* ... or gelu(y) (nomic-bert-moe) */
    pair_input in, in_up;
    size_t blocks; /* per expert */
    float *y, *y_up;
} expert_job;

/* gpt-oss's constants of its clamped SwiGLU, which its files do not carry. */
#define SWIGLU_OAI_ALPHA 1.702f
#define SWIGLU_OAI_LIMIT 7.0f

/* Expert e's bias of rows [begin, end) added to the n pairs' rows from pair `first` on. */
static void add_expert_bias(const weight *bias, size_t e, size_t rows, size_t begin,
                            size_t end, float *y, size_t first, size_t n)
{
    if (!bias || !bias->data)
        return;
    const float *b = (const float *)bias->data + e * rows;
    for (size_t p = first; p < first + n; p++)
        for (size_t r = begin; r < end; r++)
            y[p * rows + r] += b[r];
}

static void expert_task(void *arg, size_t task, size_t thread)
{
    (void)thread;
    const expert_job *job = arg;
    const moe_context *moe = job->moe;
    uint32_t e = moe->active[task / job->blocks];
    size_t first = moe->expert_first[e], n = moe->expert_first[e + 1] - first;
    size_t rows = job->mat->rows, begin = task % job->blocks * MATMUL_TASK_ROWS;
    size_t end = begin + MATMUL_TASK_ROWS < rows ? begin + MATMUL_TASK_ROWS : rows;
    multiply_expert(job->mat, e, begin, end, &job->in, first, n, job->y + first * rows, rows);
    add_expert_bias(job->bias, e, rows, begin, end, job->y, first, n);
    for (size_t p = first; p < first + n && (job->relu_sqr || job->gelu); p++) {
        if (job->relu_sqr)
            block_relu_sqr(job->y + p * rows + begin, end - begin);
        else
            block_gelu(job->y + p * rows + begin, end - begin);
    }
    if (!job->up)
        return;
    multiply_expert(job->up, e, begin, end, &job->in_up, first, n, job->y_up + first * rows,
                    rows);
    add_expert_bias(job->bias_up, e, rows, begin, end, job->y_up, first, n);
    for (size_t p = first; p < first + n; p++) {
        float *x = job->y + p * rows + begin;
        const float *y = job->y_up + p * rows + begin;
        if (job->clamped)
            block_swiglu_oai(x, y, end - begin, SWIGLU_OAI_ALPHA, SWIGLU_OAI_LIMIT);
        else if (job->geglu)
            block_geglu(x, y, end - begin);
        else
            block_swiglu(x, y, end - begin);
    }
}

static void run_experts(corral_context *ctx, expert_job *job)
{
    job->blocks = (job->mat->rows + MATMUL_TASK_ROWS - 1) / MATMUL_TASK_ROWS;
    threadpool_run(ctx->pool, ctx->moe->n_active * job->blocks, expert_task, job);
}

void forward_moe(corral_context *ctx, uint32_t il)
{
    forward_moe_routed(ctx, il, ctx->xn);
}

void forward_moe_routed(corral_context *ctx, uint32_t il, const float *router_in)
{
    const corral_model *m = ctx->model;
    const hparams *hp = &m->hp;
    moe_context *moe = ctx->moe;
    size_t n = ctx->n_tokens, k = hp->n_expert_used, E = hp->n_embd, n_pairs = n * k;
    const layer_weights *l = &m->layers[il];
    const matrix_product router = {&l->ffn_gate_inp, NULL, 0, moe->probs};
    forward_matmul(ctx, &router, 1, router_in, n);
    bool biases = m->arch->tensors & ARCH_EXPERT_BIASES;
    bool plain = routes_plainly(hp, l);
    const moe_scored_router scored = {.n_expert = hp->n_expert, .n_used = k,
                                      .n_groups = hp->n_expert_groups,
                                      .n_group_used = hp->n_group_used,
                                      .sigmoid = hp->expert_gating_sigmoid,
                                      .norm = hp->expert_weights_norm,
                                      .scale = hp->expert_weights_scale};
    for (size_t t = 0; t < n; t++) {
        float *p = moe->probs + t * hp->n_expert, *w = moe->weights + t * k;
        uint32_t *chosen = moe->chosen + t * k;
        if (biases) {
            for (size_t e = 0; e < hp->n_expert; e++)
                p[e] += ((const float *)l->ffn_gate_inp_b.data)[e];
            moe_route_softmax_chosen(p, hp->n_expert, k, chosen, w);
        } else if (plain) {
            moe_route_softmax(p, hp->n_expert, k, chosen, w);
        } else {
            moe_route_scored(&scored, p, l->exp_probs_b.data, chosen, w);
        }
    }
    bool shared = l->ffn_down_shexp.data;
    if (shared)
        run_shared_expert(ctx, l);
    group_pairs(moe, hp, n);

    const expert_matrix *mats = &moe->mats[il * MOE_COUNT];
    const expert_matrix *gate = &mats[MOE_GATE], *up = &mats[MOE_UP], *down = &mats[MOE_DOWN];
    expert_job job = {.moe = moe, .mat = gate, .up = up, .y = moe->gate, .y_up = moe->up,
                      .bias = &l->ffn_gate_exps_b, .bias_up = &l->ffn_up_exps_b,
                      .clamped = m->arch->ffn == FFN_SWIGLU_OAI,
                      .geglu = m->arch->ffn == FFN_GEGLU};
    if (!gate->w->data) /* ungated: up alone, then relu(up)² or gelu(up) into the gate's rows */
        job = (expert_job){.moe = moe, .mat = up, .y = moe->gate, .bias = &l->ffn_up_exps_b,
                           .relu_sqr = m->arch->ffn != FFN_GELU,
                           .gelu = m->arch->ffn == FFN_GELU};
    const float *pair_in = ctx->xn;
    const uint32_t *pair_rows = moe->pair_token;
    bool latent = l->ffn_latent_down.data;
    if (latent) {
        const matrix_product down_to_latent = {&l->ffn_latent_down, NULL, 0, moe->latent_in};
        forward_matmul(ctx, &down_to_latent, 1, ctx->xn, n);
        pair_in = moe->latent_in;
    }
    if (hp->expert_weight_input) {
        /* llama4: each pair's own input, its token's row times the weight, in moe->out
         * (free until the down job) */
        for (size_t t = 0; t < n; t++)
            for (size_t j = 0; j < k; j++) {
                float *row = moe->out + (size_t)moe->pair_of[t * k + j] * E;
                for (size_t i = 0; i < E; i++)
                    row[i] = ctx->xn[t * E + i] * moe->weights[t * k + j];
            }
        pair_in = moe->out;
        pair_rows = NULL;
    }
    job.in = quantize_pairs(ctx, job.mat, pair_in, pair_rows, moe->act, moe->sums, n_pairs);
    if (job.up)
        job.in_up = up_has_own_input(gate, up)
                        ? quantize_pairs(ctx, up, pair_in, pair_rows, moe->act_up,
                                         moe->sums_up, n_pairs)
                        : job.in;
    run_experts(ctx, &job);
    job = (expert_job){.moe = moe, .mat = down, .y = moe->out, .bias = &l->ffn_down_exps_b};
    job.in = quantize_pairs(ctx, down, moe->gate, NULL, moe->act, moe->sums, n_pairs);
    run_experts(ctx, &job);

    /* each token's experts, weighted, summed from the most probable on; an expert's output
     * first times its own scale where the layer has them (gemma4), as llama.cpp orders it */
    const float *expert_scale = l->ffn_down_exps_s.data;
    size_t W = expert_width(hp);
    float *sum = latent ? moe->latent_sum : ctx->xn;
    for (size_t t = 0; t < n; t++) {
        float *y = sum + t * W;
        for (size_t j = 0; j < k; j++) {
            float *o = moe->out + (size_t)moe->pair_of[t * k + j] * W;
            float w = hp->expert_weight_input ? 1.0f : moe->weights[t * k + j];
            if (expert_scale)
                for (size_t i = 0; i < W; i++)
                    o[i] *= expert_scale[moe->chosen[t * k + j]];
            for (size_t i = 0; i < W; i++)
                y[i] = j == 0 ? o[i] * w : y[i] + o[i] * w;
        }
    }
    if (latent) {
        const matrix_product up_from_latent = {&l->ffn_latent_up, NULL, 0, ctx->xn};
        forward_matmul(ctx, &up_from_latent, 1, moe->latent_sum, n);
    }
    for (size_t t = 0; t < n && shared; t++)
        for (size_t i = 0; i < E; i++)
            ctx->xn[t * E + i] += moe->shared_out[t * E + i];
}

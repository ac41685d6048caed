/* Cross-attention to an image's states (cross_attn.h). */
#include "cross_attn.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "forward.h"
#include "gpu.h"

/*
 * A sequence's image: per cross-attention layer on the CPU (in layer order) and KV head, its
 * keys, K-normed, in F32 key tiles as the KV cache holds them (blocks.h), then per KV head its
 * values, n_rows rows of head_dim; in one allocation. The attention then runs as the cache's
 * does (block_attention), over the first n_attended rows or all of them. The layers on a
 * GPU hold theirs there (gpu_cross_set_image).
 */
typedef struct cross_image {
    uint8_t *kv;        /* NULL: no image, or no cross-attention layer on the CPU */
    uint32_t n_rows, n_attended, at; /* n_rows 0: no image */
    size_t n_tiles;     /* key tiles per KV head */
    size_t layer_bytes; /* one layer's keys and values */
} cross_image;

struct cross_context {
    uint32_t n_layers;  /* cross-attention layers on the CPU */
    uint32_t first_gpu; /* the first layer on a GPU (the model's layer count: none) */
    uint32_t *index;    /* per model layer on the CPU: its place among them */
    size_t n_head_kv, head_dim, group; /* query heads per KV head: group */
    cross_image *seq;
    uint32_t n_seq;
    float *scratch;     /* per pool thread, scratch_floats for block_attention */
    size_t scratch_floats, n_threads;
};

cross_context *cross_context_create(const corral_model *m, uint32_t n_seq, uint32_t first_gpu,
                                    size_t n_threads, bool *ok, corral_error *err)
{
    *ok = true;
    uint32_t n = 0, all = 0;
    for (uint32_t il = 0; il < m->hp.n_layer; il++) {
        all += m->layers[il].cross_attn;
        n += m->layers[il].cross_attn && il < first_gpu;
    }
    if (all == 0)
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
    c->first_gpu = first_gpu;
    c->n_seq = n_seq;
    c->n_threads = n_threads;
    for (uint32_t il = 0, k = 0; il < first_gpu && il < m->hp.n_layer; il++)
        if (m->layers[il].cross_attn)
            c->index[il] = k++;
    c->n_head_kv = m->hp.n_head_kv;
    c->head_dim = m->hp.head_dim_k;
    c->group = m->hp.n_head / m->hp.n_head_kv;
    attention_shape shape = {.n_heads = c->group, .n_queries = 1, .head_dim_k = c->head_dim,
                             .head_dim_v = c->head_dim};
    c->scratch_floats = attention_scratch_floats(&shape);
    if (!(c->scratch = malloc(n_threads * c->scratch_floats * sizeof *c->scratch))) {
        cross_context_free(c);
        corral_error_set(err, "out of memory");
        *ok = false;
        return NULL;
    }
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
    free(c->scratch);
    free(c);
}

uint32_t cross_image_rows(const corral_model *m)
{
    const char *names[] = {"max_num_tiles", "image_size", "patch_size"};
    uint32_t v[3] = {0, 0, 0};
    char key[128];
    corral_error ignored = {{0}};
    for (int i = 0; i < 3; i++) {
        snprintf(key, sizeof key, "%s.vision.%s", m->arch->name, names[i]);
        if (!gguf_get_u32_opt(m->file, key, &v[i], &ignored))
            return 0;
    }
    if (v[0] == 0 || v[2] == 0)
        return 0;
    uint64_t side = v[1] / v[2], rows = (uint64_t)v[0] * (side * side + 1);
    return side <= CROSS_MAX_ROWS && rows <= CROSS_MAX_ROWS ? (uint32_t)rows : 0;
}

static void drop(cross_image *img)
{
    free(img->kv);
    *img = (cross_image){0};
}

void cross_seq_truncate(cross_context *c, uint32_t seq, uint32_t n_keep)
{
    if (c && c->seq[seq].n_rows && c->seq[seq].at >= n_keep)
        drop(&c->seq[seq]);
}

void cross_seq_shift(cross_context *c, uint32_t seq, uint32_t n_keep, uint32_t n_discard)
{
    cross_image *img = c ? &c->seq[seq] : NULL;
    if (!img || !img->n_rows || img->at < n_keep)
        return;
    if (img->at < n_keep + n_discard)
        drop(img);
    else
        img->at -= n_discard;
}

bool cross_token_sees_image(const corral_context *ctx, size_t t, uint32_t *n_attended)
{
    const cross_image *img = &ctx->cross->seq[ctx->tok_seq[t]];
    *n_attended = img->n_attended;
    return img->n_rows && ctx->tok_pos[t] >= img->at;
}

/* Layer il's keys (K-normed per head) and values of rows [first, first + n) of the image's
 * states into ctx->k and ctx->v (n is at most the context's batch, which its scratch holds). */
static void project_chunk(corral_context *ctx, uint32_t il, const float *rows, uint32_t first,
                          uint32_t n)
{
    const hparams *hp = &ctx->model->hp;
    const layer_weights *l = &ctx->model->layers[il];
    size_t E = hp->n_embd, D = l->head_dim_k;
    memcpy(ctx->xn, rows + (size_t)first * E, (size_t)n * E * sizeof *ctx->xn);
    const matrix_product kv[] = {forward_layer_product(ctx, il, LM_WK, &l->wk, ctx->k),
                                 forward_layer_product(ctx, il, LM_WV, &l->wv, ctx->v)};
    forward_matmul(ctx, kv, 2, ctx->xn, n);
    for (size_t r = 0; r < (size_t)n * l->n_head_kv; r++)
        block_rmsnorm(ctx->k + r * D, l->k_norm.data, D, hp->norm_eps, ctx->k + r * D);
}

/* Layer il's keys into their tiles and its values, in chunks of the context's batch; to: the
 * layer's part of img->kv. */
static void project_rows(corral_context *ctx, uint32_t il, const float *rows,
                         const cross_image *img, uint8_t *to)
{
    const layer_weights *l = &ctx->model->layers[il];
    size_t D = l->head_dim_k, KV = l->n_head_kv, width = KV * D;
    size_t tile_bytes = kv_key_tile_bytes(CORRAL_KV_F32, D);
    kv_key_layout layout = kv_key_layout_of(CORRAL_KV_F32, D);
    float *values = (float *)(to + KV * img->n_tiles * tile_bytes);
    for (uint32_t first = 0; first < img->n_rows; first += ctx->n_batch) {
        uint32_t n = img->n_rows - first < ctx->n_batch ? img->n_rows - first : ctx->n_batch;
        project_chunk(ctx, il, rows, first, n);
        for (size_t r = 0; r < n; r++) {
            size_t row = first + r, lane = row % KV_KEY_TILE;
            for (size_t h = 0; h < KV; h++) {
                uint8_t *tile = to + (h * img->n_tiles + row / KV_KEY_TILE) * tile_bytes;
                for (size_t d = 0; d < D; d++)
                    *(float *)(tile + kv_key_lane_offset(layout, d, lane)) =
                        ctx->k[r * width + h * D + d];
                memcpy(values + (h * img->n_rows + row) * D, ctx->v + r * width + h * D,
                       D * sizeof *values);
            }
        }
    }
}

/* Layer il's keys and values as the GPU's cache holds them ([KV head][row][dim], keys and
 * values apart), into keys and values, and onto the GPU. The projection runs on the CPU as
 * the CPU's layers' does: a small part of an image's cost beside the tower, which runs on
 * the CPU too, and the states need not go to the GPU. */
static bool project_rows_to_gpu(corral_context *ctx, uint32_t il, uint32_t seq,
                                const float *rows, uint32_t n_rows, float *keys, float *values,
                                corral_error *err)
{
    const layer_weights *l = &ctx->model->layers[il];
    size_t D = l->head_dim_k, KV = l->n_head_kv, width = KV * D;
    for (uint32_t first = 0; first < n_rows; first += ctx->n_batch) {
        uint32_t n = n_rows - first < ctx->n_batch ? n_rows - first : ctx->n_batch;
        project_chunk(ctx, il, rows, first, n);
        for (size_t r = 0; r < n; r++)
            for (size_t h = 0; h < KV; h++) {
                size_t to = (h * n_rows + first + r) * D;
                memcpy(keys + to, ctx->k + r * width + h * D, D * sizeof *keys);
                memcpy(values + to, ctx->v + r * width + h * D, D * sizeof *values);
            }
    }
    return gpu_cross_set_image(ctx->gpu, ctx, seq, il, keys, values, n_rows, err);
}

bool cross_seq_set_image(corral_context *ctx, uint32_t seq, const float *rows, uint32_t n_rows,
                         uint32_t n_attended, uint32_t at, corral_error *err)
{
    cross_context *c = ctx->cross;
    const corral_model *m = ctx->model;
    cross_image img = {.n_rows = n_rows, .n_attended = n_attended, .at = at,
                       .n_tiles = (n_rows + KV_KEY_TILE - 1) / KV_KEY_TILE};
    /* bounded: rows <= CROSS_MAX_ROWS, a model's heads and layers */
    img.layer_bytes = c->n_head_kv * (img.n_tiles * kv_key_tile_bytes(CORRAL_KV_F32, c->head_dim) +
                                      (size_t)n_rows * c->head_dim * sizeof(float));
    size_t gpu_floats = c->first_gpu < m->hp.n_layer ? (size_t)n_rows * c->n_head_kv * c->head_dim
                                                     : 0;
    float *gpu_kv = gpu_floats ? malloc(2 * gpu_floats * sizeof *gpu_kv) : NULL;
    if (c->n_layers && !(img.kv = calloc(c->n_layers, img.layer_bytes))) {
        corral_error_set(err, "out of memory for an image's %u cross-attention rows", n_rows);
        free(gpu_kv);
        drop(&c->seq[seq]);
        return false;
    }
    if (gpu_floats && !gpu_kv) {
        corral_error_set(err, "out of memory for an image's %u cross-attention rows", n_rows);
        free(img.kv);
        drop(&c->seq[seq]);
        return false;
    }
    bool ok = true;
    for (uint32_t il = 0; ok && il < m->hp.n_layer; il++) {
        if (!m->layers[il].cross_attn)
            continue;
        if (il < c->first_gpu)
            project_rows(ctx, il, rows, &img, img.kv + c->index[il] * img.layer_bytes);
        else /* the sequence's earlier image on the GPU is overwritten from here on */
            ok = project_rows_to_gpu(ctx, il, seq, rows, n_rows, gpu_kv, gpu_kv + gpu_floats,
                                     err);
    }
    free(gpu_kv);
    drop(&c->seq[seq]);
    if (!ok) {
        free(img.kv);
        return false;
    }
    c->seq[seq] = img;
    return true;
}

/* The tokens of a batch that see an image, and the attention over it. */
typedef struct cross_job {
    corral_context *ctx;
    uint32_t il;
} cross_job;

/* Whether token t of the batch reads its sequence's image: it has one, at or before t. */
static bool sees_image(const corral_context *ctx, size_t t)
{
    uint32_t n_attended;
    return cross_token_sees_image(ctx, t, &n_attended);
}

/* Task (token t, KV head g): the attention of the query heads of that KV head over the image's
 * rows the token sees, into ctx->attn; a token that sees no image is left alone. */
static void cross_task(void *arg, size_t task, size_t thread)
{
    const cross_job *job = arg;
    corral_context *ctx = job->ctx;
    const cross_context *c = ctx->cross;
    size_t KV = c->n_head_kv, D = c->head_dim, H = KV * c->group, t = task / KV, g = task % KV;
    const cross_image *img = &c->seq[ctx->tok_seq[t]];
    if (!sees_image(ctx, t))
        return;
    const uint8_t *layer = img->kv + c->index[job->il] * img->layer_bytes;
    size_t tile_bytes = kv_key_tile_bytes(CORRAL_KV_F32, D);
    const uint8_t *keys = layer + g * img->n_tiles * tile_bytes;
    const uint8_t *values = layer + KV * img->n_tiles * tile_bytes +
                            g * (size_t)img->n_rows * D * sizeof(float);
    attention_shape shape = {.n_heads = c->group, .n_queries = 1,
                             .n_cells = img->n_attended,
                             .head_dim_k = D, .head_dim_v = D,
                             .scale = 1.0f / sqrtf((float)D)};
    size_t first = (t * H + g * c->group) * D;
    block_attention(CORRAL_KV_F32, &shape, ctx->q + first, H * D, keys, values,
                    c->scratch + thread * c->scratch_floats, ctx->attn + first, H * D);
}

void cross_attention_layer(corral_context *ctx, uint32_t il)
{
    const cross_context *c = ctx->cross;
    const hparams *hp = &ctx->model->hp;
    const layer_weights *l = &ctx->model->layers[il];
    size_t n = ctx->n_tokens, E = hp->n_embd, H = l->n_head, D = l->head_dim_k;
    bool any = false;
    for (size_t t = 0; t < n; t++)
        any = any || sees_image(ctx, t);
    if (!any)
        return;
    forward_rmsnorm(ctx, &l->attn_norm, ctx->x, ctx->xn);
    const matrix_product q = forward_layer_product(ctx, il, LM_WQ, &l->wq, ctx->q);
    forward_matmul(ctx, &q, 1, ctx->xn, n);
    for (size_t r = 0; r < n * H; r++)
        block_rmsnorm(ctx->q + r * D, l->q_norm.data, D, hp->norm_eps, ctx->q + r * D);
    cross_job job = {ctx, il};
    threadpool_run(ctx->pool, n * c->n_head_kv, cross_task, &job);
    const matrix_product o = forward_layer_product(ctx, il, LM_WO, &l->wo, ctx->xn);
    forward_matmul(ctx, &o, 1, ctx->attn, n);
    float attn_gate = tanhf(*(const float *)l->xattn_gate.data);
    float mlp_gate = tanhf(*(const float *)l->xmlp_gate.data);
    for (size_t t = 0; t < n; t++)
        if (sees_image(ctx, t))
            for (size_t i = 0; i < E; i++)
                ctx->x[t * E + i] += attn_gate * ctx->xn[t * E + i];
    forward_rmsnorm(ctx, &l->ffn_norm, ctx->x, ctx->xn);
    forward_ffn(ctx, il);
    for (size_t t = 0; t < n; t++)
        if (sees_image(ctx, t))
            for (size_t i = 0; i < E; i++)
                ctx->x[t * E + i] += mlp_gate * ctx->xn[t * E + i];
}

/*
 * The vision tower's steps, shared by the projector kinds: patch embedding (the stride-patch
 * convolution as one matrix product over the patches' pixels), pre-norm blocks with exact F32
 * softmax attention (full, or within windows) and a GELU or SwiGLU MLP, and the norms. Matrix
 * products and attention run on the thread pool; the GELU is ggml's fp16 table, as
 * llama.cpp's CPU backend computes it. The blocks go to a GPU through gpu_vision.h when the
 * tower has one (vision_use_gpu, vision_run_blocks).
 */
#include <assert.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "blocks.h"
#include "cpu.h"
#include "gpu_vision.h"
#include "mmproj.h"
#include "quant_half.h"
#include "tensor_type.h"
#include "util/checked.h"
#include "vision_order.h"

/* ---- matrix products ---- */

/* A product's tasks: blocks of rows x blocks of tokens, so that a large image keeps every
 * thread busy and a task's activations stay in cache. */
enum { ROWS_PER_TASK = 64, TOKENS_PER_TASK = 64 };

/* Queries of one head per attention task. */
enum { QUERIES_PER_TASK = 16 };

typedef struct matmul_job {
    const weight *w;
    const void *act;
    size_t act_row_bytes, n, row_blocks;
    float *y;
} matmul_job;

static void matmul_task(void *arg, size_t task, size_t thread)
{
    (void)thread;
    const matmul_job *job = arg;
    size_t rb = task % job->row_blocks, tb = task / job->row_blocks;
    size_t begin = rb * ROWS_PER_TASK, end = begin + ROWS_PER_TASK;
    end = end < job->w->n_out ? end : job->w->n_out;
    size_t t0 = tb * TOKENS_PER_TASK, nt = job->n - t0 < TOKENS_PER_TASK ? job->n - t0 : TOKENS_PER_TASK;
    quant_matmul_rows(job->w->ops, job->w->data, job->w->n_in, begin, end,
                      (const char *)job->act + t0 * job->act_row_bytes, nt,
                      job->y + t0 * job->w->n_out, job->w->n_out);
}

typedef struct quantize_job {
    const weight *w;
    const float *x;
    void *act;
    size_t act_row_bytes, n;
} quantize_job;

static void quantize_task(void *arg, size_t task, size_t thread)
{
    (void)thread;
    const quantize_job *job = arg;
    size_t t0 = task * TOKENS_PER_TASK, nt = job->n - t0 < TOKENS_PER_TASK ? job->n - t0 : TOKENS_PER_TASK;
    quant_quantize_activations(job->w->ops, job->x + t0 * job->w->n_in, job->w->n_in, nt,
                               (char *)job->act + t0 * job->act_row_bytes);
}

static void add_bias_rows(float *y, const weight *bias, size_t n, size_t width)
{
    if (!bias || !bias->data)
        return;
    const float *b = bias->data;
    for (size_t t = 0; t < n; t++)
        for (size_t i = 0; i < width; i++)
            y[t * width + i] += b[i];
}

/*
 * F32 weights: every product as ggml's F32 matrix multiplication computes it (vision_order.h),
 * the same at every level. Its matrix kernel takes rows of a multiple of 16 when there are at
 * least two tokens; anything else goes to its vector dot.
 */
typedef struct f32_matmul_job {
    const weight *w;
    const float *x;
    size_t n, row_blocks;
    bool matrix_order;
    float *y;
} f32_matmul_job;

static void f32_matmul_task(void *arg, size_t task, size_t thread)
{
    (void)thread;
    const f32_matmul_job *job = arg;
    const weight *w = job->w;
    size_t rb = task % job->row_blocks, tb = task / job->row_blocks;
    size_t begin = rb * ROWS_PER_TASK, end = begin + ROWS_PER_TASK;
    end = end < w->n_out ? end : w->n_out;
    size_t t0 = tb * TOKENS_PER_TASK;
    size_t nt = job->n - t0 < TOKENS_PER_TASK ? job->n - t0 : TOKENS_PER_TASK;
    const float *x = job->x + t0 * w->n_in;
    float *y = job->y + t0 * w->n_out;
    vision_matmul_rows(w->data, w->n_in, begin, end, x, nt, y, w->n_out, job->matrix_order);
}

static void f32_matmul(threadpool *pool, const weight *w, const float *x, size_t n, float *y,
                       bool matrix_order)
{
    size_t token_blocks = (n + TOKENS_PER_TASK - 1) / TOKENS_PER_TASK;
    f32_matmul_job job = {w, x, n, (w->n_out + ROWS_PER_TASK - 1) / ROWS_PER_TASK, matrix_order,
                          y};
    threadpool_run(pool, job.row_blocks * token_blocks, f32_matmul_task, &job);
}

void vision_matmul(threadpool *pool, const weight *w, const weight *bias, const float *x,
                   size_t n, float *y, void *act)
{
    if (w->type == TENSOR_TYPE_F32) {
        f32_matmul(pool, w, x, n, y, w->n_in % 16 == 0 && n >= 2);
        add_bias_rows(y, bias, n, w->n_out);
        return;
    }
    size_t act_row_bytes = quant_act_row_bytes(w->type, w->n_in);
    size_t token_blocks = (n + TOKENS_PER_TASK - 1) / TOKENS_PER_TASK;
    quantize_job q = {w, x, act, act_row_bytes, n};
    threadpool_run(pool, token_blocks, quantize_task, &q);
    matmul_job job = {w, act, act_row_bytes, n, (w->n_out + ROWS_PER_TASK - 1) / ROWS_PER_TASK, y};
    threadpool_run(pool, job.row_blocks * token_blocks, matmul_task, &job);
    add_bias_rows(y, bias, n, w->n_out);
}

/* ---- the run's buffers ---- */

float *vision_alloc_rows(size_t n, size_t width, bool *ok)
{
    size_t count, bytes;
    float *p = NULL;
    if (*ok && checked_mul_size(n, width, &count) &&
        checked_mul_size(count ? count : 1, sizeof(float), &bytes))
        p = malloc(bytes);
    *ok = *ok && p;
    return p;
}

/* The widest activation row of the tower's products, in bytes. */
static size_t widest_act_row(const corral_mmproj *mm)
{
    const vision_hparams *hp = &mm->hp;
    size_t widest = quant_act_row_bytes(mm->patch_embd.type, mm->patch_embd.n_in);
    for (uint32_t il = 0; il < hp->n_layer; il++) {
        const vision_layer *l = &mm->layers[il];
        const weight *ws[] = {&l->wq, &l->wk, &l->wv, &l->wo, &l->up, &l->gate, &l->down};
        for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++) {
            if (!ws[i]->data)
                continue;
            size_t b = quant_act_row_bytes(ws[i]->type, ws[i]->n_in);
            widest = b > widest ? b : widest;
        }
    }
    return widest;
}

bool vision_run_init(vision_run *run, const corral_mmproj *mm, threadpool *pool,
                     const corral_cancel *cancel, size_t n_patches, size_t extra_act_row_bytes,
                     corral_error *err)
{
    const vision_hparams *hp = &mm->hp;
    memset(run, 0, sizeof *run);
    run->mm = mm;
    run->pool = pool;
    run->cancel = cancel;
    run->n_patches = n_patches;
    size_t E = hp->n_embd, F = hp->n_ff, n_in = mm->patch_embd.n_in;
    size_t wide = F > n_in ? F : n_in;
    size_t act_row = widest_act_row(mm);
    act_row = extra_act_row_bytes > act_row ? extra_act_row_bytes : act_row;
    bool ok = true;
    run->x = vision_alloc_rows(n_patches, E, &ok);
    run->xn = vision_alloc_rows(n_patches, E, &ok);
    run->q = vision_alloc_rows(n_patches, E, &ok);
    run->k = vision_alloc_rows(n_patches, E, &ok);
    run->v = vision_alloc_rows(n_patches, E, &ok);
    run->attn = vision_alloc_rows(n_patches, E, &ok);
    run->ff = vision_alloc_rows(n_patches, wide, &ok);
    run->ff2 = vision_alloc_rows(n_patches, wide, &ok);
    run->qh = vision_alloc_rows(n_patches, E, &ok);
    run->kh = vision_alloc_rows(vision_key_tiles(n_patches) * VISION_KEY_TILE, E, &ok);
    run->vt = vision_alloc_rows(n_patches, E, &ok);
    /* per thread: a block's scores and its outputs */
    run->scores_per_thread = QUERIES_PER_TASK * n_patches + QUERIES_PER_TASK * (E / hp->n_head);
    run->scores = vision_alloc_rows(threadpool_size(pool), run->scores_per_thread, &ok);
    float *ones = vision_alloc_rows(1, E, &ok);
    for (size_t i = 0; ok && i < E; i++)
        ones[i] = 1.0f;
    run->ones = ones;
    size_t act_bytes;
    if (ok && checked_mul_size(act_row, n_patches, &act_bytes))
        ok = (run->act = malloc(act_bytes ? act_bytes : 1)) != NULL;
    else
        ok = false;
    if (!ok) {
        corral_error_set(err, "cannot allocate the vision tower's activations for %zu patches",
                         n_patches);
        vision_run_free(run);
    }
    return ok;
}

void vision_run_free(vision_run *run)
{
    float *buffers[] = {run->x,  run->xn, run->q,  run->k,  run->v,     run->attn,
                        run->ff, run->ff2, run->qh, run->kh, run->vt, run->scores};
    for (size_t i = 0; i < sizeof buffers / sizeof buffers[0]; i++)
        free(buffers[i]);
    free((float *)run->ones);
    free(run->act);
    memset(run, 0, sizeof *run);
}

/* ---- steps ---- */

void vision_norm_rows(const corral_mmproj *mm, const weight *w, const weight *b,
                      const float *in, float *out, size_t n)
{
    size_t E = mm->hp.n_embd;
    for (size_t t = 0; t < n; t++) {
        if (mm->hp.norm == VISION_LAYER_NORM)
            vision_layernorm_row(in + t * E, w->data, b ? b->data : NULL, E, mm->hp.eps,
                                 out + t * E);
        else
            vision_rmsnorm_row(in + t * E, w->data, E, mm->hp.eps, out + t * E);
    }
}

/* y = the patches times one kernel. llama.cpp's convolution lays the patches out in the
 * kernel's type (ollama's copy; newer ones in F16 always, but for BF16): for an F16 kernel
 * they are rounded to F16 and the product runs in F32 on the widened values, in the order of
 * its F32 products. */
static void patch_product(vision_run *run, const weight *w, const float *wide, const weight *bias,
                          float *patches, float *y)
{
    if (!wide) {
        vision_matmul(run->pool, w, bias, patches, run->n_patches, y, run->act);
        return;
    }
    weight f32 = {.data = wide,
                  .type = TENSOR_TYPE_F32,
                  .n_in = w->n_in,
                  .n_out = w->n_out,
                  .row_bytes = w->n_in * sizeof(float),
                  .ops = quant_ops_active(TENSOR_TYPE_F32)};
    vision_matmul(run->pool, &f32, bias, patches, run->n_patches, y, run->act);
}

void vision_patch_embed(vision_run *run, const float *pixels, uint32_t nx, const uint32_t *at)
{
    const corral_mmproj *mm = run->mm;
    size_t p = mm->hp.patch_size, n_in = mm->patch_embd.n_in, E = mm->hp.n_embd;
    float *patches = run->ff; /* n_in wide: vision_run_init sized it */
    bool f16 = mm->patch_embd_wide != NULL || run->patch_f16;
    for (size_t t = 0; t < run->n_patches; t++) {
        size_t py = at[2 * t], px = at[2 * t + 1];
        float *row = patches + t * n_in;
        for (size_t c = 0; c < 3; c++)
            for (size_t ky = 0; ky < p; ky++)
                for (size_t kx = 0; kx < p; kx++) {
                    float v = pixels[((py * p + ky) * nx + px * p + kx) * 3 + c];
                    row[(c * p + ky) * p + kx] = f16 ? quant_f16_to_f32(quant_f32_to_f16(v)) : v;
                }
    }
    if (run->patch_f16) {
        /* llama.cpp's F16 unfolded pixels meet the kernel in its F16 vector dot, whose
         * products of halves are exact in F32: the F32 vector dot's order on the rounded
         * values (measured: 2e-7 from its embeddings; the matrix kernel's order, 1e-5) */
        f32_matmul(run->pool, &mm->patch_embd, patches, run->n_patches, run->x, false);
        add_bias_rows(run->x, &mm->patch_b, run->n_patches, E);
    } else {
        patch_product(run, &mm->patch_embd, mm->patch_embd_wide, &mm->patch_b, patches, run->x);
    }
    if (mm->patch_embd_1.data) {
        /* qwen's second frame: a kernel of the first's type (mmproj.c) */
        patch_product(run, &mm->patch_embd_1, mm->patch_embd_1_wide, NULL, patches, run->xn);
        for (size_t i = 0; i < run->n_patches * E; i++)
            run->x[i] += run->xn[i];
    }
}

/*
 * The patch convolution on half values (kernels and pixels both): ggml's F16 matrix kernel
 * (llamafile's on AVX2, the CPU the references were made on) sums a product in 8 FMA lanes
 * over the inputs in steps of 8, then folds the lanes 8 -> 4 -> 2 -> 1. The products of
 * halves are exact, so these are its sums bit for bit at every level; the GELU table
 * downstream turns a last-bit difference here into a visible one.
 */
enum { PATCHES_PER_TASK = 64 };

typedef struct patch_half_job {
    const vision_run *run;
    const float *pixels, *w0, *w1, *bias;
    const uint32_t *at;
    uint32_t nx;
} patch_half_job;

float vision_dot8(const float *a, const float *b, size_t n)
{
    if (cpu_active_level() >= CPU_LEVEL_AVX2)
        return vision_dot8_avx2(a, b, n);
    float lane[8] = {0};
    for (size_t k = 0; k < n; k += 8)
        for (size_t l = 0; l < 8; l++)
            lane[l] = fmaf(a[k + l], b[k + l], lane[l]);
    float four[4], two[2];
    for (size_t l = 0; l < 4; l++)
        four[l] = lane[l] + lane[l + 4];
    two[0] = four[0] + four[2];
    two[1] = four[1] + four[3];
    return two[0] + two[1];
}

static void patch_half_task(void *arg, size_t task, size_t thread)
{
    (void)thread;
    const patch_half_job *job = arg;
    const vision_run *run = job->run;
    size_t p = run->mm->hp.patch_size, n_in = 3 * p * p, E = run->mm->hp.n_embd;
    float row[3 * 64 * 64]; /* p is at most the loader's MAX_PATCH_SIZE (64) */
    size_t n = run->n_patches;
    size_t end = (task + 1) * PATCHES_PER_TASK < n ? (task + 1) * PATCHES_PER_TASK : n;
    for (size_t t = task * PATCHES_PER_TASK; t < end; t++) {
        size_t py = job->at[2 * t], px = job->at[2 * t + 1];
        for (size_t c = 0; c < 3; c++)
            for (size_t ky = 0; ky < p; ky++)
                for (size_t kx = 0; kx < p; kx++)
                    row[(c * p + ky) * p + kx] =
                        job->pixels[((py * p + ky) * job->nx + px * p + kx) * 3 + c];
        float *x = run->x + t * E;
        for (size_t o = 0; o < E; o++) {
            float v = vision_dot8(row, job->w0 + o * n_in, n_in);
            if (job->w1)
                v += vision_dot8(row, job->w1 + o * n_in, n_in);
            x[o] = job->bias ? v + job->bias[o] : v;
        }
    }
}

void vision_patch_embed_half(vision_run *run, const float *pixels, uint32_t nx,
                             const uint32_t *at, const float *w0, const float *w1,
                             const float *bias)
{
    patch_half_job job = {run, pixels, w0, w1, bias, at, nx};
    threadpool_run(run->pool, (run->n_patches + PATCHES_PER_TASK - 1) / PATCHES_PER_TASK,
                   patch_half_task, &job);
}

/*
 * Attention per head in llama.cpp's order (vision_order.h): a block of queries against every
 * key (scores, its vector dot), its softmax, then the normalised weights against the values.
 * Keys and values are laid out per head beforehand: keys in tiles of 16 side by side, so
 * that the scores take a tile's keys at once from one small block of memory, values
 * transposed to rows of n_patches.
 */
typedef struct attention_job {
    vision_run *run;
    const uint32_t *window; /* NULL: every patch sees every patch */
    size_t query_blocks;
} attention_job;

/* Head h's queries [n][d], keys in tiles (vision_order.h) and values [d][n] out of the
 * [n][E] projections. */
static void head_layout_task(void *arg, size_t h, size_t thread)
{
    (void)thread;
    const attention_job *job = arg;
    const vision_run *run = job->run;
    size_t E = run->mm->hp.n_embd, d = E / run->mm->hp.n_head, n = run->n_patches;
    size_t key_floats = vision_key_tiles(n) * VISION_KEY_TILE * d;
    float *qh = run->qh + h * n * d, *kh = run->kh + h * key_floats, *vt = run->vt + h * n * d;
    for (size_t t = 0; t < n; t++) {
        memcpy(qh + t * d, run->q + t * E + h * d, d * sizeof *qh);
        float *key = kh + (t / VISION_KEY_TILE * d) * VISION_KEY_TILE + t % VISION_KEY_TILE;
        for (size_t c = 0; c < d; c++) {
            key[c * VISION_KEY_TILE] = run->k[t * E + h * d + c];
            vt[c * n + t] = run->v[t * E + h * d + c];
        }
    }
}

static void attention_task(void *arg, size_t task, size_t thread)
{
    const attention_job *job = arg;
    const vision_run *run = job->run;
    const vision_hparams *hp = &run->mm->hp;
    size_t E = hp->n_embd, d = E / hp->n_head, n = run->n_patches;
    size_t h = task / job->query_blocks, first = task % job->query_blocks * QUERIES_PER_TASK;
    size_t nq = first + QUERIES_PER_TASK < n ? QUERIES_PER_TASK : n - first;
    float scale = run->kq_scale != 0.0f ? run->kq_scale : 1.0f / sqrtf((float)d);
    float *scores = run->scores + thread * run->scores_per_thread;
    float *out = scores + QUERIES_PER_TASK * n;
    /* ggml reads the queries through a permuted view: its vector dot, not its matrix kernel */
    vision_scores(run->qh + (h * n + first) * d, nq,
                  run->kh + h * vision_key_tiles(n) * VISION_KEY_TILE * d, n, d, scores);
    for (size_t i = 0; i < nq; i++) {
        float *p = scores + i * n;
        if (job->window)
            for (size_t j = 0; j < n; j++)
                if (job->window[j] != job->window[first + i])
                    p[j] = -INFINITY;
        if (run->padding && run->padding[first + i]) /* mllama: padding sees no padding */
            for (size_t j = 0; j < n; j++)
                if (run->padding[j])
                    p[j] = -INFINITY;
        float inv = (float)(1.0 / vision_softmax_row(p, n, scale));
        for (size_t j = 0; j < n; j++)
            p[j] *= inv;
    }
    /* the weights times the values: ggml's matrix kernel when the keys are a multiple of 16
     * (it always has more than one query here), else its vector dot */
    vision_matmul_rows(run->vt + h * n * d, n, 0, d, scores, nq, out, d, n % 16 == 0);
    for (size_t i = 0; i < nq; i++)
        memcpy(run->attn + (first + i) * E + h * d, out + i * d, d * sizeof *out);
}

/* Rotate every head of a patch's row by the patch's angles: pairs (i, i + d/2), or
 * (2i, 2i + 1) with rope_adjacent, or within each half (rope_split): pair i < d/4 is
 * (i, i + d/4), pair d/4 + i is (d/2 + i, d/2 + i + d/4). */
static void rope_rows(const vision_run *run, float *rows)
{
    const vision_hparams *hp = &run->mm->hp;
    size_t E = hp->n_embd, d = E / hp->n_head, half = d / 2, quarter = d / 4;
    size_t step = run->rope_adjacent ? 2 : 1, other = run->rope_adjacent ? 1 : half;
    if (run->rope_split)
        other = quarter;
    for (size_t t = 0; t < run->n_patches; t++) {
        const float *cs = run->rope_cs + t * d;
        for (size_t h = 0; h < hp->n_head; h++) {
            float *x = rows + t * E + h * d;
            for (size_t i = 0; i < half; i++) {
                size_t at = run->rope_split ? i / quarter * half + i % quarter : i * step;
                float *a = x + at, *b = a + other;
                float c = cs[2 * i], s = cs[2 * i + 1], x0 = *a, x1 = *b;
                /* ggml's rotation, built with FMA contraction: the first product fused */
                *a = fmaf(x0, c, -(x1 * s));
                *b = fmaf(x0, s, x1 * c);
            }
        }
    }
}

static void clamp_rows(float *x, size_t count, float lo, float hi)
{
    for (size_t i = 0; i < count; i++)
        x[i] = fmaxf(fminf(x[i], hi), lo);
}

/*
 * y = w . x (+ b) for n rows; a clipped linear (l->clamp, product which) clamps its input
 * first and its output after. The input is clamped where it is, as llama.cpp's ggml_clamp
 * does (its result is a view of its operand): products that share an input (q, k and v;
 * the gate and up) each see it clamped by their own bounds and those of the products its
 * graph ran before them (q, then k, then v; the gate, then up), which callers keep to.
 */
static void layer_product(vision_run *run, const vision_layer *l, int which, const weight *w,
                          const weight *b, float *x, float *y)
{
    size_t n = run->n_patches;
    if (l->clamp)
        clamp_rows(x, n * w->n_in, l->clamp[which][0], l->clamp[which][1]);
    vision_matmul(run->pool, w, b, x, n, y, run->act);
    if (l->clamp)
        clamp_rows(y, n * w->n_out, l->clamp[which][2], l->clamp[which][3]);
}

/* Every head of every row RMS-normed on its own (times w, a head's width; NULL: none). */
static void head_norms(const vision_run *run, const weight *w, float *rows)
{
    const vision_hparams *hp = &run->mm->hp;
    size_t E = hp->n_embd, d = E / hp->n_head;
    for (size_t r = 0; r < run->n_patches * hp->n_head; r++)
        vision_rmsnorm_row(rows + r * d, w ? w->data : run->ones, d, hp->eps, rows + r * d);
}

static void block_attention_step(vision_run *run, const vision_layer *l, const uint32_t *window)
{
    const vision_hparams *hp = &run->mm->hp;
    size_t n = run->n_patches;
    layer_product(run, l, VISION_CLAMP_Q, &l->wq, &l->bq, run->xn, run->q);
    layer_product(run, l, VISION_CLAMP_K, &l->wk, &l->bk, run->xn, run->k);
    layer_product(run, l, VISION_CLAMP_V, &l->wv, &l->bv, run->xn, run->v);
    if (l->q_norm.data)
        head_norms(run, &l->q_norm, run->q);
    if (l->k_norm.data)
        head_norms(run, &l->k_norm, run->k);
    if (run->rope_cs) {
        rope_rows(run, run->q);
        rope_rows(run, run->k);
    }
    if (run->v_norm)
        head_norms(run, NULL, run->v);
    attention_job job = {run, window, (n + QUERIES_PER_TASK - 1) / QUERIES_PER_TASK};
    threadpool_run(run->pool, hp->n_head, head_layout_task, &job);
    threadpool_run(run->pool, hp->n_head * job.query_blocks, attention_task, &job);
    layer_product(run, l, VISION_CLAMP_OUT, &l->wo, &l->bo, run->attn, run->xn);
}

/* quick_gelu(x) of every fp16 x, rounded to fp16: ggml's CPU backend tabulates it too, and
 * reads it for every x (no short cut at large |x|, unlike its GELU). */
static uint16_t gelu_quick_table[1 << 16];
static pthread_once_t gelu_quick_once = PTHREAD_ONCE_INIT;

static void build_gelu_quick_table(void)
{
    for (uint32_t h = 0; h < (1u << 16); h++) {
        float x = quant_f16_to_f32((uint16_t)h);
        gelu_quick_table[h] = quant_f32_to_f16(x * (1.0f / (1.0f + expf(-1.702f * x))));
    }
}

const uint16_t *vision_gelu_quick_f16_table(void)
{
    pthread_once(&gelu_quick_once, build_gelu_quick_table);
    return gelu_quick_table;
}

void vision_gelu_quick(float *x, size_t n)
{
    pthread_once(&gelu_quick_once, build_gelu_quick_table);
    for (size_t i = 0; i < n; i++)
        x[i] = quant_f16_to_f32(gelu_quick_table[quant_f32_to_f16(x[i])]);
}

static void block_ffn_step(vision_run *run, const vision_layer *l)
{
    const vision_hparams *hp = &run->mm->hp;
    size_t n = run->n_patches, F = hp->n_ff;
    if (hp->ffn == VISION_FFN_GEGLU_QUICK) { /* the gate first, as llama.cpp's graph runs it */
        layer_product(run, l, VISION_CLAMP_GATE, &l->gate, &l->gate_b, run->xn, run->ff);
        layer_product(run, l, VISION_CLAMP_UP, &l->up, &l->up_b, run->xn, run->ff2);
        vision_gelu_quick(run->ff, n * F);
        for (size_t i = 0; i < n * F; i++)
            run->ff[i] *= run->ff2[i];
        layer_product(run, l, VISION_CLAMP_DOWN, &l->down, &l->down_b, run->ff, run->xn);
        return;
    }
    vision_matmul(run->pool, &l->up, &l->up_b, run->xn, n, run->ff2, run->act);
    if (hp->ffn == VISION_FFN_SWIGLU) {
        vision_matmul(run->pool, &l->gate, &l->gate_b, run->xn, n, run->ff, run->act);
        for (size_t t = 0; t < n; t++)
            vision_swiglu_row(run->ff + t * F, run->ff2 + t * F, F);
        vision_matmul(run->pool, &l->down, &l->down_b, run->ff, n, run->xn, run->act);
    } else {
        if (hp->ffn == VISION_FFN_GELU_QUICK)
            vision_gelu_quick(run->ff2, n * F);
        else if (hp->ffn == VISION_FFN_GELU_ERF)
            for (size_t i = 0; i < n * F; i++)
                run->ff2[i] = 0.5f * run->ff2[i] * (1.0f + erff(run->ff2[i] * (float)M_SQRT1_2));
        else
            block_gelu(run->ff2, n * F);
        vision_matmul(run->pool, &l->down, &l->down_b, run->ff2, n, run->xn, run->act);
    }
}

/* A branch's output into the residual, times its gate where the layer has one. */
static void add_gated(vision_run *run, const weight *gate, size_t count)
{
    float g = gate->data ? *(const float *)gate->data : 1.0f;
    for (size_t i = 0; i < count; i++)
        run->x[i] += g * run->xn[i];
}

/* Block l over run->x, its attention within run->window's windows unless full. */
static void layer_block(vision_run *run, const vision_layer *l, bool full)
{
    const corral_mmproj *mm = run->mm;
    const vision_hparams *hp = &mm->hp;
    size_t count = run->n_patches * hp->n_embd;
    vision_norm_rows(mm, &l->ln1, &l->ln1_b, run->x, run->xn, run->n_patches);
    block_attention_step(run, l, full ? NULL : run->window);
    if (l->attn_post_norm.data)
        vision_norm_rows(mm, &l->attn_post_norm, NULL, run->xn, run->xn, run->n_patches);
    add_gated(run, &l->attn_out_gate, count);
    vision_norm_rows(mm, &l->ln2, &l->ln2_b, run->x, run->xn, run->n_patches);
    block_ffn_step(run, l);
    if (l->ffn_post_norm.data)
        vision_norm_rows(mm, &l->ffn_post_norm, NULL, run->xn, run->xn, run->n_patches);
    add_gated(run, &l->ffn_out_gate, count);
    if (l->out_scale.data) { /* one value for every channel, or one per channel */
        const float *s = l->out_scale.data;
        size_t E = hp->n_embd, per_channel = l->out_scale.n_in == E;
        for (size_t i = 0; i < count; i++)
            run->x[i] *= s[per_channel ? i % E : 0];
    }
}

void vision_block(vision_run *run, uint32_t il)
{
    const vision_hparams *hp = &run->mm->hp;
    layer_block(run, &run->mm->layers[il], hp->n_wa_pattern == 0 ||
                                               (il + 1) % hp->n_wa_pattern == 0);
}

void vision_block_of(vision_run *run, const vision_layer *l)
{
    layer_block(run, l, true);
}

/* ---- the blocks on a GPU ---- */

/* The blocks a kind runs: llava's up to its deepest feature layer, the others' all (as does
 * llava's whose only feature layer is the first: none run, but they take their room). */
static uint32_t blocks_run(const corral_mmproj *mm)
{
    return mm->n_run_layers ? mm->n_run_layers : mm->hp.n_layer;
}

/* The tower's blocks in the order a GPU holds them, and the rows of its largest run; NULL
 * with the reason when a block needs what the device does not run. */
static const vision_layer **gpu_tower(const corral_mmproj *mm, uint32_t *n, uint32_t *rows,
                                      corral_error *err)
{
    assert(mm->kind->gpu_rows); /* every kind's but mllama's, which has its own */
    size_t most = mm->kind->gpu_rows(mm);
    /* the attention's tokens take five words a row, addressed by 32-bit offsets (vk_vision.c) */
    if (most == 0 || most > UINT32_MAX / 5) {
        corral_error_set(err, "%s's tower runs of %zu rows are beyond a GPU run",
                         mm->kind->name, most);
        return NULL;
    }
    *n = blocks_run(mm);
    *rows = (uint32_t)most;
    for (uint32_t il = 0; il < *n; il++)
        if (!gpu_vision_supports(&mm->hp, &mm->layers[il])) {
            corral_error_set(err, "%s's tower block %u has a form the GPU does not run",
                             mm->kind->name, il);
            return NULL;
        }
    const vision_layer **blocks = calloc(*n ? *n : 1, sizeof *blocks);
    if (!blocks) {
        corral_error_set(err, "out of memory");
        return NULL;
    }
    for (uint32_t il = 0; il < *n; il++)
        blocks[il] = &mm->layers[il];
    return blocks;
}

size_t vision_gpu_rows_of_pixels(const corral_mmproj *mm)
{
    corral_image_params params;
    corral_mmproj_image_params(mm, &params);
    return (size_t)(params.max_pixels / ((uint64_t)mm->hp.patch_size * mm->hp.patch_size));
}

bool vision_gpu_bytes(const corral_mmproj *mm, int device, uint64_t *out, corral_error *err)
{
    uint32_t n, rows;
    *out = 0;
    const vision_layer **blocks = gpu_tower(mm, &n, &rows, err);
    bool ok = blocks && gpu_vision_bytes(device, &mm->hp, blocks, n, rows, false, out, err);
    free(blocks);
    return ok;
}

bool vision_use_gpu(corral_mmproj *mm, int device, corral_error *err)
{
    uint32_t n, rows;
    const vision_layer **blocks = gpu_tower(mm, &n, &rows, err);
    if (blocks)
        mm->gpu = gpu_vision_create(device, &mm->hp, blocks, n, rows, false, err);
    free(blocks);
    return mm->gpu != NULL;
}

bool vision_cancelled(const corral_cancel *cancel, corral_error *err)
{
    if (!cancel || !cancel->requested(cancel->user))
        return false;
    corral_error_set(err, "%s", CORRAL_CANCELLED);
    return true;
}

bool vision_run_blocks(vision_run *run, uint32_t first, uint32_t count, corral_error *err)
{
    const corral_mmproj *mm = run->mm;
    assert(first <= blocks_run(mm) && count <= blocks_run(mm) - first);
    if (vision_cancelled(run->cancel, err))
        return false;
    if (mm->gpu && run->n_patches <= gpu_vision_max_rows(mm->gpu)) {
        gpu_vision_rows rows = {.x = run->x,
                                .n_rows = (uint32_t)run->n_patches,
                                .padding = run->padding,
                                .rope_cs = run->rope_cs,
                                .rope_adjacent = run->rope_adjacent,
                                .rope_halves = run->rope_split,
                                .kq_scale = run->kq_scale,
                                .v_norm = run->v_norm,
                                .window = run->window};
        return gpu_vision_run(mm->gpu, &rows, first, count, err);
    }
    for (uint32_t il = first; il < first + count; il++) {
        if (il > first && vision_cancelled(run->cancel, err))
            return false;
        vision_block(run, il);
    }
    return true;
}

/* Pairs [0, d/4) turn by row * s^i, pairs [d/4, d/2) by column * s^(i - d/4),
 * s = 10000^(-4/d), each angle grown by repeated multiplication as ggml's rotary cache does
 * (its vision M-RoPE: two sections of d/4 pairs, each restarting from the position). */
void vision_patch_angles(const uint32_t *at, size_t n, size_t d, float *cs)
{
    size_t quarter = d / 4;
    float s = powf(10000.0f, -2.0f / (float)(d / 2));
    for (size_t t = 0; t < n; t++) {
        float *row = cs + t * d;
        for (size_t part = 0; part < 2; part++) {
            float theta = (float)at[2 * t + part];
            for (size_t i = 0; i < quarter; i++) {
                row[2 * (part * quarter + i)] = cosf(theta);
                row[2 * (part * quarter + i) + 1] = sinf(theta);
                theta *= s;
            }
        }
    }
}

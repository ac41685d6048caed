/*
 * The minicpm-v projector (clip.projector_type "resampler", MiniCPM-V 2.5 / 2.6 / 4.x) over a
 * SigLIP tower. The tower is gemma3's (learned position embeddings, LayerNorm blocks, GELU
 * MLP, an optional final LayerNorm) except that an image part may be any whole number of
 * patches per side: its patches look up a 70 x 70 position table by bucket, row
 * floor(70 * i / rows) and column floor(70 * j / cols), as SigLIP's NaViT variant stretches
 * the table over the image. The resampler then turns any number of patches into n_query
 * tokens: the patches through resampler.kv and a LayerNorm become the values, the values
 * plus a 2-D sine-cosine embedding of each patch's (column, row) the keys, the learned
 * queries after their own LayerNorm attend to them in heads of 128 (llama.cpp fixes the head
 * width), and the result goes through the output projection, a LayerNorm and resampler.proj.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "blocks.h"
#include "mmproj.h"
#include "tensor_type.h"
#include "util/checked.h"
#include "vision_order.h"

/* The position table's side; llama.cpp's lookup assumes it whatever the file's size. */
enum { POS_SIDE = 70 };
/* The resampler's head width, fixed in llama.cpp's graph. */
enum { RESAMPLER_HEAD = 128 };
/* Far above the 64 or 96 queries of the real models: a hostile count cannot make the
 * encoder allocate without end. */
enum { MAX_QUERIES = 4096 };

static bool read_version(corral_mmproj *mm, corral_error *err)
{
    const char *path = gguf_path(mm->file);
    int32_t version = 0;
    uint32_t queries = 0;
    bool gelu = false, silu = false;
    if (!gguf_get_i32_opt(mm->file, "clip.minicpmv_version", &version, err) ||
        !gguf_get_u32_opt(mm->file, "clip.minicpmv_query_num", &queries, err) ||
        !gguf_get_bool_opt(mm->file, "clip.use_gelu", &gelu, err) ||
        !gguf_get_bool_opt(mm->file, "clip.use_silu", &silu, err))
        return false;
    if (version == 0) /* llama.cpp's default: MiniCPM-V 2.5 */
        version = 2;
    /* 2: MiniCPM-V 2.5; 3: 2.6; 4: MiniCPM-o 2.6; 5: 4.0; 6: 4.5; 100045: MiniCPM-o 4.5.
     * They share the graph and differ in their default query count and slice marks. */
    if (version != 2 && version != 3 && version != 4 && version != 5 && version != 6 &&
        version != 100045) {
        corral_error_set(err, "%s: minicpmv_version %d is not supported", path, (int)version);
        return false;
    }
    if (queries == 0)
        queries = version == 2 ? 96 : 64;
    if (queries > MAX_QUERIES) {
        corral_error_set(err, "%s: clip.minicpmv_query_num is %u, more than %u", path, queries,
                         (unsigned)MAX_QUERIES);
        return false;
    }
    /* the tower's MLP activation as llama.cpp picks it: GELU, else quick GELU; a plain SiLU
     * MLP has no kind here */
    if (silu) {
        corral_error_set(err, "%s: a resampler tower with clip.use_silu is not supported", path);
        return false;
    }
    mm->hp.ffn = gelu ? VISION_FFN_GELU : VISION_FFN_GELU_QUICK;
    mm->hp.minicpmv_version = version;
    mm->hp.n_query = queries;
    return true;
}

static bool minicpmv_bind(corral_mmproj *mm, corral_error *err)
{
    const vision_hparams *hp = &mm->hp;
    const char *path = gguf_path(mm->file);
    if (!read_version(mm, err))
        return false;
    if (hp->image_size % hp->patch_size != 0) {
        corral_error_set(err, "%s: a %u-pixel image does not split into %u-pixel patches", path,
                         hp->image_size, hp->patch_size);
        return false;
    }
    const gguf_tensor *proj = mmproj_find_tensor(mm, "resampler.proj.weight");
    /* the output is as wide as the resampler: llama.cpp takes proj's input width for both */
    if (!proj || proj->ne[0] < RESAMPLER_HEAD || proj->ne[0] > (1 << 16) ||
        proj->ne[0] % RESAMPLER_HEAD != 0 || proj->ne[1] != proj->ne[0]) {
        corral_error_set(err, "%s: tensor 'resampler.proj.weight' must be a square matrix whose "
                         "side is a multiple of %d", path, RESAMPLER_HEAD);
        return false;
    }
    size_t E = hp->n_embd, T = (size_t)proj->ne[0];
    if (!mmproj_bind_matrix(mm, &mm->pos_embd, "v.position_embd.weight", E,
                            (size_t)POS_SIDE * POS_SIDE, true, err) ||
        !mmproj_bind_matrix(mm, &mm->rs_query, "resampler.query", T, hp->n_query, true, err) ||
        !mmproj_bind_matrix(mm, &mm->rs_kv, "resampler.kv.weight", E, T, true, err) ||
        !mmproj_bind_matrix(mm, &mm->rs_q, "resampler.attn.q.weight", T, T, true, err) ||
        !mmproj_bind_vector(mm, &mm->rs_q_b, "resampler.attn.q.bias", T, true, err) ||
        !mmproj_bind_matrix(mm, &mm->rs_k, "resampler.attn.k.weight", T, T, true, err) ||
        !mmproj_bind_vector(mm, &mm->rs_k_b, "resampler.attn.k.bias", T, true, err) ||
        !mmproj_bind_matrix(mm, &mm->rs_v, "resampler.attn.v.weight", T, T, true, err) ||
        !mmproj_bind_vector(mm, &mm->rs_v_b, "resampler.attn.v.bias", T, true, err) ||
        !mmproj_bind_matrix(mm, &mm->rs_o, "resampler.attn.out.weight", T, T, true, err) ||
        !mmproj_bind_vector(mm, &mm->rs_o_b, "resampler.attn.out.bias", T, true, err) ||
        !mmproj_bind_vector(mm, &mm->rs_ln_q, "resampler.ln_q.weight", T, true, err) ||
        !mmproj_bind_vector(mm, &mm->rs_ln_q_b, "resampler.ln_q.bias", T, true, err) ||
        !mmproj_bind_vector(mm, &mm->rs_ln_kv, "resampler.ln_kv.weight", T, true, err) ||
        !mmproj_bind_vector(mm, &mm->rs_ln_kv_b, "resampler.ln_kv.bias", T, true, err) ||
        !mmproj_bind_vector(mm, &mm->rs_ln_post, "resampler.ln_post.weight", T, true, err) ||
        !mmproj_bind_vector(mm, &mm->rs_ln_post_b, "resampler.ln_post.bias", T, true, err) ||
        !mmproj_bind_matrix(mm, &mm->rs_proj, "resampler.proj.weight", T, T, true, err))
        return false;
    mm->hp.n_embd_text = (uint32_t)T;
    return true;
}

/* The resampler's working rows: n patches and nq queries of T values, per-head key tiles
 * and transposed values, one head's scores, and the products' activations. */
typedef struct resampler_bufs {
    float *v, *k, *q, *qn, *attn, *out, *kt, *vt, *qh, *scores, *pe;
    void *act;
} resampler_bufs;

static void resampler_free(resampler_bufs *b)
{
    float *all[] = {b->v, b->k, b->q, b->qn, b->attn, b->out, b->kt, b->vt, b->qh, b->scores,
                    b->pe};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        free(all[i]);
    free(b->act);
    memset(b, 0, sizeof *b);
}

static bool resampler_alloc(const corral_mmproj *mm, size_t n, resampler_bufs *b,
                            corral_error *err)
{
    size_t T = mm->hp.n_embd_text, nq = mm->hp.n_query, d = RESAMPLER_HEAD;
    memset(b, 0, sizeof *b);
    bool ok = true;
    b->v = vision_alloc_rows(n, T, &ok);
    b->k = vision_alloc_rows(n, T, &ok);
    b->pe = vision_alloc_rows(n, T, &ok);
    b->q = vision_alloc_rows(nq, T, &ok);
    b->qn = vision_alloc_rows(nq, T, &ok);
    b->attn = vision_alloc_rows(nq, T, &ok);
    b->out = vision_alloc_rows(nq, T, &ok);
    b->kt = vision_alloc_rows(vision_key_tiles(n) * VISION_KEY_TILE, d, &ok);
    b->vt = vision_alloc_rows(d, n, &ok);
    b->qh = vision_alloc_rows(nq, d, &ok);
    b->scores = vision_alloc_rows(nq, n + d, &ok); /* scores, then the head's outputs */
    /* the products' activations: the widest input row, for as many rows as any takes */
    const weight *ws[] = {&mm->rs_kv, &mm->rs_q, &mm->rs_k, &mm->rs_v, &mm->rs_o, &mm->rs_proj};
    size_t widest = 0, bytes;
    for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++) {
        size_t r = quant_act_row_bytes(ws[i]->type, ws[i]->n_in);
        widest = r > widest ? r : widest;
    }
    if (ok && checked_mul_size(widest ? widest : 1, n > nq ? n : nq, &bytes))
        ok = (b->act = malloc(bytes)) != NULL;
    else
        ok = false;
    if (!ok) {
        corral_error_set(err, "cannot allocate the resampler's activations for %zu patches", n);
        resampler_free(b);
    }
    return ok;
}

/* Row r of a bound matrix as floats. */
static void matrix_row(const weight *w, size_t r, float *out)
{
    w->ops->dequantize((const uint8_t *)w->data + r * w->row_bytes, out, w->n_in);
}

/* The keys' 2-D embedding of each of n patches (cols per row): T/4 values each of
 * sin(col * w_i), cos(col * w_i), sin(row * w_i), cos(row * w_i), w_i = 10000^(-i / (T/4)),
 * in float as llama.cpp computes them. */
static void sincos_embedding(float *pe, size_t n, size_t cols, size_t T)
{
    size_t quarter = T / 4;
    for (size_t t = 0; t < n; t++) {
        float col = (float)(t % cols), row = (float)(t / cols);
        float *dst = pe + t * T;
        for (size_t i = 0; i < quarter; i++) {
            float omega = 1.0f / powf(10000.0f, (float)i / (float)quarter);
            float tx = omega * col, ty = omega * row;
            dst[i] = sinf(tx);
            dst[quarter + i] = cosf(tx);
            dst[2 * quarter + i] = sinf(ty);
            dst[3 * quarter + i] = cosf(ty);
        }
    }
}

/* The resampler over n patch states (rows of the tower's width) into out (n_query rows). */
static void resample(const corral_mmproj *mm, threadpool *pool, const float *patches, size_t n,
                     size_t cols, resampler_bufs *b, float *out)
{
    size_t T = mm->hp.n_embd_text, nq = mm->hp.n_query, d = RESAMPLER_HEAD, H = T / d;
    float eps = mm->hp.eps;
    vision_matmul(pool, &mm->rs_kv, NULL, patches, n, b->v, b->act);
    for (size_t t = 0; t < n; t++)
        vision_layernorm_row(b->v + t * T, mm->rs_ln_kv.data, mm->rs_ln_kv_b.data, T, eps,
                             b->v + t * T);
    sincos_embedding(b->pe, n, cols, T);
    for (size_t i = 0; i < n * T; i++)
        b->pe[i] += b->v[i]; /* the keys' input */
    for (size_t r = 0; r < nq; r++) {
        matrix_row(&mm->rs_query, r, b->qn + r * T);
        vision_layernorm_row(b->qn + r * T, mm->rs_ln_q.data, mm->rs_ln_q_b.data, T, eps,
                             b->qn + r * T);
    }
    vision_matmul(pool, &mm->rs_q, &mm->rs_q_b, b->qn, nq, b->q, b->act);
    vision_matmul(pool, &mm->rs_k, &mm->rs_k_b, b->pe, n, b->k, b->act);
    vision_matmul(pool, &mm->rs_v, &mm->rs_v_b, b->v, n, b->pe, b->act); /* values into pe */
    const float *values = b->pe;
    float scale = 1.0f / sqrtf((float)d);
    for (size_t h = 0; h < H; h++) {
        /* keys in tiles of 16 (vision_order.h), values transposed, the head's queries */
        memset(b->kt, 0, vision_key_tiles(n) * VISION_KEY_TILE * d * sizeof *b->kt);
        for (size_t t = 0; t < n; t++) {
            float *key = b->kt + (t / VISION_KEY_TILE * d) * VISION_KEY_TILE + t % VISION_KEY_TILE;
            for (size_t c = 0; c < d; c++) {
                key[c * VISION_KEY_TILE] = b->k[t * T + h * d + c];
                b->vt[c * n + t] = values[t * T + h * d + c];
            }
        }
        for (size_t i = 0; i < nq; i++)
            memcpy(b->qh + i * d, b->q + i * T + h * d, d * sizeof *b->qh);
        /* as the tower's attention: the scores by ggml's vector dot (a permuted view), its
         * softmax, then the weights times the values by its matrix kernel when it would
         * take them */
        vision_scores(b->qh, nq, b->kt, n, d, b->scores);
        for (size_t i = 0; i < nq; i++) {
            float *p = b->scores + i * n;
            float inv = (float)(1.0 / vision_softmax_row(p, n, scale));
            for (size_t j = 0; j < n; j++)
                p[j] *= inv;
        }
        float *head_out = b->scores + nq * n;
        vision_matmul_rows(b->vt, n, 0, d, b->scores, nq, head_out, d, n % 16 == 0 && nq >= 2);
        for (size_t i = 0; i < nq; i++)
            memcpy(b->attn + i * T + h * d, head_out + i * d, d * sizeof *head_out);
    }
    vision_matmul(pool, &mm->rs_o, &mm->rs_o_b, b->attn, nq, b->out, b->act);
    for (size_t r = 0; r < nq; r++)
        vision_layernorm_row(b->out + r * T, mm->rs_ln_post.data, mm->rs_ln_post_b.data, T, eps,
                             b->out + r * T);
    vision_matmul(pool, &mm->rs_proj, NULL, b->out, nq, out, b->act);
}

static bool minicpmv_encode(const corral_mmproj *mm, threadpool *pool,
                            const corral_cancel *cancel, const float *pixels, uint32_t nx,
                            uint32_t ny, corral_image_embd *out, corral_error *err)
{
    const vision_hparams *hp = &mm->hp;
    size_t p = hp->patch_size;
    if (nx % p != 0 || ny % p != 0) {
        corral_error_set(err, "the resampler encodes images whose sides are multiples of %zu, "
                         "not %u x %u", p, nx, ny);
        return false;
    }
    size_t cols = nx / p, rows = ny / p, n = cols * rows, E = hp->n_embd;
    size_t nq = hp->n_query, T = hp->n_embd_text;
    uint32_t *at = malloc(2 * n * sizeof *at);
    out->data = malloc(nq * T * sizeof *out->data);
    if (!at || !out->data) {
        free(at);
        corral_error_set(err, "out of memory");
        return false;
    }
    vision_run run;
    resampler_bufs bufs;
    if (!vision_run_init(&run, mm, pool, cancel, n, 0, err)) {
        free(at);
        return false;
    }
    if (!resampler_alloc(mm, n, &bufs, err)) {
        vision_run_free(&run);
        free(at);
        return false;
    }
    for (size_t t = 0; t < n; t++) {
        at[2 * t] = (uint32_t)(t / cols);
        at[2 * t + 1] = (uint32_t)(t % cols);
    }
    vision_patch_embed(&run, pixels, nx, at);
    free(at);
    for (size_t t = 0; t < n; t++) {
        /* the bucket of the patch's row and column, in double as llama.cpp floors it */
        size_t by = (size_t)floor(70.0 * (double)(t / cols) / (double)rows);
        size_t bx = (size_t)floor(70.0 * (double)(t % cols) / (double)cols);
        matrix_row(&mm->pos_embd, by * POS_SIDE + bx, run.xn);
        for (size_t e = 0; e < E; e++)
            run.x[t * E + e] += run.xn[e];
    }
    if (!vision_run_blocks(&run, 0, hp->n_layer, err)) {
        resampler_free(&bufs);
        vision_run_free(&run);
        return false;
    }
    if (mm->post_ln.data)
        vision_norm_rows(mm, &mm->post_ln, &mm->post_ln_b, run.x, run.x, n);
    resample(mm, pool, run.x, n, cols, &bufs, out->data);
    resampler_free(&bufs);
    vision_run_free(&run);
    out->n_tokens = nq;
    out->nx = (uint32_t)nq;
    out->ny = 1;
    out->n_embd = (uint32_t)T;
    return true;
}

/*
 * The text around an image's parts, as mtmd lays them out (its ids, here their texts, which
 * the vocabulary holds as tokens of their own): the overview in <image> ... </image>; then
 * for MiniCPM-V 2.6 and later each slice in <slice> ... </slice>, for 2.5 each in
 * <image> ... </image> with all of them inside one <slice> ... </slice>; a newline after
 * every row of slices but the last.
 */
static const char *minicpmv_part_text(const corral_mmproj *mm, uint32_t cols, uint32_t rows,
                                      size_t part)
{
    bool v25 = mm->hp.minicpmv_version == 2;
    size_t slices = (size_t)cols * rows;
    if (part == 0)
        return "<image>";
    if (part > slices)
        return slices == 0 ? "</image>" : v25 ? "</image></slice>" : "</slice>";
    if (part == 1)
        return v25 ? "</image><slice><image>" : "</image><slice>";
    bool row_end = (part - 1) % cols == 0; /* the slice before this one ended a row */
    if (v25)
        return row_end ? "</image>\n<image>" : "</image><image>";
    return row_end ? "</slice>\n<slice>" : "</slice><slice>";
}

/* A part is about the square's area, aspect kept, each side rounded to the nearest whole
 * patch (image/slices.h): side + 1 patches a side hold every part up to an aspect of about
 * 14; a thinner one's blocks stay on the CPU. */
static size_t minicpmv_gpu_rows(const corral_mmproj *mm)
{
    size_t side = mm->hp.image_size / mm->hp.patch_size + 1;
    return side * side;
}

const projector_kind projector_minicpmv = {
    .name = "resampler",
    .image_begin = "<image>",
    .image_end = "</image>",
    .resize = CORRAL_IMAGE_STRETCH,
    .norm = VISION_LAYER_NORM,
    .ffn = VISION_FFN_GELU,
    .bind = minicpmv_bind,
    .part_text = minicpmv_part_text,
    .encode = minicpmv_encode,
    .gpu_rows = minicpmv_gpu_rows,
};

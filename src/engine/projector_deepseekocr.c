/*
 * The deepseekocr projector (DeepSeek-OCR) as llama.cpp d32676d77 runs it. Every view of the
 * image (image/views.h: the global view, 1024 pixels a side, and any 640-pixel tiles) goes
 * through two towers:
 *
 * - SAM: 16-pixel patches through a convolution with bias, learned positions for 64 x 64
 *   patches (bicubic-resampled, ggml's a = -0.75 kernel, for a tile's 40 x 40), then LayerNorm
 *   blocks (epsilon 1e-6) with a fused qkv and biases, attention within 14 x 14 windows (the
 *   grid padded with zero rows after the norm, which still attend as keys) except in blocks 2,
 *   5, 8 and 11 (llama.cpp's fixed list), which attend globally; every score gets the
 *   decomposed relative positions of SAM, q . Rh[qy - ky] + q . Rw[qx - kx], with the tables
 *   linearly resampled when their length is not 2 x side - 1 (a tile's global blocks); a GELU
 *   MLP. Then the neck: a 1 x 1 convolution, LayerNorm over channels, a 3 x 3 one, LayerNorm,
 *   and two 3 x 3 stride-2 convolutions (net_2, net_3), no biases: a quarter of the patches a
 *   side. llama.cpp's convolutions round both their inputs and kernels to F16 (im2col).
 * - CLIP over those states as patches: a class embedding first, learned positions, v.pre_ln,
 *   LayerNorm blocks (epsilon 1e-5 whatever the file says) with a quick-GELU MLP, v.post_ln
 *   where the file has it; the class token dropped. A tile's 10 x 10 grid takes positions
 *   from llama.cpp's resampling of the table, which treats the table's first 256 rows as the
 *   16 x 16 grid (its class row among them), reads the [E, 256] matrix as one picture with the
 *   embedding along x, and gives the last patch the table's last row; so does Corral.
 *
 * Each token is then [CLIP state, SAM state] through mm.model.fc. The global view's 16 x 16
 * tokens come row by row, each row followed by v.image_newline, then v.view_seperator; a row
 * of tiles comes as its token rows, each the tiles' rows side by side and a newline. The
 * image is the rows of tiles in order, then the global view; the prompt carries nothing
 * before it and a newline after (llama.cpp's mtmd). The pixels come as image/views.h lays
 * them: the grid, then the global view's pixels in rows of the grid's width.
 */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blocks.h"
#include "mmproj.h"
#include "quant_half.h"
#include "tensor_type.h"
#include "util/checked.h"
#include "vision_order.h"

/* llama.cpp's sizes for this projector, whatever the file says: the global view, a tile, the
 * SAM patch, and the two stride-2 convolutions' reduction. */
enum { BASE_SIZE = 1024, TILE_SIZE = 640, SAM_PATCH = 16, SAM_REDUCE = 4 };
enum { MAX_SAM_LAYERS = 64, MAX_WINDOW = 256, MAX_TABLE = 4096, MAX_TILES = 32 };

static const uint32_t global_layers[] = {2, 5, 8, 11};

typedef struct sam_layer {
    weight ln1, ln1_b, ln2, ln2_b, qkv, qkv_b, out, out_b, up, up_b, down, down_b;
    float *rel_h, *rel_w; /* [len][head width], owned */
    uint32_t rel_h_len, rel_w_len;
} sam_layer;

/* A convolution's kernel as F16 values widened, a row of in * k * k per output channel. */
typedef struct conv {
    float *w;
    uint32_t in, out, k;
} conv;

struct deepseekocr_sam {
    uint32_t n_embd, n_head, n_ff, n_layer, window;
    uint32_t pos_side;      /* the position table's grid side */
    float *pos;             /* [side][side][n_embd], owned */
    const float *patch_b;   /* [n_embd] */
    conv patch, neck0, neck2, net2, net3;
    weight neck1, neck1_b, neck3, neck3_b;
    uint32_t clip_side;     /* the CLIP position table's grid side (rows: side^2 + 1) */
    float *clip_pos;        /* that table, F32 */
    weight newline, separator;
    uint32_t min_tiles, max_tiles;
    sam_layer layers[];
};

void deepseekocr_free(struct deepseekocr_sam *sam)
{
    if (!sam)
        return;
    conv *convs[] = {&sam->patch, &sam->neck0, &sam->neck2, &sam->net2, &sam->net3};
    for (size_t i = 0; i < sizeof convs / sizeof convs[0]; i++)
        free(convs[i]->w);
    for (uint32_t il = 0; il < sam->n_layer; il++) {
        free(sam->layers[il].rel_h);
        free(sam->layers[il].rel_w);
    }
    free(sam->pos);
    free(sam->clip_pos);
    free(sam);
}

/* ---- binding ---- */

static bool read_key(const corral_mmproj *mm, const char *clip_key, const char *ollama_key,
                     uint32_t *out, uint32_t max, bool required, corral_error *err)
{
    char key[96];
    snprintf(key, sizeof key, "%s.%s", mm->key_prefix, mm->ollama_names ? ollama_key : clip_key);
    if (!(required ? gguf_get_u32 : gguf_get_u32_opt)(mm->file, key, out, err))
        return false;
    if (*out > max) {
        corral_error_set(err, "%s: %s is %u, more than %u", gguf_path(mm->file), key, *out, max);
        return false;
    }
    return true;
}

/* A table of ne0 x ne1 x ne2 values (ne1 0: any from 1 to MAX_TABLE, into *ne1_out) as F32,
 * owned: llama.cpp's converter stores these F32, ollama's may not. */
static float *load_table(const corral_mmproj *mm, const char *name, uint32_t ne0, uint32_t ne1,
                         uint32_t ne2, uint32_t *ne1_out, corral_error *err)
{
    const gguf_tensor *t = mmproj_find_tensor(mm, name);
    if (!t) {
        corral_error_set(err, "%s: missing tensor '%s'", gguf_path(mm->file), name);
        return NULL;
    }
    const quant_ops *ops = quant_ops_active(t->type);
    bool ok = ops && ops->dequantize && t->ne[0] == (int64_t)ne0 &&
              (ne1 ? t->ne[1] == (int64_t)ne1 : t->ne[1] >= 1 && t->ne[1] <= MAX_TABLE) &&
              t->ne[2] == (int64_t)ne2 && t->ne[3] == 1;
    if (!ok) {
        corral_error_set(err, "%s: tensor '%s' must be [%u, %s, %u] of a supported type, not %s [%lld, %lld, %lld, %lld]",
                         gguf_path(mm->file), name, ne0, ne1 ? "that" : "1 to 4096", ne2,
                         tensor_type_name(t->type), (long long)t->ne[0], (long long)t->ne[1],
                         (long long)t->ne[2], (long long)t->ne[3]);
        return NULL;
    }
    size_t rows = (size_t)t->ne[1] * ne2, row_bytes = t->size_bytes / rows;
    float *out = malloc(rows * ne0 * sizeof *out);
    if (!out) {
        corral_error_set(err, "out of memory");
        return NULL;
    }
    for (size_t r = 0; r < rows; r++)
        ops->dequantize((const uint8_t *)t->data + r * row_bytes, out + r * ne0, ne0);
    if (ne1_out)
        *ne1_out = (uint32_t)t->ne[1];
    return out;
}

/* A k x k kernel from in to out channels, widened from its F16 rounding. */
static bool bind_conv(corral_mmproj *mm, conv *c, const char *name, uint32_t k, uint32_t in,
                      uint32_t out, corral_error *err)
{
    weight w;
    size_t n_in = (size_t)in * k * k;
    if (!mmproj_bind_conv(mm, &w, name, in, n_in, out, true, err))
        return false;
    const gguf_tensor *t = mmproj_find_tensor(mm, name);
    if (t->ne[0] != (int64_t)k) {
        corral_error_set(err, "%s: tensor '%s' must be a %u x %u kernel", gguf_path(mm->file),
                         name, k, k);
        return false;
    }
    if (!(c->w = malloc(n_in * out * sizeof *c->w))) {
        corral_error_set(err, "out of memory");
        return false;
    }
    for (size_t o = 0; o < out; o++) {
        float *row = c->w + o * n_in;
        w.ops->dequantize((const uint8_t *)w.data + o * w.row_bytes, row, n_in);
        for (size_t i = 0; i < n_in; i++)
            row[i] = quant_f16_to_f32(quant_f32_to_f16(row[i]));
    }
    c->in = in;
    c->out = out;
    c->k = k;
    return true;
}

/* out channels of a kernel tensor [k, k, in, out], or 0 */
static uint32_t kernel_out(const corral_mmproj *mm, const char *name)
{
    const gguf_tensor *t = mmproj_find_tensor(mm, name);
    return t && t->ne[3] >= 1 && t->ne[3] <= (1 << 16) ? (uint32_t)t->ne[3] : 0;
}

static bool bind_sam_layer(corral_mmproj *mm, struct deepseekocr_sam *s, uint32_t il,
                           corral_error *err)
{
    sam_layer *l = &s->layers[il];
    size_t C = s->n_embd, F = s->n_ff, d = C / s->n_head;
    char name[96];
#define NAME(suffix) (snprintf(name, sizeof name, "v.sam.blk.%u." suffix, il), name)
    if (!mmproj_bind_vector(mm, &l->ln1, NAME("pre_ln.weight"), C, true, err) ||
        !mmproj_bind_vector(mm, &l->ln1_b, NAME("pre_ln.bias"), C, true, err) ||
        !mmproj_bind_vector(mm, &l->ln2, NAME("post_ln.weight"), C, true, err) ||
        !mmproj_bind_vector(mm, &l->ln2_b, NAME("post_ln.bias"), C, true, err) ||
        !mmproj_bind_matrix(mm, &l->qkv, NAME("attn.qkv.weight"), C, 3 * C, true, err) ||
        !mmproj_bind_vector(mm, &l->qkv_b, NAME("attn.qkv.bias"), 3 * C, true, err) ||
        !mmproj_bind_matrix(mm, &l->out, NAME("attn.out.weight"), C, C, true, err) ||
        !mmproj_bind_vector(mm, &l->out_b, NAME("attn.out.bias"), C, true, err) ||
        !mmproj_bind_matrix(mm, &l->up, NAME("mlp.lin1.weight"), C, F, true, err) ||
        !mmproj_bind_vector(mm, &l->up_b, NAME("mlp.lin1.bias"), F, true, err) ||
        !mmproj_bind_matrix(mm, &l->down, NAME("mlp.lin2.weight"), F, C, true, err) ||
        !mmproj_bind_vector(mm, &l->down_b, NAME("mlp.lin2.bias"), C, true, err) ||
        !(l->rel_h = load_table(mm, NAME("attn.pos_h.weight"), (uint32_t)d, 0, 1, &l->rel_h_len,
                                err)) ||
        !(l->rel_w = load_table(mm, NAME("attn.pos_w.weight"), (uint32_t)d, 0, 1, &l->rel_w_len,
                                err)))
        return false;
#undef NAME
    return true;
}

static bool deepseekocr_bind(corral_mmproj *mm, corral_error *err)
{
    vision_hparams *hp = &mm->hp;
    const char *path = gguf_path(mm->file);
    uint32_t n_layer = 0, C = 0, heads = 0, min_tiles = 2, max_tiles = 9;
    if (!read_key(mm, "vision.sam.block_count", "sam.block_count", &n_layer, MAX_SAM_LAYERS, true,
                  err) ||
        !read_key(mm, "vision.sam.embedding_length", "sam.embedding_length", &C, 1 << 16, true,
                  err) ||
        !read_key(mm, "vision.sam.head_count", "sam.head_count", &heads, 1 << 16, true, err) ||
        !read_key(mm, "vision.preproc_min_tiles", "preproc_min_tiles", &min_tiles, MAX_TILES,
                  false, err) ||
        !read_key(mm, "vision.preproc_max_tiles", "preproc_max_tiles", &max_tiles, MAX_TILES,
                  false, err))
        return false;
    uint32_t window = mm->ollama_names ? 14 : hp->window_pixels;
    if (n_layer == 0 || C == 0 || heads == 0 || C % heads != 0 || window == 0 ||
        window > MAX_WINDOW || min_tiles == 0 || min_tiles > max_tiles) {
        corral_error_set(err, "%s: inconsistent SAM encoder (%u blocks of width %u, %u heads, "
                         "windows of %u; %u to %u tiles)",
                         path, n_layer, C, heads, window, min_tiles, max_tiles);
        return false;
    }
    /* the MLP's width is the file's lin1 */
    const gguf_tensor *lin1 = mmproj_find_tensor(mm, "v.sam.blk.0.mlp.lin1.weight");
    uint32_t F = lin1 && lin1->ne[1] >= 1 && lin1->ne[1] <= (1 << 18) ? (uint32_t)lin1->ne[1] : 0;
    uint32_t neck = kernel_out(mm, "v.sam.neck.0.weight");
    uint32_t net2 = kernel_out(mm, "v.sam.net_2.weight");
    if (!F || !neck || !net2) {
        corral_error_set(err, "%s: missing or malformed tensor '%s'", path,
                         !F      ? "v.sam.blk.0.mlp.lin1.weight"
                         : !neck ? "v.sam.neck.0.weight"
                                 : "v.sam.net_2.weight");
        return false;
    }
    struct deepseekocr_sam *s = calloc(1, sizeof *s + n_layer * sizeof s->layers[0]);
    if (!s) {
        corral_error_set(err, "out of memory");
        return false;
    }
    mm->sam = s;
    *s = (struct deepseekocr_sam){.n_embd = C, .n_head = heads, .n_ff = F, .n_layer = n_layer,
                                  .window = window, .min_tiles = min_tiles,
                                  .max_tiles = max_tiles};
    size_t E = hp->n_embd;
    const gguf_tensor *pos = mmproj_find_tensor(mm, "v.sam.pos_embd.weight");
    uint32_t side = pos && pos->ne[1] >= 1 && pos->ne[1] <= 1024 ? (uint32_t)pos->ne[1] : 0;
    weight patch_b;
    if (!bind_conv(mm, &s->patch, "v.sam.patch_embd.weight", SAM_PATCH, 3, C, err) ||
        !mmproj_bind_vector(mm, &patch_b, "v.sam.patch_embd.bias", C, true, err) ||
        !(s->pos = load_table(mm, "v.sam.pos_embd.weight", C, side ? side : 1, side ? side : 1,
                              NULL, err)) ||
        !bind_conv(mm, &s->neck0, "v.sam.neck.0.weight", 1, C, neck, err) ||
        !mmproj_bind_vector(mm, &s->neck1, "v.sam.neck.1.weight", neck, true, err) ||
        !mmproj_bind_vector(mm, &s->neck1_b, "v.sam.neck.1.bias", neck, true, err) ||
        !bind_conv(mm, &s->neck2, "v.sam.neck.2.weight", 3, neck, neck, err) ||
        !mmproj_bind_vector(mm, &s->neck3, "v.sam.neck.3.weight", neck, true, err) ||
        !mmproj_bind_vector(mm, &s->neck3_b, "v.sam.neck.3.bias", neck, true, err) ||
        !bind_conv(mm, &s->net2, "v.sam.net_2.weight", 3, neck, net2, err) ||
        !bind_conv(mm, &s->net3, "v.sam.net_3.weight", 3, net2, (uint32_t)E, err))
        return false;
    s->patch_b = patch_b.data;
    s->pos_side = side;
    for (uint32_t il = 0; il < n_layer; il++)
        if (!bind_sam_layer(mm, s, il, err))
            return false;
    /* CLIP: the class embedding, its positions (a square grid and the class row) */
    const gguf_tensor *cp = mmproj_find_tensor(mm, "v.position_embd.weight");
    uint32_t n_pos = cp && cp->ne[1] >= 2 && cp->ne[1] <= MAX_TABLE ? (uint32_t)cp->ne[1] : 0;
    uint32_t cs = (uint32_t)sqrt((double)(n_pos > 0 ? n_pos - 1 : 0));
    if (n_pos == 0 || cs * cs + 1 != n_pos) {
        corral_error_set(err, "%s: tensor 'v.position_embd.weight' must hold a square grid's "
                         "positions and the class token's", path);
        return false;
    }
    weight clip_pos, fc;
    const gguf_tensor *fct = mmproj_find_tensor(mm, "mm.model.fc.weight");
    size_t T = fct && fct->ne[1] >= 1 && fct->ne[1] <= (1 << 20) ? (size_t)fct->ne[1] : 0;
    if (!T) {
        corral_error_set(err, "%s: missing or malformed tensor 'mm.model.fc.weight'", path);
        return false;
    }
    if (!mmproj_bind_vector(mm, &mm->class_embd, "v.class_embd", E, true, err) ||
        !mmproj_bind_matrix(mm, &clip_pos, "v.position_embd.weight", E, n_pos, true, err) ||
        !mmproj_bind_vector(mm, &mm->pre_ln, "v.pre_ln.weight", E, true, err) ||
        !mmproj_bind_vector(mm, &mm->pre_ln_b, "v.pre_ln.bias", E, true, err) ||
        !mmproj_bind_matrix(mm, &fc, "mm.model.fc.weight", 2 * E, T, true, err) ||
        !mmproj_bind_vector(mm, &mm->mm0_b, "mm.model.fc.bias", T, true, err) ||
        !mmproj_bind_vector(mm, &s->newline, "v.image_newline", T, true, err) ||
        !mmproj_bind_vector(mm, &s->separator, "v.view_seperator", T, true, err))
        return false;
    mm->mm0 = fc;
    if (!(s->clip_pos = malloc((size_t)n_pos * E * sizeof *s->clip_pos))) {
        corral_error_set(err, "out of memory");
        return false;
    }
    for (size_t r = 0; r < n_pos; r++)
        clip_pos.ops->dequantize((const uint8_t *)clip_pos.data + r * clip_pos.row_bytes,
                                 s->clip_pos + r * E, E);
    s->clip_side = cs;
    /* llama.cpp's fixed sizes and the CLIP tower's epsilon */
    hp->image_size = BASE_SIZE;
    hp->patch_size = SAM_PATCH;
    hp->eps = 1e-5f;
    hp->n_embd_text = (uint32_t)T;
    return true;
}

/* ---- sizes ---- */

static size_t global_tokens(void)
{
    size_t g = BASE_SIZE / SAM_PATCH / SAM_REDUCE;
    return g * (g + 1) + 1;
}

/* The grid of tiles pixels nx x ny hold (0 x 0: the global view alone); false for a size the
 * projector does not take. */
static bool grid_of(const corral_mmproj *mm, uint32_t nx, uint32_t ny, uint32_t *cols,
                    uint32_t *rows)
{
    *cols = *rows = 0;
    if (nx == BASE_SIZE && ny == BASE_SIZE)
        return true;
    /* image/views.h's layout: the global view's pixels in rows of the grid's width */
    uint32_t global_rows = nx ? (uint32_t)(((uint64_t)BASE_SIZE * BASE_SIZE + nx - 1) / nx) : 0;
    if (nx == 0 || nx % TILE_SIZE != 0 || ny <= global_rows ||
        (ny - global_rows) % TILE_SIZE != 0)
        return false;
    *cols = nx / TILE_SIZE;
    *rows = (ny - global_rows) / TILE_SIZE;
    uint32_t n = *cols * *rows;
    return *cols <= MAX_TILES && *rows <= MAX_TILES && n >= mm->sam->min_tiles &&
           n <= mm->sam->max_tiles;
}

size_t deepseekocr_tokens(const corral_mmproj *mm, uint32_t nx, uint32_t ny)
{
    uint32_t cols, rows;
    if (!grid_of(mm, nx, ny, &cols, &rows))
        return 0;
    size_t t = TILE_SIZE / SAM_PATCH / SAM_REDUCE;
    return (size_t)rows * (t * cols + 1) * t + global_tokens();
}

void deepseekocr_image_params(const corral_mmproj *mm, corral_image_params *out)
{
    out->resize = CORRAL_IMAGE_VIEWS;
    out->image_size = BASE_SIZE;
    out->tile_size = TILE_SIZE;
    out->min_tiles = mm->sam->min_tiles;
    out->max_tiles = mm->sam->max_tiles;
    memset(out->pad, 127, sizeof out->pad);
}

/* ---- resampling, as ggml's interpolate computes it (no corners aligned) ---- */

static float cubic1(float x)
{
    const float a = -0.75f;
    return ((a + 2) * x - (a + 3)) * x * x + 1;
}

static float cubic2(float x)
{
    const float a = -0.75f;
    return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
}

static float cubic(float p0, float p1, float p2, float p3, float x)
{
    return p0 * cubic2(x + 1) + p1 * cubic1(x) + p2 * cubic1(1 - x) + p3 * cubic2(2 - x);
}

static int64_t clamp_index(int64_t i, int64_t n)
{
    return i < 0 ? 0 : i >= n ? n - 1 : i;
}

/* Bicubic sample of a w x h plane (value (x, y) at src[(y * w + x) * stride]) for output
 * pixel (i0, i1) of an ow x oh resize. */
static float bicubic_at(const float *src, size_t stride, int64_t w, int64_t h, int64_t ow,
                        int64_t oh, int64_t i0, int64_t i1)
{
    float sf0 = (float)ow / (float)w, sf1 = (float)oh / (float)h;
    float y = ((float)i1 + 0.5f) / sf1 - 0.5f, x = ((float)i0 + 0.5f) / sf0 - 0.5f;
    int64_t y0 = (int64_t)floorf(y), x0 = (int64_t)floorf(x);
    float dy = y - (float)y0, dx = x - (float)x0;
    float rows[4];
    for (int64_t r = 0; r < 4; r++) {
        int64_t yy = clamp_index(y0 + r - 1, h);
        float p[4];
        for (int64_t c = 0; c < 4; c++)
            p[c] = src[(size_t)(yy * w + clamp_index(x0 + c - 1, w)) * stride];
        rows[r] = cubic(p[0], p[1], p[2], p[3], dx);
    }
    return cubic(rows[0], rows[1], rows[2], rows[3], dy);
}

/* A rel-pos table of len rows (d wide) as one of n rows: linear along the rows. */
static void resample_rel(const float *src, uint32_t len, size_t d, size_t n, float *dst)
{
    float sf = (float)n / (float)len;
    for (size_t i = 0; i < n; i++) {
        float x = ((float)i + 0.5f) / sf - 0.5f;
        int64_t x0 = clamp_index((int64_t)floorf(x), len), x1 = clamp_index(x0 + 1, len);
        float dx = x - (float)x0;
        dx = dx < 0.0f ? 0.0f : dx > 1.0f ? 1.0f : dx;
        for (size_t c = 0; c < d; c++)
            dst[i * d + c] = src[x0 * d + c] * (1 - dx) + src[x1 * d + c] * dx;
    }
}

/* ---- SAM ---- */

typedef struct sam_run {
    const corral_mmproj *mm;
    const struct deepseekocr_sam *s;
    threadpool *pool;
    void *act;
    float *scratch; /* per thread: scratch_per_thread floats */
    size_t scratch_per_thread;
} sam_run;

/* ggml's F16 product (vision_dot8's order) where the width allows, else in order. */
static float half_dot(const float *a, const float *b, size_t n)
{
    if (n % 8 == 0)
        return vision_dot8(a, b, n);
    float s = 0.0f;
    for (size_t i = 0; i < n; i++)
        s += a[i] * b[i];
    return s;
}

typedef struct conv_job {
    const conv *c;
    const float *in; /* [h][w][c->in] */
    uint32_t w, h, ow, oh, stride, pad;
    const float *bias;
    float *out; /* [oh][ow][c->out] */
    float *scratch;
    size_t scratch_per_thread;
} conv_job;

static void conv_task(void *arg, size_t oy, size_t thread)
{
    const conv_job *job = arg;
    const conv *c = job->c;
    size_t k = c->k, n_in = (size_t)c->in * k * k;
    float *patch = job->scratch + thread * job->scratch_per_thread;
    for (uint32_t ox = 0; ox < job->ow; ox++) {
        for (size_t ic = 0; ic < c->in; ic++)
            for (size_t ky = 0; ky < k; ky++)
                for (size_t kx = 0; kx < k; kx++) {
                    int64_t y = (int64_t)oy * job->stride - job->pad + (int64_t)ky;
                    int64_t x = (int64_t)ox * job->stride - job->pad + (int64_t)kx;
                    float v = y < 0 || x < 0 || y >= job->h || x >= job->w
                                  ? 0.0f
                                  : job->in[((size_t)y * job->w + (size_t)x) * c->in + ic];
                    patch[(ic * k + ky) * k + kx] = quant_f16_to_f32(quant_f32_to_f16(v));
                }
        float *o = job->out + ((size_t)oy * job->ow + ox) * c->out;
        for (size_t oc = 0; oc < c->out; oc++) {
            float v = half_dot(patch, c->w + oc * n_in, n_in);
            o[oc] = job->bias ? v + job->bias[oc] : v;
        }
    }
}

/* A convolution of in (h x w pixels of c->in channels), as ggml's conv_2d with F16 im2col. */
static void convolve(sam_run *r, const conv *c, const float *in, uint32_t w, uint32_t h,
                     uint32_t stride, uint32_t pad, const float *bias, float *out, uint32_t *ow,
                     uint32_t *oh)
{
    *ow = (w + 2 * pad - c->k) / stride + 1;
    *oh = (h + 2 * pad - c->k) / stride + 1;
    conv_job job = {c, in, w, h, *ow, *oh, stride, pad, bias, out, r->scratch,
                    r->scratch_per_thread};
    threadpool_run(r->pool, *oh, conv_task, &job);
}

static void layernorm_rows(const weight *w, const weight *b, float *x, size_t n, size_t width)
{
    for (size_t t = 0; t < n; t++)
        vision_layernorm_row(x + t * width, w->data, b->data, width, 1e-6f, x + t * width);
}

/* Attention within groups of n = side * side rows of the qkv rows (stride 3C), heads of d:
 * per group and head its queries [n][d], keys in tiles (vision_order.h) and values [d][n]. */
typedef struct attn_job {
    const sam_run *r;
    const float *qkv; /* [groups * n][3C] */
    const float *rel_h, *rel_w; /* [2 side - 1][d], as key tiles (vision_order.h) */
    size_t side, n, C, d, heads, query_blocks;
    float *qh, *kh, *vt;
    float *out; /* [groups * n][C] */
} attn_job;

enum { SAM_QUERIES = 16 };

static void attn_layout_task(void *arg, size_t task, size_t thread)
{
    (void)thread;
    const attn_job *job = arg;
    size_t g = task / job->heads, h = task % job->heads, n = job->n, d = job->d, C = job->C;
    size_t key_floats = vision_key_tiles(n) * VISION_KEY_TILE * d;
    float *qh = job->qh + task * n * d, *kh = job->kh + task * key_floats;
    float *vt = job->vt + task * n * d;
    for (size_t t = 0; t < n; t++) {
        const float *row = job->qkv + (g * n + t) * 3 * C + h * d;
        memcpy(qh + t * d, row, d * sizeof *qh);
        float *key = kh + (t / VISION_KEY_TILE * d) * VISION_KEY_TILE + t % VISION_KEY_TILE;
        for (size_t c = 0; c < d; c++) {
            key[c * VISION_KEY_TILE] = row[C + c];
            vt[c * n + t] = row[2 * C + c];
        }
    }
}

/* A block of queries of one group and head: scores scaled, plus the relative positions'
 * terms (llama.cpp's mask: the column term, then the row term), softmax, values. */
static void attn_task(void *arg, size_t task, size_t thread)
{
    const attn_job *job = arg;
    size_t n = job->n, d = job->d, C = job->C, side = job->side;
    size_t gh = task / job->query_blocks, first = task % job->query_blocks * SAM_QUERIES;
    size_t g = gh / job->heads, h = gh % job->heads;
    size_t nq = first + SAM_QUERIES < n ? SAM_QUERIES : n - first;
    size_t key_floats = vision_key_tiles(n) * VISION_KEY_TILE * d;
    const float *qh = job->qh + gh * n * d, *vt = job->vt + gh * n * d;
    size_t len = 2 * side - 1;
    float *scores = job->r->scratch + thread * job->r->scratch_per_thread;
    float *rel_h = scores + SAM_QUERIES * n, *rel_w = rel_h + SAM_QUERIES * len;
    float scale = 1.0f / sqrtf((float)d);
    vision_scores(qh + first * d, nq, job->kh + gh * key_floats, n, d, scores);
    /* every query against every row of the tables: q . R[r], r = its coordinate minus the
     * key's, plus side - 1 */
    vision_scores(qh + first * d, nq, job->rel_h, len, d, rel_h);
    vision_scores(qh + first * d, nq, job->rel_w, len, d, rel_w);
    for (size_t i = 0; i < nq; i++) {
        float *p = scores + i * n;
        size_t qy = (first + i) / side, qx = (first + i) % side;
        const float *rh = rel_h + i * len + qy + side - 1, *rw = rel_w + i * len + qx + side - 1;
        for (size_t ky = 0, j = 0; ky < side; ky++) {
            float row = rh[-(ptrdiff_t)ky];
            for (size_t kx = 0; kx < side; kx++, j++)
                p[j] = p[j] * scale + (rw[-(ptrdiff_t)kx] + row);
        }
        float inv = (float)(1.0 / vision_softmax_row(p, n, 1.0f));
        for (size_t j = 0; j < n; j++)
            p[j] *= inv;
    }
    /* the weights times the values, as vision.c's attention takes them */
    float *o = rel_w + SAM_QUERIES * len;
    vision_matmul_rows(vt, n, 0, d, scores, nq, o, d, n % 16 == 0);
    for (size_t i = 0; i < nq; i++)
        memcpy(job->out + (g * n + first + i) * C + h * d, o + i * d, d * sizeof *o);
}

/* Rows [0, n) of d values as key tiles (vision_order.h), the last tile padded with zeros. */
static void key_tiles(const float *rows, size_t n, size_t d, float *tiles)
{
    memset(tiles, 0, vision_key_tiles(n) * VISION_KEY_TILE * d * sizeof *tiles);
    for (size_t t = 0; t < n; t++)
        for (size_t c = 0; c < d; c++)
            tiles[(t / VISION_KEY_TILE * d + c) * VISION_KEY_TILE + t % VISION_KEY_TILE] =
                rows[t * d + c];
}

/* A layer's rel-pos tables for groups of the given side (resampled when their length is not
 * 2 side - 1) as key tiles: buf holds two resampled tables, then the two tiled ones. */
static void rel_tables(const sam_layer *l, size_t side, size_t d, float *buf, const float **rh,
                       const float **rw)
{
    size_t len = 2 * side - 1, tiled = vision_key_tiles(len) * VISION_KEY_TILE * d;
    const float *h = l->rel_h, *w = l->rel_w;
    if (l->rel_h_len != len) {
        resample_rel(l->rel_h, l->rel_h_len, d, len, buf);
        h = buf;
    }
    if (l->rel_w_len != len) {
        resample_rel(l->rel_w, l->rel_w_len, d, len, buf + len * d);
        w = buf + len * d;
    }
    float *th = buf + 2 * len * d, *tw = th + tiled;
    key_tiles(h, len, d, th);
    key_tiles(w, len, d, tw);
    *rh = th;
    *rw = tw;
}

static bool is_global(uint32_t il)
{
    for (size_t i = 0; i < sizeof global_layers / sizeof global_layers[0]; i++)
        if (global_layers[i] == il)
            return true;
    return false;
}

/* The buffers of one SAM pass over a G x G grid. */
typedef struct sam_bufs {
    float *x, *xn, *win, *qkv, *attn, *proj, *ff, *qh, *kh, *vt, *rel;
    float *neck_a, *neck_b;
} sam_bufs;

/* x (G x G rows of C) through block il. */
static void sam_block(sam_run *r, sam_bufs *b, uint32_t il, size_t G)
{
    const struct deepseekocr_sam *s = r->s;
    const sam_layer *l = &s->layers[il];
    size_t C = s->n_embd, d = C / s->n_head, T = G * G;
    memcpy(b->xn, b->x, T * C * sizeof *b->xn);
    layernorm_rows(&l->ln1, &l->ln1_b, b->xn, T, C);
    bool global = is_global(il);
    size_t side = global ? G : s->window, wins = global ? 1 : (G + side - 1) / side;
    size_t groups = wins * wins, n = side * side, rows = groups * n;
    const float *in = b->xn;
    if (!global) { /* the windows, padded with zero rows, one after another */
        for (size_t wy = 0; wy < wins; wy++)
            for (size_t wx = 0; wx < wins; wx++)
                for (size_t t = 0; t < n; t++) {
                    size_t y = wy * side + t / side, x = wx * side + t % side;
                    float *dst = b->win + ((wy * wins + wx) * n + t) * C;
                    if (y < G && x < G)
                        memcpy(dst, b->xn + (y * G + x) * C, C * sizeof *dst);
                    else
                        memset(dst, 0, C * sizeof *dst);
                }
        in = b->win;
    }
    vision_matmul(r->pool, &l->qkv, &l->qkv_b, in, rows, b->qkv, r->act);
    const float *rh, *rw;
    rel_tables(l, side, d, b->rel, &rh, &rw);
    attn_job job = {r, b->qkv, rh, rw, side, n, C, d, s->n_head,
                    (n + SAM_QUERIES - 1) / SAM_QUERIES, b->qh, b->kh, b->vt, b->attn};
    threadpool_run(r->pool, groups * s->n_head, attn_layout_task, &job);
    threadpool_run(r->pool, groups * s->n_head * job.query_blocks, attn_task, &job);
    vision_matmul(r->pool, &l->out, &l->out_b, b->attn, rows, b->proj, r->act);
    for (size_t y = 0; y < G; y++)
        for (size_t x = 0; x < G; x++) {
            size_t at = global ? y * G + x
                               : ((y / side * wins + x / side) * n + (y % side) * side + x % side);
            float *dst = b->x + (y * G + x) * C;
            const float *src = b->proj + at * C;
            for (size_t c = 0; c < C; c++)
                dst[c] = src[c] + dst[c];
        }
    memcpy(b->xn, b->x, T * C * sizeof *b->xn);
    layernorm_rows(&l->ln2, &l->ln2_b, b->xn, T, C);
    vision_matmul(r->pool, &l->up, &l->up_b, b->xn, T, b->ff, r->act);
    block_gelu(b->ff, T * s->n_ff);
    vision_matmul(r->pool, &l->down, &l->down_b, b->ff, T, b->proj, r->act);
    for (size_t i = 0; i < T * C; i++)
        b->x[i] = b->proj[i] + b->x[i];
}

/* One view (S x S pixels, rows of S * 3 floats at stride `stride` floats) through SAM and its
 * neck: out gets (G / 4)^2 rows of the CLIP width. */
static void sam_view(sam_run *r, sam_bufs *b, const float *pixels, size_t stride, uint32_t S,
                     float *out)
{
    const struct deepseekocr_sam *s = r->s;
    size_t C = s->n_embd, G = S / SAM_PATCH, T = G * G;
    /* the patch convolution reads the view as an S x S picture of 3 channels */
    uint32_t w, h;
    float *view = b->neck_a;
    for (size_t y = 0; y < S; y++)
        memcpy(view + y * S * 3, pixels + y * stride, (size_t)S * 3 * sizeof *view);
    convolve(r, &s->patch, view, S, S, SAM_PATCH, 0, s->patch_b, b->x, &w, &h);
    /* positions, resampled to this grid when the table's differs */
    for (size_t y = 0; y < G; y++)
        for (size_t x = 0; x < G; x++)
            for (size_t c = 0; c < C; c++) {
                float p = G == s->pos_side
                              ? s->pos[(y * G + x) * C + c]
                              : bicubic_at(s->pos + c, C, s->pos_side, s->pos_side, (int64_t)G,
                                           (int64_t)G, (int64_t)x, (int64_t)y);
                b->x[(y * G + x) * C + c] += p;
            }
    for (uint32_t il = 0; il < s->n_layer; il++)
        sam_block(r, b, il, G);
    uint32_t w2, h2;
    convolve(r, &s->neck0, b->x, (uint32_t)G, (uint32_t)G, 1, 0, NULL, b->neck_a, &w, &h);
    layernorm_rows(&s->neck1, &s->neck1_b, b->neck_a, T, s->neck0.out);
    convolve(r, &s->neck2, b->neck_a, w, h, 1, 1, NULL, b->neck_b, &w2, &h2);
    layernorm_rows(&s->neck3, &s->neck3_b, b->neck_b, T, s->neck2.out);
    convolve(r, &s->net2, b->neck_b, w2, h2, 2, 1, NULL, b->neck_a, &w, &h);
    convolve(r, &s->net3, b->neck_a, w, h, 2, 1, NULL, out, &w2, &h2);
}

/* ---- CLIP and the projection ---- */

/* The CLIP positions for a g x g grid (g * g + 1 rows of E) into pos. */
static void clip_positions(const corral_mmproj *mm, size_t g, float *pos)
{
    const struct deepseekocr_sam *s = mm->sam;
    size_t E = mm->hp.n_embd, src = s->clip_side, n = g * g;
    if (g == src) {
        memcpy(pos, s->clip_pos, (n + 1) * E * sizeof *pos);
        return;
    }
    /* llama.cpp's resampling: the first src^2 rows as one E-wide picture of src^2 rows,
     * resized to g x g, the result read back as g^2 rows of E; then the table's last row */
    for (size_t i1 = 0; i1 < g; i1++)
        for (size_t i0 = 0; i0 < g; i0++) {
            float v = bicubic_at(s->clip_pos, 1, (int64_t)E, (int64_t)(src * src), (int64_t)g,
                                 (int64_t)g, (int64_t)i0, (int64_t)i1);
            for (size_t i2 = 0; i2 < E; i2++)
                pos[i0 + g * i1 + n * i2] = v;
        }
    memcpy(pos + n * E, s->clip_pos + src * src * E, E * sizeof *pos);
}

/* A view's SAM states (g x g rows of E) through CLIP and mm.model.fc into out (g^2 rows of
 * T); false with the reason when the GPU fails. */
static bool clip_view(vision_run *run, const float *sam, size_t g, float *pos, float *feat,
                      float *out, corral_error *err)
{
    const corral_mmproj *mm = run->mm;
    size_t E = mm->hp.n_embd, n = g * g;
    run->n_patches = n + 1;
    memcpy(run->x, mm->class_embd.data, E * sizeof *run->x);
    memcpy(run->x + E, sam, n * E * sizeof *run->x);
    clip_positions(mm, g, pos);
    for (size_t i = 0; i < (n + 1) * E; i++)
        run->x[i] += pos[i];
    vision_norm_rows(mm, &mm->pre_ln, &mm->pre_ln_b, run->x, run->x, n + 1);
    if (!vision_run_blocks(run, 0, mm->hp.n_layer, err))
        return false;
    if (mm->post_ln.data)
        vision_norm_rows(mm, &mm->post_ln, &mm->post_ln_b, run->x, run->x, n + 1);
    for (size_t t = 0; t < n; t++) {
        memcpy(feat + t * 2 * E, run->x + (t + 1) * E, E * sizeof *feat);
        memcpy(feat + t * 2 * E + E, sam + t * E, E * sizeof *feat);
    }
    vision_matmul(run->pool, &mm->mm0, &mm->mm0_b, feat, n, out, run->act);
    return true;
}

static bool deepseekocr_encode(const corral_mmproj *mm, threadpool *pool,
                               const corral_cancel *cancel, const float *pixels, uint32_t nx,
                               uint32_t ny, corral_image_embd *out, corral_error *err)
{
    const struct deepseekocr_sam *s = mm->sam;
    uint32_t cols, rows;
    if (!grid_of(mm, nx, ny, &cols, &rows)) {
        corral_error_set(err, "deepseekocr encodes a grid of %u to %u tiles of %u pixels (and "
                         "its global view in rows below it), or the %u-pixel global view "
                         "alone, not %u x %u",
                         s->min_tiles, s->max_tiles, TILE_SIZE, BASE_SIZE, nx, ny);
        return false;
    }
    size_t C = s->n_embd, E = mm->hp.n_embd, T = mm->hp.n_embd_text;
    size_t G = BASE_SIZE / SAM_PATCH, g = G / SAM_REDUCE, tg = TILE_SIZE / SAM_PATCH / SAM_REDUCE;
    size_t total = deepseekocr_tokens(mm, nx, ny);
    size_t win = s->window, wins = (G + win - 1) / win;
    size_t win_rows = wins * wins * win * win, rows_max = win_rows > G * G ? win_rows : G * G;
    size_t widest = s->neck0.out > s->net2.out ? s->neck0.out : s->net2.out;
    widest = widest > 3 ? widest : 3;
    size_t most_side = win > G ? win : G, n_max = most_side * most_side;
    size_t threads = threadpool_size(pool);
    size_t conv_in = (size_t)s->patch.in * s->patch.k * s->patch.k;
    const conv *convs[] = {&s->neck0, &s->neck2, &s->net2, &s->net3};
    for (size_t i = 0; i < 4; i++) {
        size_t k = (size_t)convs[i]->in * convs[i]->k * convs[i]->k;
        conv_in = k > conv_in ? k : conv_in;
    }
    size_t rel_len = 2 * most_side - 1;
    size_t per_thread = SAM_QUERIES * (n_max + 2 * rel_len + C / s->n_head);
    per_thread = per_thread > conv_in ? per_thread : conv_in;
    size_t act_row = 0;
    for (uint32_t il = 0; il < s->n_layer; il++) {
        const weight *ws[] = {&s->layers[il].qkv, &s->layers[il].out, &s->layers[il].up,
                              &s->layers[il].down};
        for (size_t i = 0; i < 4; i++) {
            size_t bytes = quant_act_row_bytes(ws[i]->type, ws[i]->n_in);
            act_row = bytes > act_row ? bytes : act_row;
        }
    }
    size_t act_bytes = 0, tok_rows = (size_t)cols * tg * tg > g * g ? (size_t)cols * tg * tg : g * g;
    bool ok = checked_mul_size(act_row ? act_row : 1, rows_max, &act_bytes);
    sam_bufs b = {0};
    b.x = vision_alloc_rows(G * G, C, &ok);
    b.xn = vision_alloc_rows(G * G, C, &ok);
    b.win = vision_alloc_rows(rows_max, C, &ok);
    b.qkv = vision_alloc_rows(rows_max, 3 * C, &ok);
    b.attn = vision_alloc_rows(rows_max, C, &ok);
    b.proj = vision_alloc_rows(rows_max, C, &ok);
    b.ff = vision_alloc_rows(G * G, s->n_ff, &ok);
    b.qh = vision_alloc_rows(rows_max * s->n_head, C / s->n_head, &ok);
    /* keys in tiles: each group's padded to a whole tile */
    size_t key_rows = wins * wins * vision_key_tiles(win * win) * VISION_KEY_TILE;
    size_t global_keys = vision_key_tiles(G * G) * VISION_KEY_TILE;
    key_rows = key_rows > global_keys ? key_rows : global_keys;
    b.kh = vision_alloc_rows(key_rows * s->n_head, C / s->n_head, &ok);
    b.vt = vision_alloc_rows(rows_max * s->n_head, C / s->n_head, &ok);
    b.rel = vision_alloc_rows(2 * rel_len + 2 * vision_key_tiles(rel_len) * VISION_KEY_TILE,
                              C / s->n_head, &ok);
    b.neck_a = vision_alloc_rows((size_t)BASE_SIZE * BASE_SIZE, widest, &ok);
    b.neck_b = vision_alloc_rows(G * G, widest, &ok);
    float *scratch = vision_alloc_rows(threads, per_thread, &ok);
    float *sam = vision_alloc_rows(g * g, E, &ok);
    float *pos = vision_alloc_rows(g * g + 1, E, &ok);
    float *feat = vision_alloc_rows(g * g, 2 * E, &ok);
    float *tok = vision_alloc_rows(tok_rows, T, &ok);
    out->data = vision_alloc_rows(total, T, &ok);
    void *act = ok ? malloc(act_bytes ? act_bytes : 1) : NULL;
    vision_run run;
    ok = ok && act;
    if (!ok)
        corral_error_set(err, "cannot allocate the projector's buffers for a %u x %u image", nx,
                         ny);
    ok = ok && vision_run_init(&run, mm, pool, cancel, g * g + 1,
                               quant_act_row_bytes(mm->mm0.type, mm->mm0.n_in), err);
    if (ok) {
        sam_run r = {mm, s, pool, act, scratch, per_thread};
        float *dst = out->data;
        for (uint32_t row = 0; ok && row < rows; row++) {
            /* the row's tiles, each through both towers */
            for (uint32_t col = 0; ok && col < cols; col++) {
                const float *at = pixels + ((size_t)row * TILE_SIZE * nx + (size_t)col * TILE_SIZE) * 3;
                if (vision_cancelled(cancel, err)) {
                    ok = false;
                    break;
                }
                sam_view(&r, &b, at, (size_t)nx * 3, TILE_SIZE, sam);
                ok = clip_view(&run, sam, tg, pos, feat, tok + col * tg * tg * T, err);
            }
            if (!ok)
                break;
            /* token rows: the tiles' rows side by side, then a newline */
            for (size_t y = 0; y < tg; y++) {
                for (uint32_t col = 0; col < cols; col++, dst += tg * T)
                    memcpy(dst, tok + (col * tg * tg + y * tg) * T, tg * T * sizeof *dst);
                memcpy(dst, s->newline.data, T * sizeof *dst);
                dst += T;
            }
        }
        const float *global = pixels + (size_t)nx * TILE_SIZE * rows * 3;
        ok = ok && !vision_cancelled(cancel, err);
        if (ok) {
            sam_view(&r, &b, global, (size_t)BASE_SIZE * 3, BASE_SIZE, sam);
            ok = clip_view(&run, sam, g, pos, feat, tok, err);
        }
        for (size_t y = 0; ok && y < g; y++) {
            memcpy(dst, tok + y * g * T, g * T * sizeof *dst);
            dst += g * T;
            memcpy(dst, s->newline.data, T * sizeof *dst);
            dst += T;
        }
        if (ok)
            memcpy(dst, s->separator.data, T * sizeof *dst);
        vision_run_free(&run);
    }
    float *bufs[] = {b.x,   b.xn,  b.win,   b.qkv,   b.attn,  b.proj, b.ff, b.qh, b.kh,
                     b.vt,  b.rel, b.neck_a, b.neck_b, scratch, sam,    pos,  feat, tok};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        free(bufs[i]);
    free(act);
    if (!ok)
        return false;
    out->n_tokens = total;
    out->nx = (uint32_t)total;
    out->ny = 1;
    out->n_embd = (uint32_t)T;
    return true;
}

/* CLIP's rows of the global view (the larger): its SAM grid and the class row. */
static size_t deepseekocr_gpu_rows(const corral_mmproj *mm)
{
    (void)mm;
    size_t g = BASE_SIZE / SAM_PATCH / SAM_REDUCE;
    return g * g + 1;
}

const projector_kind projector_deepseekocr = {
    .name = "deepseekocr",
    .image_begin = "",
    .image_end = "\n",
    .resize = CORRAL_IMAGE_VIEWS,
    .norm = VISION_LAYER_NORM,
    .ffn = VISION_FFN_GELU_QUICK,
    .bind = deepseekocr_bind,
    .encode = deepseekocr_encode,
    .gpu_rows = deepseekocr_gpu_rows,
};

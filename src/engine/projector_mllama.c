/*
 * mllama's vision tower (Llama 3.2 Vision, from ollama's single file: v.*, mm.0.*,
 * mllama.vision.*), as transformers' MllamaVisionModel runs it. The canvas (image/preprocess.h's
 * CANVAS: tiles_x x tiles_y tiles of image_size, at most max_num_tiles) is cut into its tiles,
 * row by row, padded with tiles of zeros to max_num_tiles; per tile: its patches through the
 * convolution, the pre-tile embedding of the aspect ratio (times its gate), the class token
 * first, the position embedding (times 1 - tanh of the gate, as the converter stores it) and
 * the tile position embedding of the aspect ratio (times the gate's tanh), LayerNorm; each
 * tile's rows padded with zeros to a multiple of 8. All tiles' rows then go through the local
 * layers together, a padding row (a padded tile's, or a padding row of any tile) seeing no
 * other padding row; the inputs of the layers intermediate_layers_indices names are kept; the
 * post LayerNorm, the post-tile embedding, the gated global layers; the padding rows dropped,
 * each row's output then its kept states interleaved channel by channel (channel c of kept
 * layer k at c * K + k), through mm.0 to the text model's width. The image is one token whose
 * values are all those rows (corral_image_embd.n_attended: the real tiles' rows).
 *
 * The aspect ratio ids count the arrangements (w, h) with w * h <= max_num_tiles, w major,
 * from 1. The gates are stored as the converter writes them (tanh applied).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_vision.h"
#include "mmproj.h"
#include "quant.h"

#define MAX_TILES 16
#define MAX_KEPT 8

struct mllama_tower {
    uint32_t max_tiles, n_global, n_kept;
    uint32_t kept[MAX_KEPT]; /* ascending local layers whose input is kept */
    vision_layer *global;
    /* per aspect ratio id: max_tiles rows of n_embd (pre, post), or max_tiles x (patches +
     * 1) rows (tile position); their gates and the position embedding's, one value each */
    weight pre_tile, post_tile, tile_pos, pre_gate, post_gate, tile_pos_gate, pos_gate;
};

void mllama_free(struct mllama_tower *t)
{
    if (t)
        free(t->global);
    free(t);
}

/* The aspect ratio id of tiles_x x tiles_y, 0 when max_tiles does not take it. */
static uint32_t ratio_id(uint32_t max_tiles, uint32_t tiles_x, uint32_t tiles_y)
{
    uint32_t id = 0;
    for (uint32_t w = 1; w <= max_tiles; w++)
        for (uint32_t h = 1; h <= max_tiles / w; h++) {
            id++;
            if (w == tiles_x && h == tiles_y)
                return id;
        }
    return 0;
}

static uint32_t n_ratio_ids(uint32_t max_tiles)
{
    uint32_t n = 0;
    for (uint32_t w = 1; w <= max_tiles; w++)
        n += max_tiles / w;
    return n;
}

size_t mllama_tokens(const corral_mmproj *mm, uint32_t nx, uint32_t ny)
{
    uint32_t side = mm->hp.image_size;
    return nx % side == 0 && ny % side == 0 &&
                   ratio_id(mm->mllama->max_tiles, nx / side, ny / side) != 0
               ? 1
               : 0;
}

void mllama_image_params(const corral_mmproj *mm, corral_image_params *out)
{
    out->resize = CORRAL_IMAGE_CANVAS;
    out->max_tiles = mm->mllama->max_tiles;
}

static bool read_u32(corral_mmproj *mm, const char *suffix, uint32_t *out, corral_error *err)
{
    char key[96];
    snprintf(key, sizeof key, "%s.vision.%s", mm->key_prefix, suffix);
    return gguf_get_u32(mm->file, key, out, err);
}

/* The kept layers: ascending, each a local layer (its input) or n_layer (the last output). */
static bool read_kept(corral_mmproj *mm, struct mllama_tower *t, corral_error *err)
{
    char key[96];
    const gguf_kv *kv;
    snprintf(key, sizeof key, "%s.vision.intermediate_layers_indices", mm->key_prefix);
    if (!gguf_get_array(mm->file, key, GGUF_TYPE_COUNT, &kv, err))
        return false;
    bool ok = gguf_type_is_integer(kv->elem_type) && kv->n >= 1 && kv->n <= MAX_KEPT;
    for (uint64_t i = 0; ok && i < kv->n; i++) {
        int64_t il = gguf_kv_i64(kv, i);
        ok = il >= 0 && il < (int64_t)mm->hp.n_layer && (i == 0 || il > (int64_t)t->kept[i - 1]);
        t->kept[i] = ok ? (uint32_t)il : 0;
    }
    if (!ok) {
        corral_error_set(err, "%s: %s must hold 1 to %d ascending layers of the %u", gguf_path(mm->file),
                         key, MAX_KEPT, mm->hp.n_layer);
        return false;
    }
    t->n_kept = (uint32_t)kv->n;
    return true;
}

static bool bind_global_layer(corral_mmproj *mm, vision_layer *l, uint32_t il, corral_error *err)
{
    size_t E = mm->hp.n_embd, F = mm->hp.n_ff;
    char name[96];
#define NAME(suffix) (snprintf(name, sizeof name, "v.global.blk.%u." suffix, il), name)
    return mmproj_bind_vector(mm, &l->ln1, NAME("attn_norm.weight"), E, true, err) &&
           mmproj_bind_vector(mm, &l->ln1_b, NAME("attn_norm.bias"), E, true, err) &&
           mmproj_bind_matrix(mm, &l->wq, NAME("attn_q.weight"), E, E, true, err) &&
           mmproj_bind_matrix(mm, &l->wk, NAME("attn_k.weight"), E, E, true, err) &&
           mmproj_bind_matrix(mm, &l->wv, NAME("attn_v.weight"), E, E, true, err) &&
           mmproj_bind_matrix(mm, &l->wo, NAME("attn_output.weight"), E, E, true, err) &&
           mmproj_bind_vector(mm, &l->ln2, NAME("ffn_norm.weight"), E, true, err) &&
           mmproj_bind_vector(mm, &l->ln2_b, NAME("ffn_norm.bias"), E, true, err) &&
           mmproj_bind_matrix(mm, &l->up, NAME("ffn_up.weight"), E, F, true, err) &&
           mmproj_bind_vector(mm, &l->up_b, NAME("ffn_up.bias"), F, true, err) &&
           mmproj_bind_matrix(mm, &l->down, NAME("ffn_down.weight"), F, E, true, err) &&
           mmproj_bind_vector(mm, &l->down_b, NAME("ffn_down.bias"), E, true, err) &&
           mmproj_bind_vector(mm, &l->attn_out_gate, NAME("attn_gate"), 1, true, err) &&
           mmproj_bind_vector(mm, &l->ffn_out_gate, NAME("ffn_gate"), 1, true, err);
#undef NAME
}

static bool mllama_bind(corral_mmproj *mm, corral_error *err)
{
    const vision_hparams *hp = &mm->hp;
    struct mllama_tower *t = calloc(1, sizeof *t);
    if (!t) {
        corral_error_set(err, "out of memory");
        return false;
    }
    mm->mllama = t;
    if (!read_u32(mm, "max_num_tiles", &t->max_tiles, err) ||
        !read_u32(mm, "global.block_count", &t->n_global, err) || !read_kept(mm, t, err))
        return false;
    if (t->max_tiles == 0 || t->max_tiles > MAX_TILES || t->n_global == 0 ||
        t->n_global > 256 || hp->image_size % hp->patch_size != 0) {
        corral_error_set(err, "%s: mllama's tower takes 1 to %d tiles of whole patches and 1 to "
                         "256 global layers (%u tiles, %u global layers, %u-pixel tiles of "
                         "%u-pixel patches)", gguf_path(mm->file), MAX_TILES, t->max_tiles,
                         t->n_global, hp->image_size, hp->patch_size);
        return false;
    }
    size_t E = hp->n_embd, side = hp->image_size / hp->patch_size, rows = side * side + 1;
    size_t ids = n_ratio_ids(t->max_tiles) + 1, feat = E * (1 + (size_t)t->n_kept);
    if (!mmproj_bind_vector(mm, &mm->class_embd, "v.class_embd", E, true, err) ||
        !mmproj_bind_matrix(mm, &mm->pos_embd, "v.position_embd.weight", E, rows, true, err) ||
        !mmproj_bind_vector(mm, &t->pos_gate, "v.position_embd.gate", 1, true, err) ||
        !mmproj_bind_matrix(mm, &t->tile_pos, "v.tile_position_embd.weight",
                            t->max_tiles * rows * E, ids, true, err) ||
        !mmproj_bind_vector(mm, &t->tile_pos_gate, "v.tile_position_embd.gate", 1, true, err) ||
        !mmproj_bind_matrix(mm, &t->pre_tile, "v.pre_tile_position_embd.weight",
                            t->max_tiles * E, ids, true, err) ||
        !mmproj_bind_vector(mm, &t->pre_gate, "v.pre_tile_position_embd.gate", 1, true, err) ||
        !mmproj_bind_matrix(mm, &t->post_tile, "v.post_tile_position_embd.weight",
                            t->max_tiles * E, ids, true, err) ||
        !mmproj_bind_vector(mm, &t->post_gate, "v.post_tile_position_embd.gate", 1, true, err) ||
        !mmproj_bind_vector(mm, &mm->pre_ln, "v.pre_ln.weight", E, true, err) ||
        !mmproj_bind_vector(mm, &mm->pre_ln_b, "v.pre_ln.bias", E, true, err))
        return false;
    if (!mm->post_ln.data || !mm->post_ln_b.data) {
        corral_error_set(err, "%s: mllama's tower needs v.post_ln.weight and v.post_ln.bias",
                         gguf_path(mm->file));
        return false;
    }
    /* the text model's width: the projection's rows */
    const gguf_tensor *proj = mmproj_find_tensor(mm, "mm.0.weight");
    if (!proj || proj->ne[1] < 1 || proj->ne[1] > (1 << 20)) {
        corral_error_set(err, "%s: mllama's tower needs its projection mm.0.weight",
                         gguf_path(mm->file));
        return false;
    }
    mm->hp.n_embd_text = (uint32_t)proj->ne[1];
    if (!mmproj_bind_matrix(mm, &mm->mm0, "mm.0.weight", feat, mm->hp.n_embd_text, true, err) ||
        !mmproj_bind_vector(mm, &mm->mm0_b, "mm.0.bias", mm->hp.n_embd_text, true, err))
        return false;
    if (!(t->global = calloc(t->n_global, sizeof *t->global))) {
        corral_error_set(err, "out of memory");
        return false;
    }
    for (uint32_t il = 0; il < t->n_global; il++)
        if (!bind_global_layer(mm, &t->global[il], il, err))
            return false;
    return true;
}

/* Row `row` (an aspect ratio id) of an embedding table: its floats, dequantized into out. */
static void table_row(const weight *w, size_t row, float *out)
{
    w->ops->dequantize((const uint8_t *)w->data + row * w->row_bytes, out, w->n_in);
}

/* Rows a canvas takes through the blocks: every tile's, each padded to a multiple of 8. */
static size_t padded_rows(const corral_mmproj *mm)
{
    size_t side = mm->hp.image_size / mm->hp.patch_size, rows = side * side + 1;
    return mm->mllama->max_tiles * ((rows + 7) / 8 * 8);
}

/* The blocks in the order a GPU holds them: the local layers, then the global ones. */
static const vision_layer **gpu_blocks(const corral_mmproj *mm, uint32_t *n, corral_error *err)
{
    const struct mllama_tower *t = mm->mllama;
    *n = mm->hp.n_layer + t->n_global;
    const vision_layer **blocks = calloc(*n, sizeof *blocks);
    if (!blocks) {
        corral_error_set(err, "out of memory");
        return NULL;
    }
    for (uint32_t il = 0; il < mm->hp.n_layer; il++)
        blocks[il] = &mm->layers[il];
    for (uint32_t il = 0; il < t->n_global; il++)
        blocks[mm->hp.n_layer + il] = &t->global[il];
    return blocks;
}

static bool fits_a_gpu(const corral_mmproj *mm, const vision_layer *const *blocks, uint32_t n,
                       corral_error *err)
{
    if (padded_rows(mm) > UINT32_MAX / 4) {
        corral_error_set(err, "mllama's tower of %zu rows is too large for a GPU run",
                         padded_rows(mm));
        return false;
    }
    for (uint32_t il = 0; il < n; il++)
        if (!gpu_vision_supports(&mm->hp, blocks[il])) {
            corral_error_set(err, "mllama's tower block %u has a form the GPU does not run", il);
            return false;
        }
    return true;
}

bool mllama_gpu_bytes(const corral_mmproj *mm, int device, uint64_t *out, corral_error *err)
{
    uint32_t n;
    const vision_layer **blocks = gpu_blocks(mm, &n, err);
    bool ok = blocks && fits_a_gpu(mm, blocks, n, err) &&
              gpu_vision_bytes(device, &mm->hp, blocks, n, (uint32_t)padded_rows(mm), true, out,
                               err);
    free(blocks);
    return ok;
}

bool mllama_use_gpu(corral_mmproj *mm, int device, corral_error *err)
{
    uint32_t n;
    const vision_layer **blocks = gpu_blocks(mm, &n, err);
    if (blocks && fits_a_gpu(mm, blocks, n, err))
        mm->gpu = gpu_vision_create(device, &mm->hp, blocks, n, (uint32_t)padded_rows(mm), true,
                                    err);
    free(blocks);
    return mm->gpu != NULL;
}

/* The local layers through run->x (n rows), the inputs of the kept ones copied to kept
 * (n rows each, in order): on the GPU in runs between kept layers, or on the CPU. */
static bool local_layers(const corral_mmproj *mm, vision_run *run, float *kept, size_t n,
                         corral_error *err)
{
    const struct mllama_tower *t = mm->mllama;
    size_t E = mm->hp.n_embd;
    for (uint32_t il = 0, k = 0; il < mm->hp.n_layer;) {
        uint32_t end = k < t->n_kept ? t->kept[k] : mm->hp.n_layer;
        if (end == il) {
            memcpy(kept + k++ * n * E, run->x, n * E * sizeof *kept);
            continue;
        }
        if (vision_cancelled(run->cancel, err))
            return false;
        if (mm->gpu) {
            gpu_vision_rows rows = {.x = run->x, .n_rows = (uint32_t)n, .padding = run->padding};
            if (!gpu_vision_run(mm->gpu, &rows, il, end - il, err))
                return false;
        } else {
            for (uint32_t b = il; b < end; b++) {
                if (b > il && vision_cancelled(run->cancel, err))
                    return false;
                vision_block(run, b);
            }
        }
        il = end;
    }
    return true;
}

/* The global layers through run->x (n rows), on the GPU or the CPU. */
static bool global_layers(const corral_mmproj *mm, vision_run *run, size_t n, corral_error *err)
{
    const struct mllama_tower *t = mm->mllama;
    gpu_vision_rows rows = {.x = run->x, .n_rows = (uint32_t)n, .padding = run->padding};
    if (vision_cancelled(run->cancel, err))
        return false;
    if (mm->gpu)
        return gpu_vision_run(mm->gpu, &rows, mm->hp.n_layer, t->n_global, err);
    for (uint32_t il = 0; il < t->n_global; il++) {
        if (il > 0 && vision_cancelled(run->cancel, err))
            return false;
        vision_block_of(run, &t->global[il]);
    }
    return true;
}

static bool mllama_encode(const corral_mmproj *mm, threadpool *pool,
                          const corral_cancel *cancel, const float *pixels, uint32_t nx,
                          uint32_t ny, corral_image_embd *out, corral_error *err)
{
    const vision_hparams *hp = &mm->hp;
    const struct mllama_tower *t = mm->mllama;
    if (!mllama_tokens(mm, nx, ny)) {
        corral_error_set(err, "mllama's tower takes a canvas of at most %u tiles of %u pixels, "
                         "not %u x %u", t->max_tiles, hp->image_size, nx, ny);
        return false;
    }
    size_t E = hp->n_embd, S = hp->image_size, p = hp->patch_size, side = S / p;
    size_t n_patch = side * side, rows = n_patch + 1, padded = (rows + 7) / 8 * 8;
    size_t T = t->max_tiles, tiles_x = nx / S, n_real = tiles_x * (ny / S);
    size_t n = T * padded, K = t->n_kept, feat = E * (1 + K), n_in = 3 * p * p;
    uint32_t id = ratio_id(t->max_tiles, (uint32_t)tiles_x, (uint32_t)(ny / S));
    vision_run run;
    if (!vision_run_init(&run, mm, pool, cancel, n, quant_act_row_bytes(mm->mm0.type, feat), err))
        return false;
    bool ok = true;
    float *cols = vision_alloc_rows(n_real * n_patch, n_in, &ok);
    float *patches = vision_alloc_rows(n_real * n_patch, E, &ok);
    float *kept = vision_alloc_rows(n * K, E, &ok);
    float *feats = vision_alloc_rows(T * rows, feat, &ok);
    float *table = vision_alloc_rows(t->tile_pos.n_in > T * E ? t->tile_pos.n_in : T * E, 1, &ok);
    float *pos = vision_alloc_rows(rows, E, &ok);
    uint8_t *padding = ok ? malloc(n) : NULL;
    float *data = vision_alloc_rows(T * rows, hp->n_embd_text, &ok);
    if (!ok || !padding) {
        corral_error_set(err, "cannot allocate mllama's tower for %zu rows", n);
        ok = false;
        goto done;
    }
    /* the real tiles' patches, each a row in the kernel's order (channel, y, x) */
    for (size_t tile = 0; tile < n_real; tile++)
        for (size_t py = 0; py < side; py++)
            for (size_t px = 0; px < side; px++) {
                float *col = cols + ((tile * side + py) * side + px) * n_in;
                size_t y0 = tile / tiles_x * S + py * p, x0 = tile % tiles_x * S + px * p;
                for (size_t c = 0; c < 3; c++)
                    for (size_t ky = 0; ky < p; ky++)
                        for (size_t kx = 0; kx < p; kx++)
                            col[(c * p + ky) * p + kx] = pixels[((y0 + ky) * nx + x0 + kx) * 3 + c];
            }
    vision_matmul(pool, &mm->patch_embd, NULL, cols, n_real * n_patch, patches, run.act);
    /* per tile: class token, patches (a padding tile's are zeros), embeddings, pre-norm */
    float pre_gate = *(const float *)t->pre_gate.data, pos_gate = *(const float *)t->pos_gate.data;
    float tile_gate = *(const float *)t->tile_pos_gate.data;
    for (size_t r = 0; r < rows; r++)
        table_row(&mm->pos_embd, r, pos + r * E);
    memset(run.x, 0, n * E * sizeof *run.x);
    table_row(&t->pre_tile, id, table);
    for (size_t tile = 0; tile < T; tile++)
        for (size_t r = 1; r < rows; r++) {
            float *x = run.x + (tile * padded + r) * E;
            if (tile < n_real)
                memcpy(x, patches + (tile * n_patch + r - 1) * E, E * sizeof *x);
            for (size_t i = 0; i < E; i++)
                x[i] += pre_gate * table[tile * E + i];
        }
    table_row(&t->tile_pos, id, table);
    for (size_t tile = 0; tile < T; tile++)
        for (size_t r = 0; r < rows; r++) {
            float *x = run.x + (tile * padded + r) * E;
            if (r == 0)
                memcpy(x, mm->class_embd.data, E * sizeof *x);
            for (size_t i = 0; i < E; i++)
                x[i] += pos_gate * pos[r * E + i] + tile_gate * table[(tile * rows + r) * E + i];
            vision_norm_rows(mm, &mm->pre_ln, &mm->pre_ln_b, x, x, 1);
        }
    for (size_t r = 0; r < n; r++)
        padding[r] = r / padded >= n_real || r % padded >= rows;
    run.padding = padding;
    if (!local_layers(mm, &run, kept, n, err)) {
        ok = false;
        goto done;
    }
    vision_norm_rows(mm, &mm->post_ln, &mm->post_ln_b, run.x, run.x, n);
    table_row(&t->post_tile, id, table);
    float post_gate = *(const float *)t->post_gate.data;
    for (size_t r = 0; r < n; r++)
        for (size_t i = 0; i < E; i++)
            run.x[r * E + i] += post_gate * table[r / padded * E + i];
    if (!global_layers(mm, &run, n, err)) {
        ok = false;
        goto done;
    }
    /* each tile's rows without padding: the output, then the kept states channel by channel */
    for (size_t tile = 0; tile < T; tile++)
        for (size_t r = 0; r < rows; r++) {
            size_t from = tile * padded + r;
            float *f = feats + (tile * rows + r) * feat;
            memcpy(f, run.x + from * E, E * sizeof *f);
            for (size_t c = 0; c < E; c++)
                for (size_t k = 0; k < K; k++)
                    f[E + c * K + k] = kept[(k * n + from) * E + c];
        }
    vision_matmul(pool, &mm->mm0, &mm->mm0_b, feats, T * rows, data, run.act);
    *out = (corral_image_embd){.n_tokens = 1, .nx = 1, .ny = 1,
                               .n_embd = (uint32_t)(T * rows * hp->n_embd_text), .data = data,
                               .n_attended = (uint32_t)(n_real * rows)};
    data = NULL;
done:
    free(cols);
    free(patches);
    free(kept);
    free(feats);
    free(table);
    free(pos);
    free(padding);
    free(data);
    vision_run_free(&run);
    return ok;
}

const projector_kind projector_mllama = {
    .name = "mllama",
    .image_begin = "",
    .image_end = "",
    .resize = CORRAL_IMAGE_CANVAS,
    .norm = VISION_LAYER_NORM,
    .ffn = VISION_FFN_GELU_ERF,
    .bind = mllama_bind,
    .encode = mllama_encode,
};

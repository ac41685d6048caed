/*
 * The lfm2 projector (Liquid's LFM2-VL and LFM2.5-VL) as llama.cpp d32676d77 runs it: a
 * SigLIP2 tower over an image of any size whose sides are whole merge squares of patches.
 * The patches (a convolution with bias) get the learned position table, a square of
 * image_size / patch_size a side, resized to the image's patch grid the way SigLIP2 does it:
 * bilinear with antialiasing, half-pixel centres (ggml's upscale with its antialias flag,
 * lfm2_positions below); then LayerNorm blocks with a GELU MLP and the LayerNorm after them.
 * Each s x s square of patches (s: clip.vision.projector.scale_factor) then becomes one row
 * of its patches side by side, row by row within the square, the squares in row order (the
 * "pixel unshuffle"); a LayerNorm over that row (mm.input_norm, eps 1e-5, where the file has
 * it: the checkpoint's projector_use_layernorm), mm.1, GELU and mm.2 give the text model's
 * embeddings.
 *
 * The prompt carries <|image_start|><|img_thumbnail|> before the image and <|image_end|>
 * after it, as llama.cpp's library writes it (Hugging Face's processor leaves the thumbnail
 * mark to tiled images). An image is smart-resized: the sides multiples of a merge square,
 * 64 to 256 tokens (mmproj.c's image parameters); one wider or taller than two 512-pixel
 * tiles is also cut into a grid of them (image/slices.h's tiles), each encoded on its own
 * and marked with its row and column before the smart-resized thumbnail (lfm2_part_text).
 * Both go through the slicing plan, whose resizes are d32676d77's (corners aligned).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "blocks.h"
#include "mmproj.h"
#include "vision_order.h"

/* A merge square's side: 2 in every released model. */
enum { MAX_MERGE = 8, MAX_PROJ_WIDTH = 1 << 20 };

/* The projector's LayerNorm: PyTorch's default epsilon, which the converter does not store. */
#define LFM2_PROJ_NORM_EPS 1e-5f

/* The out width of a matrix tensor, or 0 when missing or absurd. */
static size_t out_width(const corral_mmproj *mm, const char *name)
{
    const gguf_tensor *t = mmproj_find_tensor(mm, name);
    return t && t->ne[1] >= 1 && t->ne[1] <= MAX_PROJ_WIDTH ? (size_t)t->ne[1] : 0;
}

static bool lfm2_bind(corral_mmproj *mm, corral_error *err)
{
    vision_hparams *hp = &mm->hp;
    const char *path = gguf_path(mm->file);
    size_t E = hp->n_embd;
    if (!mm->ollama_names) {
        /* llama.cpp has no usable default for the merge: the converter always writes it */
        if (!gguf_get_u32(mm->file, "clip.vision.projector.scale_factor", &hp->n_merge, err))
            return false;
        bool use_gelu = false;
        if (!gguf_get_bool_opt(mm->file, "clip.use_gelu", &use_gelu, err))
            return false;
        if (!use_gelu) {
            corral_error_set(err, "%s: lfm2 towers without a GELU MLP (clip.use_gelu) are not "
                             "supported", path);
            return false;
        }
    }
    if (hp->n_merge < 2 || hp->n_merge > MAX_MERGE) {
        corral_error_set(err, "%s: the projector's scale factor is %u, expected 2 to %d", path,
                         hp->n_merge, MAX_MERGE);
        return false;
    }
    if (hp->image_size % hp->patch_size != 0) {
        corral_error_set(err, "%s: a %u-pixel image does not split into %u-pixel patches", path,
                         hp->image_size, hp->patch_size);
        return false;
    }
    size_t side = hp->image_size / hp->patch_size, k2E = (size_t)hp->n_merge * hp->n_merge * E;
    size_t H = out_width(mm, "mm.1.weight"), T = out_width(mm, "mm.2.weight");
    if (!H || !T) {
        corral_error_set(err, "%s: missing or malformed tensor '%s'", path,
                         H ? "mm.2.weight" : "mm.1.weight");
        return false;
    }
    if (!mmproj_bind_matrix(mm, &mm->pos_embd, "v.position_embd.weight", E, side * side, true,
                            err) ||
        !mmproj_bind_vector(mm, &mm->input_norm, "mm.input_norm.weight", k2E, false, err) ||
        !mmproj_bind_vector(mm, &mm->input_norm_b, "mm.input_norm.bias", k2E, false, err) ||
        !mmproj_bind_matrix(mm, &mm->mm1, "mm.1.weight", k2E, H, true, err) ||
        !mmproj_bind_vector(mm, &mm->mm1_b, "mm.1.bias", H, true, err) ||
        !mmproj_bind_matrix(mm, &mm->mm2, "mm.2.weight", H, T, true, err) ||
        !mmproj_bind_vector(mm, &mm->mm2_b, "mm.2.bias", T, true, err))
        return false;
    if (mm->input_norm_b.data && !mm->input_norm.data) {
        corral_error_set(err, "%s: tensor 'mm.input_norm.bias' without 'mm.input_norm.weight'",
                         path);
        return false;
    }
    hp->n_embd_text = (uint32_t)T;
    return true;
}

size_t lfm2_tokens(const corral_mmproj *mm, uint32_t nx, uint32_t ny)
{
    size_t align = (size_t)mm->hp.patch_size * mm->hp.n_merge;
    return nx && ny && nx % align == 0 && ny % align == 0 ? (nx / align) * (ny / align) : 0;
}

/*
 * The position table (side x side rows of E) resized to px x py patches into pos (rows of E,
 * row order), as ggml's bilinear upscale with antialiasing computes it in float: per output
 * its centre in the table's coordinates, a triangle filter as wide as the scale (at least one
 * cell) over the cells it reaches, the weighted sum over rows then columns divided by the
 * weights' sum. A grid the table's own size comes out unchanged.
 */
static void lfm2_positions(const float *table, size_t side, size_t E, size_t px, size_t py,
                           float *pos)
{
    float sf0 = (float)px / (float)side, sf1 = (float)py / (float)side;
    float support0 = 1.0f / sf0 > 1.0f ? 1.0f / sf0 : 1.0f;
    float support1 = 1.0f / sf1 > 1.0f ? 1.0f / sf1 : 1.0f;
    float inv0 = 1.0f / support0, inv1 = 1.0f / support1;
    for (size_t i1 = 0; i1 < py; i1++) {
        float y = ((float)i1 + 0.5f) / sf1;
        int64_t y_min = (int64_t)(y - support1 + 0.5f), y_max = (int64_t)(y + support1 + 0.5f);
        y_min = y_min > 0 ? y_min : 0;
        y_max = y_max < (int64_t)side ? y_max : (int64_t)side;
        for (size_t i0 = 0; i0 < px; i0++) {
            float x = ((float)i0 + 0.5f) / sf0;
            int64_t x_min = (int64_t)(x - support0 + 0.5f);
            int64_t x_max = (int64_t)(x + support0 + 0.5f);
            x_min = x_min > 0 ? x_min : 0;
            x_max = x_max < (int64_t)side ? x_max : (int64_t)side;
            float *dst = pos + (i1 * px + i0) * E;
            for (size_t e = 0; e < E; e++) {
                float val = 0.0f, total = 0.0f;
                for (int64_t sy = y_min; sy < y_max; sy++) {
                    float ty = 1.0f - fabsf(((float)sy - y + 0.5f) * inv1);
                    float wy = ty > 0.0f ? ty : 0.0f;
                    for (int64_t sx = x_min; sx < x_max; sx++) {
                        float tx = 1.0f - fabsf(((float)sx - x + 0.5f) * inv0);
                        float w = (tx > 0.0f ? tx : 0.0f) * wy;
                        if (w <= 0.0f)
                            continue;
                        val += table[((size_t)sy * side + (size_t)sx) * E + e] * w;
                        total += w;
                    }
                }
                dst[e] = total > 0.0f ? val / total : val;
            }
        }
    }
}

/* The act room a product of w takes per row, in bytes. */
static size_t act_bytes(const weight *w)
{
    return quant_act_row_bytes(w->type, w->n_in);
}

static bool lfm2_encode(const corral_mmproj *mm, threadpool *pool,
                        const corral_cancel *cancel, const float *pixels, uint32_t nx,
                        uint32_t ny, corral_image_embd *out, corral_error *err)
{
    const vision_hparams *hp = &mm->hp;
    size_t n_tokens = lfm2_tokens(mm, nx, ny);
    if (!n_tokens) {
        corral_error_set(err, "lfm2 encodes images whose sides are multiples of %zu, not %u x %u",
                         (size_t)hp->patch_size * hp->n_merge, nx, ny);
        return false;
    }
    size_t k = hp->n_merge, px = nx / hp->patch_size, py = ny / hp->patch_size, n = px * py;
    size_t mx = px / k, E = hp->n_embd, side = hp->image_size / hp->patch_size;
    size_t H = mm->mm1.n_out, T = hp->n_embd_text, k2E = k * k * E;
    size_t extra = act_bytes(&mm->mm1) > act_bytes(&mm->mm2) ? act_bytes(&mm->mm1)
                                                             : act_bytes(&mm->mm2);
    bool ok = true;
    float *table = vision_alloc_rows(side * side, E, &ok);
    float *pos = vision_alloc_rows(n, E, &ok);
    float *hidden = vision_alloc_rows(n_tokens, H, &ok);
    out->data = vision_alloc_rows(n_tokens, T, &ok);
    uint32_t *at = ok ? malloc(2 * n * sizeof *at) : NULL;
    vision_run run;
    if (!ok || !at) {
        corral_error_set(err, "cannot allocate the projector's buffers for %zu patches", n);
        ok = false;
    }
    ok = ok && vision_run_init(&run, mm, pool, cancel, n, extra, err);
    if (!ok) {
        free(table);
        free(pos);
        free(hidden);
        free(at);
        return false;
    }
    for (size_t t = 0; t < n; t++) {
        at[2 * t] = (uint32_t)(t / px);
        at[2 * t + 1] = (uint32_t)(t % px);
    }
    vision_patch_embed(&run, pixels, nx, at);
    for (size_t r = 0; r < side * side; r++) /* the table in any type the file has */
        mm->pos_embd.ops->dequantize((const uint8_t *)mm->pos_embd.data + r * mm->pos_embd.row_bytes,
                                     table + r * E, E);
    lfm2_positions(table, side, E, px, py, pos);
    for (size_t i = 0; i < n * E; i++)
        run.x[i] += pos[i];
    if (!vision_run_blocks(&run, 0, hp->n_layer, err)) {
        vision_run_free(&run);
        free(table);
        free(pos);
        free(hidden);
        free(at);
        return false;
    }
    if (mm->post_ln.data)
        vision_norm_rows(mm, &mm->post_ln, &mm->post_ln_b, run.x, run.x, n);
    /* each square's patches side by side, rows before columns: n_tokens rows of k * k * E
     * (run.q holds n x E floats, as many) */
    float *squares = run.q;
    for (size_t t = 0; t < n_tokens; t++) {
        size_t Y = t / mx, X = t % mx;
        for (size_t ky = 0; ky < k; ky++)
            for (size_t kx = 0; kx < k; kx++)
                memcpy(squares + t * k2E + (ky * k + kx) * E,
                       run.x + ((Y * k + ky) * px + X * k + kx) * E, E * sizeof *squares);
    }
    if (mm->input_norm.data)
        for (size_t t = 0; t < n_tokens; t++)
            vision_layernorm_row(squares + t * k2E, mm->input_norm.data,
                                 mm->input_norm_b.data, k2E, LFM2_PROJ_NORM_EPS,
                                 squares + t * k2E);
    vision_matmul(pool, &mm->mm1, &mm->mm1_b, squares, n_tokens, hidden, run.act);
    block_gelu(hidden, n_tokens * H);
    vision_matmul(pool, &mm->mm2, &mm->mm2_b, hidden, n_tokens, out->data, run.act);
    vision_run_free(&run);
    free(table);
    free(pos);
    free(hidden);
    free(at);
    /* the text model takes the tokens as a run (plain positions) */
    out->n_tokens = n_tokens;
    out->nx = (uint32_t)n_tokens;
    out->ny = 1;
    out->n_embd = (uint32_t)T;
    return true;
}

/* A tile's mark by its row and column, 1 to 10 each (tiles are at most 10). */
#define LFM2_TILE(r, c) "<|img_row_" #r "_col_" #c "|>"
#define LFM2_ROW(r)                                                                              \
    {LFM2_TILE(r, 1), LFM2_TILE(r, 2), LFM2_TILE(r, 3), LFM2_TILE(r, 4), LFM2_TILE(r, 5),         \
     LFM2_TILE(r, 6), LFM2_TILE(r, 7), LFM2_TILE(r, 8), LFM2_TILE(r, 9), LFM2_TILE(r, 10)}
static const char *const tile_marks[10][10] = {LFM2_ROW(1), LFM2_ROW(2), LFM2_ROW(3),
                                               LFM2_ROW(4), LFM2_ROW(5), LFM2_ROW(6),
                                               LFM2_ROW(7), LFM2_ROW(8), LFM2_ROW(9),
                                               LFM2_ROW(10)};

/* A tiled image: <|image_start|>, each tile after its <|img_row_R_col_C|> (from 1), the
 * thumbnail after <|img_thumbnail|>, then <|image_end|>; untiled, the begin and end alone. */
static const char *lfm2_part_text(const corral_mmproj *mm, uint32_t cols, uint32_t rows,
                                  size_t part)
{
    size_t tiles = (size_t)cols * rows;
    if (part > tiles)
        return mm->kind->image_end;
    if (tiles == 0)
        return mm->kind->image_begin;
    if (part == tiles)
        return "<|img_thumbnail|>";
    if (part == 0)
        return "<|image_start|>" LFM2_TILE(1, 1);
    size_t r = part / cols, c = part % cols;
    return r < 10 && c < 10 ? tile_marks[r][c] : mm->kind->image_end;
}

/* The larger of its parts: a thumbnail of at most max_pixels, a tile of tile_size a side. */
static size_t lfm2_gpu_rows(const corral_mmproj *mm)
{
    corral_image_params params;
    corral_mmproj_image_params(mm, &params);
    uint64_t tile = (uint64_t)params.tile_size * params.tile_size;
    uint64_t pixels = params.max_pixels > tile ? params.max_pixels : tile;
    return (size_t)(pixels / ((uint64_t)mm->hp.patch_size * mm->hp.patch_size));
}

const projector_kind projector_lfm2 = {
    .name = "lfm2",
    /* llama.cpp d32676d77 marks every image's overview as the thumbnail, an untiled one too */
    .image_begin = "<|image_start|><|img_thumbnail|>",
    .image_end = "<|image_end|>",
    .resize = CORRAL_IMAGE_SMART,
    .norm = VISION_LAYER_NORM,
    .ffn = VISION_FFN_GELU,
    .bind = lfm2_bind,
    .part_text = lfm2_part_text,
    .encode = lfm2_encode,
    .gpu_rows = lfm2_gpu_rows,
};

/*
 * The llama4 projector (Llama 4 Scout and Maverick) as llama.cpp d32676d77 runs it. Each
 * image_size square of the preprocessed column (TILES: the slices in row order, then the
 * overview) goes through the tower on its own: its patches through one linear unfold (no
 * bias), a class embedding after them, learned position embeddings over both; a LayerNorm
 * before the blocks; LayerNorm blocks with biases, a GELU MLP and 2-D rotary positions: a
 * head's first half turns with the patch column + 1, its second half with the row + 1, in
 * adjacent pairs (Hugging Face's complex rotation, which the converters keep), theta 10000,
 * the class token at position 0; a LayerNorm after them. Then the class token is dropped and
 * each s x s square of patches (s: clip.vision.projector.scale_factor) becomes one row of
 * s * s patches side by side, row by row within the square; llama.cpp's pixel shuffle walks
 * the squares column by column, so the square at (X, Y) is token X * (side / s) + Y. Then
 * mm.model.mlp.1, GELU, mm.model.mlp.2, GELU (no biases) and the projection mm.model.fc.
 *
 * The prompt carries <|image_start|> before the image and <|image_end|> after it, and
 * llama.cpp puts nothing between the squares' tokens. ollama's single files hold the same
 * tower under their own names (mmproj_ollama.c); ollama now runs them through llama.cpp.
 */
#include <stdlib.h>
#include <string.h>

#include "blocks.h"
#include "mmproj.h"
#include "tensor_type.h"
#include "util/checked.h"

/* A merge square's side: 2 in both released models. */
enum { MAX_MERGE = 8, MAX_PROJ_WIDTH = 1 << 20, GRID_SIDE = 3 };

/* The out width of a matrix tensor, or 0 when missing or absurd. */
static size_t out_width(const corral_mmproj *mm, const char *name)
{
    const gguf_tensor *t = mmproj_find_tensor(mm, name);
    return t && t->ne[1] >= 1 && t->ne[1] <= MAX_PROJ_WIDTH ? (size_t)t->ne[1] : 0;
}

static bool llama4_bind(corral_mmproj *mm, corral_error *err)
{
    vision_hparams *hp = &mm->hp;
    const char *path = gguf_path(mm->file);
    size_t E = hp->n_embd;
    if (hp->image_size % hp->patch_size != 0) {
        corral_error_set(err, "%s: a %u-pixel image does not split into %u-pixel patches", path,
                         hp->image_size, hp->patch_size);
        return false;
    }
    size_t side = hp->image_size / hp->patch_size, n = side * side;
    if (!mm->ollama_names) {
        /* llama.cpp takes no default: a file without the factor fails there */
        if (!gguf_get_u32(mm->file, "clip.vision.projector.scale_factor", &hp->n_merge, err))
            return false;
        bool use_gelu = false;
        if (!gguf_get_bool_opt(mm->file, "clip.use_gelu", &use_gelu, err))
            return false;
        if (!use_gelu) {
            corral_error_set(err, "%s: llama4 towers without a GELU MLP (clip.use_gelu) are not "
                             "supported", path);
            return false;
        }
    }
    if (hp->n_merge == 0 || hp->n_merge > MAX_MERGE || side % hp->n_merge != 0) {
        corral_error_set(err, "%s: a pixel shuffle of %u x %u does not fit a %zu x %zu patch grid",
                         path, hp->n_merge, hp->n_merge, side, side);
        return false;
    }
    if ((E / hp->n_head) % 4 != 0) {
        corral_error_set(err, "%s: a head of %zu values does not split into two rotary halves of "
                         "pairs", path, E / hp->n_head);
        return false;
    }
    /* llama.cpp's pinpoints for llama4: every grid of up to 3 x 3 squares but the single one */
    mm->n_pinpoints = 0;
    for (uint32_t x = 1; x <= GRID_SIDE; x++)
        for (uint32_t y = 1; y <= GRID_SIDE; y++)
            if (x != 1 || y != 1) {
                mm->pinpoints[mm->n_pinpoints][0] = x * hp->image_size;
                mm->pinpoints[mm->n_pinpoints][1] = y * hp->image_size;
                mm->n_pinpoints++;
            }
    mm->max_squares = 1 + GRID_SIDE * GRID_SIDE;
    if (n * mm->max_squares > MMPROJ_MAX_PATCHES) {
        corral_error_set(err, "%s: %zu patches per square, more than %u in %u squares", path, n,
                         (unsigned)MMPROJ_MAX_PATCHES, mm->max_squares);
        return false;
    }
    size_t k2 = (size_t)hp->n_merge * hp->n_merge;
    size_t H1 = out_width(mm, "mm.model.mlp.1.weight"), H2 = out_width(mm, "mm.model.mlp.2.weight");
    size_t T = out_width(mm, "mm.model.fc.weight");
    if (!H1 || !H2 || !T) {
        corral_error_set(err, "%s: missing or malformed tensor '%s'", path,
                         !H1 ? "mm.model.mlp.1.weight"
                         : !H2 ? "mm.model.mlp.2.weight"
                               : "mm.model.fc.weight");
        return false;
    }
    if (!mmproj_bind_vector(mm, &mm->class_embd, "v.class_embd", E, true, err) ||
        !mmproj_bind_matrix(mm, &mm->pos_embd, "v.position_embd.weight", E, n + 1, true, err) ||
        !mmproj_bind_vector(mm, &mm->pre_ln, "v.pre_ln.weight", E, false, err) ||
        !mmproj_bind_vector(mm, &mm->pre_ln_b, "v.pre_ln.bias", E, false, err) ||
        !mmproj_bind_matrix(mm, &mm->mm1, "mm.model.mlp.1.weight", k2 * E, H1, true, err) ||
        !mmproj_bind_matrix(mm, &mm->mm2, "mm.model.mlp.2.weight", H1, H2, true, err) ||
        !mmproj_bind_matrix(mm, &mm->mm0, "mm.model.fc.weight", H2, T, true, err))
        return false;
    hp->n_embd_text = (uint32_t)T;
    return true;
}

/* The rows an s x s pixel shuffle makes of a side x side grid of patch states (E each), in
 * llama.cpp's order: the square at column X, row Y is row X * m + Y (m = side / s), holding
 * its patches row by row. */
static void pixel_shuffle(const float *states, size_t side, size_t s, size_t E, float *out)
{
    size_t m = side / s;
    for (size_t X = 0; X < m; X++)
        for (size_t Y = 0; Y < m; Y++) {
            float *row = out + (X * m + Y) * s * s * E;
            for (size_t dy = 0; dy < s; dy++)
                for (size_t dx = 0; dx < s; dx++)
                    memcpy(row + (dy * s + dx) * E, states + ((Y * s + dy) * side + X * s + dx) * E,
                           E * sizeof *row);
        }
}

/* The act room a product of w takes per row, in bytes. */
static size_t act_bytes(const weight *w)
{
    return quant_act_row_bytes(w->type, w->n_in);
}

static bool llama4_encode(const corral_mmproj *mm, threadpool *pool,
                          const corral_cancel *cancel, const float *pixels, uint32_t nx,
                          uint32_t ny, corral_image_embd *out, corral_error *err)
{
    const vision_hparams *hp = &mm->hp;
    uint32_t S = hp->image_size;
    if (nx != S || ny % S != 0 || ny / S == 0 || ny / S > mm->max_squares) {
        corral_error_set(err, "llama4 encodes a column of up to %u squares of %u x %u pixels, "
                         "not %u x %u", mm->max_squares, S, S, nx, ny);
        return false;
    }
    size_t squares = ny / S, side = S / hp->patch_size, n = side * side, s = hp->n_merge;
    size_t E = hp->n_embd, d = E / hp->n_head, n_tok = n / (s * s);
    size_t H1 = mm->mm1.n_out, H2 = mm->mm2.n_out, T = hp->n_embd_text;
    size_t act = act_bytes(&mm->mm1);
    const weight *more[] = {&mm->mm2, &mm->mm0};
    for (size_t i = 0; i < 2; i++)
        act = act_bytes(more[i]) > act ? act_bytes(more[i]) : act;
    size_t total;
    bool ok = checked_mul_size(squares * n_tok, T, &total);
    uint32_t *at = ok ? malloc(2 * (n + 1) * sizeof *at) : NULL;
    float *cs = vision_alloc_rows(n + 1, d, &ok);
    float *shuffled = vision_alloc_rows(n_tok, s * s * E, &ok);
    float *h1 = vision_alloc_rows(n_tok, H1, &ok);
    float *h2 = vision_alloc_rows(n_tok, H2, &ok);
    out->data = vision_alloc_rows(total, 1, &ok);
    vision_run run;
    ok = ok && at;
    if (!ok)
        corral_error_set(err, "cannot allocate the projector's buffers for %zu patches", n);
    ok = ok && vision_run_init(&run, mm, pool, cancel, n + 1, act, err);
    if (!ok) {
        free(at);
        free(cs);
        free(shuffled);
        free(h1);
        free(h2);
        return false;
    }
    /* the patches' (column + 1, row + 1), the class token's (0, 0) */
    for (size_t t = 0; t < n; t++) {
        at[2 * t] = (uint32_t)(t % side + 1);
        at[2 * t + 1] = (uint32_t)(t / side + 1);
    }
    at[2 * n] = at[2 * n + 1] = 0;
    vision_patch_angles(at, n + 1, d, cs);
    /* the unfold's (row, column) per patch */
    for (size_t t = 0; t < n; t++) {
        at[2 * t] = (uint32_t)(t / side);
        at[2 * t + 1] = (uint32_t)(t % side);
    }
    run.rope_cs = cs;
    run.rope_adjacent = true;
    for (size_t q = 0; ok && q < squares; q++) {
        run.n_patches = n;
        vision_patch_embed(&run, pixels + q * (size_t)S * S * 3, S, at);
        run.n_patches = n + 1;
        memcpy(run.x + n * E, mm->class_embd.data, E * sizeof *run.x);
        for (size_t t = 0; t <= n; t++) {
            mm->pos_embd.ops->dequantize(
                (const uint8_t *)mm->pos_embd.data + t * mm->pos_embd.row_bytes, run.xn, E);
            for (size_t e = 0; e < E; e++)
                run.x[t * E + e] += run.xn[e];
        }
        if (mm->pre_ln.data)
            vision_norm_rows(mm, &mm->pre_ln, &mm->pre_ln_b, run.x, run.x, n + 1);
        if (!(ok = vision_run_blocks(&run, 0, mm->hp.n_layer, err)))
            break;
        if (mm->post_ln.data)
            vision_norm_rows(mm, &mm->post_ln, &mm->post_ln_b, run.x, run.x, n + 1);
        pixel_shuffle(run.x, side, s, E, shuffled);
        vision_matmul(pool, &mm->mm1, NULL, shuffled, n_tok, h1, run.act);
        block_gelu(h1, n_tok * H1);
        vision_matmul(pool, &mm->mm2, NULL, h1, n_tok, h2, run.act);
        block_gelu(h2, n_tok * H2);
        vision_matmul(pool, &mm->mm0, NULL, h2, n_tok, out->data + q * n_tok * T, run.act);
    }
    vision_run_free(&run);
    free(at);
    free(cs);
    free(shuffled);
    free(h1);
    free(h2);
    out->n_tokens = squares * n_tok;
    out->nx = (uint32_t)out->n_tokens;
    out->ny = 1;
    out->n_embd = (uint32_t)T;
    return ok;
}

size_t llama4_tokens(const corral_mmproj *mm, uint32_t nx, uint32_t ny)
{
    const vision_hparams *hp = &mm->hp;
    uint32_t S = hp->image_size;
    if (nx != S || ny % S != 0 || ny / S == 0 || ny / S > mm->max_squares)
        return 0;
    size_t side = S / hp->patch_size / hp->n_merge;
    return (size_t)(ny / S) * side * side;
}

/* A square's patches and the class row. */
static size_t llama4_gpu_rows(const corral_mmproj *mm)
{
    size_t side = mm->hp.image_size / mm->hp.patch_size;
    return side * side + 1;
}

const projector_kind projector_llama4 = {
    .name = "llama4",
    .image_begin = "<|image_start|>",
    .image_end = "<|image_end|>",
    .resize = CORRAL_IMAGE_TILES,
    .norm = VISION_LAYER_NORM,
    .ffn = VISION_FFN_GELU,
    .bind = llama4_bind,
    .encode = llama4_encode,
    .gpu_rows = llama4_gpu_rows,
};

/*
 * The gemma3 projector over a SigLIP tower: the letterboxed square image's patches with
 * learned position embeddings through LayerNorm blocks with a GELU MLP and a final
 * LayerNorm; then n_merge x n_merge patches averaged into one token, an RMS norm times
 * mm.soft_emb_norm, and the input projection into the text model's width.
 */
#include <stdlib.h>
#include <string.h>

#include "blocks.h"
#include "mmproj.h"
#include "tensor_type.h"
#include "vision_order.h"

static bool gemma3_bind(corral_mmproj *mm, corral_error *err)
{
    const vision_hparams *hp0 = &mm->hp;
    const char *path = gguf_path(mm->file);
    uint32_t side = hp0->image_size / hp0->patch_size;
    if (hp0->image_size % hp0->patch_size != 0 || side % hp0->n_merge != 0) {
        corral_error_set(err, "%s: a %u-pixel image does not split into %u-pixel patches pooled "
                         "%u x %u", path, hp0->image_size, hp0->patch_size, hp0->n_merge,
                         hp0->n_merge);
        return false;
    }
    size_t E = hp0->n_embd;
    if (!mm->post_ln.data) {
        corral_error_set(err, "%s: missing tensor 'v.post_ln.weight'", path);
        return false;
    }
    if (!mmproj_bind_matrix(mm, &mm->pos_embd, "v.position_embd.weight", E, (size_t)side * side,
                            true, err) ||
        !mmproj_bind_vector(mm, &mm->soft_emb_norm, "mm.soft_emb_norm.weight", E, true, err))
        return false;
    /* The file stores the projection as n_embd rows of the text width; the products want a
     * row per output, so it is turned once into F32 rows of n_embd. */
    const gguf_tensor *t = mmproj_find_tensor(mm, "mm.input_projection.weight");
    if (!t) {
        corral_error_set(err, "%s: missing tensor 'mm.input_projection.weight'", path);
        return false;
    }
    const quant_ops *ops = quant_ops_active(t->type);
    if (t->ne[1] != (int64_t)E || t->ne[2] != 1 || t->ne[3] != 1 || t->ne[0] < 1 ||
        t->ne[0] > (1 << 20) || !ops || !ops->dequantize) {
        corral_error_set(err, "%s: tensor 'mm.input_projection.weight' must be [text width, %zu] "
                         "of a supported type", path, E);
        return false;
    }
    size_t T = (size_t)t->ne[0], row_bytes = t->size_bytes / E;
    float *owned = malloc(T * E * sizeof *owned), *row = malloc(T * sizeof *row);
    if (!owned || !row) {
        free(owned);
        free(row);
        corral_error_set(err, "out of memory");
        return false;
    }
    for (size_t v = 0; v < E; v++) {
        ops->dequantize((const uint8_t *)t->data + v * row_bytes, row, T);
        for (size_t j = 0; j < T; j++)
            owned[j * E + v] = row[j];
    }
    free(row);
    mm->input_proj_owned = owned;
    mm->input_proj = (weight){.data = owned,
                              .type = TENSOR_TYPE_F32,
                              .n_in = E,
                              .n_out = T,
                              .row_bytes = E * sizeof(float),
                              .ops = quant_ops_active(TENSOR_TYPE_F32)};
    mm->hp.n_embd_text = (uint32_t)T;
    return true;
}

static bool gemma3_encode(const corral_mmproj *mm, threadpool *pool,
                          const corral_cancel *cancel, const float *pixels, uint32_t nx,
                          uint32_t ny, corral_image_embd *out, corral_error *err)
{
    const vision_hparams *hp = &mm->hp;
    if (nx != hp->image_size || ny != hp->image_size) {
        corral_error_set(err, "gemma3 encodes %u x %u images, not %u x %u", hp->image_size,
                         hp->image_size, nx, ny);
        return false;
    }
    size_t side = hp->image_size / hp->patch_size, n = side * side, E = hp->n_embd;
    size_t k = hp->n_merge, o = side / k, n_tokens = o * o, T = hp->n_embd_text;
    uint32_t *at = malloc(2 * n * sizeof *at);
    out->data = malloc(n_tokens * T * sizeof *out->data);
    vision_run run;
    if (!at || !out->data) {
        free(at);
        corral_error_set(err, "out of memory");
        return false;
    }
    /* the projection takes at most as many rows as there are patches */
    size_t proj_act = quant_act_row_bytes(mm->input_proj.type, E);
    if (!vision_run_init(&run, mm, pool, cancel, n, proj_act, err)) {
        free(at);
        return false;
    }
    for (size_t t = 0; t < n; t++) {
        at[2 * t] = (uint32_t)(t / side);
        at[2 * t + 1] = (uint32_t)(t % side);
    }
    vision_patch_embed(&run, pixels, nx, at);
    free(at);
    for (size_t t = 0; t < n; t++) { /* position embeddings, of any type the file has */
        mm->pos_embd.ops->dequantize((const uint8_t *)mm->pos_embd.data + t * mm->pos_embd.row_bytes,
                                     run.xn, E);
        for (size_t e = 0; e < E; e++)
            run.x[t * E + e] += run.xn[e];
    }
    if (!vision_run_blocks(&run, 0, hp->n_layer, err)) {
        vision_run_free(&run);
        return false;
    }
    vision_norm_rows(mm, &mm->post_ln, &mm->post_ln_b, run.x, run.x, n);

    /* average pooling into xn, then the soft-embedding norm */
    float *pooled = run.xn;
    for (size_t oy = 0; oy < o; oy++)
        for (size_t ox = 0; ox < o; ox++) {
            float *dst = pooled + (oy * o + ox) * E;
            for (size_t e = 0; e < E; e++) {
                float sum = 0.0f;
                for (size_t ky = 0; ky < k; ky++)
                    for (size_t kx = 0; kx < k; kx++)
                        sum += run.x[((oy * k + ky) * side + ox * k + kx) * E + e];
                dst[e] = sum / (float)(k * k);
            }
        }
    for (size_t t = 0; t < n_tokens; t++)
        vision_rmsnorm_row(pooled + t * E, mm->soft_emb_norm.data, E, hp->eps, pooled + t * E);
    vision_matmul(pool, &mm->input_proj, NULL, pooled, n_tokens, out->data, run.act);
    vision_run_free(&run);
    out->n_tokens = n_tokens;
    out->nx = (uint32_t)n_tokens;
    out->ny = 1;
    out->n_embd = (uint32_t)T;
    return true;
}

/* Every image is one square of patches. */
static size_t gemma3_gpu_rows(const corral_mmproj *mm)
{
    size_t side = mm->hp.image_size / mm->hp.patch_size;
    return side * side;
}

const projector_kind projector_gemma3 = {
    .name = "gemma3",
    .image_begin = "<start_of_image>",
    .image_end = "<end_of_image>",
    .resize = CORRAL_IMAGE_LETTERBOX,
    .norm = VISION_LAYER_NORM,
    .ffn = VISION_FFN_GELU,
    .bind = gemma3_bind,
    .encode = gemma3_encode,
    .gpu_rows = gemma3_gpu_rows,
};

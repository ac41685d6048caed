/*
 * The qwen3vl_merger projector over Qwen3-VL's tower, as llama.cpp computes it: patches in
 * 2 x 2 merge groups (a group's four patches consecutive, groups in row order), the patch
 * convolution of two temporal frames summed plus its bias, then the learned position
 * embeddings, a square table resized to the image's patch grid (bilinear, corners aligned);
 * LayerNorm blocks with a fused QKV, Qwen's 2-D rotary positions (as Qwen2.5-VL's, but no
 * window attention) and a GELU MLP with biases; a final LayerNorm per patch and the merger
 * (each group's four states side by side through mm.0, GELU, mm.2).
 *
 * Deepstack: after each layer that has a v.deepstack.N merger, that layer's states, merged
 * the same way, go through a LayerNorm over the merged row, fc1, GELU and fc2. An image
 * token's embedding is then the main merger's row followed by each deepstack row in layer
 * order, text widths side by side; the text model takes the first as the token's input and
 * adds the k-th to its hidden state after its layer k (context.c).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blocks.h"
#include "mmproj.h"
#include "quant_half.h"
#include "tensor_type.h"
#include "vision_order.h"

/* The position table's side: far above Qwen3-VL's 48, far below what would overflow. */
enum { MAX_POS_SIDE = 1024 };

/* Per tensor name "<prefix>N.<rest>": N, or -1 for a malformed number. */
static long merger_index(const char *name, const char *prefix)
{
    const char *p = name + strlen(prefix);
    long n = 0;
    if (*p < '0' || *p > '9')
        return -1;
    for (; *p >= '0' && *p <= '9'; p++) {
        n = n * 10 + (*p - '0');
        if (n > 1 << 20) /* far past any tower (and short of overflow): names none */
            return -1;
    }
    return *p == '.' ? n : -1;
}

/* Every tensor under prefix must be numbered below limit (what the numbers count: what). */
static bool check_merger_names(const corral_mmproj *mm, const char *prefix, long limit,
                               const char *what, corral_error *err)
{
    for (size_t i = 0; i < gguf_n_tensors(mm->file); i++) {
        const char *name = gguf_tensor_at(mm->file, i)->name;
        if (strncmp(name, prefix, strlen(prefix)) != 0)
            continue;
        long k = merger_index(name, prefix);
        if (k < 0 || k >= limit) {
            corral_error_set(err, "%s: tensor '%s' names none of the %ld %s", gguf_path(mm->file),
                             name, limit, what);
            return false;
        }
    }
    return true;
}

/* Deepstack merger k after tower layer il, its tensors under base (llama.cpp's
 * "v.deepstack.<layer>", ollama's "v.deepstack_merger.<k>" with its own leaf names). */
static bool bind_merger(corral_mmproj *mm, uint32_t il, const char *base, bool ollama,
                        size_t T, corral_error *err)
{
    size_t M = 4 * (size_t)mm->hp.n_embd;
    vision_deepstack *ds = &mm->deepstack[mm->n_deepstack++];
    ds->layer = il;
    struct {
        weight *w;
        const char *suffix, *theirs;
        size_t n_in, n_out;
        bool vector, required;
    } t[] = {
        {&ds->norm, "norm.weight", "norm.weight", M, 1, true, true},
        {&ds->norm_b, "norm.bias", "norm.bias", M, 1, true, false},
        {&ds->fc1, "fc1.weight", "linear_fc1.weight", M, M, false, true},
        {&ds->fc1_b, "fc1.bias", "linear_fc1.bias", M, 1, true, false},
        {&ds->fc2, "fc2.weight", "linear_fc2.weight", M, T, false, true},
        {&ds->fc2_b, "fc2.bias", "linear_fc2.bias", T, 1, true, false},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        char name[96];
        snprintf(name, sizeof name, "%s.%s", base, ollama ? t[i].theirs : t[i].suffix);
        if (!(t[i].vector ? mmproj_bind_vector(mm, t[i].w, name, t[i].n_in, t[i].required, err)
                          : mmproj_bind_matrix(mm, t[i].w, name, t[i].n_in, t[i].n_out,
                                               t[i].required, err)))
            return false;
    }
    return true;
}

/* ollama's: <arch>.vision.deepstack_visual_indexes lists the layers, ascending (its text model
 * adds merger k's rows in layer k, so the order is the rows' order), merger k named by its
 * place in the list. */
static bool bind_deepstack_ollama(corral_mmproj *mm, size_t T, corral_error *err)
{
    const char *path = gguf_path(mm->file);
    char key[96];
    const gguf_kv *kv;
    snprintf(key, sizeof key, "%s.vision.deepstack_visual_indexes", mm->key_prefix);
    if (!gguf_get_array_opt(mm->file, key, GGUF_TYPE_COUNT, &kv, err))
        return false;
    uint64_t n = kv ? kv->n : 0;
    if (kv && n && !gguf_type_is_integer(kv->elem_type)) {
        corral_error_set(err, "%s: %s must list layers", path, key);
        return false;
    }
    int64_t last = -1;
    for (uint64_t k = 0; k < n; k++) {
        int64_t il = gguf_kv_i64(kv, k);
        if (il <= last || il >= (int64_t)mm->hp.n_layer) {
            corral_error_set(err, "%s: %s must list layers of the %u-layer tower in ascending "
                             "order", path, key, mm->hp.n_layer);
            return false;
        }
        last = il;
        char base[64];
        snprintf(base, sizeof base, "v.deepstack_merger.%llu", (unsigned long long)k);
        if (!bind_merger(mm, (uint32_t)il, base, true, T, err))
            return false;
    }
    return check_merger_names(mm, "v.deepstack_merger.", (long)n, "deepstack mergers listed",
                              err);
}

/* The deepstack mergers: a layer has one when its fc1 is there; every v.deepstack.* tensor
 * must belong to a layer of the tower, and clip.vision.is_deepstack_layers, where the file
 * has it, must name the same layers. */
static bool bind_deepstack(corral_mmproj *mm, size_t T, corral_error *err)
{
    const vision_hparams *hp = &mm->hp;
    const char *path = gguf_path(mm->file);
    if (!(mm->deepstack = calloc(hp->n_layer, sizeof *mm->deepstack))) {
        corral_error_set(err, "out of memory");
        return false;
    }
    if (mm->ollama_names)
        return bind_deepstack_ollama(mm, T, err);
    const gguf_kv *flags = NULL;
    if (!check_merger_names(mm, "v.deepstack.", (long)hp->n_layer, "tower layers", err) ||
        !gguf_get_array_opt(mm->file, "clip.vision.is_deepstack_layers", GGUF_TYPE_BOOL, &flags,
                            err))
        return false;
    if (flags && flags->n != hp->n_layer) {
        corral_error_set(err, "%s: clip.vision.is_deepstack_layers has %llu entries for %u layers",
                         path, (unsigned long long)flags->n, hp->n_layer);
        return false;
    }
    for (uint32_t il = 0; il < hp->n_layer; il++) {
        char name[96], base[64];
        snprintf(name, sizeof name, "v.deepstack.%u.fc1.weight", il);
        bool has = mmproj_find_tensor(mm, name) != NULL;
        if (flags && gguf_kv_bool(flags, il) != has) {
            corral_error_set(err, "%s: clip.vision.is_deepstack_layers says layer %u %s a "
                             "deepstack merger, but '%s' is %s", path, il,
                             has ? "has no" : "has", name, has ? "there" : "missing");
            return false;
        }
        snprintf(base, sizeof base, "v.deepstack.%u", il);
        if (has && !bind_merger(mm, il, base, false, T, err))
            return false;
    }
    return true;
}

/*
 * llama.cpp's patch convolution (ggml_conv_2d) lays the pixels' patches out in F16 unless
 * the kernel is BF16 (then in F32), and multiplies the kernel with them in that type: an F32
 * kernel's products are F16's, both sides rounded to half. A product of two halves is exact
 * in F32, so the kernels become F32 rows of the values it multiplies (an F32 kernel's rounded
 * to half, an F16's or BF16's exactly), qwen3vl_encode rounds the pixels to half unless the
 * kernel is BF16, and vision_patch_embed_half sums in its order.
 *
 * ollama's files hold both frames in one Conv3D kernel, v.patch_embed.weight
 * [p, p, 2, 3 * E] (output-major, then channel; the two frames side by side in each row of
 * p): the same F32 rows are taken from it (of a float type).
 */
static bool patch_kernels_as_reference(corral_mmproj *mm, corral_error *err)
{
    const char *path = gguf_path(mm->file);
    size_t E = mm->hp.n_embd, p = mm->hp.patch_size, n_in = 3 * p * p, n = n_in * E;
    const gguf_tensor *conv3d = NULL;
    uint32_t from = mm->patch_embd.type;
    if (mm->ollama_names) {
        conv3d = gguf_find_tensor(mm->file, "v.patch_embed.weight");
        if (!conv3d || conv3d->ne[0] != (int64_t)p || conv3d->ne[1] != (int64_t)p ||
            conv3d->ne[2] != 2 || conv3d->ne[3] != (int64_t)(3 * E) ||
            (conv3d->type != TENSOR_TYPE_F32 && conv3d->type != TENSOR_TYPE_F16 &&
             conv3d->type != TENSOR_TYPE_BF16)) {
            corral_error_set(err, "%s: tensor 'v.patch_embed.weight' must be an F32, F16 or BF16 "
                             "kernel [%zu, %zu, 2, %zu]", path, p, p, 3 * E);
            return false;
        }
        from = conv3d->type;
    }
    float *owned = malloc(2 * n * sizeof *owned);
    if (!owned) {
        corral_error_set(err, "out of memory");
        return false;
    }
    mm->patch_owned = owned;
    mm->patch_pixels_half = from != TENSOR_TYPE_BF16;
    weight *ws[2] = {&mm->patch_embd, &mm->patch_embd_1};
    if (conv3d) {
        const quant_ops *ops = quant_ops_active(from);
        size_t row_bytes = conv3d->size_bytes / (p * 2 * 3 * E); /* a row of p */
        for (size_t o = 0; o < E; o++)
            for (size_t c = 0; c < 3; c++)
                for (size_t f = 0; f < 2; f++)
                    for (size_t ky = 0; ky < p; ky++) {
                        size_t r = ((o * 3 + c) * 2 + f) * p + ky;
                        ops->dequantize((const uint8_t *)conv3d->data + r * row_bytes,
                                        owned + f * n + o * n_in + (c * p + ky) * p, p);
                    }
        for (size_t k = 0; k < 2; k++)
            *ws[k] = (weight){.data = owned + k * n, .n_in = n_in, .n_out = E};
    }
    for (size_t k = 0; k < 2; k++) {
        weight *w = ws[k];
        if (!w->data)
            continue;
        float *dst = owned + k * n;
        if (!conv3d) {
            if (w->type != from) {
                corral_error_set(err, "%s: the two patch kernels are of different types", path);
                return false;
            }
            for (size_t r = 0; r < w->n_out; r++)
                w->ops->dequantize((const uint8_t *)w->data + r * w->row_bytes,
                                   dst + r * w->n_in, w->n_in);
        }
        if (from == TENSOR_TYPE_F32)
            for (size_t i = 0; i < n; i++)
                dst[i] = quant_f16_to_f32(quant_f32_to_f16(dst[i]));
        w->data = dst;
        w->type = TENSOR_TYPE_F32;
        w->row_bytes = w->n_in * sizeof *dst;
        w->ops = quant_ops_active(TENSOR_TYPE_F32);
    }
    return true;
}

static bool qwen3vl_bind(corral_mmproj *mm, corral_error *err)
{
    vision_hparams *hp = &mm->hp;
    const char *path = gguf_path(mm->file);
    size_t E = hp->n_embd, d = E / hp->n_head, M = 4 * E;
    if (d % 4 != 0) {
        corral_error_set(err, "%s: a head of %zu values does not split into four rotary sections",
                         path, d);
        return false;
    }
    if (!mm->ollama_names) {
        /* llama.cpp's tower takes GELU only with clip.use_gelu (else its quick GELU), and
         * merges 2 x 2 whatever the file says elsewhere; neither other case is a real file */
        bool gelu = false;
        uint32_t merge = 2;
        if (!gguf_get_bool_opt(mm->file, "clip.use_gelu", &gelu, err) ||
            !gguf_get_u32_opt(mm->file, "clip.vision.spatial_merge_size", &merge, err))
            return false;
        if (!gelu || merge != 2) {
            corral_error_set(err, "%s: a qwen3vl_merger tower needs clip.use_gelu (its GELU MLP) "
                             "and a spatial merge of 2 (has %s, %u)", path,
                             gelu ? "GELU" : "quick GELU", merge);
            return false;
        }
    }
    hp->n_wa_pattern = 0; /* every layer attends to the whole image */
    if (!mm->post_ln.data || !mm->patch_b.data) {
        corral_error_set(err, "%s: missing tensor '%s'", path,
                         mm->post_ln.data ? "v.patch_embd.bias" : "v.post_ln.weight");
        return false;
    }
    const gguf_tensor *pos = mmproj_find_tensor(mm, "v.position_embd.weight");
    const gguf_tensor *out = mmproj_find_tensor(mm, "mm.2.weight");
    int64_t side = pos ? (int64_t)sqrt((double)pos->ne[1]) : 0;
    if (!pos || pos->ne[1] < 1 || side > MAX_POS_SIDE || side * side != pos->ne[1]) {
        corral_error_set(err, "%s: tensor 'v.position_embd.weight' must be a square table of "
                         "rows (at most %d per side)", path, MAX_POS_SIDE);
        return false;
    }
    if (!out || out->ne[1] < 1 || out->ne[1] > (1 << 20)) {
        corral_error_set(err, "%s: missing or malformed tensor 'mm.2.weight'", path);
        return false;
    }
    size_t T = (size_t)out->ne[1];
    if (!mmproj_bind_matrix(mm, &mm->pos_embd, "v.position_embd.weight", E,
                            (size_t)(side * side), true, err) ||
        !mmproj_bind_matrix(mm, &mm->mm0, "mm.0.weight", M, M, true, err) ||
        !mmproj_bind_vector(mm, &mm->mm0_b, "mm.0.bias", M, false, err) ||
        !mmproj_bind_matrix(mm, &mm->mm2, "mm.2.weight", M, T, true, err) ||
        !mmproj_bind_vector(mm, &mm->mm2_b, "mm.2.bias", T, false, err) ||
        !bind_deepstack(mm, T, err) || !patch_kernels_as_reference(mm, err))
        return false;
    hp->n_embd_text = (uint32_t)(T * (1 + (size_t)mm->n_deepstack));
    return true;
}

/*
 * The position table (side x side rows of E, row y * side + x) resized to a grid of pw x ph
 * patches, for the patches listed in at: ggml's bilinear upscale with corners aligned,
 * x_src = x / ((pw - 1) / (side - 1)), its neighbours clamped to the table; added to rows.
 * A grid the table's own size takes the rows as they are.
 */
static void add_positions(const corral_mmproj *mm, const float *table, size_t side, size_t pw,
                          size_t ph, const uint32_t *at, size_t n, float *rows)
{
    size_t E = mm->hp.n_embd;
    bool same = pw == side && ph == side;
    float sx = pw > 1 && side > 1 ? (float)(pw - 1) / (float)(side - 1) : (float)pw / (float)side;
    float sy = ph > 1 && side > 1 ? (float)(ph - 1) / (float)(side - 1) : (float)ph / (float)side;
    for (size_t t = 0; t < n; t++) {
        size_t py = at[2 * t], px = at[2 * t + 1];
        float *x = rows + t * E;
        if (same) {
            const float *p = table + (py * side + px) * E;
            for (size_t i = 0; i < E; i++)
                x[i] += p[i];
            continue;
        }
        float fy = (float)py / sy, fx = (float)px / sx;
        int64_t y0 = (int64_t)floorf(fy), x0 = (int64_t)floorf(fx);
        int64_t last = (int64_t)side - 1;
        int64_t y1 = y0 + 1 > last ? last : y0 + 1, x1 = x0 + 1 > last ? last : x0 + 1;
        y0 = y0 < 0 ? 0 : y0 > last ? last : y0;
        x0 = x0 < 0 ? 0 : x0 > last ? last : x0;
        y1 = y1 < 0 ? 0 : y1;
        x1 = x1 < 0 ? 0 : x1;
        float dy = fminf(fmaxf(fy - (float)y0, 0.0f), 1.0f);
        float dx = fminf(fmaxf(fx - (float)x0, 0.0f), 1.0f);
        const float *a = table + ((size_t)y0 * side + (size_t)x0) * E;
        const float *b = table + ((size_t)y0 * side + (size_t)x1) * E;
        const float *c = table + ((size_t)y1 * side + (size_t)x0) * E;
        const float *e = table + ((size_t)y1 * side + (size_t)x1) * E;
        for (size_t i = 0; i < E; i++)
            x[i] += a[i] * (1 - dx) * (1 - dy) + b[i] * dx * (1 - dy) + c[i] * (1 - dx) * dy +
                    e[i] * dx * dy;
    }
}

/* norm -> (w0, b0) -> GELU -> (w1, b1) over n merged rows of 4E in x, into out (n rows of
 * w1's outputs, stride out_stride); norm: a LayerNorm over the merged row, or none. */
static void merge_mlp(vision_run *run, const weight *norm, const weight *norm_b,
                      const weight *w0, const weight *b0, const weight *w1, const weight *b1,
                      const float *x, size_t n, float *out, size_t out_stride, float *tmp)
{
    const corral_mmproj *mm = run->mm;
    size_t M = 4 * (size_t)mm->hp.n_embd, T = w1->n_out;
    const float *in = x;
    if (norm) {
        for (size_t t = 0; t < n; t++)
            vision_layernorm_row(x + t * M, norm->data, norm_b->data, M, mm->hp.eps,
                                 run->xn + t * M);
        in = run->xn;
    }
    vision_matmul(run->pool, w0, b0, in, n, run->q, run->act);
    block_gelu(run->q, n * M);
    vision_matmul(run->pool, w1, b1, run->q, n, tmp, run->act);
    for (size_t t = 0; t < n; t++)
        memcpy(out + t * out_stride, tmp + t * T, T * sizeof *tmp);
}

static bool qwen3vl_encode(const corral_mmproj *mm, threadpool *pool,
                           const corral_cancel *cancel, const float *pixels, uint32_t nx,
                           uint32_t ny, corral_image_embd *out, corral_error *err)
{
    const vision_hparams *hp = &mm->hp;
    size_t p = hp->patch_size, align = 2 * p;
    if (nx % align != 0 || ny % align != 0) {
        corral_error_set(err, "qwen3vl encodes images whose sides are multiples of %zu, not %u x %u",
                         align, nx, ny);
        return false;
    }
    size_t mx = nx / align, my = ny / align, n_merged = mx * my, n = 4 * n_merged;
    size_t E = hp->n_embd, d = E / hp->n_head, M = 4 * E, T = mm->mm2.n_out;
    size_t W = hp->n_embd_text, side = (size_t)sqrt((double)mm->pos_embd.n_out);
    uint32_t *at = malloc(2 * n * sizeof *at);
    float *cs = malloc(n * d * sizeof *cs), *table = malloc(side * side * E * sizeof *table);
    float *tmp = malloc(n_merged * T * sizeof *tmp);
    float *half = mm->patch_pixels_half ? malloc((size_t)nx * ny * 3 * sizeof *half) : NULL;
    out->data = malloc(n_merged * W * sizeof *out->data);
    vision_run run;
    bool ok = at && cs && table && tmp && out->data && (half || !mm->patch_pixels_half);
    if (!ok)
        corral_error_set(err, "out of memory");
    /* the merger's and the deepstack products take rows of 4E, a quarter as many as the
     * tower's rows (vision_run_init sizes act per patch) */
    size_t extra = 0;
    const weight *wide[] = {&mm->mm0, &mm->mm2};
    for (size_t i = 0; i < 2; i++) {
        size_t b = (quant_act_row_bytes(wide[i]->type, M) + 3) / 4;
        extra = b > extra ? b : extra;
    }
    for (uint32_t k = 0; k < mm->n_deepstack; k++) {
        const weight *w[] = {&mm->deepstack[k].fc1, &mm->deepstack[k].fc2};
        for (size_t i = 0; i < 2; i++) {
            size_t b = (quant_act_row_bytes(w[i]->type, M) + 3) / 4;
            extra = b > extra ? b : extra;
        }
    }
    ok = ok && vision_run_init(&run, mm, pool, cancel, n, extra, err);
    if (!ok) {
        free(at);
        free(cs);
        free(table);
        free(tmp);
        free(half);
        return false;
    }
    size_t t = 0;
    for (size_t Y = 0; Y < my; Y++)
        for (size_t X = 0; X < mx; X++)
            for (size_t j = 0; j < 4; j++, t++) {
                at[2 * t] = (uint32_t)(2 * Y + j / 2);
                at[2 * t + 1] = (uint32_t)(2 * X + j % 2);
            }
    for (size_t r = 0; r < side * side; r++)
        mm->pos_embd.ops->dequantize((const uint8_t *)mm->pos_embd.data + r * mm->pos_embd.row_bytes,
                                     table + r * E, E);
    vision_patch_angles(at, n, d, cs);
    run.rope_cs = cs;
    if (mm->patch_pixels_half) /* as the reference's patches are laid out */
        for (size_t i = 0; i < (size_t)nx * ny * 3; i++)
            half[i] = quant_f16_to_f32(quant_f32_to_f16(pixels[i]));
    if (mm->patch_pixels_half && mm->patch_embd.n_in % 8 == 0) {
        /* both temporal kernels, then the bias: the reference's (conv0 + conv1) + bias */
        vision_patch_embed_half(&run, half, nx, at, mm->patch_embd.data, mm->patch_embd_1.data,
                                mm->patch_b.data);
    } else {
        /* a BF16 kernel (its products are F32's), or inputs not in 8s, which llamafile's
         * kernel leaves to ggml's vector dot: the tower's own F32 products */
        vision_patch_embed(&run, mm->patch_pixels_half ? half : pixels, nx, at);
    }
    add_positions(mm, table, side, nx / p, ny / p, at, n, run.x);
    /* the blocks in runs up to each deepstack layer, whose states its merger takes */
    for (uint32_t il = 0, k = 0; ok && il < hp->n_layer;) {
        uint32_t end = k < mm->n_deepstack ? mm->deepstack[k].layer + 1 : hp->n_layer;
        ok = vision_run_blocks(&run, il, end - il, err);
        if (ok && k < mm->n_deepstack) {
            const vision_deepstack *ds = &mm->deepstack[k++];
            merge_mlp(&run, &ds->norm, &ds->norm_b, &ds->fc1, &ds->fc1_b, &ds->fc2, &ds->fc2_b,
                      run.x, n_merged, out->data + k * T, W, tmp);
        }
        il = end;
    }
    if (!ok) {
        vision_run_free(&run);
        free(at);
        free(cs);
        free(table);
        free(tmp);
        free(half);
        return false;
    }
    vision_norm_rows(mm, &mm->post_ln, &mm->post_ln_b, run.x, run.x, n);
    merge_mlp(&run, NULL, NULL, &mm->mm0, &mm->mm0_b, &mm->mm2, &mm->mm2_b, run.x, n_merged,
              out->data, W, tmp);
    vision_run_free(&run);
    free(at);
    free(cs);
    free(table);
    free(tmp);
    free(half);
    out->n_tokens = n_merged;
    out->nx = (uint32_t)mx;
    out->ny = (uint32_t)my;
    out->n_embd = (uint32_t)W;
    return true;
}

const projector_kind projector_qwen3vl = {
    .name = "qwen3vl_merger",
    .image_begin = "<|vision_start|>",
    .image_end = "<|vision_end|>",
    .resize = CORRAL_IMAGE_SMART,
    .norm = VISION_LAYER_NORM,
    .ffn = VISION_FFN_GELU,
    .bind = qwen3vl_bind,
    .encode = qwen3vl_encode,
    .gpu_rows = vision_gpu_rows_of_pixels,
};

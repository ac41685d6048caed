/*
 * The "mlp" projector: LLaVA 1.5 and 1.6 (and LLaVA-Next relatives such as granite-vision)
 * over a CLIP tower. Each image_size square of the preprocessed image goes through the tower
 * on its own: its patches, then a class embedding, with learned position embeddings; a
 * pre-norm; LayerNorm blocks with a quick-GELU (or GELU) MLP, run only up to the layer whose
 * states the projector takes; then mm.0, GELU and mm.2 per patch.
 *
 * llama.cpp, which made the files and which ollama runs them with, appends the class
 * embedding after the patches (position n_patches, not 0) and then takes the rows 1 to
 * n_patches as the image's tokens: the first patch is dropped and the class token kept
 * last. The results would differ from the model's training, but they are what users of these
 * files get, so the encoder does the same.
 *
 * LLaVA 1.6's slices need no special tokens: the overview's tokens, then every slice's in row
 * order, one run with no separators (llama.cpp leaves image_newline unused).
 */
#include <stdlib.h>
#include <string.h>

#include "blocks.h"
#include "mmproj.h"
#include "tensor_type.h"
#include "util/checked.h"

/* Feature layers a file may name, well above the four of granite-vision. */
#define MAX_FEATURE_LAYERS (sizeof((corral_mmproj *)0)->feature_layers / sizeof(uint32_t))

static bool read_feature_layers(corral_mmproj *mm, corral_error *err)
{
    const char *path = gguf_path(mm->file);
    uint32_t n_layer = mm->hp.n_layer;
    const gguf_kv *kv;
    if (!gguf_get_array_opt(mm->file, "clip.vision.feature_layer", GGUF_TYPE_COUNT, &kv, err))
        return false;
    mm->n_feature_layers = 0;
    /* without the key: the states before the last block (llama.cpp's default for llava) */
    mm->n_run_layers = n_layer - 1;
    if (!kv)
        return true;
    if (!gguf_type_is_integer(kv->elem_type) || kv->n > 64) {
        corral_error_set(err, "%s: clip.vision.feature_layer must be up to 64 integers", path);
        return false;
    }
    /* a set: each layer once, ascending, as llama.cpp stacks them */
    for (uint64_t i = 0; i < kv->n; i++) {
        int64_t v = gguf_kv_i64(kv, i);
        if (v < 0 || v > (int64_t)n_layer) {
            corral_error_set(err, "%s: clip.vision.feature_layer %lld is not within 0..%u", path,
                             (long long)v, n_layer);
            return false;
        }
        uint32_t layer = (uint32_t)v, at = 0;
        while (at < mm->n_feature_layers && mm->feature_layers[at] < layer)
            at++;
        if (at < mm->n_feature_layers && mm->feature_layers[at] == layer)
            continue;
        if (mm->n_feature_layers == MAX_FEATURE_LAYERS) {
            corral_error_set(err, "%s: clip.vision.feature_layer names more than %zu layers",
                             path, (size_t)MAX_FEATURE_LAYERS);
            return false;
        }
        memmove(mm->feature_layers + at + 1, mm->feature_layers + at,
                (mm->n_feature_layers - at) * sizeof *mm->feature_layers);
        mm->feature_layers[at] = layer;
        mm->n_feature_layers++;
    }
    if (mm->n_feature_layers)
        mm->n_run_layers = mm->feature_layers[mm->n_feature_layers - 1];
    return true;
}

/* clip.vision.image_grid_pinpoints: width, height pairs, each a whole number of squares. */
static bool read_pinpoints(corral_mmproj *mm, size_t n_patches, corral_error *err)
{
    const char *path = gguf_path(mm->file);
    uint32_t S = mm->hp.image_size;
    const gguf_kv *kv;
    if (!gguf_get_array_opt(mm->file, "clip.vision.image_grid_pinpoints", GGUF_TYPE_COUNT, &kv,
                            err))
        return false;
    mm->n_pinpoints = 0;
    mm->max_squares = 1;
    if (!kv)
        return true;
    if (!gguf_type_is_integer(kv->elem_type) || kv->n % 2 != 0 ||
        kv->n > 2 * (uint64_t)CORRAL_IMAGE_MAX_PINPOINTS) {
        corral_error_set(err, "%s: clip.vision.image_grid_pinpoints must be up to %d pairs of "
                         "integers", path, CORRAL_IMAGE_MAX_PINPOINTS);
        return false;
    }
    for (uint64_t i = 0; i < kv->n; i += 2) {
        int64_t w = gguf_kv_i64(kv, i), h = gguf_kv_i64(kv, i + 1);
        /* every slice a full square: the tower takes nothing else */
        if (w < S || h < S || w % S != 0 || h % S != 0 || w > 64 * (int64_t)S ||
            h > 64 * (int64_t)S) {
            corral_error_set(err, "%s: image grid pinpoint %lld x %lld is not a grid of "
                             "%u-pixel squares", path, (long long)w, (long long)h, S);
            return false;
        }
        uint64_t squares = 1 + (uint64_t)(w / S) * (uint64_t)(h / S);
        if (squares * n_patches > MMPROJ_MAX_PATCHES) {
            corral_error_set(err, "%s: image grid pinpoint %lld x %lld makes more than %u patches",
                             path, (long long)w, (long long)h, (unsigned)MMPROJ_MAX_PATCHES);
            return false;
        }
        mm->pinpoints[mm->n_pinpoints][0] = (uint32_t)w;
        mm->pinpoints[mm->n_pinpoints][1] = (uint32_t)h;
        mm->n_pinpoints++;
        if (squares > mm->max_squares)
            mm->max_squares = (uint32_t)squares;
    }
    return true;
}

static bool llava_bind(corral_mmproj *mm, corral_error *err)
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
    bool use_gelu = false, use_silu = false;
    if (!gguf_get_bool_opt(mm->file, "clip.use_gelu", &use_gelu, err) ||
        !gguf_get_bool_opt(mm->file, "clip.use_silu", &use_silu, err))
        return false;
    if (use_silu) {
        corral_error_set(err, "%s: a llava tower with a SiLU MLP is not supported", path);
        return false;
    }
    hp->ffn = use_gelu ? VISION_FFN_GELU : VISION_FFN_GELU_QUICK;
    if (mmproj_find_tensor(mm, "mm.3.weight")) {
        corral_error_set(err, "%s: the normalised llava projector (mm.3, Yi-VL's) is not "
                         "supported", path);
        return false;
    }
    if (n > MMPROJ_MAX_PATCHES) {
        corral_error_set(err, "%s: %zu patches per image, more than %u", path, n,
                         (unsigned)MMPROJ_MAX_PATCHES);
        return false;
    }
    if (!read_feature_layers(mm, err) || !read_pinpoints(mm, n, err))
        return false;
    if (!mmproj_bind_vector(mm, &mm->class_embd, "v.class_embd", E, false, err) ||
        !mmproj_bind_vector(mm, &mm->pre_ln, "v.pre_ln.weight", E, false, err) ||
        !mmproj_bind_vector(mm, &mm->pre_ln_b, "v.pre_ln.bias", E, false, err))
        return false;
    size_t n_pos = n + (mm->class_embd.data ? 1 : 0);
    if (!mmproj_bind_matrix(mm, &mm->pos_embd, "v.position_embd.weight", E, n_pos, true, err))
        return false;
    size_t stacked = E * (mm->n_feature_layers ? mm->n_feature_layers : 1);
    const gguf_tensor *t0 = mmproj_find_tensor(mm, "mm.0.weight");
    if (!t0 || t0->ne[1] < 1 || t0->ne[1] > (1 << 20)) {
        corral_error_set(err, "%s: missing or malformed tensor 'mm.0.weight'", path);
        return false;
    }
    size_t H = (size_t)t0->ne[1];
    if (!mmproj_bind_matrix(mm, &mm->mm0, "mm.0.weight", stacked, H, true, err) ||
        !mmproj_bind_vector(mm, &mm->mm0_b, "mm.0.bias", H, true, err))
        return false;
    size_t T = H;
    const gguf_tensor *t2 = mmproj_find_tensor(mm, "mm.2.weight");
    if (t2) {
        if (t2->ne[1] < 1 || t2->ne[1] > (1 << 20)) {
            corral_error_set(err, "%s: malformed tensor 'mm.2.weight'", path);
            return false;
        }
        T = (size_t)t2->ne[1];
        if (!mmproj_bind_matrix(mm, &mm->mm2, "mm.2.weight", H, T, true, err) ||
            !mmproj_bind_vector(mm, &mm->mm2_b, "mm.2.bias", T, true, err))
            return false;
    }
    hp->n_embd_text = (uint32_t)T;
    return true;
}

/* One square (S x S pixels, rows of stride S) through the tower and the MLP into out's
 * n_patches rows. states: n_patches rows of the stacked width; hidden: of mm.0's. False with
 * the reason when the GPU fails. */
static bool encode_square(vision_run *run, const float *pixels, const uint32_t *at,
                          float *states, float *hidden, float *out, corral_error *err)
{
    const corral_mmproj *mm = run->mm;
    const vision_hparams *hp = &mm->hp;
    size_t E = hp->n_embd, side = hp->image_size / hp->patch_size, n = side * side;
    size_t n_pos = run->n_patches, first = n_pos - n; /* the token rows: 1..n with a class */
    size_t K = mm->n_feature_layers, width = E * (K ? K : 1);

    /* the patches alone through the convolution, then the class row after them */
    run->n_patches = n;
    vision_patch_embed(run, pixels, hp->image_size, at);
    run->n_patches = n_pos;
    if (mm->class_embd.data)
        memcpy(run->x + n * E, mm->class_embd.data, E * sizeof(float));
    for (size_t t = 0; t < n_pos; t++) {
        mm->pos_embd.ops->dequantize(
            (const uint8_t *)mm->pos_embd.data + t * mm->pos_embd.row_bytes, run->xn, E);
        for (size_t e = 0; e < E; e++)
            run->x[t * E + e] += run->xn[e];
    }
    if (mm->pre_ln.data)
        vision_norm_rows(mm, &mm->pre_ln, &mm->pre_ln_b, run->x, run->x, n_pos);

    /* the blocks in runs from one feature layer's states to the next's */
    size_t slot = 0;
    for (uint32_t il = 0;;) {
        if (il == mm->n_run_layers && mm->post_ln.data)
            vision_norm_rows(mm, &mm->post_ln, &mm->post_ln_b, run->x, run->x, n_pos);
        if (slot < K && mm->feature_layers[slot] == il) {
            for (size_t t = 0; t < n; t++)
                memcpy(states + t * width + slot * E, run->x + (first + t) * E,
                       E * sizeof(float));
            slot++;
        }
        if (il == mm->n_run_layers)
            break;
        uint32_t end = slot < K ? mm->feature_layers[slot] : mm->n_run_layers;
        if (!vision_run_blocks(run, il, end - il, err))
            return false;
        il = end;
    }
    const float *in = K ? states : run->x + first * E;
    vision_matmul(run->pool, &mm->mm0, &mm->mm0_b, in, n, hidden, run->act);
    block_gelu(hidden, n * mm->mm0.n_out);
    if (mm->mm2.data)
        vision_matmul(run->pool, &mm->mm2, &mm->mm2_b, hidden, n, out, run->act);
    else
        memcpy(out, hidden, n * mm->mm0.n_out * sizeof(float));
    return true;
}

static bool llava_encode(const corral_mmproj *mm, threadpool *pool,
                         const corral_cancel *cancel, const float *pixels, uint32_t nx,
                         uint32_t ny, corral_image_embd *out, corral_error *err)
{
    const vision_hparams *hp = &mm->hp;
    uint32_t S = hp->image_size;
    if (nx != S || ny % S != 0 || ny / S > mm->max_squares) {
        corral_error_set(err, "llava encodes a column of up to %u squares of %u x %u pixels, "
                         "not %u x %u", mm->max_squares, S, S, nx, ny);
        return false;
    }
    size_t squares = ny / S, side = S / hp->patch_size, n = side * side, E = hp->n_embd;
    size_t T = hp->n_embd_text, H = mm->mm0.n_out;
    size_t n_pos = n + (mm->class_embd.data ? 1 : 0);
    size_t width = E * (mm->n_feature_layers ? mm->n_feature_layers : 1);
    size_t act = quant_act_row_bytes(mm->mm0.type, width);
    if (mm->mm2.data && quant_act_row_bytes(mm->mm2.type, H) > act)
        act = quant_act_row_bytes(mm->mm2.type, H);
    size_t total, bytes;
    if (!checked_mul_size(squares * n, T, &total) ||
        !checked_mul_size(total, sizeof(float), &bytes)) {
        corral_error_set(err, "image of %u x %u pixels: too many embeddings", nx, ny);
        return false;
    }
    /* states: the feature layers side by side, when the file names them */
    uint32_t *at = malloc(2 * n * sizeof *at);
    float *states = mm->n_feature_layers ? malloc(n * width * sizeof *states) : NULL;
    float *hidden = malloc(n * H * sizeof *hidden);
    out->data = malloc(bytes);
    vision_run run;
    bool allocated = at && (states || !mm->n_feature_layers) && hidden && out->data;
    if (!allocated || !vision_run_init(&run, mm, pool, cancel, n_pos, act, err)) {
        if (!allocated)
            corral_error_set(err, "out of memory");
        free(at);
        free(states);
        free(hidden);
        return false;
    }
    for (size_t t = 0; t < n; t++) {
        at[2 * t] = (uint32_t)(t / side);
        at[2 * t + 1] = (uint32_t)(t % side);
    }
    bool ok = true;
    for (size_t q = 0; ok && q < squares; q++)
        ok = encode_square(&run, pixels + q * (size_t)S * S * 3, at, states, hidden,
                           out->data + q * n * T, err);
    vision_run_free(&run);
    free(at);
    free(states);
    free(hidden);
    out->n_tokens = squares * n;
    out->nx = (uint32_t)out->n_tokens;
    out->ny = 1;
    out->n_embd = (uint32_t)T;
    return ok;
}

/* A square's patches and the class row. */
static size_t llava_gpu_rows(const corral_mmproj *mm)
{
    size_t side = mm->hp.image_size / mm->hp.patch_size;
    return side * side + (mm->class_embd.data ? 1 : 0);
}

const projector_kind projector_llava = {
    .name = "mlp",
    .image_begin = "",
    .image_end = "",
    .resize = CORRAL_IMAGE_LETTERBOX,
    .norm = VISION_LAYER_NORM,
    .ffn = VISION_FFN_GELU_QUICK,
    .bind = llava_bind,
    .encode = llava_encode,
    .gpu_rows = llava_gpu_rows,
};

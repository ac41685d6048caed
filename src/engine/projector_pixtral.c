/*
 * The pixtral projector (Pixtral, and Mistral Small 3.1 / 3.2's tower with its patch merger)
 * as llama.cpp lays it out: patches in row order without a position embedding, an RMS norm
 * before the blocks (v.pre_ln), RMSNorm blocks with a SiLU-gated MLP and 2-D rotary
 * positions: a head's first half turns with the patch row, its second half with the
 * column at frequencies shifted by one step (theta^(-2/d)), both in adjacent pairs, because
 * the converter permuted the queries and keys for ggml's plain rotation; theta is fixed at
 * 10000. Then, where the file has a merger, an RMS norm (mm.input_norm) and each n_merge x
 * n_merge square of patches side by side, channel by channel (an im2col), through
 * mm.patch_merger; then mm.1, GELU, mm.2. The text model sees the merged rows with the
 * [IMG_BREAK] embedding the file carries (v.token_embd.img_break) after every row but the
 * last: those rows belong to the image's embeddings, not to the prompt's text.
 *
 * ollama's single files (mmproj_ollama.c) hold the same tower with Hugging Face's Q and K
 * (rotated in halves, not pairs), no [IMG_BREAK] vector (its engine places the token: the
 * text's embedding row here), an F32 convolution, and whole patches rather than whole merge
 * squares: the merger drops a last odd row or column of patches, as its unfold does.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "blocks.h"
#include "mmproj.h"
#include "quant_half.h"
#include "tensor_type.h"
#include "util/checked.h"

/* A merge square's side: 2 in every released model; far above it makes no sense (ollama's
 * files: the same bound in mmproj_ollama.c). */
enum { MAX_MERGE = 8, MAX_PROJ_WIDTH = 1 << 20 };

/* The out width of a matrix tensor the kind sizes itself by, or 0 when missing or absurd. */
static size_t out_width(const corral_mmproj *mm, const char *name)
{
    const gguf_tensor *t = mmproj_find_tensor(mm, name);
    return t && t->ne[1] >= 1 && t->ne[1] <= MAX_PROJ_WIDTH ? (size_t)t->ne[1] : 0;
}

/*
 * llama.cpp's patch convolution (since it left the copy ollama vendors) unfolds the pixels
 * into F16 for an F32 kernel, so that its product runs on pixels and kernel both rounded to
 * F16. Products of halves are exact in F32, so the F32 product of the rounded values in
 * ggml's order is that product at every CPU level: the kernel's rounded copy here, the
 * pixels' rounding and the order in the encoder (vision_run.patch_f16). A kernel stored in
 * F16 already takes the usual F16 product.
 */
static bool round_patch_kernel(corral_mmproj *mm, corral_error *err)
{
    weight *w = &mm->patch_embd;
    if (w->type != TENSOR_TYPE_F32)
        return true;
    size_t count = w->n_in * w->n_out;
    const float *src = w->data;
    if (!(mm->patch_embd_rounded = malloc(count * sizeof *mm->patch_embd_rounded))) {
        corral_error_set(err, "out of memory");
        return false;
    }
    for (size_t i = 0; i < count; i++)
        mm->patch_embd_rounded[i] = quant_f16_to_f32(quant_f32_to_f16(src[i]));
    w->data = mm->patch_embd_rounded;
    w->model_owned = true;
    return true;
}

/*
 * ollama's files carry no [IMG_BREAK] vector: its engine puts the token itself between the
 * rows, so the vector is the text model's embedding row of "[IMG_BREAK]", read from the same
 * file (any type the engine dequantizes).
 */
static bool img_break_from_vocab(corral_mmproj *mm, size_t T, corral_error *err)
{
    const char *path = gguf_path(mm->file);
    const gguf_kv *tokens;
    if (!gguf_get_array(mm->file, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &tokens, err))
        return false;
    static const char name[] = "[IMG_BREAK]";
    uint64_t id = tokens->n;
    for (uint64_t i = 0; i < tokens->n && id == tokens->n; i++) {
        gguf_str t = gguf_kv_str(tokens, i);
        if (t.size == sizeof name - 1 && memcmp(t.data, name, t.size) == 0)
            id = i;
    }
    const gguf_tensor *embd = gguf_find_tensor(mm->file, "token_embd.weight");
    const quant_ops *ops = embd ? quant_ops_active(embd->type) : NULL;
    if (id == tokens->n || !embd || !ops || !ops->dequantize || embd->ne[0] != (int64_t)T ||
        embd->ne[1] != (int64_t)tokens->n || embd->ne[2] != 1 || embd->ne[3] != 1) {
        corral_error_set(err, "%s: no %s token with a token_embd.weight row of %zu values to put "
                         "between an image's rows", path, name, T);
        return false;
    }
    if (!(mm->img_break_owned = malloc(T * sizeof *mm->img_break_owned))) {
        corral_error_set(err, "out of memory");
        return false;
    }
    size_t row_bytes = embd->size_bytes / tokens->n;
    ops->dequantize((const uint8_t *)embd->data + id * row_bytes, mm->img_break_owned, T);
    mm->img_break = (weight){.data = mm->img_break_owned, .type = TENSOR_TYPE_F32, .n_in = T,
                             .n_out = 1, .row_bytes = T * sizeof(float)};
    return true;
}

static bool pixtral_bind(corral_mmproj *mm, corral_error *err)
{
    vision_hparams *hp = &mm->hp;
    const char *path = gguf_path(mm->file);
    size_t E = hp->n_embd, d = E / hp->n_head;
    /* ollama's engine always gates with SiLU; llama.cpp's file says which */
    bool silu = mm->ollama_names;
    if (!gguf_get_bool_opt(mm->file, "clip.use_silu", &silu, err))
        return false;
    if (!silu) {
        corral_error_set(err, "%s: pixtral towers with a GELU MLP are not supported (clip.use_silu "
                         "is not set)", path);
        return false;
    }
    if (d % 4 != 0) {
        corral_error_set(err, "%s: a head of %zu values does not split into two rotary halves of "
                         "pairs", path, d);
        return false;
    }
    /* the original Pixtral merges nothing; Mistral Small 3.x names its square (ollama's
     * files: mmproj_ollama.c read it) */
    if (!mm->ollama_names) {
        hp->n_merge = 1;
        if (!gguf_get_u32_opt(mm->file, "clip.vision.spatial_merge_size", &hp->n_merge, err))
            return false;
        if (hp->n_merge == 0 || hp->n_merge > MAX_MERGE) {
            corral_error_set(err, "%s: clip.vision.spatial_merge_size is %u, expected 1 to %d",
                             path, hp->n_merge, MAX_MERGE);
            return false;
        }
    }
    size_t H = out_width(mm, "mm.1.weight"), T = out_width(mm, "mm.2.weight");
    if (!H || !T) {
        corral_error_set(err, "%s: missing or malformed tensor '%s'", path,
                         H ? "mm.2.weight" : "mm.1.weight");
        return false;
    }
    size_t k2 = (size_t)hp->n_merge * hp->n_merge;
    if (!mmproj_bind_vector(mm, &mm->pre_ln, "v.pre_ln.weight", E, false, err) ||
        !mmproj_bind_vector(mm, &mm->input_norm, "mm.input_norm.weight", E, false, err) ||
        !mmproj_bind_matrix(mm, &mm->patch_merger, "mm.patch_merger.weight", k2 * E, E, false,
                            err) ||
        !mmproj_bind_matrix(mm, &mm->mm1, "mm.1.weight", E, H, true, err) ||
        !mmproj_bind_vector(mm, &mm->mm1_b, "mm.1.bias", H, false, err) ||
        !mmproj_bind_matrix(mm, &mm->mm2, "mm.2.weight", H, T, true, err) ||
        !mmproj_bind_vector(mm, &mm->mm2_b, "mm.2.bias", T, false, err))
        return false;
    if (mm->ollama_names ? !img_break_from_vocab(mm, T, err)
                         : !mmproj_bind_vector(mm, &mm->img_break, "v.token_embd.img_break", T,
                                               true, err))
        return false;
    /* a merge without its merger (or the reverse) would count tokens one way and make them
     * another */
    if (!mm->patch_merger.data != !mm->input_norm.data ||
        !mm->patch_merger.data != (hp->n_merge == 1)) {
        corral_error_set(err, "%s: the patch merger needs mm.input_norm.weight, "
                         "mm.patch_merger.weight and a spatial merge size above 1, all three",
                         path);
        return false;
    }
    hp->n_embd_text = (uint32_t)T;
    /* ollama's engine convolves in F32 (the ggml it vendors) */
    return mm->ollama_names || round_patch_kernel(mm, err);
}

/* Per patch in row order, cos and sin of its d/2 pairs, as ggml's rotary cache makes them:
 * pairs [0, d/4) turn by row * s^i, pairs [d/4, d/2) by shift * (column * s^i), with
 * s = 10000^(-4/d) and shift = 10000^(-2/d), each s^i grown by repeated multiplication. */
static void patch_angles(size_t px, size_t py, size_t d, float *cs)
{
    size_t quarter = d / 4;
    float s = powf(10000.0f, -2.0f / (float)(d / 2));
    float shift[2] = {1.0f, powf(10000.0f, -2.0f / (float)d)};
    for (size_t t = 0; t < px * py; t++) {
        float *row = cs + t * d;
        float at[2] = {(float)(t / px), (float)(t % px)};
        for (size_t part = 0; part < 2; part++) {
            float theta = at[part];
            for (size_t i = 0; i < quarter; i++) {
                float angle = shift[part] * theta;
                row[2 * (part * quarter + i)] = cosf(angle);
                row[2 * (part * quarter + i) + 1] = sinf(angle);
                theta *= s;
            }
        }
    }
}

/* llama.cpp's sides are whole merge squares (its resize makes them so); ollama's whole
 * patches, its merger dropping a last odd row or column of them as its unfold does. */
size_t pixtral_tokens(const corral_mmproj *mm, uint32_t nx, uint32_t ny)
{
    size_t p = mm->hp.patch_size, k = mm->hp.n_merge, align = mm->ollama_names ? p : p * k;
    if (nx == 0 || ny == 0 || nx % align != 0 || ny % align != 0)
        return 0;
    size_t mx = nx / p / k, my = ny / p / k;
    return mx && my ? mx * my + my - 1 : 0;
}

/* The act room a product of w takes per row, in floats. */
static size_t act_floats(const weight *w)
{
    return w->data ? (quant_act_row_bytes(w->type, w->n_in) + 3) / 4 : 0;
}

static bool pixtral_encode(const corral_mmproj *mm, threadpool *pool,
                           const corral_cancel *cancel, const float *pixels, uint32_t nx,
                           uint32_t ny, corral_image_embd *out, corral_error *err)
{
    const vision_hparams *hp = &mm->hp;
    size_t k = hp->n_merge;
    if (!pixtral_tokens(mm, nx, ny)) {
        corral_error_set(err, "pixtral encodes images whose sides are multiples of %zu and at "
                         "least %zu, not %u x %u",
                         (size_t)hp->patch_size * (mm->ollama_names ? 1 : k),
                         (size_t)hp->patch_size * k, nx, ny);
        return false;
    }
    size_t px = nx / hp->patch_size, py = ny / hp->patch_size, n = px * py;
    size_t mx = px / k, my = py / k, n_merged = mx * my, n_tokens = n_merged + my - 1;
    size_t E = hp->n_embd, d = E / hp->n_head, H = mm->mm1.n_out, T = hp->n_embd_text;
    size_t widest = act_floats(&mm->patch_merger), more[] = {act_floats(&mm->mm1),
                                                             act_floats(&mm->mm2)};
    for (size_t i = 0; i < 2; i++)
        widest = more[i] > widest ? more[i] : widest;
    size_t cs_count, hidden_count, out_count;
    bool ok = checked_mul_size(n, d, &cs_count) && checked_mul_size(n_merged, H, &hidden_count) &&
              checked_mul_size(n_tokens, T, &out_count) &&
              cs_count <= SIZE_MAX / sizeof(float) && hidden_count <= SIZE_MAX / sizeof(float) &&
              out_count <= SIZE_MAX / sizeof(float);
    uint32_t *at = ok ? malloc(2 * n * sizeof *at) : NULL;
    float *cs = ok ? malloc(cs_count * sizeof *cs) : NULL;
    float *hidden = ok ? malloc(hidden_count * sizeof *hidden) : NULL;
    float *proj = ok ? malloc(n_merged * T * sizeof *proj) : NULL;
    out->data = ok ? malloc(out_count * sizeof *out->data) : NULL;
    vision_run run;
    ok = at && cs && hidden && proj && out->data;
    if (!ok)
        corral_error_set(err, "cannot allocate the projector's buffers for %zu patches", n);
    ok = ok && vision_run_init(&run, mm, pool, cancel, n, widest * sizeof(float), err);
    if (!ok) {
        free(at);
        free(cs);
        free(hidden);
        free(proj);
        return false;
    }
    for (size_t t = 0; t < n; t++) {
        at[2 * t] = (uint32_t)(t / px);
        at[2 * t + 1] = (uint32_t)(t % px);
    }
    patch_angles(px, py, d, cs);
    run.rope_cs = cs;
    /* llama.cpp's converter permuted Q and K into ggml's adjacent pairs; ollama's keeps
     * Hugging Face's halves */
    run.rope_adjacent = !mm->ollama_names;
    run.patch_f16 = mm->patch_embd_rounded != NULL;
    vision_patch_embed(&run, pixels, nx, at);
    if (mm->pre_ln.data)
        vision_norm_rows(mm, &mm->pre_ln, NULL, run.x, run.x, n);
    if (!vision_run_blocks(&run, 0, hp->n_layer, err)) {
        vision_run_free(&run);
        free(at);
        free(cs);
        free(hidden);
        free(proj);
        return false;
    }
    if (mm->post_ln.data)
        vision_norm_rows(mm, &mm->post_ln, &mm->post_ln_b, run.x, run.x, n);
    const float *states = run.x; /* n_merged rows of E for the MLP */
    if (mm->patch_merger.data) {
        vision_norm_rows(mm, &mm->input_norm, NULL, run.x, run.xn, n);
        /* a square's k x k patches per channel, rows before columns: k * k * E wide rows, one
         * per merged token in row order (run.q holds n x E floats, as many) */
        float *squares = run.q;
        for (size_t Y = 0; Y < my; Y++)
            for (size_t X = 0; X < mx; X++) {
                float *row = squares + (Y * mx + X) * k * k * E;
                for (size_t ky = 0; ky < k; ky++)
                    for (size_t kx = 0; kx < k; kx++) {
                        const float *patch = run.xn + ((Y * k + ky) * px + X * k + kx) * E;
                        for (size_t c = 0; c < E; c++)
                            row[c * k * k + ky * k + kx] = patch[c];
                    }
            }
        vision_matmul(pool, &mm->patch_merger, NULL, squares, n_merged, run.k, run.act);
        states = run.k;
    }
    vision_matmul(pool, &mm->mm1, &mm->mm1_b, states, n_merged, hidden, run.act);
    block_gelu(hidden, n_merged * H);
    vision_matmul(pool, &mm->mm2, &mm->mm2_b, hidden, n_merged, proj, run.act);
    float *o = out->data;
    for (size_t Y = 0; Y < my; Y++) {
        memcpy(o, proj + Y * mx * T, mx * T * sizeof *o);
        o += mx * T;
        if (Y + 1 < my) {
            memcpy(o, mm->img_break.data, T * sizeof *o);
            o += T;
        }
    }
    vision_run_free(&run);
    free(at);
    free(cs);
    free(hidden);
    free(proj);
    /* not a grid: the breaks sit between the rows, so a run of tokens */
    out->n_tokens = n_tokens;
    out->nx = (uint32_t)n_tokens;
    out->ny = 1;
    out->n_embd = (uint32_t)T;
    return true;
}

const projector_kind projector_pixtral = {
    .name = "pixtral",
    .image_begin = "",
    .image_end = "[IMG_END]",
    .resize = CORRAL_IMAGE_SMART,
    .norm = VISION_RMS_NORM,
    .ffn = VISION_FFN_SWIGLU,
    .bind = pixtral_bind,
    .encode = pixtral_encode,
    .gpu_rows = vision_gpu_rows_of_pixels,
};

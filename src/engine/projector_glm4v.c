/*
 * The glm4v projector over GLM-OCR's tower (llama.cpp's clip_graph_glm4v): patches taken in
 * 2 x 2 merge groups (each group's four patches consecutive, groups in row order) as Qwen's
 * are, the patch convolution of two temporal frames summed with its bias, an RMS norm of the
 * patches (v.norm_embd's weight and bias where the file has them; llama.cpp norms without
 * them), Qwen's 2-D rotary positions (a head's first quarter of pairs turns with the patch
 * row, the second with its column), RMSNorm blocks with a fused attn_qkv, per-head q/k RMS
 * norms and a gated MLP (SiLU with clip.use_silu, else quick GELU), a final RMS norm
 * (v.post_ln), and the merger: each group's four states through the 2 x 2 convolution
 * mm.patch_merger (a product over the group's channels and places), mm.model.fc, a
 * LayerNorm (mm.post_norm, epsilon 1e-5), erf GELU, then the gated MLP mm.gate/up/down with
 * the tower's activation. Both convolutions multiply halves as llama.cpp's do
 * (kernel_as_reference), so the embeddings are its own to the last bits of a sum's order.
 * GLM-4.1V's learned position table (v.position_embd, bicubically resized) is not supported:
 * such a file is refused by name.
 *
 * GLM-OCR's images are sized as Qwen's are (smart resize, 8 to 4096 merged tokens), and the
 * text model turns their tokens with M-RoPE (arch_glm4.c).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "blocks.h"
#include "mmproj.h"
#include "quant.h"
#include "vision_order.h"

#define GLM4V_MERGER_EPS 1e-5f

/*
 * llama.cpp's convolutions (ggml_conv_2d: the patch kernels and the merger's) lay their input
 * out in F16 unless the kernel is BF16 (then in F32), and multiply the kernel with it in that
 * type: an F32 kernel's products are F16's, both sides rounded to half. A product of two
 * halves is exact in F32, so a kernel becomes F32 rows of the values it multiplies (an F32
 * kernel's rounded to half, an F16's or BF16's exactly), in *owned; *half: whether its input
 * is rounded to half too. Other types are not convolved there, and are refused.
 */
static bool kernel_as_reference(const corral_mmproj *mm, const weight *w, const char *name,
                                float *owned, bool *half, corral_error *err)
{
    if (w->type != TENSOR_TYPE_F32 && w->type != TENSOR_TYPE_F16 &&
        w->type != TENSOR_TYPE_BF16) {
        corral_error_set(err, "%s: tensor '%s' must be an F32, F16 or BF16 kernel",
                         gguf_path(mm->file), name);
        return false;
    }
    for (size_t r = 0; r < w->n_out; r++)
        w->ops->dequantize((const uint8_t *)w->data + r * w->row_bytes, owned + r * w->n_in,
                           w->n_in);
    if (w->type == TENSOR_TYPE_F32)
        for (size_t i = 0; i < w->n_in * w->n_out; i++)
            owned[i] = quant_f16_to_f32(quant_f32_to_f16(owned[i]));
    *half = w->type != TENSOR_TYPE_BF16;
    return true;
}

/* w as an F32 matrix over rows (kernel_as_reference's) */
static void bind_rows(weight *w, const float *rows)
{
    w->data = rows;
    w->type = TENSOR_TYPE_F32;
    w->row_bytes = w->n_in * sizeof *rows;
    w->ops = quant_ops_active(TENSOR_TYPE_F32);
}

static bool kernels_as_reference(corral_mmproj *mm, corral_error *err)
{
    size_t n = mm->patch_embd.n_in * mm->patch_embd.n_out;
    size_t m = mm->patch_merger.n_in * mm->patch_merger.n_out;
    if (!(mm->patch_owned = malloc(2 * n * sizeof(float))) ||
        !(mm->merger_owned = malloc(m * sizeof(float)))) {
        corral_error_set(err, "out of memory");
        return false;
    }
    bool half1;
    if (!kernel_as_reference(mm, &mm->patch_embd, "v.patch_embd.weight", mm->patch_owned,
                             &mm->patch_pixels_half, err) ||
        !kernel_as_reference(mm, &mm->patch_embd_1, "v.patch_embd.weight.1",
                             mm->patch_owned + n, &half1, err) ||
        !kernel_as_reference(mm, &mm->patch_merger, "mm.patch_merger.weight", mm->merger_owned,
                             &mm->merger_half, err))
        return false;
    bind_rows(&mm->patch_embd, mm->patch_owned);
    bind_rows(&mm->patch_embd_1, mm->patch_owned + n);
    bind_rows(&mm->patch_merger, mm->merger_owned);
    return true;
}

static bool glm4v_bind(corral_mmproj *mm, corral_error *err)
{
    vision_hparams *hp = &mm->hp;
    const char *path = gguf_path(mm->file);
    size_t E = hp->n_embd, d = E / hp->n_head;
    if (d % 4 != 0) {
        corral_error_set(err, "%s: a head of %zu values does not split into four rotary sections",
                         path, d);
        return false;
    }
    if (!mm->patch_embd_1.data) {
        corral_error_set(err, "%s: missing tensor '%s'", path,
                         mm->ollama_names ? "v.patch_embd_1.weight" : "v.patch_embd.weight.1");
        return false;
    }
    if (!mm->patch_b.data) {
        corral_error_set(err, "%s: missing tensor 'v.patch_embd.bias'", path);
        return false;
    }
    if (mmproj_find_tensor(mm, "v.position_embd.weight")) {
        corral_error_set(err, "%s: a glm4v tower with a learned position table "
                         "(v.position_embd.weight, GLM-4.1V) is not supported", path);
        return false;
    }
    /* the activation: llama.cpp's clip.use_silu / use_gelu, quick GELU when neither */
    if (mm->ollama_names) {
        hp->ffn = VISION_FFN_SWIGLU; /* ollama's layer injects use_silu */
    } else {
        bool silu = false, gelu = false;
        if (!gguf_get_bool_opt(mm->file, "clip.use_silu", &silu, err) ||
            !gguf_get_bool_opt(mm->file, "clip.use_gelu", &gelu, err))
            return false;
        if (silu && gelu) {
            corral_error_set(err, "%s: both clip.use_silu and clip.use_gelu are set", path);
            return false;
        }
        if (gelu) {
            corral_error_set(err, "%s: a glm4v tower with clip.use_gelu (a GELU-gated MLP) is "
                             "not supported", path);
            return false;
        }
        hp->ffn = silu ? VISION_FFN_SWIGLU : VISION_FFN_GEGLU_QUICK;
        uint32_t merge = 2;
        if (!gguf_get_u32_opt(mm->file, "clip.vision.spatial_merge_size", &merge, err))
            return false;
        if (merge != 2) {
            corral_error_set(err, "%s: clip.vision.spatial_merge_size is %u; only 2 is supported",
                             path, merge);
            return false;
        }
    }
    hp->n_merge = 2;
    /* the merger's widths, from its tensors as llama.cpp takes them */
    const gguf_tensor *merger = mmproj_find_tensor(mm, "mm.patch_merger.weight");
    const gguf_tensor *fc = mmproj_find_tensor(mm, "mm.model.fc.weight");
    const gguf_tensor *gate = mmproj_find_tensor(mm, "mm.gate.weight");
    const gguf_tensor *down = mmproj_find_tensor(mm, "mm.down.weight");
    const char *missing = !merger ? "mm.patch_merger.weight"
                          : !fc   ? "mm.model.fc.weight"
                          : !gate ? "mm.gate.weight"
                          : !down ? "mm.down.weight"
                                  : NULL;
    if (missing) {
        corral_error_set(err, "%s: missing tensor '%s'", path, missing);
        return false;
    }
    int64_t limit = 1 << 20;
    if (merger->ne[3] < 1 || merger->ne[3] > limit || fc->ne[1] < 1 || fc->ne[1] > limit ||
        gate->ne[1] < 1 || gate->ne[1] > limit || down->ne[1] < 1 || down->ne[1] > limit) {
        corral_error_set(err, "%s: malformed glm4v merger tensors", path);
        return false;
    }
    size_t Tm = (size_t)merger->ne[3], Tf = (size_t)fc->ne[1], C = (size_t)gate->ne[1];
    size_t T = (size_t)down->ne[1];
    if (!mmproj_bind_conv(mm, &mm->patch_merger, "mm.patch_merger.weight", E, 4 * E, Tm, true,
                          err) ||
        !mmproj_bind_vector(mm, &mm->merger_b, "mm.patch_merger.bias", Tm, true, err) ||
        !mmproj_bind_matrix(mm, &mm->mm0, "mm.model.fc.weight", Tm, Tf, true, err) ||
        !mmproj_bind_vector(mm, &mm->merger_norm, "mm.post_norm.weight", Tf, true, err) ||
        !mmproj_bind_vector(mm, &mm->merger_norm_b, "mm.post_norm.bias", Tf, false, err) ||
        !mmproj_bind_matrix(mm, &mm->mm_gate, "mm.gate.weight", Tf, C, true, err) ||
        !mmproj_bind_vector(mm, &mm->mm_gate_b, "mm.gate.bias", C, false, err) ||
        !mmproj_bind_matrix(mm, &mm->mm1, "mm.up.weight", Tf, C, true, err) ||
        !mmproj_bind_vector(mm, &mm->mm1_b, "mm.up.bias", C, false, err) ||
        !mmproj_bind_matrix(mm, &mm->mm2, "mm.down.weight", C, T, true, err) ||
        !mmproj_bind_vector(mm, &mm->mm2_b, "mm.down.bias", T, false, err) ||
        !mmproj_bind_vector(mm, &mm->norm_embd, "v.norm_embd.weight", E, false, err) ||
        !mmproj_bind_vector(mm, &mm->norm_embd_b, "v.norm_embd.bias", E, false, err))
        return false;
    hp->n_embd_text = (uint32_t)T;
    return kernels_as_reference(mm, err);
}

/* The widest activation row of the merger's products, per patch (n / 4 rows of each; the
 * patch kernels' rows are vision_run_init's own). */
static size_t merger_act_per_patch(const corral_mmproj *mm)
{
    const weight *ws[] = {&mm->patch_merger, &mm->mm0, &mm->mm_gate, &mm->mm1, &mm->mm2};
    size_t most = 0;
    for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++) {
        size_t b = (quant_act_row_bytes(ws[i]->type, ws[i]->n_in) + 3) / 4;
        most = b > most ? b : most;
    }
    return most;
}

static void erf_gelu(float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] = 0.5f * x[i] * (1.0f + erff(x[i] * 0.70710678118654752440f));
}

static bool glm4v_encode(const corral_mmproj *mm, threadpool *pool,
                         const corral_cancel *cancel, const float *pixels, uint32_t nx,
                         uint32_t ny, corral_image_embd *out, corral_error *err)
{
    const vision_hparams *hp = &mm->hp;
    size_t align = 2 * (size_t)hp->patch_size;
    if (nx % align != 0 || ny % align != 0) {
        corral_error_set(err, "glm4v encodes images whose sides are multiples of %zu, not %u x %u",
                         align, nx, ny);
        return false;
    }
    size_t mx = nx / align, my = ny / align, n_merged = mx * my, n = 4 * n_merged;
    size_t E = hp->n_embd, d = E / hp->n_head, T = hp->n_embd_text;
    size_t Tm = mm->patch_merger.n_out, Tf = mm->mm0.n_out, C = mm->mm1.n_out;
    bool ok = true;
    uint32_t *at = malloc(2 * n * sizeof *at);
    float *cs = vision_alloc_rows(n, d, &ok);
    float *grouped = vision_alloc_rows(n_merged, 4 * E, &ok);
    float *merged = vision_alloc_rows(n_merged, Tm, &ok);
    float *fc = vision_alloc_rows(n_merged, Tf, &ok);
    float *gate = vision_alloc_rows(n_merged, C, &ok);
    float *up = vision_alloc_rows(n_merged, C, &ok);
    out->data = vision_alloc_rows(n_merged, T, &ok);
    float *half = mm->patch_pixels_half ? vision_alloc_rows((size_t)nx * ny, 3, &ok) : NULL;
    vision_run run;
    ok = ok && at;
    if (!ok)
        corral_error_set(err, "out of memory");
    bool have_run = ok && vision_run_init(&run, mm, pool, cancel, n, merger_act_per_patch(mm), err);
    ok = have_run;
    if (!ok)
        goto done;
    for (size_t Y = 0, t = 0; Y < my; Y++)
        for (size_t X = 0; X < mx; X++)
            for (size_t j = 0; j < 4; j++, t++) {
                at[2 * t] = (uint32_t)(2 * Y + j / 2);
                at[2 * t + 1] = (uint32_t)(2 * X + j % 2);
            }
    vision_patch_angles(at, n, d, cs);
    run.rope_cs = cs;
    if (half) /* as the reference's patches are laid out */
        for (size_t i = 0; i < (size_t)nx * ny * 3; i++)
            half[i] = quant_f16_to_f32(quant_f32_to_f16(pixels[i]));
    if (half && mm->patch_embd.n_in % 8 == 0) {
        /* both temporal kernels, then the bias: the reference's (conv0 + conv1) + bias */
        vision_patch_embed_half(&run, half, nx, at, mm->patch_embd.data, mm->patch_embd_1.data,
                                mm->patch_b.data);
    } else {
        /* a BF16 kernel (its products are F32's), or inputs not in 8s, which llamafile's
         * kernel leaves to ggml's vector dot: the tower's own F32 products */
        vision_patch_embed(&run, half ? half : pixels, nx, at);
    }
    /* the patches' RMS norm, weighted where the file says */
    const float *w = mm->norm_embd.data ? mm->norm_embd.data : run.ones;
    for (size_t t = 0; t < n; t++) {
        float *row = run.x + t * E;
        vision_rmsnorm_row(row, w, E, hp->eps, row);
        if (mm->norm_embd_b.data)
            for (size_t i = 0; i < E; i++)
                row[i] += ((const float *)mm->norm_embd_b.data)[i];
    }
    if (!(ok = vision_run_blocks(&run, 0, hp->n_layer, err)))
        goto done;
    if (mm->post_ln.data)
        vision_norm_rows(mm, &mm->post_ln, &mm->post_ln_b, run.x, run.x, n);
    /* the merger's convolution: a group's input ordered as its kernel, channel then place */
    for (size_t k = 0; k < n_merged; k++)
        for (size_t j = 0; j < 4; j++)
            for (size_t c = 0; c < E; c++)
                grouped[k * 4 * E + c * 4 + j] = run.x[(4 * k + j) * E + c];
    if (mm->merger_half)
        for (size_t i = 0; i < n_merged * 4 * E; i++)
            grouped[i] = quant_f16_to_f32(quant_f32_to_f16(grouped[i]));
    /* the products of halves are exact: summed in the tower's F32 order rather than
     * llamafile's 8 lanes (vision_patch_embed_half's scalar FMAs, slow at a merger's width),
     * the embeddings stay within 2.2e-6 of the reference's (test_vision_glm4v) */
    vision_matmul(pool, &mm->patch_merger, &mm->merger_b, grouped, n_merged, merged, run.act);
    vision_matmul(pool, &mm->mm0, NULL, merged, n_merged, fc, run.act); /* llama.cpp: no bias */
    for (size_t k = 0; k < n_merged; k++)
        vision_layernorm_row(fc + k * Tf, mm->merger_norm.data, mm->merger_norm_b.data, Tf,
                             GLM4V_MERGER_EPS, fc + k * Tf);
    erf_gelu(fc, n_merged * Tf);
    vision_matmul(pool, &mm->mm1, &mm->mm1_b, fc, n_merged, up, run.act);
    vision_matmul(pool, &mm->mm_gate, &mm->mm_gate_b, fc, n_merged, gate, run.act);
    if (hp->ffn == VISION_FFN_SWIGLU) {
        for (size_t k = 0; k < n_merged; k++)
            vision_swiglu_row(gate + k * C, up + k * C, C);
    } else {
        vision_gelu_quick(gate, n_merged * C);
        for (size_t i = 0; i < n_merged * C; i++)
            gate[i] *= up[i];
    }
    vision_matmul(pool, &mm->mm2, &mm->mm2_b, gate, n_merged, out->data, run.act);
    out->n_tokens = n_merged;
    out->nx = (uint32_t)mx;
    out->ny = (uint32_t)my;
    out->n_embd = (uint32_t)T;
done:
    if (have_run)
        vision_run_free(&run);
    free(at);
    free(cs);
    free(grouped);
    free(merged);
    free(fc);
    free(gate);
    free(up);
    free(half);
    return ok;
}

const projector_kind projector_glm4v = {
    .name = "glm4v",
    .image_begin = "<|begin_of_image|>",
    .image_end = "<|end_of_image|>",
    .resize = CORRAL_IMAGE_SMART,
    .norm = VISION_RMS_NORM,
    .ffn = VISION_FFN_SWIGLU,
    .bind = glm4v_bind,
    .encode = glm4v_encode,
    .gpu_rows = vision_gpu_rows_of_pixels,
};

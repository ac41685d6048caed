/*
 * The gemma4v projector (Gemma 4's vision tower, llama.cpp's mmproj "gemma4v" and ollama's
 * single file alike): an image of any size whose sides are multiples of n_merge patches, its
 * pixels mapped to [-1, 1]; patches without a bias plus two learned position rows (its column's
 * and its row's); RMS-norm blocks whose queries and keys are normed per head and turned by a
 * 2-D RoPE (base 100: the first half of a head by the column, the second by the row), whose
 * values are normed per head without a weight, scores unscaled, with norms after the attention
 * and the gated quick-GELU MLP and a scale on the layer's output; then n_merge x n_merge
 * patches averaged into one token, times sqrt(width), standardised, RMS-normed without a
 * weight and projected into the text model's width. Its linear products may clip their
 * inputs and outputs (one-value tensors beside each product's weight, in both layouts).
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blocks.h"
#include "mmproj.h"
#include "quant_half.h"
#include "tensor_type.h"
#include "vision_order.h"

/* More rows than any released table (10240): a hostile header's bound */
#define MAX_POS_ROWS (1 << 16)

static const char *const clamp_linears[VISION_CLAMP_LINEARS] = {
    "attn_q", "attn_k", "attn_v", "attn_out", "ffn_gate", "ffn_up", "ffn_down"};
static const char *const clamp_bounds[4] = {"input_min", "input_max", "output_min",
                                            "output_max"};

/* A bound stored as llama.cpp's converter writes it: one F32 value named after its product's
 * weight. *found: whether it is there. */
static bool read_bound(const corral_mmproj *mm, const char *name, float *out, bool *found,
                       corral_error *err)
{
    const gguf_tensor *t = gguf_find_tensor(mm->file, name);
    if (!t)
        return true;
    if (t->type != TENSOR_TYPE_F32 || gguf_tensor_n_elems(t) != 1) {
        corral_error_set(err, "%s: tensor '%s' must be one F32 value", gguf_path(mm->file), name);
        return false;
    }
    memcpy(out, t->data, sizeof *out);
    if (isnan(*out)) {
        corral_error_set(err, "%s: tensor '%s' is not a number", gguf_path(mm->file), name);
        return false;
    }
    *found = true;
    return true;
}

/*
 * The clipped linears' bounds, every layer's products then the projection's, unbounded where
 * the file has none (as llama.cpp takes them); none at all leaves the products unclipped.
 * ollama's converter writes them under the same names into its single file; its older files
 * packed them into v.clamp_data instead, which its engine now (llama.cpp behind its
 * compatibility layer) does not read: neither do we, so such a file runs unclipped, as there.
 */
static bool bind_clamps(corral_mmproj *mm, corral_error *err)
{
    uint32_t L = mm->hp.n_layer;
    size_t n = (size_t)L * VISION_CLAMP_LINEARS + 1;
    float(*c)[4] = malloc(n * sizeof *c);
    if (!c) {
        corral_error_set(err, "out of memory");
        return false;
    }
    bool found = false;
    for (size_t i = 0; i < n; i++) {
        c[i][0] = c[i][2] = -FLT_MAX;
        c[i][1] = c[i][3] = FLT_MAX;
        for (size_t b = 0; b < 4; b++) {
            char name[128];
            if (i < n - 1)
                snprintf(name, sizeof name, "v.blk.%zu.%s.%s", i / VISION_CLAMP_LINEARS,
                         clamp_linears[i % VISION_CLAMP_LINEARS], clamp_bounds[b]);
            else
                snprintf(name, sizeof name, "mm.input_projection.%s", clamp_bounds[b]);
            if (!read_bound(mm, name, &c[i][b], &found, err)) {
                free(c);
                return false;
            }
        }
    }
    if (!found) {
        free(c);
        return true;
    }
    mm->clamp_owned = c;
    for (uint32_t il = 0; il < L; il++)
        mm->layers[il].clamp = (const float(*)[4])c + (size_t)il * VISION_CLAMP_LINEARS;
    return true;
}

/* The patch kernel as F32 rows of the half values llama.cpp's convolution multiplies (an F16
 * kernel's exactly, an F32 one's rounded: it lays the patches out in F16 and multiplies in
 * that type), in mm->patch_owned. */
static bool kernel_as_halves(corral_mmproj *mm, corral_error *err)
{
    weight *w = &mm->patch_embd;
    if (w->type != TENSOR_TYPE_F16 && w->type != TENSOR_TYPE_F32) {
        corral_error_set(err, "%s: tensor 'v.patch_embd.weight' has type %s; a gemma4v patch "
                         "kernel must be F16 or F32", gguf_path(mm->file),
                         tensor_type_name(w->type));
        return false;
    }
    if (w->n_in % 8 != 0) { /* the sum order of vision_patch_embed_half */
        corral_error_set(err, "%s: a patch of %zu values is not a multiple of 8, which gemma4v "
                         "is not supported for", gguf_path(mm->file), w->n_in);
        return false;
    }
    float *owned = malloc(w->n_in * w->n_out * sizeof *owned);
    if (!owned) {
        corral_error_set(err, "out of memory");
        return false;
    }
    for (size_t r = 0; r < w->n_out; r++)
        w->ops->dequantize((const uint8_t *)w->data + r * w->row_bytes, owned + r * w->n_in,
                           w->n_in);
    for (size_t i = 0; i < w->n_in * w->n_out; i++)
        owned[i] = quant_f16_to_f32(quant_f32_to_f16(owned[i]));
    mm->patch_owned = owned;
    return true;
}

static bool gemma4v_bind(corral_mmproj *mm, corral_error *err)
{
    vision_hparams *hp = &mm->hp;
    const char *path = gguf_path(mm->file);
    size_t E = hp->n_embd, d = E / hp->n_head;
    if (d % 4 != 0) {
        corral_error_set(err, "%s: a head of %zu values does not split into two rotary halves "
                         "of pairs", path, d);
        return false;
    }
    if (!mm->ollama_names) {
        /* llama.cpp runs this tower's MLP with a quick GELU unless the file asks otherwise,
         * and its converter never does */
        bool gelu = false, silu = false;
        if (!gguf_get_bool_opt(mm->file, "clip.use_gelu", &gelu, err) ||
            !gguf_get_bool_opt(mm->file, "clip.use_silu", &silu, err))
            return false;
        if (gelu || silu) {
            corral_error_set(err, "%s: clip.use_%s is set; a gemma4v tower with an MLP other "
                             "than the quick GELU is not supported", path, gelu ? "gelu" : "silu");
            return false;
        }
    }
    /* the position table: [width, rows, 2], the columns' rows then the rows' */
    const gguf_tensor *pos = mmproj_find_tensor(mm, "v.position_embd.weight");
    const quant_ops *pos_ops = pos ? quant_ops_active(pos->type) : NULL;
    if (!pos || pos->ne[0] != (int64_t)E || pos->ne[1] < 1 || pos->ne[1] > MAX_POS_ROWS ||
        pos->ne[2] != 2 || pos->ne[3] != 1 || !pos_ops || !pos_ops->dequantize) {
        corral_error_set(err, "%s: tensor 'v.position_embd.weight' must be [%zu, rows, 2] of a "
                         "supported type", path, E);
        return false;
    }
    size_t rows = 2 * (size_t)pos->ne[1];
    mm->pos_embd = (weight){.data = pos->data,
                            .type = pos->type,
                            .n_in = E,
                            .n_out = rows,
                            .row_bytes = pos->size_bytes / rows,
                            .ops = pos_ops};
    const gguf_tensor *proj = mmproj_find_tensor(mm, "mm.input_projection.weight");
    if (!proj || proj->ne[1] < 1 || proj->ne[1] > (1 << 20)) {
        corral_error_set(err, "%s: missing or malformed tensor 'mm.input_projection.weight'",
                         path);
        return false;
    }
    size_t T = (size_t)proj->ne[1];
    if (!mmproj_bind_matrix(mm, &mm->input_proj, "mm.input_projection.weight", E, T, true, err) ||
        !mmproj_bind_vector(mm, &mm->std_bias, "v.std_bias", E, false, err) ||
        !mmproj_bind_vector(mm, &mm->std_scale, "v.std_scale", E, false, err))
        return false;
    if (!mm->std_bias.data != !mm->std_scale.data) {
        corral_error_set(err, "%s: tensor '%s' comes without '%s'", path,
                         mm->std_bias.data ? "v.std_bias" : "v.std_scale",
                         mm->std_bias.data ? "v.std_scale" : "v.std_bias");
        return false;
    }
    for (uint32_t il = 0; il < hp->n_layer; il++)
        if (!mm->layers[il].gate.data) {
            corral_error_set(err, "%s: missing tensor 'v.blk.%u.ffn_gate.weight'", path, il);
            return false;
        }
    /* llama.cpp's tower adds no patch bias, whatever the file holds */
    mm->patch_b = (weight){0};
    if (!kernel_as_halves(mm, err) || !bind_clamps(mm, err))
        return false;
    hp->n_embd_text = (uint32_t)T;
    return true;
}

/* Per patch (row, column) in at: the cos and sin of its d/2 pairs (cs, d floats a patch):
 * pairs [0, d/4) by its column, [d/4, d/2) by its row, each at positions times 100^(-4i/d),
 * grown by repeated multiplication as ggml's rotary cache does for a RoPE of d/2 dims. */
static void patch_angles(const uint32_t *at, size_t n, size_t d, float *cs)
{
    size_t quarter = d / 4;
    float s = powf(100.0f, -2.0f / (float)(d / 2));
    for (size_t t = 0; t < n; t++) {
        float *row = cs + t * d;
        for (size_t part = 0; part < 2; part++) {
            float theta = (float)at[2 * t + 1 - part]; /* the column first */
            for (size_t i = 0; i < quarter; i++) {
                row[2 * (part * quarter + i)] = cosf(theta);
                row[2 * (part * quarter + i) + 1] = sinf(theta);
                theta *= s;
            }
        }
    }
}

static bool gemma4v_encode(const corral_mmproj *mm, threadpool *pool,
                           const corral_cancel *cancel, const float *pixels, uint32_t nx,
                           uint32_t ny, corral_image_embd *out, corral_error *err)
{
    const vision_hparams *hp = &mm->hp;
    size_t p = hp->patch_size, k = hp->n_merge, align = p * k;
    if (nx % align != 0 || ny % align != 0) {
        corral_error_set(err, "gemma4v encodes images whose sides are multiples of %zu, not "
                         "%u x %u", align, nx, ny);
        return false;
    }
    size_t px = nx / p, py = ny / p, n = px * py, ox = px / k, oy = py / k, n_tokens = ox * oy;
    size_t E = hp->n_embd, d = E / hp->n_head, T = hp->n_embd_text;
    size_t pos_rows = mm->pos_embd.n_out / 2;
    if (px > pos_rows || py > pos_rows) {
        corral_error_set(err, "an image of %zu x %zu patches is more than the position table's "
                         "%zu a side", px, py, pos_rows);
        return false;
    }
    uint32_t *at = malloc(2 * n * sizeof *at);
    float *cs = malloc(n * d * sizeof *cs), *half = malloc((size_t)nx * ny * 3 * sizeof *half);
    float *row = malloc(E * sizeof *row);
    out->data = malloc(n_tokens * T * sizeof *out->data);
    vision_run run;
    bool ok = at && cs && half && row && out->data;
    if (!ok)
        corral_error_set(err, "out of memory");
    /* the projection takes a row of E per token, fewer rows than patches */
    ok = ok && vision_run_init(&run, mm, pool, cancel, n,
                               quant_act_row_bytes(mm->input_proj.type, E), err);
    if (!ok) {
        free(at);
        free(cs);
        free(half);
        free(row);
        return false;
    }
    for (size_t t = 0; t < n; t++) {
        at[2 * t] = (uint32_t)(t / px);
        at[2 * t + 1] = (uint32_t)(t % px);
    }
    /* [0, 1] to [-1, 1], then to half as the convolution lays the patches out */
    for (size_t i = 0; i < (size_t)nx * ny * 3; i++)
        half[i] = quant_f16_to_f32(quant_f32_to_f16(pixels[i] * 2.0f - 1.0f));
    vision_patch_embed_half(&run, half, nx, at, mm->patch_owned, NULL, NULL);
    /* the column's row, then the row's: (x + column) + row */
    for (size_t part = 0; part < 2; part++)
        for (size_t t = 0; t < n; t++) {
            size_t r = part * pos_rows + at[2 * t + 1 - part];
            mm->pos_embd.ops->dequantize((const uint8_t *)mm->pos_embd.data +
                                             r * mm->pos_embd.row_bytes,
                                         row, E);
            for (size_t e = 0; e < E; e++)
                run.x[t * E + e] += row[e];
        }
    patch_angles(at, n, d, cs);
    run.rope_cs = cs;
    run.rope_split = true;
    run.kq_scale = 1.0f;
    run.v_norm = true;
    if (!vision_run_blocks(&run, 0, hp->n_layer, err)) {
        vision_run_free(&run);
        free(at);
        free(cs);
        free(half);
        free(row);
        return false;
    }
    if (mm->post_ln.data)
        vision_norm_rows(mm, &mm->post_ln, &mm->post_ln_b, run.x, run.x, n);

    /* average pooling into xn (rows, then columns, summed in ggml's order), times sqrt(E) */
    float *pooled = run.xn, grow = sqrtf((float)E);
    for (size_t ty = 0; ty < oy; ty++)
        for (size_t tx = 0; tx < ox; tx++) {
            float *dst = pooled + (ty * ox + tx) * E;
            for (size_t e = 0; e < E; e++) {
                float sum = 0.0f;
                for (size_t ky = 0; ky < k; ky++)
                    for (size_t kx = 0; kx < k; kx++)
                        sum += run.x[((ty * k + ky) * px + tx * k + kx) * E + e];
                sum /= (float)(k * k);
                dst[e] = sum * grow;
            }
        }
    for (size_t t = 0; t < n_tokens; t++) {
        float *x = pooled + t * E;
        if (mm->std_bias.data) {
            const float *b = mm->std_bias.data, *s = mm->std_scale.data;
            for (size_t e = 0; e < E; e++)
                x[e] = (x[e] - b[e]) * s[e];
        }
        vision_rmsnorm_row(x, run.ones, E, hp->eps, x);
    }
    const float *c = mm->clamp_owned ? mm->clamp_owned[(size_t)hp->n_layer * VISION_CLAMP_LINEARS]
                                     : NULL;
    if (c)
        for (size_t i = 0; i < n_tokens * E; i++)
            pooled[i] = fmaxf(fminf(pooled[i], c[1]), c[0]);
    vision_matmul(pool, &mm->input_proj, NULL, pooled, n_tokens, out->data, run.act);
    if (c)
        for (size_t i = 0; i < n_tokens * T; i++)
            out->data[i] = fmaxf(fminf(out->data[i], c[3]), c[2]);
    vision_run_free(&run);
    free(at);
    free(cs);
    free(half);
    free(row);
    out->n_tokens = n_tokens;
    out->nx = (uint32_t)ox;
    out->ny = (uint32_t)oy;
    out->n_embd = (uint32_t)T;
    return true;
}

const projector_kind projector_gemma4v = {
    .name = "gemma4v",
    .image_begin = "<|image>",
    .image_end = "<image|>",
    .resize = CORRAL_IMAGE_SMART,
    .norm = VISION_RMS_NORM,
    .ffn = VISION_FFN_GEGLU_QUICK,
    .bind = gemma4v_bind,
    .encode = gemma4v_encode,
    .gpu_rows = vision_gpu_rows_of_pixels,
};

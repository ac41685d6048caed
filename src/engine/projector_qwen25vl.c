/*
 * The qwen2.5vl_merger projector over Qwen2.5-VL's tower: patches taken in 2 x 2 merge
 * groups (each group's four patches consecutive, groups in row order), the patch convolution
 * of two temporal frames summed, 2-D rotary positions (a head's first quarter of pairs turns
 * with the patch row, the second with its column), RMSNorm blocks with a SwiGLU MLP that
 * attend within windows of window_pixels except every n_wa_pattern-th layer, a final RMS
 * norm, and the merger: each group's four states side by side through mm.0, GELU, mm.2.
 * The groups go through the tower window by window (windows in row order, a window's
 * groups in row order), as llama.cpp orders them: attention's sums then run over the same
 * keys in the same order, which keeps the results bit for bit. The merged tokens come back
 * into row order at the end.
 */
#include <stdlib.h>
#include <string.h>

#include "blocks.h"
#include "mmproj.h"

static bool qwen25vl_bind(corral_mmproj *mm, corral_error *err)
{
    const vision_hparams *hp = &mm->hp;
    const char *path = gguf_path(mm->file);
    size_t E = hp->n_embd, d = E / hp->n_head;
    if (d % 4 != 0) {
        corral_error_set(err, "%s: a head of %zu values does not split into four rotary sections",
                         path, d);
        return false;
    }
    if (!mm->post_ln.data) {
        corral_error_set(err, "%s: missing tensor 'v.post_ln.weight'", path);
        return false;
    }
    const gguf_tensor *out = mmproj_find_tensor(mm, "mm.2.weight");
    if (!out || out->ne[1] < 1 || out->ne[1] > (1 << 20)) {
        corral_error_set(err, "%s: missing or malformed tensor 'mm.2.weight'", path);
        return false;
    }
    size_t T = (size_t)out->ne[1];
    if (!mmproj_bind_matrix(mm, &mm->mm0, "mm.0.weight", 4 * E, 4 * E, true, err) ||
        !mmproj_bind_vector(mm, &mm->mm0_b, "mm.0.bias", 4 * E, false, err) ||
        !mmproj_bind_matrix(mm, &mm->mm2, "mm.2.weight", 4 * E, T, true, err) ||
        !mmproj_bind_vector(mm, &mm->mm2_b, "mm.2.bias", T, false, err))
        return false;
    mm->hp.n_embd_text = (uint32_t)T;
    return true;
}

static bool qwen25vl_encode(const corral_mmproj *mm, threadpool *pool,
                            const corral_cancel *cancel, const float *pixels, uint32_t nx,
                            uint32_t ny, corral_image_embd *out, corral_error *err)
{
    const vision_hparams *hp = &mm->hp;
    size_t align = 2 * (size_t)hp->patch_size;
    if (nx % align != 0 || ny % align != 0) {
        corral_error_set(err, "qwen2.5vl encodes images whose sides are multiples of %zu, not %u x %u",
                         align, nx, ny);
        return false;
    }
    size_t mx = nx / align, my = ny / align, n_merged = mx * my, n = 4 * n_merged;
    size_t E = hp->n_embd, d = E / hp->n_head, T = hp->n_embd_text;
    size_t wm = hp->window_pixels / align ? hp->window_pixels / align : 1;
    if (hp->n_wa_pattern == 0) /* no window attention: llama.cpp keeps the row order */
        wm = mx > my ? mx : my;
    size_t windows_x = (mx + wm - 1) / wm;
    uint32_t *at = malloc(2 * n * sizeof *at), *window = malloc(n * sizeof *window);
    size_t *row_of = malloc(n_merged * sizeof *row_of); /* a merged token's row-order place */
    float *cs = malloc(n * d * sizeof *cs), *merged = malloc(n_merged * T * sizeof *merged);
    out->data = malloc(n_merged * T * sizeof *out->data);
    vision_run run;
    bool ok = at && window && row_of && cs && merged && out->data;
    if (!ok)
        corral_error_set(err, "out of memory");
    size_t merger_act = (quant_act_row_bytes(mm->mm0.type, 4 * E) + 3) / 4;
    size_t out_act = (quant_act_row_bytes(mm->mm2.type, 4 * E) + 3) / 4;
    ok = ok && vision_run_init(&run, mm, pool, cancel, n,
                               merger_act > out_act ? merger_act : out_act, err);
    if (!ok) {
        free(at);
        free(window);
        free(row_of);
        free(cs);
        free(merged);
        return false;
    }
    size_t t = 0, k = 0;
    for (size_t wy = 0; wy < my; wy += wm)
        for (size_t wx = 0; wx < mx; wx += wm)
            for (size_t Y = wy; Y < my && Y < wy + wm; Y++)
                for (size_t X = wx; X < mx && X < wx + wm; X++) {
                    row_of[k++] = Y * mx + X;
                    for (size_t j = 0; j < 4; j++, t++) {
                        at[2 * t] = (uint32_t)(2 * Y + j / 2);
                        at[2 * t + 1] = (uint32_t)(2 * X + j % 2);
                        window[t] = (uint32_t)(wy / wm * windows_x + wx / wm);
                    }
                }
    vision_patch_angles(at, n, d, cs);
    run.rope_cs = cs;
    run.window = window;
    vision_patch_embed(&run, pixels, nx, at);
    if (!vision_run_blocks(&run, 0, hp->n_layer, err)) {
        vision_run_free(&run);
        free(at);
        free(window);
        free(row_of);
        free(cs);
        free(merged);
        return false;
    }
    vision_norm_rows(mm, &mm->post_ln, NULL, run.x, run.x, n);
    /* the merger: run.x is already n_merged rows of 4 * E */
    vision_matmul(pool, &mm->mm0, &mm->mm0_b, run.x, n_merged, run.q, run.act);
    block_gelu(run.q, n_merged * 4 * E);
    vision_matmul(pool, &mm->mm2, &mm->mm2_b, run.q, n_merged, merged, run.act);
    for (k = 0; k < n_merged; k++)
        memcpy(out->data + row_of[k] * T, merged + k * T, T * sizeof *merged);
    vision_run_free(&run);
    free(at);
    free(window);
    free(row_of);
    free(cs);
    free(merged);
    out->n_tokens = n_merged;
    out->nx = (uint32_t)mx;
    out->ny = (uint32_t)my;
    out->n_embd = (uint32_t)T;
    return true;
}

const projector_kind projector_qwen25vl = {
    .name = "qwen2.5vl_merger",
    .image_begin = "<|vision_start|>",
    .image_end = "<|vision_end|>",
    .resize = CORRAL_IMAGE_SMART,
    .norm = VISION_RMS_NORM,
    .ffn = VISION_FFN_SWIGLU,
    .bind = qwen25vl_bind,
    .encode = qwen25vl_encode,
    .gpu_rows = vision_gpu_rows_of_pixels,
};

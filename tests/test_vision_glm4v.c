/*
 * GLM-OCR's images against llama.cpp's multimodal library (vision/README, glm4v-*): each PNG,
 * decoded and preprocessed as the runner does it (already at a size smart resize keeps),
 * through the glm4v tower and merger must give the reference's embeddings; the prompt's text
 * around them through the glm4 text model (M-RoPE at the image's grid positions, its
 * prediction layer left out) must give the reference's last logits and 16 greedy tokens, from
 * the reference's embeddings and from ours. ollama's single file (architecture glmocr, the
 * tower inside the text model's GGUF, gate and up apart, three M-RoPE sections, no
 * rope.dimension_count, a llama-bpe pre-tokenizer, in its older tensor names too) answers as
 * the pair does. Files wrong in the ways a hostile or broken file could be are refused with
 * a message naming the fault.
 *
 * --write-single OUT BROKEN writes that single file and a broken projector for the
 * integration tests.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "corral/engine.h"
#include "file_fixture.h"
#include "gguf.h"
#include "gguf_write_fixture.h"
#include "image/image.h"
#include "image/projector_preprocess.h"
#include "vision_check.h"
#include "vision_png_fixture.h"
#include "vision_ref_fixture.h"

/* The references come from llama.cpp built for AVX2 (ggml's F32 products in 8 lanes);
 * Corral's tower follows the order of its AVX-512 build (16 lanes, vision_order.h), as the
 * other vision fixtures were made, so the two differ in last bits; the tower's MLPs are SiLU
 * and the merger's GELU is erf's (no fp16 table to step across), so they stay small: 2.2e-6
 * with 4-pixel patches, 6.1e-5 (mean 1.8e-6) with 14-pixel ones, whose 588-wide products go
 * to ggml's F16 vector dot (its leftovers summed in double). Measured figures are printed and
 * recorded in vision/README. */
#define EMBD_TOLERANCE 1e-4f
#define EMBD_MEAN_TOLERANCE 1e-5
/* With quick GELU (ggml's fp16 table) an input on the other side of a half's rounding step
 * takes the neighbouring entry: some tokens then move by a few 1e-4 (measured: 4.5e-4 at
 * most, mean 3.6e-5; four of twelve tokens within 2e-7 of the reference's). */
#define QUICK_EMBD_TOLERANCE 1e-3f
#define QUICK_EMBD_MEAN_TOLERANCE 1e-4
#define LOGIT_TOLERANCE 1e-3f
#define N_GREEDY 16
#define TEXT_WIDTH 32

/* The text checks' context: 128 cells, images, n_gpu_layers gpu_layers (-1: every layer
 * that may go). */
static corral_context_params text_params(int gpu_layers)
{
    corral_context_params params;
    vision_context_params(&params, 128);
    params.images = true;
    params.n_gpu_layers = gpu_layers;
    return params;
}

/* One reference: its stem ("glm4v", "glm4v-quick", "glm4v-p14") and image ("square",
 * "wide"), the PNG, its size and the side in pixels of a merged token; quick: the quick-GELU
 * tower's tolerances. */
typedef struct ref_case {
    const char *ref_name, *image, *png;
    uint32_t nx, ny, token_side;
    bool quick;
} ref_case;

/* mm_path, text_path: the projector and the text model (one file in ollama's layout). */
static void run_case_files(const ref_case *rc, const char *mm_path, const char *text_path)
{
    const char *ref_name = rc->ref_name, *image = rc->image;
    uint32_t nx = rc->nx, ny = rc->ny;
    bool quick = rc->quick;
    char name[128];
    snprintf(name, sizeof name, "%s.%s.ref.txt", ref_name, image);
    char *ref = file_fixture_read(vision_fixture(name), NULL);
    corral_mmproj *mm = vision_load_mmproj(mm_path, "glm4v");
    corral_image_embd embd;
    vision_encode_png(mm, vision_fixture(rc->png), nx, ny, &embd);
    /* patches merged 2 x 2: a token per token_side x token_side pixels */
    assert_int_equal(embd.nx, nx / rc->token_side);
    assert_int_equal(embd.ny, ny / rc->token_side);
    assert_int_equal(embd.n_embd, TEXT_WIDTH);
    assert_int_equal(corral_mmproj_image_tokens(mm, nx, ny), embd.n_tokens);
    snprintf(name, sizeof name, "%s.%s.embd.f32", ref_name, image);
    float *want = vision_read_embd(vision_fixture(name), embd.n_tokens, embd.n_embd);
    char label[128];
    snprintf(label, sizeof label, "%s %s", ref_name, image);
    vision_check_embd(label, embd.data, want, embd.n_tokens, embd.n_embd,
                      quick ? &(vision_tolerance){.max = QUICK_EMBD_TOLERANCE,
                                                  .mean = QUICK_EMBD_MEAN_TOLERANCE}
                            : &(vision_tolerance){.max = EMBD_TOLERANCE,
                                                  .mean = EMBD_MEAN_TOLERANCE});

    corral_model *m = vision_load_text(text_path, mm);
    /* the image's markers and the prompt, tokenized as the reference did */
    vision_prompt prompt;
    vision_prompt_ids(&prompt, m, mm, "[gMASK]<sop><|user|>\n", "What is this?<|assistant|>\n",
                      ref, 2);

    char logits[2048];
    snprintf(name, sizeof name, "%s.%s.logits.txt", ref_name, image);
    snprintf(logits, sizeof logits, "%s", vision_fixture(name));
    corral_context_params params = text_params(0);
    vision_check_texts(m, &params, &prompt, &embd, want, ref, logits, LOGIT_TOLERANCE, N_GREEDY,
                       label);

    corral_model_free(m);
    corral_image_embd_free(&embd);
    corral_mmproj_free(mm);
    free(want);
    free(ref);
}

static const ref_case square = {"glm4v", "square", "qwen3vl-square.png", 24, 24, 8, false};
static const ref_case wide = {"glm4v", "wide", "qwen3vl-wide.png", 32, 24, 8, false};

/* the pair of files, projector mm (its fixture name) */
static void run_case(const ref_case *rc, const char *mm)
{
    char mm_path[2048], text_path[2048]; /* vision_fixture()'s buffers are reused */
    snprintf(mm_path, sizeof mm_path, "%s", vision_fixture(mm));
    snprintf(text_path, sizeof text_path, "%s", vision_fixture("glm4v-text.gguf"));
    run_case_files(rc, mm_path, text_path);
}

static void test_square(void **state) { (void)state; run_case(&square, "glm4v-mmproj.gguf"); }
static void test_wide(void **state) { (void)state; run_case(&wide, "glm4v-mmproj.gguf"); }

/* GLM-OCR's 14-pixel patches: 588 inputs a patch, which llama.cpp's F16 kernel leaves to its
 * vector dot (the tower's own F32 products on the halves) */
static void test_patch14(void **state)
{
    (void)state;
    static const ref_case p14 = {"glm4v-p14", "wide", "glm4v-p14.png", 112, 84, 28, false};
    run_case(&p14, "glm4v-p14-mmproj.gguf");
}

/* ---- ollama's single file ---- */

/* How write_single spoils ollama's layout, one way per case. */
typedef struct single_variant {
    bool old_names;          /* attn_out, post_attn_norm, post_ffn_norm (its older files) */
    const char *drop_key;    /* a glmocr.* key left out */
    const char *drop_tensor; /* a tensor (as the single file names it) left out */
    uint32_t merge;          /* vision.spatial_merge_size; 0: the tower's */
} single_variant;

/* Text tensor name as ollama's layout spells it (old: its older converter's). */
static const char *single_text_name(const char *name, bool old, char *buf, size_t size)
{
    static const char *const renames[][2] = {{".attn_output.", ".attn_out."},
                                             {".post_attention_norm.", ".post_attn_norm."},
                                             {".post_ffw_norm.", ".post_ffn_norm."}};
    for (size_t i = 0; old && i < sizeof renames / sizeof renames[0]; i++) {
        const char *at = strstr(name, renames[i][0]);
        if (at) {
            snprintf(buf, size, "%.*s%s%s", (int)(at - name), name, renames[i][1],
                     at + strlen(renames[i][0]));
            return buf;
        }
    }
    return name;
}

/*
 * The pair as ollama's converter lays out GLM-OCR: architecture glmocr, the text model's keys
 * under glmocr. with the sections as rope.mrope_section (three) and no rope.dimension_count,
 * pre-tokenizer llama-bpe, each fused ffn_up split into ffn_gate and ffn_up; the tower's
 * sizes under glmocr.vision.*, its tensors under the mmproj's names but the patch kernels
 * (v.patch_embd_0, v.patch_embd_1).
 */
static void write_single(const char *dst, const single_variant *v)
{
    corral_error err = {0};
    char text_path[2048];
    snprintf(text_path, sizeof text_path, "%s", vision_fixture("glm4v-text.gguf"));
    gguf_file *text = gguf_open(text_path, &err);
    gguf_file *mm = text ? gguf_open(vision_fixture("glm4v-mmproj.gguf"), &err) : NULL;
    gguf_writer *w = gguf_writer_create();
    if (!text || !mm || !w)
        fail_msg("%s", err.message);
    bool ok = true;
    for (size_t i = 0; ok && i < gguf_n_kv(text); i++) {
        const gguf_kv *kv = gguf_kv_at(text, i);
        char key[128];
        if (strcmp(kv->key, "general.architecture") == 0) {
            ok = gguf_writer_add_str(w, kv->key, "glmocr", 6, &err);
        } else if (strcmp(kv->key, "tokenizer.ggml.pre") == 0) {
            ok = gguf_writer_add_str(w, kv->key, "llama-bpe", 9, &err);
        } else if (strcmp(kv->key, "glm4.rope.dimension_count") == 0) {
            continue;
        } else if (strcmp(kv->key, "glm4.rope.dimension_sections") == 0) {
            int32_t three[3];
            for (int s = 0; s < 3; s++)
                three[s] = (int32_t)gguf_kv_i64(kv, (uint64_t)s);
            if (!(v->drop_key && strcmp(v->drop_key, "glmocr.rope.mrope_section") == 0))
                ok = gguf_writer_add_array(w, "glmocr.rope.mrope_section", GGUF_TYPE_INT32,
                                           three, 3, &err);
        } else if (strncmp(kv->key, "glm4.", 5) == 0) {
            snprintf(key, sizeof key, "glmocr.%s", kv->key + 5);
            gguf_kv renamed = *kv;
            renamed.key = key;
            if (!(v->drop_key && strcmp(v->drop_key, key) == 0))
                ok = gguf_writer_copy_kv(w, &renamed, &err);
        } else {
            ok = gguf_writer_copy_kv(w, kv, &err);
        }
    }
    static const char *const sizes[][2] = {
        {"clip.vision.block_count", "glmocr.vision.block_count"},
        {"clip.vision.embedding_length", "glmocr.vision.embedding_length"},
        {"clip.vision.feed_forward_length", "glmocr.vision.intermediate_size"},
        {"clip.vision.attention.head_count", "glmocr.vision.attention.head_count"},
        {"clip.vision.image_size", "glmocr.vision.image_size"},
        {"clip.vision.patch_size", "glmocr.vision.patch_size"},
        {"clip.vision.projection_dim", "glmocr.vision.out_hidden_size"},
        {"clip.vision.spatial_merge_size", "glmocr.vision.spatial_merge_size"},
    };
    for (size_t i = 0; ok && i < sizeof sizes / sizeof sizes[0]; i++) {
        uint32_t value = 0;
        ok = gguf_get_u32(mm, sizes[i][0], &value, &err);
        if (v->merge && strcmp(sizes[i][1], "glmocr.vision.spatial_merge_size") == 0)
            value = v->merge;
        if (ok && !(v->drop_key && strcmp(v->drop_key, sizes[i][1]) == 0))
            ok = gguf_writer_add_u32(w, sizes[i][1], value, &err);
    }
    float eps = 0.0f;
    ok = ok && gguf_get_f32(mm, "clip.vision.attention.layer_norm_epsilon", &eps, &err) &&
         (v->drop_key && strcmp(v->drop_key, "glmocr.vision.attention.layer_norm_rms_epsilon") == 0
              ? true
              : gguf_writer_add_f32(w, "glmocr.vision.attention.layer_norm_rms_epsilon", eps,
                                    &err));
    static const char *const triples[][2] = {{"clip.vision.image_mean", "glmocr.vision.image_mean"},
                                             {"clip.vision.image_std", "glmocr.vision.image_std"}};
    for (size_t i = 0; ok && i < 2; i++) {
        const gguf_kv *kv;
        ok = gguf_get_array(mm, triples[i][0], GGUF_TYPE_FLOAT32, &kv, &err);
        float values[3];
        for (int c = 0; ok && c < 3; c++)
            values[c] = gguf_kv_f32(kv, (uint64_t)c);
        if (ok && !(v->drop_key && strcmp(v->drop_key, triples[i][1]) == 0))
            ok = gguf_writer_add_array(w, triples[i][1], GGUF_TYPE_FLOAT32, values, 3, &err);
    }
    for (int pass = 0; ok && pass < 2; pass++) {
        for (size_t i = 0; ok && i < gguf_n_tensors(text); i++) {
            const gguf_tensor *t = gguf_tensor_at(text, i);
            char buf[128];
            size_t n = strlen(t->name), k = strlen(".ffn_up.weight");
            if (n > k && strcmp(t->name + n - k, ".ffn_up.weight") == 0) {
                /* rows gate;up as two tensors of half the rows each */
                int64_t ne[4] = {t->ne[0], t->ne[1] / 2, 1, 1};
                size_t half = t->size_bytes / 2;
                snprintf(buf, sizeof buf, "%.*s.ffn_gate.weight", (int)(n - k), t->name);
                bool gate = !(v->drop_tensor && strcmp(v->drop_tensor, buf) == 0);
                if (pass == 0)
                    ok = (!gate || gguf_writer_add_tensor(w, buf, t->type, 2, ne, &err)) &&
                         gguf_writer_add_tensor(w, t->name, t->type, 2, ne, &err);
                else
                    ok = (!gate || gguf_writer_write_tensor(w, t->data, half, &err)) &&
                         gguf_writer_write_tensor(w, (const uint8_t *)t->data + half, half, &err);
                continue;
            }
            const char *name = single_text_name(t->name, v->old_names, buf, sizeof buf);
            if (!(v->drop_tensor && strcmp(v->drop_tensor, name) == 0))
                ok = gguf_write_fixture_copy(w, pass, name, t, &err);
        }
        for (size_t i = 0; ok && i < gguf_n_tensors(mm); i++) {
            const gguf_tensor *t = gguf_tensor_at(mm, i);
            const char *name = strcmp(t->name, "v.patch_embd.weight") == 0 ? "v.patch_embd_0.weight"
                               : strcmp(t->name, "v.patch_embd.weight.1") == 0
                                   ? "v.patch_embd_1.weight"
                                   : t->name;
            if (!(v->drop_tensor && strcmp(v->drop_tensor, name) == 0))
                ok = gguf_write_fixture_copy(w, pass, name, t, &err);
        }
        if (ok && pass == 0)
            ok = gguf_writer_begin(w, dst, &err);
    }
    gguf_write_fixture_finish(w, ok, dst, &err);
    gguf_close(text);
    gguf_close(mm);
}

/* ollama's single file is its own projector and text model, and answers as the pair does,
 * in its current tensor names and its older ones. */
static void test_single_file(void **state)
{
    (void)state;
    char path[512];
    vision_temp_path(path, sizeof path, "glm4v", "single");
    write_single(path, &(single_variant){0});
    corral_error err = {0};
    corral_model_file *file = corral_model_file_open(path, &err);
    assert_non_null(file);
    assert_true(corral_model_file_has_vision(file));
    corral_model_file_close(file);
    run_case_files(&square, path, path);
    run_case_files(&wide, path, path);
    write_single(path, &(single_variant){.old_names = true});
    run_case_files(&wide, path, path);
    remove(path);
}

/* Single files missing what ollama's layer needs, or with a merge its graph does not run,
 * are refused by name. */
static void test_single_file_refusals(void **state)
{
    (void)state;
    static const struct {
        single_variant v;
        bool text; /* refused by the text model's load (else the projector's) */
        const char *message;
    } cases[] = {
        {{.merge = 3}, false, "glmocr.vision.spatial_merge_size"},
        {{.drop_key = "glmocr.vision.image_mean"}, false, "glmocr.vision.image_mean"},
        {{.drop_key = "glmocr.vision.attention.layer_norm_rms_epsilon"}, false,
         "glmocr.vision.attention.layer_norm_rms_epsilon"},
        {{.drop_tensor = "v.patch_embd_1.weight"}, false, "v.patch_embd_1.weight"},
        {{.drop_tensor = "mm.patch_merger.bias"}, false, "mm.patch_merger.bias"},
        /* without its ffn_gate, a layer's ffn_up is read as gate and up in one, as ollama's
         * current converter writes them: this one is half as wide */
        {{.drop_tensor = "blk.1.ffn_gate.weight"}, true, "blk.1.ffn_up.weight"},
        {{.old_names = true, .drop_tensor = "blk.2.post_ffn_norm.weight"}, true,
         "blk.2.post_ffw_norm.weight"},
    };
    char path[512];
    vision_temp_path(path, sizeof path, "glm4v", "single-spoiled");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        write_single(path, &cases[i].v);
        corral_error err = {0};
        if (cases[i].text) {
            corral_model *m = corral_model_load(path, &err);
            if (m)
                fail_msg("case %zu was loaded", i);
        } else {
            corral_mmproj *mm = corral_mmproj_load(path, &err);
            if (mm)
                fail_msg("case %zu was loaded", i);
        }
        printf("refused: %s\n", err.message);
        assert_non_null(strstr(err.message, cases[i].message));
    }
    /* without sections the text model is glm4's plain one, which takes no image's grid */
    write_single(path, &(single_variant){.drop_key = "glmocr.rope.mrope_section"});
    corral_error err = {0};
    corral_model *m = corral_model_load(path, &err);
    if (!m)
        fail_msg("%s", err.message);
    corral_model_free(m);
    remove(path);
}

/* ---- hostile files ---- */

/* Projector files broken one way each are refused, the message naming the fault. */
static void test_projector_refusals(void **state)
{
    (void)state;
    static const vision_refusal cases[] = {
        {{.drop_tensor = "v.patch_embd.weight.1"}, "v.patch_embd.weight.1"},
        {{.drop_tensor = "v.patch_embd.bias"}, "v.patch_embd.bias"},
        {{.drop_tensor = "mm.patch_merger.weight"}, "mm.patch_merger.weight"},
        {{.flatten = "mm.patch_merger.weight"}, "mm.patch_merger.weight"},
        {{.drop_tensor = "mm.patch_merger.bias"}, "mm.patch_merger.bias"},
        {{.drop_tensor = "mm.model.fc.weight"}, "mm.model.fc.weight"},
        {{.flatten = "mm.model.fc.weight"}, "mm.model.fc.weight"},
        {{.drop_tensor = "mm.post_norm.weight"}, "mm.post_norm.weight"},
        {{.drop_tensor = "mm.gate.weight"}, "mm.gate.weight"},
        {{.drop_tensor = "mm.up.weight"}, "mm.up.weight"},
        {{.flatten = "mm.down.weight"}, "mm.down.weight"},
        {{.drop_tensor = "v.blk.1.attn_qkv.weight"}, "v.blk.1.attn_q.weight"},
        {{.drop_tensor = "v.blk.0.ffn_gate.weight"}, "v.blk.0.ffn_gate.weight"},
        /* GLM-4.1V's learned position table is not run */
        {{.rename_from = "mm.post_norm.bias", .rename_to = "v.position_embd.weight"},
         "v.position_embd.weight"},
        {{.bool_key = "clip.use_gelu", .bool_value = true}, "clip.use_gelu"},
        {{.u32_key = "clip.vision.spatial_merge_size", .u32_value = 3},
         "clip.vision.spatial_merge_size"},
        /* heads of 4 values: the head norms (16) no longer fit them */
        {{.u32_key = "clip.vision.attention.head_count", .u32_value = 8},
         "v.blk.0.attn_q_norm.weight"},
    };
    char path[512];
    vision_temp_path(path, sizeof path, "glm4v", "spoiled");
    vision_check_refusals(vision_fixture("glm4v-mmproj.gguf"), path, cases, sizeof cases / sizeof cases[0]);
}

/* Without clip.use_silu llama.cpp gates the tower's MLPs and the merger's with quick GELU
 * (an fp16 table, ggml's): the tower so, against its reference (glm4v-quick.*, made from the
 * same weights). */
static void test_quick_gelu(void **state)
{
    (void)state;
    char path[512], text_path[2048];
    vision_temp_path(path, sizeof path, "glm4v", "quick");
    vision_write_variant(vision_fixture("glm4v-mmproj.gguf"), path,
                         &(vision_variant){.drop_key = "clip.use_silu"});
    snprintf(text_path, sizeof text_path, "%s", vision_fixture("glm4v-text.gguf"));
    static const ref_case quick = {"glm4v-quick", "wide", "qwen3vl-wide.png", 32, 24, 8, true};
    run_case_files(&quick, path, text_path);
    remove(path);
}

/* An image whose sides are not whole merged tokens is refused by the encoder, naming the
 * multiple it needs. */
static void test_encode_refusals(void **state)
{
    (void)state;
    corral_error err = {0};
    corral_mmproj *mm = corral_mmproj_load(vision_fixture("glm4v-mmproj.gguf"), &err);
    assert_non_null(mm);
    float *pixels = calloc(28 * 24 * 3, sizeof *pixels);
    assert_non_null(pixels);
    corral_image_embd embd;
    assert_false(corral_mmproj_encode(mm, pixels, 28, 24, 2, &embd, &err));
    printf("refused: %s\n", err.message);
    assert_non_null(strstr(err.message, "multiples of 8"));
    free(pixels);
    corral_mmproj_free(mm);
}

/* On a Vulkan device (lavapipe where there is no GPU), every text layer there: the image's
 * M-RoPE positions give llama.cpp's logits and greedy ids too, from the pair's text model and
 * from ollama's single file. Skipped where no device is usable. */
static void test_gpu(void **state)
{
    (void)state;
    setenv("CORRAL_VULKAN_ALLOW_CPU", "1", 0);
    char single[512], text_path[2048];
    vision_temp_path(single, sizeof single, "glm4v", "single-gpu");
    write_single(single, &(single_variant){.old_names = true});
    snprintf(text_path, sizeof text_path, "%s", vision_fixture("glm4v-text.gguf"));
    const char *paths[2] = {text_path, single};
    char *ref = file_fixture_read(vision_fixture("glm4v.wide.ref.txt"), NULL);
    size_t size;
    float *rows = file_fixture_read(vision_fixture("glm4v.wide.embd.f32"), &size);
    assert_int_equal(size, 12 * TEXT_WIDTH * sizeof(float));
    corral_image_embd embd = {.data = rows, .n_tokens = 12, .nx = 4, .ny = 3,
                              .n_embd = TEXT_WIDTH};
    vision_prompt prompt;
    prompt.n_before = chunk_ids(ref, 0, prompt.before);
    prompt.n_after = chunk_ids(ref, 2, prompt.after);
    bool skipped = false;
    for (size_t i = 0; i < 2 && !skipped; i++) {
        corral_error err = {0};
        corral_model *m = corral_model_load(paths[i], &err);
        if (!m)
            fail_msg("%s", err.message);
        corral_context_params params;
        vision_context_params(&params, 128);
        params.images = true;
        params.n_gpu_layers = -1;
        corral_context *ctx = corral_context_create(m, &params, &err);
        assert_non_null(ctx);
        uint32_t on_device = corral_context_gpu_layers(ctx);
        corral_context_free(ctx);
        skipped = on_device == 0;
        if (!skipped) {
            assert_int_equal(on_device, 3);
            corral_context_params params = text_params(-1);
            vision_check_text(m, &params, &prompt, &embd, ref,
                              vision_fixture("glm4v.wide.logits.txt"), LOGIT_TOLERANCE, N_GREEDY,
                              i ? "glm4v on the device, ollama's file" : "glm4v on the device");
        }
        corral_model_free(m);
    }
    free(rows);
    free(ref);
    remove(single);
    if (skipped)
        skip();
}

/* --write-single OUT BROKEN: the integration tests' copy of ollama's layout and a projector
 * without mm.patch_merger.bias. */
static const char *single_out, *broken_out;

static void write_files_out(void **state)
{
    (void)state;
    write_single(single_out, &(single_variant){0});
    vision_write_variant(vision_fixture("glm4v-mmproj.gguf"), broken_out,
                         &(vision_variant){.drop_tensor = "mm.patch_merger.bias"});
}

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "--write-single") == 0) {
        single_out = argv[2];
        broken_out = argv[3];
        const struct CMUnitTest write[] = {cmocka_unit_test(write_files_out)};
        return cmocka_run_group_tests(write, NULL, NULL);
    }
    if (argc != 1) {
        fprintf(stderr, "usage: %s [--write-single OUT.gguf BROKEN-MMPROJ.gguf]\n", argv[0]);
        return 2;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_square),
        cmocka_unit_test(test_wide),
        cmocka_unit_test(test_quick_gelu),
        cmocka_unit_test(test_patch14),
        cmocka_unit_test(test_single_file),
        cmocka_unit_test(test_single_file_refusals),
        cmocka_unit_test(test_projector_refusals),
        cmocka_unit_test(test_encode_refusals),
        cmocka_unit_test(test_gpu),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    corral_gpu_release(); /* the driver's objects freed before LeakSanitizer looks */
    return failed;
}

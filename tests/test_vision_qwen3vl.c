/*
 * Qwen3-VL's images against llama.cpp's multimodal library (vision/README, qwen3vl-*): each
 * PNG, decoded and preprocessed as the runner does it (already at a size smart resize keeps),
 * through the qwen3vl_merger tower must give the reference's embeddings, the main merger's
 * row and the deepstack rows side by side; the prompt's text around them through the qwen3vl
 * text model (interleaved M-RoPE at the image's grid positions, deepstack added into its
 * first layers) must give the reference's last logits and 16 greedy tokens, from the
 * reference's embeddings and from ours. Then files that are wrong in the ways a hostile or
 * broken file could be are refused with a message naming the fault.
 */
#include <math.h>
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
#include "qwen3vl_single_fixture.h"
#include "image/image.h"
#include "image/projector_preprocess.h"
#include "vision_check.h"
#include "vision_png_fixture.h"
#include "vision_ref_fixture.h"

/* The reference's llama.cpp was built on an AVX2 CPU, whose ggml sums F32 products in 8
 * lanes; Corral's tower follows the order of its AVX-512 build (16 lanes, vision_order.h),
 * which the other vision fixtures come from. The last-bit differences that leaves are
 * harmless but for ggml's GELU, an fp16 table: an input on the other side of a half's
 * rounding step takes the neighbouring entry, and one such step moves the embeddings by about
 * 2e-4 (measured: the merger's rows within 3.6e-6, the deepstack rows within 2.5e-5 for the
 * square and 2e-4 for the wide image; means 5e-7 and 2.8e-6). So: every value within 1e-3,
 * which a wrong step of the computation exceeds, and the mean within 1e-5. */
#define EMBD_TOLERANCE 1e-3f
#define EMBD_MEAN_TOLERANCE 1e-5
#define LOGIT_TOLERANCE 1e-3f
#define N_GREEDY 16

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

/* mm_path, text_path: the projector and the text model (one file in ollama's layout). */
static void run_case_files(const char *image, uint32_t nx, uint32_t ny, const char *mm_path,
                           const char *text_path)
{
    char name[128];
    snprintf(name, sizeof name, "qwen3vl.%s.ref.txt", image);
    char *ref = file_fixture_read(vision_fixture(name), NULL);
    corral_mmproj *mm = vision_load_mmproj(mm_path, "qwen3vl_merger");
    corral_image_embd embd;
    snprintf(name, sizeof name, "qwen3vl-%s.png", image);
    vision_encode_png(mm, vision_fixture(name), nx, ny, &embd);
    /* the grid and the row: the text width (32) for the merger and each of 2 deepstack layers */
    assert_int_equal(embd.nx, nx / 8);
    assert_int_equal(embd.ny, ny / 8);
    assert_int_equal(embd.n_embd, 96);
    snprintf(name, sizeof name, "qwen3vl.%s.embd.f32", image);
    float *want = vision_read_embd(vision_fixture(name), embd.n_tokens, embd.n_embd);
    /* one tolerance for the merger's values (a row's first 32) and the deepstack rows' */
    char label[128];
    snprintf(label, sizeof label, "qwen3vl %s", image);
    vision_check_embd(label, embd.data, want, embd.n_tokens, embd.n_embd,
                      &(vision_tolerance){.max = EMBD_TOLERANCE, .mean = EMBD_MEAN_TOLERANCE});

    corral_model *m = vision_load_text(text_path, mm);
    /* the image's markers and the prompt, tokenized as the reference did */
    vision_prompt prompt;
    vision_prompt_ids(&prompt, m, mm, "<|im_start|>user\n",
                      "What is this?<|im_end|>\n<|im_start|>assistant\n", ref, 2);

    char logits[2048];
    snprintf(name, sizeof name, "qwen3vl.%s.logits.txt", image);
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

static void run_case(const char *image, uint32_t nx, uint32_t ny)
{
    char mm_path[2048], text_path[2048]; /* vision_fixture()'s buffers are reused */
    snprintf(mm_path, sizeof mm_path, "%s", vision_fixture("qwen3vl-mmproj.gguf"));
    snprintf(text_path, sizeof text_path, "%s", vision_fixture("qwen3vl-text.gguf"));
    run_case_files(image, nx, ny, mm_path, text_path);
}

static void test_square(void **state) { (void)state; run_case("square", 24, 24); }
static void test_wide(void **state) { (void)state; run_case("wide", 32, 24); }

/* ---- hostile files ---- */

/* ---- ollama's single file ---- */

/* ollama's single file is its own projector and text model, and answers as the pair does. */
static void test_single_file(void **state)
{
    (void)state;
    char path[512];
    vision_temp_path(path, sizeof path, "qwen3vl", "single");
    int32_t indexes[2] = {0, 2};
    qwen3vl_single_fixture_write(vision_fixture("qwen3vl-text.gguf"),
                                 vision_fixture("qwen3vl-mmproj.gguf"), path, NULL, indexes, 2);
    corral_error err = {0};
    corral_model_file *file = corral_model_file_open(path, &err);
    assert_non_null(file);
    assert_true(corral_model_file_has_vision(file));
    corral_model_file_close(file);
    run_case_files("square", 24, 24, path, path);
    run_case_files("wide", 32, 24, path, path);
    remove(path);
}

/* A single file with a deepstack list that is out of order or past the tower, a merger the
 * list leaves out, a missing merger tensor or no Conv3D kernel is refused by name. */
static void test_single_file_refusals(void **state)
{
    (void)state;
    static const struct {
        int32_t indexes[2];
        uint64_t n;
        const char *drop, *message;
    } cases[] = {
        {{2, 0}, 2, NULL, "ascending"},
        {{0, 3}, 2, NULL, "ascending"},
        {{0, 2}, 1, NULL, "v.deepstack_merger.1"},
        {{0, 2}, 2, "v.deepstack_merger.1.linear_fc2.weight",
         "v.deepstack_merger.1.linear_fc2.weight"},
        {{0, 2}, 2, "v.patch_embed.weight", "v.patch_embed.weight"},
        {{0, 2}, 2, "v.blk.2.norm2.weight", "v.blk.2.norm2.weight"},
    };
    char path[512];
    vision_temp_path(path, sizeof path, "qwen3vl", "single-spoiled");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        qwen3vl_single_fixture_write(vision_fixture("qwen3vl-text.gguf"),
                                     vision_fixture("qwen3vl-mmproj.gguf"), path, cases[i].drop,
                                     cases[i].indexes, cases[i].n);
        vision_check_refused(path, cases[i].message, i);
    }
    remove(path);
}

/* Projector files broken one way each are refused, the message naming the fault. */
static void test_projector_refusals(void **state)
{
    (void)state;
    static const vision_refusal cases[] = {
        /* a deepstack merger for a layer the tower does not have */
        {{.rename_from = "v.deepstack.2.fc2.bias", .rename_to = "v.deepstack.7.fc2.bias"},
         "v.deepstack.7.fc2.bias"},
        {{.rename_from = "v.deepstack.2.norm.bias", .rename_to = "v.deepstack.x.norm.bias"},
         "names none of the 3 tower layers"},
        /* half a deepstack merger */
        {{.drop_tensor = "v.deepstack.0.fc2.weight"}, "v.deepstack.0.fc2.weight"},
        {{.flatten = "v.deepstack.2.fc1.weight"}, "v.deepstack.2.fc1.weight"},
        /* the layer list and the tensors disagree */
        {{.drop_tensor = "v.deepstack.0.fc1.weight"}, "is_deepstack_layers"},
        {{.flatten = "mm.0.weight"}, "mm.0.weight"},
        {{.flatten = "v.blk.1.attn_qkv.weight"}, "v.blk.1.attn_qkv.weight"},
        {{.drop_tensor = "v.blk.1.attn_qkv.weight"}, "v.blk.1.attn_q.weight"},
        {{.flatten = "v.position_embd.weight"}, "v.position_embd.weight"},
        {{.drop_tensor = "v.position_embd.weight"}, "v.position_embd.weight"},
        {{.drop_tensor = "v.patch_embd.bias"}, "v.patch_embd.bias"},
        {{.bool_key = "clip.use_gelu", .bool_value = false}, "clip.use_gelu"},
        {{.drop_key = "clip.use_gelu"}, "clip.use_gelu"},
    };
    char path[512];
    vision_temp_path(path, sizeof path, "qwen3vl", "spoiled");
    vision_check_refusals(vision_fixture("qwen3vl-mmproj.gguf"), path, cases, sizeof cases / sizeof cases[0]);
}

/* A text model whose deepstack layers do not match the projector's, or that has as many as
 * layers, is refused; an image of the wrong width or grid is refused by the context; a GPU
 * is not needed to see the deepstack rows reach the layers (a zeroed deepstack part changes
 * the logits). */
static void test_text_refusals(void **state)
{
    (void)state;
    corral_error err = {0};
    char path[512];
    vision_temp_path(path, sizeof path, "qwen3vl", "text");
    corral_mmproj *mm = corral_mmproj_load(vision_fixture("qwen3vl-mmproj.gguf"), &err);
    assert_non_null(mm);
    vision_write_variant(vision_fixture("qwen3vl-text.gguf"), path,
                         &(vision_variant){.drop_key = "qwen3vl.n_deepstack_layers"});
    corral_model *m = corral_model_load(path, &err);
    assert_non_null(m);
    assert_false(corral_mmproj_fits(mm, m, &err));
    printf("refused: %s\n", err.message);
    assert_non_null(strstr(err.message, "deepstack"));
    corral_model_free(m);
    remove(path);

    m = corral_model_load(vision_fixture("qwen3vl-text.gguf"), &err);
    assert_non_null(m);
    corral_image_embd embd;
    vision_encode_png(mm, vision_fixture("qwen3vl-wide.png"), 32, 24, &embd);
    corral_context_params params;
    corral_context_params_init(&params);
    params.n_ctx = 64;
    params.kv_type = CORRAL_KV_F32;
    corral_context *ctx = corral_context_create(m, &params, &err);
    assert_non_null(ctx);
    corral_image_embd wrong = embd;
    wrong.n_embd = 32; /* the merger's row alone */
    assert_false(corral_decode_image(ctx, 0, &wrong, &err));
    assert_non_null(strstr(err.message, "96 values"));
    wrong = embd;
    wrong.nx = 3; /* 3 x 3 for 12 tokens */
    assert_false(corral_decode_image(ctx, 0, &wrong, &err));
    assert_int_equal(corral_seq_length(ctx, 0), 0);

    /* the deepstack rows matter: zeroing them moves the image's last logits */
    assert_true(corral_decode_image(ctx, 0, &embd, &err));
    float with[307];
    memcpy(with, corral_get_logits(ctx, embd.n_tokens - 1), sizeof with);
    corral_seq_truncate(ctx, 0, 0);
    for (size_t t = 0; t < embd.n_tokens; t++)
        memset(embd.data + t * 96 + 32, 0, 64 * sizeof(float));
    assert_true(corral_decode_image(ctx, 0, &embd, &err));
    float moved = 0.0f;
    for (size_t i = 0; i < 307; i++)
        moved = fmaxf(moved, fabsf(corral_get_logits(ctx, embd.n_tokens - 1)[i] - with[i]));
    printf("zeroed deepstack rows move the logits by %.3g\n", moved);
    assert_true(moved > 1e-2f);
    corral_context_free(ctx);
    corral_model_free(m);
    corral_image_embd_free(&embd);

    /* as many deepstack layers as layers: no layer would be left to read them out */
    vision_write_variant(vision_fixture("qwen3vl-text.gguf"), path,
                         &(vision_variant){.u32_key = "qwen3vl.n_deepstack_layers",
                                           .u32_value = 3});
    assert_null(corral_model_load(path, &err));
    printf("refused: %s\n", err.message);
    assert_non_null(strstr(err.message, "3 deepstack layers"));
    remove(path);
    corral_mmproj_free(mm);
}

/*
 * On a Vulkan device (lavapipe where there is no GPU): a context made for images keeps the
 * two deepstack layers on the CPU and the third goes to the device, with llama.cpp's logits
 * and greedy ids; one made without that holds every layer there and refuses an image by name,
 * decoding nothing. Skipped where no device is usable.
 */
static void test_gpu_keeps_deepstack_layers(void **state)
{
    (void)state;
    setenv("CORRAL_VULKAN_ALLOW_CPU", "1", 0);
    corral_error err = {0};
    corral_model *m = corral_model_load(vision_fixture("qwen3vl-text.gguf"), &err);
    assert_non_null(m);
    corral_context_params params;
    corral_context_params_init(&params);
    params.n_ctx = 64;
    params.kv_type = CORRAL_KV_F32;
    params.n_gpu_layers = -1;
    corral_context *ctx = corral_context_create(m, &params, &err);
    assert_non_null(ctx);
    if (corral_context_gpu_layers(ctx) == 0) {
        corral_context_free(ctx);
        corral_model_free(m);
        skip();
    }
    assert_int_equal(corral_context_gpu_layers(ctx), 3);
    corral_mmproj *mm = corral_mmproj_load(vision_fixture("qwen3vl-mmproj.gguf"), &err);
    assert_non_null(mm);
    corral_image_embd embd;
    vision_encode_png(mm, vision_fixture("qwen3vl-wide.png"), 32, 24, &embd);
    assert_false(corral_decode_image(ctx, 0, &embd, &err));
    printf("refused: %s\n", err.message);
    assert_non_null(strstr(err.message, "deepstack"));
    assert_int_equal(corral_seq_length(ctx, 0), 0);
    corral_context_free(ctx);

    params.images = true;
    ctx = corral_context_create(m, &params, &err);
    assert_non_null(ctx);
    assert_int_equal(corral_context_gpu_layers(ctx), 1);
    corral_context_free(ctx);
    char *ref = file_fixture_read(vision_fixture("qwen3vl.wide.ref.txt"), NULL);
    vision_prompt prompt;
    prompt.n_before = chunk_ids(ref, 0, prompt.before);
    prompt.n_after = chunk_ids(ref, 2, prompt.after);
    params = text_params(-1);
    vision_check_text(m, &params, &prompt, &embd, ref, vision_fixture("qwen3vl.wide.logits.txt"),
                      LOGIT_TOLERANCE, N_GREEDY, "qwen3vl from ours, the last layer on the device");
    free(ref);
    corral_image_embd_free(&embd);
    corral_mmproj_free(mm);
    corral_model_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_square),
        cmocka_unit_test(test_wide),
        cmocka_unit_test(test_projector_refusals),
        cmocka_unit_test(test_text_refusals),
        cmocka_unit_test(test_gpu_keeps_deepstack_layers),
        cmocka_unit_test(test_single_file),
        cmocka_unit_test(test_single_file_refusals),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    corral_gpu_release(); /* the driver's objects freed before LeakSanitizer looks */
    return failed;
}

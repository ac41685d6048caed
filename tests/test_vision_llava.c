/*
 * LLaVA's "mlp" projector against llama.cpp's multimodal library (vision/README): tiny LLaVA
 * 1.5 and 1.6 projectors over one tiny llama text model, and moondream's shape of it (a
 * SigLIP tower at 378 pixels in 14-pixel patches) over the phi2 fixture. The PNGs go through Corral's own
 * decoding and preprocessing (images already at the projector's size, so that no resize rule
 * is involved where the reference's differs), the tower must give the reference's embeddings,
 * and the prompt around them its last logits and 16 greedy tokens. The padding and slicing
 * rules are checked on their own against the resize llama.cpp ec98e2002 (ollama's) uses, and
 * hostile projector files are refused with a message.
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
#include "image/image.h"
#include "image/preprocess.h"
#include "image/projector_preprocess.h"
#include "vision_check.h"
#include "vision_ref_fixture.h"

/* The references come from a machine whose ggml sums in 8 lanes (AVX2), Corral always in
 * ggml's 16-lane (AVX-512) order; the last-bit differences that leaves now and then move a
 * value across an fp16 rounding boundary of the GELU tables, a step of up to ~1e-3 that the
 * next layers carry (vision/README). Most values stay within EMBD_TOLERANCE; a few percent
 * may take such a step. */
#define EMBD_TOLERANCE 1e-4f
#define EMBD_FLIP_TOLERANCE 3e-3f
#define EMBD_FLIP_PERCENT 5
#define LOGIT_TOLERANCE 1e-3f
#define N_GREEDY 16
#define PROMPT_BEFORE "USER: "
#define PROMPT_AFTER "\nWhat is this? ASSISTANT:"

static corral_mmproj *load_mmproj(const char *name)
{
    corral_error err = {0};
    corral_mmproj *mm = corral_mmproj_load(vision_fixture(name), &err);
    if (!mm)
        fail_msg("%s", err.message);
    return mm;
}

/* The image file as the projector's preprocessing makes it. */
static image_pixels *preprocessed(const corral_mmproj *mm, const char *image)
{
    corral_error err = {0};
    image_rgb *rgb = image_decode_file(vision_fixture(image), 1 << 20, NULL, &err);
    if (!rgb)
        fail_msg("%s", err.message);
    corral_image_params params;
    corral_mmproj_image_params(mm, &params);
    image_preprocess pre = image_preprocess_from_params(&params);
    image_pixels *pixels = image_preprocess_run(&pre, rgb, &err);
    if (!pixels)
        fail_msg("%s", err.message);
    image_rgb_free(rgb);
    return pixels;
}

/* Encode image through mm and compare with the reference embeddings file. */
static void check_embeddings(const corral_mmproj *mm, const char *image, const char *embd_file,
                             corral_image_embd *embd)
{
    corral_error err = {0};
    image_pixels *pixels = preprocessed(mm, image);
    size_t counted = corral_mmproj_image_tokens(mm, pixels->nx, pixels->ny);
    if (!corral_mmproj_encode(mm, pixels->data, pixels->nx, pixels->ny, 2, embd, &err))
        fail_msg("%s", err.message);
    assert_int_equal(embd->n_tokens, counted);
    float *want = vision_read_embd(vision_fixture(embd_file), embd->n_tokens, embd->n_embd);
    vision_check_embd(embd_file, embd->data, want, embd->n_tokens, embd->n_embd,
                      &(vision_tolerance){.max = EMBD_FLIP_TOLERANCE, .near = EMBD_TOLERANCE,
                                          .near_percent = EMBD_FLIP_PERCENT});
    free(want);
    image_pixels_free(pixels);
}

/* The prompt's text chunks (with the projector's image marks, empty for llava) must be the
 * reference's ids; then the prompt with the image, through text_model (a vision fixture's
 * path) in a context of n_ctx, gives its last logits and greedy tokens. */
static void check_text_with(const corral_mmproj *mm, const char *text_model, uint32_t n_ctx,
                            const char *ref_file, const char *logits_file,
                            const corral_image_embd *embd)
{
    char *ref = file_fixture_read(vision_fixture(ref_file), NULL);
    corral_model *m = vision_load_text(vision_fixture(text_model), mm);
    vision_prompt prompt;
    vision_prompt_ids(&prompt, m, mm, PROMPT_BEFORE, PROMPT_AFTER, ref, 2);

    corral_context_params params;
    vision_context_params(&params, n_ctx);
    corral_context *ctx = decode_around_image(m, &params, prompt.before, prompt.n_before, embd,
                                              prompt.after, prompt.n_after);
    int32_t n_past[1];
    assert_int_equal(ints_of(line_of(ref, "n_past_after_prompt "), n_past, 1), 1);
    assert_int_equal(corral_seq_length(ctx, 0), n_past[0]);
    vision_check_logits(ctx, prompt.n_after - 1, corral_model_n_vocab(m), ref,
                        vision_fixture(logits_file), LOGIT_TOLERANCE, N_GREEDY, logits_file);
    corral_context_free(ctx);
    corral_model_free(m);
    free(ref);
}

/* check_text_with over the LLaVA fixtures' llama text model. */
static void check_text(const corral_mmproj *mm, const char *ref_file, const char *logits_file,
                       const corral_image_embd *embd)
{
    check_text_with(mm, "llava-text.gguf", 160, ref_file, logits_file, embd);
}

/* LLaVA 1.5: quick-GELU tower with a class embedding and a pre-norm, states before the last
 * block, no post-norm. */
static void test_llava15_square(void **state)
{
    (void)state;
    corral_mmproj *mm = load_mmproj("llava15-mmproj.gguf");
    assert_string_equal(corral_mmproj_projector(mm), "mlp");
    corral_image_embd embd;
    check_embeddings(mm, "llava-square.png", "llava15.square.embd.f32", &embd);
    check_text(mm, "llava15.square.ref.txt", "llava15.square.logits.txt", &embd);
    corral_image_embd_free(&embd);
    corral_mmproj_free(mm);
}

/* LLaVA 1.6 on an image no larger than its square: the overview alone (GELU tower with a
 * patch bias and a post-norm). */
static void test_llava16_square(void **state)
{
    (void)state;
    corral_mmproj *mm = load_mmproj("llava16-mmproj.gguf");
    corral_image_embd embd;
    check_embeddings(mm, "llava-square.png", "llava16.square.embd.f32", &embd);
    assert_int_equal(embd.n_tokens, 64);
    check_text(mm, "llava16.square.ref.txt", "llava16.square.logits.txt", &embd);
    corral_image_embd_free(&embd);
    corral_mmproj_free(mm);
}

/* LLaVA 1.6 on a 64 x 32 image: its overview, then the two 32 x 32 slices of the 64 x 32
 * pinpoint, 192 tokens in that order. */
static void test_llava16_wide(void **state)
{
    (void)state;
    corral_mmproj *mm = load_mmproj("llava16-mmproj.gguf");
    corral_image_embd embd;
    check_embeddings(mm, "llava-wide.png", "llava16.wide.embd.f32", &embd);
    assert_int_equal(embd.n_tokens, 192);
    corral_image_embd_free(&embd);
    corral_mmproj_free(mm);
}

/* LLaVA-Next as granite-vision has it: a SigLIP-like tower (no class embedding, no pre-norm,
 * a post-norm), feature layers 2, 0, 1 listed out of order and taken in order, side by side
 * into mm.0: the states before the first block, after it, and after the last with the
 * post-norm. */
static void test_llava_feature_layers(void **state)
{
    (void)state;
    corral_mmproj *mm = load_mmproj("llava-next-mmproj.gguf");
    corral_image_embd embd;
    check_embeddings(mm, "llava-square.png", "llava-next.square.embd.f32", &embd);
    check_text(mm, "llava-next.square.ref.txt", "llava-next.square.logits.txt", &embd);
    corral_image_embd_free(&embd);
    corral_mmproj_free(mm);
}

/* moondream (ollama's `moondream`, phi2 text): the "mlp" projector over a SigLIP tower,
 * whose file has no class embedding and no pre-norm, a patch bias, a post-norm and GELU,
 * mean and std 0.5, a 378-pixel square in 14-pixel patches: 27 x 27 = 729 tokens, the states
 * before the last block (llama.cpp's default), straight into a phi2 prompt with no marks. */
static void test_moondream_square(void **state)
{
    (void)state;
    corral_mmproj *mm = load_mmproj("moondream-mmproj.gguf");
    assert_string_equal(corral_mmproj_projector(mm), "mlp");
    corral_image_params params;
    corral_mmproj_image_params(mm, &params);
    assert_int_equal(params.image_size, 378);
    assert_int_equal(params.patch_size, 14);
    assert_string_equal(corral_mmproj_image_begin(mm), "");
    assert_string_equal(corral_mmproj_image_end(mm), "");
    corral_image_embd embd;
    check_embeddings(mm, "moondream-square.png", "moondream.square.embd.f32", &embd);
    assert_int_equal(embd.n_tokens, 729);
    check_text_with(mm, "../arch/phi2.gguf", 1024, "moondream.square.ref.txt",
                    "moondream.square.logits.txt", &embd);
    corral_image_embd_free(&embd);
    corral_mmproj_free(mm);
}

static float normalised(const corral_image_params *params, uint8_t v, int c)
{
    return ((float)v / 255.0f - params->mean[c]) / params->std[c];
}

/* The rows [y0, y0 + h) and columns [x0, x0 + w) of pixels (stride nx) are img normalised. */
static void assert_region(const corral_image_params *params, const image_pixels *pixels,
                          uint32_t x0, uint32_t y0, const image_rgb *img)
{
    for (uint32_t y = 0; y < img->height; y++)
        for (uint32_t x = 0; x < img->width; x++)
            for (int c = 0; c < 3; c++) {
                float got = pixels->data[((size_t)(y0 + y) * pixels->nx + x0 + x) * 3 + c];
                float want = normalised(params, img->pixels[((size_t)y * img->width + x) * 3 + c], c);
                if (got != want)
                    fail_msg("pixel (%u, %u) channel %d: %g, expected %g", x0 + x, y0 + y, c,
                             got, want);
            }
}

/* LLaVA 1.5 pads a 45 x 20 image to the square with its mean colour (122, 116, 104): the
 * image resized to 32 x ceil(20 * 32 / 45) = 32 x 15 by the reference's bilinear rule,
 * centred from row (32 - 15) / 2 = 8. */
static void test_llava15_padding(void **state)
{
    (void)state;
    corral_error err = {0};
    corral_mmproj *mm = load_mmproj("llava15-mmproj.gguf");
    corral_image_params params;
    corral_mmproj_image_params(mm, &params);
    assert_int_equal(params.resize, CORRAL_IMAGE_LETTERBOX);
    image_pixels *pixels = preprocessed(mm, "llava-odd.png");
    assert_int_equal(pixels->nx, 32);
    assert_int_equal(pixels->ny, 32);
    image_rgb *src = image_decode_file(vision_fixture("llava-odd.png"), 1 << 20, NULL, &err);
    assert_non_null(src);
    image_rgb *scaled = image_resize_bilinear(src, 32, 15, &err);
    assert_non_null(scaled);
    assert_region(&params, pixels, 0, 8, scaled);
    image_rgb *pad = image_rgb_create(32, 9, &err);
    assert_non_null(pad);
    for (size_t i = 0; i < 32 * 9; i++)
        memcpy(pad->pixels + 3 * i, (const uint8_t[3]){122, 116, 104}, 3);
    assert_region(&params, pixels, 0, 23, pad); /* the 32 - 8 - 15 rows below */
    pad->height = 8;
    assert_region(&params, pixels, 0, 0, pad);
    image_rgb_free(pad);
    image_rgb_free(scaled);
    image_rgb_free(src);
    image_pixels_free(pixels);
    corral_mmproj_free(mm);
}

/* LLaVA 1.6's column for the 64 x 32 image: the overview is the image stretched to 32 x 32
 * by ec98e2002's bilinear rule (llava-wide-overview.png, written by an independent
 * implementation of it), then the pinpoint 64 x 32 (all of the image, no waste) cut into
 * its left and right squares, which are the image's own pixels. */
static void test_llava16_slicing(void **state)
{
    (void)state;
    corral_error err = {0};
    corral_mmproj *mm = load_mmproj("llava16-mmproj.gguf");
    corral_image_params params;
    corral_mmproj_image_params(mm, &params);
    assert_int_equal(params.resize, CORRAL_IMAGE_ANYRES);
    assert_int_equal(params.n_pinpoints, 3);
    image_pixels *pixels = preprocessed(mm, "llava-wide.png");
    assert_int_equal(pixels->nx, 32);
    assert_int_equal(pixels->ny, 96);
    image_rgb *overview =
        image_decode_file(vision_fixture("llava-wide-overview.png"), 1 << 20, NULL, &err);
    image_rgb *src = image_decode_file(vision_fixture("llava-wide.png"), 1 << 20, NULL, &err);
    assert_non_null(overview);
    assert_non_null(src);
    assert_region(&params, pixels, 0, 0, overview);
    image_rgb *half = image_rgb_create(32, 32, &err);
    assert_non_null(half);
    for (uint32_t side = 0; side < 2; side++) {
        for (uint32_t y = 0; y < 32; y++)
            memcpy(half->pixels + (size_t)y * 32 * 3, src->pixels + ((size_t)y * 64 + side * 32) * 3,
                   32 * 3);
        assert_region(&params, pixels, 0, 32 + 32 * side, half);
    }
    image_pixels_free(pixels);

    /* taller than wide: the 32 x 64 pinpoint keeps it all, letterboxed in it on black */
    image_rgb *tall = image_rgb_create(20, 45, &err);
    assert_non_null(tall);
    memset(tall->pixels, 200, (size_t)20 * 45 * 3);
    image_preprocess pre = image_preprocess_from_params(&params);
    uint32_t nx, ny;
    assert_true(image_preprocess_size(&pre, 20, 45, &nx, &ny, &err));
    assert_int_equal(nx, 32);
    assert_int_equal(ny, 96);
    pixels = image_preprocess_run(&pre, tall, &err);
    assert_non_null(pixels);
    /* 20 x 45 into 32 x 64: scale min(1.6, 1.42) = 1.42, 29 x 64 at column 1 */
    assert_true(pixels->data[(32 * 32 + 0) * 3] == normalised(&params, 0, 0));
    assert_true(pixels->data[(32 * 32 + 1) * 3] == normalised(&params, 200, 0));
    assert_true(pixels->data[(32 * 32 + 31) * 3] == normalised(&params, 0, 0));
    image_pixels_free(pixels);
    /* a hair-thin image keeps nothing at any pinpoint (truncated sizes): the least waste, the
     * first of equals, 32 x 64; still sliced, not refused */
    image_rgb *thin = image_rgb_create(200, 1, &err);
    assert_non_null(thin);
    memset(thin->pixels, 90, (size_t)200 * 3);
    assert_true(image_preprocess_size(&pre, 200, 1, &nx, &ny, &err));
    assert_int_equal(ny, 96);
    pixels = image_preprocess_run(&pre, thin, &err);
    assert_non_null(pixels);
    image_pixels_free(pixels);
    image_rgb_free(thin);
    image_rgb_free(tall);
    image_rgb_free(half);
    image_rgb_free(overview);
    image_rgb_free(src);
    corral_mmproj_free(mm);
}

/* Projector files with a tensor missing or misshaped, or with pinpoints or feature layers
 * that make no sense, are refused with a message naming what is wrong. */
static void test_llava_refusals(void **state)
{
    (void)state;
    static const int32_t odd[] = {32, 64, 64};
    static const int32_t not_grid[] = {48, 32};
    static const int32_t huge[] = {32 * 64, 32 * 64};
    static const int32_t negative[] = {-32, 32};
    static const int32_t deep[] = {1, 4};
    static const int32_t below[] = {-1};
    static const char pinpoints[] = "clip.vision.image_grid_pinpoints",
                      feature_layer[] = "clip.vision.feature_layer";
    static const vision_refusal cases[] = {
        {{.drop_tensor = "v.blk.1.attn_k.weight"}, "v.blk.1.attn_k.weight"},
        {{.drop_tensor = "v.position_embd.weight"}, "v.position_embd.weight"},
        {{.flatten = "v.position_embd.weight"}, "v.position_embd.weight"},
        {{.flatten = "v.blk.0.ffn_up.weight"}, "v.blk.0.ffn_up.weight"},
        {{.drop_tensor = "mm.0.weight"}, "mm.0.weight"},
        {{.drop_tensor = "mm.0.bias"}, "mm.0.bias"},
        {{.flatten = "mm.2.weight"}, "mm.2.weight"},
        {{.flatten = "v.patch_embd.weight"}, "v.patch_embd.weight"},
        {{.array_key = pinpoints, .array = odd, .n_array = 3}, "pinpoints"},
        {{.array_key = pinpoints, .array = not_grid, .n_array = 2}, "48 x 32"},
        {{.array_key = pinpoints, .array = huge, .n_array = 2}, "patches"},
        {{.array_key = pinpoints, .array = negative, .n_array = 2}, "-32 x 32"},
        {{.array_key = feature_layer, .array = deep, .n_array = 2},
         "feature_layer 4 is not within 0..3"},
        {{.array_key = feature_layer, .array = below, .n_array = 1}, "feature_layer -1"},
    };
    char path[512];
    vision_temp_path(path, sizeof path, "llava", "spoiled");
    vision_check_refusals(vision_fixture("llava15-mmproj.gguf"), path, cases, sizeof cases / sizeof cases[0]);
}

/* A file without clip.projector_type (LLaVA's early conversions) is an "mlp" projector; one
 * whose feature layers are set takes those layers' states side by side, and mm.0 must be
 * that wide. Pixels of a size the projector does not take are refused. */
static void test_llava_variants(void **state)
{
    (void)state;
    char path[512];
    vision_temp_path(path, sizeof path, "llava", "variant");
    corral_error err = {0};
    vision_write_variant(vision_fixture("llava15-mmproj.gguf"), path,
                         &(vision_variant){.drop_key = "clip.projector_type"});
    corral_mmproj *mm = vision_load_mmproj(path, "mlp");
    corral_mmproj_free(mm);

    /* two feature layers: the states are 64 wide, mm.0 takes 32 */
    static const int32_t two[] = {1, 2};
    vision_write_variant(vision_fixture("llava15-mmproj.gguf"), path,
                         &(vision_variant){.array_key = "clip.vision.feature_layer", .array = two,
                                           .n_array = 2});
    assert_null(corral_mmproj_load(path, &err));
    assert_non_null(strstr(err.message, "mm.0.weight"));
    /* one feature layer, the last block's output: 32 wide, taken */
    static const int32_t last[] = {3, 3};
    vision_write_variant(vision_fixture("llava15-mmproj.gguf"), path,
                         &(vision_variant){.array_key = "clip.vision.feature_layer", .array = last,
                                           .n_array = 2});
    mm = corral_mmproj_load(path, &err);
    if (!mm)
        fail_msg("%s", err.message);
    float pixels[32 * 64 * 3] = {0};
    corral_image_embd embd;
    assert_true(corral_mmproj_encode(mm, pixels, 32, 32, 1, &embd, &err));
    assert_int_equal(embd.n_tokens, 64);
    corral_image_embd_free(&embd);
    /* 1.5 takes one square only; other sizes are refused before any work */
    assert_false(corral_mmproj_encode(mm, pixels, 32, 64, 1, &embd, &err));
    assert_false(corral_mmproj_encode(mm, pixels, 64, 32, 1, &embd, &err));
    assert_int_equal(corral_mmproj_image_tokens(mm, 32, 64), 0);
    corral_mmproj_free(mm);
    remove(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_llava15_square),  cmocka_unit_test(test_llava16_square),
        cmocka_unit_test(test_llava16_wide),    cmocka_unit_test(test_llava_feature_layers),
        cmocka_unit_test(test_llava15_padding),
        cmocka_unit_test(test_llava16_slicing), cmocka_unit_test(test_llava_refusals),
        cmocka_unit_test(test_llava_variants),  cmocka_unit_test(test_moondream_square),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

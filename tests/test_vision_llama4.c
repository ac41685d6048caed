/*
 * llama4 with the llama4 projector against llama.cpp d32676d77's multimodal library, on
 * vision/llama4-* (tools/archref/llama4vis.py): a 16 x 16 image is the square alone; a
 * 32 x 16 one two tiles cut as they are and an overview resized with corners aligned; a
 * 40 x 24 one letterboxed (bicubic) at the 48 x 32 pinpoint into six tiles, then the
 * overview. For each, our column of squares (the tiled ones equal to llama4vis.py's float32
 * re-doing of llama.cpp's resize steps), our embeddings of it (the tiles' tokens, then
 * the overview's), the prompt's ids around the image (<|image_start|> before it,
 * <|image_end|> after), the last logits and 16 greedy tokens must be the reference's.
 * Pixels and files the projector cannot take are refused with a message. The same pair
 * written as ollama's single GGUF (its names and keys) gives the same embeddings exactly.
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
#include "image/image.h"
#include "image/preprocess.h"
#include "image/projector_preprocess.h"
#include "ollama_name_fixture.h"
#include "reference_fixture.h"
#include "vision_check.h"
#include "vision_png_fixture.h"
#include "vision_ref_fixture.h"

/* The reference's ggml sums in AVX2's 8 lanes, Corral's tower in ggml's 16-lane (AVX-512)
 * order at every level; now and then the last-bit differences that leaves move a value
 * across an fp16 rounding boundary of the GELU table (the tower's MLP, and the adapter's two
 * GELUs), a step the next products carry: measured 1.2e-4 (wide) and 4.7e-4 (odd), in the
 * tokens holding values within a few ulps of such a boundary, with the preprocessed pixels
 * identical to llama.cpp's (vision/README). The rest stays within EMBD_TOLERANCE. */
#define EMBD_TOLERANCE 1e-4f
#define EMBD_FLIP_TOLERANCE 1e-3f
#define EMBD_FLIP_PERCENT 3
#define LOGIT_TOLERANCE 1e-3f
#define N_GREEDY 16

#define MMPROJ "vision/llama4-mmproj.gguf"
#define TEXT "vision/llama4-text.gguf"

/* The image tokens a ref.txt's chunks hold, summed; *last: the text chunk after them. */
static size_t ref_image_tokens(const char *ref, int *last)
{
    size_t total = 0;
    int k = 1;
    for (;; k++) {
        char key[48];
        snprintf(key, sizeof key, "\nchunk %d image n_tokens ", k);
        const char *at = strstr(ref, key);
        if (!at)
            break;
        int32_t n = 0;
        assert_int_equal(ints_of(at + strlen(key), &n, 1), 1);
        total += (size_t)n;
    }
    *last = k;
    return total;
}

/* One image of the fixtures from its PNG to the greedy tokens, through mmproj (the pair's
 * file or ollama's) and the text model at text. */
static void check_image(const char *mmproj_path, const char *text_path, const char *image,
                        uint32_t squares)
{
    /* fixture()'s paths are reused after four calls: keep these */
    char mmproj[512], text[512], name[96];
    snprintf(mmproj, sizeof mmproj, "%s", mmproj_path);
    snprintf(text, sizeof text, "%s", text_path);
    snprintf(name, sizeof name, "vision/llama4.%s.ref.txt", image);
    char *ref = file_fixture_read(fixture(name), NULL);
    corral_error err = {0};
    corral_mmproj *mm = vision_load_mmproj(mmproj, "llama4");

    snprintf(name, sizeof name, "vision/llama4-%s.png", image);
    image_rgb *rgb = vision_decode_png(fixture(name));
    image_preprocess pre = vision_preprocessing(mm);
    image_pixels *pixels = image_preprocess_run(&pre, rgb, &err);
    if (!pixels)
        fail_msg("%s", err.message);
    assert_int_equal(pixels->nx, 16);
    assert_int_equal(pixels->ny, 16 * squares);
    size_t size;
    if (squares > 1) { /* the tiles and the overview, as llama.cpp's steps make them */
        snprintf(name, sizeof name, "vision/llama4.%s.pixels.f32", image);
        float *want_pixels = file_fixture_read(fixture(name), &size);
        assert_int_equal(size, (size_t)16 * 16 * squares * 3 * sizeof(float));
        assert_memory_equal(pixels->data, want_pixels, size);
        free(want_pixels);
    }

    corral_image_embd embd;
    assert_true(corral_mmproj_encode(mm, pixels->data, pixels->nx, pixels->ny, 2, &embd, &err));
    int last = 0;
    assert_int_equal(embd.n_tokens, ref_image_tokens(ref, &last));
    assert_int_equal(corral_mmproj_image_tokens(mm, pixels->nx, pixels->ny), embd.n_tokens);
    snprintf(name, sizeof name, "vision/llama4.%s.embd.f32", image);
    float *want = vision_read_embd(fixture(name), embd.n_tokens, embd.n_embd);
    vision_check_embd(image, embd.data, want, embd.n_tokens, embd.n_embd,
                      &(vision_tolerance){.max = EMBD_FLIP_TOLERANCE, .near = EMBD_TOLERANCE,
                                          .near_percent = EMBD_FLIP_PERCENT});

    /* the prompt's text around the image, each mark one control token */
    corral_model *m = vision_load_text(text, mm);
    vision_prompt prompt;
    vision_prompt_ids(&prompt, m, mm, "Look: ", " What is it?", ref, last);
    assert_int_equal(prompt.before[prompt.n_before - 1], 304);
    assert_int_equal(prompt.after[0], 305);

    /* last logits and 16 greedy tokens, from the reference's rows and from ours */
    snprintf(name, sizeof name, "vision/llama4.%s.logits.txt", image);
    char logits[512];
    snprintf(logits, sizeof logits, "%s", fixture(name));
    corral_context_params params;
    vision_context_params(&params, 128);
    vision_check_texts(m, &params, &prompt, &embd, want, ref, logits, LOGIT_TOLERANCE, N_GREEDY,
                       image);

    corral_model_free(m);
    corral_image_embd_free(&embd);
    corral_mmproj_free(mm);
    free(want);
    image_pixels_free(pixels);
    image_rgb_free(rgb);
    free(ref);
}

static void test_square(void **state)
{
    (void)state;
    check_image(fixture(MMPROJ), fixture(TEXT), "square", 1);
}

static void test_wide(void **state)
{
    (void)state;
    check_image(fixture(MMPROJ), fixture(TEXT), "wide", 3);
}

static void test_odd(void **state)
{
    (void)state;
    check_image(fixture(MMPROJ), fixture(TEXT), "odd", 7);
}

/* llama.cpp's pinpoints: tiles only past the square, at most 3 x 3 of them, a thin image in
 * the grid that keeps most of it, and one too thin to keep anything in the smallest grid. */
static void test_tile_counts(void **state)
{
    (void)state;
    corral_error err = {0};
    corral_mmproj *mm = corral_mmproj_load(fixture(MMPROJ), &err);
    assert_non_null(mm);
    image_preprocess pre = vision_preprocessing(mm);
    static const uint32_t cases[][3] = {
        {16, 16, 1}, {8, 12, 1}, {17, 16, 3}, {32, 32, 5}, {48, 48, 10}, {4000, 3000, 10},
        {160, 16, 4}, {16, 160, 4}, {1, 4000, 3}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint32_t nx, ny;
        assert_true(image_preprocess_size(&pre, cases[i][0], cases[i][1], &nx, &ny, &err));
        assert_int_equal(nx, 16);
        assert_int_equal(ny, 16 * cases[i][2]);
        assert_int_equal(corral_mmproj_image_tokens(mm, nx, ny), 4 * cases[i][2]);
    }
    corral_mmproj_free(mm);
}

/* Pixels that are not a column of squares, and projector files that would be computed
 * wrongly (no GELU MLP, a pixel shuffle that does not fit the grid, heads that do not split
 * into rotary pairs, a position table of the wrong length) are refused, naming the cause. */
static void test_refusals(void **state)
{
    (void)state;
    corral_error err = {0};
    corral_mmproj *mm = corral_mmproj_load(fixture(MMPROJ), &err);
    assert_non_null(mm);
    static float pixels[3 * 16 * 16 * 11];
    corral_image_embd embd;
    static const uint32_t bad[][2] = {{16, 24}, {32, 16}, {16, 16 * 11}, {16, 0}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_false(corral_mmproj_encode(mm, pixels, bad[i][0], bad[i][1], 1, &embd, &err));
        assert_int_equal(corral_mmproj_image_tokens(mm, bad[i][0], bad[i][1]), 0);
    }
    assert_false(corral_mmproj_encode(mm, pixels, 16, 24, 1, &embd, &err));
    assert_non_null(strstr(err.message, "column of up to 10 squares"));
    corral_mmproj_free(mm);

    char path[512];
    vision_temp_path(path, sizeof path, "llama4", NULL);
    static const char scale[] = "clip.vision.projector.scale_factor",
                      image_size[] = "clip.vision.image_size";
    static const vision_refusal cases[] = {
        {{.bool_key = "clip.use_gelu", .bool_value = false}, "GELU"},
        {{.u32_key = scale, .u32_value = 0}, "inconsistent"},
        {{.u32_key = scale, .u32_value = 3}, "pixel shuffle"},
        {{.u32_key = scale, .u32_value = 4000000}, "scale_factor"},
        {{.u32_key = "clip.vision.attention.head_count", .u32_value = 16}, "rotary"},
        {{.u32_key = image_size, .u32_value = 24}, "v.position_embd.weight"},
        {{.u32_key = image_size, .u32_value = 18}, "patches"},
    };
    vision_check_refusals(fixture(MMPROJ), path, cases, sizeof cases / sizeof cases[0]);
}

/*
 * The pair as ollama's converter writes Llama 4: one llama4 GGUF, the tower's sizes under
 * llama4.vision.*, its epsilon as vision.layer_norm_epsilon, the shuffle as
 * vision.pixel_shuffle_ratio (0.5), ollama's names; no normalisation keys (0.5 is taken).
 * extra_key (NULL: none): an f32 key put in place of the one of that name, or added; left out
 * when extra_value is NaN.
 */
static void write_single(const char *dst, const char *extra_key, float extra_value)
{
    corral_error err = {0};
    gguf_file *text = gguf_open(fixture(TEXT), &err), *mm = gguf_open(fixture(MMPROJ), &err);
    gguf_writer *w = gguf_writer_create();
    if (!text || !mm || !w)
        fail_msg("%s", err.message);
    bool ok = true;
    for (size_t i = 0; ok && i < gguf_n_kv(text); i++)
        ok = gguf_writer_copy_kv(w, gguf_kv_at(text, i), &err);
    static const char *const sizes[][2] = {
        {"clip.vision.block_count", "llama4.vision.block_count"},
        {"clip.vision.embedding_length", "llama4.vision.embedding_length"},
        {"clip.vision.feed_forward_length", "llama4.vision.feed_forward_length"},
        {"clip.vision.attention.head_count", "llama4.vision.attention.head_count"},
        {"clip.vision.image_size", "llama4.vision.image_size"},
        {"clip.vision.patch_size", "llama4.vision.patch_size"},
    };
    uint32_t v = 0;
    for (size_t i = 0; ok && i < sizeof sizes / sizeof sizes[0]; i++)
        ok = gguf_get_u32(mm, sizes[i][0], &v, &err) &&
             gguf_writer_add_u32(w, sizes[i][1], v, &err);
    float eps = 0.0f;
    ok = ok && gguf_get_f32(mm, "clip.vision.attention.layer_norm_epsilon", &eps, &err);
    const struct { const char *key; float value; } floats[] = {
        {"llama4.vision.layer_norm_epsilon", eps},
        {"llama4.vision.pixel_shuffle_ratio", 0.5f},
        {"llama4.vision.rope.freq_base", 10000.0f},
        {extra_key, extra_value}};
    for (size_t i = 0; ok && i < sizeof floats / sizeof floats[0]; i++) {
        bool replaced = i < 3 && extra_key && strcmp(floats[i].key, extra_key) == 0;
        if (floats[i].key && !replaced && !(i == 3 && isnan(extra_value)))
            ok = gguf_writer_add_f32(w, floats[i].key, floats[i].value, &err);
    }
    for (int pass = 0; ok && pass < 2; pass++) {
        for (size_t i = 0; ok && i < gguf_n_tensors(text); i++) {
            const gguf_tensor *t = gguf_tensor_at(text, i);
            ok = gguf_write_fixture_copy(w, pass, t->name, t, &err);
        }
        for (size_t i = 0; ok && i < gguf_n_tensors(mm); i++) {
            const gguf_tensor *t = gguf_tensor_at(mm, i);
            char buf[128];
            const char *name = ollama_name_fixture_llama4(t->name, buf, sizeof buf);
            ok = gguf_write_fixture_copy(w, pass, name, t, &err);
        }
        if (pass == 0)
            ok = ok && gguf_writer_begin(w, dst, &err);
    }
    gguf_write_fixture_finish(w, ok, dst, &err);
    gguf_close(mm);
    gguf_close(text);
}

/* The pair as ollama's single file: a model with vision that is its own projector, whose
 * embeddings are the pair's to the bit, so the reference's to the tolerance, and whose text
 * gives the reference's greedy tokens. */
static void test_single_file(void **state)
{
    (void)state;
    char path[512];
    vision_temp_path(path, sizeof path, "llama4", NULL);
    write_single(path, NULL, 0.0f);
    corral_error err = {0};
    corral_model_file *file = corral_model_file_open(path, &err);
    assert_non_null(file);
    assert_true(corral_model_file_has_vision(file));
    corral_model_file_close(file);
    vision_check_same_tower(fixture(MMPROJ), path, 16, 48);

    check_image(path, path, "wide", 3);
    remove(path);
}

/* ollama's file with a pixel shuffle that does not fit its grid is refused, naming the cause;
 * one without the tower's epsilon (llama.cpp requires it) names the key. */
static void test_single_file_refusals(void **state)
{
    (void)state;
    char path[512];
    vision_temp_path(path, sizeof path, "llama4", NULL);
    static const struct {
        const char *key;
        float value;
        const char *message;
    } cases[] = {
        {"llama4.vision.pixel_shuffle_ratio", 0.3f, "pixel shuffle"},
        {"llama4.vision.pixel_shuffle_ratio", 1e-30f, "pixel shuffle"},
        {"llama4.vision.layer_norm_epsilon", NAN, "llama4.vision.layer_norm_epsilon"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        corral_error err = {0};
        write_single(path, cases[i].key, cases[i].value);
        corral_mmproj *mm = corral_mmproj_load(path, &err);
        assert_null(mm);
        printf("refused: %s\n", err.message);
        assert_non_null(strstr(err.message, cases[i].message));
    }
    remove(path);
}

/* --write-single OUT: the integration test's copy of ollama's layout (write_single). */
static const char *single_out;

static void write_single_out(void **state)
{
    (void)state;
    write_single(single_out, NULL, 0.0f);
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--write-single") == 0) {
        single_out = argv[2];
        const struct CMUnitTest write[] = {cmocka_unit_test(write_single_out)};
        return cmocka_run_group_tests(write, NULL, NULL);
    }
    if (argc != 1) {
        fprintf(stderr, "usage: %s [--write-single OUT.gguf]\n", argv[0]);
        return 2;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_square),
        cmocka_unit_test(test_wide),
        cmocka_unit_test(test_odd),
        cmocka_unit_test(test_tile_counts),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_single_file),
        cmocka_unit_test(test_single_file_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

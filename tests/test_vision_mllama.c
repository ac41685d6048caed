/*
 * mllama (Llama 3.2 Vision) with an image, against the pure-Python reference of
 * tools/archref/mllamavis.py (transformers' semantics; llama.cpp has no mllama), on
 * vision/mllama*: ollama's single-file layout of a tiny model, the text model's tensors as
 * arch/mllama.gguf's and a tower of 8 x 8 tiles beside them. A 16 x 8 picture is two tiles of
 * four, cut as they are: its canvas, the tower's projected states of all four tiles, the
 * logits of every prompt position (text before the image, its token, text after it) and 16
 * greedy steps must be the reference's. Its encoding stops at the block its cancel asks it to.
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
#include "counting_cancel.h"
#include "file_fixture.h"
#include "image/preprocess.h"
#include "reference_fixture.h"
#include "vision_png_fixture.h"

#define MODEL "vision/mllama.gguf"
#define REF "vision/mllama.wide.ref.txt"
#define N_GREEDY 16
/* the Python reference computes in doubles, the engine in floats: states within 1.1e-6 and
 * logits within 3e-6 of it at every level (vision/README.md) */
#define STATE_TOLERANCE 1e-5f
#define LOGIT_TOLERANCE 2e-5f

enum { TEXT_EMBD = 64, ROWS = 4 * 17, ATTENDED = 2 * 17 };

/* The n ints after "key " in text (a count first, which must be n). */
static void ints_after(const char *text, const char *key, int32_t *out, size_t n)
{
    char header[64];
    snprintf(header, sizeof header, "\n%s ", key);
    const char *p = strstr(text, header);
    if (!p)
        fail_msg("no '%s' in the reference", key);
    char *end;
    p += strlen(header);
    if (strtol(p, &end, 10) != (long)n)
        fail_msg("'%s' holds another count than %zu", key, n);
    for (size_t i = 0; i < n; i++) {
        p = end;
        out[i] = (int32_t)strtol(p, &end, 10);
        assert_true(end != p);
    }
}

static corral_context *context_for(corral_model *m)
{
    corral_context_params p;
    corral_context_params_init(&p);
    p.n_ctx = 64;
    p.n_batch = 16;
    p.kv_type = CORRAL_KV_F32;
    p.n_threads = 2;
    p.images = true;
    corral_error err;
    corral_context *ctx = corral_context_create(m, &p, &err);
    if (!ctx)
        fail_msg("%s", err.message);
    return ctx;
}

static void decode(corral_context *ctx, const int32_t *ids, size_t n)
{
    bool all[16];
    for (size_t i = 0; i < n; i++)
        all[i] = true;
    corral_batch batch = {.n_tokens = n, .tokens = ids, .logits = all};
    corral_error err;
    if (!corral_decode(ctx, &batch, &err))
        fail_msg("decode: %s", err.message);
}

static void expect_logits(const float *got, const float *want, size_t V, const char *where)
{
    float diff = max_abs_diff(got, want, V);
    if (!(diff <= LOGIT_TOLERANCE))
        fail_msg("%s: logits differ from the reference by %g", where, diff);
}

/*
 * The prompt through the text model with the image's states as given, then 16 greedy steps:
 * every position's logits and every greedy id the reference's.
 */
static void check_text(const corral_image_embd *image)
{
    char *ref = file_fixture_read(fixture(REF), NULL);
    corral_error err;
    corral_model *m = corral_model_load(fixture(MODEL), &err);
    if (!m)
        fail_msg("%s", err.message);
    size_t V = corral_model_n_vocab(m);
    int32_t ids[7], greedy[N_GREEDY], image_at[1];
    ints_after(ref, "input_ids", ids, 7);
    ints_after(ref, "greedy_ids", greedy, N_GREEDY);
    ints_after(ref, "image_at", image_at, 1);
    assert_int_equal(ids[image_at[0]], (int32_t)V); /* the image token: past the vocabulary */
    float *want = malloc(7 * V * sizeof *want), *steps = malloc(N_GREEDY * V * sizeof *steps);
    read_matrix(ref, "all_logits", want, 7, V);
    read_matrix(ref, "greedy_step_logits", steps, N_GREEDY, V);

    corral_context *ctx = context_for(m);
    size_t at = (size_t)image_at[0];
    decode(ctx, ids, at);
    for (size_t t = 0; t < at; t++)
        expect_logits(corral_get_logits(ctx, t), want + t * V, V, "text before the image");
    if (!corral_decode_image(ctx, 0, image, &err))
        fail_msg("decode_image: %s", err.message);
    expect_logits(corral_get_logits(ctx, 0), want + at * V, V, "the image token");
    decode(ctx, ids + at + 1, 7 - at - 1);
    for (size_t t = at + 1; t < 7; t++)
        expect_logits(corral_get_logits(ctx, t - at - 1), want + t * V, V, "text after it");
    const float *logits = corral_get_logits(ctx, 7 - at - 2);
    for (size_t s = 0; s < N_GREEDY; s++) {
        expect_logits(logits, steps + s * V, V, "a greedy step");
        int32_t id = argmax(logits, V);
        if (id != greedy[s])
            fail_msg("greedy id %zu is %d, the reference's %d", s, id, greedy[s]);
        if (s + 1 < N_GREEDY) {
            corral_batch one = {.n_tokens = 1, .tokens = &id};
            assert_true(corral_decode(ctx, &one, &err));
            logits = corral_get_logits(ctx, 0);
        }
    }
    corral_context_free(ctx);
    corral_model_free(m);
    free(want);
    free(steps);
    free(ref);
}

/* The reference's projected states, as the text model takes them: one token of all rows. */
static void test_text_takes_the_reference_states(void **state)
{
    (void)state;
    size_t size;
    float *rows = file_fixture_read(fixture("vision/mllama.wide.embd.f32"), &size);
    assert_int_equal(size, (size_t)ROWS * TEXT_EMBD * sizeof(float));
    corral_image_embd image = {.n_tokens = 1, .nx = 1, .ny = 1, .n_embd = ROWS * TEXT_EMBD,
                               .data = rows, .n_attended = ATTENDED};
    check_text(&image);
    free(rows);
}

/* The logits of the last of ids (n of them) decoded into ctx after what it holds. */
static void last_logits(corral_context *ctx, const int32_t *ids, size_t n, float *out, size_t V)
{
    decode(ctx, ids, n);
    memcpy(out, corral_get_logits(ctx, n - 1), V * sizeof *out);
}

/*
 * The image's state goes with its token: cut back to after the image, the text after it
 * decodes again to the same logits; cut back to before it, to a text-only model's logits
 * (the cross-attention layers skipped), and likewise once a shift has discarded the image.
 */
static void test_image_goes_with_its_token(void **state)
{
    (void)state;
    size_t size;
    float *rows = file_fixture_read(fixture("vision/mllama.wide.embd.f32"), &size);
    corral_image_embd image = {.n_tokens = 1, .nx = 1, .ny = 1, .n_embd = ROWS * TEXT_EMBD,
                               .data = rows, .n_attended = ATTENDED};
    corral_error err;
    corral_model *m = corral_model_load(fixture(MODEL), &err);
    if (!m)
        fail_msg("%s", err.message);
    size_t V = corral_model_n_vocab(m);
    const int32_t before[] = {51, 257}, after[] = {300, 285, 262, 298};
    float *with = malloc(V * sizeof *with), *without = malloc(V * sizeof *without);
    float *got = malloc(V * sizeof *got);
    corral_context *text = context_for(m);
    decode(text, before, 2);
    last_logits(text, after, 4, without, V);
    corral_context_free(text);

    corral_context *ctx = context_for(m);
    decode(ctx, before, 2);
    assert_true(corral_decode_image(ctx, 0, &image, &err));
    last_logits(ctx, after, 4, with, V);
    assert_true(max_abs_diff(with, without, V) > 0.1f); /* the image counts */
    corral_seq_truncate(ctx, 0, 3); /* the image token kept */
    last_logits(ctx, after, 4, got, V);
    assert_true(max_abs_diff(got, with, V) == 0.0f);
    corral_seq_truncate(ctx, 0, 2); /* the image token gone */
    last_logits(ctx, after, 4, got, V);
    assert_true(max_abs_diff(got, without, V) == 0.0f);

    /* a shift that discards the image token: what follows reads no image */
    corral_seq_truncate(ctx, 0, 0);
    decode(ctx, before, 2);
    assert_true(corral_decode_image(ctx, 0, &image, &err));
    assert_true(corral_seq_shift(ctx, 0, 2, 1, &err));
    corral_context *plain = context_for(m);
    decode(plain, before, 2);
    float *shifted = malloc(V * sizeof *shifted);
    last_logits(plain, after, 4, shifted, V);
    last_logits(ctx, after, 4, got, V);
    assert_true(max_abs_diff(got, shifted, V) == 0.0f);
    corral_context_free(plain);
    corral_context_free(ctx);
    corral_model_free(m);
    free(with);
    free(without);
    free(got);
    free(shifted);
    free(rows);
}

static corral_mmproj *load_tower(void)
{
    corral_error err;
    corral_mmproj *mm = corral_mmproj_load(fixture(MODEL), &err);
    if (!mm)
        fail_msg("%s", err.message);
    return mm;
}

/* The picture's canvas: its two tiles as they are, normalised as the reference does. */
static void test_preprocessing_makes_the_canvas(void **state)
{
    (void)state;
    corral_mmproj *mm = load_tower();
    image_rgb *rgb = vision_decode_png(fixture("vision/mllama-wide.png"));
    image_preprocess pre = vision_preprocessing(mm);
    corral_error err;
    image_pixels *pixels = image_preprocess_run(&pre, rgb, &err);
    if (!pixels)
        fail_msg("%s", err.message);
    assert_int_equal(pixels->nx, 16);
    assert_int_equal(pixels->ny, 8);
    size_t size;
    float *want = file_fixture_read(fixture("vision/mllama.wide.pixels.f32"), &size);
    assert_int_equal(size, (size_t)16 * 8 * 3 * sizeof(float));
    float diff = max_abs_diff(pixels->data, want, 16 * 8 * 3);
    if (!(diff <= 1e-6f))
        fail_msg("the canvas differs from the reference's by %g", diff);
    free(want);
    image_pixels_free(pixels);
    image_rgb_free(rgb);
    corral_mmproj_free(mm);
}

/*
 * Canvases of other sizes, as transformers sizes them for 8-pixel tiles, at most 4: a wider
 * picture takes the smallest canvas it fits unscaled (20 x 8: three tiles, padded); a small
 * one is scaled up to one tile (4 x 4); a long one down to four tiles in a row (100 x 10:
 * 32 x 3, black below).
 */
static void test_canvas_sizes(void **state)
{
    (void)state;
    corral_mmproj *mm = load_tower();
    image_preprocess pre = vision_preprocessing(mm);
    const uint32_t cases[][4] = {{20, 8, 24, 8}, {4, 4, 8, 8}, {100, 10, 32, 8}, {8, 30, 8, 32}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint32_t nx, ny;
        corral_error err;
        assert_true(image_preprocess_size(&pre, cases[i][0], cases[i][1], &nx, &ny, &err));
        if (nx != cases[i][2] || ny != cases[i][3])
            fail_msg("%u x %u: canvas %u x %u, want %u x %u", cases[i][0], cases[i][1], nx, ny,
                     cases[i][2], cases[i][3]);
        assert_int_equal(corral_mmproj_image_tokens(mm, nx, ny), 1);
    }
    /* the long picture fills its canvas' first 3 rows; the rest is black */
    image_rgb *rgb = vision_decode_png(fixture("vision/mllama-wide.png"));
    image_rgb *long_one = image_rgb_create(100, 10, NULL);
    assert_non_null(long_one);
    for (size_t i = 0; i < 100 * 10 * 3; i++)
        long_one->pixels[i] = rgb->pixels[i % (16 * 8 * 3)];
    corral_error err;
    image_pixels *pixels = image_preprocess_run(&pre, long_one, &err);
    assert_non_null(pixels);
    float black = (0.0f - 0.48145466f) / 0.26862954f;
    for (uint32_t y = 0; y < 8; y++)
        assert_true((pixels->data[(y * 32 + 5) * 3] == black) == (y >= 3));
    assert_int_equal(corral_mmproj_image_tokens(mm, 40, 8), 0); /* five tiles: too many */
    image_pixels_free(pixels);
    image_rgb_free(long_one);
    image_rgb_free(rgb);
    corral_mmproj_free(mm);
}

/* The tower's states of the reference's canvas, then the text model on them. */
static void test_tower_and_text_match_the_reference(void **state)
{
    (void)state;
    corral_mmproj *mm = load_tower();
    size_t size;
    float *pixels = file_fixture_read(fixture("vision/mllama.wide.pixels.f32"), &size);
    corral_image_embd embd;
    corral_error err;
    if (!corral_mmproj_encode(mm, pixels, 16, 8, 2, &embd, &err))
        fail_msg("%s", err.message);
    assert_int_equal(embd.n_tokens, 1);
    assert_int_equal(embd.n_embd, ROWS * TEXT_EMBD);
    assert_int_equal(embd.n_attended, ATTENDED);
    float *want = file_fixture_read(fixture("vision/mllama.wide.embd.f32"), &size);
    assert_int_equal(size, (size_t)ROWS * TEXT_EMBD * sizeof(float));
    float diff = max_abs_diff(embd.data, want, ROWS * TEXT_EMBD);
    if (!(diff <= STATE_TOLERANCE))
        fail_msg("the tower's states differ from the reference's by %g", diff);
    check_text(&embd);
    free(want);
    free(pixels);
    corral_image_embd_free(&embd);
    corral_mmproj_free(mm);
}

/* The encoding asks its cancel before each of its blocks, the local ones and the global ones
 * after them, and stops at the first or the last when told to. */
static void test_cancel_between_blocks(void **state)
{
    (void)state;
    corral_mmproj *mm = load_tower();
    size_t size;
    float *pixels = file_fixture_read(fixture("vision/mllama.wide.pixels.f32"), &size);
    counting_cancel count = {0};
    corral_cancel cancel = {.requested = count_check, .user = &count};
    corral_image_embd embd;
    corral_error err;
    assert_true(corral_mmproj_encode_cancellable(mm, pixels, 16, 8, 1, &cancel, &embd, &err));
    corral_image_embd_free(&embd);
    int blocks = count.checks;
    assert_true(blocks > 1);
    int stops[] = {1, blocks};
    for (size_t i = 0; i < 2; i++) {
        count = (counting_cancel){.stop_at = stops[i]};
        assert_false(
            corral_mmproj_encode_cancellable(mm, pixels, 16, 8, 1, &cancel, &embd, &err));
        assert_string_equal(err.message, CORRAL_CANCELLED);
        assert_int_equal(count.checks, stops[i]);
    }
    free(pixels);
    corral_mmproj_free(mm);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_text_takes_the_reference_states),
        cmocka_unit_test(test_image_goes_with_its_token),
        cmocka_unit_test(test_preprocessing_makes_the_canvas),
        cmocka_unit_test(test_canvas_sizes),
        cmocka_unit_test(test_tower_and_text_match_the_reference),
        cmocka_unit_test(test_cancel_between_blocks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * mistral3 with the pixtral projector (Mistral Small 3.1's tower and patch merger) against
 * llama.cpp d32676d77's multimodal library, on vision/mistral3-* (tools/archref/
 * mistral3vis.py): a 40 x 24 image, which the preprocessing keeps as it is, becomes 5 x 3
 * merged tokens and two [IMG_BREAK] rows; our pixels of its PNG, our embeddings of them, the
 * prompt's ids around the image ([IMG_END] after it), the last logits and 16 greedy tokens
 * must be the reference's. Sizes that need a resize give the reference's token counts; files
 * and pixels the projector cannot take are refused with a message.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "corral/engine.h"
#include "file_fixture.h"
#include "gguf.h"
#include "image/image.h"
#include "image/preprocess.h"
#include "image/projector_preprocess.h"
#include "key_variant_fixture.h"
#include "reference_fixture.h"

#define EMBD_TOLERANCE 1e-4f
#define LOGIT_TOLERANCE 1e-3f
#define N_GREEDY 16
#define MAX_IDS 64

#define MMPROJ "vision/mistral3-mmproj.gguf"
#define TEXT "vision/mistral3-text.gguf"

/* The line after `key` in a reference text, or fail. */
static const char *line_of(const char *text, const char *key)
{
    const char *p = strstr(text, key);
    if (!p)
        fail_msg("'%s' not found", key);
    return p + strlen(key);
}

static size_t ints_of(const char *p, int32_t *out, size_t max)
{
    size_t n = 0;
    while (*p && *p != '\n' && n < max) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p)
            break;
        out[n++] = (int32_t)v;
        p = end;
    }
    return n;
}

static size_t tokenize(const corral_vocab *vocab, const char *text, bool add_special,
                       int32_t *ids)
{
    size_t n;
    corral_error err = {0};
    assert_true(corral_tokenize(vocab, text, strlen(text), add_special, true, ids, MAX_IDS, &n,
                                &err));
    assert_true(n <= MAX_IDS);
    return n;
}

static image_rgb *decode_png(const char *name)
{
    size_t size;
    uint8_t *bytes = file_fixture_read(fixture(name), &size);
    corral_error err = {0};
    image_rgb *rgb = image_decode(bytes, size, NULL, &err);
    free(bytes);
    if (!rgb)
        fail_msg("%s: %s", name, err.message);
    return rgb;
}

static image_preprocess preprocessing(const corral_mmproj *mm)
{
    corral_image_params params;
    corral_mmproj_image_params(mm, &params);
    return image_preprocess_from_params(&params);
}

/* ids0, the image, ids2 through the text model: last logits and 16 greedy tokens. */
static void check_text(const corral_model *m, const char *ref, const int32_t *ids0, size_t n0,
                       const corral_image_embd *embd, const int32_t *ids2, size_t n2,
                       const char *what)
{
    corral_error err = {0};
    corral_context_params params;
    corral_context_params_init(&params);
    params.n_ctx = 128;
    params.n_threads = 2;
    params.kv_type = CORRAL_KV_F32;
    corral_context *ctx = corral_context_create(m, &params, &err);
    assert_non_null(ctx);
    corral_batch batch = {.n_tokens = n0, .tokens = ids0};
    assert_true(corral_decode(ctx, &batch, &err));
    assert_true(corral_decode_image(ctx, 0, embd, &err));
    batch = (corral_batch){.n_tokens = n2, .tokens = ids2};
    assert_true(corral_decode(ctx, &batch, &err));
    size_t n_vocab = corral_model_n_vocab(m);
    const float *logits = corral_get_logits(ctx, n2 - 1);
    assert_non_null(logits);
    char *text = file_fixture_read(fixture("vision/mistral3.wide.logits.txt"), NULL), *p = text;
    float worst = 0.0f;
    for (size_t i = 0; i < n_vocab; i++) {
        char *end;
        float v = strtof(p, &end);
        assert_true(end != p);
        p = end;
        worst = fmaxf(worst, fabsf(logits[i] - v));
    }
    free(text);
    printf("%s: last logits max diff %.3g\n", what, worst);
    assert_true(worst <= LOGIT_TOLERANCE);
    int32_t greedy[N_GREEDY], want[N_GREEDY];
    assert_int_equal(ints_of(line_of(ref, "\ngreedy_ids "), want, N_GREEDY), N_GREEDY);
    for (int i = 0; i < N_GREEDY; i++) {
        greedy[i] = argmax(logits, n_vocab);
        batch = (corral_batch){.n_tokens = 1, .tokens = &greedy[i]};
        assert_true(corral_decode(ctx, &batch, &err));
        logits = corral_get_logits(ctx, 0);
    }
    assert_memory_equal(greedy, want, sizeof greedy);
    corral_context_free(ctx);
}

/* The wide image from its PNG to the greedy tokens. */
static void test_wide(void **state)
{
    (void)state;
    char *ref = file_fixture_read(fixture("vision/mistral3.wide.ref.txt"), NULL);
    corral_error err = {0};
    corral_mmproj *mm = corral_mmproj_load(fixture(MMPROJ), &err);
    if (!mm)
        fail_msg("%s", err.message);
    assert_string_equal(corral_mmproj_projector(mm), "pixtral");

    /* our pixels of the PNG: no resize, llama.cpp's normalisation */
    image_rgb *rgb = decode_png("vision/mistral3-wide.png");
    image_preprocess pre = preprocessing(mm);
    image_pixels *pixels = image_preprocess_run(&pre, rgb, &err);
    assert_non_null(pixels);
    assert_int_equal(pixels->nx, 40);
    assert_int_equal(pixels->ny, 24);
    size_t size;
    float *want_pixels = file_fixture_read(fixture("vision/mistral3.wide.pixels.f32"), &size);
    assert_int_equal(size, 40 * 24 * 3 * sizeof(float));
    assert_memory_equal(pixels->data, want_pixels, size);

    /* the tower, merger and projector, with the breaks between rows */
    corral_image_embd embd;
    assert_true(corral_mmproj_encode(mm, pixels->data, 40, 24, 2, &embd, &err));
    int32_t count = 0;
    assert_int_equal(ints_of(line_of(ref, "image n_tokens "), &count, 1), 1);
    assert_int_equal(embd.n_tokens, (size_t)count);
    assert_int_equal(corral_mmproj_image_tokens(mm, 40, 24), embd.n_tokens);
    float *want = file_fixture_read(fixture("vision/mistral3.wide.embd.f32"), &size);
    assert_int_equal(size, embd.n_tokens * embd.n_embd * sizeof(float));
    float worst = 0.0f;
    for (size_t i = 0; i < embd.n_tokens * embd.n_embd; i++)
        worst = fmaxf(worst, fabsf(embd.data[i] - want[i]));
    printf("embeddings (%zu x %u) max diff %.3g\n", embd.n_tokens, embd.n_embd, worst);
    assert_true(worst <= EMBD_TOLERANCE);

    /* the prompt's text around the image: nothing before it, [IMG_END] after */
    corral_model *m = corral_model_load(fixture(TEXT), &err);
    if (!m)
        fail_msg("%s", err.message);
    assert_true(corral_mmproj_fits(mm, m, &err));
    const corral_vocab *vocab = corral_model_vocab(m);
    char text[256];
    int32_t ids0[MAX_IDS], ids2[MAX_IDS], want_ids[MAX_IDS];
    snprintf(text, sizeof text, "[INST]Look: %s", corral_mmproj_image_begin(mm));
    size_t n0 = tokenize(vocab, text, true, ids0);
    const char *chunk = strchr(line_of(ref, "\nchunk 0 text "), ':') + 1;
    assert_int_equal(n0, ints_of(chunk, want_ids, MAX_IDS));
    assert_memory_equal(ids0, want_ids, n0 * sizeof *ids0);
    snprintf(text, sizeof text, "%s What is it?[/INST]", corral_mmproj_image_end(mm));
    size_t n2 = tokenize(vocab, text, false, ids2);
    chunk = strchr(line_of(ref, "\nchunk 2 text "), ':') + 1;
    assert_int_equal(n2, ints_of(chunk, want_ids, MAX_IDS));
    assert_memory_equal(ids2, want_ids, n2 * sizeof *ids2);
    assert_int_equal(ids2[0], 306); /* [IMG_END], one token */

    corral_image_embd theirs = embd;
    theirs.data = want;
    check_text(m, ref, ids0, n0, &theirs, ids2, n2, "from the reference's embeddings");
    check_text(m, ref, ids0, n0, &embd, ids2, n2, "from ours");

    corral_model_free(m);
    corral_image_embd_free(&embd);
    corral_mmproj_free(mm);
    free(want);
    free(want_pixels);
    image_pixels_free(pixels);
    image_rgb_free(rgb);
    free(ref);
}

/* Sizes llama.cpp resizes: the rounded sides (50 x 30 to 48 x 32) and the minimum of 8 merged
 * tokens (12 x 12 to 24 x 24) give its token counts, breaks included. */
static void test_resize_counts(void **state)
{
    (void)state;
    corral_error err = {0};
    corral_mmproj *mm = corral_mmproj_load(fixture(MMPROJ), &err);
    assert_non_null(mm);
    char *counts = file_fixture_read(fixture("vision/mistral3.resize.txt"), NULL);
    static const struct {
        const char *name, *png;
        uint32_t nx, ny;
    } cases[] = {{"odd n_tokens ", "vision/mistral3-odd.png", 48, 32},
                 {"tiny n_tokens ", "vision/mistral3-tiny.png", 24, 24}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        image_rgb *rgb = decode_png(cases[i].png);
        image_preprocess pre = preprocessing(mm);
        uint32_t nx, ny;
        assert_true(image_preprocess_size(&pre, rgb->width, rgb->height, &nx, &ny, &err));
        assert_int_equal(nx, cases[i].nx);
        assert_int_equal(ny, cases[i].ny);
        int32_t want = 0;
        assert_int_equal(ints_of(line_of(counts, cases[i].name), &want, 1), 1);
        assert_int_equal(corral_mmproj_image_tokens(mm, nx, ny), (size_t)want);
        image_rgb_free(rgb);
    }
    free(counts);
    corral_mmproj_free(mm);
}

static void temp_path(char *path, size_t size)
{
    const char *dir = getenv("TMPDIR");
    snprintf(path, size, "%s/corral-test-pixtral-%ld.gguf", dir && *dir ? dir : "/tmp",
             (long)getpid());
}

/* Pixels of a size the merge does not divide, and projector files that would be computed
 * wrongly (a GELU MLP, a merge size without its merger or out of range, heads that do not
 * split into rotary pairs) are refused with a message naming the cause. */
static void test_refusals(void **state)
{
    (void)state;
    corral_error err = {0};
    corral_mmproj *mm = corral_mmproj_load(fixture(MMPROJ), &err);
    assert_non_null(mm);
    static float pixels[3 * 48 * 32];
    corral_image_embd embd;
    assert_false(corral_mmproj_encode(mm, pixels, 44, 24, 1, &embd, &err));
    assert_non_null(strstr(err.message, "multiples of 8"));
    assert_int_equal(corral_mmproj_image_tokens(mm, 44, 24), 0);
    assert_true(corral_mmproj_encode(mm, pixels, 8, 8, 1, &embd, &err));
    assert_int_equal(embd.n_tokens, 1); /* one row: no break */
    corral_image_embd_free(&embd);
    corral_mmproj_free(mm);

    char path[512];
    temp_path(path, sizeof path);
    bool no = false;
    static const struct {
        const char *key;
        enum gguf_type type;
        uint32_t value;
        const char *message;
    } cases[] = {
        {"clip.use_silu", GGUF_TYPE_BOOL, 0, "GELU"},
        {"clip.vision.spatial_merge_size", GGUF_TYPE_UINT32, 1, "mm.patch_merger.weight"},
        {"clip.vision.spatial_merge_size", GGUF_TYPE_UINT32, 0, "spatial_merge_size"},
        {"clip.vision.spatial_merge_size", GGUF_TYPE_UINT32, 1000000, "spatial_merge_size"},
        {"clip.vision.attention.head_count", GGUF_TYPE_UINT32, 16, "rotary"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (cases[i].type == GGUF_TYPE_BOOL)
            write_key_variant(MMPROJ, path, cases[i].key, GGUF_TYPE_BOOL, &no);
        else
            write_u32_variant(MMPROJ, path, cases[i].key, cases[i].value);
        assert_null(corral_mmproj_load(path, &err));
        printf("refused: %s\n", err.message);
        assert_non_null(strstr(err.message, cases[i].message));
    }
    remove(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_wide),
        cmocka_unit_test(test_resize_counts),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

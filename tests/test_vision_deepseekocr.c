/*
 * deepseek2-ocr with the deepseekocr projector (DeepSeek-OCR) against llama.cpp d32676d77's
 * multimodal library, on vision/deepseekocr-* (tools/archref/dsocrvisgen.py) and the text
 * model arch/deepseek2-ocr: a 48 x 32 image is the global view alone (fitted onto grey
 * 1024 x 683 and padded), a 660 x 330 one two 640-pixel tiles side by side, then the global
 * view. For each, our pixels (which matched the reference's, F16-rounded in its im2col, bit
 * for bit when the fixture was made: vision/README), our embeddings (the rows of tiles with a
 * newline after each token row, then the global view's rows with their newlines and the view
 * separator), the text after the image (a newline, then the prompt), the last logits and 16
 * greedy tokens must be the reference's. Grids follow llama.cpp's choice; sizes and files the
 * projector cannot take are refused with a message.
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
#include "vision_ref_fixture.h"

/*
 * SAM's twelve blocks attend globally four times, so the rare GELU-table step that a last-bit
 * difference in a sum (the reference's AVX2 order, ours AVX-512's) sets off in one token
 * reaches every token of the view, and the neck and CLIP carry it on: measured max |diff|
 * 0.040 (small) and 0.071 (wide) in embeddings whose largest values are about 128 and whose
 * RMS is 21, an RMS difference 2e-4 of theirs; a block's output is the reference's bit for
 * bit in all but those tokens (vision/README). Logits from either embeddings stay within
 * 1e-3, and the greedy tokens are the same.
 */
#define EMBD_TOLERANCE 0.15f
#define EMBD_RMS_RATIO 1e-3
#define LOGIT_TOLERANCE 2e-3f
#define N_GREEDY 16
#define MAX_IDS VISION_MAX_IDS
#define TEXT_N_EMBD 64

#define MMPROJ "vision/deepseekocr-mmproj.gguf"
#define TEXT "arch/deepseek2-ocr.gguf"
#define PROMPT "Free OCR."

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

/* FNV-1a over the pixels' float bits. */
static uint64_t pixels_hash(const float *p, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    const uint8_t *b = (const uint8_t *)p;
    for (size_t i = 0; i < n * sizeof *p; i++)
        h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

/* The image tokens a ref.txt's image chunks hold, from chunk 0 on; *text: the chunk after. */
static size_t ref_image_tokens(const char *ref, int *text)
{
    size_t total = 0;
    int k = 0;
    for (;; k++) {
        char key[48];
        snprintf(key, sizeof key, "chunk %d image n_tokens ", k);
        const char *at = strstr(ref, key);
        if (!at)
            break;
        int32_t n = 0;
        assert_int_equal(ints_of(at + strlen(key), &n, 1), 1);
        total += (size_t)n;
    }
    *text = k;
    return total;
}

/* The image, then ids through the text model: last logits and 16 greedy tokens. */
static void check_text(const corral_model *m, const char *ref, const char *logits_path,
                       const corral_image_embd *embd, const int32_t *ids, size_t n,
                       const char *what)
{
    corral_context_params params;
    vision_context_params(&params, 1024);
    corral_error err = {0};
    corral_context *ctx = corral_context_create(m, &params, &err);
    if (!ctx)
        fail_msg("%s", err.message);
    if (!corral_decode_image(ctx, 0, embd, &err))
        fail_msg("%s", err.message);
    corral_batch batch = {.n_tokens = n, .tokens = ids};
    assert_true(corral_decode(ctx, &batch, &err));
    size_t n_vocab = corral_model_n_vocab(m);
    const float *logits = corral_get_logits(ctx, n - 1);
    assert_non_null(logits);
    float worst = logits_file_diff(logits, n_vocab, logits_path);
    printf("%s: last logits max diff %.3g\n", what, worst);
    assert_true(worst <= LOGIT_TOLERANCE);
    check_greedy(ctx, logits, n_vocab, text_after(ref, "\ngreedy_ids "), N_GREEDY);
    corral_context_free(ctx);
}

/* One image of the fixtures from its PNG to the greedy tokens. */
static void check_image(const char *image, uint32_t nx, uint32_t ny, uint64_t hash)
{
    char name[96];
    snprintf(name, sizeof name, "vision/deepseekocr.%s.ref.txt", image);
    char *ref = file_fixture_read(fixture(name), NULL);
    corral_error err = {0};
    corral_mmproj *mm = corral_mmproj_load(fixture(MMPROJ), &err);
    if (!mm)
        fail_msg("%s", err.message);
    assert_string_equal(corral_mmproj_projector(mm), "deepseekocr");

    snprintf(name, sizeof name, "vision/deepseekocr-%s.png", image);
    image_rgb *rgb = decode_png(name);
    image_preprocess pre = preprocessing(mm);
    image_pixels *pixels = image_preprocess_run(&pre, rgb, &err);
    if (!pixels)
        fail_msg("%s", err.message);
    assert_int_equal(pixels->nx, nx);
    assert_int_equal(pixels->ny, ny);
    size_t n_pixels = (nx == 1024 && ny == 1024 ? 0 : (size_t)nx * ny * 3) + 1024 * 1024 * 3;
    uint64_t got = pixels_hash(pixels->data, n_pixels);
    printf("%s: pixels %u x %u (+ the global view), hash %016llx\n", image, nx, ny,
           (unsigned long long)got);
    assert_true(got == hash);

    corral_image_embd embd;
    assert_true(corral_mmproj_encode(mm, pixels->data, pixels->nx, pixels->ny, 2, &embd, &err));
    int text = 0;
    assert_int_equal(embd.n_tokens, ref_image_tokens(ref, &text));
    assert_int_equal(embd.n_embd, TEXT_N_EMBD);
    assert_int_equal(corral_mmproj_image_tokens(mm, pixels->nx, pixels->ny), embd.n_tokens);
    snprintf(name, sizeof name, "vision/deepseekocr.%s.embd.f32", image);
    size_t size;
    float *want = file_fixture_read(fixture(name), &size);
    assert_int_equal(size, embd.n_tokens * embd.n_embd * sizeof(float));
    float worst = 0.0f;
    double diff2 = 0.0, ref2 = 0.0;
    size_t n = embd.n_tokens * embd.n_embd;
    for (size_t i = 0; i < n; i++) {
        float diff = fabsf(embd.data[i] - want[i]);
        worst = fmaxf(worst, diff);
        diff2 += (double)diff * diff;
        ref2 += (double)want[i] * want[i];
    }
    double ratio = sqrt(diff2 / ref2);
    printf("%s: embeddings (%zu x %u) max diff %.3g, RMS diff / RMS %.3g\n", image,
           embd.n_tokens, embd.n_embd, worst, ratio);
    assert_true(worst <= EMBD_TOLERANCE);
    assert_true(ratio <= EMBD_RMS_RATIO);

    /* nothing before the image; a newline after it, then the prompt */
    corral_model *m = corral_model_load(fixture(TEXT), &err);
    if (!m)
        fail_msg("%s", err.message);
    assert_true(corral_mmproj_fits(mm, m, &err));
    assert_string_equal(corral_mmproj_image_begin(mm), "");
    int32_t ids[MAX_IDS], want_ids[MAX_IDS];
    char buf[64];
    snprintf(buf, sizeof buf, "%s" PROMPT, corral_mmproj_image_end(mm));
    size_t n_ids = tokenize(corral_model_vocab(m), buf, false, ids);
    assert_int_equal(n_ids, chunk_ids(ref, text, want_ids));
    assert_memory_equal(ids, want_ids, n_ids * sizeof *ids);

    snprintf(name, sizeof name, "vision/deepseekocr.%s.logits.txt", image);
    corral_image_embd theirs = embd;
    theirs.data = want;
    check_text(m, ref, fixture(name), &theirs, ids, n_ids, "from the reference's");
    check_text(m, ref, fixture(name), &embd, ids, n_ids, "from ours");

    corral_model_free(m);
    corral_image_embd_free(&embd);
    corral_mmproj_free(mm);
    free(want);
    image_pixels_free(pixels);
    image_rgb_free(rgb);
    free(ref);
}

static void test_small_global_view(void **state)
{
    (void)state;
    check_image("small", 1024, 1024, 0x0b628098b09775c5ull);
}

static void test_wide_tiles_then_global_view(void **state)
{
    (void)state;
    check_image("wide", 1280, 640, 0x4e0df003a6d4dcc7ull);
}

/* llama.cpp's grids (2 to 9 tiles of 640, the aspect nearest the image's, the bigger grid on
 * a tie only when the image fills over half of it), and their tokens: per row of tiles
 * 10 token rows of 10 per tile and a newline, then the global view's 16 x 17 + 1. */
static void test_grids(void **state)
{
    (void)state;
    corral_error err = {0};
    corral_mmproj *mm = corral_mmproj_load(fixture(MMPROJ), &err);
    assert_non_null(mm);
    image_preprocess pre = preprocessing(mm);
    static const uint32_t cases[][4] = {
        {640, 640, 0, 0},   {641, 640, 2, 2},    {660, 330, 2, 1},    {1000, 100, 9, 1},
        {100, 1000, 1, 9},  {1920, 1080, 4, 2},  {3000, 200, 9, 1},   {640, 2000, 1, 3},
        {2000, 1500, 3, 2}, {700, 700, 2, 2},    {1280, 1280, 2, 2},  {4000, 3000, 3, 2},
        {641, 1, 9, 1},     {48, 32, 0, 0}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint32_t nx, ny, cols = cases[i][2], rows = cases[i][3];
        assert_true(image_preprocess_size(&pre, cases[i][0], cases[i][1], &nx, &ny, &err));
        assert_int_equal(nx, cols ? 640 * cols : 1024);
        assert_int_equal(ny, cols ? 640 * rows : 1024);
        assert_int_equal(corral_mmproj_image_tokens(mm, nx, ny),
                         rows * (10 * cols + 1) * 10 + 16 * 17 + 1);
    }
    corral_mmproj_free(mm);
}

static void temp_path(char *path, size_t size)
{
    const char *dir = getenv("TMPDIR");
    snprintf(path, size, "%s/corral-test-deepseekocr-%ld.gguf", dir && *dir ? dir : "/tmp",
             (long)getpid());
}

/* Pixels that are neither the global view nor a grid of 2 to 9 tiles, and projector files
 * that would be computed wrongly (SAM heads that do not split its width, no windows, a tile
 * range the wrong way round) or lack a key llama.cpp requires, are refused, naming it. */
static void test_refusals(void **state)
{
    (void)state;
    corral_error err = {0};
    corral_mmproj *mm = corral_mmproj_load(fixture(MMPROJ), &err);
    assert_non_null(mm);
    static float pixels[3 * 640 * 640];
    corral_image_embd embd;
    static const uint32_t bad[][2] = {{640, 640}, {1024, 640}, {6400, 640}, {1280, 1024}, {0, 1}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_false(corral_mmproj_encode(mm, pixels, bad[i][0], bad[i][1], 1, &embd, &err));
        assert_int_equal(corral_mmproj_image_tokens(mm, bad[i][0], bad[i][1]), 0);
    }
    assert_false(corral_mmproj_encode(mm, pixels, 640, 640, 1, &embd, &err));
    assert_non_null(strstr(err.message, "grid of 2 to 9 tiles"));
    corral_mmproj_free(mm);

    char path[512];
    temp_path(path, sizeof path);
    static const struct {
        const char *key;
        enum gguf_type type;
        uint32_t value;
        const char *message;
    } cases[] = {
        {"clip.vision.sam.head_count", GGUF_TYPE_UINT32, 3, "inconsistent SAM encoder"},
        {"clip.vision.window_size", GGUF_TYPE_UINT32, 0, "windows of 0"},
        {"clip.vision.preproc_min_tiles", GGUF_TYPE_UINT32, 10, "10 to 9 tiles"},
        {"clip.vision.sam.block_count", GGUF_TYPE_COUNT, 0, "clip.vision.sam.block_count"},
        {"clip.vision.sam.block_count", GGUF_TYPE_UINT32, 13, "v.sam.blk.12.pre_ln.weight"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        write_key_variant(MMPROJ, path, cases[i].key, cases[i].type, &cases[i].value);
        assert_null(corral_mmproj_load(path, &err));
        printf("refused: %s\n", err.message);
        assert_non_null(strstr(err.message, cases[i].message));
    }
    remove(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_small_global_view),
        cmocka_unit_test(test_wide_tiles_then_global_view),
        cmocka_unit_test(test_grids),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

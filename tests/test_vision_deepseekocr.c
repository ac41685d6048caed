/*
 * deepseek2-ocr with the deepseekocr projector (DeepSeek-OCR) against llama.cpp d32676d77's
 * multimodal library, on vision/deepseekocr-* (tools/archref/dsocrvisgen.py) and the text
 * model arch/deepseek2-ocr: a 48 x 32 image is the global view alone (fitted onto grey
 * 1024 x 683 and padded), a 660 x 330 one two 640-pixel tiles side by side, then the global
 * view (in rows of the grid's width below it, image/views.h). For each, our pixels (which matched the reference's, F16-rounded in its im2col, bit
 * for bit when the fixture was made: vision/README), our embeddings (the rows of tiles with a
 * newline after each token row, then the global view's rows with their newlines and the view
 * separator), the text after the image (a newline, then the prompt), the last logits and 16
 * greedy tokens must be the reference's. Grids follow llama.cpp's choice; sizes and files the
 * projector cannot take are refused with a message. The same pair written as ollama's single
 * deepseekocr GGUF gives the same embeddings exactly.
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
#include "image/preprocess.h"
#include "image/projector_preprocess.h"
#include "reference_fixture.h"
#include "short_fixture.h"
#include "vision_check.h"
#include "vision_png_fixture.h"
#include "vision_ref_fixture.h"

/*
 * SAM's twelve blocks attend globally four times, so the rare GELU-table step that a last-bit
 * difference in a sum (the reference's AVX2 order, ours AVX-512's) sets off in one token
 * reaches every token of the view, and the neck and CLIP carry it on: measured max |diff|
 * 0.029 (small) and 0.089 (wide) in embeddings whose largest values are about 100 and whose
 * RMS is 21, an RMS difference under 3e-4 of theirs; a block's output is the reference's bit
 * for bit in all but those tokens (vision/README). Logits from either embeddings stay within
 * 6e-4, and the greedy tokens are the same.
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
    vision_check_logits(ctx, n - 1, corral_model_n_vocab(m), ref, logits_path, LOGIT_TOLERANCE,
                        N_GREEDY, what);
    corral_context_free(ctx);
}

/* One image of the fixtures from its PNG to the greedy tokens, through mmproj_path (the
 * pair's projector or ollama's file) and the text model at text_path. */
static void check_image(const char *mmproj_path, const char *text_path, const char *image,
                        uint32_t nx, uint32_t ny, uint64_t hash)
{
    /* fixture()'s paths are reused after four calls: keep these */
    char mmproj[512], text_model[512], name[96];
    snprintf(mmproj, sizeof mmproj, "%s", mmproj_path);
    snprintf(text_model, sizeof text_model, "%s", text_path);
    snprintf(name, sizeof name, "vision/deepseekocr.%s.ref.txt", image);
    char *ref = file_fixture_read(fixture(name), NULL);
    corral_error err = {0};
    corral_mmproj *mm = vision_load_mmproj(mmproj, "deepseekocr");

    snprintf(name, sizeof name, "vision/deepseekocr-%s.png", image);
    image_rgb *rgb = vision_decode_png(fixture(name));
    image_preprocess pre = vision_preprocessing(mm);
    image_pixels *pixels = image_preprocess_run(&pre, rgb, &err);
    if (!pixels)
        fail_msg("%s", err.message);
    assert_int_equal(pixels->nx, nx);
    assert_int_equal(pixels->ny, ny);
    uint64_t got = pixels_hash(pixels->data, (size_t)nx * ny * 3);
    printf("%s: pixels %u x %u, hash %016llx\n", image, nx, ny, (unsigned long long)got);
    assert_true(got == hash);

    corral_image_embd embd;
    assert_true(corral_mmproj_encode(mm, pixels->data, pixels->nx, pixels->ny, 2, &embd, &err));
    int text = 0;
    assert_int_equal(embd.n_tokens, ref_image_tokens(ref, &text));
    assert_int_equal(embd.n_embd, TEXT_N_EMBD);
    assert_int_equal(corral_mmproj_image_tokens(mm, pixels->nx, pixels->ny), embd.n_tokens);
    snprintf(name, sizeof name, "vision/deepseekocr.%s.embd.f32", image);
    float *want = vision_read_embd(fixture(name), embd.n_tokens, embd.n_embd);
    vision_check_embd(image, embd.data, want, embd.n_tokens, embd.n_embd,
                      &(vision_tolerance){.max = EMBD_TOLERANCE, .rms_ratio = EMBD_RMS_RATIO});

    /* nothing before the image; a newline after it, then the prompt */
    corral_model *m = vision_load_text(text_model, mm);
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

/* At the scalar level the tower's fixed views (a 1024-pixel global view of 4096 patches, tiles
 * of 640) take about a minute for this file's images: there the small image's case checks the
 * scalar kernels, and the tiled and single-file cases, which run the same kernels on more
 * views, are left to the vector levels. */
static void skip_at_the_scalar_level(void)
{
    const char *level = getenv("CORRAL_CPU");
    if (level && strcmp(level, "scalar") == 0)
        skip();
}

/* The single file's case runs the pair's paths again through another loader: under the
 * sanitizers (short runs, short_fixture.h) its encodings add time and no path. */
static void skip_in_short_runs(void)
{
    if (short_fixture_on())
        skip();
}

static void test_small_global_view(void **state)
{
    (void)state;
    check_image(fixture(MMPROJ), fixture(TEXT), "small", 1024, 1024, 0x0b628098b09775c5ull);
}

static void test_wide_tiles_then_global_view(void **state)
{
    (void)state;
    skip_at_the_scalar_level();
    check_image(fixture(MMPROJ), fixture(TEXT), "wide", 1280, 640 + 820, 0x5baab02620ba1cc7ull);
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
    image_preprocess pre = vision_preprocessing(mm);
    static const uint32_t cases[][4] = {
        {640, 640, 0, 0},   {641, 640, 2, 2},    {660, 330, 2, 1},    {1000, 100, 9, 1},
        {100, 1000, 1, 9},  {1920, 1080, 4, 2},  {3000, 200, 9, 1},   {640, 2000, 1, 3},
        {2000, 1500, 3, 2}, {700, 700, 2, 2},    {1280, 1280, 2, 2},  {4000, 3000, 3, 2},
        {641, 1, 9, 1},     {48, 32, 0, 0}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint32_t nx, ny, cols = cases[i][2], rows = cases[i][3];
        assert_true(image_preprocess_size(&pre, cases[i][0], cases[i][1], &nx, &ny, &err));
        /* the grid, then the global view's 1024 x 1024 pixels in rows of its width */
        assert_int_equal(nx, cols ? 640 * cols : 1024);
        assert_int_equal(ny, cols ? 640 * rows + (1024 * 1024 + nx - 1) / nx : 1024);
        assert_int_equal(corral_mmproj_image_tokens(mm, nx, ny),
                         rows * (10 * cols + 1) * 10 + 16 * 17 + 1);
    }
    corral_mmproj_free(mm);
}

/* tools/archref/testpng.py's picture of width x height, drawn here rather than stored. */
static image_rgb *test_picture(uint32_t width, uint32_t height)
{
    corral_error err = {0};
    image_rgb *rgb = image_rgb_create(width, height, &err);
    assert_non_null(rgb);
    for (uint32_t y = 0; y < height; y++)
        for (uint32_t x = 0; x < width; x++) {
            uint8_t *p = rgb->pixels + ((size_t)y * width + x) * 3;
            p[0] = (uint8_t)(x * 255 / (width > 1 ? width - 1 : 1));
            p[1] = (uint8_t)(y * 255 / (height > 1 ? height - 1 : 1));
            p[2] = (x / 4 + y / 4) % 2 ? 200 : 40;
            if (y == 0)
                p[0] = p[1] = p[2] = 255;
            if (x == 0) {
                p[0] = p[1] = 0;
                p[2] = 255;
            }
        }
    return rgb;
}

/* Images larger than the views, so that Pillow's resampling shrinks them (its filter widened)
 * in both views: 1400 x 700 (2 x 1 tiles, the global view 1024 x 512) and 700 x 1500 (1 x 2
 * tiles, both sides shrunk; the global view 478 x 1024). Their pixels matched llama.cpp's
 * im2col input bit for bit when these hashes were taken (vision/README). */
static void test_shrunk_views_pixels(void **state)
{
    (void)state;
    corral_error err = {0};
    corral_mmproj *mm = corral_mmproj_load(fixture(MMPROJ), &err);
    assert_non_null(mm);
    image_preprocess pre = vision_preprocessing(mm);
    static const struct {
        uint32_t width, height, nx, ny;
        uint64_t hash;
    } cases[] = {{1400, 700, 1280, 640 + 820, 0x1fbef10e0bb21f90ull},
                 {700, 1500, 640, 1280 + 1639, 0x629a821e8e88aa9bull}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        image_rgb *rgb = test_picture(cases[i].width, cases[i].height);
        image_pixels *pixels = image_preprocess_run(&pre, rgb, &err);
        if (!pixels)
            fail_msg("%s", err.message);
        assert_int_equal(pixels->nx, cases[i].nx);
        assert_int_equal(pixels->ny, cases[i].ny);
        uint64_t got = pixels_hash(pixels->data, (size_t)pixels->nx * pixels->ny * 3);
        printf("%u x %u: pixels %u x %u, hash %016llx\n", cases[i].width, cases[i].height,
               pixels->nx, pixels->ny, (unsigned long long)got);
        assert_true(got == cases[i].hash);
        image_pixels_free(pixels);
        image_rgb_free(rgb);
    }
    corral_mmproj_free(mm);
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
    /* a grid without the global view's rows, a 10-tile grid, a grid of 640 x 640 tiles with
     * a row too few below it */
    static const uint32_t bad[][2] = {{640, 640},        {1024, 640}, {6400, 640 + 164},
                                      {1280, 640 + 819}, {0, 1},      {1280, 1280}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_false(corral_mmproj_encode(mm, pixels, bad[i][0], bad[i][1], 1, &embd, &err));
        assert_int_equal(corral_mmproj_image_tokens(mm, bad[i][0], bad[i][1]), 0);
    }
    assert_false(corral_mmproj_encode(mm, pixels, 640, 640, 1, &embd, &err));
    assert_non_null(strstr(err.message, "grid of 2 to 9 tiles"));
    corral_mmproj_free(mm);

    char path[512];
    vision_temp_path(path, sizeof path, "deepseekocr", NULL);
    static const vision_refusal cases[] = {
        {{.u32_key = "clip.vision.sam.head_count", .u32_value = 3}, "inconsistent SAM encoder"},
        {{.u32_key = "clip.vision.window_size", .u32_value = 0}, "windows of 0"},
        {{.u32_key = "clip.vision.preproc_min_tiles", .u32_value = 10}, "10 to 9 tiles"},
        {{.drop_key = "clip.vision.sam.block_count"}, "clip.vision.sam.block_count"},
        {{.u32_key = "clip.vision.sam.block_count", .u32_value = 13},
         "v.sam.blk.12.pre_ln.weight"},
    };
    vision_check_refusals(fixture(MMPROJ), path, cases, sizeof cases / sizeof cases[0]);
}


/* ollama's tensor name for one of the pair's projector tensors (its converter's, as its
 * compatibility layer for llama.cpp undoes them): SAM under "s." with Hugging Face's leaf
 * names, CLIP's blocks and pre-norm under theirs, the projection as mm.layers. */
static const char *ollama_name(const char *name, char *buf, size_t size)
{
    static const char *const whole[][2] = {
        {"v.sam.pos_embd.weight", "s.position_embd"},
        {"v.pre_ln.weight", "v.pre_layrnorm.weight"},
        {"v.pre_ln.bias", "v.pre_layrnorm.bias"},
        {"mm.model.fc.weight", "mm.layers.weight"},
        {"mm.model.fc.bias", "mm.layers.bias"},
        {"v.image_newline", "mm.image_newline"},
        {"v.view_seperator", "mm.view_seperator"},
    };
    static const char *const part[][2] = {
        {".attn.out.", ".attn.proj."},       {".attn.pos_h.weight", ".attn.rel_pos_h"},
        {".attn.pos_w.weight", ".attn.rel_pos_w"}, {".pre_ln.", ".norm1."},
        {".post_ln.", ".norm2."},            {".ln1.", ".layer_norm1."},
        {".ln2.", ".layer_norm2."},          {".attn_qkv.", ".self_attn.qkv_proj."},
        {".attn_out.", ".self_attn.out_proj."}, {".ffn_up.", ".mlp.fc1."},
        {".ffn_down.", ".mlp.fc2."}};
    /* SAM's parts apply under s.blk only, CLIP's under v.blk only */
    static const size_t sam_parts = 5;
    for (size_t i = 0; i < sizeof whole / sizeof whole[0]; i++)
        if (strcmp(name, whole[i][0]) == 0)
            return whole[i][1];
    char tmp[128];
    bool sam = strncmp(name, "v.sam.", 6) == 0;
    snprintf(tmp, sizeof tmp, sam ? "s.%s" : "%s", sam ? name + 6 : name);
    snprintf(buf, size, "%s", tmp);
    for (size_t i = sam ? 0 : sam_parts; i < (sam ? sam_parts : sizeof part / sizeof part[0]);
         i++) {
        const char *at = strstr(tmp, part[i][0]);
        if (at)
            snprintf(buf, size, "%.*s%s%s", (int)(at - tmp), tmp, part[i][1],
                     at + strlen(part[i][0]));
    }
    return buf;
}

/*
 * The pair as ollama's converter writes DeepSeek-OCR: one deepseekocr GGUF, the text model's
 * keys under deepseekocr.* without the norm epsilon, RoPE keys or expert widths; the towers'
 * sizes under deepseekocr.vision.* (heads as vision.head_count) and deepseekocr.sam.*; no
 * window, tile or normalisation keys; ollama's tensor names.
 */
static void write_single(const char *dst)
{
    corral_error err = {0};
    gguf_file *text = gguf_open(fixture(TEXT), &err), *mm = gguf_open(fixture(MMPROJ), &err);
    gguf_writer *w = gguf_writer_create();
    if (!text || !mm || !w)
        fail_msg("%s", err.message);
    static const char *const dropped[] = {
        "attention.layer_norm_rms_epsilon", "rope.freq_base", "rope.dimension_count",
        "expert_feed_forward_length", "expert_shared_count"};
    const char *prefix = "deepseek2-ocr.";
    bool ok = true;
    for (size_t i = 0; ok && i < gguf_n_kv(text); i++) {
        gguf_kv kv = *gguf_kv_at(text, i);
        char key[128];
        bool drop = false;
        if (strncmp(kv.key, prefix, strlen(prefix)) == 0) {
            const char *rest = kv.key + strlen(prefix);
            for (size_t j = 0; j < sizeof dropped / sizeof dropped[0]; j++)
                drop = drop || strcmp(rest, dropped[j]) == 0;
            snprintf(key, sizeof key, "deepseekocr.%s", rest);
            kv.key = key;
        }
        if (strcmp(kv.key, "general.architecture") == 0)
            ok = gguf_writer_add_str(w, kv.key, "deepseekocr", strlen("deepseekocr"), &err);
        else if (!drop)
            ok = gguf_writer_copy_kv(w, &kv, &err);
    }
    static const char *const sizes[][2] = {
        {"clip.vision.block_count", "deepseekocr.vision.block_count"},
        {"clip.vision.embedding_length", "deepseekocr.vision.embedding_length"},
        {"clip.vision.attention.head_count", "deepseekocr.vision.head_count"},
        {"clip.vision.image_size", "deepseekocr.vision.image_size"},
        {"clip.vision.patch_size", "deepseekocr.vision.patch_size"},
        {"clip.vision.sam.block_count", "deepseekocr.sam.block_count"},
        {"clip.vision.sam.embedding_length", "deepseekocr.sam.embedding_length"},
        {"clip.vision.sam.head_count", "deepseekocr.sam.head_count"},
    };
    uint32_t v = 0;
    for (size_t i = 0; ok && i < sizeof sizes / sizeof sizes[0]; i++)
        ok = gguf_get_u32(mm, sizes[i][0], &v, &err) &&
             gguf_writer_add_u32(w, sizes[i][1], v, &err);
    static const int32_t global[] = {2, 5, 8, 11};
    ok = ok && gguf_writer_add_array(w, "deepseekocr.sam.global_attention_indexes",
                                     GGUF_TYPE_INT32, global, 4, &err);
    for (int pass = 0; ok && pass < 2; pass++) {
        for (size_t i = 0; ok && i < gguf_n_tensors(text); i++) {
            const gguf_tensor *t = gguf_tensor_at(text, i);
            ok = gguf_write_fixture_copy(w, pass, t->name, t, &err);
        }
        for (size_t i = 0; ok && i < gguf_n_tensors(mm); i++) {
            const gguf_tensor *t = gguf_tensor_at(mm, i);
            char buf[128];
            ok = gguf_write_fixture_copy(w, pass, ollama_name(t->name, buf, sizeof buf), t, &err);
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
    skip_at_the_scalar_level();
    skip_in_short_runs();
    char path[512];
    vision_temp_path(path, sizeof path, "deepseekocr", NULL);
    write_single(path);
    corral_error err = {0};
    corral_model_file *file = corral_model_file_open(path, &err);
    if (!file)
        fail_msg("%s", err.message);
    assert_true(corral_model_file_has_vision(file));
    corral_model_file_close(file);
    vision_check_same_tower(fixture(MMPROJ), path, 1024, 1024);

    check_image(path, path, "small", 1024, 1024, 0x0b628098b09775c5ull);
    remove(path);
}

/* --write-single OUT: the integration test's copy of ollama's layout (write_single). */
static const char *single_out;

static void write_single_out(void **state)
{
    (void)state;
    write_single(single_out);
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
        cmocka_unit_test(test_small_global_view),
        cmocka_unit_test(test_wide_tiles_then_global_view),
        cmocka_unit_test(test_grids),
        cmocka_unit_test(test_shrunk_views_pixels),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_single_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

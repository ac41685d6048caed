/*
 * mistral3 with the pixtral projector (Mistral Small 3.1's tower and patch merger) against
 * llama.cpp d32676d77's multimodal library, on vision/mistral3-* (tools/archref/
 * mistral3vis.py): a 40 x 24 image, which the preprocessing keeps as it is, becomes 5 x 3
 * merged tokens and two [IMG_BREAK] rows; our pixels of its PNG, our embeddings of them, the
 * prompt's ids around the image ([IMG_END] after it), the last logits and 16 greedy tokens
 * must be the reference's. Sizes that need a resize give the reference's token counts; files
 * and pixels the projector cannot take are refused with a message. The same pair written as
 * ollama's single GGUF gives the same answer, with ollama's image sizes.
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
#include "ollama_name_fixture.h"
#include "reference_fixture.h"
#include "vision_check.h"
#include "vision_png_fixture.h"
#include "vision_ref_fixture.h"

#define EMBD_TOLERANCE 1e-4f
#define LOGIT_TOLERANCE 1e-3f
#define N_GREEDY 16
#define MAX_IDS VISION_MAX_IDS

#define MMPROJ "vision/mistral3-mmproj.gguf"
#define TEXT "vision/mistral3-text.gguf"


/* The wide image from its PNG to the greedy tokens. */
static void test_wide(void **state)
{
    (void)state;
    char *ref = file_fixture_read(fixture("vision/mistral3.wide.ref.txt"), NULL);
    corral_error err = {0};
    corral_mmproj *mm = vision_load_mmproj(fixture(MMPROJ), "pixtral");

    /* our pixels of the PNG: no resize, llama.cpp's normalisation */
    image_rgb *rgb = vision_decode_png(fixture("vision/mistral3-wide.png"));
    image_preprocess pre = vision_preprocessing(mm);
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
    assert_int_equal(ints_of(text_after(ref, "image n_tokens "), &count, 1), 1);
    assert_int_equal(embd.n_tokens, (size_t)count);
    assert_int_equal(corral_mmproj_image_tokens(mm, 40, 24), embd.n_tokens);
    float *want = vision_read_embd(fixture("vision/mistral3.wide.embd.f32"), embd.n_tokens,
                                   embd.n_embd);
    vision_check_embd("wide", embd.data, want, embd.n_tokens, embd.n_embd,
                      &(vision_tolerance){.max = EMBD_TOLERANCE});

    /* the prompt's text around the image: nothing before it, [IMG_END] after */
    corral_model *m = vision_load_text(fixture(TEXT), mm);
    vision_prompt prompt;
    vision_prompt_ids(&prompt, m, mm, "[INST]Look: ", " What is it?[/INST]", ref, 2);
    assert_int_equal(prompt.after[0], 306); /* [IMG_END], one token */

    /* last logits and 16 greedy tokens, from the reference's rows and from ours */
    corral_context_params params;
    vision_context_params(&params, 128);
    vision_check_texts(m, &params, &prompt, &embd, want, ref,
                       fixture("vision/mistral3.wide.logits.txt"), LOGIT_TOLERANCE, N_GREEDY,
                       "wide");

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
        image_rgb *rgb = vision_decode_png(fixture(cases[i].png));
        image_preprocess pre = vision_preprocessing(mm);
        uint32_t nx, ny;
        assert_true(image_preprocess_size(&pre, rgb->width, rgb->height, &nx, &ny, &err));
        assert_int_equal(nx, cases[i].nx);
        assert_int_equal(ny, cases[i].ny);
        int32_t want = 0;
        assert_int_equal(ints_of(text_after(counts, cases[i].name), &want, 1), 1);
        assert_int_equal(corral_mmproj_image_tokens(mm, nx, ny), (size_t)want);
        image_rgb_free(rgb);
    }
    free(counts);
    corral_mmproj_free(mm);
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
    vision_temp_path(path, sizeof path, "pixtral", NULL);
    static const char merge[] = "clip.vision.spatial_merge_size";
    static const vision_refusal cases[] = {
        {{.bool_key = "clip.use_silu", .bool_value = false}, "GELU"},
        {{.u32_key = merge, .u32_value = 1}, "mm.patch_merger.weight"},
        {{.u32_key = merge, .u32_value = 0}, "spatial_merge_size"},
        {{.u32_key = merge, .u32_value = 1000000}, "spatial_merge_size"},
        {{.u32_key = "clip.vision.attention.head_count", .u32_value = 16}, "rotary"},
    };
    vision_check_refusals(fixture(MMPROJ), path, cases, sizeof cases / sizeof cases[0]);
}

/*
 * The pair as ollama's converter would have written it from the same checkpoint: one
 * mistral3 GGUF, the tower's sizes under mistral3.vision.*, ollama's names, the tower's Q and K
 * rows in Hugging Face's order (llama.cpp's converter interleaves each head's halves), no
 * [IMG_BREAK] vector but the text's embedding row of that token (305), which llama.cpp's
 * converter copies into the projector. extra_key (NULL: none): one more u32 key.
 */
static void write_single(const char *dst, const char *extra_key, uint32_t extra_value)
{
    corral_error err = {0};
    gguf_file *text = gguf_open(fixture(TEXT), &err), *mm = gguf_open(fixture(MMPROJ), &err);
    gguf_writer *w = gguf_writer_create();
    if (!text || !mm || !w)
        fail_msg("%s", err.message);
    const gguf_tensor *img_break = gguf_find_tensor(mm, "v.token_embd.img_break");
    assert_non_null(img_break);
    bool ok = true;
    for (size_t i = 0; ok && i < gguf_n_kv(text); i++)
        ok = gguf_writer_copy_kv(w, gguf_kv_at(text, i), &err);
    static const char *const sizes[][2] = {
        {"clip.vision.block_count", "mistral3.vision.block_count"},
        {"clip.vision.embedding_length", "mistral3.vision.embedding_length"},
        {"clip.vision.feed_forward_length", "mistral3.vision.feed_forward_length"},
        {"clip.vision.attention.head_count", "mistral3.vision.attention.head_count"},
        {"clip.vision.image_size", "mistral3.vision.image_size"},
        {"clip.vision.patch_size", "mistral3.vision.patch_size"},
        {"clip.vision.spatial_merge_size", "mistral3.spatial_merge_size"},
    };
    uint32_t v = 0, heads = 0, width = 0;
    for (size_t i = 0; ok && i < sizeof sizes / sizeof sizes[0]; i++)
        ok = (extra_key && strcmp(sizes[i][1], extra_key) == 0) ||
             (gguf_get_u32(mm, sizes[i][0], &v, &err) && gguf_writer_add_u32(w, sizes[i][1], v, &err));
    ok = ok && gguf_get_u32(mm, "clip.vision.attention.head_count", &heads, &err) &&
         gguf_get_u32(mm, "clip.vision.embedding_length", &width, &err) &&
         gguf_writer_add_f32(w, "mistral3.vision.rope.freq_base", 10000.0f, &err);
    /* the keys ollama's converter writes that llama.cpp's has not, extra_key among them */
    const struct { const char *key; uint32_t value; } more[] = {
        {"mistral3.vision.attention.key_length", width / heads},
        {"mistral3.vision.num_channels", 3}, {extra_key, extra_value}};
    for (size_t i = 0; ok && i < 3; i++) {
        bool replaced = i < 2 && extra_key && strcmp(more[i].key, extra_key) == 0;
        if (more[i].key && !replaced)
            ok = gguf_writer_add_u32(w, more[i].key, more[i].value, &err);
    }
    size_t d = width / heads;
    for (int pass = 0; ok && pass < 2; pass++) {
        for (size_t i = 0; ok && i < gguf_n_tensors(text); i++) {
            const gguf_tensor *t = gguf_tensor_at(text, i);
            if (strcmp(t->name, "token_embd.weight") != 0 || pass == 0) {
                ok = gguf_write_fixture_copy(w, pass, t->name, t, &err);
                continue;
            }
            float *rows = malloc(t->size_bytes);
            assert_non_null(rows);
            memcpy(rows, t->data, t->size_bytes);
            memcpy(rows + 305 * t->ne[0], img_break->data, img_break->size_bytes);
            ok = gguf_writer_write_tensor(w, rows, t->size_bytes, &err);
            free(rows);
        }
        for (size_t i = 0; ok && i < gguf_n_tensors(mm); i++) {
            const gguf_tensor *t = gguf_tensor_at(mm, i);
            char buf[128];
            const char *name = ollama_name_fixture_pixtral(t->name, buf, sizeof buf);
            bool qk = strstr(t->name, ".attn_q.") || strstr(t->name, ".attn_k.");
            if (!name || !qk || pass == 0) {
                ok = !name || gguf_write_fixture_copy(w, pass, name, t, &err);
                continue;
            }
            /* llama.cpp's row 2j + s of a head is Hugging Face's row s * d/2 + j */
            const float *src = t->data;
            float *rows = malloc(t->size_bytes);
            assert_non_null(rows);
            for (size_t r = 0; r < (size_t)t->ne[1]; r++) {
                size_t h = r / d, j = r % d / 2, half = r % 2;
                memcpy(rows + (h * d + half * d / 2 + j) * t->ne[0], src + r * t->ne[0],
                       t->ne[0] * sizeof *rows);
            }
            ok = gguf_writer_write_tensor(w, rows, t->size_bytes, &err);
            free(rows);
        }
        if (pass == 0)
            ok = ok && gguf_writer_begin(w, dst, &err);
    }
    gguf_write_fixture_finish(w, ok, dst, &err);
    gguf_close(mm);
    gguf_close(text);
}

/*
 * The pair as ollama's single file: a model with vision that is its own projector, gives the
 * reference's embeddings but for the F16 rounding llama.cpp's convolution adds (ollama's
 * engine convolves in F32), its [IMG_BREAK] rows exactly, and the reference's greedy tokens.
 * Its preprocessing is ollama's: only images over 1540 pixels a side shrink, and sides round
 * up to whole patches, a merge square's leftover patches dropped.
 */
static void test_single_file(void **state)
{
    (void)state;
    char path[512];
    vision_temp_path(path, sizeof path, "pixtral", NULL);
    write_single(path, NULL, 0);
    corral_error err = {0};
    corral_model_file *file = corral_model_file_open(path, &err);
    assert_non_null(file);
    assert_true(corral_model_file_has_vision(file));
    corral_model_file_close(file);
    corral_mmproj *mm = vision_load_mmproj(path, "pixtral");
    size_t size;
    float *pixels = file_fixture_read(fixture("vision/mistral3.wide.pixels.f32"), &size);
    corral_image_embd embd;
    assert_true(corral_mmproj_encode(mm, pixels, 40, 24, 2, &embd, &err));
    assert_int_equal(embd.n_tokens, 17);
    float *want = vision_read_embd(fixture("vision/mistral3.wide.embd.f32"), embd.n_tokens,
                                   embd.n_embd);
    vision_check_embd("single file (F32 convolution)", embd.data, want, embd.n_tokens,
                      embd.n_embd, &(vision_tolerance){.max = 1e-2f});
    for (size_t row = 5; row < 17; row += 6)
        assert_memory_equal(embd.data + row * 64, want + row * 64, 64 * sizeof(float));

    corral_model *m = corral_model_load(path, &err);
    if (!m)
        fail_msg("%s", err.message);
    char *ref = file_fixture_read(fixture("vision/mistral3.wide.ref.txt"), NULL);
    int32_t ids0[MAX_IDS], ids2[MAX_IDS];
    size_t n0 = tokenize(corral_model_vocab(m), "[INST]Look: ", true, ids0);
    size_t n2 = tokenize(corral_model_vocab(m), "[IMG_END] What is it?[/INST]", false, ids2);
    corral_context_params params;
    corral_context_params_init(&params);
    params.n_ctx = 128;
    params.kv_type = CORRAL_KV_F32;
    corral_context *ctx = decode_around_image(m, &params, ids0, n0, &embd, ids2, n2);
    const float *logits = corral_get_logits(ctx, n2 - 1);
    check_greedy(ctx, logits, corral_model_n_vocab(m), text_after(ref, "\ngreedy_ids "), N_GREEDY);
    corral_context_free(ctx);
    corral_model_free(m);
    corral_image_embd_free(&embd);

    /* ollama's sizes: 50 x 30 to 52 x 32 (13 x 8 patches: 6 x 4 merged, 3 breaks), 12 x 12
     * kept (one merged token), 3080 x 1000 halved to 1540 x 500 (385 x 125 patches) */
    static const uint32_t sizes[][5] = {
        {50, 30, 52, 32, 27}, {12, 12, 12, 12, 1}, {3080, 1000, 1540, 500, 192 * 62 + 61}};
    image_preprocess pre = vision_preprocessing(mm);
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        uint32_t nx, ny;
        assert_true(image_preprocess_size(&pre, sizes[i][0], sizes[i][1], &nx, &ny, &err));
        assert_int_equal(nx, sizes[i][2]);
        assert_int_equal(ny, sizes[i][3]);
        assert_int_equal(corral_mmproj_image_tokens(mm, nx, ny), sizes[i][4]);
    }
    /* under a merge square: no token, refused */
    assert_int_equal(corral_mmproj_image_tokens(mm, 4, 12), 0);
    assert_false(corral_mmproj_encode(mm, pixels, 4, 12, 1, &embd, &err));
    assert_non_null(strstr(err.message, "at least 8"));

    corral_mmproj_free(mm);
    free(ref);
    free(want);
    free(pixels);
    remove(path);
}

/* ollama's file with values its engine does not run as llama.cpp's does is refused, naming
 * the key. */
static void test_single_file_refusals(void **state)
{
    (void)state;
    static const struct {
        const char *key;
        uint32_t value;
    } cases[] = {
        {"mistral3.vision.attention.key_length", 8},
        {"mistral3.vision.longest_edge", 100000},
        {"mistral3.vision.num_channels", 4},
        {"mistral3.spatial_merge_size", 0},
    };
    char path[512];
    vision_temp_path(path, sizeof path, "pixtral", NULL);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        write_single(path, cases[i].key, cases[i].value);
        corral_error err = {0};
        assert_null(corral_mmproj_load(path, &err));
        printf("refused: %s\n", err.message);
        assert_non_null(strstr(err.message, cases[i].key));
    }
    remove(path);
}

/* --write-single OUT: the integration tests' copy of ollama's layout (write_single). */
static const char *single_out;

static void write_single_out(void **state)
{
    (void)state;
    write_single(single_out, NULL, 0);
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
        cmocka_unit_test(test_wide),
        cmocka_unit_test(test_resize_counts),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_single_file),
        cmocka_unit_test(test_single_file_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

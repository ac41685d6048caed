/*
 * LFM2-VL's images against llama.cpp's multimodal library (vision/README, lfm2v-*): each PNG,
 * decoded and preprocessed as the runner does it (already at a size smart resize keeps),
 * through the lfm2 tower (its position table stretched or squeezed to the image's patch grid,
 * the pixel unshuffle, the projector's LayerNorm and MLP) must give the reference's
 * embeddings; the prompt's text around them through the lfm2 text model must give the
 * reference's last logits and 16 greedy tokens, from the reference's embeddings and from
 * ours. Then files that are wrong in the ways a hostile or broken file could be are refused
 * with a message naming the fault.
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
#include "image/slices.h"
#include "vision_check.h"
#include "vision_png_fixture.h"
#include "vision_ref_fixture.h"

/* The tower's sums follow ggml's order on another CPU level than the reference's; the last
 * bits that leaves matter only through ggml's GELU, an fp16 table, where an input across a
 * half's rounding step takes the neighbouring entry. Every value within 1e-3 (a wrong step
 * exceeds it by far), the mean within 1e-5. */
#define EMBD_TOLERANCE 1e-3f
#define EMBD_MEAN_TOLERANCE 1e-5
#define LOGIT_TOLERANCE 1e-3f
#define N_GREEDY 16
#define MAX_IDS VISION_MAX_IDS
#define TEXT_WIDTH 64

static const vision_tolerance embd_tolerance = {.max = EMBD_TOLERANCE,
                                                .mean = EMBD_MEAN_TOLERANCE};

/* The embeddings against the reference's rows. */
static void check_embd(const corral_image_embd *embd, const float *want, const char *what)
{
    char label[64];
    snprintf(label, sizeof label, "lfm2 %s", what);
    vision_check_embd(label, embd->data, want, embd->n_tokens, embd->n_embd, &embd_tolerance);
}

/* The image file at path as the runner takes it for lfm2: its plan (one part, untiled), the
 * part resized as the plan says (corners aligned), encoded into embd; the part must be
 * want_nx x want_ny. */
static void encode_planned(const corral_mmproj *mm, const char *path, uint32_t want_nx,
                           uint32_t want_ny, corral_image_embd *embd)
{
    corral_error err = {0};
    image_rgb *rgb = image_decode_file(path, 1 << 20, NULL, &err);
    if (!rgb)
        fail_msg("%s: %s", path, err.message);
    corral_image_params params;
    corral_mmproj_image_params(mm, &params);
    image_preprocess pre = image_preprocess_from_params(&params);
    image_slice_plan plan;
    image_pixels *parts[1 + IMAGE_MAX_SLICES];
    assert_true(image_plan_for_params(&params, rgb->width, rgb->height, &plan, &err));
    assert_int_equal(plan.cols * plan.rows, 0);
    assert_true(image_slices_run(&pre, &plan, rgb, parts, &err));
    assert_int_equal(parts[0]->nx, want_nx);
    assert_int_equal(parts[0]->ny, want_ny);
    if (!corral_mmproj_encode(mm, parts[0]->data, want_nx, want_ny, 2, embd, &err))
        fail_msg("%s", err.message);
    image_pixels_free(parts[0]);
    image_rgb_free(rgb);
}

/* mm_path, text_path: the projector and the text model (one file in ollama's layout);
 * planned: the image through the runner's plan (encode_planned), else preprocessed alone (a
 * size smart resize keeps). */
static void run_case_files(const char *image, uint32_t nx, uint32_t ny, const char *mm_path,
                           const char *text_path, bool planned)
{
    char name[128];
    snprintf(name, sizeof name, "lfm2v.%s.ref.txt", image);
    char *ref = file_fixture_read(vision_fixture(name), NULL);
    corral_mmproj *mm = vision_load_mmproj(mm_path, "lfm2");
    corral_image_embd embd;
    snprintf(name, sizeof name, "lfm2v-%s.png", image);
    if (planned)
        encode_planned(mm, vision_fixture(name), nx, ny, &embd);
    else
        vision_encode_png(mm, vision_fixture(name), nx, ny, &embd);
    /* a token per 16 x 16 pixels (8-pixel patches merged 2 x 2), in the text model's width */
    assert_int_equal(embd.n_tokens, (size_t)(nx / 16) * (ny / 16));
    assert_int_equal(embd.n_tokens, corral_mmproj_image_tokens(mm, nx, ny));
    assert_int_equal(embd.n_embd, TEXT_WIDTH);
    snprintf(name, sizeof name, "lfm2v.%s.embd.f32", image);
    float *want = vision_read_embd(vision_fixture(name), embd.n_tokens, embd.n_embd);
    check_embd(&embd, want, image);

    corral_model *m = vision_load_text(text_path, mm);
    /* the image's marks and the prompt, tokenized as the reference did */
    vision_prompt prompt;
    vision_prompt_ids(&prompt, m, mm, "Look: ", " What is it?", ref, 2);

    snprintf(name, sizeof name, "lfm2v.%s.logits.txt", image);
    char logits_path[2048];
    snprintf(logits_path, sizeof logits_path, "%s", vision_fixture(name));
    corral_context_params params;
    vision_context_params(&params, 160);
    params.images = true;
    vision_check_texts(m, &params, &prompt, &embd, want, ref, logits_path, LOGIT_TOLERANCE,
                       N_GREEDY, "lfm2");

    corral_model_free(m);
    corral_image_embd_free(&embd);
    corral_mmproj_free(mm);
    free(want);
    free(ref);
}

static void run_case(const char *image, uint32_t nx, uint32_t ny, bool planned)
{
    char mm_path[2048], text_path[2048]; /* vision_fixture()'s buffers are reused */
    snprintf(mm_path, sizeof mm_path, "%s", vision_fixture("lfm2v-mmproj.gguf"));
    snprintf(text_path, sizeof text_path, "%s", vision_fixture("lfm2v-text.gguf"));
    run_case_files(image, nx, ny, mm_path, text_path, planned);
}

/* 16 x 16 patches from the 8 x 8 table; 24 x 16; 44 x 6 (its height squeezed) */
static void test_square(void **state) { (void)state; run_case("square", 128, 128, false); }
static void test_wide(void **state) { (void)state; run_case("wide", 192, 128, false); }
static void test_strip(void **state) { (void)state; run_case("strip", 352, 48, false); }
/* 90 x 100 smart-resized up to 128 x 144 as llama.cpp resizes it, through the runner's plan */
static void test_small(void **state) { (void)state; run_case("small", 128, 144, true); }

/* The plans llama.cpp d32676d77 makes for LFM2-VL (tiles of 512 pixels, 2 to 10 of them,
 * the thumbnail smart-resized), worked out by hand from its rules. */
static void test_tile_plans(void **state)
{
    (void)state;
    corral_error err = {0};
    corral_mmproj *mm = corral_mmproj_load(vision_fixture("lfm2v16-mmproj.gguf"), &err);
    assert_non_null(mm);
    corral_image_params params;
    corral_mmproj_image_params(mm, &params);
    assert_int_equal(params.tile_size, 512);
    assert_int_equal(params.max_slices, 10);
    static const struct {
        uint32_t w, h, cols, rows, ow, oh;
    } cases[] = {
        {1024, 1024, 0, 0, 512, 512},  /* two tiles a side is not over the tolerance */
        {1536, 512, 3, 1, 864, 288},   /* the fixture's */
        {1040, 200, 5, 1, 1056, 192},  /* aspect 5.2: 5 x 1 before 6 x 1 */
        {2000, 2000, 3, 3, 512, 512},  /* 2 x 2 and 3 x 3 tie: the image covers 3 x 3 enough */
        {600, 1100, 1, 2, 352, 672},   /* 1 x 2 and 2 x 4 tie: it covers too little of 2 x 4 */
        {100, 100, 0, 0, 256, 256},    /* small: smart resize's least 64 tokens */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        image_slice_plan plan;
        assert_true(image_plan_for_params(&params, cases[i].w, cases[i].h, &plan, &err));
        printf("%u x %u: %u x %u tiles, thumbnail %u x %u\n", cases[i].w, cases[i].h, plan.cols,
               plan.rows, plan.overview_w, plan.overview_h);
        assert_int_equal(plan.cols, cases[i].cols);
        assert_int_equal(plan.rows, cases[i].rows);
        assert_int_equal(plan.overview_w, cases[i].ow);
        assert_int_equal(plan.overview_h, cases[i].oh);
        assert_true(plan.tiles);
        if (plan.cols) {
            assert_int_equal(plan.cell_w, 512);
            assert_int_equal(plan.refined_w, 512 * plan.cols);
            assert_int_equal(plan.refined_h, 512 * plan.rows);
        }
    }
    /* a sliver's thumbnail would be wider than the encoder takes: refused, saying so */
    image_slice_plan sliver;
    assert_false(image_plan_for_params(&params, 12000, 1, &sliver, &err));
    printf("refused: %s\n", err.message);
    assert_non_null(strstr(err.message, "too thin"));
    /* the marks: each tile's row and column, then the thumbnail's */
    assert_string_equal(corral_mmproj_part_text(mm, 0, 0, 0), "<|image_start|><|img_thumbnail|>");
    assert_string_equal(corral_mmproj_part_text(mm, 0, 0, 1), "<|image_end|>");
    assert_string_equal(corral_mmproj_part_text(mm, 2, 5, 0),
                        "<|image_start|><|img_row_1_col_1|>");
    assert_string_equal(corral_mmproj_part_text(mm, 2, 5, 3), "<|img_row_2_col_2|>");
    assert_string_equal(corral_mmproj_part_text(mm, 2, 5, 9), "<|img_row_5_col_2|>");
    assert_string_equal(corral_mmproj_part_text(mm, 2, 5, 10), "<|img_thumbnail|>");
    assert_string_equal(corral_mmproj_part_text(mm, 2, 5, 11), "<|image_end|>");
    corral_mmproj_free(mm);
}

/*
 * The tiled image: Corral's plan, tiles (crops, as the image is that grid already) and
 * thumbnail (resized with corners aligned: bit for bit the pixels of lfm2v-tiles-thumb.png,
 * the script's float32 re-implementation of llama.cpp's resize) through the 16-pixel tower
 * must give the reference's rows; the prompt with each part's marks, through the text model,
 * its last logits and greedy tokens.
 */
static void test_tiles(void **state)
{
    (void)state;
    char *ref = file_fixture_read(vision_fixture("lfm2v16.tiles.ref.txt"), NULL);
    corral_error err = {0};
    corral_mmproj *mm = corral_mmproj_load(vision_fixture("lfm2v16-mmproj.gguf"), &err);
    if (!mm)
        fail_msg("%s", err.message);
    corral_image_params params;
    corral_mmproj_image_params(mm, &params);
    image_preprocess pre = image_preprocess_from_params(&params);
    image_rgb *rgb = image_decode_file(vision_fixture("lfm2v-tiles.png"), 1 << 20, NULL, &err);
    assert_non_null(rgb);
    image_slice_plan plan;
    assert_true(image_plan_for_params(&params, rgb->width, rgb->height, &plan, &err));
    assert_int_equal(plan.cols, 3);
    assert_int_equal(plan.rows, 1);
    image_pixels *parts[1 + IMAGE_MAX_SLICES];
    assert_true(image_slices_run(&pre, &plan, rgb, parts, &err));
    image_rgb_free(rgb);
    enum { N_PARTS = 4, TILE_TOKENS = 256, THUMB_TOKENS = 243 };
    assert_int_equal(parts[3]->nx, 864);
    assert_int_equal(parts[3]->ny, 288);
    image_rgb *thumb = image_decode_file(vision_fixture("lfm2v-tiles-thumb.png"), 1 << 20, NULL,
                                         &err);
    assert_non_null(thumb);
    for (size_t i = 0; i < 864 * 288 * 3; i++)
        if (parts[3]->data[i] != ((float)thumb->pixels[i] / 255.0f - 0.5f) / 0.5f)
            fail_msg("thumbnail value %zu differs from llama.cpp's resize", i);
    image_rgb_free(thumb);
    corral_image_embd embd[N_PARTS];
    for (size_t k = 0; k < N_PARTS; k++) {
        assert_true(corral_mmproj_encode(mm, parts[k]->data, parts[k]->nx, parts[k]->ny, 2,
                                         &embd[k], &err));
        assert_int_equal(embd[k].n_tokens, k < 3 ? TILE_TOKENS : THUMB_TOKENS);
        image_pixels_free(parts[k]);
    }
    size_t size;
    float *want = file_fixture_read(vision_fixture("lfm2v16.tiles.embd.f32"), &size);
    assert_int_equal(size, (3 * TILE_TOKENS + THUMB_TOKENS) * TEXT_WIDTH * sizeof(float));
    corral_image_embd theirs[N_PARTS];
    for (size_t k = 0, at = 0; k < N_PARTS; at += embd[k].n_tokens, k++) {
        theirs[k] = embd[k];
        theirs[k].data = want + at * TEXT_WIDTH;
        check_embd(&embd[k], theirs[k].data, k < 3 ? "tile" : "thumbnail");
    }

    corral_model *m = vision_load_text(vision_fixture("lfm2v-text.gguf"), mm);
    const corral_vocab *vocab = corral_model_vocab(m);
    int32_t ids[N_PARTS + 1][MAX_IDS], ref_ids[MAX_IDS];
    size_t n_ids[N_PARTS + 1];
    for (size_t k = 0; k <= N_PARTS; k++) {
        char text[256];
        const char *mark = corral_mmproj_part_text(mm, plan.cols, plan.rows, k);
        snprintf(text, sizeof text, "%s%s%s", k == 0 ? "Look: " : "", mark,
                 k == N_PARTS ? " What is it?" : "");
        assert_true(corral_tokenize(vocab, text, strlen(text), k == 0, true, ids[k], MAX_IDS,
                                    &n_ids[k], &err));
        assert_int_equal(n_ids[k], chunk_ids(ref, (int)(2 * k), ref_ids));
        assert_memory_equal(ids[k], ref_ids, n_ids[k] * sizeof *ids[k]);
    }
    for (int pass = 0; pass < 2; pass++) {
        corral_context_params cp;
        vision_context_params(&cp, 1100);
        cp.images = true;
        corral_context *ctx = corral_context_create(m, &cp, &err);
        assert_non_null(ctx);
        for (size_t k = 0; k <= N_PARTS; k++) {
            corral_batch batch = {.n_tokens = n_ids[k], .tokens = ids[k]};
            assert_true(corral_decode(ctx, &batch, &err));
            if (k < N_PARTS && !corral_decode_image(ctx, 0, pass ? &embd[k] : &theirs[k], &err))
                fail_msg("%s", err.message);
        }
        vision_check_logits(ctx, n_ids[N_PARTS] - 1, corral_model_n_vocab(m), ref,
                            vision_fixture("lfm2v16.tiles.logits.txt"), LOGIT_TOLERANCE,
                            N_GREEDY,
                            pass ? "lfm2 tiles from ours" : "lfm2 tiles from the reference's rows");
        corral_context_free(ctx);
    }
    corral_model_free(m);
    for (size_t k = 0; k < N_PARTS; k++)
        corral_image_embd_free(&embd[k]);
    corral_mmproj_free(mm);
    free(want);
    free(ref);
}

/* Smart resize's bounds: 64 to 256 tokens of 16 x 16 pixels, sides in whole tokens. */
static void test_image_params(void **state)
{
    (void)state;
    corral_error err = {0};
    corral_mmproj *mm = corral_mmproj_load(vision_fixture("lfm2v-mmproj.gguf"), &err);
    assert_non_null(mm);
    corral_image_params p;
    corral_mmproj_image_params(mm, &p);
    assert_int_equal(p.resize, CORRAL_IMAGE_SMART);
    assert_int_equal(p.align, 16);
    assert_int_equal(p.min_pixels, 64 * 256);
    assert_int_equal(p.max_pixels, 256 * 256);
    assert_true(p.mean[0] == 0.5f && p.std[2] == 0.5f);
    /* sides that are not whole merge squares are not taken */
    assert_int_equal(corral_mmproj_image_tokens(mm, 120, 128), 0);
    assert_int_equal(corral_mmproj_image_tokens(mm, 128, 136), 0);
    corral_image_embd embd;
    float pixels[24 * 16 * 3] = {0};
    assert_false(corral_mmproj_encode(mm, pixels, 24, 16, 1, &embd, &err));
    assert_non_null(strstr(err.message, "multiples of 16"));
    corral_mmproj_free(mm);
}

/* ---- hostile files ---- */

/* ---- ollama's single file ---- */

/*
 * The pair as ollama's converter writes LFM2-VL: one lfm2 GGUF, the text model's final norm
 * as output_norm, the tower's sizes, epsilon, normalisation and scale factor under
 * lfm2.vision.*, the projector's LayerNorm as mm.layer_norm, every other tensor under the
 * mmproj's name. drop_key: a key (by the file's name) left out.
 */
static void write_single(const char *dst, const char *drop_key)
{
    corral_error err = {0};
    char text_path[2048];
    snprintf(text_path, sizeof text_path, "%s", vision_fixture("lfm2v-text.gguf"));
    gguf_file *text = gguf_open(text_path, &err),
              *mm = gguf_open(vision_fixture("lfm2v-mmproj.gguf"), &err);
    gguf_writer *w = gguf_writer_create();
    if (!text || !mm || !w)
        fail_msg("%s", err.message);
    bool ok = true;
    for (size_t i = 0; ok && i < gguf_n_kv(text); i++)
        ok = gguf_writer_copy_kv(w, gguf_kv_at(text, i), &err);
    static const char *const keys[][2] = {
        {"clip.vision.block_count", "lfm2.vision.block_count"},
        {"clip.vision.embedding_length", "lfm2.vision.embedding_length"},
        {"clip.vision.feed_forward_length", "lfm2.vision.feed_forward_length"},
        {"clip.vision.attention.head_count", "lfm2.vision.attention.head_count"},
        {"clip.vision.image_size", "lfm2.vision.image_size"},
        {"clip.vision.patch_size", "lfm2.vision.patch_size"},
        {"clip.vision.projector.scale_factor", "lfm2.vision.projector.scale_factor"},
        {"clip.vision.attention.layer_norm_epsilon", "lfm2.vision.attention.layer_norm_epsilon"},
        {"clip.vision.image_mean", "lfm2.vision.image_mean"},
        {"clip.vision.image_std", "lfm2.vision.image_std"},
    };
    for (size_t i = 0; ok && i < sizeof keys / sizeof keys[0]; i++) {
        if (drop_key && strcmp(keys[i][1], drop_key) == 0)
            continue;
        gguf_kv kv = *gguf_find_kv(mm, keys[i][0]);
        kv.key = keys[i][1];
        ok = gguf_writer_copy_kv(w, &kv, &err);
    }
    ok = ok && gguf_writer_add_bool(w, "lfm2.vision.projector.use_layernorm", true, &err);
    for (int pass = 0; ok && pass < 2; pass++) {
        for (size_t i = 0; ok && i < gguf_n_tensors(text); i++) {
            const gguf_tensor *t = gguf_tensor_at(text, i);
            const char *name = strcmp(t->name, "token_embd_norm.weight") == 0
                                   ? "output_norm.weight"
                                   : t->name;
            ok = gguf_write_fixture_copy(w, pass, name, t, &err);
        }
        for (size_t i = 0; ok && i < gguf_n_tensors(mm); i++) {
            const gguf_tensor *t = gguf_tensor_at(mm, i);
            const char *name = strcmp(t->name, "mm.input_norm.weight") == 0 ? "mm.layer_norm.weight"
                               : strcmp(t->name, "mm.input_norm.bias") == 0 ? "mm.layer_norm.bias"
                                                                            : t->name;
            ok = gguf_write_fixture_copy(w, pass, name, t, &err);
        }
        if (pass == 0)
            ok = ok && gguf_writer_begin(w, dst, &err);
    }
    gguf_write_fixture_finish(w, ok, dst, &err);
    gguf_close(mm);
    gguf_close(text);
}

/* ollama's single file is its own projector and text model: the pair's embeddings to the bit,
 * the reference's logits and greedy tokens. */
static void test_single_file(void **state)
{
    (void)state;
    char path[512];
    vision_temp_path(path, sizeof path, "lfm2", "single");
    write_single(path, NULL);
    corral_error err = {0};
    corral_model_file *file = corral_model_file_open(path, &err);
    assert_non_null(file);
    assert_true(corral_model_file_has_vision(file));
    corral_model_file_close(file);
    corral_mmproj *pair = corral_mmproj_load(vision_fixture("lfm2v-mmproj.gguf"), &err),
                  *single = corral_mmproj_load(path, &err);
    if (!pair || !single)
        fail_msg("%s", err.message);
    corral_image_params a, b;
    corral_mmproj_image_params(pair, &a);
    corral_mmproj_image_params(single, &b);
    assert_memory_equal(&a, &b, sizeof a);
    corral_image_embd ea, eb;
    vision_encode_png(pair, vision_fixture("lfm2v-wide.png"), 192, 128, &ea);
    vision_encode_png(single, vision_fixture("lfm2v-wide.png"), 192, 128, &eb);
    assert_int_equal(ea.n_tokens, eb.n_tokens);
    assert_memory_equal(ea.data, eb.data, ea.n_tokens * ea.n_embd * sizeof *ea.data);
    corral_image_embd_free(&ea);
    corral_image_embd_free(&eb);
    corral_mmproj_free(pair);
    corral_mmproj_free(single);
    run_case_files("square", 128, 128, path, path, false);
    remove(path);
}

/* A single file without the tower's image size (its position table's side) is refused by
 * name; without the scale factor, epsilon or normalisation it takes ollama's defaults, which
 * the fixture's are (2, 1e-6, 0.5). */
static void test_single_file_keys(void **state)
{
    (void)state;
    char path[512];
    vision_temp_path(path, sizeof path, "lfm2", "single-keys");
    corral_error err = {0};
    write_single(path, "lfm2.vision.image_size");
    assert_null(corral_mmproj_load(path, &err));
    printf("refused: %s\n", err.message);
    assert_non_null(strstr(err.message, "lfm2.vision.image_size"));
    static const char *const defaulted[] = {"lfm2.vision.projector.scale_factor",
                                            "lfm2.vision.attention.layer_norm_epsilon",
                                            "lfm2.vision.image_mean"};
    for (size_t i = 0; i < sizeof defaulted / sizeof defaulted[0]; i++) {
        write_single(path, defaulted[i]);
        corral_mmproj *mm = corral_mmproj_load(path, &err);
        if (!mm)
            fail_msg("%s", err.message);
        corral_mmproj_free(mm);
    }
    remove(path);
}

/* Projector files broken one way each are refused, the message naming the fault. */
static void test_projector_refusals(void **state)
{
    (void)state;
    static const vision_refusal cases[] = {
        {{.drop_key = "clip.vision.projector.scale_factor"}, "scale_factor"},
        {{.u32_key = "clip.vision.projector.scale_factor", .u32_value = 1}, "scale factor is 1"},
        {{.u32_key = "clip.vision.projector.scale_factor", .u32_value = 3}, "mm.input_norm.weight"},
        {{.bool_key = "clip.use_gelu", .bool_value = false}, "clip.use_gelu"},
        {{.drop_key = "clip.use_gelu"}, "clip.use_gelu"},
        {{.u32_key = "clip.vision.image_size", .u32_value = 60}, "60-pixel"},
        {{.u32_key = "clip.vision.image_size", .u32_value = 72}, "v.position_embd.weight"},
        {{.flatten = "v.position_embd.weight"}, "v.position_embd.weight"},
        {{.drop_tensor = "v.position_embd.weight"}, "v.position_embd.weight"},
        {{.drop_tensor = "mm.input_norm.weight"}, "without 'mm.input_norm.weight'"},
        {{.flatten = "mm.1.weight"}, "mm.1.weight"},
        {{.drop_tensor = "mm.2.weight"}, "mm.2.weight"},
        {{.drop_tensor = "mm.2.bias"}, "mm.2.bias"},
        {{.drop_tensor = "mm.1.bias"}, "mm.1.bias"},
    };
    char path[512];
    vision_temp_path(path, sizeof path, "lfm2", "spoiled");
    vision_check_refusals(vision_fixture("lfm2v-mmproj.gguf"), path, cases, sizeof cases / sizeof cases[0]);
}

/* --write-single OUT: the integration test's copy of ollama's layout (write_single). */
static const char *single_out;

static void write_single_out(void **state)
{
    (void)state;
    write_single(single_out, NULL);
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
        cmocka_unit_test(test_strip),
        cmocka_unit_test(test_small),
        cmocka_unit_test(test_image_params),
        cmocka_unit_test(test_tile_plans),
        cmocka_unit_test(test_tiles),
        cmocka_unit_test(test_projector_refusals),
        cmocka_unit_test(test_single_file),
        cmocka_unit_test(test_single_file_keys),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * Qwen 3.5's images against llama.cpp's multimodal library (vision/README, qwen35v-*): each
 * PNG, decoded and preprocessed as the runner does it (already at a size smart resize keeps),
 * through llama.cpp's qwen3vl_merger projector for Qwen 3.5 (no deepstack) must give the
 * reference's embeddings; the prompt's text around them through the qwen35 and qwen35moe text
 * models (Gated DeltaNet layers taking the image's rows in order, gated attention turning them
 * at their interleaved M-RoPE grid positions) must give the reference's last logits and 16
 * greedy tokens, from the reference's embeddings and from ours, the image in one batch or
 * split across several; and the same from ollama's single file, and with every text layer
 * on a Vulkan device (lavapipe here). Then what does not fit is refused with a message naming
 * the fault.
 *
 * --write-single DENSE MOE writes the single files for the integration tests.
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
#include "qwen3vl_single_fixture.h"
#include "vision_check.h"
#include "vision_png_fixture.h"
#include "vision_ref_fixture.h"

/* Without deepstack the rows are the merger's alone. ggml's GELU is an fp16 table, so where
 * the reference's sums (AVX2's 8 lanes) and Corral's (AVX-512's 16, vision_order.h) put one
 * GELU input on either side of a half's rounding step, that token's row moves by about 2e-4
 * (seed 3570 of the projector did so for one token of the square: 1.95e-4, the other tokens
 * within 2.2e-5). The fixture's seed puts no input there (measured: within 3.6e-7), so 1e-4
 * holds the order of sums and catches any wrong step. */
#define EMBD_TOLERANCE 1e-4f
#define LOGIT_TOLERANCE 1e-3f
#define N_GREEDY 16
#define N_VOCAB 307

/* Layers asked for on a Vulkan device by the checks below: 0 (the CPU), or -1 (test_gpu). */
static int gpu_layers;

/* The prompt around the image through the text model in batches of n_batch: last logits and
 * the greedy tokens. */
static void check_text(const corral_model *m, const char *ref, const char *logits_file,
                       const vision_prompt *prompt, const corral_image_embd *embd,
                       const char *what, uint32_t n_batch)
{
    corral_context_params params;
    vision_context_params(&params, 128);
    params.images = true;
    params.n_batch = n_batch;
    params.n_gpu_layers = gpu_layers;
    corral_context *ctx = decode_around_image(m, &params, prompt->before, prompt->n_before, embd,
                                              prompt->after, prompt->n_after);
    if (gpu_layers != 0)
        assert_int_equal(corral_context_gpu_layers(ctx), corral_model_n_layer(m));
    char label[128];
    snprintf(label, sizeof label, "%s %s (batches of %u%s)", corral_model_arch(m), what, n_batch,
             gpu_layers ? ", on the device" : "");
    vision_check_logits(ctx, prompt->n_after - 1, N_VOCAB, ref, logits_file, LOGIT_TOLERANCE,
                        N_GREEDY, label);
    corral_context_free(ctx);
}

/* text: "qwen35v" or "qwen35moev", the fixtures' prefix; image: "square" or "wide"; mm_path
 * and text_path: the projector and the text model (one file in ollama's layout). */
static void run_case_files(const char *text, const char *image, uint32_t nx, uint32_t ny,
                           const char *mm_path, const char *text_path)
{
    char name[128];
    snprintf(name, sizeof name, "%s.%s.ref.txt", text, image);
    char *ref = file_fixture_read(vision_fixture(name), NULL);
    corral_mmproj *mm = vision_load_mmproj(mm_path, "qwen3vl_merger");
    corral_image_embd embd;
    snprintf(name, sizeof name, "qwen3vl-%s.png", image);
    vision_encode_png(mm, vision_fixture(name), nx, ny, &embd);
    /* the merged grid, and the merger's row alone: the text width */
    assert_int_equal(embd.nx, nx / 8);
    assert_int_equal(embd.ny, ny / 8);
    assert_int_equal(embd.n_embd, 32);
    snprintf(name, sizeof name, "qwen35v.%s.embd.f32", image); /* one projector for both */
    float *want = vision_read_embd(vision_fixture(name), embd.n_tokens, embd.n_embd);
    snprintf(name, sizeof name, "qwen35 %s", image);
    vision_check_embd(name, embd.data, want, embd.n_tokens, embd.n_embd,
                      &(vision_tolerance){.max = EMBD_TOLERANCE});

    corral_model *m = vision_load_text(text_path, mm);
    /* the image's markers and the prompt, tokenized as the reference did */
    vision_prompt prompt;
    vision_prompt_ids(&prompt, m, mm, "<|im_start|>user\n",
                      "What is this?<|im_end|>\n<|im_start|>assistant\n", ref, 2);

    char logits[2048];
    snprintf(name, sizeof name, "%s.%s.logits.txt", text, image);
    snprintf(logits, sizeof logits, "%s", vision_fixture(name));
    corral_image_embd theirs = embd;
    theirs.data = want;
    check_text(m, ref, logits, &prompt, &theirs, "from the reference's rows", 512);
    check_text(m, ref, logits, &prompt, &embd, "from ours", 512);
    /* the recurrent layers carry their state from one batch of the image to the next */
    check_text(m, ref, logits, &prompt, &embd, "from ours", 4);

    corral_model_free(m);
    corral_image_embd_free(&embd);
    corral_mmproj_free(mm);
    free(want);
    free(ref);
}

static void run_case(const char *text, const char *image, uint32_t nx, uint32_t ny)
{
    char name[128], mm_path[2048], text_path[2048]; /* vision_fixture()'s buffers are reused */
    snprintf(mm_path, sizeof mm_path, "%s", vision_fixture("qwen35v-mmproj.gguf"));
    snprintf(name, sizeof name, "%s-text.gguf", text);
    snprintf(text_path, sizeof text_path, "%s", vision_fixture(name));
    run_case_files(text, image, nx, ny, mm_path, text_path);
}

static void test_dense_square(void **state) { (void)state; run_case("qwen35v", "square", 24, 24); }
static void test_dense_wide(void **state) { (void)state; run_case("qwen35v", "wide", 32, 24); }
static void test_moe_square(void **state) { (void)state; run_case("qwen35moev", "square", 24, 24); }
static void test_moe_wide(void **state) { (void)state; run_case("qwen35moev", "wide", 32, 24); }

/* ollama's single file (the tower inside, its names and keys; the text model's per-layer KV
 * heads, three sections, ssm_dt and MTP tensors) is its own projector and text model, and
 * answers as the pair does. */
static void test_single_file(void **state)
{
    (void)state;
    static const char *const texts[] = {"qwen35v", "qwen35moev"};
    char path[512], name[64];
    vision_temp_path(path, sizeof path, "qwen35", "single");
    for (size_t i = 0; i < 2; i++) {
        snprintf(name, sizeof name, "%s-text.gguf", texts[i]);
        qwen3vl_single_fixture_write(vision_fixture(name), vision_fixture("qwen35v-mmproj.gguf"),
                                     path, NULL, NULL, 0);
        corral_error err = {0};
        corral_model_file *file = corral_model_file_open(path, &err);
        assert_non_null(file);
        assert_true(corral_model_file_has_vision(file));
        corral_model_file_close(file);
        run_case_files(texts[i], "square", 24, 24, path, path);
        run_case_files(texts[i], "wide", 32, 24, path, path);
    }
    remove(path);
}

/* A single file without a tower tensor, or without a layer's time step bias under either
 * name, is refused by name. */
static void test_single_file_refusals(void **state)
{
    (void)state;
    char path[512];
    vision_temp_path(path, sizeof path, "qwen35", "single-spoiled");
    corral_error err = {0};
    qwen3vl_single_fixture_write(vision_fixture("qwen35v-text.gguf"),
                                 vision_fixture("qwen35v-mmproj.gguf"), path,
                                 "v.blk.2.norm2.weight", NULL, 0);
    assert_null(corral_mmproj_load(path, &err));
    printf("refused: %s\n", err.message);
    assert_non_null(strstr(err.message, "v.blk.2.norm2.weight"));
    qwen3vl_single_fixture_write(vision_fixture("qwen35v-text.gguf"),
                                 vision_fixture("qwen35v-mmproj.gguf"), path, "blk.1.ssm_dt", NULL,
                                 0);
    assert_null(corral_model_load(path, &err));
    printf("refused: %s\n", err.message);
    assert_non_null(strstr(err.message, "blk.1.ssm_dt"));
    qwen3vl_single_fixture_write(vision_fixture("qwen35v-text.gguf"),
                                 vision_fixture("qwen35v-mmproj.gguf"), path, "v.patch_embed.weight",
                                 NULL, 0);
    assert_null(corral_mmproj_load(path, &err));
    printf("refused: %s\n", err.message);
    assert_non_null(strstr(err.message, "v.patch_embed.weight"));
    remove(path);
}

/* The text model with attention.head_count_kv per layer as ollama writes it, heads[] its
 * values, written to dst. */
static void write_kv_heads(const char *dst, const int32_t heads[4])
{
    corral_error err = {0};
    gguf_file *in = gguf_open(vision_fixture("qwen35v-text.gguf"), &err);
    if (!in)
        fail_msg("%s", err.message);
    gguf_writer *w = gguf_writer_create();
    bool ok = w != NULL;
    for (size_t i = 0; ok && i < gguf_n_kv(in); i++) {
        const gguf_kv *kv = gguf_kv_at(in, i);
        if (strcmp(kv->key, "qwen35.attention.head_count_kv") != 0)
            ok = gguf_writer_copy_kv(w, kv, &err);
    }
    ok = ok && gguf_writer_add_array(w, "qwen35.attention.head_count_kv", GGUF_TYPE_INT32, heads,
                                     4, &err);
    for (int pass = 0; ok && pass < 2; pass++) {
        for (size_t i = 0; ok && i < gguf_n_tensors(in); i++)
            ok = gguf_write_fixture_copy(w, pass, gguf_tensor_at(in, i)->name,
                                         gguf_tensor_at(in, i), &err);
        if (pass == 0)
            ok = ok && gguf_writer_begin(w, dst, &err);
    }
    gguf_write_fixture_finish(w, ok, dst, &err);
    gguf_close(in);
}

/* Per-layer KV heads are read where the interval puts attention, and refused where they make
 * another layer the attention one or none. */
static void test_kv_heads_per_layer(void **state)
{
    (void)state;
    char path[512];
    vision_temp_path(path, sizeof path, "qwen35", "kv-heads");
    corral_error err = {0};
    write_kv_heads(path, (const int32_t[4]){0, 0, 0, 2});
    corral_model *m = corral_model_load(path, &err);
    if (!m)
        fail_msg("%s", err.message);
    corral_model_free(m);
    write_kv_heads(path, (const int32_t[4]){2, 0, 0, 2});
    assert_null(corral_model_load(path, &err));
    printf("refused: %s\n", err.message);
    assert_non_null(strstr(err.message, "layer 0 is attention"));
    write_kv_heads(path, (const int32_t[4]){0, 0, 0, 0});
    assert_null(corral_model_load(path, &err));
    printf("refused: %s\n", err.message);
    assert_non_null(strstr(err.message, "layer 3 is recurrent"));
    remove(path);
}

/* Qwen3-VL's projector (deepstack rows beside the merger's) does not fit qwen35, which has
 * no layers to take them; an image of the wrong width or grid is refused by the context,
 * which then holds nothing of it. */
static void test_refusals(void **state)
{
    (void)state;
    corral_error err = {0};
    corral_model *m = corral_model_load(vision_fixture("qwen35v-text.gguf"), &err);
    assert_non_null(m);
    corral_mmproj *mm = corral_mmproj_load(vision_fixture("qwen3vl-mmproj.gguf"), &err);
    assert_non_null(mm);
    assert_false(corral_mmproj_fits(mm, m, &err));
    printf("refused: %s\n", err.message);
    assert_non_null(strstr(err.message, "96 values"));
    corral_mmproj_free(mm);

    mm = corral_mmproj_load(vision_fixture("qwen35v-mmproj.gguf"), &err);
    assert_non_null(mm);
    corral_image_embd embd;
    vision_encode_png(mm, vision_fixture("qwen3vl-wide.png"), 32, 24, &embd);
    corral_context_params params;
    vision_context_params(&params, 64);
    corral_context *ctx = corral_context_create(m, &params, &err);
    assert_non_null(ctx);
    corral_image_embd wrong = embd;
    wrong.n_embd = 16;
    assert_false(corral_decode_image(ctx, 0, &wrong, &err));
    printf("refused: %s\n", err.message);
    assert_non_null(strstr(err.message, "32 values"));
    wrong = embd;
    wrong.nx = 3; /* 3 x 3 for 12 tokens */
    assert_false(corral_decode_image(ctx, 0, &wrong, &err));
    assert_int_equal(corral_seq_length(ctx, 0), 0);
    assert_true(corral_decode_image(ctx, 0, &embd, &err));
    assert_int_equal(corral_seq_length(ctx, 0), 12);
    corral_context_free(ctx);
    corral_image_embd_free(&embd);
    corral_mmproj_free(mm);
    corral_model_free(m);
}

/* On a Vulkan device (lavapipe where there is no GPU), every text layer there: the image's
 * rows through the device's Gated DeltaNet layers in order and its grid positions through
 * the gated attention give llama.cpp's logits and greedy ids, in one batch and in batches
 * of 4. Skipped where no device is usable. */
static void test_gpu(void **state)
{
    (void)state;
    setenv("CORRAL_VULKAN_ALLOW_CPU", "1", 0);
    corral_error err = {0};
    char text_path[2048];
    snprintf(text_path, sizeof text_path, "%s", vision_fixture("qwen35v-text.gguf"));
    corral_model *m = corral_model_load(text_path, &err);
    if (!m)
        fail_msg("%s", err.message);
    corral_context_params params;
    vision_context_params(&params, 128);
    params.images = true;
    params.n_gpu_layers = -1;
    corral_context *ctx = corral_context_create(m, &params, &err);
    assert_non_null(ctx);
    bool usable = corral_context_gpu_layers(ctx) > 0;
    corral_context_free(ctx);
    corral_model_free(m);
    if (!usable)
        skip();
    gpu_layers = -1;
    run_case("qwen35v", "wide", 32, 24);
    gpu_layers = 0;
}

/* --write-single DENSE MOE: the integration tests' copies of ollama's layout, for the dense
 * and the MoE text model. */
static char **single_out;

static void write_files_out(void **state)
{
    (void)state;
    static const char *const texts[] = {"qwen35v-text.gguf", "qwen35moev-text.gguf"};
    char mm_path[2048];
    snprintf(mm_path, sizeof mm_path, "%s", vision_fixture("qwen35v-mmproj.gguf"));
    for (size_t i = 0; i < 2; i++)
        qwen3vl_single_fixture_write(vision_fixture(texts[i]), mm_path, single_out[i], NULL, NULL,
                                     0);
}

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "--write-single") == 0) {
        single_out = argv + 2;
        const struct CMUnitTest write[] = {cmocka_unit_test(write_files_out)};
        return cmocka_run_group_tests(write, NULL, NULL);
    }
    if (argc != 1) {
        fprintf(stderr, "usage: %s [--write-single DENSE.gguf MOE.gguf]\n", argv[0]);
        return 2;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dense_square), cmocka_unit_test(test_dense_wide),
        cmocka_unit_test(test_moe_square),   cmocka_unit_test(test_moe_wide),
        cmocka_unit_test(test_refusals),     cmocka_unit_test(test_single_file),
        cmocka_unit_test(test_single_file_refusals), cmocka_unit_test(test_kv_heads_per_layer),
        cmocka_unit_test(test_gpu),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    corral_gpu_release(); /* the driver's objects freed before LeakSanitizer looks */
    return failed;
}

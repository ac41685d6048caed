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
#include <unistd.h>

#include <cmocka.h>

#include "corral/engine.h"
#include "file_fixture.h"
#include "gguf.h"
#include "gguf_write_fixture.h"
#include "qwen3vl_single_fixture.h"
#include "image/image.h"
#include "image/projector_preprocess.h"
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
#define MAX_IDS VISION_MAX_IDS

/* ids0, the image, ids2 through the text model: last logits and the greedy tokens. */
/* gpu_layers: the context's n_gpu_layers (-1: every layer that may go). */
static void check_text(const corral_model *m, const char *ref, const char *logits_file,
                       const int32_t *ids0, size_t n0, const corral_image_embd *embd,
                       const int32_t *ids2, size_t n2, const char *what, int gpu_layers)
{
    corral_context_params params;
    vision_context_params(&params, 128);
    params.images = true;
    params.n_gpu_layers = gpu_layers;
    corral_context *ctx = decode_around_image(m, &params, ids0, n0, embd, ids2, n2);
    size_t n_vocab = corral_model_n_vocab(m);
    const float *logits = corral_get_logits(ctx, n2 - 1);
    assert_non_null(logits);
    float worst = logits_file_diff(logits, n_vocab, logits_file);
    printf("qwen3vl %s: last logits max diff %.3g\n", what, worst);
    assert_true(worst <= LOGIT_TOLERANCE);
    check_greedy(ctx, logits, n_vocab, line_of(ref, "greedy_ids "), N_GREEDY);
    corral_context_free(ctx);
}

/* mm_path, text_path: the projector and the text model (one file in ollama's layout). */
static void run_case_files(const char *image, uint32_t nx, uint32_t ny, const char *mm_path,
                           const char *text_path)
{
    char name[128];
    snprintf(name, sizeof name, "qwen3vl.%s.ref.txt", image);
    char *ref = file_fixture_read(vision_fixture(name), NULL);
    corral_error err = {0};
    corral_mmproj *mm = corral_mmproj_load(mm_path, &err);
    if (!mm)
        fail_msg("%s", err.message);
    assert_string_equal(corral_mmproj_projector(mm), "qwen3vl_merger");
    corral_image_embd embd;
    snprintf(name, sizeof name, "qwen3vl-%s.png", image);
    vision_encode_png(mm, vision_fixture(name), nx, ny, &embd);
    /* the grid and the row: the text width (32) for the merger and each of 2 deepstack layers */
    assert_int_equal(embd.nx, nx / 8);
    assert_int_equal(embd.ny, ny / 8);
    assert_int_equal(embd.n_embd, 96);
    size_t size;
    snprintf(name, sizeof name, "qwen3vl.%s.embd.f32", image);
    float *want = file_fixture_read(vision_fixture(name), &size);
    assert_int_equal(size, embd.n_tokens * embd.n_embd * sizeof(float));
    float worst = 0.0f, worst_ds = 0.0f;
    double sum = 0.0;
    size_t count = embd.n_tokens * embd.n_embd;
    for (size_t i = 0; i < count; i++) {
        float diff = fabsf(embd.data[i] - want[i]);
        sum += diff;
        if (i % embd.n_embd < 32)
            worst = fmaxf(worst, diff);
        else
            worst_ds = fmaxf(worst_ds, diff);
    }
    printf("qwen3vl %s: embeddings max diff %.3g (merger), %.3g (deepstack), mean %.3g\n", image,
           worst, worst_ds, sum / (double)count);
    assert_true(worst <= EMBD_TOLERANCE && worst_ds <= EMBD_TOLERANCE);
    assert_true(sum / (double)count <= EMBD_MEAN_TOLERANCE);

    corral_model *m = corral_model_load(text_path, &err);
    if (!m)
        fail_msg("%s", err.message);
    assert_true(corral_mmproj_fits(mm, m, &err));
    /* the image's markers and the prompt, tokenized as the reference did */
    const corral_vocab *vocab = corral_model_vocab(m);
    char text[256];
    int32_t ids0[MAX_IDS], ids2[MAX_IDS], ref_ids[MAX_IDS];
    size_t n0, n2;
    snprintf(text, sizeof text, "<|im_start|>user\n%s", corral_mmproj_image_begin(mm));
    assert_true(corral_tokenize(vocab, text, strlen(text), true, true, ids0, MAX_IDS, &n0, &err));
    assert_int_equal(n0, chunk_ids(ref, 0, ref_ids));
    assert_memory_equal(ids0, ref_ids, n0 * sizeof *ids0);
    snprintf(text, sizeof text, "%sWhat is this?<|im_end|>\n<|im_start|>assistant\n",
             corral_mmproj_image_end(mm));
    assert_true(corral_tokenize(vocab, text, strlen(text), false, true, ids2, MAX_IDS, &n2, &err));
    assert_int_equal(n2, chunk_ids(ref, 2, ref_ids));
    assert_memory_equal(ids2, ref_ids, n2 * sizeof *ids2);

    snprintf(name, sizeof name, "qwen3vl.%s.logits.txt", image);
    corral_image_embd theirs = embd;
    theirs.data = want;
    check_text(m, ref, vision_fixture(name), ids0, n0, &theirs, ids2, n2,
               "from the reference's rows", 0);
    check_text(m, ref, vision_fixture(name), ids0, n0, &embd, ids2, n2, "from ours", 0);

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

typedef struct variant {
    const char *drop_key;            /* a key left out */
    const char *bool_key;            /* a key (re)set to bool_value */
    bool bool_value;
    const char *u32_key;             /* a key (re)set to u32_value */
    uint32_t u32_value;
    const char *rename_from, *rename_to; /* a tensor under another name */
    const char *flatten;             /* a tensor declared one-dimensional */
    const char *drop_tensor;         /* a tensor left out */
} variant;

static void temp_path(char *path, size_t size, const char *what)
{
    const char *dir = getenv("TMPDIR");
    snprintf(path, size, "%s/corral-test-qwen3vl-%ld-%s.gguf", dir && *dir ? dir : "/tmp",
             (long)getpid(), what);
}

static void write_variant(const char *src, const char *dst, const variant *v)
{
    corral_error err = {0};
    gguf_file *in = gguf_open(src, &err);
    if (!in)
        fail_msg("%s: %s", src, err.message);
    gguf_writer *w = gguf_writer_create();
    bool ok = w != NULL;
    for (size_t i = 0; ok && i < gguf_n_kv(in); i++) {
        const gguf_kv *kv = gguf_kv_at(in, i);
        if ((v->drop_key && strcmp(kv->key, v->drop_key) == 0) ||
            (v->bool_key && strcmp(kv->key, v->bool_key) == 0) ||
            (v->u32_key && strcmp(kv->key, v->u32_key) == 0))
            continue;
        ok = gguf_writer_copy_kv(w, kv, &err);
    }
    if (ok && v->bool_key)
        ok = gguf_writer_add_bool(w, v->bool_key, v->bool_value, &err);
    if (ok && v->u32_key)
        ok = gguf_writer_add_u32(w, v->u32_key, v->u32_value, &err);
    for (int pass = 0; ok && pass < 2; pass++) {
        for (size_t i = 0; ok && i < gguf_n_tensors(in); i++) {
            const gguf_tensor *t = gguf_tensor_at(in, i);
            if (v->drop_tensor && strcmp(t->name, v->drop_tensor) == 0)
                continue;
            const char *name = v->rename_from && strcmp(t->name, v->rename_from) == 0
                                   ? v->rename_to
                                   : t->name;
            int64_t flat[4] = {(int64_t)gguf_tensor_n_elems(t), 1, 1, 1};
            bool bad = v->flatten && strcmp(t->name, v->flatten) == 0;
            if (pass == 1)
                ok = gguf_writer_write_tensor(w, t->data, t->size_bytes, &err);
            else if (bad)
                ok = gguf_writer_add_tensor(w, name, t->type, 1, flat, &err);
            else
                ok = gguf_writer_add_tensor(w, name, t->type, t->n_dims, t->ne, &err);
        }
        if (pass == 0)
            ok = ok && gguf_writer_begin(w, dst, &err);
    }
    gguf_write_fixture_finish(w, ok, dst, &err);
    gguf_close(in);
}

/* ---- ollama's single file ---- */

/* ollama's single file is its own projector and text model, and answers as the pair does. */
static void test_single_file(void **state)
{
    (void)state;
    char path[512];
    temp_path(path, sizeof path, "single");
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
    temp_path(path, sizeof path, "single-spoiled");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        qwen3vl_single_fixture_write(vision_fixture("qwen3vl-text.gguf"),
                                     vision_fixture("qwen3vl-mmproj.gguf"), path, cases[i].drop,
                                     cases[i].indexes, cases[i].n);
        corral_error err = {0};
        corral_mmproj *mm = corral_mmproj_load(path, &err);
        if (mm)
            fail_msg("case %zu was loaded", i);
        printf("refused: %s\n", err.message);
        assert_non_null(strstr(err.message, cases[i].message));
    }
    remove(path);
}

/* Projector files broken one way each are refused, the message naming the fault. */
static void test_projector_refusals(void **state)
{
    (void)state;
    static const struct {
        variant v;
        const char *message;
    } cases[] = {
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
    temp_path(path, sizeof path, "spoiled");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        write_variant(vision_fixture("qwen3vl-mmproj.gguf"), path, &cases[i].v);
        corral_error err = {0};
        corral_mmproj *mm = corral_mmproj_load(path, &err);
        if (mm)
            fail_msg("case %zu was loaded", i);
        printf("refused: %s\n", err.message);
        assert_non_null(strstr(err.message, cases[i].message));
    }
    remove(path);
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
    temp_path(path, sizeof path, "text");
    corral_mmproj *mm = corral_mmproj_load(vision_fixture("qwen3vl-mmproj.gguf"), &err);
    assert_non_null(mm);
    write_variant(vision_fixture("qwen3vl-text.gguf"), path,
                  &(variant){.drop_key = "qwen3vl.n_deepstack_layers"});
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
    write_variant(vision_fixture("qwen3vl-text.gguf"), path,
                  &(variant){.u32_key = "qwen3vl.n_deepstack_layers", .u32_value = 3});
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
    int32_t ids0[MAX_IDS], ids2[MAX_IDS];
    size_t n0 = chunk_ids(ref, 0, ids0), n2 = chunk_ids(ref, 2, ids2);
    check_text(m, ref, vision_fixture("qwen3vl.wide.logits.txt"), ids0, n0, &embd, ids2, n2,
               "from ours, the last layer on the device", -1);
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

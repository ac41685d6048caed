/*
 * Vision against llama.cpp's multimodal library: for the vision/ references (a gemma3 and a
 * Qwen2.5-VL tiny model, each with a square PNG, a wide PNG and a JPEG), the reference's
 * preprocessed pixels through corral_mmproj_encode must give its image embedding; the prompt's
 * text chunks (tokenized with the projector's image markers) around that image must give its
 * last logits and its 16 greedy tokens, both from the reference's embeddings and from ours.
 * Tolerances are vision/README's (the encoder in F32 with ggml's GELU table, exact softmax
 * attention); at every level the encoder follows llama.cpp's order of operations and matches
 * its embeddings bit for bit, well inside them. An encoding asks its cancel before each block
 * and stops where it is told to.
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
#include "forward.h"
#include "gguf.h"
#include "file_fixture.h"
#include "onefile_fixture.h"
#include "vision_check.h"
#include "vision_ref_fixture.h"

#define EMBD_TOLERANCE 1e-4f
#define LOGIT_TOLERANCE 1e-3f
#define N_GREEDY 16

/* The prompt's text before and after "<__media__>", from its JSON string (the prompts use
 * only \n escapes). */
static void prompt_parts(const char *ref, char *before, char *after, size_t size)
{
    const char *p = line_of(ref, "prompt_json \"");
    char text[512];
    size_t n = 0;
    for (; *p && *p != '"' && n + 1 < sizeof text; p++) {
        if (*p == '\\' && p[1] == 'n') {
            text[n++] = '\n';
            p++;
        } else {
            text[n++] = *p;
        }
    }
    text[n] = '\0';
    const char *marker = strstr(text, "<__media__>");
    assert_non_null(marker);
    snprintf(before, size, "%.*s", (int)(marker - text), text);
    snprintf(after, size, "%s", marker + strlen("<__media__>"));
}

/* mm_path, text_path: the projector and the text model (one file for ollama's layout). */
static void run_case_files(const char *model, const char *image, const char *mm_path,
                           const char *text_path)
{
    char name[128];
    snprintf(name, sizeof name, "%s.%s.ref.txt", model, image);
    char *ref = file_fixture_read(vision_fixture(name), NULL);
    corral_error err = {0};

    /* the encoder, from the reference's pixels */
    corral_mmproj *mm = corral_mmproj_load(mm_path, &err);
    if (!mm)
        fail_msg("%s", err.message);
    int32_t dims[2] = {0, 0};
    assert_int_equal(ints_of(line_of(ref, "pixels 0 nx "), dims, 1), 1);
    assert_int_equal(ints_of(strstr(line_of(ref, "pixels 0 nx "), "ny ") + 3, dims + 1, 1), 1);
    size_t size;
    snprintf(name, sizeof name, "%s.%s.pixels.f32", model, image);
    float *pixels = file_fixture_read(vision_fixture(name), &size);
    assert_int_equal(size, (size_t)dims[0] * dims[1] * 3 * sizeof(float));
    corral_image_embd embd;
    assert_true(corral_mmproj_encode(mm, pixels, (uint32_t)dims[0], (uint32_t)dims[1], 2, &embd,
                                     &err));
    snprintf(name, sizeof name, "%s.%s.embd.f32", model, image);
    float *want = vision_read_embd(vision_fixture(name), embd.n_tokens, embd.n_embd);
    snprintf(name, sizeof name, "%s %s", model, image);
    vision_check_embd(name, embd.data, want, embd.n_tokens, embd.n_embd,
                      &(vision_tolerance){.max = EMBD_TOLERANCE});

    /* the text chunks around the image, tokenized with the projector's markers */
    corral_model *m = vision_load_text(text_path, mm);
    char before[512], after[512];
    prompt_parts(ref, before, after, sizeof before);
    vision_prompt prompt;
    vision_prompt_ids(&prompt, m, mm, before, after, ref, 2);

    /* The text model from the reference's embeddings (the text side alone), then from
     * ours (the whole): the last logits within the tolerance, and the 16 greedy tokens. */
    char logits[2048];
    snprintf(name, sizeof name, "%s.%s.logits.txt", model, image);
    snprintf(logits, sizeof logits, "%s", vision_fixture(name));
    corral_context_params params;
    vision_context_params(&params, 128);
    vision_check_texts(m, &params, &prompt, &embd, want, ref, logits, LOGIT_TOLERANCE, N_GREEDY,
                       model);

    corral_model_free(m);
    corral_image_embd_free(&embd);
    corral_mmproj_free(mm);
    free(want);
    free(pixels);
    free(ref);
}

static void run_case(const char *model, const char *image)
{
    char name[128], mm_path[2048], text_path[2048]; /* vision_fixture()'s buffers are reused */
    snprintf(name, sizeof name, "%s-mmproj.gguf", model);
    snprintf(mm_path, sizeof mm_path, "%s", vision_fixture(name));
    snprintf(name, sizeof name, "%s-text.gguf", model);
    snprintf(text_path, sizeof text_path, "%s", vision_fixture(name));
    run_case_files(model, image, mm_path, text_path);
}

/* family's pair merged into one file as ollama ships it (tokens per image: 0 for a family
 * without the key) is a model file with vision, its own projector and its own text model,
 * and gives exactly the pair's results. */
static void check_single_file(const char *family, uint32_t tokens)
{
    char text[64], mmproj[64], path[512];
    snprintf(text, sizeof text, "%s-text.gguf", family);
    snprintf(mmproj, sizeof mmproj, "%s-mmproj.gguf", family);
    vision_temp_path(path, sizeof path, "vision", family);
    onefile_fixture_write(vision_fixture(text), vision_fixture(mmproj), path, tokens, NULL, NULL);
    corral_error err = {0};
    corral_model_file *file = corral_model_file_open(path, &err);
    assert_non_null(file);
    assert_true(corral_model_file_has_vision(file));
    corral_model_file_close(file);
    assert_non_null(file = corral_model_file_open(vision_fixture(text), &err));
    assert_false(corral_model_file_has_vision(file));
    corral_model_file_close(file);
    run_case_files(family, "square", path, path);
    run_case_files(family, "wide", path, path);
    remove(path);
}

/* The gemma3 pair merged into one file the way ollama ships gemma3. */
static void test_gemma3_single_file(void **state)
{
    (void)state;
    check_single_file("gemma3", 16);
}

/* A single file missing a tower key, with a tensor of the wrong shape, or with a token count
 * that does not pool the patch grid is refused with a message naming what is wrong. */
static void test_gemma3_single_file_refusals(void **state)
{
    (void)state;
    static const struct {
        const char *drop_key, *bad_tensor;
        uint32_t tokens;
        const char *message;
    } cases[] = {
        {"gemma3.vision.patch_size", NULL, 16, "gemma3.vision.patch_size"},
        {"gemma3.vision.image_size", NULL, 16, "gemma3.vision.image_size"},
        {NULL, "v.blk.1.attn_q.weight", 16, "v.blk.1.attn_q.weight"},
        {NULL, "v.patch_embedding.weight", 16, "v.patch_embedding.weight"},
        {NULL, "mm.mm_input_projection.weight", 16, "mm.input_projection.weight"},
        {NULL, NULL, 15, "tokens per image"},
        {NULL, NULL, 0, "tokens per image"},
    };
    char path[512];
    vision_temp_path(path, sizeof path, "vision", "spoiled");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        onefile_fixture_write(vision_fixture("gemma3-text.gguf"),
                              vision_fixture("gemma3-mmproj.gguf"), path, cases[i].tokens,
                              cases[i].drop_key, cases[i].bad_tensor);
        vision_check_refused(path, cases[i].message, i);
    }
    remove(path);
}

/* The Qwen2.5-VL pair as ollama's "qwen25vl" single file: the text model under ollama's
 * architecture name and M-RoPE key, the tower without image size or MLP width, its full
 * attention blocks listed. */
static void test_qwen25vl_single_file(void **state)
{
    (void)state;
    check_single_file("qwen25vl", 0);
}

/* A qwen25vl file whose full-attention list is not every p-th block (ollama's default list
 * for a two-block tower), whose merger is malformed, or whose text lacks its M-RoPE sections
 * is refused with a message naming what is wrong. */
static void test_qwen25vl_single_file_refusals(void **state)
{
    (void)state;
    char path[512];
    vision_temp_path(path, sizeof path, "vision", "qwen-spoiled");
    corral_error err = {0};
    onefile_fixture_write(vision_fixture("qwen25vl-text.gguf"),
                          vision_fixture("qwen25vl-mmproj.gguf"), path, 0,
                          "qwen25vl.vision.fullatt_block_indexes", NULL);
    assert_null(corral_mmproj_load(path, &err));
    assert_non_null(strstr(err.message, "qwen25vl.vision.fullatt_block_indexes"));
    onefile_fixture_write(vision_fixture("qwen25vl-text.gguf"),
                          vision_fixture("qwen25vl-mmproj.gguf"), path, 0,
                          NULL, "v.merger.mlp.0.weight");
    assert_null(corral_mmproj_load(path, &err));
    assert_non_null(strstr(err.message, "v.merger.mlp.0.weight"));
    onefile_fixture_write(vision_fixture("qwen25vl-text.gguf"),
                          vision_fixture("qwen25vl-mmproj.gguf"), path, 0,
                          "qwen25vl.rope.mrope_section", NULL);
    assert_null(corral_model_load(path, &err));
    assert_non_null(strstr(err.message, "qwen25vl.rope.mrope_section"));
    remove(path);
}

static void test_gemma3_square(void **state) { (void)state; run_case("gemma3", "square"); }
static void test_gemma3_wide(void **state) { (void)state; run_case("gemma3", "wide"); }
static void test_gemma3_jpeg(void **state) { (void)state; run_case("gemma3", "square-jpeg"); }
static void test_qwen25vl_square(void **state) { (void)state; run_case("qwen25vl", "square"); }
static void test_qwen25vl_wide(void **state) { (void)state; run_case("qwen25vl", "wide"); }
static void test_qwen25vl_jpeg(void **state) { (void)state; run_case("qwen25vl", "square-jpeg"); }

/* An encoding asks its cancel before each of the tower's blocks and stops at the block it
 * is told to, with "cancelled" and no embeddings. */
static void test_cancel_between_blocks(void **state)
{
    (void)state;
    corral_error err = {0};
    corral_mmproj *mm = corral_mmproj_load(vision_fixture("qwen25vl-mmproj.gguf"), &err);
    assert_non_null(mm);
    float pixels[3 * 28 * 28] = {0};
    counting_cancel count = {0};
    corral_cancel cancel = {.requested = count_check, .user = &count};
    corral_image_embd embd;
    assert_true(corral_mmproj_encode_cancellable(mm, pixels, 28, 28, 1, &cancel, &embd, &err));
    int blocks = count.checks;
    assert_true(blocks >= 2);
    corral_image_embd_free(&embd);
    count = (counting_cancel){.stop_at = 2};
    assert_false(corral_mmproj_encode_cancellable(mm, pixels, 28, 28, 1, &cancel, &embd, &err));
    assert_string_equal(err.message, CORRAL_CANCELLED);
    assert_int_equal(count.checks, 2);
    assert_null(embd.data);
    corral_mmproj_free(mm);
}

/* Files that are not projectors, pixels of a size the projector does not take, and an image
 * whose width is not the model's are refused with a message; nothing is decoded. */
static void test_refusals(void **state)
{
    (void)state;
    corral_error err = {0};
    assert_null(corral_mmproj_load(vision_fixture("gemma3-text.gguf"), &err));
    assert_non_null(strstr(err.message, "not a projector file"));
    corral_mmproj *mm = corral_mmproj_load(vision_fixture("qwen25vl-mmproj.gguf"), &err);
    assert_non_null(mm);
    float pixels[3 * 28 * 42] = {0};
    corral_image_embd embd;
    assert_false(corral_mmproj_encode(mm, pixels, 42, 28, 1, &embd, &err)); /* 42: not 28k */
    assert_false(corral_mmproj_encode(mm, pixels, 0, 28, 1, &embd, &err));
    /* more patches than any preprocessing makes: refused before a pixel is read */
    assert_false(corral_mmproj_encode(mm, pixels, 28 * 200, 28 * 200, 1, &embd, &err));
    assert_non_null(strstr(err.message, "patches"));
    assert_true(corral_mmproj_encode(mm, pixels, 28, 28, 1, &embd, &err));
    assert_int_equal(embd.n_tokens, 1);

    corral_model *m = corral_model_load(vision_fixture("qwen25vl-text.gguf"), &err);
    assert_non_null(m);
    corral_context_params params;
    corral_context_params_init(&params);
    params.n_ctx = 64;
    corral_context *ctx = corral_context_create(m, &params, &err);
    assert_non_null(ctx);
    corral_image_embd wrong = embd;
    wrong.n_embd = 32;
    assert_false(corral_decode_image(ctx, 0, &wrong, &err));
    wrong = embd;
    wrong.nx = 2; /* 2 x 1 grid for one token */
    assert_false(corral_decode_image(ctx, 0, &wrong, &err));
    assert_false(corral_decode_image(ctx, 1, &embd, &err)); /* no sequence 1 */
    assert_int_equal(corral_seq_length(ctx, 0), 0);
    corral_context_free(ctx);
    corral_model_free(m);
    corral_image_embd_free(&embd);
    corral_mmproj_free(mm);
}

/* M-RoPE positions survive truncation: the text after an image, evaluated again after
 * truncating back to the image's end, gives the same logits (its positions continue from
 * the image's grid, not from its token count). */
static void test_mrope_truncate(void **state)
{
    (void)state;
    corral_error err = {0};
    corral_mmproj *mm = corral_mmproj_load(vision_fixture("qwen25vl-mmproj.gguf"), &err);
    corral_model *m = corral_model_load(vision_fixture("qwen25vl-text.gguf"), &err);
    assert_non_null(mm);
    assert_non_null(m);
    size_t size;
    float *pixels = file_fixture_read(vision_fixture("qwen25vl.wide.pixels.f32"), &size);
    corral_image_embd embd;
    assert_true(corral_mmproj_encode(mm, pixels, 168, 84, 1, &embd, &err));
    corral_context_params params;
    corral_context_params_init(&params);
    params.n_ctx = 128;
    params.kv_type = CORRAL_KV_F32;
    corral_context *ctx = corral_context_create(m, &params, &err);
    assert_non_null(ctx);
    int32_t before[] = {302, 84, 82, 260, 198, 304}, after[] = {305, 35, 286, 66, 81};
    corral_batch batch = {.n_tokens = 6, .tokens = before};
    assert_true(corral_decode(ctx, &batch, &err));
    assert_true(corral_decode_image(ctx, 0, &embd, &err));
    uint32_t image_end = corral_seq_length(ctx, 0);
    assert_int_equal(image_end, 6 + 18);
    batch = (corral_batch){.n_tokens = 5, .tokens = after};
    assert_true(corral_decode(ctx, &batch, &err));
    float first[307];
    memcpy(first, corral_get_logits(ctx, 4), sizeof first);
    corral_seq_truncate(ctx, 0, image_end);
    assert_true(corral_decode(ctx, &batch, &err));
    assert_memory_equal(corral_get_logits(ctx, 4), first, sizeof first);
    corral_context_free(ctx);
    corral_model_free(m);
    corral_image_embd_free(&embd);
    corral_mmproj_free(mm);
    free(pixels);
}

/* [before][image, when given][after] decoded into a fresh qwen2vl context with an F32 cache; with
 * discard > 0, that many cells after the first keep are then shifted out; then one more
 * token. */
static corral_context *qwen_context(corral_model *m, const int32_t *before, size_t n_before,
                                    const corral_image_embd *image, const int32_t *after,
                                    size_t n_after, uint32_t keep, uint32_t discard,
                                    int32_t last)
{
    corral_error err = {0};
    corral_context_params params;
    corral_context_params_init(&params);
    params.n_ctx = 128;
    params.kv_type = CORRAL_KV_F32;
    corral_context *ctx = corral_context_create(m, &params, &err);
    assert_non_null(ctx);
    corral_batch batch = {.n_tokens = n_before, .tokens = before};
    assert_true(corral_decode(ctx, &batch, &err));
    if (image)
        assert_true(corral_decode_image(ctx, 0, image, &err));
    batch = (corral_batch){.n_tokens = n_after, .tokens = after};
    assert_true(corral_decode(ctx, &batch, &err));
    if (discard)
        assert_true(corral_seq_shift(ctx, 0, keep, discard, &err));
    batch = (corral_batch){.n_tokens = 1, .tokens = &last};
    assert_true(corral_decode(ctx, &batch, &err));
    return ctx;
}

/* Both contexts hold as many cells with the same first-layer keys; frees both. */
static void same_first_layer_keys(const corral_model *m, corral_context *shifted,
                                  corral_context *fresh)
{
    uint32_t n = corral_seq_length(fresh, 0);
    assert_int_equal(corral_seq_length(shifted, 0), n);
    size_t width = (size_t)m->hp.n_head_kv * m->hp.head_dim_k;
    float a[256], b[256];
    assert_true(width <= 256);
    for (uint32_t cell = 0; cell < n; cell++) {
        kv_read_key(shifted, 0, 0, cell, a);
        kv_read_key(fresh, 0, 0, cell, b);
        for (size_t i = 0; i < width; i++)
            assert_true(fabsf(a[i] - b[i]) <= 1e-5f);
    }
    corral_context_free(shifted);
    corral_context_free(fresh);
}

/*
 * A context shift with M-RoPE positions: after dropping text before an image, or the image
 * itself, every cell's first-layer key (which depends on its token and rotary position only)
 * equals the one a context that never held the dropped cells computes, and so does the next
 * token's: the cells turned back by the positions the dropped ones spanned (an image its
 * grid's longer side), and the positions after them continue from there.
 */
static void test_mrope_shift(void **state)
{
    (void)state;
    corral_error err = {0};
    corral_mmproj *mm = corral_mmproj_load(vision_fixture("qwen25vl-mmproj.gguf"), &err);
    corral_model *m = corral_model_load(vision_fixture("qwen25vl-text.gguf"), &err);
    assert_non_null(mm);
    assert_non_null(m);
    size_t size;
    float *pixels = file_fixture_read(vision_fixture("qwen25vl.wide.pixels.f32"), &size);
    corral_image_embd embd;
    assert_true(corral_mmproj_encode(mm, pixels, 168, 84, 1, &embd, &err));
    int32_t before[] = {302, 84, 82, 260, 198, 304}, kept[] = {302, 84, 304};
    int32_t after[] = {305, 35, 286, 66};
    /* text before the image out; the image itself out (18 cells, 6 positions) */
    same_first_layer_keys(m, qwen_context(m, before, 6, &embd, after, 4, 2, 3, 81),
                          qwen_context(m, kept, 3, &embd, after, 4, 0, 0, 81));
    same_first_layer_keys(m, qwen_context(m, before, 6, &embd, after, 4, 6, 18, 81),
                          qwen_context(m, before, 6, NULL, after, 4, 0, 0, 81));
    corral_model_free(m);
    corral_image_embd_free(&embd);
    corral_mmproj_free(mm);
    free(pixels);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_refusals),     cmocka_unit_test(test_cancel_between_blocks),
        cmocka_unit_test(test_mrope_truncate),
        cmocka_unit_test(test_mrope_shift),
        cmocka_unit_test(test_gemma3_square), cmocka_unit_test(test_gemma3_wide),
        cmocka_unit_test(test_gemma3_jpeg),   cmocka_unit_test(test_gemma3_single_file),
        cmocka_unit_test(test_gemma3_single_file_refusals),
        cmocka_unit_test(test_qwen25vl_single_file),
        cmocka_unit_test(test_qwen25vl_single_file_refusals),   cmocka_unit_test(test_qwen25vl_square),
        cmocka_unit_test(test_qwen25vl_wide), cmocka_unit_test(test_qwen25vl_jpeg),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * Images and the batch size, with the tiny vision fixtures: an image's token count is known
 * from its size without encoding it (the same as the encoder makes); a causal image
 * (qwen2.5-vl) longer than the context's batch goes through several batches and gives the
 * logits one batch gives; an image whose tokens see each other both ways (gemma3) needs one
 * batch, which corral_mmproj_batch_tokens sizes, and a smaller one is refused with the numbers.
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

static const char *fixture(const char *name)
{
    static char path[2][2048];
    static int next;
    const char *dir = getenv("CORRAL_FIXTURES");
    char *p = path[next++ % 2];
    snprintf(p, sizeof path[0], "%s/vision/%s", dir ? dir : "tests/fixtures", name);
    return p;
}

/* The fixture's reference pixels (nx x ny) encoded by mm. */
static void encode_fixture(const corral_mmproj *mm, const char *name, uint32_t nx, uint32_t ny,
                           corral_image_embd *out)
{
    FILE *f = fopen(fixture(name), "rb");
    assert_non_null(f);
    size_t n = (size_t)nx * ny * 3;
    float *pixels = malloc(n * sizeof *pixels);
    assert_non_null(pixels);
    assert_int_equal(fread(pixels, sizeof *pixels, n, f), n);
    fclose(f);
    corral_error err = {0};
    assert_true(corral_mmproj_encode(mm, pixels, nx, ny, 1, out, &err));
    free(pixels);
}

static void test_counts_without_encoding(void **state)
{
    (void)state;
    corral_error err = {0};
    corral_mmproj *gemma = corral_mmproj_load(fixture("gemma3-mmproj.gguf"), &err);
    corral_mmproj *qwen = corral_mmproj_load(fixture("qwen25vl-mmproj.gguf"), &err);
    corral_model *gemma_text = corral_model_load(fixture("gemma3-text.gguf"), &err);
    corral_model *qwen_text = corral_model_load(fixture("qwen25vl-text.gguf"), &err);
    assert_true(gemma && qwen && gemma_text && qwen_text);
    corral_image_embd embd;
    encode_fixture(gemma, "gemma3.square.pixels.f32", 64, 64, &embd);
    assert_int_equal(corral_mmproj_image_tokens(gemma, 64, 64), embd.n_tokens);
    corral_image_embd_free(&embd);
    encode_fixture(qwen, "qwen25vl.wide.pixels.f32", 168, 84, &embd);
    assert_int_equal(corral_mmproj_image_tokens(qwen, 168, 84), embd.n_tokens);
    corral_image_embd_free(&embd);
    assert_int_equal(corral_mmproj_image_tokens(qwen, 84, 84), 9);
    assert_int_equal(corral_mmproj_image_tokens(gemma, 32, 64), 0); /* not the square */
    assert_int_equal(corral_mmproj_image_tokens(qwen, 42, 28), 0);  /* not 28k */
    /* gemma3's images go whole through one batch: its 16 tokens; qwen's may be split */
    assert_int_equal(corral_mmproj_batch_tokens(gemma, gemma_text), 16);
    assert_int_equal(corral_mmproj_batch_tokens(qwen, qwen_text), 1);
    corral_model_free(gemma_text);
    corral_model_free(qwen_text);
    corral_mmproj_free(gemma);
    corral_mmproj_free(qwen);
}

/* text, the image, text in a context of n_batch; the last logits copied to out. */
static bool decode_around(const corral_model *m, uint32_t n_batch, const corral_image_embd *embd,
                          float *out, corral_error *err)
{
    corral_context_params params;
    corral_context_params_init(&params);
    params.n_ctx = 64;
    params.n_batch = n_batch;
    params.n_threads = 1;
    params.kv_type = CORRAL_KV_F32;
    corral_context *ctx = corral_context_create(m, &params, err);
    assert_non_null(ctx);
    int32_t before[] = {1, 2, 3}, after[] = {4, 5, 6, 7};
    corral_batch batch = {.n_tokens = 3, .tokens = before};
    assert_true(corral_decode(ctx, &batch, err));
    bool ok = corral_decode_image(ctx, 0, embd, err);
    if (ok) {
        batch = (corral_batch){.n_tokens = 4, .tokens = after};
        assert_true(corral_decode(ctx, &batch, err));
        memcpy(out, corral_get_logits(ctx, 3), corral_model_n_vocab(m) * sizeof *out);
    }
    corral_context_free(ctx);
    return ok;
}

static void test_batches(void **state)
{
    (void)state;
    corral_error err = {0};
    const char *names[][3] = {{"qwen25vl-mmproj.gguf", "qwen25vl-text.gguf", "qwen25vl.wide.pixels.f32"},
                              {"gemma3-mmproj.gguf", "gemma3-text.gguf", "gemma3.square.pixels.f32"}};
    const uint32_t sides[][2] = {{168, 84}, {64, 64}};
    for (int k = 0; k < 2; k++) {
        corral_mmproj *mm = corral_mmproj_load(fixture(names[k][0]), &err);
        corral_model *m = corral_model_load(fixture(names[k][1]), &err);
        assert_true(mm && m);
        corral_image_embd embd;
        encode_fixture(mm, names[k][2], sides[k][0], sides[k][1], &embd);
        size_t n_vocab = corral_model_n_vocab(m);
        float *whole = malloc(n_vocab * sizeof *whole), *split = malloc(n_vocab * sizeof *split);
        assert_true(whole && split);
        assert_true(decode_around(m, 64, &embd, whole, &err));
        if (k == 0) { /* 18 causal tokens in batches of 4: the same logits */
            assert_true(decode_around(m, 4, &embd, split, &err));
            assert_memory_equal(split, whole, n_vocab * sizeof *whole);
        } else { /* 16 tokens that see each other both ways: never in pieces */
            assert_false(decode_around(m, 8, &embd, split, &err));
            assert_non_null(strstr(err.message, "an image of 16 tokens is larger than the batch (8"));
            assert_true(decode_around(m, 16, &embd, split, &err));
            assert_memory_equal(split, whole, n_vocab * sizeof *whole);
        }
        free(whole);
        free(split);
        corral_image_embd_free(&embd);
        corral_model_free(m);
        corral_mmproj_free(mm);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_counts_without_encoding),
        cmocka_unit_test(test_batches),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

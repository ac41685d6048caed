/*
 * minicpm-v (projector kind "resampler") against llama.cpp's multimodal library: the tiny
 * vision/minicpmv-* pair and the 32 x 32 PNG minicpmv-small.png (the tower's own size, so neither
 * llama.cpp version resizes it) must give the reference's image embeddings through our
 * decode, preprocessing and encoder, its prompt ids around the image (<image> ... </image>),
 * its last logits and its 16 greedy tokens. Then the sizes: what an image becomes and how
 * many tokens it gives, larger images (which llama.cpp slices) refused; and hostile
 * projector files, each refused with a message naming what is wrong.
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
#include "image/image.h"
#include "image/preprocess.h"
#include "image/projector_preprocess.h"
#include "tensor_type.h"

#define EMBD_TOLERANCE 1e-4f
#define LOGIT_TOLERANCE 1e-3f
#define N_GREEDY 16
#define MAX_IDS 64

static const char *fixture(const char *name)
{
    static char path[4][2048];
    static int next;
    const char *dir = getenv("CORRAL_FIXTURES");
    char *p = path[next++ % 4];
    snprintf(p, sizeof path[0], "%s/vision/%s", dir ? dir : "tests/fixtures", name);
    return p;
}

/* The text after `key` at the start of a line of ref, or fail. */
static const char *line_of(const char *ref, const char *key)
{
    char header[96];
    snprintf(header, sizeof header, "\n%s", key);
    const char *p = strstr(ref, header);
    if (!p)
        fail_msg("'%s' not found", key);
    return p + strlen(header);
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

static size_t chunk_ids(const char *ref, int chunk, int32_t *ids)
{
    char key[32];
    snprintf(key, sizeof key, "chunk %d text ", chunk);
    const char *p = strchr(line_of(ref, key), ':');
    assert_non_null(p);
    return ints_of(p + 1, ids, MAX_IDS);
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

static int32_t argmax(const float *logits, size_t n)
{
    size_t best = 0;
    for (size_t i = 1; i < n; i++)
        if (logits[i] > logits[best])
            best = i;
    return (int32_t)best;
}

/* The prompt through the text model with image embd between ids0 and ids2: the last logits
 * within the tolerance of the reference's, then its 16 greedy tokens. */
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
    char *text = file_fixture_read(fixture("minicpmv.small.logits.txt"), NULL), *p = text;
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
    assert_int_equal(ints_of(line_of(ref, "greedy_ids "), want, N_GREEDY), N_GREEDY);
    for (int i = 0; i < N_GREEDY; i++) {
        greedy[i] = argmax(logits, n_vocab);
        batch = (corral_batch){.n_tokens = 1, .tokens = &greedy[i]};
        assert_true(corral_decode(ctx, &batch, &err));
        logits = corral_get_logits(ctx, 0);
    }
    assert_memory_equal(greedy, want, sizeof greedy);
    corral_context_free(ctx);
}

/* The image file's pixels as the projector asks for them. */
static image_pixels *pixels_of(const corral_mmproj *mm, const char *file, corral_error *err)
{
    size_t len;
    uint8_t *bytes = file_fixture_read(fixture(file), &len);
    image_rgb *rgb = image_decode(bytes, len, NULL, err);
    free(bytes);
    assert_non_null(rgb);
    corral_image_params params;
    corral_mmproj_image_params(mm, &params);
    image_preprocess pre = image_preprocess_from_params(&params);
    image_pixels *pixels = image_preprocess_run(&pre, rgb, err);
    image_rgb_free(rgb);
    return pixels;
}

static void test_small(void **state)
{
    (void)state;
    corral_error err = {0};
    char *ref = file_fixture_read(fixture("minicpmv.small.ref.txt"), NULL);
    corral_mmproj *mm = corral_mmproj_load(fixture("minicpmv-mmproj.gguf"), &err);
    if (!mm)
        fail_msg("%s", err.message);
    assert_string_equal(corral_mmproj_projector(mm), "resampler");
    image_pixels *pixels = pixels_of(mm, "minicpmv-small.png", &err);
    assert_non_null(pixels);
    assert_int_equal(pixels->nx, 32);
    assert_int_equal(pixels->ny, 32);
    assert_int_equal(corral_mmproj_image_tokens(mm, pixels->nx, pixels->ny), 8);
    corral_image_embd embd;
    assert_true(corral_mmproj_encode(mm, pixels->data, pixels->nx, pixels->ny, 2, &embd, &err));
    image_pixels_free(pixels);
    assert_int_equal(embd.n_tokens, 8); /* clip.minicpmv_query_num */
    size_t size;
    float *want = file_fixture_read(fixture("minicpmv.small.embd.f32"), &size);
    assert_int_equal(size, embd.n_tokens * embd.n_embd * sizeof(float));
    float worst = 0.0f;
    for (size_t i = 0; i < embd.n_tokens * embd.n_embd; i++)
        worst = fmaxf(worst, fabsf(embd.data[i] - want[i]));
    printf("minicpmv small: embeddings max diff %.3g\n", worst);
    assert_true(worst <= EMBD_TOLERANCE);

    corral_model *m = corral_model_load(fixture("minicpmv-text.gguf"), &err);
    if (!m)
        fail_msg("%s", err.message);
    assert_true(corral_mmproj_fits(mm, m, &err));
    /* "Describe <__media__> now": the marks are the vocabulary's own tokens */
    const corral_vocab *vocab = corral_model_vocab(m);
    int32_t ids0[MAX_IDS], ids2[MAX_IDS], want_ids[MAX_IDS];
    char text[128];
    snprintf(text, sizeof text, "Describe %s", corral_mmproj_image_begin(mm));
    size_t n0 = tokenize(vocab, text, true, ids0);
    assert_int_equal(n0, chunk_ids(ref, 0, want_ids));
    assert_memory_equal(ids0, want_ids, n0 * sizeof *ids0);
    snprintf(text, sizeof text, "%s now", corral_mmproj_image_end(mm));
    size_t n2 = tokenize(vocab, text, false, ids2);
    assert_int_equal(n2, chunk_ids(ref, 2, want_ids));
    assert_memory_equal(ids2, want_ids, n2 * sizeof *ids2);

    corral_image_embd theirs = embd;
    theirs.data = want;
    check_text(m, ref, ids0, n0, &theirs, ids2, n2, "from the reference's embeddings");
    check_text(m, ref, ids0, n0, &embd, ids2, n2, "from ours");
    corral_model_free(m);
    corral_image_embd_free(&embd);
    corral_mmproj_free(mm);
    free(want);
    free(ref);
}

/* What images become: one no larger than the tower's square is stretched onto it (aspect
 * not kept, as llama.cpp's overview) and gives n_query tokens; a larger one, which llama.cpp
 * cuts into slices, is refused with a message saying so. */
static void test_sizes(void **state)
{
    (void)state;
    corral_error err = {0};
    corral_mmproj *mm = corral_mmproj_load(fixture("minicpmv-mmproj.gguf"), &err);
    assert_non_null(mm);
    corral_image_params params;
    corral_mmproj_image_params(mm, &params);
    assert_int_equal(params.resize, CORRAL_IMAGE_STRETCH);
    image_preprocess pre = image_preprocess_from_params(&params);
    const uint32_t taken[][2] = {{32, 32}, {1, 1}, {20, 12}, {32, 1}, {7, 32}};
    for (size_t i = 0; i < sizeof taken / sizeof taken[0]; i++) {
        uint32_t nx = 0, ny = 0;
        assert_true(image_preprocess_size(&pre, taken[i][0], taken[i][1], &nx, &ny, &err));
        assert_int_equal(nx, 32);
        assert_int_equal(ny, 32);
        assert_int_equal(corral_mmproj_image_tokens(mm, nx, ny), 8);
    }
    const uint32_t sliced[][2] = {{33, 32}, {32, 33}, {64, 64}, {4000, 3}, {65535, 65535}};
    for (size_t i = 0; i < sizeof sliced / sizeof sliced[0]; i++) {
        uint32_t nx = 0, ny = 0;
        assert_false(image_preprocess_size(&pre, sliced[i][0], sliced[i][1], &nx, &ny, &err));
        assert_non_null(strstr(err.message, "slices"));
    }
    /* a stretched image's pixels: the reference's bilinear rule from 20 x 12 onto 32 x 32 */
    image_rgb *rgb = image_rgb_create(20, 12, &err);
    assert_non_null(rgb);
    for (size_t i = 0; i < 20 * 12 * 3; i++)
        rgb->pixels[i] = (uint8_t)(i * 7);
    image_pixels *pixels = image_preprocess_run(&pre, rgb, &err);
    image_rgb *stretched = image_resize_bilinear(rgb, 32, 32, &err);
    assert_non_null(pixels);
    assert_non_null(stretched);
    for (size_t i = 0; i < 32 * 32 * 3; i++)
        assert_true(pixels->data[i] == ((float)stretched->pixels[i] / 255.0f - 0.5f) / 0.5f);
    image_rgb_free(stretched);
    image_rgb_free(rgb);
    image_pixels_free(pixels);
    /* only the tower's square and its sides in whole patches go to the encoder */
    assert_int_equal(corral_mmproj_image_tokens(mm, 28, 32), 0);
    float zeros[3 * 32 * 30] = {0};
    corral_image_embd embd;
    assert_false(corral_mmproj_encode(mm, zeros, 30, 32, 1, &embd, &err));
    assert_non_null(strstr(err.message, "multiples of 4"));
    corral_mmproj_free(mm);
}

/* ---- hostile projector files: the fixture rewritten with one thing wrong ---- */

typedef struct variant {
    const char *drop;    /* a tensor left out */
    const char *reshape; /* a tensor declared with `shape` instead (zeros) */
    int64_t shape[2];
    const char *key;     /* a metadata key replaced by `value`, or removed */
    int64_t value;
    bool remove;
    const char *expect;  /* in the message */
} variant;

static void write_variant(const variant *v, const char *path)
{
    corral_error err = {0};
    gguf_file *src = gguf_open(fixture("minicpmv-mmproj.gguf"), &err);
    assert_non_null(src);
    gguf_writer *w = gguf_writer_create();
    bool ok = w != NULL;
    for (size_t i = 0; ok && i < gguf_n_kv(src); i++) {
        const gguf_kv *kv = gguf_kv_at(src, i);
        if (v->key && strcmp(kv->key, v->key) == 0)
            continue;
        ok = gguf_writer_copy_kv(w, kv, &err);
    }
    if (ok && v->key && !v->remove) {
        if (strcmp(v->key, "clip.minicpmv_version") == 0) {
            int32_t value = (int32_t)v->value;
            ok = gguf_writer_add_scalar(w, v->key, GGUF_TYPE_INT32, &value, &err);
        } else if (strcmp(v->key, "clip.use_gelu") == 0) {
            ok = gguf_writer_add_bool(w, v->key, v->value != 0, &err);
        } else {
            ok = gguf_writer_add_u32(w, v->key, (uint32_t)v->value, &err);
        }
    }
    for (int pass = 0; ok && pass < 2; pass++) {
        if (pass == 1)
            ok = gguf_writer_begin(w, path, &err);
        for (size_t i = 0; ok && i < gguf_n_tensors(src); i++) {
            const gguf_tensor *t = gguf_tensor_at(src, i);
            if (v->drop && strcmp(t->name, v->drop) == 0)
                continue;
            if (v->reshape && strcmp(t->name, v->reshape) == 0) {
                size_t bytes = (size_t)(v->shape[0] * v->shape[1]) * sizeof(float);
                if (pass == 0) {
                    ok = gguf_writer_add_tensor(w, t->name, TENSOR_TYPE_F32, 2, v->shape, &err);
                } else {
                    float *zeros = calloc(1, bytes);
                    assert_non_null(zeros);
                    ok = gguf_writer_write_tensor(w, zeros, bytes, &err);
                    free(zeros);
                }
                continue;
            }
            ok = gguf_write_fixture_copy(w, pass, t->name, t, &err);
        }
    }
    gguf_write_fixture_finish(w, ok, path, &err);
    gguf_close(src);
}

static void test_hostile_files(void **state)
{
    (void)state;
    const variant variants[] = {
        {.drop = "resampler.attn.q.bias", .expect = "resampler.attn.q.bias"},
        {.drop = "resampler.query", .expect = "resampler.query"},
        {.drop = "resampler.proj.weight", .expect = "resampler.proj.weight"},
        {.drop = "v.position_embd.weight", .expect = "v.position_embd.weight"},
        {.drop = "resampler.ln_post.bias", .expect = "resampler.ln_post.bias"},
        /* the position table must have llama.cpp's 70 x 70 rows */
        {.reshape = "v.position_embd.weight", .shape = {32, 64}, .expect = "position_embd"},
        /* the output must be square, heads 128 wide */
        {.reshape = "resampler.proj.weight", .shape = {128, 64}, .expect = "square"},
        {.reshape = "resampler.proj.weight", .shape = {96, 96}, .expect = "multiple of 128"},
        {.reshape = "resampler.kv.weight", .shape = {16, 128}, .expect = "resampler.kv.weight"},
        {.reshape = "resampler.query", .shape = {64, 8}, .expect = "resampler.query"},
        {.key = "clip.minicpmv_version", .value = 7, .expect = "minicpmv_version 7"},
        {.key = "clip.minicpmv_version", .value = -3, .expect = "minicpmv_version -3"},
        {.key = "clip.minicpmv_query_num", .value = 4000000000, .expect = "query_num"},
        /* the query count must match the query tensor's rows */
        {.key = "clip.minicpmv_query_num", .value = 64, .expect = "resampler.query"},
        {.key = "clip.use_gelu", .remove = true, .expect = "use_gelu"},
        {.key = "clip.use_gelu", .value = 0, .expect = "use_gelu"},
        {.key = "clip.vision.image_size", .value = 30, .expect = "patches"},
    };
    char path[256];
    snprintf(path, sizeof path, "/tmp/corral-minicpmv-%d.gguf", (int)getpid());
    for (size_t i = 0; i < sizeof variants / sizeof variants[0]; i++) {
        write_variant(&variants[i], path);
        corral_error err = {0};
        corral_mmproj *mm = corral_mmproj_load(path, &err);
        if (mm || !strstr(err.message, variants[i].expect))
            fail_msg("variant %zu: loaded %d, message '%s', expected '%s'", i, mm != NULL,
                     err.message, variants[i].expect);
    }
    unlink(path);
    /* and the fixture itself, rewritten unchanged, loads: the writer is not the refusal */
    write_variant(&(variant){0}, path);
    corral_error err = {0};
    corral_mmproj *mm = corral_mmproj_load(path, &err);
    assert_non_null(mm);
    corral_mmproj_free(mm);
    unlink(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_small),
        cmocka_unit_test(test_sizes),
        cmocka_unit_test(test_hostile_files),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

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
#include "image/slices.h"
#include "mmproj.h"
#include "tensor_type.h"
#include "vision_ref_fixture.h"

#define EMBD_TOLERANCE 1e-4f
#define LOGIT_TOLERANCE 1e-3f
#define N_GREEDY 16
#define MAX_IDS VISION_MAX_IDS

/* A prompt as mtmd evaluates it: text ids and image parts in turn. */
typedef struct segment {
    int32_t ids[MAX_IDS];
    size_t n_ids;          /* 0: an image part */
    corral_image_embd embd; /* its rows (not owned) */
} segment;

/* The segments through the text model: the last logits within the tolerance of the
 * reference's (logits_file), then its 16 greedy tokens. */
static void check_text(const corral_model *m, const char *ref, const char *logits_file,
                       const segment *segs, size_t n_segs, const char *what)
{
    corral_error err = {0};
    corral_context_params params;
    vision_context_params(&params, 256);
    corral_context *ctx = corral_context_create(m, &params, &err);
    assert_non_null(ctx);
    for (size_t i = 0; i < n_segs; i++) {
        corral_batch batch = {.n_tokens = segs[i].n_ids, .tokens = segs[i].ids};
        assert_true(segs[i].n_ids ? corral_decode(ctx, &batch, &err)
                                  : corral_decode_image(ctx, 0, &segs[i].embd, &err));
    }
    assert_true(n_segs > 0 && segs[n_segs - 1].n_ids > 0);
    size_t n_vocab = corral_model_n_vocab(m);
    const float *logits = corral_get_logits(ctx, segs[n_segs - 1].n_ids - 1);
    assert_non_null(logits);
    float worst = logits_file_diff(logits, n_vocab, vision_fixture(logits_file));
    printf("%s: last logits max diff %.3g\n", what, worst);
    assert_true(worst <= LOGIT_TOLERANCE);
    check_greedy(ctx, logits, n_vocab, line_of(ref, "greedy_ids "), N_GREEDY);
    corral_context_free(ctx);
}

/*
 * Image `name` (minicpmv-NAME.png) through slicing, the encoder and the text model against
 * minicpmv.NAME.*: the parts the plan makes (the reference's image chunks), their
 * embeddings, the ids of the texts around them (the reference's text chunks), and the text
 * model from the reference's embeddings and from ours.
 */
static void run_case(const char *name)
{
    corral_error err = {0};
    char file[96];
    snprintf(file, sizeof file, "minicpmv.%s.ref.txt", name);
    char *ref = file_fixture_read(vision_fixture(file), NULL);
    corral_mmproj *mm = corral_mmproj_load(vision_fixture("minicpmv-mmproj.gguf"), &err);
    if (!mm)
        fail_msg("%s", err.message);
    assert_string_equal(corral_mmproj_projector(mm), "resampler");
    corral_image_params params;
    corral_mmproj_image_params(mm, &params);
    assert_int_equal(params.max_slices, 9);
    snprintf(file, sizeof file, "minicpmv-%s.png", name);
    size_t len;
    uint8_t *bytes = file_fixture_read(vision_fixture(file), &len);
    image_rgb *rgb = image_decode(bytes, len, NULL, &err);
    free(bytes);
    assert_non_null(rgb);
    image_slice_plan plan;
    assert_true(image_slice_plan_for(rgb->width, rgb->height, params.image_size,
                                     params.patch_size, params.max_slices, &plan, &err));
    size_t n_parts = 1 + (size_t)plan.cols * plan.rows;
    image_preprocess pre = image_preprocess_from_params(&params);
    image_pixels *parts[1 + IMAGE_MAX_SLICES];
    assert_true(image_slices_run(&pre, &plan, rgb, parts, &err));
    image_rgb_free(rgb);

    /* every part's embeddings, one after another, against the reference's */
    snprintf(file, sizeof file, "minicpmv.%s.embd.f32", name);
    size_t size;
    float *want = file_fixture_read(vision_fixture(file), &size);
    corral_image_embd embd[1 + IMAGE_MAX_SLICES];
    size_t rows = 0;
    float worst = 0.0f;
    for (size_t k = 0; k < n_parts; k++) {
        assert_int_equal(corral_mmproj_image_tokens(mm, parts[k]->nx, parts[k]->ny), 8);
        assert_true(corral_mmproj_encode(mm, parts[k]->data, parts[k]->nx, parts[k]->ny, 2,
                                         &embd[k], &err));
        image_pixels_free(parts[k]);
        assert_int_equal(embd[k].n_tokens, 8); /* clip.minicpmv_query_num */
        assert_true((rows + 8) * embd[k].n_embd * sizeof(float) <= size);
        for (size_t i = 0; i < 8 * embd[k].n_embd; i++)
            worst = fmaxf(worst, fabsf(embd[k].data[i] - want[rows * embd[k].n_embd + i]));
        rows += 8;
    }
    assert_int_equal(size, rows * embd[0].n_embd * sizeof(float));
    printf("minicpmv %s: %zu parts, embeddings max diff %.3g\n", name, n_parts, worst);
    assert_true(worst <= EMBD_TOLERANCE);

    /* the texts around the parts: "Describe <__media__> now" with each part's marks */
    corral_model *m = corral_model_load(vision_fixture("minicpmv-text.gguf"), &err);
    if (!m)
        fail_msg("%s", err.message);
    assert_true(corral_mmproj_fits(mm, m, &err));
    const corral_vocab *vocab = corral_model_vocab(m);
    segment *ours = calloc(2 * n_parts + 1, sizeof *ours);
    segment *theirs = calloc(2 * n_parts + 1, sizeof *theirs);
    assert_non_null(ours);
    assert_non_null(theirs);
    char text[128];
    for (size_t k = 0; k <= n_parts; k++) {
        const char *mark = corral_mmproj_part_text(mm, plan.cols, plan.rows, k);
        snprintf(text, sizeof text, "%s%s%s", k == 0 ? "Describe " : "", mark,
                 k == n_parts ? " now" : "");
        segment *t = &ours[2 * k];
        t->n_ids = tokenize(vocab, text, k == 0, t->ids);
        int32_t want_ids[MAX_IDS];
        assert_int_equal(t->n_ids, chunk_ids(ref, (int)(2 * k), want_ids));
        assert_memory_equal(t->ids, want_ids, t->n_ids * sizeof *t->ids);
        theirs[2 * k] = *t;
        if (k < n_parts) {
            ours[2 * k + 1].embd = embd[k];
            theirs[2 * k + 1].embd = embd[k];
            theirs[2 * k + 1].embd.data = want + 8 * k * embd[k].n_embd;
        }
    }
    /* nothing after the last part's marks: the reference has no more chunks */
    snprintf(text, sizeof text, "chunk %zu ", 2 * n_parts + 1);
    assert_null(strstr(ref, text));
    snprintf(file, sizeof file, "minicpmv.%s.logits.txt", name);
    check_text(m, ref, file, theirs, 2 * n_parts + 1, "from the reference's embeddings");
    check_text(m, ref, file, ours, 2 * n_parts + 1, "from ours");
    free(ours);
    free(theirs);
    for (size_t k = 0; k < n_parts; k++)
        corral_image_embd_free(&embd[k]);
    corral_model_free(m);
    corral_mmproj_free(mm);
    free(want);
    free(ref);
}

/* 32 x 32: the tower's own square, no slices */
static void test_small(void **state)
{
    (void)state;
    run_case("small");
}

/* 40 x 20: an overview (the image itself: its area is under the square's) and a 2 x 1 grid
 * of 32 x 32 slices from a bicubic 64 x 32, the sizes at which llama.cpp d32676d77 (which
 * made the reference) and ollama's ec98e2002 cut the same pixels */
static void test_wide(void **state)
{
    (void)state;
    run_case("wide");
}

/* The plans for several sizes, as written out by hand from the vendored llama.cpp's
 * llava-uhd code (ec98e2002; float steps, std::round halves away from zero) for a square of
 * 32 and patches of 4: overview, grid, refined image, slice. */
static void test_plans(void **state)
{
    (void)state;
    const struct {
        uint32_t w, h, ow, oh, cols, rows, rw, rh, cw, ch;
    } cases[] = {
        {32, 32, 32, 32, 0, 0, 0, 0, 0, 0},         /* the square: no slices */
        {20, 12, 32, 32, 0, 0, 0, 0, 0, 0},         /* smaller: stretched onto it */
        {33, 32, 32, 32, 2, 1, 48, 44, 24, 44},
        {40, 20, 40, 20, 2, 1, 64, 32, 32, 32},     /* the fixture's wide image */
        {48, 16, 48, 16, 2, 1, 80, 28, 40, 28},     /* 6.5 patches rounds up */
        {96, 96, 32, 32, 3, 3, 96, 96, 32, 32},
        {160, 96, 40, 24, 4, 2, 112, 72, 28, 36},
        {100, 70, 36, 28, 3, 2, 96, 64, 32, 32},
        {1000, 10, 300, 4, 9, 1, 900, 8, 100, 8},   /* at most 9 slices */
        {10, 1000, 4, 320, 1, 9, 8, 972, 8, 108},
        {4000, 3000, 36, 28, 3, 3, 108, 84, 36, 28},
        {65, 64, 32, 32, 2, 2, 64, 64, 32, 32},
        {33, 1, 32, 4, 2, 1, 240, 8, 120, 8},
        {200, 40, 72, 16, 7, 1, 196, 36, 28, 36},
    };
    corral_error err = {0};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        image_slice_plan plan;
        assert_true(image_slice_plan_for(cases[i].w, cases[i].h, 32, 4, 9, &plan, &err));
        uint32_t got[] = {plan.overview_w, plan.overview_h, plan.cols,   plan.rows,
                          plan.refined_w,  plan.refined_h,  plan.cell_w, plan.cell_h};
        uint32_t want[] = {cases[i].ow, cases[i].oh, cases[i].cols, cases[i].rows,
                           cases[i].rw, cases[i].rh, cases[i].cw,   cases[i].ch};
        if (memcmp(got, want, sizeof got) != 0)
            fail_msg("%u x %u: got %u x %u, %u x %u, %u x %u, %u x %u", cases[i].w, cases[i].h,
                     got[0], got[1], got[2], got[3], got[4], got[5], got[6], got[7]);
    }
    /* absurd inputs are refused with a message, not planned */
    image_slice_plan plan;
    assert_false(image_slice_plan_for(0, 10, 32, 4, 9, &plan, &err));
    assert_false(image_slice_plan_for(70000, 10, 32, 4, 9, &plan, &err));
    assert_false(image_slice_plan_for(64, 64, 32, 0, 9, &plan, &err));
    assert_false(image_slice_plan_for(64, 64, 2, 4, 9, &plan, &err));
    assert_false(image_slice_plan_for(64, 64, 32, 4, 0, &plan, &err));
    assert_false(image_slice_plan_for(64, 64, 32, 4, 10, &plan, &err));
    assert_non_null(strstr(err.message, "slices"));
    /* a thin image at a real tower's square: slices far longer than the image is */
    assert_true(image_slice_plan_for(4000, 10, 448, 14, 9, &plan, &err));
    assert_int_equal(plan.overview_w, 4004);
    assert_int_equal(plan.cell_w, 6202);
    assert_int_equal(plan.cell_h, 28);
    /* thinner, the slices would be longer than the encoder takes: refused, saying so */
    assert_false(image_slice_plan_for(16384, 1, 448, 14, 9, &plan, &err));
    assert_non_null(strstr(err.message, "too thin"));
    assert_false(image_slice_plan_for(65536, 1, 4096, 14, 9, &plan, &err));
    assert_non_null(strstr(err.message, "too thin"));
    /* the largest sides with a real tower's square plan within bounds */
    assert_true(image_slice_plan_for(65536, 65536, 448, 14, 9, &plan, &err));
    assert_int_equal(plan.cols * plan.rows, 9);
    assert_true(plan.refined_w <= 65536 && plan.refined_h <= 65536);
    /* a plan that does not fit its image is refused by the cutting */
    image_rgb *rgb = image_rgb_create(40, 20, &err);
    assert_non_null(rgb);
    memset(rgb->pixels, 7, 40 * 20 * 3);
    image_preprocess pre = {.fit = IMAGE_FIT_STRETCH, .image_size = 32, .patch_size = 4,
                            .mean = {0.5f, 0.5f, 0.5f}, .std = {0.5f, 0.5f, 0.5f}};
    image_pixels *parts[1 + IMAGE_MAX_SLICES];
    image_slice_plan bad = {.overview_w = 40, .overview_h = 20, .cols = 5, .rows = 2,
                            .refined_w = 160, .refined_h = 64, .cell_w = 32, .cell_h = 32};
    assert_false(image_slices_run(&pre, &bad, rgb, parts, &err)); /* 10 slices */
    bad = (image_slice_plan){.overview_w = 40, .overview_h = 20, .cols = 2, .rows = 1,
                             .refined_w = 60, .refined_h = 32, .cell_w = 32, .cell_h = 32};
    assert_false(image_slices_run(&pre, &bad, rgb, parts, &err)); /* cells beyond the image */
    image_rgb_free(rgb);
}

/* The bicubic resize against values computed from the vendored llama.cpp's kernel (each
 * float step rounded to float, the coefficients' constants in double) for a 5 x 3 image
 * enlarged to 8 x 7 and reduced to 3 x 2. */
static void test_bicubic(void **state)
{
    (void)state;
    static const uint8_t up[8 * 7 * 3] = {
        0, 37, 74, 70, 123, 160, 163, 130, 167, 238, 38, 75, 177, 86, 123, 119, 136, 173, 198,
        49, 86, 240, 4, 41, 36, 73, 125, 123, 83, 125, 180, 76, 121, 175, 59, 114, 166, 137,
        113, 160, 186, 109, 159, 89, 92, 159, 39, 84, 82, 119, 165, 172, 49, 89, 191, 28, 76,
        114, 90, 144, 152, 187, 99, 192, 227, 49, 120, 134, 106, 84, 86, 137, 130, 167, 135,
        169, 64, 80, 164, 40, 70, 111, 135, 116, 137, 194, 79, 164, 202, 56, 113, 160, 145, 86,
        139, 189, 174, 211, 61, 130, 110, 91, 117, 91, 91, 146, 183, 55, 124, 171, 58, 100, 138,
        107, 127, 172, 194, 141, 190, 232, 200, 237, 8, 100, 144, 101, 85, 130, 108, 175, 213,
        10, 116, 152, 45, 54, 91, 146, 139, 176, 226, 184, 221, 255, 202, 239, 5, 98, 146, 101,
        83, 132, 109, 177, 215, 7, 115, 151, 44, 51, 88, 148, 140, 177, 228, 186, 223, 255};
    static const uint8_t down[3 * 2 * 3] = {0,  37,  74,  219, 67,  104, 141, 112, 149,
                                            153, 190, 99, 131, 127, 84,  129, 170, 108};
    corral_error err = {0};
    image_rgb *src = image_rgb_create(5, 3, &err);
    assert_non_null(src);
    for (size_t i = 0; i < 5 * 3 * 3; i++)
        src->pixels[i] = (uint8_t)((i * 37 + (i / 3) * 11) % 256);
    image_rgb *big = image_resize_bicubic(src, 8, 7, &err);
    image_rgb *small = image_resize_bicubic(src, 3, 2, &err);
    assert_non_null(big);
    assert_non_null(small);
    assert_memory_equal(big->pixels, up, sizeof up);
    assert_memory_equal(small->pixels, down, sizeof down);
    image_rgb_free(big);
    image_rgb_free(small);
    assert_null(image_resize_bicubic(src, 0, 4, &err));
    image_rgb_free(src);
}

/* An image no larger than the square is stretched onto it as the bilinear rule makes it;
 * parts go to the encoder in whole patches only; the plain preprocessing (the CLI's) refuses
 * what would be sliced. */
static void test_sizes(void **state)
{
    (void)state;
    corral_error err = {0};
    corral_mmproj *mm = corral_mmproj_load(vision_fixture("minicpmv-mmproj.gguf"), &err);
    assert_non_null(mm);
    corral_image_params params;
    corral_mmproj_image_params(mm, &params);
    assert_int_equal(params.resize, CORRAL_IMAGE_STRETCH);
    image_preprocess pre = image_preprocess_from_params(&params);
    image_rgb *rgb = image_rgb_create(20, 12, &err);
    assert_non_null(rgb);
    for (size_t i = 0; i < 20 * 12 * 3; i++)
        rgb->pixels[i] = (uint8_t)(i * 7);
    image_slice_plan plan;
    assert_true(image_slice_plan_for(20, 12, 32, 4, 9, &plan, &err));
    image_pixels *parts[1 + IMAGE_MAX_SLICES];
    assert_true(image_slices_run(&pre, &plan, rgb, parts, &err));
    image_pixels *plain = image_preprocess_run(&pre, rgb, &err);
    image_rgb *stretched = image_resize_bilinear(rgb, 32, 32, &err);
    assert_non_null(plain);
    assert_non_null(stretched);
    assert_int_equal(parts[0]->nx, 32);
    assert_int_equal(parts[0]->ny, 32);
    for (size_t i = 0; i < 32 * 32 * 3; i++) {
        float v = ((float)stretched->pixels[i] / 255.0f - 0.5f) / 0.5f;
        assert_true(parts[0]->data[i] == v && plain->data[i] == v);
    }
    image_pixels_free(parts[0]);
    image_pixels_free(plain);
    image_rgb_free(stretched);
    image_rgb_free(rgb);
    uint32_t nx, ny;
    assert_false(image_preprocess_size(&pre, 33, 32, &nx, &ny, &err));
    assert_non_null(strstr(err.message, "slices"));
    assert_int_equal(corral_mmproj_image_tokens(mm, 28, 36), 8);
    assert_int_equal(corral_mmproj_image_tokens(mm, 30, 32), 0);
    float zeros[3 * 32 * 30] = {0};
    corral_image_embd embd;
    assert_false(corral_mmproj_encode(mm, zeros, 30, 32, 1, &embd, &err));
    assert_non_null(strstr(err.message, "multiples of 4"));
    /* the marks between parts, MiniCPM-V 2.6's layout, for a 3 x 2 grid */
    const char *want[] = {"<image>", "</image><slice>", "</slice><slice>", "</slice><slice>",
                          "</slice>\n<slice>", "</slice><slice>", "</slice><slice>", "</slice>"};
    for (size_t k = 0; k < sizeof want / sizeof want[0]; k++)
        assert_string_equal(corral_mmproj_part_text(mm, 3, 2, k), want[k]);
    assert_string_equal(corral_mmproj_part_text(mm, 0, 0, 1), "</image>");
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
    gguf_file *src = gguf_open(vision_fixture("minicpmv-mmproj.gguf"), &err);
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
        } else if (strncmp(v->key, "clip.use_", 9) == 0) {
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
        {.key = "clip.use_silu", .value = 1, .expect = "use_silu"},
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
    assert_int_equal(mm->hp.ffn, VISION_FFN_GELU);
    corral_mmproj_free(mm);
    /* without clip.use_gelu the tower's MLP is quick GELU, as llama.cpp takes it */
    write_variant(&(variant){.key = "clip.use_gelu", .remove = true}, path);
    assert_non_null(mm = corral_mmproj_load(path, &err));
    assert_int_equal(mm->hp.ffn, VISION_FFN_GELU_QUICK);
    corral_mmproj_free(mm);
    unlink(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_small),   cmocka_unit_test(test_wide),
        cmocka_unit_test(test_plans),   cmocka_unit_test(test_bicubic),
        cmocka_unit_test(test_sizes),
        cmocka_unit_test(test_hostile_files),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

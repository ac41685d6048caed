/*
 * Gemma 4's audio against a plain-Python reference (tools/archref/gemma4audiogen.py, from
 * transformers' semantics; tests/fixtures/audio): the log-mel frames of a clip made from
 * integer arithmetic alone, and the tiny random-weight tower's embeddings of those frames
 * (the attention there computed in transformers' blocks, here as a window). A clip over 30
 * seconds goes in 30-second segments, each as a clip of its own. A model file
 * without a tower says so without an error; a segment too long for the tower and tower files
 * spoiled one way each (bounds that bound nothing, tensors out of alignment among them) are
 * refused with a message naming the fault.
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

#include "audio/mel.h"
#include "corral/engine.h"
#include "file_fixture.h"
#include "gguf.h"
#include "gguf_write_fixture.h"
#include "tensor_type.h"
#include "vision_check.h"

/* The reference runs in double precision from float32 weights and frames; our tower in
 * float32 with its products in another order. The same bounds as the vision towers'. */
#define EMBD_TOLERANCE 1e-4f
#define EMBD_MEAN_TOLERANCE 1e-5
/* log-mel values: float32 rounding of logs of sums up to a few hundred */
#define MEL_TOLERANCE 1e-4f
#define N_SAMPLES 19200
#define N_FRAMES 119
#define N_TOKENS 30
#define TEXT_WIDTH 32

static const char *fixture(const char *name)
{
    static char path[4096];
    const char *dir = getenv("CORRAL_FIXTURES");
    snprintf(path, sizeof path, "%s/audio/%s", dir ? dir : "tests/fixtures", name);
    return path;
}

/* The clip gemma4audiogen.py's clip() makes: a 32-bit LCG's noise plus a triangle wave. */
static float *clip_samples(void)
{
    float *s = malloc(N_SAMPLES * sizeof *s);
    assert_non_null(s);
    uint32_t state = 12345;
    for (int i = 0; i < N_SAMPLES; i++) {
        state = state * 1664525u + 1013904223u;
        int noise = (int)((state >> 16) % 4096) - 2048;
        int phase = i % 37;
        int tri = (phase < 19 ? phase * 800 : (37 - phase) * 800) - 7200;
        s[i] = (float)(noise + tri) / 32768.0f;
    }
    return s;
}

static void test_mel_matches_reference(void **state)
{
    (void)state;
    float *samples = clip_samples();
    corral_error err = {{0}};
    assert_int_equal(audio_mel_frames(N_SAMPLES), N_FRAMES);
    audio_mel *mel = audio_mel_compute(samples, N_SAMPLES, &err);
    if (!mel)
        fail_msg("%s", err.message);
    assert_int_equal(mel->n_frames, N_FRAMES);
    assert_int_equal(mel->n_mel, AUDIO_MEL_BINS);
    size_t size;
    float *want = file_fixture_read(fixture("gemma4a-clip.mel.f32"), &size);
    assert_int_equal(size, N_FRAMES * AUDIO_MEL_BINS * sizeof(float));
    float worst = 0.0f;
    size_t at = 0;
    for (size_t i = 0; i < N_FRAMES * AUDIO_MEL_BINS; i++)
        if (fabsf(mel->data[i] - want[i]) > worst) {
            worst = fabsf(mel->data[i] - want[i]);
            at = i;
        }
    print_message("log-mel: worst |ours - reference| %.3g (frame %zu bin %zu)\n", (double)worst,
                  at / AUDIO_MEL_BINS, at % AUDIO_MEL_BINS);
    assert_true(worst <= MEL_TOLERANCE);
    /* the offset: a clip of silence is log(0.001) everywhere */
    memset(samples, 0, 400 * sizeof *samples);
    audio_mel *quiet = audio_mel_compute(samples, 400, &err);
    assert_non_null(quiet);
    assert_int_equal(quiet->n_frames, 2);
    for (size_t i = 0; i < quiet->n_frames * AUDIO_MEL_BINS; i++)
        assert_float_equal(quiet->data[i], logf(0.001f), 1e-6f);
    audio_mel_free(quiet);
    /* too short for a frame */
    assert_null(audio_mel_compute(samples, 160, &err));
    assert_non_null(strstr(err.message, "too short"));
    audio_mel_free(mel);
    free(want);
    free(samples);
}

static corral_audio_tower *load_tower(const char *path)
{
    corral_error err = {{0}};
    bool absent = true;
    corral_audio_tower *t = corral_audio_tower_load(path, &absent, &err);
    if (!t)
        fail_msg("%s: %s", path, absent ? "no audio tower" : err.message);
    return t;
}

static void test_tower_matches_reference(void **state)
{
    (void)state;
    corral_audio_tower *t = load_tower(fixture("gemma4a-tower.gguf"));
    assert_string_equal(corral_audio_tower_begin(t), "<|audio>");
    assert_string_equal(corral_audio_tower_end(t), "<audio|>");
    assert_int_equal(corral_audio_tower_tokens(t, N_FRAMES), N_TOKENS);
    size_t size;
    float *mel = file_fixture_read(fixture("gemma4a-clip.mel.f32"), &size);
    corral_image_embd embd;
    corral_error err = {{0}};
    if (!corral_audio_tower_encode(t, mel, N_FRAMES, 2, &embd, &err))
        fail_msg("%s", err.message);
    assert_int_equal(embd.n_tokens, N_TOKENS);
    assert_int_equal(embd.nx, N_TOKENS);
    assert_int_equal(embd.ny, 1);
    assert_int_equal(embd.n_embd, TEXT_WIDTH);
    assert_true(embd.causal);
    float *want = vision_read_embd(fixture("gemma4a-clip.embd.f32"), N_TOKENS, TEXT_WIDTH);
    vision_check_embd("gemma4a", embd.data, want, N_TOKENS, TEXT_WIDTH,
                      &(vision_tolerance){.max = EMBD_TOLERANCE, .mean = EMBD_MEAN_TOLERANCE});
    /* one thread gives the same rows: the work is split by rows, not within sums */
    corral_image_embd one;
    assert_true(corral_audio_tower_encode(t, mel, N_FRAMES, 1, &one, &err));
    assert_memory_equal(one.data, embd.data, N_TOKENS * TEXT_WIDTH * sizeof(float));
    corral_image_embd_free(&one);
    /* the tower takes at most 30 seconds of frames */
    assert_false(corral_audio_tower_encode(t, mel, 3001, 1, &one, &err));
    assert_non_null(strstr(err.message, "30 seconds"));
    assert_false(corral_audio_tower_encode(t, mel, 0, 1, &one, &err));
    corral_image_embd_free(&embd);
    free(want);
    free(mel);
    corral_audio_tower_free(t);
}

/* n samples of the reference clip's kind (an LCG's noise and a triangle wave). */
static float *noise_samples(size_t n)
{
    float *s = malloc(n * sizeof *s);
    assert_non_null(s);
    uint32_t state = 777;
    for (size_t i = 0; i < n; i++) {
        state = state * 1664525u + 1013904223u;
        int noise = (int)((state >> 16) % 4096) - 2048;
        int phase = (int)(i % 37);
        int tri = (phase < 19 ? phase * 800 : (37 - phase) * 800) - 7200;
        s[i] = (float)(noise + tri) / 32768.0f;
    }
    return s;
}

#define SEGMENT AUDIO_MEL_SEGMENT_SAMPLES
#define SEGMENT_FRAMES 2999 /* 30 seconds' */
#define SEGMENT_TOKENS 750

/* Segment s's rows of a clip's features equal those of its samples as a clip of their own. */
static void check_segment_alone(const float *samples, size_t n_samples, const audio_mel *mel,
                                size_t s, size_t first_row)
{
    size_t n = n_samples - s * SEGMENT < SEGMENT ? n_samples - s * SEGMENT : SEGMENT;
    corral_error err = {{0}};
    audio_mel *alone = audio_mel_compute(samples + s * SEGMENT, n, &err);
    assert_non_null(alone);
    assert_int_equal(alone->n_segments, 1);
    assert_int_equal(alone->n_frames, mel->segment_frames[s]);
    assert_memory_equal(alone->data, mel->data + first_row * AUDIO_MEL_BINS,
                        alone->n_frames * AUDIO_MEL_BINS * sizeof(float));
    audio_mel_free(alone);
}

/* A clip over 30 seconds is cut as llama.cpp's mtmd cuts it for this tower: 30-second
 * segments of samples without overlap, the last one shorter, each framed and encoded as a
 * clip of its own; their embeddings one after another, the first 30 seconds' those of the
 * 30-second clip alone. */
static void test_long_clip_in_segments(void **state)
{
    (void)state;
    /* the segments' frames from the length alone */
    assert_int_equal(audio_mel_segments(SEGMENT), 1);
    assert_int_equal(audio_mel_segment_frames(SEGMENT, 0), SEGMENT_FRAMES);
    assert_int_equal(audio_mel_segment_frames(SEGMENT, 1), 0);
    assert_int_equal(audio_mel_segments(2 * SEGMENT + 160), 2); /* a tail of no frame */
    assert_int_equal(audio_mel_frames(2 * SEGMENT + 160), 2 * SEGMENT_FRAMES);
    assert_int_equal(audio_mel_segments(2 * SEGMENT + 161), 3);
    assert_int_equal(audio_mel_segment_frames(2 * SEGMENT + 161, 2), 1);
    const size_t n = 65 * AUDIO_MEL_RATE; /* 30 + 30 + 5 seconds */
    assert_int_equal(audio_mel_segments(n), 3);
    assert_int_equal(audio_mel_segment_frames(n, 2), 499);
    assert_int_equal(audio_mel_frames(n), 2 * SEGMENT_FRAMES + 499);

    float *samples = noise_samples(n);
    corral_error err = {{0}};
    audio_mel *mel = audio_mel_compute(samples, n, &err);
    if (!mel)
        fail_msg("%s", err.message);
    assert_int_equal(mel->n_segments, 3);
    assert_int_equal(mel->n_frames, 2 * SEGMENT_FRAMES + 499);
    assert_int_equal(mel->segment_frames[0], SEGMENT_FRAMES);
    assert_int_equal(mel->segment_frames[1], SEGMENT_FRAMES);
    assert_int_equal(mel->segment_frames[2], 499);
    check_segment_alone(samples, n, mel, 0, 0);
    check_segment_alone(samples, n, mel, 2, 2 * SEGMENT_FRAMES);

    corral_audio_tower *t = load_tower(fixture("gemma4a-tower.gguf"));
    size_t tokens = corral_audio_tower_segments_tokens(t, mel->segment_frames, 3);
    assert_int_equal(tokens, 2 * SEGMENT_TOKENS + 125);
    corral_image_embd all, first, last;
    if (!corral_audio_tower_encode_segments(t, mel->data, mel->segment_frames, 3, 1, NULL,
                                            &all, &err))
        fail_msg("%s", err.message);
    assert_int_equal(all.n_tokens, tokens);
    assert_int_equal(all.nx, tokens);
    assert_true(all.causal);
    assert_true(corral_audio_tower_encode(t, mel->data, SEGMENT_FRAMES, 1, &first, &err));
    assert_int_equal(first.n_tokens, SEGMENT_TOKENS);
    assert_memory_equal(all.data, first.data, SEGMENT_TOKENS * TEXT_WIDTH * sizeof(float));
    assert_true(corral_audio_tower_encode(t, mel->data + 2 * SEGMENT_FRAMES * AUDIO_MEL_BINS,
                                          499, 1, &last, &err));
    assert_memory_equal(all.data + 2 * SEGMENT_TOKENS * TEXT_WIDTH, last.data,
                        125 * TEXT_WIDTH * sizeof(float));
    corral_image_embd_free(&last);
    /* the middle segment: no state carried over from the first */
    assert_true(corral_audio_tower_encode(t, mel->data + SEGMENT_FRAMES * AUDIO_MEL_BINS,
                                          SEGMENT_FRAMES, 1, &last, &err));
    assert_memory_equal(all.data + SEGMENT_TOKENS * TEXT_WIDTH, last.data,
                        SEGMENT_TOKENS * TEXT_WIDTH * sizeof(float));
    corral_image_embd_free(&last);
    /* a segment longer than 30 seconds' frames is refused */
    size_t too_long[2] = {SEGMENT_FRAMES, 3001};
    assert_false(
        corral_audio_tower_encode_segments(t, mel->data, too_long, 2, 1, NULL, &last, &err));
    assert_non_null(strstr(err.message, "30 seconds"));
    corral_image_embd_free(&all);
    corral_image_embd_free(&first);
    corral_image_embd_free(&last);
    corral_audio_tower_free(t);
    audio_mel_free(mel);
    free(samples);
}

/* The last row's logits after rows [0, split) and then [split, n) of embd go into a fresh
 * context of the gemma4 text model m as two calls (split 0: one call). */
static float *logits_after(const corral_model *m, const corral_image_embd *embd, size_t split)
{
    corral_context_params params;
    corral_context_params_init(&params);
    params.n_ctx = 64;
    params.n_threads = 1;
    params.kv_type = CORRAL_KV_F32;
    corral_error err = {{0}};
    corral_context *ctx = corral_context_create(m, &params, &err);
    if (!ctx)
        fail_msg("%s", err.message);
    size_t n_vocab = corral_model_n_vocab(m), E = embd->n_embd;
    size_t parts[2][2] = {{0, split ? split : embd->n_tokens}, {split, embd->n_tokens}};
    for (int i = 0; i < (split ? 2 : 1); i++) {
        size_t n = parts[i][1] - parts[i][0];
        corral_image_embd part = *embd;
        part.n_tokens = part.nx = (uint32_t)n;
        part.data = embd->data + parts[i][0] * E;
        if (!corral_decode_image(ctx, 0, &part, &err))
            fail_msg("%s", err.message);
    }
    const float *last = corral_get_logits(ctx, embd->n_tokens - (split ? split : 0) - 1);
    assert_non_null(last);
    float *out = malloc(n_vocab * sizeof *out);
    assert_non_null(out);
    memcpy(out, last, n_vocab * sizeof *out);
    corral_context_free(ctx);
    return out;
}

/* A clip's tokens are causal even in a family whose image tokens see each other both ways
 * (gemma4): one call gives the logits that the rows in two calls give, which an image's do
 * not. */
static void test_clip_tokens_causal(void **state)
{
    (void)state;
    char path[4096];
    snprintf(path, sizeof path, "%s/vision/gemma4v-text.gguf",
             getenv("CORRAL_FIXTURES") ? getenv("CORRAL_FIXTURES") : "tests/fixtures");
    corral_error err = {{0}};
    corral_model *m = corral_model_load(path, &err);
    if (!m)
        fail_msg("%s", err.message);
    corral_audio_tower *t = load_tower(fixture("gemma4a-tower.gguf"));
    assert_true(corral_audio_tower_fits(t, m, &err));
    size_t size;
    float *mel = file_fixture_read(fixture("gemma4a-clip.mel.f32"), &size);
    corral_image_embd embd;
    assert_true(corral_audio_tower_encode(t, mel, N_FRAMES, 1, &embd, &err));
    size_t n_vocab = corral_model_n_vocab(m);
    float *whole = logits_after(m, &embd, 0), *split = logits_after(m, &embd, 7);
    for (size_t i = 0; i < n_vocab; i++)
        assert_float_equal(whole[i], split[i], 1e-4f);
    free(whole);
    free(split);
    embd.causal = false; /* as an image's: the first rows then see the later ones */
    whole = logits_after(m, &embd, 0);
    split = logits_after(m, &embd, 7);
    float worst = 0.0f;
    for (size_t i = 0; i < n_vocab; i++)
        worst = fmaxf(worst, fabsf(whole[i] - split[i]));
    assert_true(worst > 1e-2f);
    free(whole);
    free(split);
    corral_image_embd_free(&embd);
    free(mel);
    corral_audio_tower_free(t);
    corral_model_free(m);
}

static void test_file_without_tower(void **state)
{
    (void)state;
    corral_error err = {{0}};
    bool absent = false;
    char path[4096];
    snprintf(path, sizeof path, "%s/stories260K.gguf",
             getenv("CORRAL_FIXTURES") ? getenv("CORRAL_FIXTURES") : "tests/fixtures");
    assert_null(corral_audio_tower_load(path, &absent, &err));
    assert_true(absent);
    assert_string_equal(err.message, "");
}

/* How expect_spoiled rewrites the tower file: tensor drop left out, reshape declared flat,
 * the one-value tensors set[i] holding value[i]; misalign: general.alignment 1 and a few bytes'
 * tensor first, as many as put the first convolution's kernel (and the tensors after it, all
 * a multiple of 4 bytes long) at an offset that is not a multiple of 4 in memory. */
typedef struct spoil {
    const char *drop, *reshape, *set[2];
    float value[2];
    bool misalign;
} spoil;

static const float *spoiled_value(const spoil *s, const char *name)
{
    for (size_t i = 0; i < 2; i++)
        if (s->set[i] && strcmp(s->set[i], name) == 0)
            return &s->value[i];
    return NULL;
}

/* The tower file rewritten to out as s says, with pad bytes' tensor first when s->misalign. */
static void write_spoiled(const spoil *s, size_t pad, const char *out)
{
    corral_error err = {{0}};
    gguf_file *in = gguf_open(fixture("gemma4a-tower.gguf"), &err);
    assert_non_null(in);
    gguf_writer *w = gguf_writer_create();
    bool ok = w != NULL;
    for (size_t i = 0; ok && i < gguf_n_kv(in); i++)
        ok = gguf_writer_copy_kv(w, gguf_kv_at(in, i), &err);
    if (s->misalign)
        ok = ok && gguf_writer_set_alignment(w, 1, &err);
    for (int pass = 0; ok && pass < 2; pass++) {
        const int8_t zeros[4] = {0};
        if (s->misalign)
            ok = pass == 0 ? gguf_writer_add_tensor(w, "a.pad", TENSOR_TYPE_I8, 1,
                                                    (const int64_t[1]){(int64_t)pad}, &err)
                           : gguf_writer_write_tensor(w, zeros, pad, &err);
        for (size_t i = 0; ok && i < gguf_n_tensors(in); i++) {
            const gguf_tensor *t = gguf_tensor_at(in, i);
            const float *value = spoiled_value(s, t->name);
            if (s->drop && strcmp(t->name, s->drop) == 0)
                continue;
            if (s->reshape && strcmp(t->name, s->reshape) == 0 && pass == 0) {
                int64_t flat[1] = {(int64_t)gguf_tensor_n_elems(t)};
                ok = gguf_writer_add_tensor(w, t->name, t->type, 1, flat, &err);
            } else if (value && pass == 1) {
                assert_int_equal(t->size_bytes, sizeof *value);
                ok = gguf_writer_write_tensor(w, value, sizeof *value, &err);
            } else {
                ok = gguf_write_fixture_copy(w, pass, t->name, t, &err);
            }
        }
        if (pass == 0)
            ok = ok && gguf_writer_begin(w, out, &err);
    }
    gguf_write_fixture_finish(w, ok, out, &err);
    gguf_close(in);
}

/* Whether the first convolution's kernel in the file at path lies off a 4-byte boundary. */
static bool kernel_misaligned(const char *path)
{
    corral_error err = {{0}};
    gguf_file *f = gguf_open(path, &err);
    if (!f)
        fail_msg("%s", err.message);
    const gguf_tensor *t = gguf_find_tensor(f, "a.conv1d.0.weight");
    bool off = t && (uintptr_t)t->data % 4 != 0;
    gguf_close(f);
    return off;
}

/* The tower file rewritten as s says; the refusal must say `needle`. */
static void expect_spoiled(spoil s, const char *needle)
{
    corral_error err = {{0}};
    char out[4096];
    snprintf(out, sizeof out, "%s/test_audio_gemma4.%d.gguf",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (int)getpid());
    write_spoiled(&s, 1, out);
    for (size_t pad = 2; s.misalign && !kernel_misaligned(out); pad++) {
        assert_true(pad < 4);
        write_spoiled(&s, pad, out);
    }
    bool absent = true;
    corral_audio_tower *t = corral_audio_tower_load(out, &absent, &err);
    remove(out);
    if (t)
        fail_msg("a spoiled tower loaded (to say \"%s\")", needle);
    assert_false(absent);
    if (!strstr(err.message, needle))
        fail_msg("\"%s\" does not say \"%s\"", err.message, needle);
}

static void test_spoiled_files_refused(void **state)
{
    (void)state;
    expect_spoiled((spoil){.drop = "a.blk.1.attn_v.weight"},
                   "missing tensor 'a.blk.1.attn_v.weight'");
    expect_spoiled((spoil){.reshape = "a.blk.0.ffn_down.weight"},
                   "tensor 'a.blk.0.ffn_down.weight' has shape");
    expect_spoiled((spoil){.reshape = "a.conv1d.1.weight"}, "a.conv1d.1");
}

/* A product's floor above its ceiling, a floor of +inf or a ceiling of -inf clamps every
 * value to a bound: the file is refused, naming the product and the side. */
static void test_bounds_that_bound_nothing_refused(void **state)
{
    (void)state;
    /* the fixture bounds a.blk.0.attn_q's input to [-1, 1], a.blk.1.conv_pw2's output to
     * [-0.5, 0.5] */
    expect_spoiled((spoil){.set = {"a.blk.0.attn_q.input_max"}, .value = {-2.0f}},
                   "a.blk.0.attn_q's input bounds are -1 to -2");
    expect_spoiled((spoil){.set = {"a.blk.1.conv_pw2.output_min", "a.blk.1.conv_pw2.output_max"},
                           .value = {INFINITY, INFINITY}},
                   "a.blk.1.conv_pw2's output bounds are inf to inf");
    expect_spoiled((spoil){.set = {"a.blk.1.conv_pw2.output_min", "a.blk.1.conv_pw2.output_max"},
                           .value = {-INFINITY, -INFINITY}},
                   "a.blk.1.conv_pw2's output bounds are -inf to -inf");
}

/* Tensors at an odd offset (general.alignment 1) would be read in place as floats and 16-bit
 * scales: refused, the first one the loader reads (the first convolution's kernel) named. */
static void test_misaligned_tensors_refused(void **state)
{
    (void)state;
    expect_spoiled((spoil){.misalign = true},
                   "tensor 'a.conv1d.0.weight' is not aligned to 4 bytes");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mel_matches_reference),
        cmocka_unit_test(test_tower_matches_reference),
        cmocka_unit_test(test_clip_tokens_causal),
        cmocka_unit_test(test_long_clip_in_segments),
        cmocka_unit_test(test_file_without_tower),
        cmocka_unit_test(test_spoiled_files_refused),
        cmocka_unit_test(test_bounds_that_bound_nothing_refused),
        cmocka_unit_test(test_misaligned_tensors_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

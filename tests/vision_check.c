/* The vision tests' shared checks against llama.cpp's references (vision_check.h). */
#include "vision_check.h"

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

#include "file_fixture.h"
#include "gguf.h"
#include "gguf_write_fixture.h"

corral_mmproj *vision_load_mmproj(const char *path, const char *projector)
{
    corral_error err = {0};
    corral_mmproj *mm = corral_mmproj_load(path, &err);
    if (!mm)
        fail_msg("%s", err.message);
    if (projector)
        assert_string_equal(corral_mmproj_projector(mm), projector);
    return mm;
}

corral_model *vision_load_text(const char *path, const corral_mmproj *mm)
{
    corral_error err = {0};
    corral_model *m = corral_model_load(path, &err);
    if (!m)
        fail_msg("%s", err.message);
    assert_true(corral_mmproj_fits(mm, m, &err));
    return m;
}

float *vision_read_embd(const char *path, size_t n_tokens, uint32_t n_embd)
{
    size_t size;
    float *rows = file_fixture_read(path, &size);
    assert_int_equal(size, n_tokens * n_embd * sizeof(float));
    return rows;
}

void vision_check_embd(const char *what, const float *ours, const float *ref, size_t n_tokens,
                       uint32_t n_embd, const vision_tolerance *tol)
{
    size_t n = n_tokens * n_embd, at = 0, over = 0;
    float worst = 0.0f;
    double sum = 0.0, diff2 = 0.0, ref2 = 0.0;
    for (size_t i = 0; i < n; i++) {
        float diff = fabsf(ours[i] - ref[i]);
        if (diff > worst) {
            worst = diff;
            at = i;
        }
        sum += diff;
        diff2 += (double)diff * diff;
        ref2 += (double)ref[i] * ref[i];
        over += diff > tol->near;
    }
    double mean = sum / (double)n, ratio = sqrt(diff2 / ref2);
    printf("%s: embeddings (%zu x %u) max diff %.3g at token %zu, value %zu (ours %.7g, the "
           "reference's %.7g)",
           what, n_tokens, n_embd, worst, at / n_embd, at % n_embd, n ? ours[at] : 0.0f,
           n ? ref[at] : 0.0f);
    if (tol->mean > 0)
        printf(", mean %.3g", mean);
    if (tol->rms_ratio > 0)
        printf(", RMS diff / RMS %.3g", ratio);
    if (tol->near > 0)
        printf(", %zu of %zu values over %g", over, n, tol->near);
    printf("\n");
    if (!(worst <= tol->max))
        fail_msg("%s: embeddings max diff %.3g is over %.3g", what, worst, tol->max);
    if (tol->mean > 0 && !(mean <= tol->mean))
        fail_msg("%s: embeddings mean diff %.3g is over %.3g", what, mean, tol->mean);
    if (tol->rms_ratio > 0 && !(ratio <= tol->rms_ratio))
        fail_msg("%s: embeddings RMS diff / RMS %.3g is over %.3g", what, ratio, tol->rms_ratio);
    if (tol->near > 0 && !(over * 100 <= n * tol->near_percent))
        fail_msg("%s: %zu of %zu embedding values over %g, more than %u%%", what, over, n,
                 tol->near, tol->near_percent);
}

/* ids (n of them) must be ref's text chunk `chunk`. */
static void check_chunk(const char *ref, int chunk, const int32_t *ids, size_t n)
{
    int32_t want[VISION_MAX_IDS];
    assert_int_equal(n, chunk_ids(ref, chunk, want));
    assert_memory_equal(ids, want, n * sizeof *ids);
}

void vision_prompt_ids(vision_prompt *p, const corral_model *m, const corral_mmproj *mm,
                       const char *before, const char *after, const char *ref, int after_chunk)
{
    const corral_vocab *vocab = corral_model_vocab(m);
    char text[512];
    snprintf(text, sizeof text, "%s%s", before, corral_mmproj_image_begin(mm));
    p->n_before = tokenize(vocab, text, true, p->before);
    check_chunk(ref, 0, p->before, p->n_before);
    snprintf(text, sizeof text, "%s%s", corral_mmproj_image_end(mm), after);
    p->n_after = tokenize(vocab, text, false, p->after);
    check_chunk(ref, after_chunk, p->after, p->n_after);
}

void vision_check_logits(corral_context *ctx, size_t index, size_t n_vocab, const char *ref,
                         const char *logits_path, float tolerance, int n_greedy,
                         const char *what)
{
    const float *logits = corral_get_logits(ctx, index);
    assert_non_null(logits);
    float worst = logits_file_diff(logits, n_vocab, logits_path);
    printf("%s: last logits max diff %.3g\n", what, worst);
    if (!(worst <= tolerance))
        fail_msg("%s: last logits max diff %.3g is over %.3g", what, worst, tolerance);
    check_greedy(ctx, logits, n_vocab, line_of(ref, "greedy_ids "), n_greedy);
}

void vision_check_text(const corral_model *m, const corral_context_params *params,
                       const vision_prompt *p, const corral_image_embd *embd, const char *ref,
                       const char *logits_path, float tolerance, int n_greedy,
                       const char *what)
{
    corral_context *ctx = decode_around_image(m, params, p->before, p->n_before, embd,
                                              p->after, p->n_after);
    vision_check_logits(ctx, p->n_after - 1, corral_model_n_vocab(m), ref, logits_path,
                        tolerance, n_greedy, what);
    corral_context_free(ctx);
}

void vision_check_texts(const corral_model *m, const corral_context_params *params,
                        const vision_prompt *p, const corral_image_embd *embd, float *ref_rows,
                        const char *ref, const char *logits_path, float tolerance, int n_greedy,
                        const char *what)
{
    char label[160];
    corral_image_embd theirs = *embd;
    theirs.data = ref_rows;
    snprintf(label, sizeof label, "%s from the reference's rows", what);
    vision_check_text(m, params, p, &theirs, ref, logits_path, tolerance, n_greedy, label);
    snprintf(label, sizeof label, "%s from ours", what);
    vision_check_text(m, params, p, embd, ref, logits_path, tolerance, n_greedy, label);
}

void vision_check_same_tower(const char *pair_path, const char *single_path, uint32_t nx,
                             uint32_t ny)
{
    corral_error err = {0};
    corral_mmproj *pair = corral_mmproj_load(pair_path, &err),
                  *single = corral_mmproj_load(single_path, &err);
    if (!pair || !single)
        fail_msg("%s", err.message);
    corral_image_params a, b;
    corral_mmproj_image_params(pair, &a);
    corral_mmproj_image_params(single, &b);
    assert_memory_equal(&a, &b, sizeof a);
    size_t n = (size_t)nx * ny * 3;
    float *pixels = malloc(n * sizeof *pixels);
    assert_non_null(pixels);
    for (size_t i = 0; i < n; i++)
        pixels[i] = (float)((i * 37) % 101) / 50.0f - 1.0f;
    corral_image_embd ea, eb;
    assert_true(corral_mmproj_encode(pair, pixels, nx, ny, 2, &ea, &err));
    assert_true(corral_mmproj_encode(single, pixels, nx, ny, 2, &eb, &err));
    assert_int_equal(ea.n_tokens, eb.n_tokens);
    assert_memory_equal(ea.data, eb.data, ea.n_tokens * ea.n_embd * sizeof *ea.data);
    corral_image_embd_free(&ea);
    corral_image_embd_free(&eb);
    free(pixels);
    corral_mmproj_free(pair);
    corral_mmproj_free(single);
}

static bool is(const char *name, const char *wanted) { return wanted && strcmp(name, wanted) == 0; }

void vision_write_variant(const char *src, const char *dst, const vision_variant *v)
{
    corral_error err = {0};
    gguf_file *in = gguf_open(src, &err);
    if (!in)
        fail_msg("%s: %s", src, err.message);
    gguf_writer *w = gguf_writer_create();
    bool ok = w != NULL;
    for (size_t i = 0; ok && i < gguf_n_kv(in); i++) {
        const gguf_kv *kv = gguf_kv_at(in, i);
        if (!is(kv->key, v->drop_key) && !is(kv->key, v->bool_key) && !is(kv->key, v->u32_key) &&
            !is(kv->key, v->array_key))
            ok = gguf_writer_copy_kv(w, kv, &err);
    }
    if (ok && v->bool_key)
        ok = gguf_writer_add_bool(w, v->bool_key, v->bool_value, &err);
    if (ok && v->u32_key)
        ok = gguf_writer_add_u32(w, v->u32_key, v->u32_value, &err);
    if (ok && v->array_key)
        ok = gguf_writer_add_array(w, v->array_key, GGUF_TYPE_INT32, v->array, v->n_array, &err);
    for (int pass = 0; ok && pass < 2; pass++) {
        for (size_t i = 0; ok && i < gguf_n_tensors(in); i++) {
            const gguf_tensor *t = gguf_tensor_at(in, i);
            if (is(t->name, v->drop_tensor))
                continue;
            const char *name = is(t->name, v->rename_from) ? v->rename_to : t->name;
            int64_t flat[4] = {(int64_t)gguf_tensor_n_elems(t), 1, 1, 1};
            if (pass == 1)
                ok = gguf_writer_write_tensor(w, t->data, t->size_bytes, &err);
            else if (is(t->name, v->flatten))
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

void vision_check_refused(const char *path, const char *message, size_t i)
{
    corral_error err = {0};
    corral_mmproj *mm = corral_mmproj_load(path, &err);
    if (mm) {
        corral_mmproj_free(mm);
        fail_msg("case %zu was loaded", i);
    }
    printf("refused: %s\n", err.message);
    if (!strstr(err.message, message))
        fail_msg("case %zu: '%s' does not name '%s'", i, err.message, message);
}

void vision_check_refusals(const char *src, const char *dst, const vision_refusal *cases,
                           size_t n)
{
    for (size_t i = 0; i < n; i++) {
        vision_write_variant(src, dst, &cases[i].v);
        vision_check_refused(dst, cases[i].message, i);
    }
    remove(dst);
}

void vision_temp_path(char *path, size_t size, const char *test, const char *what)
{
    const char *dir = getenv("TMPDIR");
    snprintf(path, size, "%s/corral-test-%s-%ld%s%s.gguf", dir && *dir ? dir : "/tmp", test,
             (long)getpid(), what ? "-" : "", what ? what : "");
}

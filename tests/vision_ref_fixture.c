/* Reading the vision references and comparing the text model with them (vision_ref_fixture.h). */
#include "vision_ref_fixture.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "file_fixture.h"
#include "reference_fixture.h"

const char *vision_fixture(const char *name)
{
    static char path[4][2048];
    static int next;
    const char *dir = getenv("CORRAL_FIXTURES");
    char *p = path[next++ % 4];
    snprintf(p, sizeof path[0], "%s/vision/%s", dir ? dir : "tests/fixtures", name);
    return p;
}

const char *line_of(const char *text, const char *key)
{
    char header[96];
    snprintf(header, sizeof header, "\n%s", key);
    const char *p = strstr(text, header);
    if (!p)
        fail_msg("'%s' not found", key);
    return p + strlen(header);
}

const char *text_after(const char *text, const char *key)
{
    const char *p = strstr(text, key);
    if (!p)
        fail_msg("'%s' not found", key);
    return p + strlen(key);
}

size_t ints_of(const char *p, int32_t *out, size_t max)
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

size_t chunk_ids(const char *ref, int chunk, int32_t *ids)
{
    char key[32];
    snprintf(key, sizeof key, "chunk %d text ", chunk);
    const char *p = strchr(line_of(ref, key), ':');
    assert_non_null(p);
    return ints_of(p + 1, ids, VISION_MAX_IDS);
}

size_t tokenize(const corral_vocab *vocab, const char *text, bool add_special, int32_t *ids)
{
    size_t n;
    corral_error err = {0};
    assert_true(corral_tokenize(vocab, text, strlen(text), add_special, true, ids,
                                VISION_MAX_IDS, &n, &err));
    assert_true(n <= VISION_MAX_IDS);
    return n;
}

void vision_context_params(corral_context_params *params, uint32_t n_ctx)
{
    corral_context_params_init(params);
    params->n_ctx = n_ctx;
    params->n_threads = 2;
    params->kv_type = CORRAL_KV_F32;
}

corral_context *decode_around_image(const corral_model *m, const corral_context_params *params,
                                    const int32_t *ids0, size_t n0,
                                    const corral_image_embd *embd, const int32_t *ids2,
                                    size_t n2)
{
    corral_error err = {0};
    corral_context *ctx = corral_context_create(m, params, &err);
    assert_non_null(ctx);
    corral_batch batch = {.n_tokens = n0, .tokens = ids0};
    assert_true(corral_decode(ctx, &batch, &err));
    if (!corral_decode_image(ctx, 0, embd, &err))
        fail_msg("%s", err.message);
    batch = (corral_batch){.n_tokens = n2, .tokens = ids2};
    assert_true(corral_decode(ctx, &batch, &err));
    return ctx;
}

float logits_file_diff(const float *logits, size_t n_vocab, const char *path)
{
    char *text = file_fixture_read(path, NULL), *p = text;
    float worst = 0.0f;
    for (size_t i = 0; i < n_vocab; i++) {
        char *end;
        float v = strtof(p, &end);
        assert_true(end != p);
        p = end;
        worst = fmaxf(worst, fabsf(logits[i] - v));
    }
    free(text);
    return worst;
}

void check_greedy(corral_context *ctx, const float *logits, size_t n_vocab,
                  const char *want_line, int n)
{
    assert_true(n > 0 && n <= VISION_MAX_GREEDY);
    corral_error err = {0};
    int32_t greedy[VISION_MAX_GREEDY], want[VISION_MAX_GREEDY];
    assert_int_equal(ints_of(want_line, want, (size_t)n), n);
    for (int i = 0; i < n; i++) {
        greedy[i] = argmax(logits, n_vocab);
        corral_batch batch = {.n_tokens = 1, .tokens = &greedy[i]};
        assert_true(corral_decode(ctx, &batch, &err));
        logits = corral_get_logits(ctx, 0);
    }
    assert_memory_equal(greedy, want, (size_t)n * sizeof *greedy);
}

/*
 * KV-cache sequence operations on a real model: a 4,096-token context on tiny-tolstoy fills,
 * shifts as ollama does (keep num_keep, drop half the rest) and keeps generating; truncating
 * to a common prefix reuses the cache exactly; sliding-window layers that keep only their
 * window compute what a cache holding everything computes, through shifts; a shift leaves
 * the keys of layers without RoPE alone (smollm3's NoPE layers, cohere2's global ones) and
 * turns the others without applying YaRN's magnitude twice; deepseek2's latent rows turn only
 * their rotated part.
 */
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <unistd.h>

#include "corral/engine.h"
#include "forward.h"
#include "gguf.h"
#include "key_variant_fixture.h"
#include "reference_fixture.h"
#include "short_fixture.h"

static corral_model *load_named(const char *name)
{
    corral_error err;
    corral_model *m = corral_model_load(fixture(name), &err);
    if (!m)
        fail_msg("%s", err.message);
    return m;
}

static corral_model *load(void)
{
    return load_named("tiny-tolstoy-f32.gguf");
}

static corral_context *context(corral_model *m, uint32_t n_ctx)
{
    corral_context_params p;
    corral_context_params_init(&p);
    p.n_ctx = n_ctx;
    p.n_threads = 2;
    corral_error err;
    corral_context *ctx = corral_context_create(m, &p, &err);
    if (!ctx)
        fail_msg("%s", err.message);
    return ctx;
}

static void test_context_fills_shifts_and_keeps_generating(void **state)
{
    (void)state;
    corral_model *m = load();
    /* short (short_fixture.h): a quarter of the cells, filled and shifted alike */
    const uint32_t n_ctx = short_fixture_on() ? 1024 : 4096, n_fill = n_ctx - 96;
    corral_context *ctx = context(m, n_ctx);
    size_t n_vocab = corral_model_n_vocab(m);
    corral_error err;

    /* fill with text: the tokenizer cases, repeated, up to n_fill (4,000) tokens */
    FILE *f = fopen(fixture("tokenizer-cases.txt"), "rb");
    assert_non_null(f);
    static char text[8192];
    size_t len = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    static corral_token prompt[4000];
    size_t n = 0;
    while (n < n_fill) {
        size_t k;
        static corral_token ids[4096];
        assert_true(corral_tokenize(corral_model_vocab(m), text, len, n == 0, false, ids, 4096,
                                    &k, &err));
        for (size_t i = 0; i < k && n < n_fill; i++)
            prompt[n++] = ids[i];
    }
    corral_batch batch = {.n_tokens = n, .tokens = prompt};
    assert_true(corral_decode(ctx, &batch, &err));
    assert_int_equal(corral_seq_length(ctx, 0), n_fill);

    const uint32_t num_keep = 4;
    const float *logits = corral_get_logits(ctx, n - 1);
    unsigned shifts = 0;
    for (int step = 0; step < 160; step++) {
        corral_token id = argmax(logits, n_vocab);
        uint32_t used = corral_seq_length(ctx, 0);
        if (used + 1 >= n_ctx) {
            uint32_t discard = (used - num_keep) / 2;
            assert_true(corral_seq_shift(ctx, 0, num_keep, discard, &err));
            assert_int_equal(corral_seq_length(ctx, 0), used - discard);
            shifts++;
        }
        batch = (corral_batch){.n_tokens = 1, .tokens = &id};
        if (!corral_decode(ctx, &batch, &err))
            fail_msg("step %d: %s", step, err.message);
        logits = corral_get_logits(ctx, 0);
        for (size_t i = 0; i < n_vocab; i++)
            assert_true(logits[i] == logits[i]); /* no NaN after the shift */
    }
    assert_int_equal(shifts, 1);
    assert_int_equal(corral_seq_length(ctx, 0), n_fill + 160 - (n_ctx - 1 - num_keep) / 2);
    assert_false(corral_seq_shift(ctx, 0, 4, 10000, &err));
    corral_context_free(ctx);
    corral_model_free(m);
}

/* Truncating to a prefix and re-evaluating the rest gives the same logits as a fresh run. */
static void test_context_truncate_reuses_prefix(void **state)
{
    (void)state;
    corral_model *m = load();
    corral_context *ctx = context(m, 256);
    size_t n_vocab = corral_model_n_vocab(m);
    corral_error err;
    corral_token a[] = {1, 471, 444, 1986, 484, 1986, 369, 589};
    corral_token b[] = {1, 471, 444, 1986, 700, 701, 702};
    corral_batch batch = {.n_tokens = 8, .tokens = a};
    assert_true(corral_decode(ctx, &batch, &err));
    corral_seq_truncate(ctx, 0, 4); /* common prefix of a and b */
    assert_int_equal(corral_seq_length(ctx, 0), 4);
    batch = (corral_batch){.n_tokens = 3, .tokens = b + 4};
    assert_true(corral_decode(ctx, &batch, &err));
    float *reused = malloc(n_vocab * sizeof *reused);
    memcpy(reused, corral_get_logits(ctx, 2), n_vocab * sizeof *reused);

    corral_seq_truncate(ctx, 0, 0);
    batch = (corral_batch){.n_tokens = 7, .tokens = b};
    assert_true(corral_decode(ctx, &batch, &err));
    const float *fresh = corral_get_logits(ctx, 6);
    for (size_t i = 0; i < n_vocab; i++)
        assert_true(fabsf(fresh[i] - reused[i]) <= 1e-5f);
    free(reused);
    corral_context_free(ctx);
    corral_model_free(m);
}

/*
 * Batches of one token leave gemma's sliding layers window (4) cells; batches of up to 64 in a
 * 40-token context leave them all 40. Decoding the same tokens one at a time, with ollama's
 * shift whenever the context is full, must give the same logits in both, on a cache of any
 * type (a quantized cell moves as its bytes, lane by lane of its key tiles).
 */
static void check_window_cells_match_full_cache(const char *name, corral_kv_type kv)
{
    corral_model *m = load_named(name);
    size_t n_vocab = corral_model_n_vocab(m);
    corral_context_params p;
    corral_context_params_init(&p);
    p.n_ctx = 40;
    p.n_threads = 2;
    p.n_batch = 1;
    p.kv_type = kv;
    corral_error err;
    corral_context *window_only = corral_context_create(m, &p, &err);
    p.n_batch = 64;
    corral_context *everything = corral_context_create(m, &p, &err);
    assert_non_null(window_only);
    assert_non_null(everything);
    corral_context *both[2] = {window_only, everything};
    corral_token id = 1;
    unsigned shifts = 0;
    for (int step = 0; step < 100; step++) {
        const float *logits[2];
        for (int c = 0; c < 2; c++) {
            uint32_t used = corral_seq_length(both[c], 0);
            if (used + 1 >= 40) {
                assert_true(corral_seq_shift(both[c], 0, 4, (used - 4) / 2, &err));
                shifts += c == 0;
            }
            corral_batch batch = {.n_tokens = 1, .tokens = &id};
            if (!corral_decode(both[c], &batch, &err))
                fail_msg("%s step %d: %s", name, step, err.message);
            logits[c] = corral_get_logits(both[c], 0);
        }
        for (size_t i = 0; i < n_vocab; i++)
            if (fabsf(logits[0][i] - logits[1][i]) > 1e-5f)
                fail_msg("%s, %s cache, step %d: logit %zu is %g with the window's cells, %g "
                         "with all", name, corral_kv_type_name(kv), step, i, logits[0][i],
                         logits[1][i]);
        /* a varied path: the second-best token, so the sequence does not settle in a loop */
        corral_token best = argmax(logits[0], n_vocab);
        float second = -INFINITY;
        for (size_t i = 0; i < n_vocab; i++)
            if ((corral_token)i != best && logits[0][i] > second) {
                second = logits[0][i];
                id = (corral_token)i;
            }
    }
    assert_true(shifts >= 4);
    corral_context_free(window_only);
    corral_context_free(everything);
    corral_model_free(m);
}

static void test_context_sliding_window_cells_survive_shifts(void **state)
{
    (void)state;
    check_window_cells_match_full_cache("arch/gemma2.gguf", CORRAL_KV_F16);
    check_window_cells_match_full_cache("arch/gemma3.gguf", CORRAL_KV_F16);
    check_window_cells_match_full_cache("arch/gemma2.gguf", CORRAL_KV_Q8_0);
    check_window_cells_match_full_cache("arch/gemma3.gguf", CORRAL_KV_Q4_0);
}

/*
 * A shift turns the cached keys that move and nothing else: 24 tokens, then the 10 after
 * the first 4 discarded, on an F32 cache. A key that was at cell 14 and is now at cell 4
 * is bit for bit the same on a layer without RoPE (smollm3's NoPE layer 3), and turned but
 * of the same length, head by head, on the others: YaRN's magnitude (mistral3 without
 * yarn_log_multiplier: 1 + 0.1 ln 4) is in the cached keys already and must not come twice.
 */
static void check_shift_turns_only_positioned_keys(const char *path, int nope_layer)
{
    corral_error err;
    corral_model *m = corral_model_load(path, &err);
    if (!m)
        fail_msg("%s", err.message);
    corral_context_params p;
    corral_context_params_init(&p);
    p.n_ctx = 64;
    p.n_threads = 2;
    p.kv_type = CORRAL_KV_F32;
    corral_context *ctx = corral_context_create(m, &p, &err);
    assert_non_null(ctx);
    size_t n_vocab = corral_model_n_vocab(m);
    corral_token ids[24];
    for (int i = 0; i < 24; i++)
        ids[i] = (corral_token)((i * 37 + 11) % (int)n_vocab);
    corral_batch batch = {.n_tokens = 24, .tokens = ids};
    assert_true(corral_decode(ctx, &batch, &err));
    const hparams *hp = &m->hp;
    size_t dk = hp->head_dim_k, width = hp->n_head_kv * dk;
    float *before = malloc(hp->n_layer * width * sizeof *before);
    float *after = malloc(width * sizeof *after);
    for (uint32_t il = 0; il < hp->n_layer; il++)
        kv_read_key(ctx, il, 0, 14, before + il * width);
    assert_true(corral_seq_shift(ctx, 0, 4, 10, &err));
    for (uint32_t il = 0; il < hp->n_layer; il++) {
        const float *was = before + il * width;
        kv_read_key(ctx, il, 0, 4, after);
        bool same = memcmp(was, after, width * sizeof *after) == 0;
        if ((int)il == nope_layer) {
            if (!same)
                fail_msg("%s: layer %u has no RoPE, but its keys were turned", path, il);
            continue;
        }
        if (same)
            fail_msg("%s: layer %u's keys were not turned", path, il);
        for (size_t h = 0; h < hp->n_head_kv; h++) {
            double n0 = 0.0, n1 = 0.0;
            for (size_t d = 0; d < dk; d++) {
                n0 += (double)was[h * dk + d] * was[h * dk + d];
                n1 += (double)after[h * dk + d] * after[h * dk + d];
            }
            if (fabs(sqrt(n1) / sqrt(n0) - 1.0) > 1e-5)
                fail_msg("%s: layer %u head %zu key length %g after the shift, %g before",
                         path, il, h, sqrt(n1), sqrt(n0));
        }
    }
    free(before);
    free(after);
    corral_context_free(ctx);
    corral_model_free(m);
}

static void test_context_shift_of_nope_and_yarn_layers(void **state)
{
    (void)state;
    check_shift_turns_only_positioned_keys(fixture("arch/smollm3.gguf"), 3);
    check_shift_turns_only_positioned_keys(fixture("arch/mistral3.gguf"), -1);
    char path[] = "/tmp/corral-test-yarn-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    write_key_variant("arch/mistral3.gguf", path, "mistral3.rope.scaling.yarn_log_multiplier",
                      GGUF_TYPE_COUNT, NULL);
    check_shift_turns_only_positioned_keys(path, -1);
    unlink(path);
}

/*
 * deepseek2's cache rows are [rotated key part | latent]: a shift turns the first n_rot values
 * and leaves the latent bit for bit. Layer 0's row of a token depends on the token and its
 * position only, so the row that moved from position 14 to 4 must be the row a fresh cache
 * computes for that token at position 4 (within float rounding of the turn).
 */
static void test_context_shift_of_latent_attention_rows(void **state)
{
    (void)state;
    corral_model *m = load_named("arch/deepseek2.gguf");
    corral_context_params p;
    corral_context_params_init(&p);
    p.n_ctx = 64;
    p.n_threads = 2;
    p.kv_type = CORRAL_KV_F32;
    corral_error err;
    corral_context *shifted = corral_context_create(m, &p, &err);
    corral_context *fresh = corral_context_create(m, &p, &err);
    assert_non_null(shifted);
    assert_non_null(fresh);
    size_t n_vocab = corral_model_n_vocab(m);
    corral_token ids[24];
    for (int i = 0; i < 24; i++)
        ids[i] = (corral_token)((i * 37 + 11) % (int)n_vocab);
    corral_batch batch = {.n_tokens = 24, .tokens = ids};
    assert_true(corral_decode(shifted, &batch, &err));
    const hparams *hp = &m->hp;
    size_t dk = hp->head_dim_k, rot = hp->n_rot;
    assert_int_equal(hp->n_head_kv, 1);
    float *before = malloc(hp->n_layer * dk * sizeof *before), *after = malloc(dk * sizeof *after);
    for (uint32_t il = 0; il < hp->n_layer; il++)
        kv_read_key(shifted, il, 0, 14, before + il * dk);
    assert_true(corral_seq_shift(shifted, 0, 4, 10, &err));
    for (uint32_t il = 0; il < hp->n_layer; il++) {
        kv_read_key(shifted, il, 0, 4, after);
        if (memcmp(before + il * dk + rot, after + rot, (dk - rot) * sizeof *after) != 0)
            fail_msg("layer %u: the shift changed the latent", il);
        if (memcmp(before + il * dk, after, rot * sizeof *after) == 0)
            fail_msg("layer %u: the shift did not turn the rotated part", il);
    }
    corral_token kept[5] = {ids[0], ids[1], ids[2], ids[3], ids[14]};
    batch = (corral_batch){.n_tokens = 5, .tokens = kept};
    assert_true(corral_decode(fresh, &batch, &err));
    float *want = malloc(dk * sizeof *want);
    kv_read_key(fresh, 0, 0, 4, want);
    kv_read_key(shifted, 0, 0, 4, after);
    for (size_t d = 0; d < dk; d++)
        if (fabsf(after[d] - want[d]) > 1e-5f)
            fail_msg("layer 0 value %zu after the shift %g, at position 4 from the start %g", d,
                     after[d], want[d]);
    free(before);
    free(after);
    free(want);
    corral_context_free(shifted);
    corral_context_free(fresh);
    corral_model_free(m);
}

/*
 * A shift turns the kept keys back by the discarded count on layers with RoPE and leaves the
 * keys of layers without it (cohere2's global layer 3) exactly as they were.
 */
static void test_context_shift_leaves_keys_of_layers_without_rope(void **state)
{
    (void)state;
    corral_model *m = load_named("arch/cohere2.gguf");
    corral_context_params p;
    corral_context_params_init(&p);
    p.n_ctx = 64;
    p.n_threads = 2;
    p.kv_type = CORRAL_KV_F32;
    corral_error err;
    corral_context *ctx = corral_context_create(m, &p, &err);
    assert_non_null(ctx);
    corral_token tokens[20];
    for (size_t i = 0; i < 20; i++)
        tokens[i] = (corral_token)(40 + 7 * i);
    corral_batch batch = {.n_tokens = 20, .tokens = tokens};
    assert_true(corral_decode(ctx, &batch, &err));
    const hparams *hp = &m->hp;
    size_t width = (size_t)hp->n_head_kv * hp->head_dim_k;
    float before[2][64], after[2][64];
    assert_true(width <= 64);
    const uint32_t layers[2] = {0, 3}; /* sliding with RoPE; global without */
    assert_true(m->layers[0].sliding && !m->layers[3].sliding);
    /* the key of the last token, at position 19, then 11 (positions 10-19 move to 2-11) */
    for (int i = 0; i < 2; i++)
        kv_read_key(ctx, layers[i], 0, 19 - kv_base(ctx, layers[i], 0), before[i]);
    assert_true(corral_seq_shift(ctx, 0, 2, 8, &err));
    for (int i = 0; i < 2; i++)
        kv_read_key(ctx, layers[i], 0, 11 - kv_base(ctx, layers[i], 0), after[i]);
    assert_memory_not_equal(before[0], after[0], width * sizeof(float));
    assert_memory_equal(before[1], after[1], width * sizeof(float));
    corral_context_free(ctx);
    corral_model_free(m);
}

/* After 20 tokens one at a time, gemma2's sliding layers hold positions 16-19 only. */
/* After 20 tokens one at a time, gemma2's sliding layers hold positions 16-19 only. */
/* This process's resident memory in bytes (VmRSS). */
static uint64_t resident_bytes(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    assert_non_null(f);
    char line[256];
    uint64_t kb = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %" SCNu64 " kB", &kb) == 1)
            break;
    fclose(f);
    return kb * 1024;
}

/* The KV cache is reserved, not committed: 4 sequences of 16384 cells (512 MiB of F16 cells
 * for tiny-tolstoy) cost next to nothing until tokens are written, so idle slots are free. */
static void test_context_kv_cache_costs_only_what_is_written(void **state)
{
    (void)state;
    corral_model *m = load();
    corral_context_params p;
    corral_context_params_init(&p);
    p.n_ctx = 16384;
    p.n_seq = 4;
    p.n_threads = 2;
    uint64_t before = resident_bytes();
    corral_error err;
    corral_context *ctx = corral_context_create(m, &p, &err);
    if (!ctx)
        fail_msg("%s", err.message);
    uint64_t grown = resident_bytes() - before;
    if (grown > (64u << 20))
        fail_msg("a context of 4 x 16384 cells made %" PRIu64 " MiB resident", grown >> 20);
    corral_token id = 5;
    for (int i = 0; i < 4; i++) {
        corral_batch batch = {.n_tokens = 1, .tokens = &id};
        assert_true(corral_decode(ctx, &batch, &err));
    }
    assert_int_equal(corral_seq_length(ctx, 0), 4);
    corral_context_free(ctx);
    corral_model_free(m);
}

static void test_context_reusable_prefix_respects_the_window(void **state)
{
    (void)state;
    corral_model *m = load_named("arch/gemma2.gguf");
    corral_context_params p;
    corral_context_params_init(&p);
    p.n_ctx = 64;
    p.n_batch = 1;
    p.n_threads = 2;
    corral_error err;
    corral_context *ctx = corral_context_create(m, &p, &err);
    assert_non_null(ctx);
    corral_token id = 5;
    for (int i = 0; i < 20; i++) {
        corral_batch batch = {.n_tokens = 1, .tokens = &id};
        assert_true(corral_decode(ctx, &batch, &err));
    }
    assert_int_equal(corral_seq_reusable(ctx, 0, 30), 20);
    assert_int_equal(corral_seq_reusable(ctx, 0, 19), 19); /* needs 16-18 */
    assert_int_equal(corral_seq_reusable(ctx, 0, 18), 0);  /* needs 15 */
    corral_context_free(ctx);
    corral_model_free(m);

    m = load();
    ctx = context(m, 64);
    corral_token ids[] = {1, 471, 444, 1986, 484, 1986, 369, 589};
    corral_batch batch = {.n_tokens = 8, .tokens = ids};
    assert_true(corral_decode(ctx, &batch, &err));
    assert_int_equal(corral_seq_reusable(ctx, 0, 3), 3); /* no window: any prefix */
    corral_context_free(ctx);
    corral_model_free(m);
}

/*
 * gemma4-e's layers 4 and 5 read layers 2's and 3's caches: a shift moves and turns those
 * keys once, not once more for the layers that share them. Discarding 5 of 24 after 4, the
 * kept cells overlap where they move, so a second move would read moved cells. Layer 3's key
 * that moved from position 14 to 9 is its old key turned back by 5 positions with its own
 * RoPE (global: base 1e6 over the rope_freqs divisors).
 */
static void test_context_shift_turns_shared_caches_once(void **state)
{
    (void)state;
    corral_model *m = load_named("arch/gemma4-e.gguf");
    corral_context_params p;
    corral_context_params_init(&p);
    p.n_ctx = 64;
    p.n_threads = 2;
    p.kv_type = CORRAL_KV_F32;
    corral_error err;
    corral_context *ctx = corral_context_create(m, &p, &err);
    assert_non_null(ctx);
    const layer_weights *l5 = &m->layers[5];
    assert_true(l5->kv_shared && l5->kv_source == 3 && !m->layers[3].sliding);
    corral_token ids[24];
    for (int i = 0; i < 24; i++)
        ids[i] = (corral_token)((i * 37 + 11) % (int)corral_model_n_vocab(m));
    corral_batch batch = {.n_tokens = 24, .tokens = ids};
    assert_true(corral_decode(ctx, &batch, &err));
    size_t width = (size_t)l5->n_head_kv * l5->head_dim_k;
    float *want = malloc(width * sizeof *want), *got = malloc(width * sizeof *got);
    float *cos_sin = malloc(m->hp.n_rot * sizeof *cos_sin);
    kv_read_key(ctx, 3, 0, 14, want);
    rope_params turn = ctx->rope[m->layers[3].rope_variant];
    rope_cache(&turn, -5.0f, cos_sin);
    rope_apply(&turn, cos_sin, want, l5->n_head_kv, l5->head_dim_k);
    assert_true(corral_seq_shift(ctx, 0, 4, 5, &err));
    kv_read_key(ctx, 3, 0, 9, got);
    for (size_t d = 0; d < width; d++)
        if (fabsf(got[d] - want[d]) > 1e-5f)
            fail_msg("layer 3 key value %zu after the shift %g, turned once %g", d, got[d],
                     want[d]);
    free(want);
    free(got);
    free(cos_sin);
    corral_context_free(ctx);
    corral_model_free(m);
}

/* Olmo 3 (arch/olmo3): its sliding layers keep only the window through shifts, as gemma's do,
 * and a shift turns the keys of both its RoPEs (plain on the sliding layers, YaRN with the
 * file's attention factor on the global one) without changing their length. */
static void test_context_olmo3_windows_and_shifts(void **state)
{
    (void)state;
    check_window_cells_match_full_cache("arch/olmo3.gguf", CORRAL_KV_F16);
    check_shift_turns_only_positioned_keys(fixture("arch/olmo3.gguf"), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_context_fills_shifts_and_keeps_generating),
        cmocka_unit_test(test_context_truncate_reuses_prefix),
        cmocka_unit_test(test_context_sliding_window_cells_survive_shifts),
        cmocka_unit_test(test_context_shift_of_nope_and_yarn_layers),
        cmocka_unit_test(test_context_shift_leaves_keys_of_layers_without_rope),
        cmocka_unit_test(test_context_shift_of_latent_attention_rows),
        cmocka_unit_test(test_context_reusable_prefix_respects_the_window),
        cmocka_unit_test(test_context_kv_cache_costs_only_what_is_written),
        cmocka_unit_test(test_context_shift_turns_shared_caches_once),
        cmocka_unit_test(test_context_olmo3_windows_and_shifts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

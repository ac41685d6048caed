/*
 * The device layers' recorded passes (vk_graphs.h): a pass is recorded once per graph shape
 * and submitted again as recorded while the shape recurs, and what changes between steps
 * still reaches the device. Generation of many steps gives the CPU's greedy ids and logits
 * (within test_vulkan_forward's tolerances) while recording its step once, on a dense model,
 * gemma2's sliding windows (which move while the recorded step is reused), an MoE and
 * deepseek2's latent attention; a new shape records again, and the least recently used one
 * is recorded again after more shapes than are kept; the steps that change what a reused
 * pass meets (sequences alternating, windows moving at their own times, a context shift, a
 * truncated sequence, qwen35's recurrent states cleared or put back from their checkpoint,
 * an image whose tokens see each other between text of the same size) agree with the CPU. Runs under lavapipe (CORRAL_VULKAN_ALLOW_CPU=1); exits 77 without any
 * Vulkan device.
 */
#include <inttypes.h>
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
#include "forward.h"
#include "gpu.h"
#include "vk_graphs.h"
#include "vulkan_fixture.h"

static const char *fixture(const char *name)
{
    static char path[512];
    const char *dir = getenv("CORRAL_FIXTURES");
    snprintf(path, sizeof path, "%s/%s", dir ? dir : "tests/fixtures", name);
    return path;
}

static corral_model *load(const char *file)
{
    corral_error err = {{0}};
    corral_model *m = corral_model_load(fixture(file), &err);
    if (!m)
        fail_msg("%s: %s", file, err.message);
    return m;
}

/* A CPU context (gpu_layers 0) or one with every layer on the device (-1). */
static corral_context *context(const corral_model *m, int gpu_layers, uint32_t n_seq,
                               uint32_t n_batch, uint32_t n_ctx, corral_kv_type kv)
{
    corral_context *ctx = vulkan_fixture_context(m, gpu_layers, n_seq, n_batch, n_ctx, kv);
    if (gpu_layers && corral_context_gpu_layers(ctx) != corral_model_n_layer(m))
        fail_msg("%u of %u layers on the device", corral_context_gpu_layers(ctx),
                 corral_model_n_layer(m));
    return ctx;
}

static gpu_layers_stats stats(const corral_context *ctx)
{
    return gpu_layers_get_stats(ctx->gpu);
}

/* The same batch through the CPU context and the device's. */
typedef struct pair {
    const corral_model *m;
    corral_context *cpu, *gpu;
    float tolerance;
    const char *name;
} pair;

static pair pair_create(const char *file, float tolerance, uint32_t n_seq, uint32_t n_batch,
                        uint32_t n_ctx, corral_kv_type kv)
{
    corral_model *m = load(file);
    return (pair){m, context(m, 0, n_seq, n_batch, n_ctx, kv),
                  context(m, -1, n_seq, n_batch, n_ctx, kv), tolerance, file};
}

static void pair_free(pair *p)
{
    corral_context_free(p->cpu);
    corral_context_free(p->gpu);
    corral_model_free((corral_model *)p->m);
}

static corral_token argmax(const float *x, size_t n)
{
    size_t best = 0;
    for (size_t i = 1; i < n; i++)
        if (x[i] > x[best])
            best = i;
    return (corral_token)best;
}

/* Both decode the batch (logits: NULL for the last token's only); every token that has
 * logits must agree within the tolerance and give the same greedy id. The CPU's greedy id
 * of the last token. */
static corral_token decode_both(pair *p, const corral_token *ids, const int32_t *seq, size_t n,
                                const bool *logits, const char *what)
{
    corral_batch batch = {.n_tokens = n, .tokens = ids, .seq = seq, .logits = logits};
    corral_error err = {{0}};
    if (!corral_decode(p->cpu, &batch, &err) || !corral_decode(p->gpu, &batch, &err))
        fail_msg("%s: %s: decode: %s", p->name, what, err.message);
    size_t V = corral_model_n_vocab(p->m);
    corral_token last = -1;
    for (size_t t = 0; t < n; t++) {
        const float *want = corral_get_logits(p->cpu, t), *got = corral_get_logits(p->gpu, t);
        if (!want)
            continue;
        assert_non_null(got);
        float worst = 0.0f;
        for (size_t i = 0; i < V; i++) {
            float d = fabsf(got[i] - want[i]);
            worst = d > worst || isnan(d) ? d : worst;
        }
        if (!(worst <= p->tolerance))
            fail_msg("%s: %s, token %zu: logits differ by %g (tolerance %g)", p->name, what, t,
                     (double)worst, (double)p->tolerance);
        last = argmax(want, V);
        if (argmax(got, V) != last)
            fail_msg("%s: %s, token %zu: device id %d, CPU id %d", p->name, what, t,
                     argmax(got, V), last);
    }
    return last;
}

/* n prompt tokens of seq (its logits at the last only); the CPU's greedy id after them. */
static corral_token prompt(pair *p, int32_t seq, size_t n, uint32_t salt)
{
    corral_token ids[64];
    int32_t seqs[64];
    assert_true(n <= 64);
    size_t V = corral_model_n_vocab(p->m);
    for (size_t i = 0; i < n; i++)
        ids[i] = (corral_token)((i * 37 + salt) % V), seqs[i] = seq;
    return decode_both(p, ids, seqs, n, NULL, "prompt");
}

/* n greedy steps of seq from id; the next id. */
static corral_token generate(pair *p, int32_t seq, corral_token id, size_t n)
{
    for (size_t s = 0; s < n; s++) {
        char what[64];
        snprintf(what, sizeof what, "step %zu of sequence %d", s, seq);
        id = decode_both(p, &id, &seq, 1, NULL, what);
    }
    return id;
}

/* 32 steps after an 11-token prompt: one recording for all of them, then a pass each. */
static void check_generation(const char *file, float tolerance, uint32_t n_batch)
{
    pair p = pair_create(file, tolerance, 1, n_batch, 64, CORRAL_KV_F32);
    corral_token id = prompt(&p, 0, 11, 1);
    gpu_layers_stats before = stats(p.gpu);
    generate(&p, 0, id, 32);
    gpu_layers_stats after = stats(p.gpu);
    assert_int_equal(after.recordings, before.recordings + 1);
    assert_int_equal(after.passes, before.passes + 32);
    pair_free(&p);
}

static void test_generation_records_once(void **state)
{
    (void)state;
    check_generation("arch/llama-gqa.gguf", 1e-3f, 64);
    /* micro-batches of 4 under a window of 4: the sliding layers hold 7 cells and move them
     * every few steps, in the same submission as the reused step */
    check_generation("arch/gemma2.gguf", 3e-2f, 4);
    check_generation("arch/qwen3moe.gguf", 1e-3f, 64);
    check_generation("arch/deepseek2.gguf", 1e-3f, 64);
    check_generation("arch/qwen35.gguf", 1e-3f, 64); /* the recurrent states move on */
}

/* n tokens of seq 0 through ctx alone (test_vulkan_forward compares the logits). */
static void decode_device(corral_context *ctx, const char *name, size_t n, uint32_t salt)
{
    corral_token ids[16];
    assert_true(n <= 16);
    for (size_t i = 0; i < n; i++)
        ids[i] = (corral_token)((i * 37 + salt) % 200);
    corral_batch batch = {.n_tokens = n, .tokens = ids};
    corral_error err = {{0}};
    if (!corral_decode(ctx, &batch, &err))
        fail_msg("%s: decode: %s", name, err.message);
}

/* A generation step of a llama-shaped model of each weight type: one submission; its
 * dispatches and barriers, printed (docs/GPU.md quotes them). The q, k and v products share
 * one quantization of their input and one barrier, as do the gate and up products, so a
 * step has fewer barriers than dispatches. */
static void test_step_counts(void **state)
{
    (void)state;
    const char *files[] = {"quant/rand-e256-Q4_0.gguf", "quant/rand-e256-Q8_0.gguf",
                           "quant/rand-e256-Q4_K_M.gguf"};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        corral_model *m = load(files[i]);
        corral_context *ctx = context(m, -1, 1, 64, 64, CORRAL_KV_F16);
        decode_device(ctx, files[i], 7, 3);
        decode_device(ctx, files[i], 1, 5); /* the step's recording */
        gpu_layers_stats before = stats(ctx);
        decode_device(ctx, files[i], 1, 6);
        gpu_layers_stats after = stats(ctx);
        print_message("%s: a step: %u dispatches, %u barriers, %" PRIu64 " submission(s); "
                      "%u layers\n", files[i], after.dispatches, after.barriers,
                      after.submits - before.submits, corral_model_n_layer(m));
        assert_int_equal(after.recordings, before.recordings);
        assert_int_equal(after.submits - before.submits, 1);
        assert_true(after.barriers < after.dispatches);
        corral_context_free(ctx);
        corral_model_free(m);
    }
}

/* Every new shape (tokens, rows of logits) records; a shape seen before does not, until more
 * shapes than are kept have come since it was last used. */
static void test_new_shapes_record_again(void **state)
{
    (void)state;
    pair p = pair_create("arch/llama-gqa.gguf", 1e-3f, 1, 64, 128, CORRAL_KV_F32);
    corral_token id = prompt(&p, 0, 5, 3);
    assert_int_equal(stats(p.gpu).recordings, 1);
    id = generate(&p, 0, id, 2);
    assert_int_equal(stats(p.gpu).recordings, 2);
    corral_token ids[16];
    bool all[16];
    for (size_t i = 0; i < 16; i++)
        ids[i] = (corral_token)((i * 11 + 7) % corral_model_n_vocab(p.m)), all[i] = true;
    decode_both(&p, ids, NULL, 3, all, "3 tokens, all logits");
    assert_int_equal(stats(p.gpu).recordings, 3);
    id = decode_both(&p, ids, NULL, 3, NULL, "3 tokens, the last one's logits");
    assert_int_equal(stats(p.gpu).recordings, 4);
    id = generate(&p, 0, id, 2);
    assert_int_equal(stats(p.gpu).recordings, 4);
    /* VK_GRAPHS shapes more: the step's, now the least recently used, is recorded over */
    for (size_t n = 6; n < 6 + VK_GRAPHS; n++)
        decode_both(&p, ids, NULL, n, NULL, "a new shape");
    assert_int_equal(stats(p.gpu).recordings, 4 + VK_GRAPHS);
    generate(&p, 0, id, 3);
    assert_int_equal(stats(p.gpu).recordings, 5 + VK_GRAPHS);
    pair_free(&p);
}

/* Two sequences' steps alternating under cohere2's window of 4 in micro-batches of 4: the
 * same recorded step serves both, each window moving at its own times. */
static void test_sequences_alternate(void **state)
{
    (void)state;
    pair p = pair_create("arch/cohere2.gguf", 1e-3f, 2, 4, 64, CORRAL_KV_F16);
    /* the prompts' last micro-batches are of 2 tokens: the step is a shape of its own */
    corral_token ids[2] = {prompt(&p, 0, 6, 5), prompt(&p, 1, 10, 8)};
    uint64_t recorded = stats(p.gpu).recordings;
    for (int step = 0; step < 16; step++)
        for (int32_t s = 0; s < 2; s++)
            ids[s] = generate(&p, s, ids[s], 1);
    assert_int_equal(stats(p.gpu).recordings, recorded + 1);
    pair_free(&p);
}

/* A context shift between steps: the cells renumbered and keys turned, on full layers and on
 * gemma2's sliding ones, while the step recorded before it is reused after it. */
static void check_shift(const char *file, float tolerance, uint32_t n_batch, corral_kv_type kv)
{
    pair p = pair_create(file, tolerance, 1, n_batch, 48, kv);
    corral_token id = generate(&p, 0, prompt(&p, 0, 30, 2), 6);
    uint64_t recorded = stats(p.gpu).recordings;
    corral_error err = {{0}};
    if (!corral_seq_shift(p.cpu, 0, 4, 13, &err) || !corral_seq_shift(p.gpu, 0, 4, 13, &err))
        fail_msg("%s: shift: %s", file, err.message);
    generate(&p, 0, id, 8);
    assert_int_equal(stats(p.gpu).recordings, recorded);
    pair_free(&p);
}

static void test_shift_between_steps(void **state)
{
    (void)state;
    check_shift("arch/llama-gqa.gguf", 1e-3f, 48, CORRAL_KV_F16);
    check_shift("arch/gemma2.gguf", 3e-2f, 4, CORRAL_KV_F32);
    check_shift("arch/deepseek2.gguf", 1e-3f, 48, CORRAL_KV_F16);
}

/* A sequence truncated (to 2 tokens: below gemma2's window base, whose cells are then
 * written again) and prompted anew reuses the recorded shapes. */
static void check_truncate(const char *file, float tolerance, uint32_t n_batch)
{
    pair p = pair_create(file, tolerance, 1, n_batch, 64, CORRAL_KV_F32);
    generate(&p, 0, prompt(&p, 0, 20, 4), 6);
    uint64_t recorded = stats(p.gpu).recordings;
    corral_seq_truncate(p.cpu, 0, 2);
    corral_seq_truncate(p.gpu, 0, 2);
    generate(&p, 0, prompt(&p, 0, 20, 9), 6);
    assert_int_equal(stats(p.gpu).recordings, recorded);
    pair_free(&p);
}

static void test_truncate_and_prompt_again(void **state)
{
    (void)state;
    check_truncate("arch/llama-gqa.gguf", 1e-3f, 64);
    check_truncate("arch/gemma2.gguf", 3e-2f, 4);
    check_truncate("arch/qwen35.gguf", 1e-3f, 64); /* the recurrent states cleared */
}

/* qwen35's recurrent states checkpointed after a prompt, then put back between steps: the
 * steps after the restore are the CPU's, the recorded step serving them. */
static void test_recurrent_checkpoint_between_steps(void **state)
{
    (void)state;
    pair p = pair_create("arch/qwen35.gguf", 1e-3f, 1, 64, 64, CORRAL_KV_F32);
    corral_token id = prompt(&p, 0, 20, 4);
    assert_true(corral_seq_checkpoint(p.cpu, 0, CORRAL_CHECKPOINT_PROMPT) &&
                corral_seq_checkpoint(p.gpu, 0, CORRAL_CHECKPOINT_PROMPT));
    generate(&p, 0, id, 6);
    uint64_t recorded = stats(p.gpu).recordings;
    corral_seq_truncate(p.cpu, 0, 20);
    corral_seq_truncate(p.gpu, 0, 20);
    generate(&p, 0, id + 1, 6);
    assert_int_equal(stats(p.gpu).recordings, recorded);
    pair_free(&p);
}

/* gemma3's image tokens see each other both ways. Text, an image and text again, 12 tokens
 * each with the last one's logits: one recorded pass serves the three, each token's last
 * visible cell being step data (its own for text, the image's last for the image's). */
static void test_image_and_text_of_one_size(void **state)
{
    (void)state;
    pair p = pair_create("vision/gemma3-text.gguf", 3e-2f, 1, 64, 128, CORRAL_KV_F32);
    size_t V = corral_model_n_vocab(p.m), E = corral_model_n_embd(p.m);
    enum { NX = 4, NY = 3 };
    float *rows = malloc(NX * NY * E * sizeof *rows);
    assert_non_null(rows);
    for (size_t i = 0; i < NX * NY * E; i++)
        rows[i] = (float)((i * 7919) % 2001) / 1000.0f - 1.0f;
    corral_image_embd image = {.n_tokens = NX * NY, .nx = NX, .ny = NY, .n_embd = (uint32_t)E,
                               .data = rows};
    prompt(&p, 0, NX * NY, 6);
    uint64_t recorded = stats(p.gpu).recordings;
    corral_error err = {{0}};
    if (!corral_decode_image(p.cpu, 0, &image, &err) ||
        !corral_decode_image(p.gpu, 0, &image, &err))
        fail_msg("image: %s", err.message);
    const float *want = corral_get_logits(p.cpu, NX * NY - 1);
    const float *got = corral_get_logits(p.gpu, NX * NY - 1);
    assert_true(want && got);
    for (size_t i = 0; i < V; i++)
        if (!(fabsf(got[i] - want[i]) <= p.tolerance))
            fail_msg("the image's logit %zu: device %g, CPU %g", i, (double)got[i],
                     (double)want[i]);
    prompt(&p, 0, NX * NY, 2);
    assert_int_equal(stats(p.gpu).recordings, recorded);
    free(rows);
    pair_free(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_generation_records_once),
        cmocka_unit_test(test_new_shapes_record_again),
        cmocka_unit_test(test_step_counts),
        cmocka_unit_test(test_sequences_alternate),
        cmocka_unit_test(test_shift_between_steps),
        cmocka_unit_test(test_truncate_and_prompt_again),
        cmocka_unit_test(test_recurrent_checkpoint_between_steps),
        cmocka_unit_test(test_image_and_text_of_one_size),
    };
    return VULKAN_FIXTURE_RUN(tests);
}

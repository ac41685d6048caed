/*
 * Whole layers on the Vulkan device against the CPU engine: the same model and tokens
 * through a CPU context and one with every layer and the output layer (and one with only the
 * last layer) on the device give the CPU's greedy ids, and logits within ten times the
 * tolerance the CPU path itself is held to against llama.cpp (tests/fixtures READMEs): 1e-3
 * for F32 weights, 1e-2 for the quantized types, 0.1 for F16, 0.3 for BF16; 3e-2 for gemma
 * and 2e-2 for starcoder2, whose GELU rounds its input to fp16 (a gate summed in another
 * order can land on the other side of an fp16 rounding boundary). The quantized types'
 * products take activations rounded to Q8_0, Q8_1 or Q8_K, which both sides do bit for bit
 * (test_vulkan_ops), but the sums before it run in another order, so a value on a rounding
 * boundary can round the other way: as quant/README.md has it for the CPU against llama.cpp,
 * such a flip moves logits by up to 0.25 and is noted, not failed; the greedy ids must still
 * be the CPU's. Prompts are batches with logits at every position, then 8 greedy steps (2 in
 * the sanitizer build's short runs, which also take one type file per host path); four
 * sequences batched together each get their own. The partial offload runs on the families and
 * a few of the type files only: lavapipe takes seconds a model. Families the device layers
 * lack run on the CPU unchanged. With CORRAL_VULKAN_SPLIT_BYTES small (ctest's
 * test_vulkan_forward.split), the matrices are split across buffers as a device with small
 * bindings would need. Runs under lavapipe
 * (CORRAL_VULKAN_ALLOW_CPU=1); exits 77 without any Vulkan device.
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
#include "forward.h"
#include "gpu.h"
#include "head_fixture.h"
#include "moe_fixture.h"
#include "nemotron_latent_fixture.h"
#include "short_fixture.h"
#include "vk_device.h"
#include "vulkan_fixture.h"

static const char *fixture(const char *name)
{
    static char path[512];
    const char *dir = getenv("CORRAL_FIXTURES");
    snprintf(path, sizeof path, "%s/%s", dir ? dir : "tests/fixtures", name);
    return path;
}

static corral_context *context_batch(const corral_model *m, int gpu_layers, uint32_t n_seq,
                                     uint32_t n_batch)
{
    return vulkan_fixture_context(m, gpu_layers, n_seq, n_batch, 128, CORRAL_KV_F32);
}

static corral_context *context(const corral_model *m, int gpu_layers, uint32_t n_seq)
{
    return context_batch(m, gpu_layers, n_seq, 64);
}

static void decode(corral_context *ctx, const corral_token *ids, const int32_t *seq, size_t n,
                   const bool *logits)
{
    corral_batch batch = {.n_tokens = n, .tokens = ids, .seq = seq, .logits = logits};
    corral_error err = {{0}};
    if (!corral_decode(ctx, &batch, &err))
        fail_msg("decode: %s", err.message);
}

static float max_abs_diff(const float *a, const float *b, size_t n)
{
    float worst = 0.0f;
    for (size_t i = 0; i < n; i++) {
        float d = fabsf(a[i] - b[i]);
        worst = d > worst || isnan(d) ? d : worst;
    }
    return worst;
}

static corral_token argmax(const float *x, size_t n)
{
    size_t best = 0;
    for (size_t i = 1; i < n; i++)
        if (x[i] > x[best])
            best = i;
    return (corral_token)best;
}

/* Greedy steps after a prompt: 8, or 2 in short runs (short_fixture.h), which still decode
 * one token after the prompt's batch and one after another single token. */
static size_t greedy_steps(void)
{
    return short_fixture_on() ? 2 : 8;
}

/* The prompt (all positions' logits), then the greedy steps on the CPU's ids. */
/* Whether a logit difference is within tolerance, or (flips allowed) one rounding flip. */
static bool close_enough(const char *name, const char *where, size_t i, float diff,
                         float tolerance, bool flips)
{
    if (diff <= tolerance)
        return true;
    if (flips && diff <= 0.25f) {
        print_message("note: %s: %s %zu logits differ by %g: an activation rounding flip\n",
                      name, where, i, (double)diff);
        return true;
    }
    return false;
}

static void check_against_cpu(const char *name, const corral_model *m, corral_context *cpu,
                              corral_context *gpu, float tolerance, bool flips)
{
    size_t V = corral_model_n_vocab(m);
    corral_token prompt[19];
    bool all[19];
    for (size_t i = 0; i < 19; i++) {
        prompt[i] = (corral_token)((i * 37 + 1) % V); /* 19: no whole number of anything */
        all[i] = true;
    }
    decode(cpu, prompt, NULL, 19, all);
    decode(gpu, prompt, NULL, 19, all);
    for (size_t t = 0; t < 19; t++) {
        float diff = max_abs_diff(corral_get_logits(gpu, t), corral_get_logits(cpu, t), V);
        if (!close_enough(name, "prompt position", t, diff, tolerance, flips))
            fail_msg("%s: prompt position %zu logits differ by %g (tolerance %g)", name, t,
                     (double)diff, (double)tolerance);
    }
    for (size_t s = 0; s < greedy_steps(); s++) {
        const float *want = corral_get_logits(cpu, 0), *got = corral_get_logits(gpu, 0);
        if (s == 0)
            want = corral_get_logits(cpu, 18), got = corral_get_logits(gpu, 18);
        float diff = max_abs_diff(got, want, V);
        if (!close_enough(name, "greedy step", s, diff, tolerance, flips))
            fail_msg("%s: greedy step %zu logits differ by %g (tolerance %g)", name, s,
                     (double)diff, (double)tolerance);
        corral_token id = argmax(want, V);
        if (argmax(got, V) != id)
            fail_msg("%s: greedy step %zu: device id %d, CPU id %d", name, s, argmax(got, V), id);
        decode(cpu, &id, NULL, 1, NULL);
        decode(gpu, &id, NULL, 1, NULL);
    }
}

/* All layers on the device, then (partial) only the last one; micro-batches of n_batch; file:
 * a fixture's name, or a path of its own (starting with '/'). */
static void check_model_batch(const char *file, float tolerance, bool flips, bool partial,
                              uint32_t n_batch)
{
    corral_error err = {{0}};
    corral_model *m = corral_model_load(file[0] == '/' ? file : fixture(file), &err);
    if (!m)
        fail_msg("%s: %s", file, err.message);
    uint32_t n_layer = corral_model_n_layer(m);
    const int splits[] = {-1, 1};
    for (size_t i = 0; i < (partial ? 2u : 1u); i++) {
        corral_context *cpu = context_batch(m, 0, 1, n_batch);
        corral_context *gpu = context_batch(m, splits[i], 1, n_batch);
        uint32_t want = splits[i] < 0 ? n_layer : (uint32_t)splits[i];
        if (corral_context_gpu_layers(gpu) != want)
            fail_msg("%s: %u layers on the device, want %u", file,
                     corral_context_gpu_layers(gpu), want);
        char name[128];
        snprintf(name, sizeof name, "%s with %u of %u layers on %s", file, want, n_layer,
                 corral_context_gpu_device(gpu));
        check_against_cpu(name, m, cpu, gpu, tolerance, flips);
        corral_context_free(cpu);
        corral_context_free(gpu);
    }
    corral_model_free(m);
}

static void check_model(const char *file, float tolerance, bool flips, bool partial)
{
    check_model_batch(file, tolerance, flips, partial, 64);
}

/* Only the last `layers` layers asked for on the device: they go there, or (0 on the device)
 * the model needs more of them there; either way the logits are the CPU's. */
static void check_partial(const char *file, uint32_t layers, float tolerance)
{
    corral_error err = {{0}};
    corral_model *m = corral_model_load(fixture(file), &err);
    if (!m)
        fail_msg("%s: %s", file, err.message);
    corral_context *cpu = context(m, 0, 1), *gpu = context(m, (int)layers, 1);
    uint32_t on = corral_context_gpu_layers(gpu);
    if (on != layers && on != 0)
        fail_msg("%s: %u layers on the device, asked for %u", file, on, layers);
    char name[128];
    snprintf(name, sizeof name, "%s with %u layers on the device", file, on);
    check_against_cpu(name, m, cpu, gpu, on ? tolerance : 0.0f, false);
    corral_context_free(cpu);
    corral_context_free(gpu);
    corral_model_free(m);
}

/* A model whose device path another file's already takes on the host: the float types and
 * the ones whose products quantize activations to Q8_0, Q8_1 or Q8_K (vk_ops.c) each have a
 * file kept in short runs (short_fixture.h), where the sanitizers look at host memory; the
 * others differ from those only in their shaders and row sizes, checked by the full runs. */
static void check_model_in_full_runs(const char *file, float tolerance, bool flips)
{
    if (short_fixture_on()) {
        print_message("short run: %s takes another file's host path\n", file);
        skip();
    }
    check_model(file, tolerance, flips, false);
}

static void test_llama_gqa(void **state) { (void)state; check_model("arch/llama-gqa.gguf", 1e-3f, false, true); }
static void test_llama_tied_rope_freqs(void **state) { (void)state; check_model("arch/llama-tied.gguf", 1e-3f, false, false); }
static void test_qwen2_biases_neox(void **state) { (void)state; check_model("arch/qwen2.gguf", 1e-3f, false, false); }
static void test_qwen3_qk_norm(void **state) { (void)state; check_model("arch/qwen3.gguf", 1e-3f, false, true); }
static void test_phi3_fused_qkv_and_gate_up(void **state) { (void)state; check_model("arch/phi3.gguf", 1e-3f, false, false); }
static void test_granite_scales(void **state) { (void)state; check_model("arch/granite.gguf", 1e-3f, false, false); }
static void test_smollm3_nope_layers(void **state) { (void)state; check_model("arch/smollm3.gguf", 1e-3f, false, false); }
static void test_gemma2_softcaps_and_windows(void **state) { (void)state; check_model("arch/gemma2.gguf", 3e-2f, false, true); }
static void test_gemma3_two_ropes_and_windows(void **state) { (void)state; check_model("arch/gemma3.gguf", 3e-2f, false, true); }
static void test_cohere2_parallel_layernorm(void **state) { (void)state; check_model("arch/cohere2.gguf", 1e-3f, false, true); }
static void test_exaone4_normed_branches(void **state) { (void)state; check_model("arch/exaone4.gguf", 1e-3f, false, true); }
static void test_glm4_sandwich_partial_rope(void **state) { (void)state; check_model("arch/glm4.gguf", 1e-3f, false, true); }
static void test_olmo2_whole_qk_norms(void **state) { (void)state; check_model("arch/olmo2.gguf", 1e-3f, false, true); }
static void test_starcoder2_layernorm_gelu_biases(void **state) { (void)state; check_model("arch/starcoder2.gguf", 2e-2f, false, true); }
static void test_mistral3_attention_temperature(void **state) { (void)state; check_model("arch/mistral3.gguf", 1e-3f, false, true); }
/* nemotron: LayerNorms with biases, an ungated ReLU² FFN with biases, NeoX RoPE on part of
 * each head. */
static void test_nemotron_relu_sqr_partial_neox(void **state) { (void)state; check_model("arch/nemotron.gguf", 1e-3f, false, true); }
/* mllama without an image: its cross-attention layers (1 and 3) left out on the device too,
 * whether the device's first layer is one of them (4 of 5 there, and 2) or not (all, 1) */
static void test_mllama_leaves_out_cross_attention_layers(void **state)
{
    (void)state;
    check_model("arch/mllama.gguf", 1e-3f, false, true);
    check_partial("arch/mllama.gguf", 2, 1e-3f);
    check_partial("arch/mllama.gguf", 4, 1e-3f);
}
/* An mllama context made for images (n_seq sequences, one thread), with gpu_layers on the
 * device. */
static corral_context *mllama_context(const corral_model *m, int gpu_layers, uint32_t n_seq)
{
    corral_context_params p;
    corral_context_params_init(&p);
    p.n_ctx = 128;
    p.n_batch = 64;
    p.n_seq = n_seq;
    p.n_threads = 1;
    p.kv_type = CORRAL_KV_F32;
    p.images = true;
    p.n_gpu_layers = gpu_layers;
    corral_error err = {{0}};
    corral_context *ctx = corral_context_create(m, &p, &err);
    if (!ctx)
        fail_msg("mllama context: %s", err.message);
    return ctx;
}

/* The first `tiles` tiles (17 rows of 64 each) of the reference's image states
 * (vision/mllama.wide.embd.f32, 4 tiles), of which the first `attended` tiles are seen, as
 * sequence seq's image. */
static void mllama_image(corral_context *ctx, int32_t seq, uint32_t tiles, uint32_t attended)
{
    static float rows[4 * 17 * 64];
    FILE *f = fopen(fixture("vision/mllama.wide.embd.f32"), "rb");
    assert_non_null(f);
    assert_int_equal(fread(rows, sizeof rows, 1, f), 1);
    fclose(f);
    corral_image_embd image = {.n_tokens = 1, .nx = 1, .ny = 1, .n_embd = tiles * 17 * 64,
                               .data = rows, .n_attended = attended * 17};
    corral_error err = {{0}};
    if (!corral_decode_image(ctx, seq, &image, &err))
        fail_msg("mllama image: %s", err.message);
}

/* The same batch (logits at every token) through both contexts: their logits agree within
 * 1e-3 and pick the same ids; the CPU's ids into ids. */
static void mllama_batch(const char *name, corral_context *cpu, corral_context *gpu,
                         const corral_token *tokens, const int32_t *seq, size_t n,
                         corral_token *ids)
{
    bool all[8] = {true, true, true, true, true, true, true, true};
    assert_true(n <= 8);
    decode(cpu, tokens, seq, n, all);
    decode(gpu, tokens, seq, n, all);
    for (size_t t = 0; t < n; t++) {
        const float *want = corral_get_logits(cpu, (int32_t)t);
        const float *got = corral_get_logits(gpu, (int32_t)t);
        float diff = max_abs_diff(got, want, 304);
        if (!(diff <= 1e-3f))
            fail_msg("%s: token %zu (sequence %d): logits differ by %g", name, t, seq[t],
                     (double)diff);
        ids[t] = argmax(want, 304);
        if (argmax(got, 304) != ids[t])
            fail_msg("%s: token %zu: device id %d, CPU id %d", name, t, argmax(got, 304),
                     ids[t]);
    }
}

/*
 * mllama's images on the device's cross-attention layers (1 and 3) as on the CPU: every
 * layer there, or the last 3 (layer 1 on the CPU, 3 on the device). Three sequences in one
 * batch: one with a 2-tile image (1 tile attended), then one with a 4-tile image (2 attended),
 * which makes the device's image caches grow with the first's kept, and one without. Then
 * greedy steps of all three, and the first image's token cut away (its sequence then passes
 * the layers unchanged) while the second's stays.
 */
static void test_mllama_images_on_the_device(void **state)
{
    (void)state;
    corral_error err = {{0}};
    corral_model *m = corral_model_load(fixture("vision/mllama.gguf"), &err);
    if (!m)
        fail_msg("%s", err.message);
    const int splits[] = {-1, 3};
    for (size_t i = 0; i < sizeof splits / sizeof splits[0]; i++) {
        corral_context *cpu = mllama_context(m, 0, 3), *gpu = mllama_context(m, splits[i], 3);
        uint32_t want = splits[i] < 0 ? 5 : 3;
        assert_int_equal(corral_context_gpu_layers(gpu), want);
        char name[64];
        snprintf(name, sizeof name, "mllama with %u layers on the device", want);
        corral_token ids[8];
        const corral_token before[] = {51, 257, 51, 257, 60};
        const int32_t before_seq[] = {0, 0, 1, 1, 2};
        mllama_batch(name, cpu, gpu, before, before_seq, 5, ids);
        mllama_image(cpu, 1, 2, 1);
        mllama_image(gpu, 1, 2, 1);
        mllama_image(cpu, 0, 4, 2);
        mllama_image(gpu, 0, 4, 2);
        const corral_token after[] = {300, 285, 262, 298, 300, 285, 262, 298};
        const int32_t after_seq[] = {0, 1, 2, 0, 1, 2, 0, 1};
        mllama_batch(name, cpu, gpu, after, after_seq, 8, ids);
        const int32_t step_seq[] = {0, 1, 2};
        corral_token step[3] = {ids[6], ids[7], ids[5]};
        for (int s = 0; s < 2; s++) {
            mllama_batch(name, cpu, gpu, step, step_seq, 3, ids);
            memcpy(step, ids, sizeof step);
        }
        corral_seq_truncate(cpu, 0, 2); /* the image token's position: 2 */
        corral_seq_truncate(gpu, 0, 2);
        const corral_token cut[] = {300, 285, 262};
        const int32_t cut_seq[] = {0, 0, 1};
        mllama_batch(name, cpu, gpu, cut, cut_seq, 3, ids);
        corral_context_free(cpu);
        corral_context_free(gpu);
    }
    corral_model_free(m);
}

/* The device layers' fitting counts, for a context made for images, each cross-attention
 * layer's cache of images (keys and values, F32, 2 KV heads of 16, the tower's 4 tiles of 17
 * rows a sequence), which a text context leaves out. */
static void test_mllama_fitting_counts_image_caches(void **state)
{
    (void)state;
    corral_error err = {{0}};
    corral_model *m = corral_model_load(fixture("vision/mllama.gguf"), &err);
    if (!m)
        fail_msg("%s", err.message);
    corral_context *images = mllama_context(m, -1, 3);
    corral_context *text = vulkan_fixture_context(m, -1, 3, 64, 128, CORRAL_KV_F32);
    uint64_t cache = 3ull * 2 * 68 * 16 * sizeof(float), want = 2 /* layers */ * 2 * cache;
    uint64_t diff = gpu_layers_estimate(images->gpu) - gpu_layers_estimate(text->gpu);
    if (diff < want || diff >= want + 4 * 65536)
        fail_msg("the images' caches add %llu bytes to the estimate, want %llu and alignment",
                 (unsigned long long)diff, (unsigned long long)want);
    corral_context_free(images);
    corral_context_free(text);
    corral_model_free(m);
}

static void test_qwen2vl_mrope_text(void **state) { (void)state; check_model("vision/qwen25vl-text.gguf", 1e-3f, false, true); }

/* Micro-batches of 4 and a window of 4: the sliding layers hold 4 + 4 - 1 cells and move
 * them along as the sequence grows, the device's as the CPU's (also with only the last
 * layer on the device, the others sliding on the CPU). */
static void test_windows_slide_in_small_batches(void **state)
{
    (void)state;
    check_model_batch("arch/gemma2.gguf", 3e-2f, false, true, 4);
    check_model_batch("arch/cohere2.gguf", 1e-3f, false, true, 4);
}

static void test_stories260k(void **state) { (void)state; check_model("stories260K.gguf", 1e-3f, false, true); }
static void test_tiny_tolstoy_f16(void **state) { (void)state; check_model_in_full_runs("tiny-tolstoy-f16.gguf", 1e-1f, false); }
static void test_quant_f32(void **state) { (void)state; check_model("quant/rand-e256-F32.gguf", 1e-3f, false, false); }
static void test_quant_f16(void **state) { (void)state; check_model("quant/rand-e256-F16.gguf", 1e-1f, false, false); }
static void test_quant_q4_0(void **state) { (void)state; check_model("quant/rand-e256-Q4_0.gguf", 1e-2f, true, false); }
static void test_quant_bf16(void **state) { (void)state; check_model_in_full_runs("quant/rand-e256-BF16.gguf", 3e-1f, false); }
static void test_quant_q5_0(void **state) { (void)state; check_model_in_full_runs("quant/rand-e256-Q5_0.gguf", 1e-2f, true); }
static void test_quant_q5_k(void **state) { (void)state; check_model_in_full_runs("quant/rand-e256-Q5_K.gguf", 1e-2f, true); }
static void test_quant_q4_k(void **state) { (void)state; check_model_in_full_runs("quant/rand-e256-Q4_K.gguf", 1e-2f, true); }
static void test_quant_q6_k(void **state) { (void)state; check_model_in_full_runs("quant/rand-e256-Q6_K.gguf", 1e-2f, true); }
static void test_quant_q4_k_m(void **state) { (void)state; check_model("quant/rand-e256-Q4_K_M.gguf", 1e-2f, true, true); }
static void test_llama_moe(void **state) { (void)state; check_model("arch/llama-moe.gguf", 1e-3f, false, true); }
/* Experts in a tensor each (older Mixtral files): uploaded expert by expert. */
static void test_llama_moe_experts_in_one_tensor_each(void **state)
{
    (void)state;
    char path[] = "/tmp/corral-test-vk-split-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    moe_fixture_write_split_experts(fixture("arch/llama-moe.gguf"), path);
    check_model(path, 1e-3f, false, false);
    unlink(path);
}
/* granitemoe with a shared expert (Granite-MoE-shared): its output added to the experts'. */
static void test_granitemoe_shared_expert(void **state)
{
    (void)state;
    char path[] = "/tmp/corral-test-vk-shexp-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    moe_fixture_write_shared_expert(fixture("arch/granitemoe.gguf"), path,
                                    "granitemoe.expert_shared_feed_forward_length", 3, 64, 40);
    check_model(path, 1e-3f, false, true);
    unlink(path);
}
/* llama-moe with a router selection bias: moe.c's scored router (softmax scores, the bias
 * in the choice only, renormalised weights), on the device as moe_route's scored mode. */
static void test_llama_moe_selection_bias(void **state)
{
    (void)state;
    char path[] = "/tmp/corral-test-vk-bias-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    moe_fixture_write_selection_bias(fixture("arch/llama-moe.gguf"), path, 3, 8);
    check_model(path, 1e-3f, false, true);
    unlink(path);
}
/* deepseek2: latent attention (q and kv latents, the absorbed per-head products, YaRN's
 * attention scale), a leading dense layer, then the scored router's experts beside a shared
 * one. */
static void test_deepseek2(void **state) { (void)state; check_model("arch/deepseek2.gguf", 1e-3f, false, true); }
/* deepseek2 from the older combined attn_kv_b: each head's value rows gathered on upload. */
static void test_deepseek2_combined_kv_b(void **state)
{
    (void)state;
    char path[] = "/tmp/corral-test-vk-kvb-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    moe_fixture_write_deepseek2_combined_kv_b(fixture("arch/deepseek2.gguf"), path);
    check_model(path, 1e-3f, false, true);
    unlink(path);
}
static void test_qwen3moe(void **state) { (void)state; check_model("arch/qwen3moe.gguf", 1e-3f, false, false); }
static void test_gpt_oss(void **state) { (void)state; check_model("arch/gpt-oss.gguf", 1e-3f, false, true); }
static void test_gpt_oss_mxfp4(void **state) { (void)state; check_model("arch/gpt-oss-mxfp4.gguf", 1e-2f, true, true); }
static void test_granitemoe(void **state) { (void)state; check_model("arch/granitemoe.gguf", 1e-3f, false, true); }
static void test_quant_q8_0(void **state) { (void)state; check_model("quant/rand-e256-Q8_0.gguf", 1e-2f, true, true); }
static void test_quant_q4_1(void **state) { (void)state; check_model("quant/rand-e256-Q4_1.gguf", 1e-2f, true, false); }
static void test_quant_q5_1(void **state) { (void)state; check_model_in_full_runs("quant/rand-e256-Q5_1.gguf", 1e-2f, true); }
static void test_quant_q2_k(void **state) { (void)state; check_model_in_full_runs("quant/rand-e256-Q2_K.gguf", 1e-2f, true); }
static void test_quant_q3_k(void **state) { (void)state; check_model_in_full_runs("quant/rand-e256-Q3_K.gguf", 1e-2f, true); }
/* phi2: the parallel block with LayerNorm and GELU, fused q/k/v with its biases, RoPE on part
 * of each head, and a bias on the logits. */
static void test_phi2_parallel_partial_rope(void **state) { (void)state; check_model("arch/phi2.gguf", 2e-2f, false, true); }
/* stablelm: LayerNorms with biases, q/k/v biases, RoPE on a quarter of each head. */
static void test_stablelm_partial_rope(void **state) { (void)state; check_model("arch/stablelm.gguf", 1e-3f, false, true); }
/* stablelm 2 12B's: each head of q and k LayerNormed with its own weights, and the FFN
 * beside the attention on the same norm. */
static void test_stablelm_head_norms_and_parallel_ffn(void **state) { (void)state; check_model("arch/stablelm-parallel.gguf", 1e-3f, false, true); }
/* starcoder: learned positions added on the CPU before the layers, which rotate nothing;
 * fused q/k/v with its bias, one KV head, LayerNorms and GELU with biases. */
static void test_starcoder_positions_mqa(void **state) { (void)state; check_model("arch/starcoder.gguf", 2e-2f, false, true); }
/* falcon: the parallel block without biases and one KV head; falcon-40b's attention on a
 * norm of its own (attn_norm_2), its residual first on the device, with 2 KV heads. */
static void test_falcon_parallel_mqa(void **state) { (void)state; check_model("arch/falcon.gguf", 2e-2f, false, true); }
static void test_falcon_40b_attention_norm(void **state) { (void)state; check_model("arch/falcon-40b.gguf", 2e-2f, false, true); }
/* qwen2moe: experts weighted by their unrenormalised probabilities, and a shared expert whose
 * output a gate of its own scales per token. */
static void test_qwen2moe_gated_shared_expert(void **state) { (void)state; check_model("arch/qwen2moe.gguf", 1e-3f, false, true); }
/* phi3's LongRoPE: the device rotates with the CPU's cos/sin, here the short factors (a
 * context of 128) times the attention factor */
static void test_phi3_longrope(void **state) { (void)state; check_model("arch/phi3-longrope.gguf", 1e-3f, false, true); }
/* chatglm: fused q/k/v with biases, "normal" RoPE on half of each head, fused gate and up. */
static void test_chatglm_fused_qkv_partial_rope(void **state) { (void)state; check_model("arch/chatglm.gguf", 1e-3f, false, true); }
/* internlm2: llama's block, here over an SPM vocabulary with θ 1e6. */
static void test_internlm2(void **state) { (void)state; check_model("arch/internlm2.gguf", 1e-3f, false, false); }

/* Four sequences in one batch, prompts of different lengths, then a step of all four. */
static void check_four_sequences(const char *file)
{
    corral_error err = {{0}};
    corral_model *m = corral_model_load(fixture(file), &err);
    assert_non_null(m);
    size_t V = corral_model_n_vocab(m);
    corral_context *cpu = context(m, 0, 4), *gpu = context(m, -1, 4);
    assert_true(corral_context_gpu_layers(gpu) > 0);
    corral_token ids[4 * 9];
    int32_t seq[4 * 9];
    bool all[4 * 9];
    size_t n = 0;
    for (int32_t s = 0; s < 4; s++)
        for (int32_t i = 0; i < 3 + 2 * s; i++, n++) /* interleaving is the caller's: runs */
            ids[n] = (corral_token)((s * 101 + i * 7 + 1) % (int32_t)V), seq[n] = s, all[n] = true;
    for (int step = 0; step < 2; step++) {
        decode(cpu, ids, seq, n, all);
        decode(gpu, ids, seq, n, all);
        for (size_t t = 0; t < n; t++) {
            float diff = max_abs_diff(corral_get_logits(gpu, t), corral_get_logits(cpu, t), V);
            if (!(diff <= 1e-3f))
                fail_msg("%s: step %d token %zu (sequence %d) differs by %g", file, step, t,
                         seq[t], (double)diff);
        }
        n = 4; /* then one token of each */
        for (int32_t s = 0; s < 4; s++)
            ids[s] = argmax(corral_get_logits(cpu, 0), V) + s, seq[s] = s;
    }
    corral_context_free(cpu);
    corral_context_free(gpu);
    corral_model_free(m);
}

static void test_four_sequences_batched(void **state)
{
    (void)state;
    check_four_sequences("arch/llama-gqa.gguf");
}

/* Each token of the batch routed to its own experts. */
static void test_four_sequences_batched_experts(void **state)
{
    (void)state;
    check_four_sequences("arch/qwen3moe.gguf");
}

/* A prompt of n_tokens (at most 128) in one micro-batch, every position's logits: each
 * expert takes many of the batch's (token, expert) pairs (grouped by expert on the device:
 * whole tiles and their tails). */
static void check_long_prompt(const char *file, size_t n_tokens, float tolerance, bool flips)
{
    corral_error err = {{0}};
    corral_model *m = corral_model_load(fixture(file), &err);
    if (!m)
        fail_msg("%s: %s", file, err.message);
    size_t V = corral_model_n_vocab(m);
    corral_context *cpu = context_batch(m, 0, 1, (uint32_t)n_tokens);
    corral_context *gpu = context_batch(m, -1, 1, (uint32_t)n_tokens);
    assert_int_equal(corral_context_gpu_layers(gpu), corral_model_n_layer(m));
    corral_token ids[128];
    bool all[128];
    assert_true(n_tokens <= 128);
    for (size_t i = 0; i < n_tokens; i++)
        ids[i] = (corral_token)((i * 29 + 5) % V), all[i] = true;
    decode(cpu, ids, NULL, n_tokens, all);
    decode(gpu, ids, NULL, n_tokens, all);
    for (size_t t = 0; t < n_tokens; t++) {
        float diff = max_abs_diff(corral_get_logits(gpu, t), corral_get_logits(cpu, t), V);
        if (!close_enough(file, "prompt position", t, diff, tolerance, flips))
            fail_msg("%s: prompt position %zu logits differ by %g (tolerance %g)", file, t,
                     (double)diff, (double)tolerance);
    }
    corral_context_free(cpu);
    corral_context_free(gpu);
    corral_model_free(m);
}

/* IQ4_XS matrices, IQ4_NL ones for ffn_down and the output layer: the per-row products, then
 * a 64-token prompt's tiled ones */
static void test_quant_iq4(void **state)
{
    (void)state;
    check_model_in_full_runs("quant/rand-e256-IQ4_XS.gguf", 1e-2f, true);
    check_long_prompt("quant/rand-e256-IQ4_XS.gguf", 64, 1e-2f, true);
}

/* IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S and IQ1_M matrices (the embeddings IQ3_XXS,
 * the output layer IQ3_S): the per-row products, then a 64-token prompt's tiled ones */
static void test_quant_iq_lattice(void **state)
{
    (void)state;
    check_model_in_full_runs("quant/rand-e256-IQ-lattice.gguf", 1e-2f, true);
    check_long_prompt("quant/rand-e256-IQ-lattice.gguf", 64, 1e-2f, true);
}

/* 64 tokens: 128 pairs over 8 experts, in the per-row kernel's tiles of 8 */
static void test_long_prompt_experts(void **state)
{
    (void)state;
    check_long_prompt("arch/qwen3moe.gguf", 64, 1e-3f, false);
    check_long_prompt("arch/gpt-oss-mxfp4.gguf", 64, 1e-2f, true);
    check_long_prompt("arch/deepseek2.gguf", 64, 1e-3f, false);
}

/* 128 tokens: 256 pairs over 8 experts, 32 an expert on average, in the tiled kernel's
 * tiles of 64 (vk_moe_tile); gpt-oss's MXFP4 experts with their biases */
static void test_long_prompt_experts_tiled(void **state)
{
    (void)state;
    check_long_prompt("arch/gpt-oss-mxfp4.gguf", 128, 1e-2f, true);
}

/* Three sequences under cohere2's window of 4 in micro-batches of 4: each sequence's sliding
 * cells move at its own times, on the device as on the CPU. */
static void test_sequences_slide_apart(void **state)
{
    (void)state;
    corral_error err = {{0}};
    corral_model *m = corral_model_load(fixture("arch/cohere2.gguf"), &err);
    assert_non_null(m);
    size_t V = corral_model_n_vocab(m);
    corral_context *cpu = context_batch(m, 0, 3, 4), *gpu = context_batch(m, -1, 3, 4);
    assert_true(corral_context_gpu_layers(gpu) > 0);
    corral_token ids[3 * 13];
    int32_t seq[3 * 13];
    bool all[3 * 13];
    size_t n = 0;
    for (int32_t s = 0; s < 3; s++)
        for (int32_t i = 0; i < 9 + 2 * s; i++, n++)
            ids[n] = (corral_token)((s * 71 + i * 11 + 2) % (int32_t)V), seq[n] = s, all[n] = true;
    for (int step = 0; step < 4; step++) {
        decode(cpu, ids, seq, n, all);
        decode(gpu, ids, seq, n, all);
        for (size_t t = 0; t < n; t++) {
            float diff = max_abs_diff(corral_get_logits(gpu, t), corral_get_logits(cpu, t), V);
            if (!(diff <= 1e-3f))
                fail_msg("step %d token %zu (sequence %d) differs by %g", step, t, seq[t],
                         (double)diff);
        }
        n = 3; /* then one token of each */
        for (int32_t s = 0; s < 3; s++)
            ids[s] = (argmax(corral_get_logits(cpu, 0), V) + s) % (corral_token)V, seq[s] = s;
    }
    corral_context_free(cpu);
    corral_context_free(gpu);
    corral_model_free(m);
}

/* A batch asking for more logits than the device's output layer takes at once (64) gets
 * them from the CPU's output layer, from the device layers' hidden states. */
static void test_many_logits_from_the_cpu_output(void **state)
{
    (void)state;
    corral_error err = {{0}};
    corral_model *m = corral_model_load(fixture("arch/llama-gqa.gguf"), &err);
    assert_non_null(m);
    size_t V = corral_model_n_vocab(m);
    corral_context *cpu = context_batch(m, 0, 1, 100), *gpu = context_batch(m, -1, 1, 100);
    corral_token ids[70];
    bool all[70];
    for (size_t i = 0; i < 70; i++)
        ids[i] = (corral_token)((i * 13 + 5) % V), all[i] = i % 7 != 3;
    decode(cpu, ids, NULL, 70, all);
    decode(gpu, ids, NULL, 70, all);
    for (size_t t = 0; t < 70; t++) {
        if (!all[t]) {
            assert_null(corral_get_logits(gpu, t));
            continue;
        }
        float diff = max_abs_diff(corral_get_logits(gpu, t), corral_get_logits(cpu, t), V);
        if (!(diff <= 1e-3f))
            fail_msg("token %zu differs by %g", t, (double)diff);
    }
    corral_context_free(cpu);
    corral_context_free(gpu);
    corral_model_free(m);
}

/* A context shift (keys moved down and turned back, on F16 and F32 caches, RoPE of pairs and
 * of halves, sliding layers) leaves the device's cache as the CPU's: the steps after it agree.
 * 45 tokens in micro-batches of n_batch, then the 4 first kept and the n_discard after them
 * dropped. */
static void check_shift(const char *file, corral_kv_type kv, float tolerance, uint32_t n_batch,
                        uint32_t n_discard)
{
    corral_error err = {{0}};
    corral_model *m = corral_model_load(file[0] == '/' ? file : fixture(file), &err);
    if (!m)
        fail_msg("%s: %s", file, err.message);
    size_t V = corral_model_n_vocab(m);
    corral_context_params p;
    corral_context_params_init(&p);
    p.n_ctx = 48;
    p.n_batch = n_batch;
    p.n_threads = 1;
    p.kv_type = kv;
    corral_context *ctxs[2];
    for (int i = 0; i < 2; i++) {
        p.n_gpu_layers = i ? -1 : 0;
        assert_non_null(ctxs[i] = corral_context_create(m, &p, &err));
    }
    assert_true(corral_context_gpu_layers(ctxs[1]) > 0);
    corral_token ids[45];
    for (size_t i = 0; i < 45; i++)
        ids[i] = (corral_token)((i * 29 + 3) % V);
    for (int i = 0; i < 2; i++) {
        decode(ctxs[i], ids, NULL, 45, NULL);
        if (!corral_seq_shift(ctxs[i], 0, 4, n_discard, &err))
            fail_msg("shift: %s", err.message);
    }
    for (size_t s = 0; s < 6; s++) {
        corral_token id = (corral_token)((s * 7 + 11) % V);
        decode(ctxs[0], &id, NULL, 1, NULL);
        decode(ctxs[1], &id, NULL, 1, NULL);
        float diff = max_abs_diff(corral_get_logits(ctxs[1], 0), corral_get_logits(ctxs[0], 0), V);
        if (!(diff <= tolerance))
            fail_msg("%s: step %zu after the shift differs by %g", file, s, (double)diff);
    }
    corral_context_free(ctxs[0]);
    corral_context_free(ctxs[1]);
    corral_model_free(m);
}

static void test_context_shift(void **state)
{
    (void)state;
    /* 28 cells move, in runs of 13 */
    check_shift("arch/llama-gqa.gguf", CORRAL_KV_F16, 1e-3f, 48, 13);
    check_shift("arch/qwen2.gguf", CORRAL_KV_F32, 1e-3f, 48, 13);
    /* windows of 4 and global layers without RoPE; the sliding layers hold all 48 cells */
    check_shift("arch/cohere2.gguf", CORRAL_KV_F16, 1e-3f, 48, 13);
    /* micro-batches of 4: the sliding layers hold positions 41-44 in 7 cells, which the
     * shift renumbers from 28 (turned in place), or from 4 after 38 dropped (moved down) */
    check_shift("arch/cohere2.gguf", CORRAL_KV_F16, 1e-3f, 4, 13);
    check_shift("arch/gemma2.gguf", CORRAL_KV_F32, 3e-2f, 4, 38);
    /* latent attention: the cache row's rope part turned, its latent and the values moved */
    check_shift("arch/deepseek2.gguf", CORRAL_KV_F16, 1e-3f, 48, 13);
}

/* A shift on heads whose rotated span is wider than 256 components: llama's adjacent pairs
 * over 320, and qwen2's halves over 270 of 288 (an odd number of pairs a half, so F16 words
 * that hold components of two pairs), on F16 and F32 caches. */
static void test_context_shift_wide_heads(void **state)
{
    (void)state;
    static const struct {
        const char *from;
        uint32_t head_dim, n_rot;
        corral_kv_type kv;
    } cases[] = {{"arch/llama-gqa.gguf", 320, 320, CORRAL_KV_F16},
                 {"arch/llama-gqa.gguf", 320, 320, CORRAL_KV_F32},
                 {"arch/qwen2.gguf", 288, 270, CORRAL_KV_F16}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char path[] = "/tmp/corral-test-vk-heads-XXXXXX";
        int fd = mkstemp(path);
        assert_true(fd >= 0);
        close(fd);
        head_fixture_write(fixture(cases[i].from), path, 2, 1, cases[i].head_dim,
                           cases[i].n_rot);
        check_shift(path, cases[i].kv, 1e-3f, 48, 13);
        unlink(path);
    }
}

/* An image's tokens through the device as through the CPU: seeing each other both ways
 * (gemma3, also on its sliding layers) or at M-RoPE positions of their grid (qwen2vl), with
 * text before and after. The embeddings are random rows: the text model takes any. */
static void check_image(const char *file, float tolerance)
{
    corral_error err = {{0}};
    corral_model *m = corral_model_load(fixture(file), &err);
    if (!m)
        fail_msg("%s: %s", file, err.message);
    size_t V = corral_model_n_vocab(m), E = corral_model_n_embd(m);
    enum { NX = 4, NY = 3 };
    float *rows = malloc(NX * NY * E * sizeof *rows);
    assert_non_null(rows);
    for (size_t i = 0; i < NX * NY * E; i++)
        rows[i] = (float)((i * 7919) % 2001) / 1000.0f - 1.0f;
    corral_image_embd image = {.n_tokens = NX * NY, .nx = NX, .ny = NY, .n_embd = (uint32_t)E,
                               .data = rows};
    corral_context *ctxs[2] = {context(m, 0, 1), context(m, -1, 1)};
    assert_int_equal(corral_context_gpu_layers(ctxs[1]), corral_model_n_layer(m));
    const corral_token before[] = {5, 17, 29}, after[] = {3, 11};
    const float *logits[2][2];
    for (int i = 0; i < 2; i++) {
        decode(ctxs[i], before, NULL, 3, NULL);
        if (!corral_decode_image(ctxs[i], 0, &image, &err))
            fail_msg("%s: image: %s", file, err.message);
        logits[i][0] = corral_get_logits(ctxs[i], NX * NY - 1);
    }
    float diff = max_abs_diff(logits[1][0], logits[0][0], V);
    if (!(diff <= tolerance))
        fail_msg("%s: the image's last logits differ by %g", file, (double)diff);
    for (int i = 0; i < 2; i++) {
        decode(ctxs[i], after, NULL, 2, NULL);
        logits[i][1] = corral_get_logits(ctxs[i], 1);
    }
    diff = max_abs_diff(logits[1][1], logits[0][1], V);
    if (!(diff <= tolerance))
        fail_msg("%s: the text after the image differs by %g", file, (double)diff);
    corral_context_free(ctxs[0]);
    corral_context_free(ctxs[1]);
    corral_model_free(m);
    free(rows);
}

static void test_images_on_the_device(void **state)
{
    (void)state;
    check_image("vision/gemma3-text.gguf", 3e-2f);
    check_image("vision/qwen25vl-text.gguf", 1e-3f);
    check_image("vision/gemma4v-text.gguf", 3e-2f); /* per-layer inputs at image rows too */
}

/* An embedding model's pooled vector with every layer, and with the last `partial`, on the
 * device: within ten times the CPU's tolerance against llama.cpp (1e-4). Every token sees
 * the whole input, or its window of it. */
static void check_embedding(const char *file, uint32_t partial)
{
    corral_error err = {{0}};
    corral_model *m = corral_model_load(fixture(file), &err);
    if (!m)
        fail_msg("%s: %s", file, err.message);
    size_t E = corral_model_n_embd(m);
    corral_token ids[37];
    for (size_t i = 0; i < 37; i++)
        ids[i] = (corral_token)((i * 53 + 7) % corral_model_n_vocab(m));
    float *want = malloc(E * sizeof *want), *got = malloc(E * sizeof *got);
    assert_true(want && got);
    corral_context *cpu = context(m, 0, 1);
    if (!corral_embed(cpu, ids, 37, want, &err))
        fail_msg("%s: %s", file, err.message);
    const int splits[] = {-1, (int)partial};
    for (size_t i = 0; i < 2; i++) {
        corral_context *gpu = context(m, splits[i], 1);
        uint32_t on_device = splits[i] < 0 ? corral_model_n_layer(m) : partial;
        assert_int_equal(corral_context_gpu_layers(gpu), on_device);
        if (!corral_embed(gpu, ids, 37, got, &err))
            fail_msg("%s: %s", file, err.message);
        float diff = max_abs_diff(got, want, E);
        if (!(diff <= 1e-3f))
            fail_msg("%s with %u layers on the device: the embedding differs by %g", file,
                     on_device, (double)diff);
        corral_context_free(gpu);
    }
    corral_context_free(cpu);
    corral_model_free(m);
    free(want), free(got);
}

/* bert: learned positions, biases, GELU, mean pooling; nomic-bert: RoPE, fused q/k/v,
 * SwiGLU, the first token's state. */
static void test_embedding_models(void **state)
{
    (void)state;
    check_embedding("arch/bert.gguf", 1);
    check_embedding("arch/nomic-bert.gguf", 1);
}

/* gemma-embedding: gemma3's sandwich-normed GeGLU block as an encoder, its sliding layers
 * (all but the last of each six) seeing 2 positions on either side of a token; the last two
 * layers on the device take a sliding one too. */
static void test_gemma_embedding_two_sided_windows(void **state)
{
    (void)state;
    check_embedding("arch/gemma-embedding.gguf", 2);
}

/* jina-bert-v2: ALiBi's per-head distance penalty in place of positions (12 heads: slopes
 * past the largest power of two too), GeGLU from one fused or two split matrices with the
 * down product's bias; jina-v2-code's whole q/k LayerNorms with biases and its second norm
 * after the attention's. */
static void test_jina_bert_v2_alibi(void **state)
{
    (void)state;
    check_embedding("arch/jina-bert-v2.gguf", 1);
    check_embedding("arch/jina-bert-v2-split.gguf", 1);
    check_embedding("arch/jina-bert-v2-code.gguf", 1);
}

/* The attention kernel reads sinks or ALiBi's slopes from one binding: a model with both
 * (gpt-oss given slopes) stays on the CPU. */
static void test_alibi_beside_sinks_stays_on_the_cpu(void **state)
{
    (void)state;
    corral_error err = {{0}};
    corral_model *m = corral_model_load(fixture("arch/gpt-oss.gguf"), &err);
    if (!m)
        fail_msg("gpt-oss: %s", err.message);
    corral_context *gpu = context(m, -1, 1);
    assert_true(corral_context_gpu_layers(gpu) > 0);
    corral_context_free(gpu);
    m->alibi_slopes = calloc(m->hp.n_head, sizeof *m->alibi_slopes);
    assert_non_null(m->alibi_slopes);
    gpu = context(m, -1, 1);
    assert_int_equal(corral_context_gpu_layers(gpu), 0);
    corral_context_free(gpu);
    corral_model_free(m);
}

/* nomic-bert-moe: nomic-bert's block with bert's GELU FFN, experts in every other layer
 * (ungated, gelu(up) to down, the router's weights not renormalised); the last layer alone
 * is one of experts. */
static void test_nomic_bert_moe_gelu_experts(void **state)
{
    (void)state;
    check_embedding("arch/nomic-bert-moe.gguf", 1);
}

/* The memory the fitting counts a context's device layers at covers what they really
 * allocate (the device's count of its live buffers' memory), and by little more: a dense
 * model, and MoE ones (the experts' scratch beside the layers', latent attention), with
 * every layer and the output layer on the device, and with the last `partial` layers only;
 * file: a fixture's name, or a path of its own (starting with '/'). */
static void check_estimate(const char *file, int partial)
{
    corral_error err = {{0}};
    corral_model *m = corral_model_load(file[0] == '/' ? file : fixture(file), &err);
    vk_device *dev = vk_device_open(-1, &err);
    if (!m || !dev)
        fail_msg("%s: %s", file, err.message);
    const int splits[] = {-1, partial};
    for (size_t i = 0; i < 2; i++) {
        uint64_t before = vk_device_allocated(dev);
        corral_context *ctx = context(m, splits[i], 1);
        uint64_t held = vk_device_allocated(dev) - before;
        uint64_t estimate = gpu_layers_estimate(ctx->gpu);
        if (estimate < held || estimate > held + held / 16)
            fail_msg("%s with %u layers on the device: estimated at %llu bytes, holds %llu",
                     file, corral_context_gpu_layers(ctx), (unsigned long long)estimate,
                     (unsigned long long)held);
        assert_int_equal(gpu_layers_bytes(ctx->gpu), held);
        corral_context_free(ctx);
        assert_int_equal(vk_device_allocated(dev), before);
    }
    corral_model_free(m);
}

static void test_fit_estimate_covers_the_allocations(void **state)
{
    (void)state;
    check_estimate("arch/llama-gqa.gguf", 1);
    check_estimate("arch/qwen3moe.gguf", 1);
    check_estimate("arch/gpt-oss.gguf", 1);
    check_estimate("arch/deepseek2.gguf", 1);
    check_estimate("arch/gemma4.gguf", 1); /* caches of each layer's own shape */
    /* none on the shared KV layers, which take the device with their sources */
    check_estimate("arch/gemma4-e.gguf", 4);
    check_estimate("arch/gemma4-moe.gguf", 1); /* its norms and scales beside the experts */
    check_estimate("arch/qwen35.gguf", 2); /* recurrent states in place of a cache */
    check_estimate("arch/lfm2.gguf", 2); /* conv windows, and no state matrices */
    check_estimate("arch/granitehybrid.gguf", 2); /* Mamba2's heads' vectors in one buffer */
    check_estimate("arch/qwen3next.gguf", 2); /* grouped projections in parts of their own */
    check_estimate("arch/nemotron-h-moe.gguf", 2); /* experts without a gate matrix */
    check_estimate("arch/nomic-bert-moe.gguf", 1); /* an encoder's experts */
    check_estimate("arch/jina-bert-v2-code.gguf", 1); /* q/k LayerNorms, the second norm */
}

/* A context that needs what the device layers lack (here a quantized KV cache) runs wholly
 * on the CPU, as without a GPU. */
static void test_what_the_device_lacks_stays_on_the_cpu(void **state)
{
    (void)state;
    corral_error err = {{0}};
    corral_model *m = corral_model_load(fixture("quant/rand-e256-F32.gguf"), &err);
    assert_non_null(m);
    corral_context_params p;
    corral_context_params_init(&p);
    p.n_ctx = 128;
    p.n_threads = 1;
    p.kv_type = CORRAL_KV_Q8_0;
    p.n_gpu_layers = -1;
    corral_context *ctx = corral_context_create(m, &p, &err);
    if (!ctx)
        fail_msg("context: %s", err.message);
    assert_int_equal(corral_context_gpu_layers(ctx), 0);
    corral_context_free(ctx);
    corral_model_free(m);
}

/* Weights the device layers do not take (here a LoRA adapter's on attn_q and attn_v) keep
 * every layer on the CPU, which gives the logits of a context that asked for no device
 * layers, bit for bit. */
static void test_weights_the_device_lacks_stay_on_the_cpu(void **state)
{
    (void)state;
    corral_error err = {{0}};
    corral_model *m = corral_model_load(fixture("arch/llama-gqa.gguf"), &err);
    if (!m || !corral_model_add_lora(m, fixture("lora/adapter-f16-qv.gguf"), 1.0f, &err))
        fail_msg("%s", err.message);
    corral_context *cpu = context(m, 0, 1), *asked = context(m, -1, 1);
    assert_int_equal(corral_context_gpu_layers(asked), 0);
    check_against_cpu("llama-gqa with a LoRA adapter", m, cpu, asked, 0.0f, false);
    corral_context_free(cpu);
    corral_context_free(asked);
    corral_model_free(m);
}

/* "As many layers as fit" leaves the reserve a context asks for (a vision tower's blocks):
 * a byte short of room for every layer keeps one off the device, the whole free memory all. */
static void test_fitting_leaves_the_reserve(void **state)
{
    (void)state;
    corral_error err = {{0}};
    corral_model *m = corral_model_load(fixture("arch/llama-gqa.gguf"), &err);
    vk_device *dev = vk_device_open(-1, &err);
    if (!m || !dev)
        fail_msg("%s", err.message);
    corral_context *all = context(m, -1, 1);
    uint32_t n_all = corral_context_gpu_layers(all);
    uint64_t estimate = gpu_layers_estimate(all->gpu);
    corral_context_free(all);
    uint64_t room = dev->info.free_bytes - dev->info.free_bytes / 10;
    assert_true(n_all > 1 && estimate < room);
    corral_context_params p;
    corral_context_params_init(&p);
    p.n_ctx = 128; /* as context() makes them */
    p.n_batch = 64;
    p.kv_type = CORRAL_KV_F32;
    p.n_threads = 1;
    p.n_gpu_layers = -1;
    p.gpu_reserve_bytes = room - estimate + 1;
    corral_context *fewer = corral_context_create(m, &p, &err);
    if (!fewer)
        fail_msg("%s", err.message);
    assert_true(corral_context_gpu_layers(fewer) > 0 && corral_context_gpu_layers(fewer) < n_all);
    corral_context_free(fewer);
    p.gpu_reserve_bytes = dev->info.free_bytes;
    corral_context *none = corral_context_create(m, &p, &err);
    if (!none)
        fail_msg("%s", err.message);
    assert_int_equal(corral_context_gpu_layers(none), 0);
    corral_context_free(none);
    corral_model_free(m);
}

/* gemma4's dense block: sliding and global layers of their own head widths, KV heads and
 * RoPE (the global layers' proportional one), a fused qkv projection, k as v on the global
 * layers, unweighted value norms, unscaled scores, a layer output scale, soft-capped logits;
 * also in micro-batches of 4, which move the sliding layers' cells (caches of two shapes), and
 * through a context shift, which turns each kind's keys over its own rotated width. */
/* gemma4's E2B/E4B: per-layer token inputs, each layer's FFN width, and shared KV layers, which
 * attend over an earlier layer's cache and take the device only with it: 4 of the fixture's 6
 * layers (the shared ones and their sources) do, 3 stay on the CPU; through a context shift in
 * micro-batches of 4, whose moves leave the shared layers to their sources. */
static void test_gemma4_per_layer_inputs_shared_kv(void **state)
{
    (void)state;
    check_model("arch/gemma4-e.gguf", 3e-2f, false, false);
    check_partial("arch/gemma4-e.gguf", 4, 3e-2f);
    check_partial("arch/gemma4-e.gguf", 3, 3e-2f);
    check_shift("arch/gemma4-e.gguf", CORRAL_KV_F16, 3e-2f, 4, 13);
}

/* gemma4's 26B-A4B: GeGLU experts beside the dense FFN on every layer, each branch post-normed,
 * the router on its own input (rms(x) times a per-channel scale), experts' gate and up fused
 * in one matrix on some layers, each expert's output scaled on others. */
static void test_gemma4_dense_and_experts(void **state) { (void)state; check_model("arch/gemma4-moe.gguf", 3e-2f, false, true); }

static void test_gemma4_two_head_widths(void **state)
{
    (void)state;
    check_model("arch/gemma4.gguf", 3e-2f, false, true);
    check_model_batch("arch/gemma4.gguf", 3e-2f, false, false, 4);
    check_shift("arch/gemma4.gguf", CORRAL_KV_F16, 3e-2f, 4, 13);
}

static void test_gemma_geglu_scaled_embeddings(void **state) { (void)state; check_model("arch/gemma.gguf", 3e-2f, false, true); }
static void test_command_r_parallel_layernorm(void **state) { (void)state; check_model("arch/command-r.gguf", 1e-3f, false, true); }
static void test_exaone_neox_rope_freqs(void **state) { (void)state; check_model("arch/exaone.gguf", 1e-3f, false, true); }
/* Also in micro-batches of 4, which slide the window of 4 as the sequence grows, and through a
 * context shift. */
static void test_olmo3_windows_and_two_ropes(void **state)
{
    (void)state;
    check_model("arch/olmo3.gguf", 1e-3f, false, true);
    check_model_batch("arch/olmo3.gguf", 1e-3f, false, true, 4);
    check_shift("arch/olmo3.gguf", CORRAL_KV_F16, 1e-3f, 4, 13);
}

/* Command R+'s q/k LayerNorms with a weight row per head, on the device as stablelm 2 12B's. */
static void test_command_r_plus_per_head_qk_layernorms(void **state) { (void)state; check_model("arch/command-r-plus.gguf", 1e-3f, false, false); }

/* The same calls on both contexts: decode ids (logits for the last), then the last token's
 * logits must agree. */
static void decode_both(const char *file, corral_context *cpu, corral_context *gpu,
                        const corral_token *ids, size_t n, size_t V, const char *what)
{
    bool want[32] = {false};
    assert_true(n <= 32);
    want[n - 1] = true;
    decode(cpu, ids, NULL, n, want);
    decode(gpu, ids, NULL, n, want);
    float diff = max_abs_diff(corral_get_logits(gpu, n - 1), corral_get_logits(cpu, n - 1), V);
    if (!(diff <= 1e-3f))
        fail_msg("%s: %s: logits differ by %g", file, what, (double)diff);
}

/* A context of two sequences that keeps step checkpoints (speculative decoding's). */
static corral_context *step_checkpoint_context(const corral_model *m, int gpu_layers)
{
    corral_context_params p;
    corral_context_params_init(&p);
    p.n_ctx = 128;
    p.n_batch = 64;
    p.n_seq = 2;
    p.n_threads = 1;
    p.kv_type = CORRAL_KV_F32;
    p.n_gpu_layers = gpu_layers;
    p.step_checkpoints = true;
    corral_error err = {{0}};
    corral_context *ctx = corral_context_create(m, &p, &err);
    if (!ctx)
        fail_msg("context: %s", err.message);
    return ctx;
}

/* A recurrent sequence's states on the device follow what the CPU does to its own: a
 * checkpoint after the prompt, an answer, the sequence cut back to the checkpoint and
 * continued otherwise (the checkpoint's states put back); a step checkpoint (speculative
 * decoding's) beside it, a draft's tokens, a cut back to it (its states put back), another
 * below it to the prompt's (the step's dropped); a cut below both (cleared) and the sequence
 * prompted anew; with gpu_layers on the device (-1: all), the others' states on the CPU. */
static void check_recurrent_reuse(const char *file, int gpu_layers)
{
    corral_error err = {{0}};
    corral_model *m = corral_model_load(fixture(file), &err);
    if (!m)
        fail_msg("%s: %s", file, err.message);
    size_t V = corral_model_n_vocab(m);
    corral_context *cpu = step_checkpoint_context(m, 0);
    corral_context *gpu = step_checkpoint_context(m, gpu_layers);
    assert_int_equal(corral_context_gpu_layers(gpu),
                     gpu_layers < 0 ? corral_model_n_layer(m) : (uint32_t)gpu_layers);
    corral_token prompt[11], answer[3], other[5];
    for (size_t i = 0; i < 11; i++)
        prompt[i] = (corral_token)((i * 37 + 3) % V);
    for (size_t i = 0; i < 5; i++)
        answer[i % 3] = (corral_token)((i * 11 + 2) % V), other[i] = (corral_token)((i * 53 + 7) % V);
    decode_both(file, cpu, gpu, prompt, 11, V, "the prompt");
    assert_true(corral_seq_checkpoint(cpu, 0, CORRAL_CHECKPOINT_PROMPT) &&
                corral_seq_checkpoint(gpu, 0, CORRAL_CHECKPOINT_PROMPT));
    decode_both(file, cpu, gpu, answer, 3, V, "the answer");
    corral_seq_truncate(cpu, 0, 11);
    corral_seq_truncate(gpu, 0, 11);
    decode_both(file, cpu, gpu, other, 5, V, "from the checkpoint");
    assert_true(corral_seq_checkpoint(cpu, 0, CORRAL_CHECKPOINT_STEP) &&
                corral_seq_checkpoint(gpu, 0, CORRAL_CHECKPOINT_STEP));
    decode_both(file, cpu, gpu, answer, 3, V, "a draft");
    corral_seq_truncate(cpu, 0, 17);
    corral_seq_truncate(gpu, 0, 17);
    assert_int_equal(corral_seq_length(gpu, 0), 16);
    decode_both(file, cpu, gpu, prompt, 4, V, "from the step checkpoint");
    corral_seq_truncate(cpu, 0, 15);
    corral_seq_truncate(gpu, 0, 15);
    assert_int_equal(corral_seq_length(gpu, 0), 11);
    decode_both(file, cpu, gpu, answer, 3, V, "back below the step checkpoint");
    corral_seq_truncate(cpu, 0, 4);
    corral_seq_truncate(gpu, 0, 4);
    decode_both(file, cpu, gpu, other, 5, V, "after a cut below the checkpoint");
    corral_context_free(cpu);
    corral_context_free(gpu);
    corral_model_free(m);
}

/* qwen35: Gated DeltaNet layers (the short conv, the gates, the delta rule through each
 * sequence's states, the gated RMSNorm) and every fourth layer gated attention (q's gate,
 * per-head q/k norms, partial NeoX RoPE): every layer, the prompt in micro-batches of 4, four
 * sequences, and states checkpointed, restored and cleared, with every layer on the device
 * and with the last two (a recurrent one and an attention one) beside two on the CPU. */
static void test_qwen35_gated_delta_net(void **state)
{
    (void)state;
    check_model("arch/qwen35.gguf", 1e-3f, false, false);
    check_model_batch("arch/qwen35.gguf", 1e-3f, false, false, 4);
    check_four_sequences("arch/qwen35.gguf");
    check_recurrent_reuse("arch/qwen35.gguf", -1);
    check_recurrent_reuse("arch/qwen35.gguf", 2);
}

/* qwen35moe: qwen35's layers with experts and a sigmoid-gated shared expert. */
static void test_qwen35moe(void **state)
{
    (void)state;
    check_model("arch/qwen35moe.gguf", 1e-3f, false, false);
    check_four_sequences("arch/qwen35moe.gguf");
}

/* granitehybrid (Granite 4.0 -h): Mamba2 layers (the conv with its bias, the scan through
 * each sequence's states, the group RMSNorm gated by silu(z)) beside attention without RoPE,
 * Granite's scales: every layer and the last (a Mamba2 one) alone, four sequences, and states
 * checkpointed, restored and cleared with every layer on the device and with the last two
 * (an attention one and a Mamba2 one) beside two on the CPU; with experts and a shared one,
 * every layer and the last alone. */
static void test_granitehybrid_mamba2(void **state)
{
    (void)state;
    check_model("arch/granitehybrid.gguf", 1e-3f, false, true);
    check_four_sequences("arch/granitehybrid.gguf");
    check_recurrent_reuse("arch/granitehybrid.gguf", -1);
    check_recurrent_reuse("arch/granitehybrid.gguf", 2);
    check_model("arch/granitehybrid-moe.gguf", 1e-3f, false, true);
}

/* glm4moe (GLM-4.5): q/k/v biases, q/k norms on some layers only, partial NeoX RoPE, a
 * leading dense layer, then sigmoid-scored experts with a selection bias beside a shared one,
 * also for a long prompt and four sequences; the prediction layer after the trunk is not
 * loaded, so neither uploaded nor counted by the fit estimate. */
static void test_glm4moe(void **state)
{
    (void)state;
    check_model("arch/glm4moe.gguf", 1e-3f, false, true);
    check_long_prompt("arch/glm4moe.gguf", 64, 1e-3f, false);
    check_four_sequences("arch/glm4moe.gguf");
    check_estimate("arch/glm4moe.gguf", 1);
}

/* qwen3next: qwen35moe's layers with the DeltaNet's value heads grouped by key head, its
 * projections grouped too (layers 0 and 2 a fused ssm_in, layer 1 attn_qkv and attn_gate;
 * ssm_ba everywhere): every layer and the last (attention) alone, four sequences, and states
 * checkpointed, restored and cleared with every layer on the device and with the last two (a
 * fused DeltaNet layer and the attention one) beside two on the CPU. */
static void test_qwen3next_grouped_delta_net(void **state)
{
    (void)state;
    check_model("arch/qwen3next.gguf", 1e-3f, false, true);
    check_four_sequences("arch/qwen3next.gguf");
    check_recurrent_reuse("arch/qwen3next.gguf", -1);
    check_recurrent_reuse("arch/qwen3next.gguf", 2);
}

/* nemotron_h: layers each one of a Mamba2 mixer, attention (no RoPE) or a ReLU² FFN: every
 * layer and the last (an FFN one) alone, four sequences, and states checkpointed, restored
 * and cleared with every layer on the device and with the last three (attention, Mamba2, FFN)
 * beside two on the CPU. */
static void test_nemotron_h_mamba2(void **state)
{
    (void)state;
    check_model("arch/nemotron-h.gguf", 1e-3f, false, true);
    check_four_sequences("arch/nemotron-h.gguf");
    check_recurrent_reuse("arch/nemotron-h.gguf", -1);
    check_recurrent_reuse("arch/nemotron-h.gguf", 3);
}

/* nemotron_h_moe: nemotron_h's layers with sigmoid-routed experts without a gate (relu(up)²)
 * beside an ungated shared expert: every layer (the 19-token prompt's pairs grouped by
 * expert, the steps' pair by pair) and the last (experts) alone, and four sequences. Nemotron
 * 3 Super's latent experts (the input projected down for them, their sum back up): every
 * layer and the last alone, and the fitting's count of their memory. */
static void test_nemotron_h_moe_ungated_experts(void **state)
{
    (void)state;
    check_model("arch/nemotron-h-moe.gguf", 1e-3f, false, true);
    check_four_sequences("arch/nemotron-h-moe.gguf");
    char latent[] = "/tmp/corral-test-vulkan-latent-XXXXXX";
    int fd = mkstemp(latent);
    assert_true(fd >= 0);
    close(fd);
    nemotron_latent_spec spec = {.layout = NEMOTRON_LATENT_LLAMA_CPP, .latent = 16};
    nemotron_latent_fixture_write(fixture("arch/nemotron-h-moe.gguf"), latent, &spec);
    check_model(latent, 1e-3f, false, true);
    check_estimate(latent, 1); /* the latent projections and experts of the latent's width */
    unlink(latent);
}

/* lfm2: gated short convs (in_proj's b, c and x, c * conv(b * x) through each sequence's
 * window, out_proj) beside attention layers with per-head q/k norms: every layer and the last
 * (a conv) alone, four sequences, and windows checkpointed, restored and cleared with every
 * layer on the device and with the last two (an attention one and a conv one) beside two on
 * the CPU. lfm2moe: the same layers with sigmoid-scored experts and a selection bias, every
 * layer and the last alone, four sequences. */
static void test_lfm2_short_convs(void **state)
{
    (void)state;
    check_model("arch/lfm2.gguf", 1e-3f, false, true);
    check_four_sequences("arch/lfm2.gguf");
    check_recurrent_reuse("arch/lfm2.gguf", -1);
    check_recurrent_reuse("arch/lfm2.gguf", 2);
    check_model("arch/lfm2moe.gguf", 1e-3f, false, true);
    check_four_sequences("arch/lfm2moe.gguf");
}

/*
 * llama4's prompts past chunk boundaries, on the CPU and with gpu_layers layers on the device
 * (-1: every one): chunks of `chunk` positions, the NoPE layer's temperature stepping every
 * `chunk` positions too (counted from pos + 1); n_seq sequences, each its own prompt of
 * `prompt` tokens in micro-batches of `batch`, in a context of n_ctx cells. The logits of
 * each sequence's last `checked` positions within 1e-3 of the CPU's, then 2 greedy steps of
 * every sequence together.
 */
static void check_llama4_chunks(uint32_t chunk, size_t prompt, uint32_t batch, uint32_t n_ctx,
                                uint32_t n_seq, int gpu_layers, size_t checked)
{
    corral_error err = {{0}};
    corral_model *m = corral_model_load(fixture("arch/llama4.gguf"), &err);
    if (!m)
        fail_msg("llama4: %s", err.message);
    m->hp.n_swa = chunk;
    m->hp.attn_temp_floor = chunk;
    size_t V = corral_model_n_vocab(m);
    corral_context *ctx[2] = {
        vulkan_fixture_context(m, 0, n_seq, batch, n_ctx, CORRAL_KV_F32),
        vulkan_fixture_context(m, gpu_layers, n_seq, batch, n_ctx, CORRAL_KV_F32)};
    uint32_t on = gpu_layers < 0 ? corral_model_n_layer(m) : (uint32_t)gpu_layers;
    assert_int_equal(corral_context_gpu_layers(ctx[1]), on);
    corral_token *ids = calloc(batch > n_seq ? batch : n_seq, sizeof *ids);
    int32_t *seq = calloc(batch > n_seq ? batch : n_seq, sizeof *seq);
    bool *want = calloc(batch > n_seq ? batch : n_seq, sizeof *want);
    float *logits = malloc(2 * n_seq * checked * V * sizeof *logits); /* [side][seq][j] */
    assert_true(ids && seq && want && logits);
    for (uint32_t s = 0; s < n_seq; s++)
        for (size_t at = 0; at < prompt; at += batch) {
            size_t n = prompt - at < batch ? prompt - at : batch;
            for (size_t i = 0; i < n; i++) {
                ids[i] = (corral_token)(((at + i) * (s ? 13 : 7) + s + 1) % V);
                seq[i] = (int32_t)s;
                want[i] = at + i + checked >= prompt;
            }
            for (int d = 0; d < 2; d++) {
                decode(ctx[d], ids, seq, n, want);
                for (size_t i = 0; i < n; i++)
                    if (want[i])
                        memcpy(logits + ((d * n_seq + s) * checked + at + i + checked - prompt) * V,
                               corral_get_logits(ctx[d], i), V * sizeof *logits);
            }
        }
    for (uint32_t s = 0; s < n_seq; s++)
        for (size_t j = 0; j < checked; j++) {
            float diff = max_abs_diff(logits + ((n_seq + s) * checked + j) * V,
                                      logits + (s * checked + j) * V, V);
            if (!(diff <= 1e-3f))
                fail_msg("llama4 in chunks of %u, %u layers on the device, sequence %u of %u: "
                         "position %zu logits differ by %g", chunk, on, s, n_seq,
                         prompt - checked + j, (double)diff);
        }
    for (int step = 0; step < 2; step++) {
        for (uint32_t s = 0; s < n_seq; s++) {
            const float *last = step == 0 ? logits + (s * checked + checked - 1) * V
                                          : corral_get_logits(ctx[0], s);
            ids[s] = argmax(last, V), seq[s] = (int32_t)s, want[s] = true;
        }
        for (int d = 0; d < 2; d++)
            decode(ctx[d], ids, seq, n_seq, want);
        for (uint32_t s = 0; s < n_seq; s++) {
            float diff = max_abs_diff(corral_get_logits(ctx[1], s),
                                      corral_get_logits(ctx[0], s), V);
            if (!(diff <= 1e-3f))
                fail_msg("llama4 in chunks of %u, sequence %u of %u: greedy step %d logits "
                         "differ by %g", chunk, s, n_seq, step, (double)diff);
        }
    }
    free(ids), free(seq), free(want), free(logits);
    corral_context_free(ctx[0]);
    corral_context_free(ctx[1]);
    corral_model_free(m);
}

/* llama4: chunked RoPE layers with q and k RMS-normed per head after RoPE, a NoPE layer with
 * the attention temperature, experts every other layer chosen by a sigmoid and weighting
 * their input, beside a shared expert; with every layer on the device and with the last one
 * (the NoPE layer, of experts) or two, four sequences batched, and the fitting's estimate.
 * Past chunk boundaries at a size lavapipe reaches: the loaded model's chunks and temperature
 * steps made 16 positions (both sides read them from hp), a prompt of 61 in micro-batches of
 * 7, so that the chunked layers' compact cache (22 cells) slides, with 1 and 2 sequences and
 * with the last 2 layers. The vision fixture's text model goes to the device likewise, and
 * with it the runner's tower (test_vulkan_vision runs the tower's blocks there). */
static void test_llama4(void **state)
{
    (void)state;
    check_model("arch/llama4.gguf", 1e-3f, false, true);
    check_partial("arch/llama4.gguf", 2, 1e-3f);
    check_four_sequences("arch/llama4.gguf");
    check_estimate("arch/llama4.gguf", 1);
    check_model("vision/llama4-text.gguf", 1e-3f, false, false);
    check_llama4_chunks(16, 61, 7, 128, 1, -1, 61);
    check_llama4_chunks(16, 61, 7, 128, 2, -1, 61);
    check_llama4_chunks(16, 61, 7, 128, 2, 2, 61);
}

/* llama4 at its own size: chunks and temperature steps of 8192 positions (the CPU's, as
 * llama.cpp fixes them), prompts of 8196 tokens in micro-batches of 256 for 2 sequences, in
 * 8448 cells (the chunked layers' compact 8447), positions 8188 to 8195 checked. On a GPU
 * only: lavapipe takes about 300 s of CPU a sequence (its attention over 8192 cells), a GPU
 * run (bench/gpu_remote.sh's part arch) seconds. */
static void test_llama4_past_its_first_chunk(void **state)
{
    (void)state;
    corral_error err = {{0}};
    vk_device *dev = vk_device_open(-1, &err);
    if (!dev)
        fail_msg("%s", err.message);
    if (dev->info.type == VK_PHYSICAL_DEVICE_TYPE_CPU) {
        print_message("%s is a CPU: 8192 positions are left to a GPU run\n", dev->info.name);
        skip();
    }
    check_llama4_chunks(8192, 8196, 256, 8448, 2, -1, 8);
}

/* gemma3n: AltUp's streams predicted and corrected around each layer and merged after the
 * last, the laurel branch, the first 10 layers' sparse gates, per-layer inputs and the last 5
 * layers on the caches of layers 18 and 19; with every layer on the device, and with the last
 * 16 (the streams made and carried by the CPU's first 9 layers, one sparse layer here). */
static void test_gemma3n_altup_laurel_sparse_gates(void **state)
{
    (void)state;
    check_model("arch/gemma3n.gguf", 3e-2f, false, false);
    corral_error err = {{0}};
    corral_model *m = corral_model_load(fixture("arch/gemma3n.gguf"), &err);
    if (!m)
        fail_msg("%s", err.message);
    corral_context *gpu = context(m, 16, 1);
    assert_int_equal(corral_context_gpu_layers(gpu), 16); /* check_partial would take 0 */
    corral_context_free(gpu);
    corral_model_free(m);
    check_partial("arch/gemma3n.gguf", 16, 3e-2f);
    /* the fitting counts the AltUp and laurel weights and the unembedding slabs (here rather
     * than with the other files: gpu_remote.sh leaves this one out) */
    check_estimate("arch/gemma3n.gguf", 7);
}

/* laguna: query heads per layer (4, 8, 8, 8, 4 over 2 KV heads), per-head q/k norms, the
 * softplus gate on the attention's output (a gate per head on layers 0-3, per element on
 * layer 4), sliding layers on their own RoPE, YaRN on the global ones, sigmoid-routed
 * experts with a selection bias beside a shared expert after a dense layer; with every layer
 * on the device and with the last one, and the fitting counting the gates. */
static void test_laguna(void **state)
{
    (void)state;
    check_model("arch/laguna.gguf", 1e-3f, false, true);
    check_estimate("arch/laguna.gguf", 1);
}

/* qwen3vl, qwen3vlmoe: Qwen3-VL's text runs qwen3's and qwen3moe's blocks on the device (its
 * interleaved M-RoPE is NeoX's for text). */
static void test_qwen3vl(void **state) { (void)state; check_model("arch/qwen3vl.gguf", 1e-3f, false, true); }
static void test_qwen3vlmoe(void **state) { (void)state; check_model("arch/qwen3vlmoe.gguf", 1e-3f, false, false); }

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_llama_gqa),
        cmocka_unit_test(test_llama_tied_rope_freqs),
        cmocka_unit_test(test_qwen2_biases_neox),
        cmocka_unit_test(test_qwen3_qk_norm),
        cmocka_unit_test(test_phi3_fused_qkv_and_gate_up),
        cmocka_unit_test(test_granite_scales),
        cmocka_unit_test(test_smollm3_nope_layers),
        cmocka_unit_test(test_gemma2_softcaps_and_windows),
        cmocka_unit_test(test_gemma3_two_ropes_and_windows),
        cmocka_unit_test(test_cohere2_parallel_layernorm),
        cmocka_unit_test(test_exaone4_normed_branches),
        cmocka_unit_test(test_glm4_sandwich_partial_rope),
        cmocka_unit_test(test_olmo2_whole_qk_norms),
        cmocka_unit_test(test_starcoder2_layernorm_gelu_biases),
        cmocka_unit_test(test_mistral3_attention_temperature),
        cmocka_unit_test(test_nemotron_relu_sqr_partial_neox),
        cmocka_unit_test(test_qwen2vl_mrope_text),
        cmocka_unit_test(test_windows_slide_in_small_batches),
        cmocka_unit_test(test_images_on_the_device),
        cmocka_unit_test(test_embedding_models),
        cmocka_unit_test(test_gemma_embedding_two_sided_windows),
        cmocka_unit_test(test_stories260k),
        cmocka_unit_test(test_tiny_tolstoy_f16),
        cmocka_unit_test(test_llama_moe),
        cmocka_unit_test(test_llama_moe_experts_in_one_tensor_each),
        cmocka_unit_test(test_granitemoe_shared_expert),
        cmocka_unit_test(test_llama_moe_selection_bias),
        cmocka_unit_test(test_qwen3moe),
        cmocka_unit_test(test_deepseek2),
        cmocka_unit_test(test_deepseek2_combined_kv_b),
        cmocka_unit_test(test_granitemoe),
        cmocka_unit_test(test_gpt_oss),
        cmocka_unit_test(test_gpt_oss_mxfp4),
        cmocka_unit_test(test_quant_f32),
        cmocka_unit_test(test_quant_f16),
        cmocka_unit_test(test_quant_q4_0),
        cmocka_unit_test(test_quant_q8_0),
        cmocka_unit_test(test_quant_bf16),
        cmocka_unit_test(test_quant_q5_0),
        cmocka_unit_test(test_quant_q5_k),
        cmocka_unit_test(test_quant_q4_k),
        cmocka_unit_test(test_quant_q6_k),
        cmocka_unit_test(test_quant_q4_k_m),
        cmocka_unit_test(test_quant_q4_1),
        cmocka_unit_test(test_quant_q5_1),
        cmocka_unit_test(test_quant_q2_k),
        cmocka_unit_test(test_quant_q3_k),
        cmocka_unit_test(test_quant_iq4),
        cmocka_unit_test(test_quant_iq_lattice),
        cmocka_unit_test(test_four_sequences_batched),
        cmocka_unit_test(test_four_sequences_batched_experts),
        cmocka_unit_test(test_long_prompt_experts),
        cmocka_unit_test(test_long_prompt_experts_tiled),
        cmocka_unit_test(test_sequences_slide_apart),
        cmocka_unit_test(test_many_logits_from_the_cpu_output),
        cmocka_unit_test(test_context_shift),
        cmocka_unit_test(test_context_shift_wide_heads),
        cmocka_unit_test(test_fit_estimate_covers_the_allocations),
        cmocka_unit_test(test_fitting_leaves_the_reserve),
        cmocka_unit_test(test_what_the_device_lacks_stays_on_the_cpu),
        cmocka_unit_test(test_weights_the_device_lacks_stay_on_the_cpu),
        cmocka_unit_test(test_gemma4_two_head_widths),
        cmocka_unit_test(test_gemma4_per_layer_inputs_shared_kv),
        cmocka_unit_test(test_gemma4_dense_and_experts),
        cmocka_unit_test(test_mllama_leaves_out_cross_attention_layers),
        cmocka_unit_test(test_mllama_images_on_the_device),
        cmocka_unit_test(test_mllama_fitting_counts_image_caches),
        cmocka_unit_test(test_llama4),
        cmocka_unit_test(test_llama4_past_its_first_chunk),
        cmocka_unit_test(test_gemma3n_altup_laurel_sparse_gates),
        cmocka_unit_test(test_laguna),
        cmocka_unit_test(test_gemma_geglu_scaled_embeddings),
        cmocka_unit_test(test_command_r_parallel_layernorm),
        cmocka_unit_test(test_exaone_neox_rope_freqs),
        cmocka_unit_test(test_olmo3_windows_and_two_ropes),
        cmocka_unit_test(test_command_r_plus_per_head_qk_layernorms),
        cmocka_unit_test(test_qwen35_gated_delta_net),
        cmocka_unit_test(test_phi2_parallel_partial_rope),
        cmocka_unit_test(test_stablelm_partial_rope),
        cmocka_unit_test(test_stablelm_head_norms_and_parallel_ffn),
        cmocka_unit_test(test_starcoder_positions_mqa),
        cmocka_unit_test(test_falcon_parallel_mqa),
        cmocka_unit_test(test_falcon_40b_attention_norm),
        cmocka_unit_test(test_qwen2moe_gated_shared_expert),
        cmocka_unit_test(test_phi3_longrope),
        cmocka_unit_test(test_qwen35moe),
        cmocka_unit_test(test_granitehybrid_mamba2),
        cmocka_unit_test(test_glm4moe),
        cmocka_unit_test(test_jina_bert_v2_alibi),
        cmocka_unit_test(test_alibi_beside_sinks_stays_on_the_cpu),
        cmocka_unit_test(test_nomic_bert_moe_gelu_experts),
        cmocka_unit_test(test_qwen3next_grouped_delta_net),
        cmocka_unit_test(test_nemotron_h_mamba2),
        cmocka_unit_test(test_nemotron_h_moe_ungated_experts),
        cmocka_unit_test(test_lfm2_short_convs),
        cmocka_unit_test(test_qwen3vl),
        cmocka_unit_test(test_qwen3vlmoe),
        cmocka_unit_test(test_chatglm_fused_qkv_partial_rope),
        cmocka_unit_test(test_internlm2),
    };
    return VULKAN_FIXTURE_RUN(tests);
}

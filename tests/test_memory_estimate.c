/*
 * The scheduler's estimate of a runner's memory (src/server/sched/memory_estimate.c) against
 * what the engine does: the copies loading makes count whole, and of the weights left in the
 * file's mapping only what a token reads (the routed share of the experts); a vision model's
 * cache of encoded images at the most one image becomes.
 */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "address_sanitized.h"
#include "corral/engine.h"
#include "file_fixture.h"
#include "gptoss_fixture.h"
#include "image/preprocess.h"
#include "image/projector_preprocess.h"
#include "image/slices.h"
#include "mllama_fixture.h"
#include "nemotron_latent_fixture.h"
#include "quant.h"
#include "reference_fixture.h"
#include "runner/prompt_images.h"
#include "server/sched/memory_estimate.h"
#include "server/sched/runner_process.h"

static uint64_t rss_anon(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    assert_non_null(f);
    char line[256];
    unsigned long long kb = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "RssAnon: %llu kB", &kb) == 1)
            break;
    fclose(f);
    return (uint64_t)kb * 1024;
}

static corral_model_memory plan_of(const char *path)
{
    corral_error err;
    corral_model_file *f = corral_model_file_open(path, &err);
    if (!f)
        fail_msg("%s", err.message);
    corral_model_memory m;
    corral_model_file_memory(f, &m);
    corral_model_file_close(f);
    return m;
}

/*
 * ollama's gptoss layout at this level: the plan counts the experts as copied (packed or
 * converted), and the anonymous memory a load and a context really add is that copy plus the
 * context's buffers (under a quarter more here), so the estimate is within 20% of it. A
 * converted copy packed again (two copies) would leave the estimate at half of it.
 */
static void test_estimate_counts_the_copies_loading_makes(void **state)
{
    (void)state;
    char path[] = "/tmp/corral-test-estimate-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    size_t experts;
    gptoss_fixture_write(path, &experts);
    corral_model_memory plan = plan_of(path);
    assert_true(plan.copied_bytes >= experts);
    assert_int_equal(plan.mapped_expert_bytes, 0);
    uint64_t estimate = memory_estimate_model_bytes(path, 64, 1, CORRAL_KV_F32);

    uint64_t before = rss_anon();
    corral_error err;
    corral_model *model = corral_model_load(path, &err);
    if (!model)
        fail_msg("%s", err.message);
    corral_context_params p;
    corral_context_params_init(&p);
    p.n_ctx = 64;
    p.n_batch = 16;
    p.n_threads = 2;
    p.kv_type = CORRAL_KV_F32;
    corral_context *ctx = corral_context_create(model, &p, &err);
    if (!ctx)
        fail_msg("%s", err.message);
    uint64_t added = rss_anon() - before;
    print_message("copied %llu, estimate %llu, anonymous memory added %llu bytes\n",
                  (unsigned long long)plan.copied_bytes, (unsigned long long)estimate,
                  (unsigned long long)added);
    assert_true(plan.copied_bytes <= added);
#if !ADDRESS_SANITIZED
    assert_true((double)estimate >= 0.8 * (double)added);
    assert_true((double)estimate <= 1.2 * (double)added);
#endif
    corral_context_free(ctx);
    corral_model_free(model);
    unlink(path);
}

/*
 * Experts the level reads in place (F32 at the scalar level, which packs nothing): a token
 * reads expert_used_count of expert_count of them (2 of 8 here), the dense tensors whole and
 * one row of the embeddings, so the estimate is that plus the KV cache, well under the file.
 */
static void test_estimate_counts_the_routed_share_of_mapped_experts(void **state)
{
    (void)state;
    corral_error err;
    assert_true(corral_cpu_set_level("scalar", &err));
    const quant_ops *f32 = quant_ops_active(TENSOR_TYPE_F32);
    assert_false(f32 && quant_packable(f32, 64, 64));
    const char *path = fixture("arch/llama-moe.gguf");
    corral_model_file *f = corral_model_file_open(path, &err);
    assert_non_null(f);
    uint64_t experts = 0, embeddings = 0, all = 0;
    for (size_t i = 0; i < corral_model_file_n_tensors(f); i++) {
        const char *name = corral_model_file_tensor_name(f, i);
        uint64_t bytes = corral_model_file_tensor_bytes(f, i);
        all += bytes;
        if (strstr(name, "_exps.weight"))
            experts += bytes;
        else if (strcmp(name, "token_embd.weight") == 0)
            embeddings += bytes;
    }
    corral_model_file_close(f);
    assert_true(experts > all / 2);

    corral_model_memory plan = plan_of(path);
    assert_int_equal(plan.copied_bytes, 0);
    assert_int_equal(plan.mapped_bytes, all);
    assert_int_equal(plan.mapped_expert_bytes, experts);
    assert_int_equal(plan.token_bytes, all - embeddings - experts + experts * 2 / 8);

    /* 3 layers, 2 KV heads of 16 components for K and V, F32, 256 x 2 positions */
    uint64_t kv = 3ull * 2 * (16 + 16) * 4 * 256 * 2;
    assert_int_equal(memory_estimate_model_bytes(path, 256, 2, CORRAL_KV_F32),
                     plan.token_bytes + kv);
}

/*
 * gemma4's cache as the engine lays it out: per-layer KV-head counts, the global layers'
 * wider heads, and no cache for the layers that share an earlier one's (gemma4-e's last two).
 */
static void test_estimate_counts_gemma4_layers_as_they_are(void **state)
{
    (void)state;
    /* gemma4: sliding layers 0, 1, 3, 4 with 2 heads of 16, global 2 and 5 with 1 of 32 */
    uint64_t per_position = (4ull * 2 * (16 + 16) + 2ull * 1 * (32 + 32)) * 4;
    assert_int_equal(memory_estimate_model_bytes(fixture("arch/gemma4.gguf"), 256, 2,
                                                 CORRAL_KV_F32),
                     plan_of(fixture("arch/gemma4.gguf")).token_bytes + per_position * 256 * 2);
    /* gemma4-e: layers 0 and 2 sliding (2 x 16), 1 and 3 global (1 x 32); 4 and 5 share */
    per_position = (2ull * 2 * (16 + 16) + 2ull * 1 * (32 + 32)) * 4;
    assert_int_equal(memory_estimate_model_bytes(fixture("arch/gemma4-e.gguf"), 256, 2,
                                                 CORRAL_KV_F32),
                     plan_of(fixture("arch/gemma4-e.gguf")).token_bytes + per_position * 256 * 2);
}

/*
 * qwen35 (arch/qwen35: 4 layers, every 4th attention): the one attention layer's keys and
 * values (2 KV heads of 32 components, F32), and per sequence the 3 recurrent layers' states:
 * the conv's last 3 inputs of its 2 * 2 * 16 + 4 * 16 = 128 channels and 4 matrices of
 * 16 x 16, in F32. F32 weights at the scalar level are read in place.
 */
static void test_estimate_counts_a_recurrent_models_states(void **state)
{
    (void)state;
    corral_error err;
    assert_true(corral_cpu_set_level("scalar", &err));
    const char *path = fixture("arch/qwen35.gguf");
    corral_model_memory plan = plan_of(path);
    assert_int_equal(plan.copied_bytes, 0);
    uint64_t kv = 1ull * 2 * (32 + 32) * 4 * 256 * 2;
    uint64_t states = 3ull * (3 * 128 + 4 * 16 * 16) * 4 * 2;
    /* three times: the states and the runner's prompt and step checkpoints of them */
    assert_int_equal(memory_estimate_model_bytes(path, 256, 2, CORRAL_KV_F32),
                     plan.token_bytes + kv + 3 * states);
}

/* file's (under the fixtures, or an absolute path) plan copies nothing, and for 2 sequences
 * of 256 cells with an F32 cache its estimate is a token's reads plus kv bytes of keys and
 * values and three times states bytes of recurrent state (the runner keeps a prompt and a step
 * checkpoint of each sequence's); the plan, for the caller's own checks. */
static corral_model_memory check_cache_and_states(const char *file, uint64_t kv, uint64_t states)
{
    corral_error err;
    assert_true(corral_cpu_set_level("scalar", &err));
    const char *path = file[0] == '/' ? file : fixture(file);
    corral_model_memory plan = plan_of(path);
    assert_int_equal(plan.copied_bytes, 0);
    assert_int_equal(memory_estimate_model_bytes(path, 256, 2, CORRAL_KV_F32),
                     plan.token_bytes + kv + 3 * states); /* the states and their checkpoints */
    return plan;
}

/*
 * A recurrent model with 3 of 8 experts used: a token reads the routed share of the experts
 * read in place, and the estimate adds the attention layers' cache (kv bytes) and the
 * recurrent layers' states (states bytes) for 256 cells of 2 sequences. Multi-token
 * prediction tensors (mtp.*, which nothing loads) count as none; their bytes are returned.
 */
static uint64_t check_recurrent_moe(const char *file, uint64_t kv, uint64_t states)
{
    corral_error err;
    corral_model_file *f = corral_model_file_open(file[0] == '/' ? file : fixture(file), &err);
    assert_non_null(f);
    uint64_t experts = 0, embeddings = 0, all = 0, predicting = 0;
    for (size_t i = 0; i < corral_model_file_n_tensors(f); i++) {
        const char *name = corral_model_file_tensor_name(f, i);
        uint64_t bytes = corral_model_file_tensor_bytes(f, i);
        if (strncmp(name, "mtp.", 4) == 0) {
            predicting += bytes;
            continue;
        }
        all += bytes;
        if (strstr(name, "_exps.weight"))
            experts += bytes;
        else if (strcmp(name, "token_embd.weight") == 0)
            embeddings += bytes;
    }
    corral_model_file_close(f);
    corral_model_memory plan = check_cache_and_states(file, kv, states);
    assert_int_equal(plan.mapped_bytes, all);
    assert_int_equal(plan.mapped_expert_bytes, experts);
    assert_int_equal(plan.token_bytes, all - embeddings - experts + experts * 3 / 8);
    return predicting;
}

/* qwen35's sizes (arch/qwen35moe, arch/qwen3next): one attention layer's keys and values
 * (2 KV heads of 32 components, F32) and 3 Gated DeltaNet states (the conv's last 3 inputs of
 * 128 channels, 4 value heads of 16 x 16). */
static const uint64_t qwen35_kv = 1ull * 2 * (32 + 32) * 4 * 256 * 2,
                      qwen35_states = 3ull * (3 * 128 + 4 * 16 * 16) * 4 * 2;

static void test_estimate_counts_a_recurrent_moe(void **state)
{
    (void)state;
    check_recurrent_moe("arch/qwen35moe.gguf", qwen35_kv, qwen35_states);
}

/*
 * granitehybrid (arch/granitehybrid: layer 2 attention, layers 0, 1, 3 Mamba2, as its
 * per-layer head_count_kv says): the attention layer's keys and values (2 KV heads of 16
 * components, F32), and per sequence the 3 Mamba2 layers' states: the conv's last 3 inputs of
 * its 128 + 2 * 2 * 16 = 192 channels and a 128 x 16 scan state, in F32.
 */
static void test_estimate_counts_mamba2_states(void **state)
{
    (void)state;
    check_cache_and_states("arch/granitehybrid.gguf", 1ull * 2 * (16 + 16) * 4 * 256 * 2,
                           3ull * (3 * 192 + 128 * 16) * 4 * 2);
}

/*
 * glm4moe (arch/glm4moe: a dense layer, three layers with 3 of 8 experts used, then blk.4, a
 * multi-token prediction layer, which is not loaded): neither its weights nor a cache for it
 * count; the four trunk layers' keys and values (2 KV heads of 32 components, F32) do.
 */
static void test_estimate_leaves_out_prediction_layers(void **state)
{
    (void)state;
    corral_error err;
    corral_model_file *f = corral_model_file_open(fixture("arch/glm4moe.gguf"), &err);
    assert_non_null(f);
    uint64_t experts = 0, embeddings = 0, trunk = 0, predicted = 0;
    for (size_t i = 0; i < corral_model_file_n_tensors(f); i++) {
        const char *name = corral_model_file_tensor_name(f, i);
        uint64_t bytes = corral_model_file_tensor_bytes(f, i);
        if (strncmp(name, "blk.4.", 6) == 0) {
            predicted += bytes;
            continue;
        }
        trunk += bytes;
        if (strstr(name, "_exps.weight"))
            experts += bytes;
        else if (strcmp(name, "token_embd.weight") == 0)
            embeddings += bytes;
    }
    corral_model_file_close(f);
    assert_true(predicted > 0);
    corral_model_memory plan =
        check_cache_and_states("arch/glm4moe.gguf", 4ull * 2 * (32 + 32) * 4 * 256 * 2, 0);
    assert_int_equal(plan.mapped_bytes, trunk);
    assert_int_equal(plan.mapped_expert_bytes, experts);
    assert_int_equal(plan.token_bytes, trunk - embeddings - experts + experts * 3 / 8);
}

/* qwen3next (arch/qwen3next): qwen35moe's sizes, the states counted as its. */
static void test_estimate_counts_qwen3next_states(void **state)
{
    (void)state;
    check_recurrent_moe("arch/qwen3next.gguf", qwen35_kv, qwen35_states);
}

/*
 * nemotron_h (arch/nemotron-h: layers 0 and 3 Mamba2, 2 attention, 1 and 4 FFN): the FFN
 * layers have no KV heads either, but no state: only the two layers whose head_count_kv and
 * feed_forward_length entries are both 0 keep Mamba2 states (sizes as granitehybrid's).
 */
static void test_estimate_counts_no_state_for_nemotron_h_ffn_layers(void **state)
{
    (void)state;
    check_cache_and_states("arch/nemotron-h.gguf", 1ull * 2 * (16 + 16) * 4 * 256 * 2,
                           2ull * (3 * 192 + 128 * 16) * 4 * 2);
}

/*
 * nemotron_h_moe (arch/nemotron-h-moe: nemotron-h's layers, the FFN layers 3 of 8 experts
 * used): a token reads the routed share of the experts, and only the two Mamba2 layers keep
 * states, not the expert layers.
 */
static void test_estimate_counts_nemotron_h_moe(void **state)
{
    (void)state;
    check_recurrent_moe("arch/nemotron-h-moe.gguf", 1ull * 2 * (16 + 16) * 4 * 256 * 2,
                        2ull * (3 * 192 + 128 * 16) * 4 * 2);
}

/*
 * Nemotron 3 Super as ollama writes it (nemotron_latent_fixture.h: latent experts, and an
 * mtp.* tensor): a token reads the latent projections whole beside the routed share of the
 * experts, and the prediction tensor, which nothing loads, counts as none.
 */
static void test_estimate_counts_latent_experts_not_prediction_tensors(void **state)
{
    (void)state;
    char dst[] = "/tmp/corral-test-estimate-latent-XXXXXX";
    int fd = mkstemp(dst);
    assert_true(fd >= 0);
    close(fd);
    nemotron_latent_spec spec = {.layout = NEMOTRON_LATENT_OLLAMA, .latent = 16};
    nemotron_latent_fixture_write(fixture("arch/nemotron-h-moe.gguf"), dst, &spec);
    assert_true(check_recurrent_moe(dst, 1ull * 2 * (16 + 16) * 4 * 256 * 2,
                                    2ull * (3 * 192 + 128 * 16) * 4 * 2) > 0);
    unlink(dst);
}

/*
 * lfm2 (arch/lfm2: layers 0, 1 and 3 short convolutions, 2 attention): its head_count_kv 0
 * entries are conv layers, whose state is the conv's last l_cache - 1 = 2 inputs of 64
 * channels, not Mamba2's (the file has no ssm.* keys).
 */
static void test_estimate_counts_lfm2_conv_windows(void **state)
{
    (void)state;
    check_cache_and_states("arch/lfm2.gguf", 1ull * 2 * (16 + 16) * 4 * 256 * 2,
                           3ull * 2 * 64 * 4 * 2);
}

/*
 * mllama: its llama twin (mllama_fixture.h, the self-attention layers alone) and the two
 * cross-attention layers (64 wide, 2 KV heads of 16, FFN 96, F32): their q, k, v, o and FFN
 * matrices (2 x 30720 floats; packed where the level packs F32) and their norms and gates
 * (2 x 162 floats), all read by a token;
 * a cache of the 3 self-attention layers only (256 x 2 positions). The file with its tower
 * adds, per sequence, an image's keys and values in both layers: 4 tiles of 17 rows.
 */
static void test_estimate_counts_mllama_layers_and_image_states(void **state)
{
    (void)state;
    char path[] = "/tmp/corral-test-estimate-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    mllama_fixture_write_llama(path);
    corral_model_memory mllama = plan_of(fixture("arch/mllama.gguf")), llama = plan_of(path);
    assert_int_equal(mllama.copied_bytes + mllama.token_bytes,
                     llama.copied_bytes + llama.token_bytes + 2 * (30720 + 162) * 4);
    uint64_t kv = 3ull * 2 * (16 + 16) * 4 * 256 * 2;
    assert_int_equal(memory_estimate_model_bytes(fixture("arch/mllama.gguf"), 256, 2,
                                                 CORRAL_KV_F32),
                     mllama.copied_bytes + mllama.token_bytes + kv);
    corral_model_memory tower = plan_of(fixture("vision/mllama.gguf"));
    uint64_t image = 4ull * 17 * 2 * (16 + 16) * 4 * 2 /* layers */ * 2 /* sequences */;
    assert_int_equal(memory_estimate_model_bytes(fixture("vision/mllama.gguf"), 256, 2,
                                                 CORRAL_KV_F32),
                     tower.copied_bytes + tower.token_bytes + kv + image);
    unlink(path);
}

/* An n x n picture of a vision/ reference (pixels.f32) encoded by the projector at path: the
 * bytes its embeddings take, as the runner's cache holds them; its row width in *width. */
static uint64_t encoded_bytes(const char *path, const char *pixels_name, uint32_t n,
                              uint32_t *width)
{
    corral_error err;
    corral_mmproj *mm = corral_mmproj_load(fixture(path), &err);
    if (!mm)
        fail_msg("%s", err.message);
    size_t size;
    float *pixels = file_fixture_read(fixture(pixels_name), &size);
    assert_int_equal(size, (size_t)n * n * 3 * sizeof(float));
    corral_image_embd embd;
    if (!corral_mmproj_encode(mm, pixels, n, n, 1, &embd, &err))
        fail_msg("%s", err.message);
    uint64_t bytes = (uint64_t)embd.n_tokens * embd.n_embd * sizeof(float);
    *width = embd.n_embd;
    corral_image_embd_free(&embd);
    free(pixels);
    corral_mmproj_free(mm);
    return bytes;
}

/*
 * The scheduler's estimate of a runner (runner_process.c's, as /api/ps shows it) adds the
 * runner's cache of encoded images at its fullest: PROMPT_CACHED_IMAGES images of the most
 * bytes one takes. mllama's is every tile's rows (4 tiles of 17, 64 wide) whatever the
 * picture; gemma3's every picture the square's tokens, so one encoded image is the most; a
 * text model's estimate is its file's alone.
 */
static void test_estimate_counts_the_image_cache_at_its_fullest(void **state)
{
    (void)state;
    runner_ops ops;
    corral_error err;
    if (!runner_process_ops_create(&(server_config){0}, &ops, &err))
        fail_msg("%s", err.message);
    runner_spec text = {.name = "text", .model_path = fixture("arch/llama-gqa.gguf"),
                        .num_ctx = 256, .num_parallel = 2, .kv_type = CORRAL_KV_F32};
    assert_int_equal(ops.estimate_bytes(ops.ctx, &text),
                     memory_estimate_model_bytes(text.model_path, 256, 2, CORRAL_KV_F32));

    const char *mllama = fixture("vision/mllama.gguf");
    runner_spec one_file = text;
    one_file.model_path = one_file.projector_path = mllama;
    assert_int_equal(memory_estimate_image_cache_bytes(mllama),
                     PROMPT_CACHED_IMAGES * 4ull * 17 * 64 * sizeof(float));
    assert_int_equal(ops.estimate_bytes(ops.ctx, &one_file),
                     memory_estimate_model_bytes(mllama, 256, 2, CORRAL_KV_F32) +
                         PROMPT_CACHED_IMAGES * 4ull * 17 * 64 * sizeof(float));

    uint32_t width;
    uint64_t image = encoded_bytes("vision/gemma3-mmproj.gguf", "vision/gemma3.square.pixels.f32",
                                   64, &width);
    runner_spec pair = text;
    pair.model_path = fixture("vision/gemma3-text.gguf");
    pair.projector_path = fixture("vision/gemma3-mmproj.gguf");
    size_t projector_size;
    free(file_fixture_read(pair.projector_path, &projector_size));
    assert_int_equal(memory_estimate_image_cache_bytes(pair.projector_path),
                     PROMPT_CACHED_IMAGES * image);
    assert_int_equal(ops.estimate_bytes(ops.ctx, &pair),
                     memory_estimate_model_bytes(pair.model_path, 256, 2, CORRAL_KV_F32) +
                         projector_size + PROMPT_CACHED_IMAGES * image);
    /* a text model is no projector */
    assert_int_equal(memory_estimate_image_cache_bytes(pair.model_path), 0);
    ops.free(ops.ctx);
}

/*
 * A model file that carries an audio tower and no vision tower (a Gemma 4 file with audio
 * alone) adds the runner's cache of encoded clips at its fullest: PROMPT_CACHED_IMAGES clips
 * of 30 seconds, each 750 tokens (2999 frames of 10 ms, halved twice) of its text width (32),
 * though it has no projector; a file without a tower adds none. A single file with both
 * towers adds the larger of the two caches, which share their slots.
 */
static void test_estimate_counts_the_clip_cache_at_its_fullest(void **state)
{
    (void)state;
    runner_ops ops;
    corral_error err;
    if (!runner_process_ops_create(&(server_config){0}, &ops, &err))
        fail_msg("%s", err.message);
    uint64_t clips = PROMPT_CACHED_IMAGES * 750ull * 32 * sizeof(float);
    char model[2048]; /* fixture's paths are reused after a few calls */
    snprintf(model, sizeof model, "%s", fixture("audio/gemma4a-model.gguf"));
    runner_spec hearing = {.name = "hearing", .model_path = model,
                           .num_ctx = 256, .num_parallel = 2, .kv_type = CORRAL_KV_F32};
    assert_int_equal(memory_estimate_clip_cache_bytes(hearing.model_path), clips);
    assert_int_equal(ops.estimate_bytes(ops.ctx, &hearing),
                     memory_estimate_model_bytes(hearing.model_path, 256, 2, CORRAL_KV_F32) +
                         clips);
    assert_int_equal(memory_estimate_clip_cache_bytes(fixture("arch/gemma4.gguf")), 0);
    assert_int_equal(memory_estimate_clip_cache_bytes(fixture("vision/mllama.gguf")), 0);
    /* beside a projector whose images take less, the clips count; and the other way round */
    runner_spec both = hearing;
    both.name = "hearing-seeing";
    both.projector_path = fixture("vision/gemma3-mmproj.gguf");
    size_t projector_size;
    free(file_fixture_read(both.projector_path, &projector_size));
    uint64_t images = memory_estimate_image_cache_bytes(both.projector_path);
    assert_true(images > 0 && images < clips);
    assert_int_equal(ops.estimate_bytes(ops.ctx, &both),
                     memory_estimate_model_bytes(both.model_path, 256, 2, CORRAL_KV_F32) +
                         projector_size + clips);
    both.name = "hearing-seeing-more";
    both.projector_path = fixture("vision/qwen25vl-mmproj.gguf");
    free(file_fixture_read(both.projector_path, &projector_size));
    images = memory_estimate_image_cache_bytes(both.projector_path);
    assert_true(images > clips);
    assert_int_equal(ops.estimate_bytes(ops.ctx, &both),
                     memory_estimate_model_bytes(both.model_path, 256, 2, CORRAL_KV_F32) +
                         projector_size + images);
    ops.free(ops.ctx);
}

/* A copy of the fixture src at dst. */
static void copy_fixture(const char *src, const char *dst)
{
    size_t size;
    void *bytes = file_fixture_read(fixture(src), &size);
    FILE *f = fopen(dst, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(bytes, 1, size, f), size);
    assert_int_equal(fclose(f), 0);
    free(bytes);
}

/*
 * A projector's count is kept for the file as it is: its bytes overwritten in place, with its
 * size and time put back, still give it (the projector is not loaded again); another file
 * renamed over it (another inode) gives that file's.
 */
static void test_image_cache_count_is_kept_for_the_same_file(void **state)
{
    (void)state;
    char path[] = "/tmp/corral-test-projector-XXXXXX", other[] = "/tmp/corral-test-other-XXXXXX";
    int fd = mkstemp(path), fd2 = mkstemp(other);
    assert_true(fd >= 0 && fd2 >= 0);
    close(fd);
    close(fd2);
    copy_fixture("vision/mllama.gguf", path);
    uint64_t mllama = PROMPT_CACHED_IMAGES * 4ull * 17 * 64 * sizeof(float);
    assert_int_equal(memory_estimate_image_cache_bytes(path), mllama);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    fd = open(path, O_WRONLY);
    assert_true(fd >= 0);
    assert_int_equal(pwrite(fd, "XXXX", 4, 0), 4); /* no GGUF any more */
    close(fd);
    struct timespec times[2] = {st.st_atim, st.st_mtim};
    assert_int_equal(utimensat(AT_FDCWD, path, times, 0), 0);
    assert_int_equal(memory_estimate_image_cache_bytes(path), mllama);

    copy_fixture("vision/gemma3-mmproj.gguf", other);
    uint64_t gemma3 = memory_estimate_image_cache_bytes(other);
    assert_true(gemma3 > 0 && gemma3 != mllama);
    assert_int_equal(rename(other, path), 0);
    assert_int_equal(memory_estimate_image_cache_bytes(path), gemma3);
    unlink(path);
}

/* The embeddings of a part of nx x ny, 0 past the sides and patches the encoder takes. */
static size_t part_tokens(const corral_mmproj *mm, const corral_image_params *params,
                          uint32_t nx, uint32_t ny)
{
    uint64_t p = params->patch_size;
    /* deepseek-ocr's views go through its encoder one by one, not as one run of patches */
    if (nx > 8192 || ny > 8192 ||
        (params->resize != CORRAL_IMAGE_VIEWS && (nx / p) * (ny / p) > 16384))
        return 0;
    return corral_mmproj_image_tokens(mm, nx, ny);
}

/* The embeddings an image of width x height becomes, counted as the runner counts them
 * (runner/prompt_images.c): a sliced kind's parts under its plan, else the one size the
 * preprocessing makes; 0 for an image the encoder refuses. */
static size_t runner_tokens(const corral_mmproj *mm, uint32_t width, uint32_t height)
{
    corral_image_params params;
    corral_mmproj_image_params(mm, &params);
    if (params.max_slices == 0) {
        image_preprocess pre = image_preprocess_from_params(&params);
        uint32_t nx, ny;
        return image_preprocess_size(&pre, width, height, &nx, &ny, NULL)
                   ? part_tokens(mm, &params, nx, ny)
                   : 0;
    }
    image_slice_plan plan;
    if (!image_plan_for_params(&params, width, height, &plan, NULL))
        return 0;
    size_t n = part_tokens(mm, &params, plan.overview_w, plan.overview_h);
    for (size_t k = 0; k < (size_t)plan.cols * plan.rows; k++)
        n += part_tokens(mm, &params, plan.cell_w, plan.cell_h);
    return n;
}

/*
 * For each kind whose fixture tower is cheap to run, the most bytes one image takes
 * (corral_mmproj_image_bytes) are those of the image of the most embeddings among pictures
 * of every aspect up to the largest sizes (each counted as the runner counts it), at the
 * width of the rows an encoding makes. mllama's are above, deepseek-ocr's below (its
 * tower is costly to run).
 */
static void test_image_bound_is_the_most_an_image_becomes(void **state)
{
    (void)state;
    const char *towers[] = {"gemma3-mmproj", "qwen25vl-mmproj", "qwen3vl-mmproj",
                            "qwen35v-mmproj", "llava15-mmproj", "llava16-mmproj",
                            "llava-next-mmproj", "minicpmv-mmproj", "mistral3-mmproj",
                            "llama4-mmproj", "gemma4v-mmproj", "glm4v-mmproj",
                            "lfm2v-mmproj", "lfm2v16-mmproj", "moondream-mmproj"};
    const uint32_t sides[] = {1, 64, 300, 512, 1000, 1024, 2048, 4096, 8192, 16384};
    for (size_t t = 0; t < sizeof towers / sizeof towers[0]; t++) {
        char path[128];
        snprintf(path, sizeof path, "vision/%s.gguf", towers[t]);
        corral_error err;
        corral_mmproj *mm = corral_mmproj_load(fixture(path), &err);
        if (!mm)
            fail_msg("%s: %s", path, err.message);
        size_t most = 0;
        for (size_t i = 0; i < sizeof sides / sizeof sides[0]; i++)
            for (size_t j = 0; j < sizeof sides / sizeof sides[0]; j++) {
                size_t n = runner_tokens(mm, sides[i], sides[j]);
                most = n > most ? n : most;
            }
        /* thin pictures, whose thin side keeps one merged token while the other passes the
         * pixel bound: every length of a range that holds the longest the encoder takes of
         * these towers (gemma4v's 682 tokens from 3 x 4984) */
        for (uint32_t w = 1; w <= 4; w++)
            for (uint32_t h = 4096; h <= 5120; h++) {
                size_t n = runner_tokens(mm, w, h);
                most = n > most ? n : most;
            }
        /* the rows' width, from the smallest image's encoding */
        corral_image_params params;
        corral_mmproj_image_params(mm, &params);
        image_preprocess pre = image_preprocess_from_params(&params);
        uint32_t nx, ny;
        if (params.max_slices == 0)
            assert_true(image_preprocess_size(&pre, 1, 1, &nx, &ny, &err));
        else
            nx = ny = params.image_size;
        float *zeros = calloc((size_t)nx * ny * 3, sizeof *zeros);
        assert_non_null(zeros);
        corral_image_embd embd;
        if (!corral_mmproj_encode(mm, zeros, nx, ny, 1, &embd, &err))
            fail_msg("%s: %s", path, err.message);
        uint64_t want = (uint64_t)most * embd.n_embd * sizeof(float);
        if (corral_mmproj_image_bytes(mm) != want)
            fail_msg("%s: %llu bytes at most, the largest image takes %llu (%zu rows of %u)",
                     path, (unsigned long long)corral_mmproj_image_bytes(mm),
                     (unsigned long long)want, most, embd.n_embd);
        corral_image_embd_free(&embd);
        free(zeros);
        corral_mmproj_free(mm);
    }
}

/* deepseek-ocr's most: its tallest grid of tiles with the global view, found among pictures
 * of every aspect as the runner counts them, rows of the text model's 64 values. */
static void test_image_bound_of_deepseekocr_views(void **state)
{
    (void)state;
    corral_error err;
    corral_mmproj *mm = corral_mmproj_load(fixture("vision/deepseekocr-mmproj.gguf"), &err);
    if (!mm)
        fail_msg("%s", err.message);
    const uint32_t sides[] = {1, 64, 640, 1024, 2048, 4096, 8192, 16384};
    size_t most = 0;
    for (size_t i = 0; i < sizeof sides / sizeof sides[0]; i++)
        for (size_t j = 0; j < sizeof sides / sizeof sides[0]; j++) {
            size_t n = runner_tokens(mm, sides[i], sides[j]);
            most = n > most ? n : most;
        }
    assert_int_equal(corral_mmproj_image_bytes(mm), (uint64_t)most * 64 * sizeof(float));
    corral_mmproj_free(mm);
}

/* Qwen's images are as many tokens as the preprocessing lets through: the largest image,
 * sized by that preprocessing, is the most one image takes. */
static void test_image_bound_is_the_largest_image_the_preprocessing_makes(void **state)
{
    (void)state;
    uint32_t width;
    encoded_bytes("vision/qwen25vl-mmproj.gguf", "vision/qwen25vl.square.pixels.f32", 84, &width);
    corral_error err;
    corral_mmproj *mm = corral_mmproj_load(fixture("vision/qwen25vl-mmproj.gguf"), &err);
    if (!mm)
        fail_msg("%s", err.message);
    corral_image_params params;
    corral_mmproj_image_params(mm, &params);
    image_preprocess pre = image_preprocess_from_params(&params);
    uint32_t nx, ny;
    assert_true(image_preprocess_size(&pre, 16384, 16384, &nx, &ny, &err));
    size_t tokens = corral_mmproj_image_tokens(mm, nx, ny);
    assert_true(tokens > 9); /* more than the 84 x 84 reference's */
    assert_int_equal(corral_mmproj_image_bytes(mm), (uint64_t)tokens * width * sizeof(float));
    corral_mmproj_free(mm);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_estimate_counts_the_copies_loading_makes),
        cmocka_unit_test(test_estimate_counts_the_routed_share_of_mapped_experts),
        cmocka_unit_test(test_estimate_counts_gemma4_layers_as_they_are),
        cmocka_unit_test(test_estimate_counts_a_recurrent_models_states),
        cmocka_unit_test(test_estimate_counts_a_recurrent_moe),
        cmocka_unit_test(test_estimate_counts_mamba2_states),
        cmocka_unit_test(test_estimate_leaves_out_prediction_layers),
        cmocka_unit_test(test_estimate_counts_qwen3next_states),
        cmocka_unit_test(test_estimate_counts_no_state_for_nemotron_h_ffn_layers),
        cmocka_unit_test(test_estimate_counts_nemotron_h_moe),
        cmocka_unit_test(test_estimate_counts_latent_experts_not_prediction_tensors),
        cmocka_unit_test(test_estimate_counts_lfm2_conv_windows),
        cmocka_unit_test(test_estimate_counts_mllama_layers_and_image_states),
        cmocka_unit_test(test_estimate_counts_the_image_cache_at_its_fullest),
        cmocka_unit_test(test_estimate_counts_the_clip_cache_at_its_fullest),
        cmocka_unit_test(test_image_cache_count_is_kept_for_the_same_file),
        cmocka_unit_test(test_image_bound_is_the_largest_image_the_preprocessing_makes),
        cmocka_unit_test(test_image_bound_is_the_most_an_image_becomes),
        cmocka_unit_test(test_image_bound_of_deepseekocr_views),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

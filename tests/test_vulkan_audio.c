/*
 * Gemma 4's audio tower with its conformer blocks on the Vulkan device (gpu_audio.h,
 * vulkan/vk_audio.c) against the same tower on the CPU: the tiny fixture tower
 * (tests/fixtures/audio, its five clipped products each biting) on the reference clip, and
 * on a clip of two segments, the second shorter than the attention's and the convolution's
 * reach; the device's embeddings within the tolerance of an F32 tower on the device, and
 * the reference's within test_audio_gemma4's. The seam refuses blocks the device cannot run
 * and runs longer than it made room for, each with its reason.
 */
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
#include "file_fixture.h"
#include "gpu_audio.h"
#include "tensor_type.h"
#include "vk_ops.h"
#include "vision_check.h"
#include "vk_device.h"

#define N_FRAMES 119
#define N_TOKENS 30
#define TEXT_WIDTH 32
/* An F32 tower on the device: its sums in another order than the CPU's (the products'
 * threads, the norms' partial sums), about 1e-6 of a value of order 1 per step, through two
 * blocks, the output projection and its norm; as test_vulkan_vision's F32 mllama tower. */
#define DEVICE_TOLERANCE 1e-5f
/* test_audio_gemma4's bounds against the double-precision reference */
#define EMBD_TOLERANCE 1e-4f
#define EMBD_MEAN_TOLERANCE 1e-5

static const char *fixture(const char *name)
{
    static char path[4096];
    const char *dir = getenv("CORRAL_FIXTURES");
    snprintf(path, sizeof path, "%s/audio/%s", dir ? dir : "tests/fixtures", name);
    return path;
}

static corral_audio_tower *load_tower(void)
{
    corral_error err = {{0}};
    bool absent = true;
    corral_audio_tower *t = corral_audio_tower_load(fixture("gemma4a-tower.gguf"), &absent, &err);
    if (!t)
        fail_msg("%s", absent ? "no audio tower" : err.message);
    return t;
}

/* The largest |a - b| over n floats. */
static float largest_difference(const float *a, const float *b, size_t n)
{
    float worst = 0.0f;
    for (size_t i = 0; i < n; i++) {
        float d = fabsf(a[i] - b[i]);
        worst = d > worst || isnan(d) ? d : worst;
    }
    return worst;
}

/* The clip's segments encoded on the CPU, then with the blocks on the device: within
 * DEVICE_TOLERANCE, but not to the bit (the device's own sums ran). */
static void check_segments(corral_audio_tower *cpu, corral_audio_tower *gpu, const float *mel,
                           const size_t *frames, size_t n_segments, float *out_gpu)
{
    corral_error err = {{0}};
    corral_image_embd want, got;
    if (!corral_audio_tower_encode_segments(cpu, mel, frames, n_segments, 2, NULL, &want, &err) ||
        !corral_audio_tower_encode_segments(gpu, mel, frames, n_segments, 2, NULL, &got, &err))
        fail_msg("%s", err.message);
    assert_int_equal(got.n_tokens, want.n_tokens);
    float diff = largest_difference(got.data, want.data, want.n_tokens * TEXT_WIDTH);
    print_message("%zu segments: device against CPU, largest difference %.3g\n", n_segments,
                  (double)diff);
    assert_true(diff > 0.0f && diff <= DEVICE_TOLERANCE);
    if (out_gpu)
        memcpy(out_gpu, got.data, want.n_tokens * TEXT_WIDTH * sizeof *out_gpu);
    corral_image_embd_free(&want);
    corral_image_embd_free(&got);
}

static void test_blocks_on_the_device_match_the_cpu(void **state)
{
    (void)state;
    corral_audio_tower *cpu = load_tower(), *gpu = load_tower();
    corral_error err = {{0}};
    uint64_t bytes = 0;
    if (!corral_audio_tower_gpu_bytes(gpu, -1, &bytes, &err) ||
        !corral_audio_tower_use_gpu(gpu, -1, &err))
        fail_msg("%s", err.message);
    /* two blocks' weights and the scratch of 750 rows 16 wide: more than the rows alone */
    assert_true(bytes > 750u * 16 * sizeof(float));
    assert_true(corral_audio_tower_use_gpu(gpu, -1, &err)); /* once is enough */
    size_t size;
    float *mel = file_fixture_read(fixture("gemma4a-clip.mel.f32"), &size);
    assert_int_equal(size, N_FRAMES * 128 * sizeof(float));
    float *got = malloc(N_TOKENS * TEXT_WIDTH * sizeof *got);
    assert_non_null(got);
    size_t whole = N_FRAMES, halves[2] = {100, N_FRAMES - 100};
    check_segments(cpu, gpu, mel, &whole, 1, got);
    float *want = vision_read_embd(fixture("gemma4a-clip.embd.f32"), N_TOKENS, TEXT_WIDTH);
    vision_check_embd("gemma4a on the device", got, want, N_TOKENS, TEXT_WIDTH,
                      &(vision_tolerance){.max = EMBD_TOLERANCE, .mean = EMBD_MEAN_TOLERANCE});
    check_segments(cpu, gpu, mel, halves, 2, NULL);
    free(want);
    free(got);
    free(mel);
    corral_audio_tower_free(cpu);
    corral_audio_tower_free(gpu);
}

/* Blocks 16 wide in 2 heads over the fixture's reach, without layers unless given. */
static gpu_audio_blocks small_blocks(const float *rel_pos)
{
    return (gpu_audio_blocks){.n_embd = 16, .n_head = 2, .n_ff = 64, .kernel = 5, .past = 12,
                              .eps = 1e-6f, .cap = 50.0f, .q_scale = 1.0f, .k_scale = 1.0f,
                              .ffn_residual = 0.5f, .rel_pos = rel_pos};
}

static void test_refuses_what_it_cannot_run(void **state)
{
    (void)state;
    static float rel_pos[13 * 16], rows[5 * 16];
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++)
        rows[i] = (float)i;
    corral_error err = {{0}};
    uint64_t bytes = 1;
    gpu_audio_blocks b = small_blocks(rel_pos);
    b.past = VK_AUDIO_MAX_PAST;
    assert_false(gpu_audio_bytes(-1, &b, 4, &bytes, &err));
    assert_non_null(strstr(err.message, "past rows"));
    assert_int_equal(bytes, 0);
    b = small_blocks(rel_pos);
    b.n_head = 3;
    assert_null(gpu_audio_create(-1, &b, 4, &err));
    assert_non_null(strstr(err.message, "whole heads"));
    /* a matrix type the CPU may read but the device does not multiply */
    audio_layer layer = {0};
    layer.wo.w.type = TENSOR_TYPE_F64;
    b = small_blocks(rel_pos);
    b.layers = &layer;
    b.n_layers = 1;
    assert_false(gpu_audio_bytes(-1, &b, 4, &bytes, &err));
    assert_non_null(strstr(err.message, "does not multiply"));
    /* no blocks: the rows come back as they went; one row more than made for is refused */
    b = small_blocks(rel_pos);
    gpu_audio *a = gpu_audio_create(-1, &b, 4, &err);
    if (!a)
        fail_msg("%s", err.message);
    float back[4 * 16];
    memcpy(back, rows, sizeof back);
    assert_true(gpu_audio_run(a, back, 4, &err));
    assert_memory_equal(back, rows, sizeof back);
    assert_false(gpu_audio_run(a, rows, 5, &err));
    assert_non_null(strstr(err.message, "5 rows"));
    assert_false(gpu_audio_run(a, rows, 0, &err));
    gpu_audio_free(a);
}

int main(void)
{
    corral_error err = {0};
    if (!vk_device_open(-1, &err)) {
        printf("skipped: %s\n", err.message);
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_blocks_on_the_device_match_the_cpu),
        cmocka_unit_test(test_refuses_what_it_cannot_run),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    vk_device_close();
    return failed;
}

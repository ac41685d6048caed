/*
 * Vision towers' ViT blocks on the Vulkan device (gpu_vision.h) against the CPU's
 * (vision.c's vision_block_of) on random weights: a block of F32 matrices with every bias,
 * then one of F16 matrices with mllama's gates and no projection biases, over rows of which
 * some are padding (each tile's last rows and a whole tile, as mllama pads); a run of both
 * blocks gives what two runs of one give; blocks made without padding rows keep half the keys
 * and values and give the same rows; RMS-normed SwiGLU blocks with rotary angles and
 * windows (vision_block). Then the tiny mllama tower of test_vision_mllama with its blocks on
 * the device: the CPU's states, and the reference's 16 greedy ids from them; and each other
 * kind's tiny tower on the device, against its CPU embeddings (gemma3's and qwen2.5-VL's also
 * giving the reference's greedy ids).
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

#include "file_fixture.h"
#include "mmproj.h"
#include "reference_fixture.h"
#include "quant.h"
#include "quant_half.h"
#include "tensor_type.h"
#include "gpu_vision.h"
#include "vision_check.h"
#include "vision_ref_fixture.h"
#include "vk_device.h"

enum { E = 64, HEADS = 4, FF = 128, TILE_ROWS = 8, REAL_ROWS = 6, TILES = 3, N = TILES * TILE_ROWS };

/* An F32 block's values are sums of at most FF products of F32 values of order 1, taken in
 * another order than the CPU's (its tiles and lanes against the shaders' threads): some
 * roundings of 2^-24 of each partial sum, about 1e-6 of a state of order 1 through a block;
 * erf within 1.5e-7; the softmax's online form rescales in F32. */
#define F32_TOLERANCE 4e-6
/* An F16 block rounds each product's inputs to halves on both sides; two inputs 1e-6 apart
 * may round to neighbouring halves, which moves that one product by 2^-11 of the input (a
 * LayerNorm's or GELU's output, below 4) times its weight (at most 0.25): 5e-4, times the
 * branch's gate (below 0.61). */
#define F16_TOLERANCE 3e-4
/* The tiny mllama tower: five F32 blocks, each within about 1e-6 of the CPU's as the F32
 * block above, through the post LayerNorm (which scales a difference by a row's inverse
 * spread) and the projection; 1e-5, the CPU's own distance from the Python reference. */
#define MLLAMA_TOLERANCE 1e-5f

static vk_device *dev;
static uint32_t rng = 4321;

static float uniform(void) /* -1..1 */
{
    rng = rng * 1664525u + 1013904223u;
    return (float)(rng >> 8) / (float)(1u << 23) - 1.0f;
}

/* A weight of n_out rows of n_in random values times scale (F16: rounded to halves). */
static weight random_weight(uint32_t type, size_t n_in, size_t n_out, float scale, float offset)
{
    size_t count = n_in * n_out;
    weight w = {.type = type, .n_in = n_in, .n_out = n_out, .ops = quant_ops_active(type)};
    if (type == TENSOR_TYPE_F16) {
        uint16_t *h = malloc(count * sizeof *h);
        assert_non_null(h);
        for (size_t i = 0; i < count; i++)
            h[i] = quant_f32_to_f16(offset + scale * uniform());
        w.data = h;
        w.row_bytes = n_in * sizeof *h;
    } else {
        float *f = malloc(count * sizeof *f);
        assert_non_null(f);
        for (size_t i = 0; i < count; i++)
            f[i] = offset + scale * uniform();
        w.data = f;
        w.row_bytes = n_in * sizeof *f;
    }
    return w;
}

static weight vector(size_t n, float scale, float offset)
{
    return random_weight(TENSOR_TYPE_F32, n, 1, scale, offset);
}

static void layer_init(vision_layer *l, uint32_t type, bool biases, bool gates)
{
    float m = 1.0f / sqrtf((float)E), f = 1.0f / sqrtf((float)FF);
    *l = (vision_layer){0};
    l->ln1 = vector(E, 0.2f, 1.0f);
    l->ln1_b = vector(E, 0.1f, 0.0f);
    l->ln2 = vector(E, 0.2f, 1.0f);
    l->ln2_b = vector(E, 0.1f, 0.0f);
    l->wq = random_weight(type, E, E, 2 * m, 0.0f);
    l->wk = random_weight(type, E, E, 2 * m, 0.0f);
    l->wv = random_weight(type, E, E, m, 0.0f);
    l->wo = random_weight(type, E, E, m, 0.0f);
    l->up = random_weight(type, E, FF, 2 * m, 0.0f);
    l->down = random_weight(type, FF, E, f, 0.0f);
    l->up_b = vector(FF, 0.1f, 0.0f);
    l->down_b = vector(E, 0.1f, 0.0f);
    if (biases) {
        l->bq = vector(E, 0.1f, 0.0f);
        l->bk = vector(E, 0.1f, 0.0f);
        l->bv = vector(E, 0.1f, 0.0f);
        l->bo = vector(E, 0.1f, 0.0f);
    }
    if (gates) { /* tanh of the gate, as the converter stores it */
        l->attn_out_gate = vector(1, 0.0f, tanhf(0.7f));
        l->ffn_out_gate = vector(1, 0.0f, tanhf(-0.4f));
    }
}

static void layer_free(vision_layer *l)
{
    weight *w[] = {&l->ln1, &l->ln1_b, &l->ln2, &l->ln2_b, &l->wq, &l->bq, &l->wk, &l->bk,
                   &l->wv, &l->bv, &l->wo, &l->bo, &l->up, &l->up_b, &l->down, &l->down_b,
                   &l->attn_out_gate, &l->ffn_out_gate};
    for (size_t i = 0; i < sizeof w / sizeof w[0]; i++)
        free((void *)w[i]->data);
}

static const vision_hparams HP = {.n_embd = E, .n_ff = FF, .n_head = HEADS, .eps = 1e-5f,
                                  .norm = VISION_LAYER_NORM, .ffn = VISION_FFN_GELU_ERF};

typedef struct blocks {
    vision_layer layers[2];
    uint8_t padding[N];
    float x[N * E];
} blocks;

static void blocks_init(blocks *b)
{
    layer_init(&b->layers[0], TENSOR_TYPE_F32, true, false);
    layer_init(&b->layers[1], TENSOR_TYPE_F16, false, true);
    for (size_t r = 0; r < N; r++)
        b->padding[r] = r / TILE_ROWS == TILES - 1 || r % TILE_ROWS >= REAL_ROWS;
    for (size_t i = 0; i < N * E; i++)
        b->x[i] = uniform();
}

/* The CPU's states of in through blocks [first, first + count). */
static void cpu_blocks(const blocks *b, const float *in, size_t first, size_t count, float *out)
{
    corral_mmproj mm = {0};
    mm.hp = HP;
    mm.patch_embd = (weight){.type = TENSOR_TYPE_F32, .n_in = 16, .n_out = E};
    corral_error err = {0};
    threadpool *pool = threadpool_create(1, &err);
    assert_non_null(pool);
    vision_run run;
    /* the F16 block's widest input: its activations' room (mm has no layers to size it) */
    if (!vision_run_init(&run, &mm, pool, NULL, N, quant_act_row_bytes(TENSOR_TYPE_F16, FF),
                         &err))
        fail_msg("%s", err.message);
    memcpy(run.x, in, sizeof b->x);
    run.padding = b->padding;
    for (size_t il = first; il < first + count; il++)
        vision_block_of(&run, &b->layers[il]);
    memcpy(out, run.x, sizeof b->x);
    vision_run_free(&run);
    threadpool_free(pool);
}

static void assert_close(const char *what, const float *got, const float *want, size_t n,
                         double tolerance)
{
    for (size_t i = 0; i < n; i++)
        if (!(fabs((double)got[i] - (double)want[i]) <= tolerance))
            fail_msg("%s: row %zu, channel %zu is %.9g, the CPU's %.9g", what, i / E, i % E,
                     (double)got[i], (double)want[i]);
}

/* x's n rows through blocks [first, first + count) on the device, padding as given. */
static bool run_padded(gpu_vision *v, float *x, uint32_t n, const uint8_t *padding,
                       uint32_t first, uint32_t count, corral_error *err)
{
    gpu_vision_rows rows = {.x = x, .n_rows = n, .padding = padding};
    return gpu_vision_run(v, &rows, first, count, err);
}

/* The blocks on the device (for padding rows or not), holding the memory gpu_vision_bytes
 * counts for them. */
static gpu_vision *device_blocks(const blocks *b, uint32_t max_rows, bool padding)
{
    const vision_layer *layers[2] = {&b->layers[0], &b->layers[1]};
    corral_error err = {0};
    uint64_t bytes, before = vk_device_allocated(dev);
    if (!gpu_vision_bytes(-1, &HP, layers, 2, max_rows, padding, &bytes, &err))
        fail_msg("%s", err.message);
    gpu_vision *v = gpu_vision_create(-1, &HP, layers, 2, max_rows, padding, &err);
    if (!v)
        fail_msg("%s", err.message);
    /* counted as vk_buffer_footprint counts a buffer: rounded up to the memory's alignment,
     * which a driver may not need, for each of the 46 buffers */
    uint64_t used = vk_device_allocated(dev) - before;
    if (!(used <= bytes && bytes - used < 46 * dev->memory_align))
        fail_msg("the blocks hold %llu bytes, counted as %llu", (unsigned long long)used,
                 (unsigned long long)bytes);
    return v;
}

static void test_blocks_match_the_cpu(void **state)
{
    (void)state;
    static blocks b;
    blocks_init(&b);
    static float first[N * E], second[N * E], got[N * E], whole[N * E];
    cpu_blocks(&b, b.x, 0, 1, first);
    cpu_blocks(&b, first, 1, 1, second);
    gpu_vision *v = device_blocks(&b, N + 5, true); /* more room than the run takes */
    corral_error err = {0};
    memcpy(got, b.x, sizeof got);
    if (!run_padded(v, got, N, b.padding, 0, 1, &err))
        fail_msg("%s", err.message);
    assert_close("the F32 block", got, first, N * E, F32_TOLERANCE);
    memcpy(got, first, sizeof got);
    if (!run_padded(v, got, N, b.padding, 1, 1, &err))
        fail_msg("%s", err.message);
    assert_close("the gated F16 block", got, second, N * E, F16_TOLERANCE);
    /* a range of blocks is its blocks one run each */
    memcpy(whole, b.x, sizeof whole);
    memcpy(got, b.x, sizeof got);
    if (!run_padded(v, whole, N, b.padding, 0, 2, &err) ||
        !run_padded(v, got, N, b.padding, 0, 1, &err) ||
        !run_padded(v, got, N, b.padding, 1, 1, &err))
        fail_msg("%s", err.message);
    assert_memory_equal(whole, got, sizeof got);
    gpu_vision_free(v);
    for (size_t i = 0; i < 2; i++)
        layer_free(&b.layers[i]);
}

/* The padding rows' mask is what the CPU's is: without it the padding rows come out apart. */
static void test_padding_rows_see_no_padding(void **state)
{
    (void)state;
    static blocks b;
    blocks_init(&b);
    static float masked[N * E], open[N * E];
    gpu_vision *v = device_blocks(&b, N, true);
    corral_error err = {0};
    memcpy(masked, b.x, sizeof masked);
    memcpy(open, b.x, sizeof open);
    if (!run_padded(v, masked, N, b.padding, 0, 1, &err) ||
        !run_padded(v, open, N, NULL, 0, 1, &err))
        fail_msg("%s", err.message);
    size_t apart = 0;
    for (size_t r = 0; r < N; r++) {
        bool same = memcmp(masked + r * E, open + r * E, E * sizeof *open) == 0;
        apart += !same;
        if (!b.padding[r] && !same)
            fail_msg("row %zu is not padding, and the mask changed it", r);
    }
    assert_int_not_equal(apart, 0);
    gpu_vision_free(v);
    for (size_t i = 0; i < 2; i++)
        layer_free(&b.layers[i]);
}

/*
 * Blocks made without padding rows (every tower's but mllama's) keep one sequence of keys and
 * values, so they take a run's keys and values (rows x E floats, each of the two caches) less
 * than blocks made for padding; they give the padded blocks' rows for a run without padding,
 * and refuse one with padding.
 */
static void test_blocks_without_padding_keep_one_sequence(void **state)
{
    (void)state;
    static blocks b;
    blocks_init(&b);
    enum { ROWS = 4096 }; /* rows x E floats: a MiB, a whole number of any alignment */
    const vision_layer *layers[2] = {&b.layers[0], &b.layers[1]};
    corral_error err = {0};
    uint64_t padded, plain;
    assert_true(gpu_vision_bytes(-1, &HP, layers, 2, ROWS, true, &padded, &err));
    assert_true(gpu_vision_bytes(-1, &HP, layers, 2, ROWS, false, &plain, &err));
    uint64_t one = ROWS * E * sizeof(float);
    assert_int_equal(padded - plain, 2 * (vk_buffer_footprint(dev, 2 * one) -
                                          vk_buffer_footprint(dev, one)));
    assert_int_equal(vk_buffer_footprint(dev, 2 * one) - vk_buffer_footprint(dev, one), one);

    gpu_vision *with = device_blocks(&b, N, true), *without = device_blocks(&b, N, false);
    static float want[N * E], got[N * E];
    memcpy(want, b.x, sizeof want);
    memcpy(got, b.x, sizeof got);
    if (!run_padded(with, want, N, NULL, 0, 2, &err) ||
        !run_padded(without, got, N, NULL, 0, 2, &err))
        fail_msg("%s", err.message);
    assert_memory_equal(want, got, sizeof got);
    assert_false(run_padded(without, got, N, b.padding, 0, 1, &err));
    assert_non_null(strstr(err.message, "padding rows"));
    gpu_vision_free(with);
    gpu_vision_free(without);
    for (size_t i = 0; i < 2; i++)
        layer_free(&b.layers[i]);
}

static void test_refuses_what_it_cannot_run(void **state)
{
    (void)state;
    static blocks b;
    blocks_init(&b);
    vision_hparams geglu = HP;
    geglu.ffn = VISION_FFN_GEGLU_QUICK;
    assert_false(gpu_vision_supports(&geglu, &b.layers[0]));
    vision_hparams swiglu = HP; /* and no gate */
    swiglu.ffn = VISION_FFN_SWIGLU;
    assert_false(gpu_vision_supports(&swiglu, &b.layers[0]));
    vision_layer head_norms = b.layers[0];
    head_norms.q_norm = b.layers[0].ln1;
    assert_false(gpu_vision_supports(&HP, &head_norms));
    assert_true(gpu_vision_supports(&HP, &b.layers[1]));
    gpu_vision *v = device_blocks(&b, N, true);
    static float x[N * E];
    corral_error err = {0};
    assert_false(run_padded(v, x, N + 1, NULL, 0, 1, &err));
    assert_non_null(strstr(err.message, "beyond"));
    assert_false(run_padded(v, x, N, NULL, 1, 2, &err));
    gpu_vision_free(v);
    for (size_t i = 0; i < 2; i++)
        layer_free(&b.layers[i]);
}

/* Qwen's and pixtral's blocks: RMS norms, a SwiGLU MLP, the rows' rotary angles on the
 * queries and keys (pairs (i, i + d/2), or adjacent), the first block attending within
 * windows of uneven sizes and the second fully (n_wa_pattern 2), against the CPU's; F32
 * arithmetic in another order, as test_blocks_match_the_cpu's, the rotation and the SiLU's
 * exponential each within a few roundings. */
static void check_rope_blocks(bool adjacent, bool windows)
{
    enum { ROWS = 24 };
    static const uint32_t window[ROWS] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                                          1, 1, 1, 1, 2, 2, 2, 2};
    vision_hparams hp = HP;
    hp.norm = VISION_RMS_NORM;
    hp.ffn = VISION_FFN_SWIGLU;
    hp.n_layer = 2;
    hp.n_wa_pattern = 2;
    vision_layer layers[2];
    for (size_t i = 0; i < 2; i++) {
        layer_init(&layers[i], TENSOR_TYPE_F32, i == 0, false);
        free((void *)layers[i].ln1_b.data), free((void *)layers[i].ln2_b.data);
        layers[i].ln1_b = layers[i].ln2_b = (weight){0};
        layers[i].gate = random_weight(TENSOR_TYPE_F32, E, FF, 2.0f / sqrtf((float)E), 0.0f);
        layers[i].gate_b = vector(FF, 0.1f, 0.0f);
    }
    uint32_t at[2 * ROWS];
    for (uint32_t r = 0; r < ROWS; r++)
        at[2 * r] = r / 6, at[2 * r + 1] = r % 6;
    static float cs[ROWS * (E / HEADS)], x[ROWS * E], want[ROWS * E], got[ROWS * E];
    vision_patch_angles(at, ROWS, E / HEADS, cs);
    for (size_t i = 0; i < ROWS * E; i++)
        x[i] = uniform();

    corral_mmproj mm = {0};
    mm.hp = hp;
    mm.layers = layers;
    mm.patch_embd = (weight){.type = TENSOR_TYPE_F32, .n_in = 16, .n_out = E};
    corral_error err = {0};
    threadpool *pool = threadpool_create(1, &err);
    assert_non_null(pool);
    vision_run run;
    if (!vision_run_init(&run, &mm, pool, NULL, ROWS, 0, &err))
        fail_msg("%s", err.message);
    memcpy(run.x, x, sizeof x);
    run.rope_cs = cs;
    run.rope_adjacent = adjacent;
    run.window = windows ? window : NULL;
    vision_block(&run, 0);
    vision_block(&run, 1);
    memcpy(want, run.x, sizeof want);
    vision_run_free(&run);
    threadpool_free(pool);

    const vision_layer *ptrs[2] = {&layers[0], &layers[1]};
    for (size_t i = 0; i < 2; i++)
        assert_true(gpu_vision_supports(&hp, ptrs[i]));
    gpu_vision *v = gpu_vision_create(-1, &hp, ptrs, 2, ROWS, false, &err);
    if (!v)
        fail_msg("%s", err.message);
    memcpy(got, x, sizeof got);
    gpu_vision_rows rows = {.x = got, .n_rows = ROWS, .rope_cs = cs, .rope_adjacent = adjacent,
                            .window = windows ? window : NULL};
    if (!gpu_vision_run(v, &rows, 0, 2, &err))
        fail_msg("%s", err.message);
    assert_close(adjacent ? "adjacent pairs" : "windows", got, want, ROWS * E, F32_TOLERANCE);
    gpu_vision_free(v);
    for (size_t i = 0; i < 2; i++) {
        layer_free(&layers[i]);
        free((void *)layers[i].gate.data), free((void *)layers[i].gate_b.data);
    }
}

static void test_rope_windows_swiglu_match_the_cpu(void **state)
{
    (void)state;
    check_rope_blocks(false, true);
    check_rope_blocks(true, false);
}

/* The n ints after "\nkey n " in text. */
static void ints_after(const char *text, const char *key, int32_t *out, size_t n)
{
    char header[64];
    snprintf(header, sizeof header, "\n%s %zu ", key, n);
    const char *p = strstr(text, header);
    if (!p)
        fail_msg("no '%s' of %zu in the reference", key, n);
    p += strlen(header);
    for (size_t i = 0; i < n; i++) {
        char *end;
        out[i] = (int32_t)strtol(p, &end, 10);
        assert_true(end != p);
        p = end;
    }
}

static void decode(corral_context *ctx, const int32_t *ids, size_t n)
{
    corral_batch batch = {.n_tokens = n, .tokens = ids};
    corral_error err;
    if (!corral_decode(ctx, &batch, &err))
        fail_msg("decode: %s", err.message);
}

/* The reference's prompt around image, then its 16 greedy ids (the text model on the CPU). */
static void check_greedy_ids(const corral_image_embd *image)
{
    char *ref = read_file(fixture("vision/mllama.wide.ref.txt"));
    corral_error err;
    corral_model *m = corral_model_load(fixture("vision/mllama.gguf"), &err);
    if (!m)
        fail_msg("%s", err.message);
    int32_t ids[7], greedy[16], image_at[1];
    ints_after(ref, "input_ids", ids, 7);
    ints_after(ref, "greedy_ids", greedy, 16);
    ints_after(ref, "image_at", image_at, 1);
    corral_context_params p;
    corral_context_params_init(&p);
    p.n_ctx = 64;
    p.n_batch = 16;
    p.n_threads = 1;
    p.images = true;
    corral_context *ctx = corral_context_create(m, &p, &err);
    if (!ctx)
        fail_msg("%s", err.message);
    size_t at = (size_t)image_at[0];
    decode(ctx, ids, at);
    if (!corral_decode_image(ctx, 0, image, &err))
        fail_msg("decode_image: %s", err.message);
    decode(ctx, ids + at + 1, 7 - at - 1);
    const float *logits = corral_get_logits(ctx, 7 - at - 2);
    for (size_t s = 0; s < 16; s++) {
        int32_t id = argmax(logits, corral_model_n_vocab(m));
        if (id != greedy[s])
            fail_msg("greedy id %zu is %d, the reference's %d", s, id, greedy[s]);
        decode(ctx, &id, 1);
        logits = corral_get_logits(ctx, 0);
    }
    corral_context_free(ctx);
    corral_model_free(m);
    free(ref);
}

/* The tiny tower's states with its blocks on the device, as the CPU's within the F32
 * arithmetic of its blocks (MLLAMA_TOLERANCE), and the reference's greedy ids from them. */
static void test_mllama_tower_on_the_device(void **state)
{
    (void)state;
    corral_error err;
    corral_mmproj *mm = corral_mmproj_load(fixture("vision/mllama.gguf"), &err);
    if (!mm)
        fail_msg("%s", err.message);
    size_t size;
    float *pixels = file_fixture_read(fixture("vision/mllama.wide.pixels.f32"), &size);
    assert_int_equal(size, (size_t)16 * 8 * 3 * sizeof(float));
    corral_image_embd cpu, gpu;
    if (!corral_mmproj_encode(mm, pixels, 16, 8, 1, &cpu, &err))
        fail_msg("%s", err.message);
    uint64_t bytes, before = vk_device_allocated(dev);
    if (!corral_mmproj_gpu_bytes(mm, -1, &bytes, &err) || !corral_mmproj_use_gpu(mm, -1, &err))
        fail_msg("%s", err.message);
    uint64_t used = vk_device_allocated(dev) - before;
    assert_true(used > 0 && used <= bytes);
    if (!corral_mmproj_encode(mm, pixels, 16, 8, 1, &gpu, &err))
        fail_msg("%s", err.message);
    assert_int_equal(gpu.n_embd, cpu.n_embd);
    assert_int_equal(gpu.n_attended, cpu.n_attended);
    float diff = max_abs_diff(gpu.data, cpu.data, cpu.n_embd);
    /* states equal to the last bit would be the CPU's own: the device sums in its own order */
    if (!(diff > 0.0f && diff <= MLLAMA_TOLERANCE))
        fail_msg("the device's states differ from the CPU's by %g", (double)diff);
    check_greedy_ids(&gpu);
    corral_image_embd_free(&cpu);
    corral_image_embd_free(&gpu);
    free(pixels);
    corral_mmproj_free(mm);
}

/* nx x ny pixels of a smooth pattern in [-1, 1], the range the kinds' normalisation makes. */
/* The towers' blocks sum in the device's order, not the CPU's: last-bit differences, which
 * matter through the GELU's fp16 table (the device reads the CPU's), where an input on a
 * half's rounding step may take the neighbouring entry, a step of up to ~1e-3 that the next
 * products carry, as between two CPU levels (test_vision_lfm2). Every value within that, the
 * mean within 1e-5; a wrong activation or a missed step is far beyond either. */
#define TOWER_TOLERANCE 1e-3f
#define TOWER_MEAN_TOLERANCE 1e-5

static float *pattern(uint32_t nx, uint32_t ny)
{
    float *p = malloc((size_t)nx * ny * 3 * sizeof *p);
    assert_non_null(p);
    for (uint32_t y = 0; y < ny; y++)
        for (uint32_t x = 0; x < nx; x++)
            for (uint32_t c = 0; c < 3; c++)
                p[((size_t)y * nx + x) * 3 + c] =
                    sinf(0.05f * (float)(x * (c + 1)) + 0.07f * (float)y + (float)c);
    return p;
}

/* The projector at path's embeddings of pixels (nx x ny) with its blocks on the CPU into cpu,
 * then on the device (holding at most the memory corral_mmproj_gpu_bytes counts) into gpu. */
static void encode_both(const char *path, const float *pixels, uint32_t nx, uint32_t ny,
                        corral_image_embd *cpu, corral_image_embd *gpu)
{
    corral_error err;
    corral_mmproj *mm = corral_mmproj_load(path, &err);
    if (!mm)
        fail_msg("%s", err.message);
    if (!corral_mmproj_encode(mm, pixels, nx, ny, 1, cpu, &err))
        fail_msg("%s", err.message);
    uint64_t bytes, before = vk_device_allocated(dev);
    if (!corral_mmproj_gpu_bytes(mm, -1, &bytes, &err) || !corral_mmproj_use_gpu(mm, -1, &err))
        fail_msg("%s: %s", path, err.message);
    uint64_t used = vk_device_allocated(dev) - before;
    assert_true(used > 0 && used <= bytes);
    if (!corral_mmproj_encode(mm, pixels, nx, ny, 1, gpu, &err))
        fail_msg("%s", err.message);
    assert_int_equal(gpu->n_tokens, cpu->n_tokens);
    assert_int_equal(gpu->n_embd, cpu->n_embd);
    corral_mmproj_free(mm);
}

/* The tower in file on pixels (nx x ny) on the device: the CPU's embeddings within the
 * tolerances, but (unless exact) not all of them to the last bit (the device's own sums).
 * gpu: its embeddings, or NULL. */
static void check_tower_on(const char *file, const float *pixels, uint32_t nx, uint32_t ny,
                           bool exact, corral_image_embd *gpu_out)
{
    corral_image_embd cpu, gpu;
    encode_both(fixture(file), pixels, nx, ny, &cpu, &gpu);
    size_t count = cpu.n_tokens * cpu.n_embd;
    float diff = max_abs_diff(gpu.data, cpu.data, count);
    double mean = 0.0;
    for (size_t i = 0; i < count; i++)
        mean += fabs((double)gpu.data[i] - (double)cpu.data[i]) / (double)count;
    printf("%s %ux%u: max %g, mean %g\n", file, nx, ny, (double)diff, mean);
    if (!((exact ? diff == 0.0f : diff > 0.0f) && diff <= TOWER_TOLERANCE &&
          mean <= TOWER_MEAN_TOLERANCE))
        fail_msg("%s: the device's embeddings differ from the CPU's by %g (mean %g)", file,
                 (double)diff, mean);
    corral_image_embd_free(&cpu);
    if (gpu_out)
        *gpu_out = gpu;
    else
        corral_image_embd_free(&gpu);
}

/* The same on a pattern of the tower's square, or for a kind that smart-resizes of side x
 * side tokens. */
static void check_tower(const char *file, uint32_t side, bool exact)
{
    corral_error err;
    corral_mmproj *mm = corral_mmproj_load(fixture(file), &err);
    if (!mm)
        fail_msg("%s", err.message);
    corral_image_params params;
    corral_mmproj_image_params(mm, &params);
    corral_mmproj_free(mm);
    uint32_t nx = params.resize == CORRAL_IMAGE_SMART ? side * params.align : params.image_size;
    float *pixels = pattern(nx, nx);
    check_tower_on(file, pixels, nx, nx, exact, NULL);
    free(pixels);
}

/* model's tower on the reference's pixels of image (its ref.txt's size) on the device, and
 * the reference's 16 greedy ids (and last logits, within test_vision's 1e-3) from the
 * device's embeddings; before and after: the prompt's text around the image. */
static void check_reference(const char *model, const char *image, const char *before,
                            const char *after)
{
    char name[128], mm_path[2048], logits[2048];
    snprintf(name, sizeof name, "%s.%s.ref.txt", model, image);
    char *ref = file_fixture_read(vision_fixture(name), NULL);
    int32_t dims[2];
    assert_int_equal(ints_of(line_of(ref, "pixels 0 nx "), dims, 1), 1);
    assert_int_equal(ints_of(strstr(line_of(ref, "pixels 0 nx "), "ny ") + 3, dims + 1, 1), 1);
    snprintf(name, sizeof name, "%s.%s.pixels.f32", model, image);
    size_t size;
    float *pixels = file_fixture_read(vision_fixture(name), &size);
    assert_int_equal(size, (size_t)dims[0] * dims[1] * 3 * sizeof(float));
    snprintf(name, sizeof name, "vision/%s-mmproj.gguf", model);
    snprintf(mm_path, sizeof mm_path, "%s", name);
    corral_image_embd gpu;
    check_tower_on(mm_path, pixels, (uint32_t)dims[0], (uint32_t)dims[1], false, &gpu);
    snprintf(name, sizeof name, "%s.%s.logits.txt", model, image);
    snprintf(logits, sizeof logits, "%s", vision_fixture(name));
    corral_error err;
    corral_mmproj *mm = corral_mmproj_load(fixture(mm_path), &err);
    if (!mm)
        fail_msg("%s", err.message);
    snprintf(name, sizeof name, "%s-text.gguf", model);
    corral_model *m = vision_load_text(vision_fixture(name), mm);
    vision_prompt prompt;
    vision_prompt_ids(&prompt, m, mm, before, after, ref, 2);
    corral_context_params params;
    vision_context_params(&params, 128);
    snprintf(name, sizeof name, "%s %s on the device", model, image);
    vision_check_text(m, &params, &prompt, &gpu, ref, logits, 1e-3f, 16, name);
    corral_model_free(m);
    corral_mmproj_free(mm);
    corral_image_embd_free(&gpu);
    free(ref);
    free(pixels);
}

/* gemma3's SigLIP on the reference's pixels. */
static void test_gemma3_tower_on_the_device(void **state)
{
    (void)state;
    check_reference("gemma3", "square", "", "Describe the picture.");
}

static void test_llava_tower_on_the_device(void **state)
{
    (void)state;
    check_tower("vision/llava15-mmproj.gguf", 0, false);
}

/* minicpm-v's square on the device; a part of more patches than the device holds rows for
 * (a thin one: 32 x 3 patches, beyond 9 x 9) stays on the CPU, to the bit. */
static void test_minicpmv_tower_on_the_device(void **state)
{
    (void)state;
    check_tower("vision/minicpmv-mmproj.gguf", 0, false);
    float *pixels = pattern(128, 12);
    corral_image_embd cpu, gpu;
    encode_both(fixture("vision/minicpmv-mmproj.gguf"), pixels, 128, 12, &cpu, &gpu);
    assert_memory_equal(gpu.data, cpu.data, cpu.n_tokens * cpu.n_embd * sizeof *cpu.data);
    corral_image_embd_free(&cpu);
    corral_image_embd_free(&gpu);
    free(pixels);
}

static void test_lfm2_tower_on_the_device(void **state)
{
    (void)state;
    check_tower("vision/lfm2v-mmproj.gguf", 8, false); /* its fewest: 64 tokens */
}

/* Qwen's towers (RMS norms, SwiGLU and windows in 2.5-VL, with the reference's greedy ids;
 * deepstack taps between blocks in 3-VL and qwen35), pixtral's (adjacent pairs, RMS,
 * SwiGLU), glm4v's (per-head query and key norms), deepseek-ocr's CLIP (over SAM's states,
 * quick GELU) and llama4's (a class row among the turned ones). */
static void test_rope_towers_on_the_device(void **state)
{
    (void)state;
    /* the reference's wide image: 6 x 3 tokens, two windows of 4 and 2 tokens across */
    check_reference("qwen25vl", "wide", "<|im_start|>user\n",
                    "Describe.<|im_end|>\n<|im_start|>assistant\n");
    /* its fused attn_qkv's bias bound as three vectors of E floats each: what the device
     * uploads of each (row_bytes x n_out) stays within the tensor */
    corral_error err;
    corral_mmproj *mm = corral_mmproj_load(fixture("vision/qwen3vl-mmproj.gguf"), &err);
    if (!mm)
        fail_msg("%s", err.message);
    const vision_layer *l = &mm->layers[0];
    assert_non_null(l->bv.data);
    assert_int_equal(l->bv.row_bytes * l->bv.n_out, mm->hp.n_embd * sizeof(float));
    assert_ptr_equal((const float *)l->bv.data, (const float *)l->bq.data + 2 * mm->hp.n_embd);
    corral_mmproj_free(mm);
    check_tower("vision/qwen3vl-mmproj.gguf", 8, false); /* enough values for the mean */
    check_tower("vision/qwen35v-mmproj.gguf", 4, false);
    check_tower("vision/mistral3-mmproj.gguf", 4, false);
    check_tower("vision/glm4v-mmproj.gguf", 4, false);
    check_tower("vision/deepseekocr-mmproj.gguf", 0, false);
    /* its 17 rows of 32 sum in the CPU's order on lavapipe: equal to the bit */
    check_tower("vision/llama4-mmproj.gguf", 0, true);
}

/* gemma4v's tower: clipped linears, per-head query, key and value norms, each half of a head
 * turning on its own, unscaled scores, post norms, an output scale and a quick GeGLU MLP. */
static void test_gemma4v_tower_on_the_device(void **state)
{
    (void)state;
    check_tower("vision/gemma4v-mmproj.gguf", 7, false); /* its fewest: 40 tokens */
}

int main(void)
{
    corral_error err = {0};
    dev = vk_device_open(-1, &err);
    if (!dev) {
        printf("skipped: %s\n", err.message);
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_blocks_match_the_cpu),
        cmocka_unit_test(test_padding_rows_see_no_padding),
        cmocka_unit_test(test_blocks_without_padding_keep_one_sequence),
        cmocka_unit_test(test_refuses_what_it_cannot_run),
        cmocka_unit_test(test_rope_windows_swiglu_match_the_cpu),
        cmocka_unit_test(test_mllama_tower_on_the_device),
        cmocka_unit_test(test_gemma3_tower_on_the_device),
        cmocka_unit_test(test_llava_tower_on_the_device),
        cmocka_unit_test(test_minicpmv_tower_on_the_device),
        cmocka_unit_test(test_lfm2_tower_on_the_device),
        cmocka_unit_test(test_rope_towers_on_the_device),
        cmocka_unit_test(test_gemma4v_tower_on_the_device),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    vk_device_close();
    return failed;
}

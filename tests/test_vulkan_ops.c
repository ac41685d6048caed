/*
 * The Vulkan backend's operations against the CPU's, as ggml's backend-ops test does: each
 * on random inputs of awkward sizes (odd row counts, rows of an odd number of blocks, more
 * rows than one dispatch dimension holds), on the device vk_device_open chooses. Where the
 * device has integer dot products, the quantized products also run without them, and the
 * two must agree bit for bit. Run under Mesa's lavapipe (CORRAL_VULKAN_ALLOW_CPU=1, set by
 * ctest); exits 77 (skipped) on a machine without any Vulkan device.
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

#include "blocks.h"
#include "delta_net.h"
#include "forward.h"
#include "mamba2.h"
#include "mmproj.h"
#include "moe.h"
#include "quant.h"
#include "vk_ops.h"
#include "vk_spirv.h"

static vk_device *dev;
static uint32_t rng = 12345;

static float uniform(void) /* -1..1 */
{
    rng = rng * 1664525u + 1013904223u;
    return (float)(rng >> 8) / (float)(1u << 23) - 1.0f;
}

static float *random_floats(size_t n)
{
    float *x = malloc(n * sizeof *x);
    assert_non_null(x);
    for (size_t i = 0; i < n; i++)
        x[i] = uniform();
    return x;
}

/* The lattice IQ types (none has a quantizer), most used first. */
static const uint32_t lattice_types[] = {TENSOR_TYPE_IQ2_XXS, TENSOR_TYPE_IQ3_XXS,
                                         TENSOR_TYPE_IQ1_S,   TENSOR_TYPE_IQ2_XS,
                                         TENSOR_TYPE_IQ3_S,   TENSOR_TYPE_IQ2_S,
                                         TENSOR_TYPE_IQ1_M};
enum { LATTICE_TYPES = sizeof lattice_types / sizeof lattice_types[0] };

/* The largest value of a block of `type` without a quantizer in units of its f16 d: the
 * largest code's value times the largest (sub-)block scale, times the type's fixed factor. */
static float largest_value(uint32_t type)
{
    switch (type) {
    case TENSOR_TYPE_IQ4_NL: return 127.0f;
    case TENSOR_TYPE_IQ4_XS: return 127.0f * 32.0f;
    case TENSOR_TYPE_IQ2_XXS: case TENSOR_TYPE_IQ2_XS: case TENSOR_TYPE_IQ2_S:
        return 43.0f * 31.0f / 8.0f;
    case TENSOR_TYPE_IQ3_XXS: return 62.0f * 31.0f / 4.0f;
    case TENSOR_TYPE_IQ3_S: return 15.0f * 31.0f;
    case TENSOR_TYPE_IQ1_S: case TENSOR_TYPE_IQ1_M: return 1.125f * 15.0f;
    default: fail_msg("type %u has a quantizer", type); return 0.0f;
    }
}

/* `rows` rows of n weights of `type` into w: wf's rows quantized as ggml does, or, for a type
 * without a quantizer (IQ4_NL, IQ4_XS, the lattice types), random blocks: any bytes make a
 * valid block once its f16 d is a finite number, here one of the size that brings the values
 * near wf's (IQ1_M keeps d in the top nibbles of its four scale words, from byte 48). */
static void weight_rows(uint32_t type, const float *wf, uint8_t *w, size_t n, size_t rows)
{
    const quant_ops *ops = quant_ops_get(type, CPU_LEVEL_SCALAR);
    assert_non_null(ops);
    size_t row_bytes;
    assert_true(tensor_type_row_bytes(type, n, &row_bytes));
    if (ops->quantize) {
        for (size_t r = 0; r < rows; r++)
            ops->quantize(wf + r * n, w + r * row_bytes, n);
        return;
    }
    const tensor_type_info *info = tensor_type_get(type);
    float unit = 1.0f / largest_value(type);
    for (size_t b = 0; b < rows * row_bytes / info->block_bytes; b++) {
        uint8_t *block = w + b * info->block_bytes;
        for (size_t j = 0; j < info->block_bytes; j++)
            block[j] = (uint8_t)((uniform() + 1.0f) * 128.0f);
        uint16_t d = quant_f32_to_f16(unit * (0.5f + 0.5f * uniform()));
        if (type == TENSOR_TYPE_IQ1_M) {
            for (int k = 0; k < 4; k++)
                block[48 + 2 * k + 1] = (uint8_t)((block[48 + 2 * k + 1] & 0x0f) |
                                                  ((d >> (4 * k)) & 0xf) << 4);
        } else {
            memcpy(block, &d, sizeof d);
        }
    }
}

/* A device-local buffer holding bytes (or zeros when data is NULL). */
static vk_buffer device_buffer(const void *data, size_t bytes)
{
    vk_buffer b;
    corral_error err = {0};
    if (!vk_buffer_create(dev, bytes, false, &b, &err))
        fail_msg("%s", err.message);
    void *zeros = NULL;
    if (!data)
        data = zeros = calloc(1, bytes ? bytes : 1);
    if (!vk_buffer_write(dev, &b, 0, data, bytes, &err))
        fail_msg("%s", err.message);
    free(zeros);
    return b;
}

static void read_back(vk_buffer *b, void *out, size_t bytes)
{
    corral_error err = {0};
    if (!vk_buffer_read(dev, b, 0, out, bytes, &err))
        fail_msg("%s", err.message);
}

static vk_commands begin(void)
{
    vk_commands c;
    corral_error err = {0};
    if (!vk_commands_create(dev, &c, &err))
        fail_msg("%s", err.message);
    vk_commands_begin(&c);
    return c;
}

static void submit(vk_commands *c)
{
    corral_error err = {0};
    if (!vk_commands_submit(c, &err))
        fail_msg("%s", err.message);
    vk_commands_free(c);
}

/* got within tol * (1 + |want|) of want, element by element. */
static void assert_close(const char *what, const float *got, const float *want, size_t n,
                         double tol)
{
    for (size_t i = 0; i < n; i++) {
        double err = fabs((double)got[i] - (double)want[i]);
        if (!(err <= tol * (1.0 + fabs((double)want[i]))))
            fail_msg("%s: element %zu is %.9g, the CPU's %.9g", what, i, (double)got[i],
                     (double)want[i]);
    }
}

/* ---- discovery and choice ---- */

/* A discrete GPU before an integrated one before a CPU implementation, unusable ones never,
 * the first of equals. */
static void test_choice_ranks_device_types(void **state)
{
    (void)state;
    vk_device_info infos[4] = {
        {.index = 0, .type = VK_PHYSICAL_DEVICE_TYPE_CPU, .usable = true},
        {.index = 1, .type = VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU, .usable = true},
        {.index = 2, .type = VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU, .usable = true},
        {.index = 3, .type = VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU, .usable = true},
    };
    assert_int_equal(vk_choose(infos, 4), 2);
    infos[2].usable = infos[3].usable = false;
    assert_int_equal(vk_choose(infos, 4), 1);
    infos[1].usable = false;
    assert_int_equal(vk_choose(infos, 4), 0);
    infos[0].usable = false;
    assert_int_equal(vk_choose(infos, 4), -1);
}

/* The machine's devices as the environment shows them: CPU implementations only when
 * allowed, and CORRAL_GPU_DEVICES (or GGML_VK_VISIBLE_DEVICES) hiding those not listed. */
static void test_discovery_follows_the_environment(void **state)
{
    (void)state;
    vk_device_info infos[VK_MAX_DEVICES];
    size_t n;
    corral_error err = {{0}};
    assert_true(vk_enumerate(infos, &n, &err));
    assert_true(n >= 1);
    size_t cpu = n;
    for (size_t i = 0; i < n && cpu == n; i++)
        if (infos[i].type == VK_PHYSICAL_DEVICE_TYPE_CPU)
            cpu = i;
    if (cpu == n)
        skip(); /* no CPU implementation here to hide and allow */
    char index[16];
    snprintf(index, sizeof index, "%u", infos[cpu].index);
    unsetenv("CORRAL_VULKAN_ALLOW_CPU");
    assert_true(vk_enumerate(infos, &n, &err));
    assert_false(infos[cpu].usable);
    setenv("CORRAL_VULKAN_ALLOW_CPU", "1", 1);
    setenv("GGML_VK_VISIBLE_DEVICES", "63", 1);
    assert_true(vk_enumerate(infos, &n, &err));
    assert_false(infos[cpu].visible);
    setenv("CORRAL_GPU_DEVICES", index, 1); /* ours first */
    assert_true(vk_enumerate(infos, &n, &err));
    assert_true(infos[cpu].visible && infos[cpu].usable);
    unsetenv("CORRAL_GPU_DEVICES");
    unsetenv("GGML_VK_VISIBLE_DEVICES");
}

/* ---- matrix products ---- */

/* The quantized products' variant: integer dot products (on) or plain multiplies. */
static void use_int_dot(bool on)
{
    corral_error err = {{0}};
    if (!vk_device_use_int_dot(dev, on, &err))
        fail_msg("%s", err.message);
}

/* The device opens with integer dot products where it has them, unless
 * CORRAL_VULKAN_NO_INT_DOT=1 (then it still switches to them on request). */
static void test_int_dot_follows_the_environment(void **state)
{
    (void)state;
    if (!dev->has_int_dot)
        skip(); /* nothing to choose between */
    const char *was = getenv("CORRAL_VULKAN_NO_INT_DOT");
    bool refused = was && strcmp(was, "1") == 0;
    assert_int_equal(dev->int_dot, !refused);
    corral_error err = {{0}};
    vk_device_close();
    setenv("CORRAL_VULKAN_NO_INT_DOT", refused ? "0" : "1", 1);
    dev = vk_device_open(-1, &err);
    assert_non_null(dev);
    assert_int_equal(dev->int_dot, refused);
    use_int_dot(!refused);
    assert_int_equal(dev->int_dot, !refused);
    if (was)
        setenv("CORRAL_VULKAN_NO_INT_DOT", was, 1);
    else
        unsetenv("CORRAL_VULKAN_NO_INT_DOT");
}

/* y = W x on both sides for a W of `type` quantized from random floats; the same numbers
 * are multiplied (the activation partner's rounding included), so only the order of the
 * sums differs. */
static void check_matmul(uint32_t type, size_t n_in, size_t n_out, size_t n_tokens)
{
    const quant_ops *ops = quant_ops_get(type, CPU_LEVEL_SCALAR);
    assert_non_null(ops);
    size_t row_bytes;
    assert_true(tensor_type_row_bytes(type, n_in, &row_bytes));
    float *wf = random_floats(n_in * n_out), *x = random_floats(n_in * n_tokens);
    uint8_t *w = malloc(row_bytes * n_out);
    weight_rows(type, wf, w, n_in, n_out);
    uint8_t *act = malloc(quant_act_row_bytes(type, n_in) * n_tokens);
    float *want = malloc(n_out * n_tokens * sizeof *want), *got = malloc(n_out * n_tokens * sizeof *got);
    quant_quantize_activations(ops, x, n_in, n_tokens, act);
    quant_matmul_rows(ops, w, n_in, 0, n_out, act, n_tokens, want, n_out);

    vk_buffer bw = device_buffer(w, row_bytes * n_out), bx = device_buffer(x, n_in * n_tokens * 4);
    vk_buffer bq = device_buffer(NULL, vk_matmul_quants_bytes(n_in * n_tokens));
    vk_buffer bs = device_buffer(NULL, vk_matmul_scales_bytes(n_in * n_tokens));
    vk_buffer by = device_buffer(NULL, n_out * n_tokens * 4);
    /* the device's variant of the product, then, where it has integer dot products, the
     * other one: the same integer sums scaled alike, so the same bits */
    bool first = dev->int_dot;
    float *other = malloc(n_out * n_tokens * sizeof *other);
    for (int way = 0; way < (dev->has_int_dot ? 2 : 1); way++) {
        use_int_dot(way == 0 ? first : !first);
        vk_commands c = begin();
        vk_op_matmul(&c, type, vk_whole(&bw), row_bytes, vk_whole(&bx), vk_whole(&bq),
                     vk_whole(&bs), vk_whole(&by), (uint32_t)n_in, (uint32_t)n_out,
                     (uint32_t)n_tokens);
        submit(&c);
        read_back(&by, way == 0 ? got : other, n_out * n_tokens * 4);
    }
    use_int_dot(first);
    char what[96];
    snprintf(what, sizeof what, "matmul %s %zux%zu, %zu tokens", tensor_type_name(type), n_out,
             n_in, n_tokens);
    assert_close(what, got, want, n_out * n_tokens, 1e-5);
    if (dev->has_int_dot)
        for (size_t i = 0; i < n_out * n_tokens; i++)
            if (memcmp(&got[i], &other[i], sizeof got[i]) != 0)
                fail_msg("%s: element %zu is %.9g with integer dot products, %.9g without",
                         what, i, (double)(first ? got[i] : other[i]),
                         (double)(first ? other[i] : got[i]));
    vk_buffer *bufs[] = {&bw, &bx, &bq, &bs, &by};
    for (size_t i = 0; i < 5; i++)
        vk_buffer_free(dev, bufs[i]);
    free(wf), free(x), free(w), free(act), free(want), free(got), free(other);
}

static void test_matmul(void **state)
{
    (void)state;
    const uint32_t types[] = {TENSOR_TYPE_F32, TENSOR_TYPE_F16, TENSOR_TYPE_BF16,
                              TENSOR_TYPE_Q4_0, TENSOR_TYPE_Q5_0, TENSOR_TYPE_Q8_0};
    for (size_t i = 0; i < 6; i++) {
        check_matmul(types[i], 160, 67, 1); /* matrix x vector: 5 blocks a row, odd rows */
        check_matmul(types[i], 96, 33, 7);  /* matrix x matrix: 3 blocks, 7 tokens */
        check_matmul(types[i], 2080, 5, 2); /* rows longer than the group's 64 threads */
    }
    /* the K-quants' super-blocks of 256: odd counts of them, and more than 64 a row */
    const uint32_t k_types[] = {TENSOR_TYPE_Q4_K, TENSOR_TYPE_Q5_K, TENSOR_TYPE_Q6_K};
    for (size_t i = 0; i < 3; i++) {
        check_matmul(k_types[i], 768, 17, 1);
        check_matmul(k_types[i], 1280, 9, 7);
        check_matmul(k_types[i], 256 * 65, 3, 2);
    }
}

/* What each shader writes, as its SPIR-V declares it: the bindings the recording orders
 * dispatches by (vk_spirv.h). */
static void test_written_bindings_are_the_shaders(void **state)
{
    (void)state;
    assert_int_equal(dev->written[VK_PIPE_RMSNORM], 1u << 4);
    assert_int_equal(dev->written[VK_PIPE_BINARY], 1u << 0);
    assert_int_equal(dev->written[VK_PIPE_ROPE], 1u << 1);
    assert_int_equal(dev->written[VK_PIPE_QUANTIZE_Q8_0], 1u << 1 | 1u << 2);
    assert_int_equal(dev->written[VK_PIPE_MATMUL_Q4_K], 1u << 4);
    assert_int_equal(dev->written[VK_PIPE_MOE_ROUTE], 1u << 0 | 1u << 2 | 1u << 3);
    assert_int_equal(dev->written[VK_PIPE_DELTA_RULE], 1u << 4 | 1u << 5);
    assert_int_equal(dev->written[VK_PIPE_ATTENTION], 1u << 4);
    assert_int_equal(dev->written[VK_PIPE_ALTUP], 1u << 4);
    unsigned char junk[24] = {1, 2, 3};
    vk_spirv_buffers buffers;
    assert_false(vk_spirv_read_buffers(junk, sizeof junk, &buffers));
}

/* The grids' set (VK_GRIDS_SET) belongs to the pipelines whose shaders read the lattice IQ
 * types' grids, as their SPIR-V declares it: the lattice types' products and get_rows, which
 * dequantizes any type. Every other pipeline binds set 0 alone. */
static void test_grids_only_where_read(void **state)
{
    (void)state;
    const enum vk_pipeline readers[] = {
        VK_PIPE_MATMUL_IQ2_XXS, VK_PIPE_MATMUL_IQ2_XS, VK_PIPE_MATMUL_IQ2_S,
        VK_PIPE_MATMUL_IQ3_XXS, VK_PIPE_MATMUL_IQ3_S, VK_PIPE_MATMUL_IQ1_S,
        VK_PIPE_MATMUL_IQ1_M, VK_PIPE_MATMUL_TILED_IQ2_XXS, VK_PIPE_MATMUL_TILED_IQ2_XS,
        VK_PIPE_MATMUL_TILED_IQ2_S, VK_PIPE_MATMUL_TILED_IQ3_XXS, VK_PIPE_MATMUL_TILED_IQ3_S,
        VK_PIPE_MATMUL_TILED_IQ1_S, VK_PIPE_MATMUL_TILED_IQ1_M, VK_PIPE_GET_ROWS};
    size_t n_readers = sizeof readers / sizeof readers[0], seen = 0;
    for (size_t i = 0; i < n_readers; i++)
        assert_true(dev->reads_grids[readers[i]]);
    for (int p = 0; p < VK_PIPE_COUNT; p++)
        seen += dev->reads_grids[p];
    assert_int_equal(seen, n_readers);
    assert_false(dev->reads_grids[VK_PIPE_MATMUL_Q4_K]);
    assert_false(dev->reads_grids[VK_PIPE_MATMUL_IQ4_XS]);
    assert_false(dev->reads_grids[VK_PIPE_RMSNORM]);
}

/* Three products of one input (q, k and v): one quantization and no barrier between them;
 * a product of one's output waits behind a barrier; a product of another input into the
 * shared quants waits for the three to have read them. Each output is the bits of the same
 * product recorded alone. */
static void test_products_of_one_input_run_together(void **state)
{
    (void)state;
    uint32_t type = TENSOR_TYPE_Q4_0, n = 64;
    const quant_ops *ops = quant_ops_get(type, CPU_LEVEL_SCALAR);
    size_t row_bytes;
    assert_true(tensor_type_row_bytes(type, n, &row_bytes));
    float *wf = random_floats(n * n), *x = random_floats(n);
    uint8_t *w = malloc(row_bytes * n);
    for (size_t r = 0; r < n; r++)
        ops->quantize(wf + r * n, w + r * row_bytes, n);
    vk_buffer bw = device_buffer(w, row_bytes * n), bx = device_buffer(x, n * 4);
    vk_buffer bq = device_buffer(NULL, vk_matmul_quants_bytes(n));
    vk_buffer bs = device_buffer(NULL, vk_matmul_scales_bytes(n));
    vk_buffer by[4];
    for (int i = 0; i < 4; i++)
        by[i] = device_buffer(NULL, n * 4);
    vk_commands c = begin();
    for (int i = 0; i < 3; i++)
        vk_op_matmul(&c, type, vk_whole(&bw), row_bytes, vk_whole(&bx), vk_whole(&bq),
                     vk_whole(&bs), vk_whole(&by[i]), n, n, 1);
    assert_int_equal(c.rec.dispatches, 4);
    assert_int_equal(c.rec.barriers, 1); /* the products wait for the quantization */
    vk_op_matmul(&c, type, vk_whole(&bw), row_bytes, vk_whole(&by[0]), vk_whole(&bq),
                 vk_whole(&bs), vk_whole(&by[3]), n, n, 1);
    /* its quantization reads by[0] and overwrites what the three read; its product reads
     * the quantization */
    assert_int_equal(c.rec.dispatches, 6);
    assert_int_equal(c.rec.barriers, 3);
    submit(&c);
    float got[4][64], alone[64];
    for (int i = 0; i < 4; i++)
        read_back(&by[i], got[i], n * 4);
    assert_memory_equal(got[0], got[1], n * 4);
    assert_memory_equal(got[0], got[2], n * 4);
    c = begin();
    vk_op_matmul(&c, type, vk_whole(&bw), row_bytes, vk_whole(&by[0]), vk_whole(&bq),
                 vk_whole(&bs), vk_whole(&by[1]), n, n, 1);
    submit(&c);
    read_back(&by[1], alone, n * 4);
    assert_memory_equal(got[3], alone, n * 4);
    vk_buffer *bufs[] = {&bw, &bx, &bq, &bs, &by[0], &by[1], &by[2], &by[3]};
    for (size_t i = 0; i < 8; i++)
        vk_buffer_free(dev, bufs[i]);
    free(wf), free(x), free(w);
}

/* A recording ends with a barrier after its last dispatches, and none where no dispatch came
 * since the last. */
static void test_recording_ends_with_a_barrier(void **state)
{
    (void)state;
    float ones[32];
    for (int i = 0; i < 32; i++)
        ones[i] = 1.0f;
    vk_buffer bx = device_buffer(ones, sizeof ones), by = device_buffer(ones, sizeof ones);
    vk_buffer bz = device_buffer(ones, sizeof ones);
    vk_commands c = begin();
    vk_op_binary(&c, VK_ADD, vk_whole(&bx), vk_whole(&by), 32, 32, 0.0f);
    vk_op_binary(&c, VK_ADD, vk_whole(&bz), vk_whole(&by), 32, 32, 0.0f); /* both read y */
    assert_int_equal(c.rec.barriers, 0);
    vk_op_binary(&c, VK_ADD, vk_whole(&bx), vk_whole(&bz), 32, 32, 0.0f); /* reads z */
    assert_int_equal(c.rec.barriers, 1);
    corral_error err = {0};
    if (!vk_commands_end(&c, &err))
        fail_msg("%s", err.message);
    assert_int_equal(c.rec.barriers, 2);
    if (!vk_commands_submit_recorded(&c, &c.cmd, 1, &err))
        fail_msg("%s", err.message);
    vk_commands_free(&c);
    float got[32];
    read_back(&bx, got, sizeof got);
    for (int i = 0; i < 32; i++)
        assert_true(got[i] == 4.0f); /* 1 + 1, then + (1 + 1) */
    vk_buffer_free(dev, &bx);
    vk_buffer_free(dev, &by);
    vk_buffer_free(dev, &bz);
}

/* The same shapes for the types of Q8_1 activations (Q4_1, Q5_1), of 17-byte blocks
 * (MXFP4) and of a table of values (IQ4_NL), and the super-blocks of Q2_K, Q3_K and IQ4_XS. */
static void test_matmul_more_types(void **state)
{
    (void)state;
    const uint32_t types[] = {TENSOR_TYPE_Q4_1, TENSOR_TYPE_Q5_1, TENSOR_TYPE_MXFP4,
                              TENSOR_TYPE_IQ4_NL};
    for (size_t i = 0; i < 4; i++) {
        check_matmul(types[i], 160, 67, 1);
        check_matmul(types[i], 96, 33, 7);
        check_matmul(types[i], 2080, 5, 2);
    }
    const uint32_t k_types[] = {TENSOR_TYPE_Q2_K, TENSOR_TYPE_Q3_K, TENSOR_TYPE_IQ4_XS};
    for (size_t i = 0; i < 3; i++) {
        check_matmul(k_types[i], 768, 17, 1);
        check_matmul(k_types[i], 1280, 9, 7);
        check_matmul(k_types[i], 256 * 65, 3, 2);
    }
}

/* The activations' Q8_0 blocks (or Q8_1 with sums) bit for bit as the CPU writes them,
 * over values of every magnitude and halves that sit on a rounding boundary
 * (x * 127 / amax = k + 0.5). */
static void check_quantize_q8(bool sums)
{
    enum { BLOCKS = 4099, N = BLOCKS * 32 };
    float *x = random_floats(N);
    for (size_t b = 0; b < BLOCKS; b++) {
        float magnitude = ldexpf(1.0f, (int)(b % 40) - 20);
        for (size_t j = 0; j < 32; j++)
            x[b * 32 + j] *= magnitude;
        if (b % 3 == 0) { /* amax 127 * m: then 2.5 * m and -6.5 * m are exact halves */
            x[b * 32] = 127.0f * magnitude;
            x[b * 32 + 1] = 2.5f * magnitude;
            x[b * 32 + 2] = -6.5f * magnitude;
        }
    }
    /* Q8_1's blocks: d and s (f16), then the quants; Q8_0's: d, then the quants */
    const quant_ops *ops = quant_ops_get(sums ? TENSOR_TYPE_Q4_1 : TENSOR_TYPE_Q8_0,
                                         CPU_LEVEL_SCALAR);
    size_t block_bytes = sums ? 36 : 34, head = sums ? 4 : 2, per_block = sums ? 2 : 1;
    assert_int_equal(quant_act_row_bytes(ops->type, 32), block_bytes);
    uint8_t *cpu = malloc(BLOCKS * block_bytes);
    quant_quantize_activations(ops, x, N, 1, cpu);
    vk_buffer bx = device_buffer(x, N * 4), bq = device_buffer(NULL, vk_matmul_quants_bytes(N));
    vk_buffer bs = device_buffer(NULL, vk_matmul_scales_bytes(N));
    vk_commands c = begin();
    if (sums)
        vk_op_quantize_q8_1(&c, vk_whole(&bx), vk_whole(&bq), vk_whole(&bs), N);
    else
        vk_op_quantize_q8_0(&c, vk_whole(&bx), vk_whole(&bq), vk_whole(&bs), N);
    submit(&c);
    int8_t *quants = malloc(N);
    float *scales = malloc(BLOCKS * 4 * per_block);
    read_back(&bq, quants, N);
    read_back(&bs, scales, BLOCKS * 4 * per_block);
    for (size_t b = 0; b < BLOCKS; b++) {
        for (size_t f = 0; f < per_block; f++) { /* d, and s */
            uint16_t h;
            memcpy(&h, cpu + b * block_bytes + 2 * f, 2);
            if (scales[b * per_block + f] != quant_f16_to_f32(h))
                fail_msg("block %zu: %s %.9g, the CPU's %.9g", b, f ? "sum" : "scale",
                         (double)scales[b * per_block + f], (double)quant_f16_to_f32(h));
        }
        for (size_t j = 0; j < 32; j++)
            if (quants[b * 32 + j] != (int8_t)cpu[b * block_bytes + head + j])
                fail_msg("block %zu: quant %zu is %d, the CPU's %d (x %.9g)", b, j,
                         quants[b * 32 + j], (int8_t)cpu[b * block_bytes + head + j],
                         (double)x[b * 32 + j]);
    }
    vk_buffer_free(dev, &bx), vk_buffer_free(dev, &bq), vk_buffer_free(dev, &bs);
    free(x), free(cpu), free(quants), free(scales);
}

static void test_quantize_q8_0_is_the_cpus(void **state)
{
    (void)state;
    check_quantize_q8(false);
}

static void test_quantize_q8_1_is_the_cpus(void **state)
{
    (void)state;
    check_quantize_q8(true);
}

/* The K-quants' Q8_K partner bit for bit too: quants and the float scale, the block's
 * largest magnitude negative or positive, and an all-zero block. */
static void test_quantize_q8_k_is_the_cpus(void **state)
{
    (void)state;
    enum { BLOCKS = 37, N = BLOCKS * 256 };
    float *x = random_floats(N);
    for (size_t i = 0; i < 256; i++)
        x[5 * 256 + i] = 0.0f;
    x[7 * 256 + 9] = -3.0f;
    x[8 * 256 + 200] = 3.0f;
    const quant_ops *ops = quant_ops_get(TENSOR_TYPE_Q4_K, CPU_LEVEL_SCALAR);
    size_t block_bytes = quant_act_row_bytes(TENSOR_TYPE_Q4_K, 256); /* d, 256 quants, bsums */
    uint8_t *cpu = malloc(BLOCKS * block_bytes);
    quant_quantize_activations(ops, x, N, 1, cpu);
    vk_buffer bx = device_buffer(x, N * 4), bq = device_buffer(NULL, vk_matmul_quants_bytes(N));
    vk_buffer bs = device_buffer(NULL, vk_matmul_scales_bytes(N));
    vk_commands c = begin();
    vk_op_quantize_q8_k(&c, vk_whole(&bx), vk_whole(&bq), vk_whole(&bs), N);
    submit(&c);
    int8_t *quants = malloc(N);
    float scales[BLOCKS];
    read_back(&bq, quants, N);
    read_back(&bs, scales, sizeof scales);
    for (size_t b = 0; b < BLOCKS; b++) {
        float d;
        memcpy(&d, cpu + b * block_bytes, 4);
        if (memcmp(&scales[b], &d, 4) != 0)
            fail_msg("block %zu: scale %.9g, the CPU's %.9g", b, (double)scales[b], (double)d);
        if (memcmp(quants + b * 256, cpu + b * block_bytes + 4, 256) != 0)
            fail_msg("block %zu: quants differ from the CPU's", b);
    }
    vk_buffer_free(dev, &bx), vk_buffer_free(dev, &bq), vk_buffer_free(dev, &bs);
    free(x), free(cpu), free(quants);
}

/* A matrix larger than one buffer, split by rows into three (of 25, 25 and 17 rows): each
 * part's product lands in its columns of y, for several tokens. */
static void check_matmul_split(uint32_t type)
{
    enum { N_IN = 256, N_OUT = 67, TOKENS = 9, PART = 25 };
    const quant_ops *ops = quant_ops_get(type, CPU_LEVEL_SCALAR);
    size_t row_bytes;
    assert_true(tensor_type_row_bytes(type, N_IN, &row_bytes));
    float *wf = random_floats(N_IN * N_OUT), *x = random_floats(N_IN * TOKENS);
    uint8_t *w = malloc(row_bytes * N_OUT), *act = malloc(quant_act_row_bytes(type, N_IN) * TOKENS);
    float want[N_OUT * TOKENS], got[N_OUT * TOKENS];
    weight_rows(type, wf, w, N_IN, N_OUT);
    quant_quantize_activations(ops, x, N_IN, TOKENS, act);
    quant_matmul_rows(ops, w, N_IN, 0, N_OUT, act, TOKENS, want, N_OUT);
    vk_buffer parts[3];
    for (size_t p = 0; p < 3; p++) {
        size_t rows = p < 2 ? PART : N_OUT - 2 * PART;
        parts[p] = device_buffer(w + p * PART * row_bytes, rows * row_bytes);
    }
    vk_buffer bx = device_buffer(x, sizeof(float) * N_IN * TOKENS), by = device_buffer(NULL, sizeof got);
    vk_buffer bq = device_buffer(NULL, vk_matmul_quants_bytes(N_IN * TOKENS));
    vk_buffer bs = device_buffer(NULL, vk_matmul_scales_bytes(N_IN * TOKENS));
    vk_commands c = begin();
    for (uint32_t p = 0; p < 3; p++)
        vk_op_matmul_rows(&c, type, vk_whole(&parts[p]), row_bytes, vk_whole(&bx), vk_whole(&bq),
                          vk_whole(&bs), vk_whole(&by), N_IN, p < 2 ? PART : N_OUT - 2 * PART,
                          TOKENS, p * PART, N_OUT);
    submit(&c);
    read_back(&by, got, sizeof got);
    char what[64];
    snprintf(what, sizeof what, "matmul %s in three buffers", tensor_type_name(type));
    assert_close(what, got, want, N_OUT * TOKENS, 1e-5);
    for (size_t p = 0; p < 3; p++)
        vk_buffer_free(dev, &parts[p]);
    vk_buffer_free(dev, &bx), vk_buffer_free(dev, &by), vk_buffer_free(dev, &bq), vk_buffer_free(dev, &bs);
    free(wf), free(x), free(w), free(act);
}

/* Each of the activation partners (Q8_K, Q8_0, Q8_1), the split rows of odd byte counts
 * (MXFP4's 17-byte blocks) among them. */
static void test_matmul_split_across_buffers(void **state)
{
    (void)state;
    const uint32_t types[] = {TENSOR_TYPE_Q4_K,  TENSOR_TYPE_Q2_K,   TENSOR_TYPE_Q3_K,
                              TENSOR_TYPE_Q4_1,  TENSOR_TYPE_Q5_1,   TENSOR_TYPE_MXFP4,
                              TENSOR_TYPE_IQ4_NL, TENSOR_TYPE_IQ4_XS};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        check_matmul_split(types[i]);
}

/* More rows than one dispatch dimension has groups: the rest go to further z layers. The
 * products read the limit from the device, which lavapipe gives as 65535 and NVIDIA's driver
 * as 2^31 - 1 (a matrix of that many rows would not fit), so the test holds it to 65535. */
static void test_matmul_rows_beyond_one_dimension(void **state)
{
    (void)state;
    uint32_t limit = dev->max_groups[0];
    dev->max_groups[0] = limit < 65535 ? limit : 65535;
    check_matmul(TENSOR_TYPE_Q8_0, 32, (size_t)dev->max_groups[0] + 3, 1);
    dev->max_groups[0] = limit;
}

/* Prompts past vk_ops.c's threshold take the tiled product (matmul_tiled.glsl), for every
 * weight type: ragged tiles (67 rows: a tile and 3; 70 tokens: a tile and 6) and, for the
 * float types, an inner dimension that is no multiple of the tile's chunk of 16. */
static void test_matmul_tiled(void **state)
{
    (void)state;
    assert_true(vk_device_fits_tiled(dev)); /* lavapipe takes the tile */
    const uint32_t floats[] = {TENSOR_TYPE_F32, TENSOR_TYPE_F16, TENSOR_TYPE_BF16};
    for (size_t i = 0; i < 3; i++)
        check_matmul(floats[i], 100, 67, 70);
    const uint32_t types[] = {TENSOR_TYPE_Q4_0, TENSOR_TYPE_Q4_1, TENSOR_TYPE_Q5_0,
                              TENSOR_TYPE_Q5_1, TENSOR_TYPE_Q8_0, TENSOR_TYPE_MXFP4,
                              TENSOR_TYPE_IQ4_NL};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        check_matmul(types[i], 96, 67, 70);
    const uint32_t k_types[] = {TENSOR_TYPE_Q2_K, TENSOR_TYPE_Q3_K, TENSOR_TYPE_Q4_K,
                                TENSOR_TYPE_Q5_K, TENSOR_TYPE_Q6_K, TENSOR_TYPE_IQ4_XS};
    for (size_t i = 0; i < sizeof k_types / sizeof k_types[0]; i++)
        check_matmul(k_types[i], 512, 67, 70);
}

/* More row tiles than one dispatch dimension has groups (the limit held to one group): the
 * rest go to further z layers. */
static void test_matmul_tiled_rows_beyond_one_dimension(void **state)
{
    (void)state;
    uint32_t limit = dev->max_groups[0];
    dev->max_groups[0] = 1;
    check_matmul(TENSOR_TYPE_Q8_0, 64, 130, 33);
    check_matmul(TENSOR_TYPE_F16, 48, 130, 33);
    dev->max_groups[0] = limit;
}

/* A device whose limits do not take the tile (too few invocations a workgroup, or too
 * little shared memory) has the per-row kernel make a prompt's product. */
static void test_matmul_tiled_needs_the_limits(void **state)
{
    (void)state;
    uint32_t invocations = dev->max_invocations, shared = dev->max_shared_bytes;
    dev->max_invocations = VK_TILED_INVOCATIONS / 2;
    assert_false(vk_device_fits_tiled(dev));
    check_matmul(TENSOR_TYPE_Q4_K, 256, 9, 40);
    dev->max_invocations = invocations;
    dev->max_shared_bytes = VK_TILED_SHARED_BYTES - 4;
    assert_false(vk_device_fits_tiled(dev));
    dev->max_shared_bytes = shared;
    assert_true(vk_device_fits_tiled(dev));
}

/* ---- elementwise and row operations ---- */

static void test_rmsnorm(void **state)
{
    (void)state;
    enum { N = 4099, ROWS = 3 };
    float *x = random_floats(N * ROWS), *w = random_floats(N), want[N * ROWS], got[N * ROWS];
    for (size_t r = 0; r < ROWS; r++)
        block_rmsnorm(x + r * N, w, N, 1e-5f, want + r * N);
    vk_buffer bx = device_buffer(x, sizeof want), bw = device_buffer(w, N * 4);
    vk_buffer by = device_buffer(NULL, sizeof want);
    vk_commands c = begin();
    vk_op_rmsnorm(&c, vk_whole(&bw), vk_whole(&bx), vk_whole(&by), N, ROWS, 1e-5f);
    submit(&c);
    read_back(&by, got, sizeof got);
    assert_close("rmsnorm", got, want, N * ROWS, 1e-5);
    vk_buffer_free(dev, &bx), vk_buffer_free(dev, &bw), vk_buffer_free(dev, &by);
    free(x), free(w);
}

/* The residual and the norm after it in one dispatch (d also the output, as the layers use
 * it): x + d and its norm within the CPU's tolerance, and the very bits of the add and the
 * norm recorded apart. */
static void test_add_rmsnorm(void **state)
{
    (void)state;
    enum { N = 4099, ROWS = 3 };
    size_t bytes = N * ROWS * sizeof(float);
    float *x = random_floats(N * ROWS), *d = random_floats(N * ROWS), *w = random_floats(N);
    float *sum = malloc(bytes), *want = malloc(bytes), *got_x = malloc(bytes);
    float *got = malloc(bytes), *apart_x = malloc(bytes), *apart = malloc(bytes);
    for (size_t i = 0; i < N * ROWS; i++)
        sum[i] = x[i] + d[i];
    for (size_t r = 0; r < ROWS; r++)
        block_rmsnorm(sum + r * N, w, N, 1e-5f, want + r * N);
    vk_buffer bw = device_buffer(w, N * 4);
    for (int fused = 0; fused < 2; fused++) {
        vk_buffer bx = device_buffer(x, bytes), bd = device_buffer(d, bytes);
        vk_commands c = begin();
        if (fused) {
            vk_op_add_rmsnorm(&c, vk_whole(&bw), vk_whole(&bx), vk_whole(&bd), vk_whole(&bd),
                              N, ROWS, 1e-5f);
        } else {
            vk_op_binary(&c, VK_ADD, vk_whole(&bx), vk_whole(&bd), N * ROWS, N * ROWS, 0.0f);
            vk_op_rmsnorm(&c, vk_whole(&bw), vk_whole(&bx), vk_whole(&bd), N, ROWS, 1e-5f);
        }
        submit(&c);
        read_back(&bx, fused ? got_x : apart_x, bytes);
        read_back(&bd, fused ? got : apart, bytes);
        vk_buffer_free(dev, &bx), vk_buffer_free(dev, &bd);
    }
    assert_memory_equal(got_x, sum, bytes);
    assert_close("add_rmsnorm", got, want, N * ROWS, 1e-5);
    assert_memory_equal(got_x, apart_x, bytes);
    assert_memory_equal(got, apart, bytes);
    vk_buffer_free(dev, &bw);
    free(x), free(d), free(w), free(sum), free(want), free(got_x), free(got), free(apart_x);
    free(apart);
}

static void check_rope(enum rope_mode mode)
{
    enum { TOKENS = 5, HEADS = 3, DIM = 80, ROT = 48 }; /* a rotated span shorter than the head */
    float *x = random_floats(TOKENS * HEADS * DIM), cs[TOKENS * ROT];
    float want[TOKENS * HEADS * DIM], got[TOKENS * HEADS * DIM];
    for (size_t i = 0; i < TOKENS * ROT / 2; i++) {
        float angle = 3.0f * uniform();
        cs[2 * i] = cosf(angle), cs[2 * i + 1] = sinf(angle);
    }
    memcpy(want, x, sizeof want);
    rope_params rp = {.mode = mode, .n_rot = ROT};
    for (size_t t = 0; t < TOKENS; t++)
        rope_apply(&rp, cs + t * ROT, want + t * HEADS * DIM, HEADS, DIM);
    vk_buffer bx = device_buffer(x, sizeof want), bc = device_buffer(cs, sizeof cs);
    vk_commands c = begin();
    vk_op_rope(&c, vk_whole(&bc), vk_whole(&bx), TOKENS, HEADS, DIM, ROT, mode == ROPE_NEOX);
    submit(&c);
    read_back(&bx, got, sizeof got);
    assert_close(mode == ROPE_NEOX ? "rope neox" : "rope", got, want, TOKENS * HEADS * DIM, 1e-6);
    vk_buffer_free(dev, &bx), vk_buffer_free(dev, &bc);
    free(x);
}

static void test_rope(void **state)
{
    (void)state;
    check_rope(ROPE_NORMAL);
    check_rope(ROPE_NEOX);
}

/* How check_rmsnorm_quantize's norm is used: into another buffer, after a residual into
 * the residual's buffer (as the layers use it), or in place (the output layer). */
enum norm_use { NORM_INTO, NORM_ADDED, NORM_IN_PLACE };

/* A norm and its products' quantization in one dispatch, for each activation type (Q8_0,
 * Q8_1, Q8_K): the norm, x, the quants and the scales are the bits of the operations
 * recorded apart, and a product of the output then takes the quantization as it is (no
 * dispatch of its own) and gives the same bits. */
static void check_rmsnorm_quantize(uint32_t type, enum norm_use use)
{
    bool add = use == NORM_ADDED;
    enum { N = 512, ROWS = 3 };
    size_t bytes = N * ROWS * sizeof(float), q_bytes = vk_matmul_quants_bytes(N * ROWS);
    size_t s_bytes = vk_matmul_scales_bytes(N * ROWS), row_bytes;
    assert_true(tensor_type_row_bytes(type, N, &row_bytes));
    const quant_ops *ops = quant_ops_get(type, CPU_LEVEL_SCALAR);
    float *x = random_floats(N * ROWS), *d = random_floats(N * ROWS), *w = random_floats(N);
    float *wf = random_floats(N * 16);
    uint8_t *wq = malloc(row_bytes * 16);
    for (size_t r = 0; r < 16; r++)
        ops->quantize(wf + r * N, wq + r * row_bytes, N);
    vk_buffer bw = device_buffer(w, N * 4), bm = device_buffer(wq, row_bytes * 16);
    void *got[2][5];
    for (int fused = 0; fused < 2; fused++) {
        vk_buffer bx = device_buffer(x, bytes), bd = device_buffer(d, bytes);
        vk_buffer bq = device_buffer(NULL, q_bytes), bs = device_buffer(NULL, s_bytes);
        vk_buffer by = device_buffer(NULL, 16 * ROWS * 4);
        vk_span none = {0}, dspan = add ? vk_whole(&bd) : none;
        vk_buffer *out = use == NORM_IN_PLACE ? &bx : &bd;
        vk_commands c = begin();
        if (fused) {
            vk_op_rmsnorm_quantize(&c, vk_whole(&bw), vk_whole(&bx), dspan, vk_whole(out), N,
                                   ROWS, 1e-5f, type, vk_whole(&bq), vk_whole(&bs));
            assert_int_equal(c.rec.dispatches, 1);
        } else if (add) {
            vk_op_add_rmsnorm(&c, vk_whole(&bw), vk_whole(&bx), vk_whole(&bd), vk_whole(&bd), N,
                              ROWS, 1e-5f);
        } else {
            vk_op_rmsnorm(&c, vk_whole(&bw), vk_whole(&bx), vk_whole(out), N, ROWS, 1e-5f);
        }
        vk_op_matmul(&c, type, vk_whole(&bm), row_bytes, vk_whole(out), vk_whole(&bq),
                     vk_whole(&bs), vk_whole(&by), N, 16, ROWS);
        assert_int_equal(c.rec.dispatches, fused ? 2 : 3);
        submit(&c);
        vk_buffer *bufs[] = {&bx, &bd, &bq, &bs, &by};
        size_t sizes[] = {bytes, bytes, q_bytes, s_bytes, 16 * ROWS * 4};
        for (int i = 0; i < 5; i++) {
            got[fused][i] = malloc(sizes[i]);
            read_back(bufs[i], got[fused][i], sizes[i]);
            vk_buffer_free(dev, bufs[i]);
        }
    }
    const char *names[] = {"x", "the norm", "the quants", "the scales", "the product"};
    size_t sizes[] = {bytes, bytes, q_bytes, s_bytes, 16 * ROWS * 4};
    for (int i = 0; i < 5; i++) {
        if (memcmp(got[0][i], got[1][i], sizes[i]) != 0)
            fail_msg("rmsnorm_quantize %s (use %d): %s: not the bits of the operations apart",
                     tensor_type_name(type), (int)use, names[i]);
        free(got[0][i]), free(got[1][i]);
    }
    vk_buffer_free(dev, &bw), vk_buffer_free(dev, &bm);
    free(x), free(d), free(w), free(wf), free(wq);
}

static void test_rmsnorm_quantize(void **state)
{
    (void)state;
    const uint32_t types[] = {TENSOR_TYPE_Q4_0, TENSOR_TYPE_Q4_1, TENSOR_TYPE_Q4_K};
    for (size_t i = 0; i < 3; i++)
        for (int use = NORM_INTO; use <= NORM_IN_PLACE; use++)
            check_rmsnorm_quantize(types[i], (enum norm_use)use);
}

/* SwiGLU and the down product's quantization in one dispatch, for each activation type:
 * the gate, the quants and the scales are the bits of vk_op_swiglu and the quantization
 * apart, and a product of the gate then takes the quantization as it is and gives the same
 * bits. */
static void test_swiglu_quantize(void **state)
{
    (void)state;
    enum { N = 768, T = 3 };
    const uint32_t types[] = {TENSOR_TYPE_Q4_0, TENSOR_TYPE_Q4_1, TENSOR_TYPE_Q4_K};
    size_t bytes = N * T * sizeof(float), q_bytes = vk_matmul_quants_bytes(N * T);
    size_t s_bytes = vk_matmul_scales_bytes(N * T);
    float *gate = random_floats(N * T), *up = random_floats(N * T), *wf = random_floats(N * 8);
    for (size_t t = 0; t < 3; t++) {
        uint32_t type = types[t];
        size_t row_bytes;
        assert_true(tensor_type_row_bytes(type, N, &row_bytes));
        const quant_ops *ops = quant_ops_get(type, CPU_LEVEL_SCALAR);
        uint8_t *wq = malloc(row_bytes * 8);
        for (size_t r = 0; r < 8; r++)
            ops->quantize(wf + r * N, wq + r * row_bytes, N);
        vk_buffer bm = device_buffer(wq, row_bytes * 8), bu = device_buffer(up, bytes);
        void *got[2][4];
        for (int fused = 0; fused < 2; fused++) {
            vk_buffer bg = device_buffer(gate, bytes), bq = device_buffer(NULL, q_bytes);
            vk_buffer bs = device_buffer(NULL, s_bytes), by = device_buffer(NULL, 8 * T * 4);
            vk_commands c = begin();
            if (fused)
                vk_op_swiglu_quantize(&c, vk_whole(&bg), vk_whole(&bu), N * T, type,
                                      vk_whole(&bq), vk_whole(&bs));
            else
                vk_op_swiglu(&c, vk_whole(&bg), vk_whole(&bu), N * T);
            vk_op_matmul(&c, type, vk_whole(&bm), row_bytes, vk_whole(&bg), vk_whole(&bq),
                         vk_whole(&bs), vk_whole(&by), N, 8, T);
            assert_int_equal(c.rec.dispatches, fused ? 2 : 3);
            submit(&c);
            vk_buffer *bufs[] = {&bg, &bq, &bs, &by};
            size_t sizes[] = {bytes, q_bytes, s_bytes, 8 * T * 4};
            for (int i = 0; i < 4; i++) {
                got[fused][i] = malloc(sizes[i]);
                read_back(bufs[i], got[fused][i], sizes[i]);
                vk_buffer_free(dev, bufs[i]);
            }
        }
        const char *names[] = {"the gate", "the quants", "the scales", "the product"};
        size_t sizes[] = {bytes, q_bytes, s_bytes, 8 * T * 4};
        for (int i = 0; i < 4; i++) {
            if (memcmp(got[0][i], got[1][i], sizes[i]) != 0)
                fail_msg("swiglu_quantize %s: %s: not the bits of the operations apart",
                         tensor_type_name(type), names[i]);
            free(got[0][i]), free(got[1][i]);
        }
        vk_buffer_free(dev, &bm), vk_buffer_free(dev, &bu);
        free(wq);
    }
    free(gate), free(up), free(wf);
}

/* Keys turned as they are stored (the first n_rot of each head's 80 values, both forms, F16
 * and F32 caches): the very bits of vk_op_rope and then vk_op_kv_store, the input left as it
 * was. */
static void test_kv_store_rope(void **state)
{
    (void)state;
    enum { T = 3, KV = 2, D = 80, ROT = 32, CELLS = 8 };
    float *x = random_floats(T * KV * D), *cs = random_floats(T * ROT);
    uint32_t tokens[3 * T] = {0};
    for (uint32_t t = 0; t < T; t++)
        tokens[2 * t + 1] = 2 * t + 1;
    vk_buffer bt = device_buffer(tokens, sizeof tokens), bcs = device_buffer(cs, T * ROT * 4);
    for (int f16 = 0; f16 < 2; f16++) {
        for (int neox = 0; neox < 2; neox++) {
            vk_cache_shape shape = {KV, D, CELLS, f16};
            size_t bytes = vk_cache_bytes(&shape, 1);
            vk_buffer fused = device_buffer(NULL, bytes), apart = device_buffer(NULL, bytes);
            vk_buffer bx = device_buffer(x, T * KV * D * 4), turned = device_buffer(x, T * KV * D * 4);
            vk_rope rope = {vk_whole(&bcs), ROT, neox};
            vk_commands c = begin();
            vk_op_kv_store_rope(&c, vk_whole(&bt), vk_whole(&bx), vk_whole(&fused), &shape, T,
                                &rope);
            vk_op_rope(&c, vk_whole(&bcs), vk_whole(&turned), T, KV, D, ROT, neox);
            vk_op_kv_store(&c, vk_whole(&bt), vk_whole(&turned), vk_whole(&apart), &shape, T);
            submit(&c);
            uint8_t *got = malloc(bytes), *want = malloc(bytes);
            float *x_after = malloc(T * KV * D * 4);
            read_back(&fused, got, bytes);
            read_back(&apart, want, bytes);
            read_back(&bx, x_after, T * KV * D * 4);
            assert_memory_equal(got, want, bytes);
            assert_memory_equal(x_after, x, T * KV * D * 4);
            free(got), free(want), free(x_after);
            vk_buffer *bufs[] = {&fused, &apart, &bx, &turned};
            for (size_t i = 0; i < 4; i++)
                vk_buffer_free(dev, bufs[i]);
        }
    }
    vk_buffer_free(dev, &bt), vk_buffer_free(dev, &bcs);
    free(x), free(cs);
}

static void test_swiglu_and_binary(void **state)
{
    (void)state;
    enum { N = 1000003 }; /* more than the grid's threads: each strides */
    float *g = random_floats(N), *u = random_floats(N), *want = malloc(N * 4), *got = malloc(N * 4);
    for (size_t i = 0; i < N; i++)
        g[i] *= 20.0f; /* saturated gates too */
    memcpy(want, g, N * 4);
    for (size_t i = 0; i < N; i++)
        want[i] = want[i] / (1.0f + expf(-want[i])) * u[i];
    vk_buffer bg = device_buffer(g, N * 4), bu = device_buffer(u, N * 4);
    vk_commands c = begin();
    vk_op_swiglu(&c, vk_whole(&bg), vk_whole(&bu), N);
    submit(&c);
    read_back(&bg, got, N * 4);
    assert_close("swiglu", got, want, N, 1e-5);

    /* x += u, x *= u[i % 7], x *= 0.5 on the swiglu output */
    for (size_t i = 0; i < N; i++)
        want[i] = ((got[i] + u[i]) * u[i % 7]) * 0.5f;
    c = begin();
    vk_op_binary(&c, VK_ADD, vk_whole(&bg), vk_whole(&bu), N, N, 0.0f);
    vk_op_binary(&c, VK_MUL, vk_whole(&bg), vk_whole(&bu), N, 7, 0.0f);
    vk_op_binary(&c, VK_SCALE, vk_whole(&bg), (vk_span){0}, N, 0, 0.5f);
    submit(&c);
    read_back(&bg, got, N * 4);
    assert_close("add, mul, scale", got, want, N, 1e-6);

    /* relu(x)² bit for bit as the CPU's, negatives, zeros and a NaN among the values */
    got[0] = 0.0f, got[1] = -0.0f, got[2] = NAN, got[3] = -3.0f, got[4] = 1e-30f;
    memcpy(want, got, N * 4);
    block_relu_sqr(want, N);
    vk_buffer_free(dev, &bg);
    bg = device_buffer(got, N * 4);
    c = begin();
    vk_op_binary(&c, VK_RELU_SQR, vk_whole(&bg), (vk_span){0}, N, 0, 0.0f);
    submit(&c);
    read_back(&bg, got, N * 4);
    assert_memory_equal(got, want, N * 4);
    vk_buffer_free(dev, &bg), vk_buffer_free(dev, &bu);
    free(g), free(u), free(want), free(got);
}

static void test_softmax(void **state)
{
    (void)state;
    enum { N = 1031, ROWS = 3 };
    float *x = random_floats(N * ROWS), want[N * ROWS], got[N * ROWS];
    for (size_t i = 0; i < N * ROWS; i++)
        x[i] *= 30.0f;
    memcpy(want, x, sizeof want);
    for (size_t r = 0; r < ROWS; r++) {
        float max;
        double sum = block_softmax_exp(want + r * N, N, 0.7f, &max);
        for (size_t i = 0; i < N; i++)
            want[r * N + i] = (float)(want[r * N + i] / sum);
    }
    vk_buffer bx = device_buffer(x, sizeof want);
    vk_commands c = begin();
    vk_op_softmax(&c, vk_whole(&bx), N, ROWS, 0.7f);
    submit(&c);
    read_back(&bx, got, sizeof got);
    assert_close("softmax", got, want, N * ROWS, 1e-5);
    vk_buffer_free(dev, &bx);
    free(x);
}

static void check_layernorm(bool with_bias)
{
    enum { N = 4099, ROWS = 3 };
    float *x = random_floats(N * ROWS), *w = random_floats(N), *b = random_floats(N);
    float want[N * ROWS], got[N * ROWS];
    for (size_t i = 0; i < N * ROWS; i++)
        x[i] = 3.0f + 2.0f * x[i]; /* a mean far from 0 */
    for (size_t r = 0; r < ROWS; r++)
        block_layernorm(x + r * N, w, with_bias ? b : NULL, N, 1e-5f, want + r * N);
    vk_buffer bx = device_buffer(x, sizeof want), bw = device_buffer(w, N * 4);
    vk_buffer bb = device_buffer(b, N * 4), by = device_buffer(NULL, sizeof want);
    vk_commands c = begin();
    vk_op_layernorm(&c, vk_whole(&bw), with_bias ? vk_whole(&bb) : (vk_span){0}, vk_whole(&bx),
                    vk_whole(&by), N, ROWS, 1e-5f);
    submit(&c);
    read_back(&by, got, sizeof got);
    assert_close(with_bias ? "layernorm with a bias" : "layernorm", got, want, N * ROWS, 1e-5);
    vk_buffer_free(dev, &bx), vk_buffer_free(dev, &bw), vk_buffer_free(dev, &bb);
    vk_buffer_free(dev, &by);
    free(x), free(w), free(b);
}

static void test_layernorm(void **state)
{
    (void)state;
    check_layernorm(true);
    check_layernorm(false);
}

/* GeGLU and GELU through the CPU's fp16 table: its bits exactly. */
static void test_gelu_and_geglu(void **state)
{
    (void)state;
    enum { N = 300007 }; /* more than the grid's threads, not a multiple of anything */
    float *x = random_floats(N), *u = random_floats(N), *want = malloc(N * 4), *got = malloc(N * 4);
    for (size_t i = 0; i < N; i++)
        x[i] *= 12.0f; /* both cut-offs (-10, 10) and the fp16 range between */
    vk_buffer table = device_buffer(block_gelu_f16_table(), VK_GELU_TABLE_BYTES);
    for (int gated = 1; gated >= 0; gated--) {
        memcpy(want, x, N * 4);
        if (gated)
            block_geglu(want, u, N);
        else
            block_gelu(want, N);
        vk_buffer bx = device_buffer(x, N * 4), bu = device_buffer(u, N * 4);
        vk_commands c = begin();
        vk_op_gelu(&c, vk_whole(&table), vk_whole(&bx), gated ? vk_whole(&bu) : (vk_span){0}, N);
        submit(&c);
        read_back(&bx, got, N * 4);
        assert_close(gated ? "geglu" : "gelu", got, want, N, 0.0);
        vk_buffer_free(dev, &bx), vk_buffer_free(dev, &bu);
    }
    vk_buffer_free(dev, &table);
    free(x), free(u), free(want), free(got);
}

/* Quick GELU through the CPU's fp16 table, read for every x (past -10 and 10 too): its bits
 * exactly. */
static void test_gelu_quick(void **state)
{
    (void)state;
    enum { N = 300007 };
    float *x = random_floats(N), *want = malloc(N * 4), *got = malloc(N * 4);
    for (size_t i = 0; i < N; i++)
        x[i] *= 14.0f; /* beyond the tanh form's cut-offs, where this table is still read */
    memcpy(want, x, N * 4);
    vision_gelu_quick(want, N);
    vk_buffer table = device_buffer(vision_gelu_quick_f16_table(), VK_GELU_TABLE_BYTES);
    vk_buffer bx = device_buffer(x, N * 4);
    vk_commands c = begin();
    vk_op_gelu_quick(&c, vk_whole(&table), vk_whole(&bx), (vk_span){0}, N);
    submit(&c);
    read_back(&bx, got, N * 4);
    assert_close("quick gelu", got, want, N, 0.0);
    vk_buffer_free(dev, &bx), vk_buffer_free(dev, &table);
    free(x), free(want), free(got);
}

/* x *= y[row] for rows of 37 floats (a scale per token). */
static void test_mul_rows(void **state)
{
    (void)state;
    enum { ROWS = 29, N = 37 };
    float *x = random_floats(ROWS * N), *y = random_floats(ROWS), want[ROWS * N], got[ROWS * N];
    for (size_t i = 0; i < ROWS * N; i++)
        want[i] = x[i] * y[i / N];
    vk_buffer bx = device_buffer(x, sizeof want), by = device_buffer(y, ROWS * 4);
    vk_commands c = begin();
    vk_op_binary(&c, VK_MUL_ROWS, vk_whole(&bx), vk_whole(&by), ROWS * N, N, 0.0f);
    submit(&c);
    read_back(&bx, got, sizeof got);
    assert_close("a scale per row", got, want, ROWS * N, 0.0); /* one product: exact */
    vk_buffer_free(dev, &bx), vk_buffer_free(dev, &by);
    free(x), free(y);
}

/* Strided rows into other strided rows: a middle part of 7 rows of 13 into rows of 11 from
 * their third float, the floats around them untouched. */
static void test_copy_rows(void **state)
{
    (void)state;
    enum { ROWS = 7, SRC = 13, DST = 11, WIDTH = 5 };
    float *src = random_floats(ROWS * SRC), *dst = random_floats(ROWS * DST + 3);
    float want[ROWS * DST + 3], got[ROWS * DST + 3];
    memcpy(want, dst, sizeof want);
    for (size_t r = 0; r < ROWS; r++)
        for (size_t i = 0; i < WIDTH; i++)
            want[2 + r * DST + i] = src[4 + r * SRC + i];
    vk_buffer bs = device_buffer(src, ROWS * SRC * 4), bd = device_buffer(dst, sizeof got);
    vk_commands c = begin();
    vk_rows rows = {ROWS, WIDTH, 4, SRC, 2, DST};
    vk_op_copy_rows(&c, vk_whole(&bs), vk_whole(&bd), &rows);
    submit(&c);
    read_back(&bd, got, sizeof got);
    assert_close("copied rows", got, want, ROWS * DST + 3, 0.0);
    vk_buffer_free(dev, &bs), vk_buffer_free(dev, &bd);
    free(src), free(dst);
}

/* Rows 8, 0, 3, 3 and 7 of 9 of `type`, dequantized on the device: the CPU's bits. */
static void check_get_rows(uint32_t type)
{
    enum { N = 768, ROWS = 9 };
    const uint32_t ids[] = {8, 0, 3, 3, 7};
    const quant_ops *ops = quant_ops_get(type, CPU_LEVEL_SCALAR);
    size_t row_bytes;
    assert_true(tensor_type_row_bytes(type, N, &row_bytes));
    float *wf = random_floats(N * ROWS), want[5 * N], got[5 * N];
    uint8_t *w = malloc(row_bytes * ROWS);
    weight_rows(type, wf, w, N, ROWS);
    for (size_t i = 0; i < 5; i++)
        ops->dequantize(w + ids[i] * row_bytes, want + i * N, N);
    vk_buffer bw = device_buffer(w, row_bytes * ROWS), bi = device_buffer(ids, sizeof ids);
    vk_buffer by = device_buffer(NULL, sizeof got);
    vk_commands c = begin();
    vk_op_get_rows(&c, type, vk_whole(&bw), row_bytes, vk_whole(&bi), vk_whole(&by), N, 5);
    submit(&c);
    read_back(&by, got, sizeof got);
    assert_close(tensor_type_name(type), got, want, 5 * N, 0.0); /* exact */
    vk_buffer_free(dev, &bw), vk_buffer_free(dev, &bi), vk_buffer_free(dev, &by);
    free(wf), free(w);
}

static void test_get_rows(void **state)
{
    (void)state;
    const uint32_t types[] = {TENSOR_TYPE_F32,  TENSOR_TYPE_F16,  TENSOR_TYPE_BF16,
                              TENSOR_TYPE_Q4_0, TENSOR_TYPE_Q5_0, TENSOR_TYPE_Q8_0,
                              TENSOR_TYPE_Q4_K, TENSOR_TYPE_Q5_K, TENSOR_TYPE_Q6_K,
                              TENSOR_TYPE_Q4_1, TENSOR_TYPE_Q5_1, TENSOR_TYPE_Q2_K,
                              TENSOR_TYPE_Q3_K, TENSOR_TYPE_MXFP4, TENSOR_TYPE_IQ4_NL,
                              TENSOR_TYPE_IQ4_XS};
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++)
        check_get_rows(types[k]);
}

/* ---- mixtures of experts ---- */

/* Each token's experts and weights on the device against moe.c's routers (moe.h): softmax,
 * the n_used most probable, renormalised; or (chosen_softmax, gpt-oss) the n_used largest
 * logits weighted by the softmax over those alone. Ties included: one token's logits
 * repeat values, whose lower expert must win. */
static void check_route(bool chosen_softmax)
{
    enum { EXPERTS = 37, USED = 5, TOKENS = 13 };
    float *logits = random_floats(EXPERTS * TOKENS), probs[EXPERTS * TOKENS];
    for (size_t i = 0; i < EXPERTS * TOKENS; i++)
        logits[i] *= 4.0f;
    for (size_t e = 0; e < EXPERTS; e++)
        logits[3 * EXPERTS + e] = (float)(e % 4); /* token 3: ties of four values */
    uint32_t want_ids[TOKENS * USED], got_ids[TOKENS * USED];
    float want[TOKENS * USED], got[TOKENS * USED];
    memcpy(probs, logits, sizeof probs);
    for (size_t t = 0; t < TOKENS; t++) {
        float *p = probs + t * EXPERTS, *w = want + t * USED;
        uint32_t *ids = want_ids + t * USED;
        if (chosen_softmax)
            moe_route_softmax_chosen(p, EXPERTS, USED, ids, w);
        else
            moe_route_softmax(p, EXPERTS, USED, ids, w);
    }
    vk_buffer bl = device_buffer(logits, sizeof probs), bi = device_buffer(NULL, sizeof got_ids);
    vk_buffer bw = device_buffer(NULL, sizeof got);
    vk_commands c = begin();
    vk_op_moe_route(&c, chosen_softmax ? VK_ROUTE_SOFTMAX_CHOSEN : VK_ROUTE_SOFTMAX,
                    vk_whole(&bl), vk_whole(&bi), vk_whole(&bw), EXPERTS, USED, TOKENS);
    submit(&c);
    read_back(&bi, got_ids, sizeof got_ids);
    read_back(&bw, got, sizeof got);
    for (size_t i = 0; i < TOKENS * USED; i++)
        if (got_ids[i] != want_ids[i])
            fail_msg("route: token %zu's expert %zu is %u, the CPU's %u", i / USED, i % USED,
                     got_ids[i], want_ids[i]);
    assert_close(chosen_softmax ? "weights of the chosen logits' softmax" : "renormalised weights",
                 got, want, TOKENS * USED, 1e-6);
    vk_buffer_free(dev, &bl), vk_buffer_free(dev, &bi), vk_buffer_free(dev, &bw);
    free(logits);
}

static void test_moe_route(void **state)
{
    (void)state;
    check_route(false);
    check_route(true);
}

/* The scored router on the device against the CPU's, with ties: token 3's logits repeat
 * four values (the lower expert must win), token 4's groups are copies of each other (the
 * lower group must win). */
static void check_route_scored(const vk_route_scored *r, bool with_bias)
{
    enum { TOKENS = 13, MAX = 64 };
    size_t n = r->n_expert, k = r->n_used;
    assert_true(n <= MAX && k <= 8);
    float *logits = random_floats(n * TOKENS), *bias = with_bias ? random_floats(n) : NULL;
    for (size_t i = 0; i < n * TOKENS; i++)
        logits[i] *= 4.0f;
    for (size_t e = 0; e < n; e++)
        logits[3 * n + e] = (float)(e % 4);
    size_t size = r->n_groups > 1 ? n / r->n_groups : n;
    for (size_t e = size; e < n; e++)
        logits[4 * n + e] = logits[4 * n + e % size];
    if (bias)
        for (size_t e = 0; e < n; e++)
            bias[e] = e < size ? bias[e] * 0.2f : bias[e % size];
    uint32_t want_ids[TOKENS * 8], got_ids[TOKENS * 8];
    float want[TOKENS * 8], got[TOKENS * 8], probs[MAX * TOKENS];
    memcpy(probs, logits, n * TOKENS * sizeof *probs);
    const moe_scored_router cpu = {.n_expert = n, .n_used = k, .n_groups = r->n_groups,
                                   .n_group_used = r->n_group_used, .sigmoid = r->sigmoid,
                                   .norm = r->norm, .scale = r->scale};
    for (size_t t = 0; t < TOKENS; t++)
        moe_route_scored(&cpu, probs + t * n, bias, want_ids + t * k, want + t * k);
    vk_buffer bl = device_buffer(logits, n * TOKENS * sizeof *logits);
    vk_buffer bb = device_buffer(bias ? bias : logits, n * sizeof *logits);
    vk_buffer bi = device_buffer(NULL, TOKENS * k * sizeof *got_ids);
    vk_buffer bw = device_buffer(NULL, TOKENS * k * sizeof *got);
    vk_commands c = begin();
    vk_op_moe_route_scored(&c, r, vk_whole(&bl), bias ? vk_whole(&bb) : (vk_span){0},
                           vk_whole(&bi), vk_whole(&bw), TOKENS);
    submit(&c);
    read_back(&bi, got_ids, TOKENS * k * sizeof *got_ids);
    read_back(&bw, got, TOKENS * k * sizeof *got);
    for (size_t i = 0; i < TOKENS * k; i++)
        if (got_ids[i] != want_ids[i])
            fail_msg("scored route: token %zu's expert %zu is %u, the CPU's %u", i / k, i % k,
                     got_ids[i], want_ids[i]);
    assert_close("scored router's weights", got, want, TOKENS * k, 1e-5);
    vk_buffer_free(dev, &bl), vk_buffer_free(dev, &bb), vk_buffer_free(dev, &bi);
    vk_buffer_free(dev, &bw);
    free(logits), free(bias);
}

static void test_moe_route_scored(void **state)
{
    (void)state;
    /* deepseek2's: sigmoid, bias, 4 groups of 9 of which 2 stay, renormalised, scaled */
    vk_route_scored grouped = {.n_expert = 36, .n_used = 5, .n_groups = 4, .n_group_used = 2,
                               .sigmoid = true, .norm = true, .scale = 2.5f};
    check_route_scored(&grouped, true);
    /* groups of one expert each */
    vk_route_scored singles = {.n_expert = 7, .n_used = 3, .n_groups = 7, .n_group_used = 4,
                               .sigmoid = true, .norm = true, .scale = 1.0f};
    check_route_scored(&singles, true);
    /* softmax scores, no groups or bias, neither renormalised nor scaled by one */
    vk_route_scored plain = {.n_expert = 37, .n_used = 6, .n_groups = 1, .sigmoid = false,
                             .norm = false, .scale = 16.0f};
    check_route_scored(&plain, false);
}

/* Each (token, expert) pair's product with its expert's rows, the experts in two buffers (3
 * and 2 of them), as the CPU's product of that expert's rows with the same quantized input:
 * pairs_per_x USED (a token's input for each of its pairs), then 1 (a row per pair). */
static void check_matmul_experts(uint32_t type, size_t n_in, uint32_t pairs_per_x)
{
    enum { EXPERTS = 5, ROWS = 33, TOKENS = 7, USED = 3, PAIRS = TOKENS * USED, FIRST = 3 };
    const quant_ops *ops = quant_ops_get(type, CPU_LEVEL_SCALAR);
    size_t row_bytes, expert_bytes, x_rows = PAIRS / pairs_per_x;
    assert_true(tensor_type_row_bytes(type, n_in, &row_bytes));
    expert_bytes = row_bytes * ROWS;
    float *wf = random_floats(n_in * ROWS * EXPERTS), *x = random_floats(n_in * x_rows);
    uint8_t *w = malloc(expert_bytes * EXPERTS), *act = malloc(quant_act_row_bytes(type, n_in) * x_rows);
    weight_rows(type, wf, w, n_in, ROWS * EXPERTS);
    quant_quantize_activations(ops, x, n_in, x_rows, act);
    uint32_t ids[PAIRS];
    float want[PAIRS * ROWS], got[PAIRS * ROWS];
    for (size_t i = 0; i < PAIRS; i++) {
        ids[i] = (uint32_t)((i * 7 + i / USED) % EXPERTS);
        const uint8_t *a = act + i / pairs_per_x * quant_act_row_bytes(type, n_in);
        quant_matmul_rows(ops, w + ids[i] * expert_bytes, n_in, 0, ROWS, a, 1, want + i * ROWS,
                          ROWS);
    }
    vk_buffer parts[2] = {device_buffer(w, FIRST * expert_bytes),
                          device_buffer(w + FIRST * expert_bytes, (EXPERTS - FIRST) * expert_bytes)};
    vk_buffer bx = device_buffer(x, n_in * x_rows * 4), bi = device_buffer(ids, sizeof ids);
    vk_buffer bq = device_buffer(NULL, vk_matmul_quants_bytes(n_in * x_rows));
    vk_buffer bs = device_buffer(NULL, vk_matmul_scales_bytes(n_in * x_rows));
    vk_buffer by = device_buffer(NULL, sizeof got);
    vk_commands c = begin();
    for (uint32_t p = 0; p < 2; p++)
        vk_op_matmul_experts(&c, type, vk_whole(&parts[p]), row_bytes, vk_whole(&bx),
                             vk_whole(&bq), vk_whole(&bs), vk_whole(&bi), vk_whole(&by),
                             (uint32_t)n_in, ROWS, PAIRS, pairs_per_x, p ? FIRST : 0,
                             p ? EXPERTS - FIRST : FIRST);
    submit(&c);
    read_back(&by, got, sizeof got);
    char what[96];
    snprintf(what, sizeof what, "expert products %s, %zu wide, %u pairs an input row",
             tensor_type_name(type), n_in, pairs_per_x);
    assert_close(what, got, want, PAIRS * ROWS, 1e-5);
    vk_buffer *bufs[] = {&parts[0], &parts[1], &bx, &bi, &bq, &bs, &by};
    for (size_t i = 0; i < 7; i++)
        vk_buffer_free(dev, bufs[i]);
    free(wf), free(x), free(w), free(act);
}

static void test_matmul_experts(void **state)
{
    (void)state;
    const uint32_t types[] = {TENSOR_TYPE_F32, TENSOR_TYPE_F16, TENSOR_TYPE_BF16,
                              TENSOR_TYPE_Q4_0, TENSOR_TYPE_Q5_0, TENSOR_TYPE_Q8_0};
    for (size_t i = 0; i < 6; i++) {
        check_matmul_experts(types[i], 160, 3);
        check_matmul_experts(types[i], 96, 1);
    }
    const uint32_t more[] = {TENSOR_TYPE_Q4_1, TENSOR_TYPE_Q5_1, TENSOR_TYPE_MXFP4,
                             TENSOR_TYPE_IQ4_NL};
    for (size_t i = 0; i < sizeof more / sizeof more[0]; i++) {
        check_matmul_experts(more[i], 160, 3);
        check_matmul_experts(more[i], 96, 1);
    }
    const uint32_t k_types[] = {TENSOR_TYPE_Q2_K, TENSOR_TYPE_Q3_K, TENSOR_TYPE_Q4_K,
                                TENSOR_TYPE_Q5_K, TENSOR_TYPE_Q6_K, TENSOR_TYPE_IQ4_XS};
    for (size_t i = 0; i < sizeof k_types / sizeof k_types[0]; i++) {
        check_matmul_experts(k_types[i], 768, 3);
        check_matmul_experts(k_types[i], 256, 1);
    }
}

/* A prompt's pairs grouped by expert (vk_op_moe_group): each pair in one slot of its
 * expert's run (the runs in the experts' order), each slot's input row and expert, the runs
 * cut into tiles of at most 8 slots and the rest of the tiles empty. Then the tiled products
 * over the slots' gathered inputs, the experts in two buffers (4 and 2), give every slot the
 * pair by pair product's value to the bit, and the combine through the slots the pair by
 * pair combine's. Expert 0 takes a pair of every token (three tiles), expert 5 none. */
static void check_expert_tiles(uint32_t type, size_t n_in)
{
    enum { EXPERTS = 6, ROWS = 19, TOKENS = 23, USED = 3, PAIRS = TOKENS * USED, FIRST = 4 };
    size_t row_bytes, expert_bytes;
    assert_true(tensor_type_row_bytes(type, n_in, &row_bytes));
    expert_bytes = row_bytes * ROWS;
    float *wf = random_floats(n_in * ROWS * EXPERTS), *x = random_floats(n_in * TOKENS);
    float *weights = random_floats(PAIRS);
    uint8_t *w = malloc(expert_bytes * EXPERTS);
    assert_non_null(w);
    weight_rows(type, wf, w, n_in, ROWS * EXPERTS);
    uint32_t ids[PAIRS];
    for (uint32_t i = 0; i < PAIRS; i++) {
        uint32_t t = i / USED, j = i % USED;
        ids[i] = j == 0 ? 0 : 1 + (t * 3 + j) % 4;
    }
    uint32_t max_tiles = vk_moe_max_tiles(PAIRS, EXPERTS, VK_MOE_ROW_TILE);
    vk_buffer parts[2] = {device_buffer(w, FIRST * expert_bytes),
                          device_buffer(w + FIRST * expert_bytes, (EXPERTS - FIRST) * expert_bytes)};
    vk_buffer bx = device_buffer(x, n_in * TOKENS * 4), bi = device_buffer(ids, sizeof ids);
    vk_buffer bq = device_buffer(NULL, vk_matmul_quants_bytes(n_in * PAIRS));
    vk_buffer bs = device_buffer(NULL, vk_matmul_scales_bytes(n_in * PAIRS));
    vk_buffer by = device_buffer(NULL, PAIRS * ROWS * 4), byt = device_buffer(NULL, PAIRS * ROWS * 4);
    vk_buffer bxg = device_buffer(NULL, n_in * PAIRS * 4), bw = device_buffer(weights, PAIRS * 4);
    vk_buffer bslot = device_buffer(NULL, PAIRS * 4), brows = device_buffer(NULL, PAIRS * 4);
    vk_buffer bsid = device_buffer(NULL, PAIRS * 4), btiles = device_buffer(NULL, max_tiles * 12);
    vk_buffer bo = device_buffer(NULL, TOKENS * ROWS * 4), bot = device_buffer(NULL, TOKENS * ROWS * 4);
    vk_commands c = begin();
    for (uint32_t p = 0; p < 2; p++)
        vk_op_matmul_experts(&c, type, vk_whole(&parts[p]), row_bytes, vk_whole(&bx),
                             vk_whole(&bq), vk_whole(&bs), vk_whole(&bi), vk_whole(&by),
                             (uint32_t)n_in, ROWS, PAIRS, USED, p ? FIRST : 0,
                             p ? EXPERTS - FIRST : FIRST);
    vk_op_moe_combine(&c, vk_whole(&by), vk_whole(&bw), vk_whole(&bo), ROWS, USED, TOKENS);
    vk_op_moe_group(&c, vk_whole(&bi), vk_whole(&bslot), vk_whole(&brows), vk_whole(&bsid),
                    vk_whole(&btiles), PAIRS, EXPERTS, USED, VK_MOE_ROW_TILE);
    vk_op_get_rows(&c, TENSOR_TYPE_F32, vk_whole(&bx), n_in * 4, vk_whole(&brows),
                   vk_whole(&bxg), (uint32_t)n_in, PAIRS);
    for (uint32_t p = 0; p < 2; p++)
        vk_op_matmul_expert_tiles(&c, type, vk_whole(&parts[p]), row_bytes, vk_whole(&bxg),
                                  vk_whole(&bq), vk_whole(&bs), vk_whole(&btiles),
                                  vk_whole(&byt), (uint32_t)n_in, ROWS, PAIRS, max_tiles,
                                  VK_MOE_ROW_TILE, p ? FIRST : 0, p ? EXPERTS - FIRST : FIRST);
    vk_op_moe_combine_slots(&c, vk_whole(&byt), vk_whole(&bw), vk_whole(&bslot), vk_whole(&bot),
                            ROWS, USED, TOKENS);
    submit(&c);
    uint32_t slot_of[PAIRS], rows[PAIRS], slot_ids[PAIRS], *tiles = malloc(max_tiles * 12);
    float want[PAIRS * ROWS], got[PAIRS * ROWS], want_out[TOKENS * ROWS], got_out[TOKENS * ROWS];
    assert_non_null(tiles);
    read_back(&bslot, slot_of, sizeof slot_of), read_back(&brows, rows, sizeof rows);
    read_back(&bsid, slot_ids, sizeof slot_ids), read_back(&btiles, tiles, max_tiles * 12);
    read_back(&by, want, sizeof want), read_back(&byt, got, sizeof got);
    read_back(&bo, want_out, sizeof want_out), read_back(&bot, got_out, sizeof got_out);
    bool taken[PAIRS] = {0};
    for (uint32_t i = 0; i < PAIRS; i++) {
        uint32_t s = slot_of[i];
        assert_true(s < PAIRS && !taken[s]);
        taken[s] = true;
        assert_int_equal(slot_ids[s], ids[i]);
        assert_int_equal(rows[s], i / USED);
        if (memcmp(got + s * ROWS, want + i * ROWS, ROWS * sizeof *got) != 0)
            fail_msg("%s: pair %u's rows in its slot differ from the pair by pair product's",
                     tensor_type_name(type), i);
    }
    for (uint32_t s = 1; s < PAIRS; s++) /* runs in the experts' order */
        assert_true(slot_ids[s - 1] <= slot_ids[s]);
    uint32_t next = 0, n_tiles = 0;
    for (uint32_t t = 0; t < max_tiles && tiles[3 * t + 2]; t++, n_tiles++) {
        uint32_t e = tiles[3 * t], first = tiles[3 * t + 1], count = tiles[3 * t + 2];
        assert_true(first == next && count <= 8 && first + count <= PAIRS);
        for (uint32_t s = first; s < first + count; s++)
            assert_int_equal(slot_ids[s], e);
        /* a tile short of 8 ends its expert's run */
        assert_true(count == 8 || first + count == PAIRS || slot_ids[first + count] != e);
        next += count;
    }
    assert_int_equal(next, PAIRS);
    assert_int_equal(n_tiles, 3 + 4 * 2); /* expert 0's 23 slots, experts 1-4's 11 or 12 */
    for (uint32_t t = n_tiles; t < max_tiles; t++)
        assert_int_equal(tiles[3 * t + 2], 0);
    if (memcmp(got_out, want_out, sizeof got_out) != 0)
        fail_msg("%s: the combine through the slots differs from the pair by pair one",
                 tensor_type_name(type));
    vk_buffer *bufs[] = {&parts[0], &parts[1], &bx, &bi, &bq, &bs, &by, &byt, &bxg, &bw,
                         &bslot, &brows, &bsid, &btiles, &bo, &bot};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        vk_buffer_free(dev, bufs[i]);
    free(wf), free(x), free(weights), free(w), free(tiles);
}

static void test_matmul_expert_tiles(void **state)
{
    (void)state;
    const uint32_t types[] = {TENSOR_TYPE_F32, TENSOR_TYPE_F16, TENSOR_TYPE_BF16,
                              TENSOR_TYPE_Q4_0, TENSOR_TYPE_Q8_0, TENSOR_TYPE_Q4_1,
                              TENSOR_TYPE_MXFP4, TENSOR_TYPE_IQ4_NL};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        check_expert_tiles(types[i], 160);
    const uint32_t k_types[] = {TENSOR_TYPE_Q2_K, TENSOR_TYPE_Q4_K, TENSOR_TYPE_Q6_K,
                                TENSOR_TYPE_IQ4_XS};
    for (size_t i = 0; i < sizeof k_types / sizeof k_types[0]; i++)
        check_expert_tiles(k_types[i], 512);
}


/* A prompt's pairs past vk_moe_tile's threshold grouped in tiles of 64 and multiplied by the
 * tiled kernel (matmul_tiled.glsl), for every weight type, as the CPU's product of each
 * pair's expert rows with its token's quantized input; with and without integer dot
 * products, the same bits. Ragged loads: expert 0 takes a pair of every token (100: a tile
 * and 36), expert 4 66 (a tile and 2), expert 2 34, experts 1, 3 and 5 none; 70 rows an
 * expert (a row tile and 6); the experts in two buffers (3 and 3). */
static void check_expert_tiles_tiled(uint32_t type, size_t n_in)
{
    enum { EXPERTS = 6, ROWS = 70, TOKENS = 100, USED = 2, PAIRS = TOKENS * USED, FIRST = 3 };
    assert_int_equal(vk_moe_tile(dev, PAIRS, EXPERTS), VK_MOE_TILED_TILE);
    const quant_ops *ops = quant_ops_get(type, CPU_LEVEL_SCALAR);
    size_t row_bytes, expert_bytes, act_bytes = quant_act_row_bytes(type, n_in);
    assert_true(tensor_type_row_bytes(type, n_in, &row_bytes));
    expert_bytes = row_bytes * ROWS;
    float *wf = random_floats(n_in * ROWS * EXPERTS), *x = random_floats(n_in * TOKENS);
    uint8_t *w = malloc(expert_bytes * EXPERTS), *act = malloc(act_bytes * TOKENS);
    float *want = malloc(PAIRS * ROWS * sizeof *want), *got = malloc(PAIRS * ROWS * sizeof *got);
    float *other = malloc(PAIRS * ROWS * sizeof *other);
    assert_true(w && act && want && got && other);
    weight_rows(type, wf, w, n_in, ROWS * EXPERTS);
    quant_quantize_activations(ops, x, n_in, TOKENS, act);
    uint32_t ids[PAIRS];
    for (uint32_t i = 0; i < PAIRS; i++) {
        uint32_t t = i / USED;
        ids[i] = i % USED == 0 ? 0 : t % 3 == 0 ? 2 : 4;
        quant_matmul_rows(ops, w + ids[i] * expert_bytes, n_in, 0, ROWS, act + t * act_bytes,
                          1, want + i * ROWS, ROWS);
    }
    uint32_t max_tiles = vk_moe_max_tiles(PAIRS, EXPERTS, VK_MOE_TILED_TILE);
    vk_buffer parts[2] = {device_buffer(w, FIRST * expert_bytes),
                          device_buffer(w + FIRST * expert_bytes, (EXPERTS - FIRST) * expert_bytes)};
    vk_buffer bx = device_buffer(x, n_in * TOKENS * 4), bi = device_buffer(ids, sizeof ids);
    vk_buffer bq = device_buffer(NULL, vk_matmul_quants_bytes(n_in * PAIRS));
    vk_buffer bs = device_buffer(NULL, vk_matmul_scales_bytes(n_in * PAIRS));
    vk_buffer by = device_buffer(NULL, PAIRS * ROWS * 4), bxg = device_buffer(NULL, n_in * PAIRS * 4);
    vk_buffer bslot = device_buffer(NULL, PAIRS * 4), brows = device_buffer(NULL, PAIRS * 4);
    vk_buffer bsid = device_buffer(NULL, PAIRS * 4), btiles = device_buffer(NULL, max_tiles * 12);
    bool first = dev->int_dot;
    for (int way = 0; way < (dev->has_int_dot ? 2 : 1); way++) {
        use_int_dot(way == 0 ? first : !first);
        vk_commands c = begin();
        vk_op_moe_group(&c, vk_whole(&bi), vk_whole(&bslot), vk_whole(&brows), vk_whole(&bsid),
                        vk_whole(&btiles), PAIRS, EXPERTS, USED, VK_MOE_TILED_TILE);
        vk_op_get_rows(&c, TENSOR_TYPE_F32, vk_whole(&bx), n_in * 4, vk_whole(&brows),
                       vk_whole(&bxg), (uint32_t)n_in, PAIRS);
        for (uint32_t p = 0; p < 2; p++)
            vk_op_matmul_expert_tiles(&c, type, vk_whole(&parts[p]), row_bytes, vk_whole(&bxg),
                                      vk_whole(&bq), vk_whole(&bs), vk_whole(&btiles),
                                      vk_whole(&by), (uint32_t)n_in, ROWS, PAIRS, max_tiles,
                                      VK_MOE_TILED_TILE, p ? FIRST : 0, FIRST);
        submit(&c);
        read_back(&by, way == 0 ? got : other, PAIRS * ROWS * 4);
    }
    use_int_dot(first);
    uint32_t slot_of[PAIRS], *tiles = malloc(max_tiles * 12);
    assert_non_null(tiles);
    read_back(&bslot, slot_of, sizeof slot_of), read_back(&btiles, tiles, max_tiles * 12);
    const uint32_t want_tiles[][2] = {{0, 64}, {0, 36}, {2, 34}, {4, 64}, {4, 2}};
    for (uint32_t t = 0; t < max_tiles; t++) {
        uint32_t count = t < 5 ? want_tiles[t][1] : 0;
        assert_int_equal(tiles[3 * t + 2], count);
        if (count)
            assert_int_equal(tiles[3 * t], want_tiles[t][0]);
    }
    char what[96];
    snprintf(what, sizeof what, "tiled expert products %s, %zu wide", tensor_type_name(type),
             n_in);
    float *in_pairs = malloc(PAIRS * ROWS * sizeof *in_pairs);
    assert_non_null(in_pairs);
    for (uint32_t i = 0; i < PAIRS; i++) {
        assert_true(slot_of[i] < PAIRS);
        memcpy(in_pairs + i * ROWS, got + slot_of[i] * ROWS, ROWS * sizeof *got);
    }
    assert_close(what, in_pairs, want, PAIRS * ROWS, 1e-5);
    if (dev->has_int_dot && memcmp(got, other, PAIRS * ROWS * sizeof *got) != 0)
        fail_msg("%s: the products differ with and without integer dot products", what);
    vk_buffer *bufs[] = {&parts[0], &parts[1], &bx, &bi, &bq, &bs, &by, &bxg, &bslot, &brows,
                         &bsid, &btiles};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        vk_buffer_free(dev, bufs[i]);
    free(wf), free(x), free(w), free(act), free(want), free(got), free(other), free(tiles);
    free(in_pairs);
}

static void test_matmul_expert_tiles_tiled(void **state)
{
    (void)state;
    const uint32_t types[] = {TENSOR_TYPE_F32,  TENSOR_TYPE_F16,  TENSOR_TYPE_BF16,
                              TENSOR_TYPE_Q4_0, TENSOR_TYPE_Q4_1, TENSOR_TYPE_Q5_0,
                              TENSOR_TYPE_Q5_1, TENSOR_TYPE_Q8_0, TENSOR_TYPE_MXFP4,
                              TENSOR_TYPE_IQ4_NL};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        check_expert_tiles_tiled(types[i], 160);
    const uint32_t k_types[] = {TENSOR_TYPE_Q2_K, TENSOR_TYPE_Q3_K, TENSOR_TYPE_Q4_K,
                                TENSOR_TYPE_Q5_K, TENSOR_TYPE_Q6_K, TENSOR_TYPE_IQ4_XS};
    for (size_t i = 0; i < sizeof k_types / sizeof k_types[0]; i++)
        check_expert_tiles_tiled(k_types[i], 512);
}

/* The lattice IQ types (random blocks: every grid index, sign and scale) through each kernel
 * against the CPU: the per-row product (one token, and 7 over rows of 5 super-blocks), a
 * matrix split across buffers, the tiled product, the expert products pair by pair, in tiles
 * of 8 and in tiles of 64, and get_rows' dequantization (exact). */
static void test_lattice_types(void **state)
{
    (void)state;
    for (size_t i = 0; i < LATTICE_TYPES; i++) {
        uint32_t type = lattice_types[i];
        check_matmul(type, 768, 17, 1);
        check_matmul(type, 1280, 9, 7);
        check_matmul_split(type);
        check_matmul(type, 512, 67, 70);
        check_matmul_experts(type, 768, 3);
        check_expert_tiles(type, 512);
        check_expert_tiles_tiled(type, 512);
        check_get_rows(type);
    }
}

/* The tiled kernel takes a prompt's experts from 32 pairs an expert on average, where the
 * device's limits take its tile. */
static void test_moe_tile_threshold(void **state)
{
    (void)state;
    assert_int_equal(vk_moe_tile(dev, 32 * 6 - 1, 6), VK_MOE_ROW_TILE);
    assert_int_equal(vk_moe_tile(dev, 32 * 6, 6), VK_MOE_TILED_TILE);
    uint32_t invocations = dev->max_invocations;
    dev->max_invocations = VK_TILED_INVOCATIONS / 2;
    assert_int_equal(vk_moe_tile(dev, 32 * 6, 6), VK_MOE_ROW_TILE);
    dev->max_invocations = invocations;
}

/* The pairs' rows plus their experts' biases, then each token's rows weighted and summed in
 * moe.c's order; and gpt-oss's clamped SwiGLU against the CPU's. */
static void test_moe_bias_combine_and_swiglu_oai(void **state)
{
    (void)state;
    enum { EXPERTS = 6, N = 71, TOKENS = 5, USED = 3, PAIRS = TOKENS * USED };
    float *rows = random_floats(PAIRS * N), *bias = random_floats(EXPERTS * N);
    float *weights = random_floats(PAIRS), biased[PAIRS * N], want[TOKENS * N], got[PAIRS * N];
    uint32_t ids[PAIRS];
    for (size_t i = 0; i < PAIRS; i++)
        ids[i] = (uint32_t)((i * 5 + 1) % EXPERTS);
    for (size_t i = 0; i < PAIRS * N; i++)
        biased[i] = rows[i] + bias[ids[i / N] * N + i % N];
    for (size_t t = 0; t < TOKENS; t++)
        for (size_t j = 0; j < USED; j++)
            for (size_t i = 0; i < N; i++) {
                float term = biased[(t * USED + j) * N + i] * weights[t * USED + j];
                want[t * N + i] = j == 0 ? term : want[t * N + i] + term;
            }
    vk_buffer br = device_buffer(rows, sizeof biased), bb = device_buffer(bias, EXPERTS * N * 4);
    vk_buffer bi = device_buffer(ids, sizeof ids), bw = device_buffer(weights, PAIRS * 4);
    vk_buffer bo = device_buffer(NULL, sizeof want);
    vk_commands c = begin();
    vk_op_moe_bias(&c, vk_whole(&bb), vk_whole(&bi), vk_whole(&br), N, PAIRS);
    vk_op_moe_combine(&c, vk_whole(&br), vk_whole(&bw), vk_whole(&bo), N, USED, TOKENS);
    submit(&c);
    read_back(&br, got, sizeof biased);
    assert_close("expert biases", got, biased, PAIRS * N, 0.0);
    read_back(&bo, got, sizeof want);
    assert_close("weighted sum of experts", got, want, TOKENS * N, 1e-6);
    vk_buffer *bufs[] = {&br, &bb, &bi, &bw, &bo};
    for (size_t i = 0; i < 5; i++)
        vk_buffer_free(dev, bufs[i]);
    free(rows), free(bias), free(weights);

    enum { M = 100003 };
    float *g = random_floats(M), *u = random_floats(M), *cpu = malloc(M * 4), *gpu = malloc(M * 4);
    for (size_t i = 0; i < M; i++)
        g[i] *= 12.0f, u[i] *= 12.0f; /* both sides of both clamps */
    memcpy(cpu, g, M * 4);
    block_swiglu_oai(cpu, u, M, 1.702f, 7.0f);
    vk_buffer bg = device_buffer(g, M * 4), bu = device_buffer(u, M * 4);
    c = begin();
    vk_op_swiglu_oai(&c, vk_whole(&bg), vk_whole(&bu), M, 1.702f, 7.0f);
    submit(&c);
    read_back(&bg, gpu, M * 4);
    assert_close("clamped swiglu", gpu, cpu, M, 1e-5);
    vk_buffer_free(dev, &bg), vk_buffer_free(dev, &bu);
    free(g), free(u), free(cpu), free(gpu);
}

/* llama4's experts that weight their input: each pair's input row its token's row times the
 * pair's weight, in the pair's own row and through a permutation of slots (moe_group's), as
 * moe.c makes them (one product each, to the bit); then the experts' rows summed unweighted
 * from the first on, pair by pair and through the slots. */
static void test_moe_weigh_inputs_and_unweighted_combine(void **state)
{
    (void)state;
    enum { N = 71, TOKENS = 5, USED = 3, PAIRS = TOKENS * USED };
    float *x = random_floats(TOKENS * N), *weights = random_floats(PAIRS);
    float *rows = random_floats(PAIRS * N);
    float want[PAIRS * N], want_slots[PAIRS * N], got[PAIRS * N];
    float want_sum[TOKENS * N], got_sum[TOKENS * N];
    uint32_t slot_of[PAIRS];
    for (uint32_t p = 0; p < PAIRS; p++)
        slot_of[p] = (p * 7 + 3) % PAIRS; /* 7 and 15 coprime: a permutation */
    for (size_t p = 0; p < PAIRS; p++)
        for (size_t i = 0; i < N; i++) {
            float row = x[p / USED * N + i] * weights[p];
            want[p * N + i] = row;
            want_slots[slot_of[p] * N + i] = row;
        }
    for (size_t t = 0; t < TOKENS; t++)
        for (size_t j = 0; j < USED; j++)
            for (size_t i = 0; i < N; i++) {
                float r = rows[(t * USED + j) * N + i];
                want_sum[t * N + i] = j == 0 ? r : want_sum[t * N + i] + r;
            }
    float slotted[PAIRS * N]; /* the same rows in their pairs' slots */
    for (uint32_t p = 0; p < PAIRS; p++)
        memcpy(slotted + slot_of[p] * N, rows + p * N, N * sizeof *rows);
    vk_buffer bx = device_buffer(x, TOKENS * N * 4), bw = device_buffer(weights, PAIRS * 4);
    vk_buffer bslot = device_buffer(slot_of, sizeof slot_of);
    vk_buffer bo = device_buffer(NULL, sizeof want), bos = device_buffer(NULL, sizeof want);
    vk_buffer br = device_buffer(rows, sizeof got), brs = device_buffer(slotted, sizeof slotted);
    vk_buffer bsum = device_buffer(NULL, sizeof want_sum), bsums = device_buffer(NULL, sizeof want_sum);
    vk_commands c = begin();
    vk_op_moe_weigh_inputs(&c, vk_whole(&bx), vk_whole(&bw), (vk_span){0}, vk_whole(&bo), N,
                           USED, TOKENS);
    vk_op_moe_weigh_inputs(&c, vk_whole(&bx), vk_whole(&bw), vk_whole(&bslot), vk_whole(&bos),
                           N, USED, TOKENS);
    vk_op_moe_combine(&c, vk_whole(&br), (vk_span){0}, vk_whole(&bsum), N, USED, TOKENS);
    vk_op_moe_combine_slots(&c, vk_whole(&brs), (vk_span){0}, vk_whole(&bslot),
                            vk_whole(&bsums), N, USED, TOKENS);
    submit(&c);
    read_back(&bo, got, sizeof got);
    assert_close("pairs' weighted inputs", got, want, PAIRS * N, 0.0);
    read_back(&bos, got, sizeof got);
    assert_close("slots' weighted inputs", got, want_slots, PAIRS * N, 0.0);
    read_back(&bsum, got_sum, sizeof got_sum);
    assert_close("unweighted sum of experts", got_sum, want_sum, TOKENS * N, 0.0);
    read_back(&bsums, got_sum, sizeof got_sum);
    assert_close("unweighted sum of slotted experts", got_sum, want_sum, TOKENS * N, 0.0);
    vk_buffer *bufs[] = {&bx, &bw, &bslot, &bo, &bos, &br, &brs, &bsum, &bsums};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        vk_buffer_free(dev, bufs[i]);
    free(x), free(weights), free(rows);
}

/* ---- the cache and attention ---- */

/* What an attention check's tokens see and how they score: with a window, the last
 * `window` cells only; both ways, up to a later cell than the token's own (last_at); with
 * sinks, a sink logit per head in each denominator; around, only the cells less than
 * `around` from its own on either side; with ALiBi, each score minus a slope per head times
 * the distance. */
typedef struct attention_case {
    bool f16;
    float softcap;
    uint32_t window;
    bool both_ways, with_sinks;
    uint32_t around;
    bool alibi;
} attention_case;

/* Keys and values stored for two sequences, then attention of tokens at several depths
 * (one of a chunk and a bit, one short, one at the first cell) against softmax(scale * cap(q.k)) . v
 * in double over the values as the cache holds them, as the case says. */
static void check_attention_heads(attention_case ac, size_t DK, size_t DV)
{
    enum { HEADS = 4, KV_HEADS = 2, CELLS = 100, N_SEQ = 2 };
    const uint32_t store_len[N_SEQ] = {71, 21};
    enum { STORED = 71 + 21, QUERIES = 4 };
    /* (sequence, cell) of each query, then the last cell each sees both ways */
    const uint32_t query[QUERIES * 3] = {0, 70, 1, 20, 0, 3, 1, 0, 70, 20, 9, 6};
    uint32_t tokens[STORED * 2];
    for (uint32_t s = 0, t = 0; s < N_SEQ; s++)
        for (uint32_t cell = 0; cell < store_len[s]; cell++, t++)
            tokens[2 * t] = s, tokens[2 * t + 1] = cell;
    float *k = random_floats(STORED * KV_HEADS * DK), *v = random_floats(STORED * KV_HEADS * DV);
    float *q = random_floats(QUERIES * HEADS * DK);
    size_t n_out = QUERIES * HEADS * DV;
    float *want = malloc(n_out * sizeof *want), *got = malloc(n_out * sizeof *got);
    assert_true(want && got);
    const float scale = 0.125f;
    const float sinks[HEADS] = {0.5f, -3.0f, 6.0f, 40.0f}; /* the last one above every score */
    const float slopes[HEADS] = {0.5f, 0.25f, 0.0625f, 0.00390625f};
    bool f16 = ac.f16;
    float softcap = ac.softcap;
    for (size_t i = 0; i < QUERIES * HEADS * DK; i++)
        q[i] *= 4.0f;
    for (size_t qi = 0; qi < QUERIES; qi++) {
        uint32_t seq = query[2 * qi], own = query[2 * qi + 1];
        uint32_t last = ac.both_ways ? query[2 * QUERIES + qi] : own;
        uint32_t from = ac.window && own + 1 > ac.window ? own + 1 - ac.window : 0;
        if (ac.around && own + 1 > ac.around && own + 1 - ac.around > from)
            from = own + 1 - ac.around;
        if (ac.around && last > own + ac.around - 1)
            last = own + ac.around - 1;
        uint32_t first = seq == 0 ? 0 : store_len[0]; /* the sequence's first stored token */
        for (size_t h = 0; h < HEADS; h++) {
            size_t kvh = h / (HEADS / KV_HEADS);
            double scores[CELLS], max = -INFINITY, sum = 0.0;
            for (uint32_t c = from; c <= last; c++) {
                double dot = 0.0;
                for (size_t i = 0; i < DK; i++) {
                    float key = k[((first + c) * KV_HEADS + kvh) * DK + i];
                    key = f16 ? quant_f16_to_f32(quant_f32_to_f16(key)) : key;
                    dot += (double)q[(qi * HEADS + h) * DK + i] * key;
                }
                if (softcap > 0.0f)
                    dot = softcap * tanh(dot / softcap);
                scores[c] = scale * dot;
                if (ac.alibi)
                    scores[c] -= slopes[h] * (c > own ? c - own : own - c);
                max = fmax(max, scores[c]);
            }
            if (ac.with_sinks) { /* a sink joins the denominator only */
                max = fmax(max, sinks[h]);
                sum += exp(sinks[h] - max);
            }
            for (uint32_t c = from; c <= last; c++)
                sum += scores[c] = exp(scores[c] - max);
            for (size_t d = 0; d < DV; d++) {
                double acc = 0.0;
                for (uint32_t c = from; c <= last; c++) {
                    float value = v[((first + c) * KV_HEADS + kvh) * DV + d];
                    value = f16 ? quant_f16_to_f32(quant_f32_to_f16(value)) : value;
                    acc += scores[c] * value;
                }
                want[(qi * HEADS + h) * DV + d] = (float)(acc / sum);
            }
        }
    }
    vk_cache_shape ks = {KV_HEADS, DK, CELLS, f16}, vs = {KV_HEADS, DV, CELLS, f16};
    vk_buffer bt = device_buffer(tokens, sizeof tokens), bk = device_buffer(k, STORED * KV_HEADS * DK * 4);
    vk_buffer bv = device_buffer(v, STORED * KV_HEADS * DV * 4), bq = device_buffer(q, QUERIES * HEADS * DK * 4);
    vk_buffer bqt = device_buffer(query, sizeof query), bo = device_buffer(NULL, n_out * 4);
    vk_buffer kc = device_buffer(NULL, vk_cache_bytes(&ks, N_SEQ));
    vk_buffer vc = device_buffer(NULL, vk_cache_bytes(&vs, N_SEQ));
    vk_buffer bsink = device_buffer(sinks, sizeof sinks);
    vk_buffer bslope = device_buffer(slopes, sizeof slopes);
    vk_commands c = begin();
    vk_op_kv_store(&c, vk_whole(&bt), vk_whole(&bk), vk_whole(&kc), &ks, STORED);
    vk_op_kv_store(&c, vk_whole(&bt), vk_whole(&bv), vk_whole(&vc), &vs, STORED);
    vk_attention_shape shape = {QUERIES, HEADS, KV_HEADS, DK, DV, CELLS, f16, scale, softcap,
                                ac.window, ac.both_ways ? 2 * QUERIES : 0, ac.around};
    if (ac.with_sinks)
        vk_op_attention_sinks(&c, vk_whole(&bqt), vk_whole(&bq), vk_whole(&kc), vk_whole(&vc),
                              vk_whole(&bsink), vk_whole(&bo), &shape);
    else if (ac.alibi)
        vk_op_attention_alibi(&c, vk_whole(&bqt), vk_whole(&bq), vk_whole(&kc), vk_whole(&vc),
                              vk_whole(&bslope), vk_whole(&bo), &shape);
    else
        vk_op_attention(&c, vk_whole(&bqt), vk_whole(&bq), vk_whole(&kc), vk_whole(&vc),
                        vk_whole(&bo), &shape);
    submit(&c);
    read_back(&bo, got, n_out * sizeof *got);
    char what[128];
    snprintf(what, sizeof what, "attention over an %s cache, softcap %g, window %u%s%s, "
             "around %u%s, heads %zu and %zu wide", f16 ? "F16" : "F32", (double)softcap,
             ac.window, ac.both_ways ? ", both ways" : "", ac.with_sinks ? ", sinks" : "",
             ac.around, ac.alibi ? ", ALiBi" : "", DK, DV);
    assert_close(what, got, want, n_out, 1e-5);
    vk_buffer *bufs[] = {&bt, &bk, &bv, &bq, &bqt, &bo, &kc, &vc, &bsink, &bslope};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        vk_buffer_free(dev, bufs[i]);
    free(k), free(v), free(q), free(want), free(got);
}

static void check_attention(attention_case ac)
{
    check_attention_heads(ac, 64, 96);
}

static void test_attention(void **state)
{
    (void)state;
    check_attention((attention_case){.f16 = true});
    check_attention((attention_case){.f16 = false});
    check_attention((attention_case){.f16 = true, .softcap = 2.5f});
    check_attention((attention_case){.f16 = false, .with_sinks = true});
    check_attention((attention_case){.f16 = true, .window = 5, .with_sinks = true});
}

/* Heads wider than the 256 dimensions the shader holds at once: keys of two and three
 * query chunks (a partial last one), values of two and three output passes, latent
 * attention's 576 and 512, and narrow keys beside wide values. */
static void test_attention_wide_heads(void **state)
{
    (void)state;
    check_attention_heads((attention_case){.f16 = false}, 258, 514);
    check_attention_heads((attention_case){.f16 = true, .window = 67, .with_sinks = true}, 576,
                          512);
    check_attention_heads((attention_case){.f16 = false, .softcap = 2.5f, .both_ways = true},
                          130, 770);
    check_attention_heads((attention_case){.f16 = true}, 702, 62);
}

/* f32 to f16 as the CPU rounds it (to nearest, ties to even), through the F16 cache's store:
 * every tie, and the values either side of it, in the normal range and at each subnormal
 * shift; the edges of overflow and underflow; zeros, infinities, a NaN; then values across
 * the whole range. Bit for bit: GLSL's own packHalf2x16 may round otherwise on a device. */
static void test_f16_rounding_is_the_cpus(void **state)
{
    (void)state;
    enum { DIM = 256, TOKENS = 24, N = DIM * TOKENS };
    uint32_t *bits = calloc(N, sizeof *bits);
    assert_non_null(bits);
    size_t n = 0;
    /* normal halves: 13 bits rounded off, the kept bit even or odd */
    for (uint32_t e = 113; e <= 142; e++)
        for (uint32_t kept = 0; kept < 2; kept++)
            for (int d = -1; d <= 1; d++)
                bits[n++] = (e << 23) | (kept << 13) | (uint32_t)(0x1000 + d);
    /* subnormal halves: 2^-25 (half of the least) up to just under 2^-14 */
    for (uint32_t e = 102; e <= 112; e++) {
        uint32_t shift = 126 - e, half_unit = 1u << (shift - 1);
        for (uint32_t kept = 0; kept < 2; kept++)
            for (int d = -1; d <= 1; d++)
                bits[n++] = (e << 23) | ((((kept << shift) | half_unit) + (uint32_t)d) & 0x7fffff);
    }
    const uint32_t edges[] = {
        0x477fefffu, 0x477ff000u, 0x477ff001u, 0x477fe000u, 0x7f7fffffu, /* about 65504 */
        0x387fffffu, 0x38800000u, 0x38000000u, 0x33000000u, 0x33000001u, /* 2^-14, 2^-15, 2^-25 */
        0x32ffffffu, 0x00000001u, 0x00000000u, 0x7f800000u, 0x7fc00000u, 0x3f800000u,
    };
    for (size_t i = 0; i < sizeof edges / sizeof *edges; i++)
        bits[n++] = edges[i];
    size_t special = n;
    for (size_t i = 0; i < special; i++) /* the same negated */
        bits[n++] = bits[i] ^ 0x80000000u;
    assert_true(n <= N);
    for (; n < N; n++) { /* exponents from 2^-30 to 2^20 */
        rng = rng * 1103515245u + 12345u;
        uint32_t mantissa = rng & 0x7fffff;
        rng = rng * 1103515245u + 12345u;
        bits[n] = ((rng >> 16) & 0x80000000u) | ((97u + (rng >> 8) % 51u) << 23) | mantissa;
    }
    float *x = malloc(N * sizeof *x);
    uint16_t *got = malloc(N * sizeof *got);
    assert_true(x && got);
    memcpy(x, bits, N * sizeof *x);
    uint32_t tokens[TOKENS * 2];
    for (uint32_t t = 0; t < TOKENS; t++)
        tokens[2 * t] = 0, tokens[2 * t + 1] = t;
    vk_cache_shape shape = {1, DIM, TOKENS, true};
    vk_buffer bt = device_buffer(tokens, sizeof tokens), bx = device_buffer(x, N * sizeof *x);
    vk_buffer bc = device_buffer(NULL, vk_cache_bytes(&shape, 1));
    vk_commands c = begin();
    vk_op_kv_store(&c, vk_whole(&bt), vk_whole(&bx), vk_whole(&bc), &shape, TOKENS);
    submit(&c);
    read_back(&bc, got, N * sizeof *got);
    for (size_t i = 0; i < N; i++)
        if (got[i] != quant_f32_to_f16(x[i]))
            fail_msg("f32 0x%08x: the device's f16 is 0x%04x, the CPU's 0x%04x", bits[i], got[i],
                     quant_f32_to_f16(x[i]));
    vk_buffer_free(dev, &bt), vk_buffer_free(dev, &bx), vk_buffer_free(dev, &bc);
    free(bits), free(x), free(got);
}

/* A context shift's move of cells 4..6 to dst..dst + 2 (1: down, 4: turned in place) with
 * their keys turned on their first rot components (up to DIM), on wide rows (latent
 * attention's 576): the rest copied as they are, the other cells untouched. */
static void check_kv_shift_wide(bool f16, bool neox, size_t rot, uint32_t dst)
{
    enum { KV_HEADS = 2, DIM = 576, MAX_ROT = DIM, CELLS = 12, STORED = 10 };
    uint32_t tokens[STORED * 2];
    for (uint32_t t = 0; t < STORED; t++)
        tokens[2 * t] = 0, tokens[2 * t + 1] = t;
    float *x = random_floats(STORED * KV_HEADS * DIM), cs[MAX_ROT];
    for (size_t i = 0; i < rot / 2; i++)
        cs[2 * i] = cosf(0.3f * (float)i + 0.1f), cs[2 * i + 1] = sinf(0.3f * (float)i + 0.1f);
    if (f16)
        for (size_t i = 0; i < STORED * KV_HEADS * DIM; i++)
            x[i] = quant_f16_to_f32(quant_f32_to_f16(x[i]));
    /* want[h][cell][d] */
    float *want = calloc(KV_HEADS * CELLS * DIM, sizeof *want);
    assert_non_null(want);
    for (size_t h = 0; h < KV_HEADS; h++)
        for (size_t c = 0; c < STORED; c++)
            memcpy(want + (h * CELLS + c) * DIM, x + (c * KV_HEADS + h) * DIM, DIM * 4);
    for (size_t h = 0; h < KV_HEADS; h++)
        for (size_t c = 0; c < 3; c++) {
            const float *row = x + ((4 + c) * KV_HEADS + h) * DIM;
            float *out = want + (h * CELLS + dst + c) * DIM;
            for (size_t d = 0; d < DIM; d++) {
                if (d >= rot) {
                    out[d] = row[d];
                    continue;
                }
                size_t i = neox ? d % (rot / 2) : d / 2;
                size_t a = neox ? i : 2 * i, b = neox ? i + rot / 2 : 2 * i + 1;
                bool second = neox ? d >= rot / 2 : d % 2 == 1;
                float co = cs[2 * i], si = cs[2 * i + 1];
                out[d] = second ? row[a] * si + row[b] * co : row[a] * co - row[b] * si;
            }
        }
    vk_cache_shape shape = {KV_HEADS, DIM, CELLS, f16};
    size_t bytes = vk_cache_bytes(&shape, 1);
    vk_buffer bt = device_buffer(tokens, sizeof tokens);
    vk_buffer bx = device_buffer(x, STORED * KV_HEADS * DIM * 4);
    vk_buffer bc = device_buffer(NULL, bytes), bcs = device_buffer(cs, rot * sizeof *cs);
    vk_commands c = begin();
    vk_op_kv_store(&c, vk_whole(&bt), vk_whole(&bx), vk_whole(&bc), &shape, STORED);
    vk_shift shift = {0, 4, dst, 3, true, neox, (uint32_t)rot};
    vk_op_kv_shift(&c, vk_whole(&bcs), vk_whole(&bc), &shape, &shift);
    submit(&c);
    void *raw = malloc(bytes);
    float *got = malloc(KV_HEADS * CELLS * DIM * sizeof *got);
    assert_true(raw && got);
    read_back(&bc, raw, bytes);
    for (size_t i = 0; i < KV_HEADS * CELLS * DIM; i++)
        got[i] = f16 ? quant_f16_to_f32(((const uint16_t *)raw)[i]) : ((const float *)raw)[i];
    for (size_t h = 0; h < KV_HEADS; h++) /* only the stored cells */
        for (size_t cell = 0; cell < STORED; cell++) {
            char what[96];
            snprintf(what, sizeof what, "%s%s shifted cache (%zu turned), head %zu cell %zu",
                     f16 ? "F16" : "F32", neox ? " NEOX" : "", rot, h, cell);
            size_t at = (h * CELLS + cell) * DIM;
            assert_close(what, got + at, want + at, DIM, f16 ? 1e-3 : 1e-6);
        }
    vk_buffer_free(dev, &bt), vk_buffer_free(dev, &bx), vk_buffer_free(dev, &bc);
    vk_buffer_free(dev, &bcs);
    free(x), free(want), free(raw), free(got);
}

static void test_kv_shift_wide_rows(void **state)
{
    (void)state;
    check_kv_shift_wide(false, false, 64, 1);
    check_kv_shift_wide(true, false, 64, 1);
    check_kv_shift_wide(true, true, 64, 1);
    /* more than 256 turned components, halves of an odd number of pairs (F16 words of two
     * pairs), in place and moved */
    check_kv_shift_wide(false, true, 574, 1);
    check_kv_shift_wide(true, true, 574, 1);
    check_kv_shift_wide(true, true, 574, 4);
    check_kv_shift_wide(true, false, 320, 4);
    check_kv_shift_wide(false, false, 320, 4);
}

/* A window shorter than some tokens' depth and longer than others' (5: inside the first
 * chunk; 67: across a chunk's end), and tokens that see cells after their own. */
static void test_attention_window_and_both_ways(void **state)
{
    (void)state;
    check_attention((attention_case){.f16 = false, .window = 5});
    check_attention((attention_case){.f16 = true, .softcap = 2.5f, .window = 67});
    check_attention((attention_case){.f16 = false, .both_ways = true});
    check_attention((attention_case){.f16 = false, .window = 5, .both_ways = true});
}

/* An encoder's two-sided window (around 3: inside the first chunk, clipped at the first
 * cell and at the last a token sees; 40: from across a chunk's end), and ALiBi's distances
 * on both sides of a token, alone and in such a window. */
static void test_attention_around_and_alibi(void **state)
{
    (void)state;
    check_attention((attention_case){.f16 = false, .both_ways = true, .around = 3});
    check_attention((attention_case){.f16 = true, .around = 40});
    check_attention((attention_case){.f16 = false, .both_ways = true, .alibi = true});
    check_attention((attention_case){.f16 = true, .both_ways = true, .around = 3, .alibi = true});
}

/* ---- Gated DeltaNet (qwen35's recurrent layers) ---- */

/* The attention's output gate: x *= sigmoid(y), y repeating, saturated gates too. */
static void test_mul_sigmoid(void **state)
{
    (void)state;
    enum { N = 3001, Y = 1000 };
    float *x = random_floats(N), *y = random_floats(Y), want[N], got[N];
    for (size_t i = 0; i < Y; i++)
        y[i] *= 30.0f;
    for (size_t i = 0; i < N; i++)
        want[i] = x[i] * (1.0f / (1.0f + expf(-y[i % Y])));
    vk_buffer bx = device_buffer(x, sizeof want), by = device_buffer(y, Y * 4);
    vk_commands c = begin();
    vk_op_binary(&c, VK_MUL_SIGMOID, vk_whole(&bx), vk_whole(&by), N, Y, 0.0f);
    submit(&c);
    read_back(&bx, got, sizeof got);
    assert_close("x * sigmoid(y)", got, want, N, 1e-5);
    vk_buffer_free(dev, &bx), vk_buffer_free(dev, &by);
    free(x), free(y);
}

/* GELU by erf (mllama's vision MLP) over -6..6 as the CPU's erff gives it: the shader's erf
 * is within 1.5e-7, times |x| / 2, and the result's own rounding. */
static void test_gelu_erf(void **state)
{
    (void)state;
    enum { N = 3001 };
    float *x = random_floats(N), want[N], got[N];
    for (size_t i = 0; i < N; i++) {
        x[i] *= 6.0f;
        want[i] = 0.5f * x[i] * (1.0f + erff(x[i] * (float)M_SQRT1_2));
    }
    vk_buffer bx = device_buffer(x, sizeof want);
    vk_commands c = begin();
    vk_op_binary(&c, VK_GELU_ERF, vk_whole(&bx), (vk_span){0}, N, 0, 0.0f);
    submit(&c);
    read_back(&bx, got, sizeof got);
    assert_close("gelu by erf", got, want, N, 1e-6);
    vk_buffer_free(dev, &bx);
    free(x);
}

/* The AltUp router's tanh over -4..4 as the CPU's tanhf. */
static void test_tanh(void **state)
{
    (void)state;
    enum { N = 3001 };
    float *x = random_floats(N), want[N], got[N];
    for (size_t i = 0; i < N; i++) {
        x[i] *= 4.0f;
        want[i] = tanhf(x[i]);
    }
    vk_buffer bx = device_buffer(x, sizeof want);
    vk_commands c = begin();
    vk_op_binary(&c, VK_TANH, vk_whole(&bx), (vk_span){0}, N, 0, 0.0f);
    submit(&c);
    read_back(&bx, got, sizeof got);
    assert_close("tanh", got, want, N, 1e-6);
    vk_buffer_free(dev, &bx);
    free(x);
}

/* laguna's gate on its attention's output: 7 tokens of 5 heads of 6 values, each head's
 * values times softplus of its gate (gates over -30..30: linear above 20), then each value
 * its own gate, as the CPU's delta_net_softplus gives them. */
static void test_mul_softplus_groups(void **state)
{
    (void)state;
    enum { N = 7 * 5 * 6, HEAD = 6 };
    const size_t groups[] = {HEAD, 1};
    for (size_t k = 0; k < 2; k++) {
        size_t span = groups[k], n_gates = N / span;
        float *x = random_floats(N), *gate = random_floats(n_gates), want[N], got[N];
        for (size_t i = 0; i < n_gates; i++)
            gate[i] *= 30.0f;
        for (size_t i = 0; i < N; i++)
            want[i] = x[i] * delta_net_softplus(gate[i / span]);
        vk_buffer bx = device_buffer(x, sizeof want), bg = device_buffer(gate, n_gates * 4);
        vk_commands c = begin();
        vk_op_binary(&c, VK_MUL_SOFTPLUS_GROUPS, vk_whole(&bx), vk_whole(&bg), N,
                     (uint32_t)span, 0.0f);
        submit(&c);
        read_back(&bx, got, sizeof got);
        assert_close("x * softplus(gate)", got, want, N, 1e-5);
        vk_buffer_free(dev, &bx), vk_buffer_free(dev, &bg);
        free(x), free(gate);
    }
}

/* ---- gemma3n's AltUp and sparse gates ---- */

/* gemma3n's 4 streams of 5 tokens of 333 floats (not a whole number of workgroups) in blocks
 * room for 7 tokens apart, as a context's micro-batch holds them: the predictions, then the
 * streams corrected from them, each the CPU's to the bit, then a row added to every stream
 * but the first; the room past the tokens is left as it was. */
static void test_altup_predict_and_correct(void **state)
{
    (void)state;
    enum { A = 4, E = 333, N = 5, BATCH = 7, STRIDE = BATCH * E, ALL = A * STRIDE };
    float *streams = random_floats(ALL), *pred_coef = random_floats(N * A * A);
    float *x = random_floats(N * E), *correct_coef = random_floats(N * A);
    float *want_pred = malloc(ALL * 4), *got_pred = malloc(ALL * 4);
    float *want = malloc(ALL * 4), *got = malloc(ALL * 4);
    assert_true(want_pred && got_pred && want && got);
    for (size_t i = 0; i < ALL; i++)
        want_pred[i] = want[i] = -7.0f; /* the room past the tokens */
    gemma3n_altup_predict_rows(streams, STRIDE, pred_coef, A, E, N, want_pred);
    gemma3n_altup_correct_rows(x, want_pred, STRIDE, correct_coef, A, E, N, want);
    for (size_t j = 1; j < A; j++) /* the per-layer branch's output, x standing for it */
        for (size_t i = 0; i < N * E; i++)
            want[j * STRIDE + i] += x[i];
    vk_buffer bs = device_buffer(streams, ALL * 4), bpc = device_buffer(pred_coef, N * A * A * 4);
    vk_buffer bp = device_buffer(want_pred, ALL * 4), bx = device_buffer(x, N * E * 4);
    vk_buffer bcc = device_buffer(correct_coef, N * A * 4), bo = device_buffer(want, ALL * 4);
    /* the device starts from the room's values alone, not from the answers */
    for (size_t i = 0; i < ALL; i++)
        got[i] = -7.0f;
    corral_error err = {0};
    assert_true(vk_buffer_write(dev, &bp, 0, got, ALL * 4, &err));
    assert_true(vk_buffer_write(dev, &bo, 0, got, ALL * 4, &err));
    vk_commands c = begin();
    vk_op_altup_predict(&c, vk_whole(&bs), vk_whole(&bpc), vk_whole(&bp), E, A, N, STRIDE);
    vk_op_altup_correct(&c, vk_whole(&bx), vk_whole(&bp), vk_whole(&bcc), vk_whole(&bo), E, A,
                        N, STRIDE);
    vk_op_altup_add(&c, vk_whole(&bx), vk_whole(&bo), E, A, N, STRIDE);
    submit(&c);
    read_back(&bp, got_pred, ALL * 4);
    read_back(&bo, got, ALL * 4);
    assert_close("AltUp predictions", got_pred, want_pred, ALL, 0.0);
    assert_close("AltUp corrected streams plus the branch", got, want, ALL, 0.0);
    vk_buffer_free(dev, &bs), vk_buffer_free(dev, &bpc), vk_buffer_free(dev, &bp);
    vk_buffer_free(dev, &bx), vk_buffer_free(dev, &bcc), vk_buffer_free(dev, &bo);
    free(streams), free(pred_coef), free(x), free(correct_coef);
    free(want_pred), free(got_pred), free(want), free(got);
}

/* The sparse gate over rows of 1001 (not a whole number of workgroups) at gemma3n's cutoff
 * (1.6448533 standard deviations), one row far from 0 (its mean large beside its spread):
 * some of each row kept and some zeroed, as gemma3n_sparse_gate leaves them. */
static void test_sparse_gate(void **state)
{
    (void)state;
    enum { N = 1001, ROWS = 3 };
    const float std_mul = 1.6448533535003662f;
    float *x = random_floats(N * ROWS), want[N * ROWS], got[N * ROWS];
    for (size_t i = 0; i < N; i++)
        x[2 * N + i] = 20.0f + x[2 * N + i] * 3.0f;
    memcpy(want, x, sizeof want);
    for (size_t r = 0; r < ROWS; r++) {
        gemma3n_sparse_gate(want + r * N, N, std_mul);
        size_t kept = 0;
        for (size_t i = 0; i < N; i++)
            kept += want[r * N + i] > 0.0f;
        assert_true(kept > 0 && kept < N / 4);
    }
    vk_buffer bx = device_buffer(x, sizeof want);
    vk_commands c = begin();
    vk_op_sparse_gate(&c, vk_whole(&bx), N, ROWS, std_mul);
    submit(&c);
    read_back(&bx, got, sizeof got);
    assert_close("sparse gate", got, want, N * ROWS, 1e-5);
    vk_buffer_free(dev, &bx);
    free(x);
}

/* Rows of 1001 rescaled to the lengths of rows 7 times longer and to one shorter, as
 * gemma3n_match_magnitude does. */
static void test_match_magnitude(void **state)
{
    (void)state;
    enum { N = 1001, ROWS = 3 };
    float *target = random_floats(N * ROWS), *y = random_floats(N * ROWS);
    float want[N * ROWS], got[N * ROWS];
    for (size_t i = 0; i < 2 * N; i++)
        target[i] *= 7.0f;
    for (size_t i = 2 * N; i < 3 * N; i++)
        target[i] *= 0.25f;
    memcpy(want, y, sizeof want);
    for (size_t r = 0; r < ROWS; r++)
        gemma3n_match_magnitude(target + r * N, want + r * N, N);
    vk_buffer bt = device_buffer(target, sizeof want), by = device_buffer(y, sizeof want);
    vk_commands c = begin();
    vk_op_match_magnitude(&c, vk_whole(&bt), vk_whole(&by), N, ROWS);
    submit(&c);
    read_back(&by, got, sizeof got);
    assert_close("rows at the targets' lengths", got, want, N * ROWS, 1e-5);
    vk_buffer_free(dev, &bt), vk_buffer_free(dev, &by);
    free(target), free(y);
}

/* Tokens of two sequences interleaved in batch order, as (sequence, cell) pairs. */
static void interleaved_tokens(uint32_t *tokens, size_t n)
{
    for (size_t t = 0; t < n; t++)
        tokens[2 * t] = (t % 3 == 1) ? 1 : 0, tokens[2 * t + 1] = (uint32_t)t;
}

/* The short conv over 197 channels (more than a workgroup, not a whole number of them),
 * 4 taps, windows that already hold inputs, tokens of two sequences interleaved: each
 * channel's outputs and both windows as the CPU's delta_net_conv_token leaves them. */
static void test_delta_conv(void **state)
{
    (void)state;
    enum { C = 197, TAPS = 4, TOKENS = 7, SEQS = 2 };
    uint32_t slot = 0, tokens[2 * TOKENS];
    float *kernels = random_floats(C * TAPS), *x = random_floats(TOKENS * C);
    float *window = random_floats(SEQS * (TAPS - 1) * C);
    float want[TOKENS * C], got[TOKENS * C];
    float want_window[SEQS * (TAPS - 1) * C], got_window[SEQS * (TAPS - 1) * C];
    interleaved_tokens(tokens, TOKENS);
    memcpy(want, x, sizeof want);
    memcpy(want_window, window, sizeof want_window);
    delta_net_context d = {.n_recurrent = 1, .slot = &slot, .channels = C, .kernels = kernels};
    for (size_t t = 0; t < TOKENS; t++)
        delta_net_conv_token(&d, 0, TAPS, want_window + tokens[2 * t] * (TAPS - 1) * C, NULL,
                             want + t * C);
    vk_buffer bk = device_buffer(kernels, C * TAPS * 4), bt = device_buffer(tokens, sizeof tokens);
    vk_buffer bw = device_buffer(window, sizeof got_window), bx = device_buffer(x, sizeof got);
    vk_commands c = begin();
    vk_op_delta_conv(&c, vk_whole(&bk), vk_whole(&bt), vk_whole(&bw), vk_whole(&bx), C, TAPS,
                     TOKENS);
    submit(&c);
    read_back(&bx, got, sizeof got);
    read_back(&bw, got_window, sizeof got_window);
    assert_close("short conv", got, want, TOKENS * C, 1e-5);
    assert_close("conv windows", got_window, want_window, SEQS * (TAPS - 1) * C, 0.0);
    vk_buffer_free(dev, &bk), vk_buffer_free(dev, &bt), vk_buffer_free(dev, &bw);
    vk_buffer_free(dev, &bx);
    free(kernels), free(x), free(window);
}

/* LFM2's gated short conv over 197 channels (rows [b | c | x] of 3 x 197), 3 taps, windows
 * that already hold inputs, tokens of two sequences interleaved: each token's c * conv(b * x)
 * where b was, and both windows, as the CPU's delta_net_gated_conv_token leaves them. */
static void test_gated_short_conv(void **state)
{
    (void)state;
    enum { C = 197, TAPS = 3, TOKENS = 7, SEQS = 2 };
    uint32_t slot = 0, tokens[2 * TOKENS];
    float *kernels = random_floats(C * TAPS), *rows = random_floats(TOKENS * 3 * C);
    float *window = random_floats(SEQS * (TAPS - 1) * C), *cpu_rows = malloc(TOKENS * 3 * C * 4);
    float want[TOKENS * C], got[TOKENS * C], got_rows[TOKENS * 3 * C];
    float want_window[SEQS * (TAPS - 1) * C], got_window[SEQS * (TAPS - 1) * C];
    assert_non_null(cpu_rows);
    interleaved_tokens(tokens, TOKENS);
    memcpy(cpu_rows, rows, TOKENS * 3 * C * 4);
    memcpy(want_window, window, sizeof want_window);
    delta_net_context d = {.n_recurrent = 1, .slot = &slot, .channels = C, .kernels = kernels};
    for (size_t t = 0; t < TOKENS; t++)
        delta_net_gated_conv_token(&d, 0, TAPS, want_window + tokens[2 * t] * (TAPS - 1) * C,
                                   cpu_rows + t * 3 * C, want + t * C);
    vk_buffer bk = device_buffer(kernels, C * TAPS * 4), bt = device_buffer(tokens, sizeof tokens);
    vk_buffer bw = device_buffer(window, sizeof got_window);
    vk_buffer bx = device_buffer(rows, sizeof got_rows);
    vk_commands c = begin();
    vk_op_gated_short_conv(&c, vk_whole(&bk), vk_whole(&bt), vk_whole(&bw), vk_whole(&bx), C,
                           TAPS, TOKENS);
    submit(&c);
    read_back(&bx, got_rows, sizeof got_rows);
    read_back(&bw, got_window, sizeof got_window);
    for (size_t t = 0; t < TOKENS; t++)
        memcpy(got + t * C, got_rows + t * 3 * C, C * 4);
    assert_close("gated short conv", got, want, TOKENS * C, 1e-5);
    assert_close("gated conv windows", got_window, want_window, SEQS * (TAPS - 1) * C, 0.0);
    vk_buffer_free(dev, &bk), vk_buffer_free(dev, &bt), vk_buffer_free(dev, &bw);
    vk_buffer_free(dev, &bx);
    free(kernels), free(rows), free(window), free(cpu_rows);
}

/* The gates from their logits, softplus's linear part above 20 among them. */
static void test_delta_gates(void **state)
{
    (void)state;
    enum { HEADS = 6, TOKENS = 53 };
    float *alpha = random_floats(TOKENS * HEADS), *beta = random_floats(TOKENS * HEADS);
    float *dt = random_floats(HEADS), *a = random_floats(HEADS);
    float want_decay[TOKENS * HEADS], want_strength[TOKENS * HEADS];
    float got_decay[TOKENS * HEADS], got_strength[TOKENS * HEADS];
    for (size_t i = 0; i < TOKENS * HEADS; i++)
        alpha[i] *= 30.0f, beta[i] *= 30.0f;
    for (size_t h = 0; h < HEADS; h++)
        a[h] = -8.0f * fabsf(a[h]); /* -exp(A_log): a decay below 1 */
    for (size_t i = 0; i < TOKENS * HEADS; i++) {
        want_decay[i] = delta_net_decay(alpha[i], dt[i % HEADS], a[i % HEADS]);
        want_strength[i] = delta_net_strength(beta[i]);
    }
    vk_buffer ba = device_buffer(alpha, sizeof got_decay), bb = device_buffer(beta, sizeof got_decay);
    vk_buffer bd = device_buffer(dt, HEADS * 4), bA = device_buffer(a, HEADS * 4);
    vk_commands c = begin();
    vk_op_delta_gates(&c, vk_whole(&ba), vk_whole(&bb), vk_whole(&bd), vk_whole(&bA), HEADS,
                      TOKENS);
    submit(&c);
    read_back(&ba, got_decay, sizeof got_decay);
    read_back(&bb, got_strength, sizeof got_strength);
    assert_close("decay", got_decay, want_decay, TOKENS * HEADS, 1e-5);
    assert_close("strength", got_strength, want_strength, TOKENS * HEADS, 1e-5);
    vk_buffer_free(dev, &ba), vk_buffer_free(dev, &bb), vk_buffer_free(dev, &bd);
    vk_buffer_free(dev, &bA);
    free(alpha), free(beta), free(dt), free(a);
}

/* The first 4 spans of 72 of rows 331 floats apart L2-normed, the rest of each row as it
 * was. */
static void test_l2norm(void **state)
{
    (void)state;
    enum { N = 72, SPANS = 4, ROWS = 3, STRIDE = 331 };
    float *x = random_floats(ROWS * STRIDE), want[ROWS * STRIDE], got[ROWS * STRIDE];
    memcpy(want, x, sizeof want);
    for (size_t r = 0; r < ROWS; r++)
        for (size_t s = 0; s < SPANS; s++)
            delta_net_l2_normalize(want + r * STRIDE + s * N, N, 1e-6f);
    vk_buffer bx = device_buffer(x, sizeof want);
    vk_commands c = begin();
    vk_op_l2norm(&c, vk_whole(&bx), N, SPANS, ROWS, STRIDE, 1e-6f);
    submit(&c);
    read_back(&bx, got, sizeof got);
    assert_close("l2 norm", got, want, ROWS * STRIDE, 1e-5);
    vk_buffer_free(dev, &bx);
    free(x);
}

/* The delta rule over heads of 72 (more than a workgroup's rows), 4 value heads reading 2
 * key heads (tiled as qwen35's, or grouped as Qwen3-Next's), two sequences' states that
 * already hold something and their tokens interleaved: every output and both states as
 * delta_net_step leaves them, each value head on delta_net_key_head's key head. */
static void check_delta_rule(bool grouped)
{
    enum { S = 72, H = 4, G = 2, TOKENS = 7, SEQS = 2, C = 2 * G * S + H * S };
    uint32_t tokens[2 * TOKENS];
    interleaved_tokens(tokens, TOKENS);
    float *qkv = random_floats(TOKENS * C), *states = random_floats(SEQS * H * S * S);
    float *decay = random_floats(TOKENS * H), *strength = random_floats(TOKENS * H);
    for (size_t t = 0; t < TOKENS; t++) {
        for (size_t g = 0; g < 2 * G; g++)
            delta_net_l2_normalize(qkv + t * C + g * S, S, 1e-6f);
        for (size_t h = 0; h < H; h++) {
            decay[t * H + h] = 0.5f + 0.5f * fabsf(decay[t * H + h]);
            strength[t * H + h] = fabsf(strength[t * H + h]);
        }
    }
    size_t state_floats = (size_t)SEQS * H * S * S;
    float *want_states = malloc(state_floats * 4), *got_states = malloc(state_floats * 4);
    float want[TOKENS * H * S], got[TOKENS * H * S];
    memcpy(want_states, states, state_floats * 4);
    for (size_t t = 0; t < TOKENS; t++)
        for (size_t h = 0; h < H; h++) {
            const float *row = qkv + t * C;
            const float *q = row + delta_net_key_head(h, H, G, grouped) * S, *k = q + G * S;
            delta_net_step(want_states + ((size_t)tokens[2 * t] * H + h) * S * S, q, k,
                           row + 2 * G * S + h * S, decay[t * H + h], strength[t * H + h], S,
                           want + (t * H + h) * S);
        }
    vk_buffer bt = device_buffer(tokens, sizeof tokens), bq = device_buffer(qkv, TOKENS * C * 4);
    vk_buffer bd = device_buffer(decay, TOKENS * H * 4), bs = device_buffer(strength, TOKENS * H * 4);
    vk_buffer bst = device_buffer(states, state_floats * 4), bo = device_buffer(NULL, sizeof got);
    vk_commands c = begin();
    vk_delta_shape shape = {S, H, G, C, TOKENS, SEQS, grouped};
    vk_op_delta_rule(&c, vk_whole(&bt), vk_whole(&bq), vk_whole(&bd), vk_whole(&bs),
                     vk_whole(&bst), vk_whole(&bo), &shape);
    submit(&c);
    read_back(&bo, got, sizeof got);
    read_back(&bst, got_states, state_floats * 4);
    assert_close("delta rule outputs", got, want, TOKENS * H * S, 1e-5);
    assert_close("delta rule states", got_states, want_states, state_floats, 1e-5);
    vk_buffer_free(dev, &bt), vk_buffer_free(dev, &bq), vk_buffer_free(dev, &bd);
    vk_buffer_free(dev, &bs), vk_buffer_free(dev, &bst), vk_buffer_free(dev, &bo);
    free(qkv), free(states), free(decay), free(strength), free(want_states), free(got_states);
}

static void test_delta_rule(void **state)
{
    (void)state;
    check_delta_rule(false);
    check_delta_rule(true);
}

/* Mamba2's sizes in the tests below: 4 heads of 72 (more than a workgroup's rows), 2 groups
 * of B and C 45 wide, so 468 conv channels (not a whole number of workgroups), and rows
 * [z | x B C | dt] of 288 + 468 + 4 floats. */
enum { M_P = 72, M_H = 4, M_G = 2, M_N = 45, M_VW = M_H * M_P, M_C = M_VW + 2 * M_G * M_N,
       M_ROW = M_VW + M_C + M_H, M_TOKENS = 7, M_SEQS = 2, M_TAPS = 4 };

/* Mamba2's conv, in place on the x B C of rows [z | x B C | dt], with its bias, windows that
 * already hold inputs, tokens of two sequences interleaved: every row and both windows as
 * the CPU's delta_net_conv_token leaves them (z and dt untouched). */
static void test_mamba2_conv(void **state)
{
    (void)state;
    uint32_t slot = 0, tokens[2 * M_TOKENS];
    float *kernels = random_floats(M_C * M_TAPS), *rows = random_floats(M_TOKENS * M_ROW);
    float *bias = random_floats(M_C), *window = random_floats(M_SEQS * (M_TAPS - 1) * M_C);
    size_t row_bytes = M_TOKENS * M_ROW * 4, window_bytes = M_SEQS * (M_TAPS - 1) * M_C * 4;
    float *want = malloc(row_bytes), *got = malloc(row_bytes);
    float *want_window = malloc(window_bytes), *got_window = malloc(window_bytes);
    assert_true(want && got && want_window && got_window);
    interleaved_tokens(tokens, M_TOKENS);
    memcpy(want, rows, row_bytes);
    memcpy(want_window, window, window_bytes);
    delta_net_context d = {.n_recurrent = 1, .slot = &slot, .channels = M_C, .kernels = kernels};
    for (size_t t = 0; t < M_TOKENS; t++)
        delta_net_conv_token(&d, 0, M_TAPS, want_window + tokens[2 * t] * (M_TAPS - 1) * M_C,
                             bias, want + t * M_ROW + M_VW);
    vk_buffer bk = device_buffer(kernels, M_C * M_TAPS * 4), bb = device_buffer(bias, M_C * 4);
    vk_buffer bt = device_buffer(tokens, sizeof tokens), bw = device_buffer(window, window_bytes);
    vk_buffer bx = device_buffer(rows, row_bytes);
    vk_commands c = begin();
    vk_mamba2_shape shape = {M_P, M_H, M_G, M_N, M_C, M_TAPS, M_TOKENS, M_SEQS};
    vk_op_mamba2_conv(&c, vk_whole(&bk), vk_whole(&bb), vk_whole(&bt), vk_whole(&bw),
                      vk_whole(&bx), &shape);
    submit(&c);
    read_back(&bx, got, row_bytes);
    read_back(&bw, got_window, window_bytes);
    assert_close("Mamba2 conv", got, want, M_TOKENS * M_ROW, 1e-5);
    assert_close("Mamba2 conv windows", got_window, want_window, window_bytes / 4, 0.0);
    vk_buffer_free(dev, &bk), vk_buffer_free(dev, &bb), vk_buffer_free(dev, &bt);
    vk_buffer_free(dev, &bw), vk_buffer_free(dev, &bx);
    free(kernels), free(rows), free(bias), free(window), free(want), free(got);
    free(want_window), free(got_window);
}

/* Mamba2's scan over two sequences' states that already hold something, their tokens
 * interleaved, one dt past softplus's linear threshold: every output and both states as
 * the CPU's delta_net_softplus and mamba2_head_step leave them. */
static void test_mamba2_scan(void **state)
{
    (void)state;
    uint32_t tokens[2 * M_TOKENS];
    interleaved_tokens(tokens, M_TOKENS);
    float *rows = random_floats(M_TOKENS * M_ROW), *heads = random_floats(3 * M_H);
    size_t state_floats = (size_t)M_SEQS * M_H * M_P * M_N;
    float *states = random_floats(state_floats), *want_states = malloc(state_floats * 4);
    float *got_states = malloc(state_floats * 4), want[M_TOKENS * M_VW], got[M_TOKENS * M_VW];
    assert_true(want_states && got_states);
    for (size_t h = 0; h < M_H; h++)
        heads[M_H + h] = -1.0f - fabsf(heads[M_H + h]); /* A < 0: a decay below 1 */
    rows[2 * M_ROW + M_VW + M_C + 1] = 25.0f; /* token 2's dt of head 1: softplus is dt */
    memcpy(want_states, states, state_floats * 4);
    for (size_t t = 0; t < M_TOKENS; t++) {
        const float *row = rows + t * M_ROW;
        for (size_t h = 0; h < M_H; h++) {
            size_t g = h / (M_H / M_G);
            const float *B = row + 2 * M_VW + g * M_N, *C = B + M_G * M_N;
            float step = delta_net_softplus(row[M_VW + M_C + h] + heads[h]);
            mamba2_head_step(want_states + ((size_t)tokens[2 * t] * M_H + h) * M_P * M_N,
                             row + M_VW + h * M_P, B, C, step, heads[M_H + h],
                             heads[2 * M_H + h], M_P, M_N, want + t * M_VW + h * M_P);
        }
    }
    vk_buffer bt = device_buffer(tokens, sizeof tokens);
    vk_buffer bp = device_buffer(rows, M_TOKENS * M_ROW * 4), bh = device_buffer(heads, 3 * M_H * 4);
    vk_buffer bs = device_buffer(states, state_floats * 4), bo = device_buffer(NULL, sizeof got);
    vk_commands c = begin();
    vk_mamba2_shape shape = {M_P, M_H, M_G, M_N, M_C, M_TAPS, M_TOKENS, M_SEQS};
    vk_op_mamba2_scan(&c, vk_whole(&bt), vk_whole(&bp), vk_whole(&bh), vk_whole(&bs),
                      vk_whole(&bo), &shape);
    submit(&c);
    read_back(&bo, got, sizeof got);
    read_back(&bs, got_states, state_floats * 4);
    assert_close("Mamba2 scan outputs", got, want, M_TOKENS * M_VW, 1e-5);
    assert_close("Mamba2 scan states", got_states, want_states, state_floats, 1e-5);
    vk_buffer_free(dev, &bt), vk_buffer_free(dev, &bp), vk_buffer_free(dev, &bh);
    vk_buffer_free(dev, &bs), vk_buffer_free(dev, &bo);
    free(rows), free(heads), free(states), free(want_states), free(got_states);
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
        cmocka_unit_test(test_choice_ranks_device_types),
        cmocka_unit_test(test_discovery_follows_the_environment),
        cmocka_unit_test(test_int_dot_follows_the_environment),
        cmocka_unit_test(test_written_bindings_are_the_shaders),
        cmocka_unit_test(test_grids_only_where_read),
        cmocka_unit_test(test_products_of_one_input_run_together),
        cmocka_unit_test(test_recording_ends_with_a_barrier),
        cmocka_unit_test(test_matmul),
        cmocka_unit_test(test_matmul_more_types),
        cmocka_unit_test(test_matmul_rows_beyond_one_dimension),
        cmocka_unit_test(test_matmul_split_across_buffers),
        cmocka_unit_test(test_matmul_tiled),
        cmocka_unit_test(test_matmul_tiled_rows_beyond_one_dimension),
        cmocka_unit_test(test_matmul_tiled_needs_the_limits),
        cmocka_unit_test(test_quantize_q8_0_is_the_cpus),
        cmocka_unit_test(test_quantize_q8_1_is_the_cpus),
        cmocka_unit_test(test_quantize_q8_k_is_the_cpus),
        cmocka_unit_test(test_rmsnorm),
        cmocka_unit_test(test_add_rmsnorm),
        cmocka_unit_test(test_rmsnorm_quantize),
        cmocka_unit_test(test_swiglu_quantize),
        cmocka_unit_test(test_rope),
        cmocka_unit_test(test_kv_store_rope),
        cmocka_unit_test(test_swiglu_and_binary),
        cmocka_unit_test(test_softmax),
        cmocka_unit_test(test_get_rows),
        cmocka_unit_test(test_lattice_types),
        cmocka_unit_test(test_copy_rows),
        cmocka_unit_test(test_attention),
        cmocka_unit_test(test_attention_wide_heads),
        cmocka_unit_test(test_kv_shift_wide_rows),
        cmocka_unit_test(test_f16_rounding_is_the_cpus),
        cmocka_unit_test(test_moe_route),
        cmocka_unit_test(test_moe_route_scored),
        cmocka_unit_test(test_matmul_experts),
        cmocka_unit_test(test_matmul_expert_tiles),
        cmocka_unit_test(test_matmul_expert_tiles_tiled),
        cmocka_unit_test(test_moe_tile_threshold),
        cmocka_unit_test(test_moe_bias_combine_and_swiglu_oai),
        cmocka_unit_test(test_moe_weigh_inputs_and_unweighted_combine),
        cmocka_unit_test(test_attention_window_and_both_ways),
        cmocka_unit_test(test_attention_around_and_alibi),
        cmocka_unit_test(test_layernorm),
        cmocka_unit_test(test_gelu_and_geglu),
        cmocka_unit_test(test_gelu_quick),
        cmocka_unit_test(test_mul_rows),
        cmocka_unit_test(test_mul_sigmoid),
        cmocka_unit_test(test_gelu_erf),
        cmocka_unit_test(test_tanh),
        cmocka_unit_test(test_mul_softplus_groups),
        cmocka_unit_test(test_altup_predict_and_correct),
        cmocka_unit_test(test_sparse_gate),
        cmocka_unit_test(test_match_magnitude),
        cmocka_unit_test(test_delta_conv),
        cmocka_unit_test(test_gated_short_conv),
        cmocka_unit_test(test_mamba2_conv),
        cmocka_unit_test(test_mamba2_scan),
        cmocka_unit_test(test_delta_gates),
        cmocka_unit_test(test_l2norm),
        cmocka_unit_test(test_delta_rule),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    vk_device_close();
    return failed;
}

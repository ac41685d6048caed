/*
 * Micro-benchmark of the Vulkan backend's matrix products (not a test): y = W x for a
 * 2048 x 2048 W at 1, 8, 64 and 512 tokens (generation, a batch, a short and a long prompt:
 * the last two past the threshold of the tiled product), the activations'
 * quantization included, on the device vk_device_open chooses (lavapipe with
 * CORRAL_VULKAN_ALLOW_CPU=1 where there is no GPU). Then a 512-token prompt's expert
 * product as vk_moe.c records it (EXPERTS experts of EXPERT_ROWS x 2048, USED of them a
 * token: the pairs grouped by expert, their inputs gathered and quantized, the product),
 * once in tiles of 8 pairs (the per-row kernel) and once in tiles of 64 (the tiled one).
 * Each pass records PRODUCTS products into one submission and waits for it; the least and
 * the median over the passes are printed per product, as wall time and as the process's CPU
 * time (lavapipe runs its work on threads of this process, so on a busy machine the CPU
 * time is the steadier figure). CORRAL_VULKAN_NO_INT_DOT=1 times the plain products where
 * the device has integer dot products.
 * Usage: bench_vulkan_matmul [PASSES [TYPE ...]]: passes per figure (default 20), and the
 * types (names as tensor_type_name spells them; q4_0 q8_0 q4_K when none is given).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "quant.h"
#include "tensor_type.h"
#include "vk_ops.h"

enum { N = 2048, PRODUCTS = 8 };
/* gpt-oss 20b's routing: 32 experts, 4 a token */
enum { EXPERTS = 32, USED = 4, EXPERT_ROWS = 512, PROMPT = 512, PAIRS = PROMPT * USED };

static vk_device *dev;

static double seconds(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static vk_buffer buffer_with(const void *data, size_t bytes)
{
    vk_buffer b;
    corral_error err = {{0}};
    if (!vk_buffer_create(dev, bytes, false, &b, &err) ||
        (data && !vk_buffer_write(dev, &b, 0, data, bytes, &err))) {
        fprintf(stderr, "bench_vulkan_matmul: %s\n", err.message);
        exit(1);
    }
    return b;
}

/* rows x N weights of `type` quantized from pseudo-random floats (pseudo-random blocks for a
 * type without a quantizer, IQ4_NL, IQ4_XS and the lattice IQ types: any bytes under a finite
 * f16 scale make a block), and n_tokens rows of x taken from those floats. */
static uint8_t *make_weights(uint32_t type, size_t rows, size_t row_bytes, float **x,
                             uint32_t n_tokens)
{
    const quant_ops *ops = quant_ops_get(type, CPU_LEVEL_SCALAR);
    float *wf = malloc(rows * N * sizeof *wf);
    uint8_t *w = malloc(row_bytes * rows);
    *x = malloc((size_t)N * n_tokens * sizeof **x);
    if (!ops || !wf || !w || !*x) {
        fprintf(stderr, "bench_vulkan_matmul: no memory, or no quantizer for %s\n",
                tensor_type_name(type));
        exit(1);
    }
    uint32_t rng = 12345;
    for (size_t i = 0; i < rows * N; i++) {
        rng = rng * 1664525u + 1013904223u;
        wf[i] = (float)(rng >> 8) / (float)(1u << 23) - 1.0f;
    }
    for (size_t i = 0; i < (size_t)N * n_tokens; i++)
        (*x)[i] = wf[i * 7 % (rows * N)];
    if (ops->quantize) {
        for (size_t r = 0; r < rows; r++)
            ops->quantize(wf + r * N, w + r * row_bytes, N);
    } else {
        const tensor_type_info *info = tensor_type_get(type);
        uint16_t d = quant_f32_to_f16(1.0f / 4096.0f);
        for (size_t i = 0; i < row_bytes * rows; i++) {
            rng = rng * 1664525u + 1013904223u;
            w[i] = (uint8_t)(rng >> 24);
        }
        for (size_t b = 0; b < row_bytes * rows / info->block_bytes; b++) {
            uint8_t *block = w + b * info->block_bytes;
            if (type == TENSOR_TYPE_IQ1_M) /* d in the top nibbles of 4 words from byte 48 */
                for (int k = 0; k < 4; k++)
                    block[49 + 2 * k] = (uint8_t)((block[49 + 2 * k] & 0x0f) |
                                                  ((d >> (4 * k)) & 0xf) << 4);
            else
                memcpy(block, &d, sizeof d);
        }
    }
    free(wf);
    return w;
}

static void print_times(const char *what, uint32_t type, uint32_t n_tokens, double *wall,
                        double *cpu, int passes)
{
    qsort(wall, (size_t)passes, sizeof *wall, by_value);
    qsort(cpu, (size_t)passes, sizeof *cpu, by_value);
    printf("%-6s %3u tokens%s  wall ms least %8.3f median %8.3f   cpu ms least %8.3f median "
           "%8.3f\n", tensor_type_name(type), n_tokens, what, wall[0], wall[passes / 2], cpu[0],
           cpu[passes / 2]);
}

static double *times(int passes)
{
    double *t = malloc((size_t)passes * sizeof *t);
    if (!t) {
        fprintf(stderr, "bench_vulkan_matmul: no memory\n");
        exit(1);
    }
    return t;
}

/* Least and median milliseconds a product over `passes` passes, wall and CPU. */
static void time_product(uint32_t type, uint32_t n_tokens, int passes)
{
    size_t row_bytes;
    if (!tensor_type_row_bytes(type, N, &row_bytes))
        return;
    float *x;
    uint8_t *w = make_weights(type, N, row_bytes, &x, n_tokens);
    double *wall = times(passes), *cpu = times(passes);

    /* two copies of x, taken in turn: products of one input share its quantization
     * (vk_ops.c), and each product here quantizes its own */
    vk_buffer bw = buffer_with(w, row_bytes * N), bx = buffer_with(x, (size_t)N * n_tokens * 4);
    vk_buffer bx2 = buffer_with(x, (size_t)N * n_tokens * 4);
    vk_buffer bq = buffer_with(NULL, vk_matmul_quants_bytes((uint64_t)N * n_tokens));
    vk_buffer bs = buffer_with(NULL, vk_matmul_scales_bytes((uint64_t)N * n_tokens));
    vk_buffer by = buffer_with(NULL, (size_t)N * n_tokens * 4);
    vk_commands c;
    corral_error err = {{0}};
    if (!vk_commands_create(dev, &c, &err)) {
        fprintf(stderr, "bench_vulkan_matmul: %s\n", err.message);
        exit(1);
    }
    for (int pass = -1; pass < passes; pass++) { /* pass -1 warms up */
        double w0 = seconds(CLOCK_MONOTONIC), c0 = seconds(CLOCK_PROCESS_CPUTIME_ID);
        vk_commands_begin(&c);
        for (int k = 0; k < PRODUCTS; k++)
            vk_op_matmul(&c, type, vk_whole(&bw), row_bytes, vk_whole(k % 2 ? &bx2 : &bx),
                         vk_whole(&bq), vk_whole(&bs), vk_whole(&by), N, N, n_tokens);
        if (!vk_commands_submit(&c, &err)) {
            fprintf(stderr, "bench_vulkan_matmul: %s\n", err.message);
            exit(1);
        }
        if (pass >= 0) {
            wall[pass] = (seconds(CLOCK_MONOTONIC) - w0) * 1e3 / PRODUCTS;
            cpu[pass] = (seconds(CLOCK_PROCESS_CPUTIME_ID) - c0) * 1e3 / PRODUCTS;
        }
    }
    print_times("", type, n_tokens, wall, cpu, passes);
    vk_commands_free(&c);
    vk_buffer *bufs[] = {&bw, &bx, &bx2, &bq, &bs, &by};
    for (size_t i = 0; i < 6; i++)
        vk_buffer_free(dev, bufs[i]);
    free(x), free(w), free(wall), free(cpu);
}

/* The same for a prompt's expert product in tiles of `tile` pairs (vk_moe.c's steps). */
static void time_experts(uint32_t type, uint32_t tile, int passes)
{
    size_t row_bytes;
    if (!tensor_type_row_bytes(type, N, &row_bytes))
        return;
    float *x;
    uint8_t *w = make_weights(type, (size_t)EXPERTS * EXPERT_ROWS, row_bytes, &x, PROMPT);
    double *wall = times(passes), *cpu = times(passes);
    static uint32_t ids[PAIRS];
    uint32_t rng = 777;
    for (uint32_t t = 0; t < PROMPT; t++) { /* USED distinct experts a token */
        rng = rng * 1664525u + 1013904223u;
        for (uint32_t j = 0; j < USED; j++)
            ids[t * USED + j] = (rng >> 16) % EXPERTS / USED * USED + (j + (rng >> 8)) % USED;
    }
    uint32_t max_tiles = vk_moe_max_tiles(PAIRS, EXPERTS, tile);
    vk_buffer bw = buffer_with(w, row_bytes * EXPERTS * EXPERT_ROWS);
    vk_buffer bx = buffer_with(x, (size_t)N * PROMPT * 4), bi = buffer_with(ids, sizeof ids);
    vk_buffer bslot = buffer_with(NULL, PAIRS * 4), brows = buffer_with(NULL, PAIRS * 4);
    vk_buffer bsid = buffer_with(NULL, PAIRS * 4), btiles = buffer_with(NULL, max_tiles * 12);
    vk_buffer bxg = buffer_with(NULL, (size_t)N * PAIRS * 4);
    vk_buffer bq = buffer_with(NULL, vk_matmul_quants_bytes((uint64_t)N * PAIRS));
    vk_buffer bs = buffer_with(NULL, vk_matmul_scales_bytes((uint64_t)N * PAIRS));
    vk_buffer by = buffer_with(NULL, (size_t)EXPERT_ROWS * PAIRS * 4);
    vk_commands c;
    corral_error err = {{0}};
    if (!vk_commands_create(dev, &c, &err)) {
        fprintf(stderr, "bench_vulkan_matmul: %s\n", err.message);
        exit(1);
    }
    for (int pass = -1; pass < passes; pass++) { /* pass -1 warms up */
        double w0 = seconds(CLOCK_MONOTONIC), c0 = seconds(CLOCK_PROCESS_CPUTIME_ID);
        vk_commands_begin(&c);
        for (int k = 0; k < PRODUCTS; k++) {
            vk_op_moe_group(&c, vk_whole(&bi), vk_whole(&bslot), vk_whole(&brows),
                            vk_whole(&bsid), vk_whole(&btiles), PAIRS, EXPERTS, USED, tile);
            vk_op_get_rows(&c, TENSOR_TYPE_F32, vk_whole(&bx), (size_t)N * 4, vk_whole(&brows),
                           vk_whole(&bxg), N, PAIRS);
            vk_op_matmul_expert_tiles(&c, type, vk_whole(&bw), row_bytes, vk_whole(&bxg),
                                      vk_whole(&bq), vk_whole(&bs), vk_whole(&btiles),
                                      vk_whole(&by), N, EXPERT_ROWS, PAIRS, max_tiles, tile, 0,
                                      EXPERTS);
        }
        if (!vk_commands_submit(&c, &err)) {
            fprintf(stderr, "bench_vulkan_matmul: %s\n", err.message);
            exit(1);
        }
        if (pass >= 0) {
            wall[pass] = (seconds(CLOCK_MONOTONIC) - w0) * 1e3 / PRODUCTS;
            cpu[pass] = (seconds(CLOCK_PROCESS_CPUTIME_ID) - c0) * 1e3 / PRODUCTS;
        }
    }
    print_times(tile == VK_MOE_TILED_TILE ? ", experts in tiles of 64"
                                          : ", experts in tiles of 8 ",
                type, PROMPT, wall, cpu, passes);
    vk_commands_free(&c);
    vk_buffer *bufs[] = {&bw, &bx, &bi, &bslot, &brows, &bsid, &btiles, &bxg, &bq, &bs, &by};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        vk_buffer_free(dev, bufs[i]);
    free(x), free(w), free(wall), free(cpu);
}

int main(int argc, char **argv)
{
    int passes = argc > 1 ? atoi(argv[1]) : 20;
    if (passes < 1) {
        fprintf(stderr, "usage: bench_vulkan_matmul [PASSES [TYPE ...]]\n");
        return 2;
    }
    const char *defaults[] = {"q4_0", "q8_0", "q4_K"};
    const char **names = argc > 2 ? (const char **)argv + 2 : defaults;
    int n_names = argc > 2 ? argc - 2 : 3;
    corral_error err = {{0}};
    dev = vk_device_open(-1, &err);
    if (!dev) {
        fprintf(stderr, "bench_vulkan_matmul: %s\n", err.message);
        return 1;
    }
    printf("%s, %d x %d, %d products a submission\n", dev->info.name, N, N, PRODUCTS);
    for (int i = 0; i < n_names; i++) {
        int type = tensor_type_from_name(names[i]);
        if (type < 0) {
            fprintf(stderr, "bench_vulkan_matmul: no type %s\n", names[i]);
            return 2;
        }
        time_product((uint32_t)type, 1, passes);
        time_product((uint32_t)type, 8, passes);
        time_product((uint32_t)type, 64, passes);
        time_product((uint32_t)type, 512, passes);
        time_experts((uint32_t)type, VK_MOE_ROW_TILE, passes);
        if (vk_device_fits_tiled(dev))
            time_experts((uint32_t)type, VK_MOE_TILED_TILE, passes);
    }
    vk_device_close();
    return 0;
}

/*
 * Micro-benchmark of the Vulkan backend's host side (not a test): what recording one
 * dispatch costs the thread that records it, for a pipeline that binds only the kernels'
 * buffers (rmsnorm over one row) and for one that also reads the lattice IQ types' grids
 * (get_rows of one IQ2_XXS row). Each pass records DISPATCHES of one kind into a command
 * buffer, each writing its own output range (so that only the recording's access limit puts
 * barriers between them), and times that recording alone, by the thread's CPU clock and by
 * the wall clock; the work is then submitted and waited for, untimed. The least and the
 * median nanoseconds a dispatch over the passes are printed. On lavapipe (with
 * CORRAL_VULKAN_ALLOW_CPU=1 where there is no GPU) these are the driver's CPU costs of
 * recording, not a GPU's.
 * Usage: bench_vulkan_dispatch [PASSES]   (default 20)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tensor_type.h"
#include "vk_ops.h"

enum { DISPATCHES = 2048, ROW = 256, SLOT_BYTES = 4096 };

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

static void fail(const char *message)
{
    fprintf(stderr, "bench_vulkan_dispatch: %s\n", message);
    exit(1);
}

static vk_buffer buffer_with(const void *data, size_t bytes)
{
    vk_buffer b;
    corral_error err = {{0}};
    if (!vk_buffer_create(dev, bytes, false, &b, &err) ||
        (data && !vk_buffer_write(dev, &b, 0, data, bytes, &err)))
        fail(err.message);
    return b;
}

enum kind { RMSNORM, GET_ROWS_IQ };

static void record_one(vk_commands *c, enum kind kind, uint32_t i, const vk_buffer *in,
                       const vk_buffer *weights, const vk_buffer *ids, const vk_buffer *out)
{
    vk_span slot = {out->buffer, (VkDeviceSize)i * SLOT_BYTES, ROW * sizeof(float)};
    if (kind == RMSNORM)
        vk_op_rmsnorm(c, vk_whole(weights), vk_whole(in), slot, ROW, 1, 1e-6f);
    else
        vk_op_get_rows(c, TENSOR_TYPE_IQ2_XXS, vk_whole(weights), 66, vk_whole(ids), slot,
                       ROW, 1);
}

static void time_kind(enum kind kind, const char *name, int passes)
{
    size_t weight_bytes = ROW * sizeof(float); /* a row of F32 norm weights or of IQ2_XXS */
    uint8_t *bytes = calloc(weight_bytes, 1);
    float *in = malloc(ROW * sizeof *in);
    double *cpu = malloc((size_t)passes * sizeof *cpu), *wall = malloc((size_t)passes * sizeof *wall);
    if (!bytes || !in || !cpu || !wall)
        fail("no memory");
    for (int i = 0; i < ROW; i++) {
        in[i] = (float)(i % 17) - 8.0f;
        ((float *)(void *)bytes)[i] = 1.0f;
    }
    uint32_t zero = 0;
    vk_buffer weights = buffer_with(bytes, weight_bytes), input = buffer_with(in, ROW * sizeof *in);
    vk_buffer ids = buffer_with(&zero, sizeof zero);
    vk_buffer out = buffer_with(NULL, (size_t)DISPATCHES * SLOT_BYTES);
    vk_commands c;
    corral_error err = {{0}};
    if (!vk_commands_create(dev, &c, &err))
        fail(err.message);
    for (int pass = -1; pass < passes; pass++) { /* pass -1 warms up */
        double c0 = seconds(CLOCK_THREAD_CPUTIME_ID), w0 = seconds(CLOCK_MONOTONIC);
        vk_commands_begin(&c);
        for (uint32_t i = 0; i < DISPATCHES; i++)
            record_one(&c, kind, i, &input, &weights, &ids, &out);
        if (!vk_commands_end(&c, &err))
            fail(err.message);
        double c1 = seconds(CLOCK_THREAD_CPUTIME_ID), w1 = seconds(CLOCK_MONOTONIC);
        if (!vk_commands_submit_recorded(&c, &c.cmd, 1, &err))
            fail(err.message);
        if (pass >= 0) {
            cpu[pass] = (c1 - c0) * 1e9 / DISPATCHES;
            wall[pass] = (w1 - w0) * 1e9 / DISPATCHES;
        }
    }
    qsort(cpu, (size_t)passes, sizeof *cpu, by_value);
    qsort(wall, (size_t)passes, sizeof *wall, by_value);
    printf("%-12s ns a dispatch recorded: cpu least %7.1f median %7.1f   wall least %7.1f "
           "median %7.1f\n", name, cpu[0], cpu[passes / 2], wall[0], wall[passes / 2]);
    vk_commands_free(&c);
    vk_buffer_free(dev, &weights), vk_buffer_free(dev, &input), vk_buffer_free(dev, &ids);
    vk_buffer_free(dev, &out);
    free(bytes), free(in), free(cpu), free(wall);
}

int main(int argc, char **argv)
{
    int passes = argc > 1 ? atoi(argv[1]) : 20;
    if (passes < 1) {
        fprintf(stderr, "usage: bench_vulkan_dispatch [PASSES]\n");
        return 2;
    }
    corral_error err = {{0}};
    dev = vk_device_open(-1, &err);
    if (!dev)
        fail(err.message);
    printf("%s, %d dispatches a recording\n", dev->info.name, DISPATCHES);
    time_kind(RMSNORM, "rmsnorm", passes);
    time_kind(GET_ROWS_IQ, "get_rows IQ", passes);
    vk_device_close();
    return 0;
}

/*
 * ggml's CPU matrix x vector products timed as bench_quant --min times Corral's (not built by
 * CMake: bench/vs_ggml_kernels.sh compiles it against a ggml build given to it). One thread,
 * one token, a matrix of 4096-wide rows of the given type: "cache" about 256 KiB of weights
 * (in L2, as bench_quant's), "memory" 1 GiB; the weights in the buffer type llama.cpp would
 * put them in (ggml's repacked layout where the CPU backend has one for the type, as
 * llama-bench's default), random values quantized by ggml. Each sample is one graph
 * computation of the whole matrix, so it includes ggml's quantization of the activation row
 * and its graph dispatch (a few microseconds: the in-cache figure is the lower bound of the
 * kernel's). Prints per type: least and median seconds of the samples as GB/s of weights.
 * Usage: ggml_matvec ROUNDS TYPE... (ggml's type names: q4_0, q8_0, q4_K, q5_K, q6_K)
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml.h"

enum { ROW_ELEMS = 4096 };

static double now_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static enum ggml_type type_named(const char *name)
{
    for (int t = 0; t < GGML_TYPE_COUNT; t++) {
        const char *n = ggml_type_name((enum ggml_type)t);
        if (n && strcmp(n, name) == 0)
            return (enum ggml_type)t;
    }
    return GGML_TYPE_COUNT;
}

/* The buffer type llama.cpp gives a weight of this product: the first of the CPU device's
 * extra types (the repacked layouts) that supports it, else the plain host buffer. */
static ggml_backend_buffer_type_t weight_buffer_type(ggml_backend_dev_t dev,
                                                     struct ggml_tensor *product)
{
    ggml_backend_reg_t reg = ggml_backend_dev_backend_reg(dev);
    ggml_backend_dev_get_extra_bufts_t extra_of = (ggml_backend_dev_get_extra_bufts_t)
        ggml_backend_reg_get_proc_address(reg, "ggml_backend_dev_get_extra_bufts");
    ggml_backend_buffer_type_t *extra = extra_of ? extra_of(dev) : NULL;
    for (; extra && *extra; extra++) {
        ggml_backend_buffer_t probe = ggml_backend_buft_alloc_buffer(*extra, 0);
        if (!probe)
            continue;
        product->src[0]->buffer = probe;
        bool ok = ggml_backend_dev_supports_op(dev, product);
        product->src[0]->buffer = NULL;
        ggml_backend_buffer_free(probe);
        if (ok)
            return *extra;
    }
    return ggml_backend_cpu_buffer_type();
}

/* Least and median GB/s of `samples` products over rows x ROW_ELEMS weights of type. */
static bool time_product(ggml_backend_t backend, enum ggml_type type, size_t rows, int samples,
                         double *least, double *median, const char **buffer_name)
{
    struct ggml_init_params params = {.mem_size = 8 * ggml_tensor_overhead() +
                                                  ggml_graph_overhead(),
                                      .no_alloc = true};
    struct ggml_context *weights = ggml_init(params), *rest = ggml_init(params);
    struct ggml_tensor *w = ggml_new_tensor_2d(weights, type, ROW_ELEMS, (int64_t)rows);
    struct ggml_tensor *x = ggml_new_tensor_2d(rest, GGML_TYPE_F32, ROW_ELEMS, 1);
    struct ggml_tensor *y = ggml_mul_mat(rest, w, x);
    ggml_backend_buffer_type_t buft = weight_buffer_type(ggml_backend_get_device(backend), y);
    *buffer_name = ggml_backend_buft_name(buft);
    ggml_backend_buffer_t wbuf = ggml_backend_alloc_ctx_tensors_from_buft(weights, buft);
    ggml_backend_buffer_t rbuf =
        ggml_backend_alloc_ctx_tensors_from_buft(rest, ggml_backend_cpu_buffer_type());
    size_t bytes = ggml_row_size(type, ROW_ELEMS) * rows; /* rows: a multiple of 64 */
    float *source = malloc(sizeof(float) * ROW_ELEMS * 64);
    size_t chunk = ggml_row_size(type, ROW_ELEMS) * 64;
    char *quantized = malloc(bytes); /* a repacked buffer takes a tensor whole */
    double *times = malloc(sizeof(double) * (size_t)samples);
    bool ok = wbuf && rbuf && source && quantized && times;
    if (ok) {
        srand(1);
        for (size_t i = 0; i < (size_t)ROW_ELEMS * 64; i++)
            source[i] = (float)rand() / (float)RAND_MAX - 0.5f;
        /* 64 rows of random values, quantized once and repeated over the matrix */
        ggml_quantize_chunk(type, source, quantized, 0, 64, ROW_ELEMS, NULL);
        for (size_t at = chunk; at < bytes; at += chunk)
            memcpy(quantized + at, quantized, chunk);
        ggml_backend_tensor_set(w, quantized, 0, bytes);
        ggml_backend_tensor_set(x, source, 0, sizeof(float) * ROW_ELEMS);
        struct ggml_cgraph *graph = ggml_new_graph(rest);
        ggml_build_forward_expand(graph, y);
        ggml_backend_graph_compute(backend, graph); /* warm-up */
        for (int s = 0; s < samples; s++) {
            double start = now_seconds();
            ggml_backend_graph_compute(backend, graph);
            times[s] = now_seconds() - start;
        }
        qsort(times, (size_t)samples, sizeof *times, compare_doubles);
        *least = (double)bytes / times[0] * 1e-9;
        *median = (double)bytes / times[samples / 2] * 1e-9;
    }
    free(times);
    free(quantized);
    free(source);
    ggml_backend_buffer_free(rbuf);
    ggml_backend_buffer_free(wbuf);
    ggml_free(rest);
    ggml_free(weights);
    return ok;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: ggml_matvec ROUNDS TYPE...\n");
        return 2;
    }
    int rounds = atoi(argv[1]);
    if (rounds < 1)
        rounds = 1;
    ggml_cpu_init();
    ggml_backend_t backend = ggml_backend_cpu_init();
    if (!backend) {
        fprintf(stderr, "ggml_matvec: no CPU backend\n");
        return 1;
    }
    ggml_backend_cpu_set_n_threads(backend, 1);
    printf("ggml 1-token products, 1 thread, %d rounds: GB/s of weight bytes, least and median\n",
           rounds);
    printf("%-6s %8s %8s %8s %8s  %s\n", "type", "cache", "median", "memory", "median", "weights in");
    for (int i = 2; i < argc; i++) {
        enum ggml_type type = type_named(argv[i]);
        if (type == GGML_TYPE_COUNT) {
            fprintf(stderr, "ggml_matvec: no type %s\n", argv[i]);
            return 2;
        }
        size_t row = ggml_row_size(type, ROW_ELEMS);
        /* whole groups of 64 rows (every repacked layout's row multiple divides 64) */
        size_t cache_rows = ((256u << 10) / row + 63) / 64 * 64;
        size_t memory_rows = (((size_t)1 << 30) / row + 63) / 64 * 64;
        double cl, cm, ml, mm;
        const char *buffer;
        if (!time_product(backend, type, cache_rows, rounds * 100, &cl, &cm, &buffer) ||
            !time_product(backend, type, memory_rows, rounds, &ml, &mm, &buffer)) {
            fprintf(stderr, "ggml_matvec: out of memory\n");
            return 1;
        }
        printf("%-6s %8.1f %8.1f %8.1f %8.1f  %s\n", argv[i], cl, cm, ml, mm, buffer);
        fflush(stdout);
    }
    ggml_backend_free(backend);
    return 0;
}

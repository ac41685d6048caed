/*
 * Micro-benchmark of the tensor-type kernels (not a test): GB/s of weight bytes through
 * dequantize and through the dot product, per type and per dispatch level this CPU runs.
 * "cache" runs over a 256 KiB weight matrix that stays in L2; "memory" over 1 GiB (more than
 * any L3), the matrix x vector case of a real forward pass. A second table times the packed matrix
 * kernels (weights repacked as a context repacks them) against 1, 2, 4 and 8 activation
 * rows, the shapes of generation and of continuous batching, and 32, a slice of a prompt:
 * GB/s of weight bytes per pass, so a kernel that reuses each weight block across tokens for
 * free keeps its 1-token figure.
 * Usage: bench_quant [SECONDS [TYPE ...]]: seconds per figure, and the types to time (names as
 * tensor_type_name spells them, q4_0 or q6_K; every type when none is given). The packed table
 * runs at the active level (CORRAL_CPU=avx2, say).
 * bench_quant --min ROUNDS [TYPE ...] times the 1-token packed kernels for a busy machine,
 * where averages over seconds measure the other processes: each pass (in cache) or each slice
 * of 64 row groups (from memory) is timed alone, and the least and the median of those times
 * are printed, per super-block of 16 rows (256 weights each) and as GB/s of weight bytes.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "huge_pages.h"
#include "quant.h"
#include "tensor_type.h"

enum { ROW_ELEMS = 4096 };

static const uint32_t bench_types[] = {
    TENSOR_TYPE_F32,  TENSOR_TYPE_F16,  TENSOR_TYPE_BF16, TENSOR_TYPE_Q4_0, TENSOR_TYPE_Q4_1,
    TENSOR_TYPE_Q5_0, TENSOR_TYPE_Q5_1, TENSOR_TYPE_Q8_0, TENSOR_TYPE_Q2_K, TENSOR_TYPE_Q3_K,
    TENSOR_TYPE_Q4_K, TENSOR_TYPE_Q5_K, TENSOR_TYPE_Q6_K, TENSOR_TYPE_MXFP4,
    TENSOR_TYPE_IQ4_NL, TENSOR_TYPE_IQ4_XS, TENSOR_TYPE_IQ2_XXS, TENSOR_TYPE_IQ2_XS,
    TENSOR_TYPE_IQ2_S, TENSOR_TYPE_IQ3_XXS, TENSOR_TYPE_IQ3_S, TENSOR_TYPE_IQ1_S,
    TENSOR_TYPE_IQ1_M,
};

/* The types named on the command line, or every type when none was. */
static char **chosen_types;
static int n_chosen_types;

static bool type_chosen(uint32_t type)
{
    if (n_chosen_types == 0)
        return true;
    for (int i = 0; i < n_chosen_types; i++)
        if (strcmp(chosen_types[i], tensor_type_name(type)) == 0)
            return true;
    return false;
}

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Sink for results so the compiler keeps every call. */
static volatile float sink;

typedef struct bench_matrix {
    const quant_ops *ops;
    uint8_t *w;
    size_t n_rows, row_bytes;
    uint8_t *act;
    float *out;
} bench_matrix;

static double dot_pass(const void *arg)
{
    const bench_matrix *m = arg;
    float sum = 0.0f;
    for (size_t r = 0; r < m->n_rows; r++)
        sum += m->ops->dot(ROW_ELEMS, m->w + r * m->row_bytes, m->act);
    sink = sum;
    return (double)(m->n_rows * m->row_bytes);
}

static double dequantize_pass(const void *arg)
{
    const bench_matrix *m = arg;
    for (size_t r = 0; r < m->n_rows; r++)
        m->ops->dequantize(m->w + r * m->row_bytes, m->out, ROW_ELEMS);
    sink = m->out[ROW_ELEMS - 1];
    return (double)(m->n_rows * m->row_bytes);
}

/* Repeat a pass for about `seconds` after one warm-up pass; GB/s of weight bytes. */
static double measure(double (*pass)(const void *), const void *m, double seconds)
{
    pass(m);
    double bytes = 0.0, start = now_seconds(), elapsed;
    do {
        bytes += pass(m);
        elapsed = now_seconds() - start;
    } while (elapsed < seconds);
    return bytes / elapsed * 1e-9;
}

/* A row of a type the engine only reads (the IQ types): pseudo-random bytes, each block's f16
 * scale 1/64 so that every value is finite. The scale leads every block but IQ1_M's, whose
 * four nibbles top its four scale words (the last 8 bytes), the first word's the lowest. */
static void fill_read_only_row(const quant_ops *ops, uint8_t *row)
{
    const tensor_type_info *info = tensor_type_get(ops->type);
    uint32_t state = 777;
    for (size_t i = 0; i < ROW_ELEMS / info->block_elems * info->block_bytes; i++) {
        state = state * 1664525u + 1013904223u;
        row[i] = (uint8_t)(state >> 24);
    }
    const uint16_t scale = 0x2400; /* f16 2^-6 */
    for (size_t b = 0; b < ROW_ELEMS / info->block_elems; b++) {
        uint8_t *block = row + b * info->block_bytes;
        if (ops->type != TENSOR_TYPE_IQ1_M) {
            block[0] = (uint8_t)scale;
            block[1] = (uint8_t)(scale >> 8);
            continue;
        }
        uint8_t *words = block + info->block_bytes - 8;
        for (int k = 0; k < 4; k++)
            words[2 * k + 1] = (uint8_t)((words[2 * k + 1] & 0x0f) | (scale >> (4 * k) & 0xf) << 4);
    }
}

static bool matrix_init(bench_matrix *m, const quant_ops *ops, size_t total_bytes,
                        const float *source_row, const float *activations)
{
    memset(m, 0, sizeof *m);
    m->ops = ops;
    if (!tensor_type_row_bytes(ops->type, ROW_ELEMS, &m->row_bytes))
        return false;
    m->n_rows = total_bytes / m->row_bytes + 1;
    m->w = malloc(m->n_rows * m->row_bytes);
    m->act = malloc(quant_act_row_bytes(ops->type, ROW_ELEMS));
    m->out = malloc(ROW_ELEMS * sizeof(float));
    if (!m->w || !m->act || !m->out)
        return false;
    if (ops->quantize)
        ops->quantize(source_row, m->w, ROW_ELEMS);
    else
        fill_read_only_row(ops, m->w);
    for (size_t r = 1; r < m->n_rows; r++)
        memcpy(m->w + r * m->row_bytes, m->w, m->row_bytes);
    quant_quantize_activations(ops, activations, ROW_ELEMS, 1, m->act);
    return true;
}

/* ---- packed kernels ---- */

enum { MAX_TOKENS = 32 };

typedef struct packed_bench {
    const quant_ops *ops;
    uint8_t *packed;
    size_t n_rows, row_bytes;
    uint8_t *act, *sums;
    float *y;
    size_t n_tokens;
} packed_bench;

static double packed_pass(const void *arg)
{
    const packed_bench *p = arg;
    quant_matmul_packed_rows(p->ops, p->packed, ROW_ELEMS, 0, p->n_rows, p->act, p->sums,
                             p->n_tokens, p->y, p->n_rows);
    sink = p->y[0];
    return (double)(p->n_rows * p->row_bytes);
}

/* rows of `source` repeated into a packed matrix of about total_bytes; false if out of memory */
static bool packed_init(packed_bench *p, const quant_ops *ops, size_t total_bytes,
                        const float *source, const float *activations)
{
    memset(p, 0, sizeof *p);
    p->ops = ops;
    if (!tensor_type_row_bytes(ops->type, ROW_ELEMS, &p->row_bytes))
        return false;
    size_t row_bytes = p->row_bytes;
    p->n_rows = (total_bytes / row_bytes + QUANT_PACK_ROWS) / QUANT_PACK_ROWS * QUANT_PACK_ROWS;
    uint8_t *w = malloc(p->n_rows * row_bytes);
    p->packed = alloc_huge(p->n_rows * row_bytes);
    size_t act_bytes = quant_act_row_bytes(ops->type, ROW_ELEMS);
    p->act = malloc(MAX_TOKENS * act_bytes);
    p->sums = malloc(MAX_TOKENS * quant_packed_sums_bytes(ROW_ELEMS));
    p->y = malloc(MAX_TOKENS * p->n_rows * sizeof(float));
    if (!w || !p->packed || !p->act || !p->sums || !p->y) {
        free(w);
        return false;
    }
    if (ops->quantize)
        ops->quantize(source, w, ROW_ELEMS);
    else
        fill_read_only_row(ops, w);
    for (size_t r = 1; r < p->n_rows; r++)
        memcpy(w + r * row_bytes, w, row_bytes);
    quant_pack_rows(ops, w, ROW_ELEMS, 0, p->n_rows, p->packed);
    free(w);
    for (size_t t = 0; t < MAX_TOKENS; t++)
        quant_quantize_activations(ops, activations, ROW_ELEMS, 1, p->act + t * act_bytes);
    quant_prepare_packed_act(ops, p->act, ROW_ELEMS, MAX_TOKENS, p->sums);
    return true;
}

static void packed_free(packed_bench *p)
{
    free(p->packed);
    free(p->act);
    free(p->sums);
    free(p->y);
}

/* The packed kernels of the detected level, per token count, from cache and from memory. */
static bool bench_packed(const float *source, const float *activations, double seconds)
{
    static const size_t token_counts[] = {1, 2, 4, 8, 32};
    printf("\npacked kernels (level %s): GB/s of weight bytes, cache / memory\n",
           cpu_level_name(cpu_active_level()));
    printf("%-6s", "type");
    for (size_t k = 0; k < sizeof token_counts / sizeof token_counts[0]; k++)
        printf(" %9zu tok%s", token_counts[k], token_counts[k] > 1 ? "s" : " ");
    printf("\n");
    for (size_t t = 0; t < sizeof bench_types / sizeof bench_types[0]; t++) {
        const quant_ops *ops = quant_ops_get(bench_types[t], cpu_active_level());
        if (!ops || !ops->matmul_packed || !type_chosen(bench_types[t]))
            continue;
        packed_bench cache, memory;
        if (!packed_init(&cache, ops, 256 << 10, source, activations) ||
            !packed_init(&memory, ops, (size_t)1 << 30, source, activations))
            return false;
        printf("%-6s", tensor_type_name(bench_types[t]));
        fflush(stdout);
        for (size_t k = 0; k < sizeof token_counts / sizeof token_counts[0]; k++) {
            cache.n_tokens = memory.n_tokens = token_counts[k];
            printf(" %6.1f / %4.1f", measure(packed_pass, &cache, seconds),
                   measure(packed_pass, &memory, seconds));
            fflush(stdout);
        }
        printf("\n");
        packed_free(&cache);
        packed_free(&memory);
    }
    return true;
}

/* ---- least times of the 1-token packed kernels ---- */

enum { MIN_SLICE_GROUPS = 64, MAX_SAMPLES = 1 << 16 };

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Times of 1-token passes over row groups [0, n_groups) of p, split in slices of
 * slice_groups: samples[i] seconds per slice, at most max_samples of them in `rounds`
 * passes; returns the count. */
static size_t time_slices(packed_bench *p, size_t slice_groups, int rounds, double *samples,
                          size_t max_samples)
{
    size_t n_groups = p->n_rows / QUANT_PACK_ROWS, count = 0;
    p->n_tokens = 1;
    packed_pass(p); /* warm-up: pages touched, caches filled for the in-cache case */
    for (int r = 0; r < rounds; r++)
        for (size_t g = 0; g < n_groups && count < max_samples; g += slice_groups) {
            size_t end = g + slice_groups < n_groups ? g + slice_groups : n_groups;
            double start = now_seconds();
            quant_matmul_packed_rows(p->ops, p->packed, ROW_ELEMS, g * QUANT_PACK_ROWS,
                                     end * QUANT_PACK_ROWS, p->act, p->sums, 1, p->y, p->n_rows);
            samples[count++] = (now_seconds() - start) / (double)(end - g);
        }
    sink = p->y[0];
    return count;
}

/* "least / median ns per 16-row super-block, GB/s at the least" for samples of seconds per
 * row group. */
static void print_least(double *samples, size_t count, size_t row_bytes)
{
    qsort(samples, count, sizeof *samples, compare_doubles);
    double blocks = (double)(ROW_ELEMS / 256);
    double group_bytes = (double)(QUANT_PACK_ROWS * row_bytes);
    printf(" %8.1f %8.1f %7.1f", samples[0] * 1e9 / blocks, samples[count / 2] * 1e9 / blocks,
           group_bytes / samples[0] * 1e-9);
}

static bool bench_least(const float *source, const float *activations, int rounds)
{
    double *samples = malloc(MAX_SAMPLES * sizeof *samples);
    if (!samples)
        return false;
    printf("1-token packed kernels (level %s), %d rounds: ns per 16-row super-block, least and "
           "median, and GB/s at the least\n",
           cpu_level_name(cpu_active_level()), rounds);
    printf("%-6s %8s %8s %7s %8s %8s %7s\n", "type", "cache", "median", "GB/s", "memory",
           "median", "GB/s");
    for (size_t t = 0; t < sizeof bench_types / sizeof bench_types[0]; t++) {
        const quant_ops *ops = quant_ops_get(bench_types[t], cpu_active_level());
        if (!ops || !ops->matmul_packed || !type_chosen(bench_types[t]))
            continue;
        packed_bench cache, memory;
        if (!packed_init(&cache, ops, 256 << 10, source, activations) ||
            !packed_init(&memory, ops, (size_t)1 << 30, source, activations)) {
            free(samples);
            return false;
        }
        printf("%-6s", tensor_type_name(bench_types[t]));
        /* the in-cache matrix whole per sample; passes over it, many more than from memory */
        size_t count = time_slices(&cache, cache.n_rows / QUANT_PACK_ROWS, rounds * 100,
                                   samples, MAX_SAMPLES);
        print_least(samples, count, cache.row_bytes);
        count = time_slices(&memory, MIN_SLICE_GROUPS, rounds, samples, MAX_SAMPLES);
        print_least(samples, count, memory.row_bytes);
        printf("\n");
        fflush(stdout);
        packed_free(&cache);
        packed_free(&memory);
    }
    free(samples);
    return true;
}

static void matrix_free(bench_matrix *m)
{
    free(m->w);
    free(m->act);
    free(m->out);
}

int main(int argc, char **argv)
{
    bool least = argc > 1 && strcmp(argv[1], "--min") == 0;
    if (least) {
        argv++;
        argc--;
    }
    double seconds = argc > 1 ? atof(argv[1]) : 0.3;
    if (seconds <= 0.0)
        seconds = 0.3;
    chosen_types = argv + (argc > 1 ? 2 : 1);
    n_chosen_types = argc > 2 ? argc - 2 : 0;
    float *source = malloc(ROW_ELEMS * sizeof(float));
    float *activations = malloc(ROW_ELEMS * sizeof(float));
    if (!source || !activations)
        return 1;
    uint32_t state = 12345;
    for (int i = 0; i < ROW_ELEMS; i++) {
        state = state * 1664525u + 1013904223u;
        source[i] = (float)((int)(state >> 16) % 2001 - 1000) / 1000.0f;
        state = state * 1664525u + 1013904223u;
        activations[i] = (float)((int)(state >> 16) % 2001 - 1000) / 100.0f;
    }
    if (least) {
        bool ok = bench_least(source, activations, seconds < 1.0 ? 1 : (int)seconds);
        free(source);
        free(activations);
        return ok ? 0 : 1;
    }

    printf("row %d elements; GB/s of weight bytes (this CPU: %s, VNNI %s)\n", ROW_ELEMS,
           cpu_level_name(cpu_detected_level()), cpu_has_avx512_vnni() ? "yes" : "no");
    printf("%-6s %-7s %12s %12s %12s\n", "type", "level", "dequantize", "dot cache",
           "dot memory");
    for (size_t t = 0; t < sizeof bench_types / sizeof bench_types[0]; t++) {
        if (!type_chosen(bench_types[t]))
            continue;
        for (int level = 0; level <= (int)cpu_detected_level(); level++) {
            const quant_ops *ops = quant_ops_get(bench_types[t], (enum cpu_level)level);
            if (!ops || !ops->dot || !ops->dequantize) {
                printf("%-6s %-7s %12s\n", tensor_type_name(bench_types[t]),
                       cpu_level_name((enum cpu_level)level), "no kernels");
                break;
            }
            bench_matrix cache, memory;
            if (!matrix_init(&cache, ops, 256 << 10, source, activations) ||
                !matrix_init(&memory, ops, (size_t)1 << 30, source, activations))
                return 1;
            double deq = measure(dequantize_pass, &cache, seconds);
            double dot_cache = measure(dot_pass, &cache, seconds);
            double dot_memory = measure(dot_pass, &memory, seconds);
            printf("%-6s %-7s %12.2f %12.2f %12.2f\n", tensor_type_name(bench_types[t]),
                   cpu_level_name((enum cpu_level)level), deq, dot_cache, dot_memory);
            fflush(stdout);
            matrix_free(&cache);
            matrix_free(&memory);
        }
    }
    bool ok = bench_packed(source, activations, seconds);
    free(source);
    free(activations);
    return ok ? 0 : 1;
}

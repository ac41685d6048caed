/*
 * bench_stream: how fast a packed kernel of 1 token (or of a tile of up to 4, as in a step
 * of batched decoding) streams its weights from memory against how
 * fast plain loads read the same buffer, measured in alternation by the same threads (not a
 * test). On a machine whose bandwidth changes state within seconds (the Zen 4 VM of
 * docs/PERFORMANCE.md), figures taken by separate programs minutes apart cannot be set side
 * by side; here each round reads plain loads (plain_loads.h), the kernel, plain loads again
 * and plain loads with the kernels' software prefetch, each for the same short window. The
 * kernel's window is bracketed by two plain ones: a round whose two disagree saw the state
 * change and is best left out. Each thread reads its own contiguous share of the rows, as
 * the threads of a decoding step do.
 * Usage: bench_stream [TYPE [THREADS [ROUNDS [TOKENS]]]]   (defaults q4_0, 2, 12, 1; at the
 * active level)
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "huge_pages.h"
#include "plain_loads.h"
#include "quant.h"
#include "tensor_type.h"

enum { ROW_ELEMS = 2048, MAX_THREADS = 64, MAX_TOKENS = 4 };
static const double WINDOW_SECONDS = 0.15, START_DELAY_SECONDS = 0.01;

enum read_mode { READ_KERNEL, READ_LOADS, READ_LOADS_PREFETCH, READ_MODES };

typedef struct stream_matrix {
    const quant_ops *ops;
    uint8_t *packed;
    size_t n_rows, row_bytes, n_tokens;
    uint8_t *act, *sums;
    float *y;
} stream_matrix;

typedef struct reader {
    const stream_matrix *m;
    enum read_mode mode;
    size_t row_begin, row_end;
    double start, deadline, finished, bytes;
    uint64_t check;
} reader;

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static plain_read_fn read_loads;

static void *read_share(void *arg)
{
    reader *r = arg;
    const stream_matrix *m = r->m;
    size_t bytes = (r->row_end - r->row_begin) * m->row_bytes;
    double now;
    while ((now = now_seconds()) < r->start)
        ;
    do {
        if (r->mode == READ_KERNEL)
            quant_matmul_packed_rows(m->ops, m->packed, ROW_ELEMS, r->row_begin, r->row_end,
                                     m->act, m->sums, m->n_tokens, m->y, m->n_rows);
        else
            r->check ^= read_loads(m->packed + r->row_begin * m->row_bytes,
                                   bytes / PLAIN_CHUNK_BYTES * PLAIN_CHUNK_BYTES,
                                   r->mode == READ_LOADS_PREFETCH);
        r->bytes += (double)bytes;
        now = now_seconds();
    } while (now < r->deadline);
    r->finished = now;
    return NULL;
}

/* GB/s of n_threads readers in one shared window (bench_bandwidth's timing rule); 0 when a
 * thread cannot be started. */
static double measure(const stream_matrix *m, enum read_mode mode, size_t n_threads,
                      uint64_t *check)
{
    reader readers[MAX_THREADS];
    pthread_t threads[MAX_THREADS];
    size_t n_groups = m->n_rows / QUANT_PACK_ROWS, started = 0;
    double start = now_seconds() + START_DELAY_SECONDS, last = start, bytes = 0.0;
    for (size_t t = 0; t < n_threads; t++) {
        readers[t] = (reader){.m = m,
                              .mode = mode,
                              .row_begin = n_groups * t / n_threads * QUANT_PACK_ROWS,
                              .row_end = n_groups * (t + 1) / n_threads * QUANT_PACK_ROWS,
                              .start = start,
                              .deadline = start + WINDOW_SECONDS};
        if (pthread_create(&threads[t], NULL, read_share, &readers[t]) != 0)
            break;
        started++;
    }
    for (size_t t = 0; t < started; t++) {
        pthread_join(threads[t], NULL);
        bytes += readers[t].bytes;
        *check ^= readers[t].check;
        if (readers[t].finished > last)
            last = readers[t].finished;
    }
    return started == n_threads ? bytes / (last - start) * 1e-9 : 0.0;
}

/* About 1 GiB of one random row group repeated, packed, on huge pages, and n_tokens
 * activation rows. */
static bool matrix_init(stream_matrix *m, const quant_ops *ops, size_t n_tokens)
{
    memset(m, 0, sizeof *m);
    m->ops = ops;
    m->n_tokens = n_tokens;
    if (!tensor_type_row_bytes(ops->type, ROW_ELEMS, &m->row_bytes))
        return false;
    size_t group_bytes = QUANT_PACK_ROWS * m->row_bytes;
    m->n_rows = ((size_t)1 << 30) / group_bytes * QUANT_PACK_ROWS;
    float *x = malloc(n_tokens * ROW_ELEMS * sizeof(float));
    uint8_t *rows = malloc(group_bytes), *group = malloc(group_bytes);
    m->packed = alloc_huge(m->n_rows * m->row_bytes);
    m->act = malloc(n_tokens * quant_act_row_bytes(ops->type, ROW_ELEMS));
    m->sums = malloc(n_tokens * quant_packed_sums_bytes(ROW_ELEMS));
    m->y = malloc(n_tokens * m->n_rows * sizeof(float));
    bool ok = x && rows && group && m->packed && m->act && m->sums && m->y;
    if (ok) {
        uint32_t state = 12345;
        for (size_t r = 0; r < QUANT_PACK_ROWS; r++) {
            for (size_t i = 0; i < ROW_ELEMS; i++) {
                state = state * 1664525u + 1013904223u;
                x[i] = (float)((int)(state >> 16) % 2001 - 1000) / 1000.0f;
            }
            ops->quantize(x, rows + r * m->row_bytes, ROW_ELEMS);
        }
        quant_pack_rows(ops, rows, ROW_ELEMS, 0, QUANT_PACK_ROWS, group);
        for (size_t g = 0; g < m->n_rows / QUANT_PACK_ROWS; g++)
            memcpy(m->packed + g * group_bytes, group, group_bytes);
        for (size_t t = 1; t < n_tokens; t++) /* each token the last row's values, turned */
            for (size_t i = 0; i < ROW_ELEMS; i++)
                x[t * ROW_ELEMS + i] = x[(i + 7 * t) % ROW_ELEMS];
        quant_quantize_activations(ops, x, ROW_ELEMS, n_tokens, m->act);
        quant_prepare_packed_act(ops, m->act, ROW_ELEMS, n_tokens, m->sums);
    }
    free(x);
    free(rows);
    free(group);
    return ok;
}

static void matrix_free(stream_matrix *m)
{
    free(m->packed);
    free(m->act);
    free(m->sums);
    free(m->y);
}

int main(int argc, char **argv)
{
    const char *type_name = argc > 1 ? argv[1] : "q4_0";
    size_t n_threads = argc > 2 ? strtoul(argv[2], NULL, 10) : 2;
    size_t rounds = argc > 3 ? strtoul(argv[3], NULL, 10) : 12;
    size_t n_tokens = argc > 4 ? strtoul(argv[4], NULL, 10) : 1;
    int type = tensor_type_from_name(type_name);
    const quant_ops *ops = type >= 0 ? quant_ops_active((uint32_t)type) : NULL;
    if (!ops || !ops->matmul_packed || n_threads < 1 || n_threads > MAX_THREADS || rounds < 1 ||
        n_tokens < 1 || n_tokens > MAX_TOKENS) {
        fprintf(stderr, "Usage: bench_stream [TYPE with a packed kernel at this level, e.g. "
                        "q4_0 [THREADS 1..64 [ROUNDS [TOKENS 1..4]]]]\n");
        return 2;
    }
    const char *loads;
    read_loads = plain_loads_select(&loads);
    stream_matrix m;
    if (!matrix_init(&m, ops, n_tokens)) {
        fprintf(stderr, "bench_stream: cannot allocate the 1 GiB matrix\n");
        return 1;
    }
    printf("%s %zu-token packed kernel (level %s) vs plain %s loads, %zu thread%s, GB/s of "
           "weights per round\n",
           tensor_type_name(ops->type), n_tokens, cpu_level_name(cpu_active_level()), loads,
           n_threads, n_threads > 1 ? "s" : "");
    printf("%8s %8s %8s %16s %8s\n", "loads", "kernel", "loads", "loads+prefetch", "ratio");
    uint64_t check = 0;
    for (int mode = 0; mode < READ_MODES; mode++) /* warm-up: fault in, reach steady clocks */
        measure(&m, (enum read_mode)mode, n_threads, &check);
    for (size_t r = 0; r < rounds; r++) {
        double before = measure(&m, READ_LOADS, n_threads, &check);
        double kernel = measure(&m, READ_KERNEL, n_threads, &check);
        double after = measure(&m, READ_LOADS, n_threads, &check);
        double prefetch = measure(&m, READ_LOADS_PREFETCH, n_threads, &check);
        double loads = (before + after) / 2;
        printf("%8.1f %8.1f %8.1f %16.1f %8.2f\n", before, kernel, after, prefetch,
               loads > 0 ? kernel / loads : 0.0);
    }
    printf("(check %llx; ratio = kernel / the mean of the loads around it)\n",
           (unsigned long long)check);
    matrix_free(&m);
    return 0;
}

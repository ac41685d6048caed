/*
 * bench_bandwidth: the machine's memory read bandwidth, the ceiling of token generation
 * (every weight byte is read once per token). Each thread XORs its own slice of a buffer far
 * larger than the caches with the widest vector loads the CPU has (AVX-512, else AVX2, else
 * 8-byte words), as the kernels read weights: 8-byte loads understate a core's bandwidth by
 * about 40% on a Sapphire Rapids class Xeon. Like the weights, the buffer sits on huge pages,
 * and each pass runs both with the hardware prefetchers alone and with the kernels' software
 * prefetch (8 KiB ahead, into L2), which lifts one core from 15.8 to 17.6 GB/s there: the
 * ceiling is the best a core can read, not what one plain loop reads. Prints the best pass in
 * GB/s and how it read.
 * Usage: bench_bandwidth [THREADS [MiB]]   (defaults 1 and 1024)
 */
#include <immintrin.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

enum { PASSES = 7, CHUNK_BYTES = 256, PREFETCH_BYTES = 8192, HUGE_PAGE = 2 << 20 };

typedef struct slice {
    const unsigned char *bytes;
    size_t n_bytes; /* a multiple of CHUNK_BYTES */
    pthread_barrier_t *start;
    bool prefetch;
    uint64_t sum;
    double started, finished; /* the thread's own clock readings around its reads */
} slice;

/* Four independent accumulators per loop, so each is bound by loads, not by one XOR chain. */
/* The kernels' software prefetch: the lines PREFETCH_BYTES ahead, into L2 (prefetcht2). */
static inline void prefetch_chunk(const unsigned char *p)
{
    for (int k = 0; k < CHUNK_BYTES; k += 64)
        __builtin_prefetch(p + PREFETCH_BYTES + k, 0, 1);
}

__attribute__((target("avx512f"))) static uint64_t read_avx512(const unsigned char *p, size_t n,
                                                               bool prefetch)
{
    __m512i a = _mm512_setzero_si512(), b = a, c = a, d = a;
    for (size_t i = 0; i < n; i += CHUNK_BYTES) {
        if (prefetch)
            prefetch_chunk(p + i);
        a = _mm512_xor_si512(a, _mm512_load_si512(p + i));
        b = _mm512_xor_si512(b, _mm512_load_si512(p + i + 64));
        c = _mm512_xor_si512(c, _mm512_load_si512(p + i + 128));
        d = _mm512_xor_si512(d, _mm512_load_si512(p + i + 192));
    }
    return (uint64_t)_mm512_reduce_or_epi64(_mm512_xor_si512(_mm512_xor_si512(a, b),
                                                              _mm512_xor_si512(c, d)));
}

__attribute__((target("avx2"))) static uint64_t read_avx2(const unsigned char *p, size_t n,
                                                           bool prefetch)
{
    __m256i a = _mm256_setzero_si256(), b = a, c = a, d = a;
    for (size_t i = 0; i < n; i += CHUNK_BYTES / 2) {
        if (prefetch && i % CHUNK_BYTES == 0)
            prefetch_chunk(p + i);
        a = _mm256_xor_si256(a, _mm256_load_si256((const __m256i *)(p + i)));
        b = _mm256_xor_si256(b, _mm256_load_si256((const __m256i *)(p + i + 32)));
        c = _mm256_xor_si256(c, _mm256_load_si256((const __m256i *)(p + i + 64)));
        d = _mm256_xor_si256(d, _mm256_load_si256((const __m256i *)(p + i + 96)));
    }
    __m256i x = _mm256_xor_si256(_mm256_xor_si256(a, b), _mm256_xor_si256(c, d));
    return (uint64_t)_mm256_extract_epi64(x, 0) ^ (uint64_t)_mm256_extract_epi64(x, 3);
}

static uint64_t read_words(const unsigned char *p, size_t n, bool prefetch)
{
    const uint64_t *w = (const uint64_t *)(const void *)p;
    uint64_t a = 0, b = 0, c = 0, d = 0;
    for (size_t i = 0; i < n / 8; i += 4) {
        if (prefetch && i % (CHUNK_BYTES / 8) == 0)
            prefetch_chunk(p + 8 * i);
        a ^= w[i];
        b ^= w[i + 1];
        c ^= w[i + 2];
        d ^= w[i + 3];
    }
    return a ^ b ^ c ^ d;
}

static uint64_t (*read_bytes)(const unsigned char *, size_t, bool) = read_words;

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void *read_slice(void *p)
{
    slice *s = p;
    pthread_barrier_wait(s->start);
    s->started = now_seconds();
    s->sum = read_bytes(s->bytes, s->n_bytes, s->prefetch);
    s->finished = now_seconds();
    return NULL;
}

int main(int argc, char **argv)
{
    size_t n_threads = argc > 1 ? strtoul(argv[1], NULL, 10) : 1;
    size_t mib = argc > 2 ? strtoul(argv[2], NULL, 10) : 1024;
    if (n_threads < 1 || n_threads > 256 || mib < 64) {
        fprintf(stderr, "Usage: bench_bandwidth [THREADS [MiB >= 64]]\n");
        return 2;
    }
    const char *loads = "8-byte";
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) {
        read_bytes = read_avx512;
        loads = "AVX-512";
    } else if (__builtin_cpu_supports("avx2")) {
        read_bytes = read_avx2;
        loads = "AVX2";
    }
    size_t bytes = mib << 20, per_thread = bytes / n_threads / CHUNK_BYTES * CHUNK_BYTES;
    unsigned char *buffer = aligned_alloc(HUGE_PAGE, bytes);
    pthread_t *threads = calloc(n_threads, sizeof *threads);
    slice *slices = calloc(n_threads, sizeof *slices);
    if (!buffer || !threads || !slices) {
        fprintf(stderr, "bench_bandwidth: cannot allocate %zu MiB\n", mib);
        return 1;
    }
    madvise(buffer, bytes, MADV_HUGEPAGE); /* advice only, as for the repacked weights */
    memset(buffer, 1, bytes);              /* fault every page in before timing */
    double best = 0.0;
    bool best_prefetch = false;
    uint64_t check = 0;
    for (int pass = 0; pass < 2 * PASSES; pass++) {
        bool prefetch = pass % 2 == 1;
        pthread_barrier_t start;
        pthread_barrier_init(&start, NULL, (unsigned)n_threads + 1);
        for (size_t t = 0; t < n_threads; t++) {
            slices[t] = (slice){buffer + t * per_thread, per_thread, &start, prefetch, 0, 0.0, 0.0};
            pthread_create(&threads[t], NULL, read_slice, &slices[t]);
        }
        pthread_barrier_wait(&start);
        /* Timed from the first read to the last by the readers' own clocks: with as many
         * readers as cores, this thread may not run again until they are done, and its own
         * clock then gave up to 10x the true figure on small buffers. */
        double first = 0.0, last = 0.0;
        for (size_t t = 0; t < n_threads; t++) {
            pthread_join(threads[t], NULL);
            check ^= slices[t].sum;
            if (t == 0 || slices[t].started < first)
                first = slices[t].started;
            if (t == 0 || slices[t].finished > last)
                last = slices[t].finished;
        }
        double gbps = (double)(per_thread * n_threads) / (last - first) / 1e9;
        if (gbps > best) {
            best = gbps;
            best_prefetch = prefetch;
        }
        pthread_barrier_destroy(&start);
    }
    printf("read bandwidth, %zu thread%s: %.1f GB/s (%s loads%s, best of %d passes each with and "
           "without software prefetch over %zu MiB; check %llx)\n",
           n_threads, n_threads == 1 ? "" : "s", best, loads,
           best_prefetch ? " + prefetch" : "", PASSES, mib, (unsigned long long)(check & 0xff));
    free(buffer);
    free(threads);
    free(slices);
    return 0;
}

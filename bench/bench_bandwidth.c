/*
 * bench_bandwidth: the machine's memory read bandwidth, the ceiling of token generation
 * (every weight byte is read once per token). Each thread sums its own slice of a buffer
 * far larger than the caches; prints the best of several passes in GB/s.
 * Usage: bench_bandwidth [THREADS [MiB]]   (defaults 1 and 1024)
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { PASSES = 7 };

typedef struct slice {
    const uint64_t *words;
    size_t n_words;
    pthread_barrier_t *start;
    uint64_t sum;
} slice;

/* Four independent sums so the loop is bound by loads, not by one add chain. */
static void *read_slice(void *p)
{
    slice *s = p;
    pthread_barrier_wait(s->start);
    uint64_t a = 0, b = 0, c = 0, d = 0;
    for (size_t i = 0; i + 4 <= s->n_words; i += 4) {
        a += s->words[i];
        b += s->words[i + 1];
        c += s->words[i + 2];
        d += s->words[i + 3];
    }
    s->sum = a ^ b ^ c ^ d;
    return NULL;
}

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    size_t n_threads = argc > 1 ? strtoul(argv[1], NULL, 10) : 1;
    size_t mib = argc > 2 ? strtoul(argv[2], NULL, 10) : 1024;
    if (n_threads < 1 || n_threads > 256 || mib < 64) {
        fprintf(stderr, "Usage: bench_bandwidth [THREADS [MiB >= 64]]\n");
        return 2;
    }
    size_t bytes = mib << 20, n_words = bytes / sizeof(uint64_t);
    uint64_t *words = malloc(bytes);
    pthread_t *threads = calloc(n_threads, sizeof *threads);
    slice *slices = calloc(n_threads, sizeof *slices);
    if (!words || !threads || !slices) {
        fprintf(stderr, "bench_bandwidth: cannot allocate %zu MiB\n", mib);
        return 1;
    }
    memset(words, 1, bytes); /* fault every page in before timing */
    double best = 0.0;
    uint64_t check = 0;
    for (int pass = 0; pass < PASSES; pass++) {
        pthread_barrier_t start;
        pthread_barrier_init(&start, NULL, (unsigned)n_threads + 1);
        for (size_t t = 0; t < n_threads; t++) {
            slices[t] = (slice){words + t * (n_words / n_threads), n_words / n_threads, &start, 0};
            pthread_create(&threads[t], NULL, read_slice, &slices[t]);
        }
        pthread_barrier_wait(&start);
        double t0 = now_seconds();
        for (size_t t = 0; t < n_threads; t++) {
            pthread_join(threads[t], NULL);
            check ^= slices[t].sum;
        }
        double gbps = (double)(n_words / n_threads * n_threads * sizeof(uint64_t)) /
                      (now_seconds() - t0) / 1e9;
        best = gbps > best ? gbps : best;
        pthread_barrier_destroy(&start);
    }
    printf("read bandwidth, %zu thread%s: %.1f GB/s (best of %d passes over %zu MiB; check %llx)\n",
           n_threads, n_threads == 1 ? "" : "s", best, PASSES, mib, (unsigned long long)(check & 0xff));
    free(words);
    free(threads);
    free(slices);
    return 0;
}

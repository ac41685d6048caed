/*
 * bench_bandwidth: the machine's memory read bandwidth, the ceiling of token generation
 * (every weight byte is read once per token). Each thread XORs its own slice of a buffer far
 * larger than the caches with the widest vector loads the CPU has (AVX-512, else AVX2, else
 * 8-byte words), as the kernels read weights: 8-byte loads understate a core's bandwidth by
 * about 40% on a Sapphire Rapids class Xeon. Like the weights, the buffer sits on huge pages,
 * and each pass runs both with the hardware prefetchers alone and with the kernels' software
 * prefetch (8 KiB ahead, into L2), which lifts one core from 15.8 to 17.6 GB/s there: the
 * ceiling is the best a core can read, not what one plain loop reads. Every reader loops over
 * its slice for the same window of time, so that the figure is what they read together.
 * Prints the best pass in GB/s and how it read.
 * Usage: bench_bandwidth [THREADS [MiB]]   (defaults 1 and 1024)
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "plain_loads.h"

enum { PASSES = 7, HUGE_PAGE = 2 << 20 };

/* Readers look at the clock after each run of RUN_BYTES; a pass lasts WINDOW_SECONDS. */
enum { RUN_BYTES = 4 << 20 };
static const double WINDOW_SECONDS = 0.2, START_DELAY_SECONDS = 0.02;

typedef struct slice {
    const unsigned char *bytes;
    size_t n_bytes; /* a multiple of RUN_BYTES */
    bool prefetch;
    double start, deadline; /* the window every reader shares (CLOCK_MONOTONIC) */
    uint64_t sum;
    size_t bytes_read;
    double finished; /* the clock after the reader's last run */
} slice;

static plain_read_fn read_bytes;

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/*
 * Reads runs of the slice, wrapping around, from the shared start until the shared deadline.
 * A reader that the scheduler starts late reads less: the figure is what the readers achieve
 * together, never more (no byte is counted outside [start, finished]).
 */
static void *read_slice(void *p)
{
    slice *s = p;
    double now;
    while ((now = now_seconds()) < s->start)
        ;
    size_t at = 0;
    do {
        s->sum ^= read_bytes(s->bytes + at, RUN_BYTES, s->prefetch);
        s->bytes_read += RUN_BYTES;
        at = (at + RUN_BYTES) % s->n_bytes;
        now = now_seconds();
    } while (now < s->deadline);
    s->finished = now;
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
    const char *loads;
    read_bytes = plain_loads_select(&loads);
    size_t bytes = mib << 20, per_thread = bytes / n_threads / RUN_BYTES * RUN_BYTES;
    if (per_thread == 0) {
        fprintf(stderr, "bench_bandwidth: %zu MiB is too small for %zu threads\n", mib, n_threads);
        return 2;
    }
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
        /* Timed by the shared window and the readers' own clocks, never by this thread's:
         * with as many readers as cores it may not run again until they are done (its
         * clock once gave 10x the true figure). The start lies after every thread exists. */
        double start = now_seconds() + START_DELAY_SECONDS;
        for (size_t t = 0; t < n_threads; t++) {
            slices[t] = (slice){.bytes = buffer + t * per_thread,
                                .n_bytes = per_thread,
                                .prefetch = prefetch,
                                .start = start,
                                .deadline = start + WINDOW_SECONDS};
            pthread_create(&threads[t], NULL, read_slice, &slices[t]);
        }
        size_t total = 0;
        double last = start;
        for (size_t t = 0; t < n_threads; t++) {
            pthread_join(threads[t], NULL);
            check ^= slices[t].sum;
            total += slices[t].bytes_read;
            if (slices[t].finished > last)
                last = slices[t].finished;
        }
        double gbps = (double)total / (last - start) / 1e9;
        if (gbps > best) {
            best = gbps;
            best_prefetch = prefetch;
        }
    }
    printf("read bandwidth, %zu thread%s: %.1f GB/s (%s loads%s, best of %d passes each with and "
           "without software prefetch, %.1f s each over %zu MiB; check %llx)\n",
           n_threads, n_threads == 1 ? "" : "s", best, loads,
           best_prefetch ? " + prefetch" : "", PASSES, WINDOW_SECONDS, mib, (unsigned long long)(check & 0xff));
    free(buffer);
    free(threads);
    free(slices);
    return 0;
}

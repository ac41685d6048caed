/*
 * bench_placement: where the machine has put two threads, and what that does to the read
 * bandwidth (not a test). On the 2-vCPU Zen 4 VM of docs/PERFORMANCE.md the 2-thread
 * bandwidth jumps between about 30 and 50-60 GB/s within seconds; this program shows why.
 * Each round first times a cache-line ping-pong between the two threads (a round trip of
 * about 55 ns between cores that share an L3, several times that between chiplets), then
 * lets both read their own half of a buffer for a short window, as bench_bandwidth does;
 * then both sleep a moment.
 * Rounds are then grouped by the round trip, under twice the fastest one seen or not (when
 * every round had the same placement there is one group), with the median bandwidth of each.
 * Usage: bench_placement [ROUNDS]   (default 40)
 */
#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "huge_pages.h"
#include "plain_loads.h"

enum { PING_PONGS = 20000, HALF_BYTES = 256u << 20, MAX_ROUNDS = 1000 };
static const double READ_SECONDS = 0.05, IDLE_SECONDS = 0.2, PEER_POLL_SECONDS = 0.0002;

/* What the two threads share: the ping-pong word, and the step the peer is told to take. */
typedef struct shared {
    alignas(64) _Atomic uint64_t ball;
    alignas(64) _Atomic uint64_t step; /* odd: ping-pong; even: read; UINT64_MAX: stop */
    alignas(64) _Atomic uint64_t step_done;
    const unsigned char *half;
    double read_start;           /* the shared window's start */
    double read_end, read_bytes; /* the peer's clock after its last run, and what it read */
    uint64_t check;
} shared;

static plain_read_fn read_loads;

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Read runs of the half for READ_SECONDS from start; the clock after the last run. */
static double read_window(const unsigned char *half, double start, double *bytes,
                          uint64_t *check)
{
    enum { RUN = 4u << 20 };
    double now;
    while ((now = now_seconds()) < start)
        ;
    *bytes = 0.0;
    for (size_t at = 0; now < start + READ_SECONDS; at = (at + RUN) % HALF_BYTES) {
        *check ^= read_loads(half + at, RUN, false);
        *bytes += RUN;
        now = now_seconds();
    }
    return now;
}

/* Both threads sleep between rounds: a vCPU that idles may come back elsewhere, as the
 * engine's threads do between requests, so the rounds sample the placements the machine
 * gives. */
static void idle(double seconds)
{
    struct timespec ts = {0, (long)(seconds * 1e9)};
    nanosleep(&ts, NULL);
}

static void *peer_main(void *arg)
{
    shared *s = arg;
    for (uint64_t step = 1;; step++) {
        while (atomic_load(&s->step) < step)
            idle(PEER_POLL_SECONDS);
        if (atomic_load(&s->step) == UINT64_MAX)
            return NULL;
        if (step % 2 == 1) {
            for (uint64_t i = 0; i < PING_PONGS; i++) {
                while (atomic_load(&s->ball) != 2 * i + 1)
                    ;
                atomic_store(&s->ball, 2 * i + 2);
            }
        } else {
            s->read_end = read_window(s->half, s->read_start, &s->read_bytes, &s->check);
        }
        atomic_store(&s->step_done, step);
    }
}

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, size_t n)
{
    qsort(v, n, sizeof *v, compare_doubles);
    return n == 0 ? 0.0 : n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int main(int argc, char **argv)
{
    size_t rounds = argc > 1 ? strtoul(argv[1], NULL, 10) : 40;
    if (rounds < 1 || rounds > MAX_ROUNDS) {
        fprintf(stderr, "Usage: bench_placement [ROUNDS 1..%d]\n", MAX_ROUNDS);
        return 2;
    }
    const char *loads;
    read_loads = plain_loads_select(&loads);
    unsigned char *buffer = alloc_huge(2 * (size_t)HALF_BYTES);
    shared *s = aligned_alloc(64, sizeof *s);
    if (!buffer || !s) {
        fprintf(stderr, "bench_placement: cannot allocate %u MiB\n", 2 * (HALF_BYTES >> 20));
        return 1;
    }
    memset(buffer, 1, 2 * (size_t)HALF_BYTES); /* fault every page in before timing */
    memset(s, 0, sizeof *s);
    s->half = buffer + HALF_BYTES;
    pthread_t peer;
    if (pthread_create(&peer, NULL, peer_main, s) != 0) {
        fprintf(stderr, "bench_placement: cannot start the second thread\n");
        return 1;
    }
    printf("2 threads, %s loads; per round: cache-line round trip, then read bandwidth\n", loads);
    static double rtt_ns[MAX_ROUNDS], gbps[MAX_ROUNDS];
    uint64_t step = 0, check = 0;
    double fastest = 1e30;
    for (size_t r = 0; r < rounds; r++) {
        idle(IDLE_SECONDS);
        atomic_store(&s->ball, 0);
        atomic_store(&s->step, ++step);
        double start = now_seconds();
        for (uint64_t i = 0; i < PING_PONGS; i++) {
            atomic_store(&s->ball, 2 * i + 1);
            while (atomic_load(&s->ball) != 2 * i + 2)
                ;
        }
        rtt_ns[r] = (now_seconds() - start) / PING_PONGS * 1e9;
        while (atomic_load(&s->step_done) < step)
            ;
        /* both read their halves in one shared window, timed by the readers' own clocks */
        s->read_start = now_seconds() + 0.005;
        atomic_store(&s->step, ++step);
        double bytes;
        double end = read_window(buffer, s->read_start, &bytes, &check);
        while (atomic_load(&s->step_done) < step)
            ;
        end = s->read_end > end ? s->read_end : end;
        gbps[r] = (bytes + s->read_bytes) / (end - s->read_start) * 1e-9;
        printf("%8.0f ns %8.1f GB/s\n", rtt_ns[r], gbps[r]);
        fastest = rtt_ns[r] < fastest ? rtt_ns[r] : fastest;
    }
    static double near[MAX_ROUNDS], far[MAX_ROUNDS];
    size_t n_near = 0, n_far = 0;
    for (size_t r = 0; r < rounds; r++) {
        if (rtt_ns[r] < 2 * fastest)
            near[n_near++] = gbps[r];
        else
            far[n_far++] = gbps[r];
    }
    printf("round trip under %.0f ns (twice the fastest): %zu rounds, median %.1f GB/s; "
           "longer: %zu rounds, median %.1f GB/s (check %llx)\n",
           2 * fastest, n_near, median(near, n_near), n_far, median(far, n_far),
           (unsigned long long)((check ^ s->check) & 0xff));
    atomic_store(&s->step, UINT64_MAX);
    pthread_join(peer, NULL);
    free(buffer);
    free(s);
    return 0;
}

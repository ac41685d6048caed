/*
 * bench_threadpool: what one threadpool_run costs, the overhead a forward pass pays a few
 * hundred times per token. Jobs of n_tasks tasks each doing `work` ns of arithmetic; prints
 * microseconds per job for the pool and the same work on one thread.
 * Usage: bench_threadpool [THREADS [WORK_NS_PER_TASK]]   (defaults 2 and 2000)
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "threadpool.h"

enum { N_JOBS = 20000, TASKS_PER_JOB = 16 };

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef struct spin_job {
    long iterations;
    volatile double sink[64];
} spin_job;

/* Dependent float operations: a fixed amount of work that touches no memory. */
static void spin_task(void *arg, size_t task, size_t thread)
{
    spin_job *job = arg;
    double x = (double)task;
    for (long i = 0; i < job->iterations; i++)
        x = x * 0.999999 + 1.0;
    job->sink[thread % 64] = x;
}

static double seconds_per_job(threadpool *pool, spin_job *job)
{
    threadpool_run(pool, TASKS_PER_JOB, spin_task, job); /* warm-up */
    double start = now_seconds();
    for (int j = 0; j < N_JOBS; j++)
        threadpool_run(pool, TASKS_PER_JOB, spin_task, job);
    return (now_seconds() - start) / N_JOBS;
}

int main(int argc, char **argv)
{
    size_t n_threads = argc > 1 ? strtoul(argv[1], NULL, 10) : 2;
    long work_ns = argc > 2 ? strtol(argv[2], NULL, 10) : 2000;
    corral_error err;
    threadpool *single = threadpool_create(1, &err);
    threadpool *pool = threadpool_create(n_threads, &err);
    if (!single || !pool) {
        fprintf(stderr, "bench_threadpool: %s\n", err.message);
        return 1;
    }
    /* A multiply-add chain runs at about one step per 4 cycles, ~1.3 ns at 3 GHz. */
    spin_job job = {.iterations = work_ns * 3 / 4};
    double one = seconds_per_job(single, &job), many = seconds_per_job(pool, &job);
    printf("%zu threads, %d tasks of ~%ld ns per job: %.2f us per job (1 thread %.2f us): "
           "speed-up %.2fx\n", n_threads, TASKS_PER_JOB, work_ns, many * 1e6, one * 1e6, one / many);
    threadpool_free(single);
    threadpool_free(pool);
    return 0;
}

/*
 * Thread pool: every task of every job runs exactly once, on a thread index within the pool,
 * and threadpool_run returns only after all of them, whatever the thread count, the task
 * count (including jobs larger than one round of the job word) and the gaps between jobs;
 * a thread stuck in one task does not keep the rest of its share from running.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "threadpool.h"

typedef struct count_job {
    _Atomic uint32_t *runs; /* per task */
    size_t n_threads;
    _Atomic int bad_thread;
} count_job;

static void count_task(void *arg, size_t task, size_t thread)
{
    count_job *job = arg;
    if (thread >= job->n_threads)
        job->bad_thread = 1;
    job->runs[task]++;
}

static void run_and_check(threadpool *pool, size_t n_tasks)
{
    count_job job = {calloc(n_tasks ? n_tasks : 1, sizeof *job.runs), threadpool_size(pool), 0};
    assert_non_null(job.runs);
    threadpool_run(pool, n_tasks, count_task, &job);
    for (size_t t = 0; t < n_tasks; t++)
        if (job.runs[t] != 1)
            fail_msg("%zu threads, %zu tasks: task %zu ran %u times", threadpool_size(pool),
                     n_tasks, t, (unsigned)job.runs[t]);
    assert_int_equal(job.bad_thread, 0);
    free(job.runs);
}

static void test_every_task_runs_once_per_job(void **state)
{
    (void)state;
    const size_t thread_counts[] = {1, 2, 3, 8};
    const size_t task_counts[] = {0, 1, 2, 3, 17, 1000};
    for (size_t i = 0; i < sizeof thread_counts / sizeof thread_counts[0]; i++) {
        corral_error err;
        threadpool *pool = threadpool_create(thread_counts[i], &err);
        assert_non_null(pool);
        assert_int_equal(threadpool_size(pool), thread_counts[i]);
        for (int repeat = 0; repeat < 200; repeat++)
            run_and_check(pool, task_counts[repeat % (sizeof task_counts / sizeof task_counts[0])]);
        threadpool_free(pool);
    }
}

/* More tasks than one published round holds (2^20 - 1). */
static void test_job_larger_than_one_round(void **state)
{
    (void)state;
    corral_error err;
    threadpool *pool = threadpool_create(2, &err);
    assert_non_null(pool);
    run_and_check(pool, (1u << 20) + 5);
    threadpool_free(pool);
}

/* Workers that went to sleep between jobs wake for the next one. */
static void test_jobs_after_idle_gaps(void **state)
{
    (void)state;
    corral_error err;
    threadpool *pool = threadpool_create(3, &err);
    assert_non_null(pool);
    for (int i = 0; i < 3; i++) {
        struct timespec gap = {0, 20 * 1000 * 1000}; /* longer than the spin and yield phases */
        nanosleep(&gap, NULL);
        run_and_check(pool, 64);
    }
    threadpool_free(pool);
}

/* The first task of one share waits for every other task of the job: they can only all
 * run if the other threads take over the rest of the stuck thread's share. */
typedef struct stuck_job {
    size_t n_tasks, stuck_task;
    atomic_size_t done;
    atomic_bool timed_out;
} stuck_job;

static void stuck_task(void *arg, size_t task, size_t thread)
{
    (void)thread;
    stuck_job *job = arg;
    if (task == job->stuck_task) {
        struct timespec start, now, pause = {0, 100 * 1000};
        clock_gettime(CLOCK_MONOTONIC, &start);
        while (atomic_load(&job->done) < job->n_tasks - 1) {
            clock_gettime(CLOCK_MONOTONIC, &now);
            if (now.tv_sec - start.tv_sec > 20) {
                atomic_store(&job->timed_out, true);
                break;
            }
            nanosleep(&pause, NULL);
        }
    }
    atomic_fetch_add(&job->done, 1);
}

static void test_stuck_thread_share_is_taken_over(void **state)
{
    (void)state;
    corral_error err;
    for (size_t n_threads = 2; n_threads <= 3; n_threads++) {
        threadpool *pool = threadpool_create(n_threads, &err);
        assert_non_null(pool);
        for (size_t n_tasks = 4; n_tasks <= 40; n_tasks += 9) {
            /* the first task of every share but the caller's, in turn */
            for (size_t owner = 1; owner < n_threads; owner++) {
                stuck_job job = {.n_tasks = n_tasks, .stuck_task = owner * n_tasks / n_threads};
                threadpool_run(pool, n_tasks, stuck_task, &job);
                assert_false(atomic_load(&job.timed_out));
                assert_int_equal(atomic_load(&job.done), n_tasks);
            }
        }
        threadpool_free(pool);
    }
}

/* Tasks slow enough that a caller returning before the last of them had finished (counting
 * tasks as done when claimed, say) would find some not yet done. */
static void slow_count_task(void *arg, size_t task, size_t thread)
{
    struct timespec pause = {0, 2 * 1000 * 1000};
    nanosleep(&pause, NULL);
    count_task(arg, task, thread);
}

static void test_run_returns_after_the_last_task(void **state)
{
    (void)state;
    corral_error err;
    for (size_t n_threads = 2; n_threads <= 3; n_threads++) {
        threadpool *pool = threadpool_create(n_threads, &err);
        assert_non_null(pool);
        for (size_t n_tasks = 1; n_tasks <= 7; n_tasks += 3) {
            count_job job = {calloc(n_tasks, sizeof *job.runs), n_threads, 0};
            assert_non_null(job.runs);
            threadpool_run(pool, n_tasks, slow_count_task, &job);
            for (size_t t = 0; t < n_tasks; t++)
                if (job.runs[t] != 1)
                    fail_msg("%zu threads, %zu tasks: task %zu had run %u times at the return",
                             n_threads, n_tasks, t, (unsigned)job.runs[t]);
            free(job.runs);
        }
        threadpool_free(pool);
    }
}

static void test_free_accepts_null(void **state)
{
    (void)state;
    threadpool_free(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_task_runs_once_per_job),
        cmocka_unit_test(test_job_larger_than_one_round),
        cmocka_unit_test(test_jobs_after_idle_gaps),
        cmocka_unit_test(test_stuck_thread_share_is_taken_over),
        cmocka_unit_test(test_run_returns_after_the_last_task),
        cmocka_unit_test(test_free_accepts_null),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

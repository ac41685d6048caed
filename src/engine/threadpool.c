/*
 * Thread pool for the forward pass. A job is published in one atomic word (generation, task
 * count, next task), so claiming a task is one compare-and-swap that can only succeed for
 * the current job, and the caller waits for tasks to be done, not for workers to notice the
 * job: a worker the OS has descheduled never holds up a job it has not joined. Idle threads
 * spin briefly, then yield, then sleep on a condition variable.
 */
#include "threadpool.h"

#include <assert.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The job word: generation (high 24 bits) | task count (20 bits) | next task (20 bits).
 * Jobs with more tasks run as several rounds. */
enum { TASK_BITS = 20 };
#define MAX_TASKS_PER_ROUND ((1u << TASK_BITS) - 1)
#define TASK_MASK ((uint64_t)MAX_TASKS_PER_ROUND)

/*
 * How a thread waits (for a job, or for the tasks of one to finish): SPIN_POLLS polls with
 * the pause instruction, then polls that each yield the core, then sleep. Yielding costs a
 * system call on an idle machine, but on an oversubscribed one it hands the core to whoever
 * is runnable, often the very peer being waited for, where a spin would burn the time slice.
 * YIELD_POLLS (about a millisecond) outlasts the gaps inside a decode and between tokens.
 */
enum { SPIN_POLLS = 256, YIELD_POLLS = 2048 };

struct threadpool {
    size_t n_threads;
    pthread_t *workers;
    pthread_mutex_t lock;
    pthread_cond_t job_ready;  /* a new generation, or stopping */
    pthread_cond_t job_done;   /* the last task of the round is done */
    _Atomic uint64_t job;      /* see the job word above */
    atomic_size_t done;        /* tasks of the current round finished */
    atomic_size_t sleepers;    /* workers asleep (or about to be) on job_ready */
    atomic_bool caller_asleep; /* the caller sleeps on job_done */
    atomic_bool stopping;

    /* the current round, written before its job word is published and constant until all
     * its tasks are done (so a thread that claimed a task may read them) */
    threadpool_task_fn fn;
    void *arg;
    size_t first_task;
};

typedef struct worker_start {
    threadpool *pool;
    size_t index;
} worker_start;

static uint32_t word_generation(uint64_t word)
{
    return (uint32_t)(word >> (2 * TASK_BITS));
}

static size_t word_n_tasks(uint64_t word)
{
    return (size_t)((word >> TASK_BITS) & TASK_MASK);
}

static size_t word_next_task(uint64_t word)
{
    return (size_t)(word & TASK_MASK);
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* Pause or yield; false when it is time to sleep. */
static bool keep_polling(unsigned polls)
{
    if (polls < SPIN_POLLS)
        cpu_relax();
    else if (polls < SPIN_POLLS + YIELD_POLLS)
        sched_yield();
    else
        return false;
    return true;
}

/* Claim and run tasks of generation `generation` until none is left. The caller of the
 * round is woken when this thread finishes its last task and it sleeps. */
static void run_tasks(threadpool *pool, uint32_t generation, size_t thread)
{
    uint64_t word = atomic_load(&pool->job);
    for (;;) {
        if (word_generation(word) != generation || word_next_task(word) >= word_n_tasks(word))
            return;
        if (!atomic_compare_exchange_weak(&pool->job, &word, word + 1))
            continue; /* word now holds the current value */
        pool->fn(pool->arg, pool->first_task + word_next_task(word), thread);
        size_t n_tasks = word_n_tasks(word); /* read before done lets the caller move on */
        if (atomic_fetch_add(&pool->done, 1) + 1 == n_tasks && atomic_load(&pool->caller_asleep)) {
            pthread_mutex_lock(&pool->lock);
            pthread_cond_signal(&pool->job_done);
            pthread_mutex_unlock(&pool->lock);
        }
        word = atomic_load(&pool->job);
    }
}

/*
 * The first job word whose generation is not `seen`. Sleeping is race-free because the
 * sleeper counts itself and re-reads the word under the lock, while the caller publishes the
 * word before reading the sleeper count (all sequentially consistent): one sees the other.
 */
static uint64_t wait_for_job(threadpool *pool, uint32_t seen)
{
    for (unsigned polls = 0;; polls++) {
        uint64_t word = atomic_load(&pool->job);
        if (word_generation(word) != seen || atomic_load(&pool->stopping))
            return word;
        if (keep_polling(polls))
            continue;
        pthread_mutex_lock(&pool->lock);
        atomic_fetch_add(&pool->sleepers, 1);
        while (word_generation(atomic_load(&pool->job)) == seen && !atomic_load(&pool->stopping))
            pthread_cond_wait(&pool->job_ready, &pool->lock);
        atomic_fetch_sub(&pool->sleepers, 1);
        pthread_mutex_unlock(&pool->lock);
        polls = 0;
    }
}

static void *worker_main(void *p)
{
    worker_start start = *(worker_start *)p;
    free(p);
    threadpool *pool = start.pool;
    uint32_t seen = 0;
    for (;;) {
        uint64_t word = wait_for_job(pool, seen);
        if (atomic_load(&pool->stopping))
            break;
        seen = word_generation(word);
        run_tasks(pool, seen, start.index);
    }
    return NULL;
}

threadpool *threadpool_create(size_t n_threads, corral_error *err)
{
    if (n_threads < 1)
        n_threads = 1;
    threadpool *pool = calloc(1, sizeof *pool);
    if (!pool) {
        corral_error_set(err, "out of memory");
        return NULL;
    }
    pool->n_threads = n_threads;
    pthread_mutex_init(&pool->lock, NULL);
    pthread_cond_init(&pool->job_ready, NULL);
    pthread_cond_init(&pool->job_done, NULL);
    pool->workers = calloc(n_threads, sizeof *pool->workers);
    if (!pool->workers) {
        threadpool_free(pool);
        corral_error_set(err, "out of memory");
        return NULL;
    }
    for (size_t i = 1; i < n_threads; i++) {
        worker_start *start = malloc(sizeof *start);
        int rc = start ? 0 : -1;
        if (start) {
            *start = (worker_start){pool, i};
            rc = pthread_create(&pool->workers[i], NULL, worker_main, start);
            if (rc != 0)
                free(start);
        }
        if (rc != 0) {
            pool->n_threads = i; /* join only the workers that started */
            threadpool_free(pool);
            corral_error_set(err, "cannot start worker thread %zu: %s", i,
                             rc > 0 ? strerror(rc) : "out of memory");
            return NULL;
        }
    }
    return pool;
}

void threadpool_free(threadpool *pool)
{
    if (!pool)
        return;
    pthread_mutex_lock(&pool->lock);
    atomic_store(&pool->stopping, true);
    pthread_cond_broadcast(&pool->job_ready);
    pthread_mutex_unlock(&pool->lock);
    for (size_t i = 1; i < pool->n_threads && pool->workers; i++)
        pthread_join(pool->workers[i], NULL);
    pthread_cond_destroy(&pool->job_ready);
    pthread_cond_destroy(&pool->job_done);
    pthread_mutex_destroy(&pool->lock);
    free(pool->workers);
    free(pool);
}

size_t threadpool_size(const threadpool *pool)
{
    return pool->n_threads;
}

/* One round of at most MAX_TASKS_PER_ROUND tasks, numbered from first_task. */
static void run_round(threadpool *pool, size_t first_task, size_t n_tasks,
                      threadpool_task_fn fn, void *arg)
{
    pool->fn = fn;
    pool->arg = arg;
    pool->first_task = first_task;
    atomic_store(&pool->done, 0);
    uint32_t generation = word_generation(atomic_load(&pool->job)) + 1;
    uint64_t word = ((uint64_t)(generation & 0xffffff) << (2 * TASK_BITS)) |
                    ((uint64_t)n_tasks << TASK_BITS);
    atomic_store(&pool->job, word);
    if (atomic_load(&pool->sleepers) > 0) {
        pthread_mutex_lock(&pool->lock);
        pthread_cond_broadcast(&pool->job_ready);
        pthread_mutex_unlock(&pool->lock);
    }

    run_tasks(pool, word_generation(word), 0);

    for (unsigned polls = 0; atomic_load(&pool->done) < n_tasks; polls++) {
        if (keep_polling(polls))
            continue;
        pthread_mutex_lock(&pool->lock);
        atomic_store(&pool->caller_asleep, true);
        while (atomic_load(&pool->done) < n_tasks)
            pthread_cond_wait(&pool->job_done, &pool->lock);
        atomic_store(&pool->caller_asleep, false);
        pthread_mutex_unlock(&pool->lock);
    }
}

void threadpool_run(threadpool *pool, size_t n_tasks, threadpool_task_fn fn, void *arg)
{
    if (pool->n_threads == 1 || n_tasks == 1) {
        for (size_t task = 0; task < n_tasks; task++)
            fn(arg, task, 0);
        return;
    }
    for (size_t first = 0; first < n_tasks; first += MAX_TASKS_PER_ROUND) {
        size_t round = n_tasks - first < MAX_TASKS_PER_ROUND ? n_tasks - first : MAX_TASKS_PER_ROUND;
        run_round(pool, first, round, fn, arg);
    }
}

/* Count distinct (physical id, core id) pairs; fall back to online CPUs. */
size_t threadpool_physical_cores(void)
{
    FILE *f = fopen("/proc/cpuinfo", "r");
    size_t cores = 0;
    if (f) {
        char line[256];
        long physical = 0, pairs[1024][2];
        while (fgets(line, sizeof line, f)) {
            long v;
            if (sscanf(line, "physical id : %ld", &v) == 1) {
                physical = v;
            } else if (sscanf(line, "core id : %ld", &v) == 1) {
                bool seen = false;
                for (size_t i = 0; i < cores && !seen; i++)
                    seen = pairs[i][0] == physical && pairs[i][1] == v;
                if (!seen && cores < 1024) {
                    pairs[cores][0] = physical;
                    pairs[cores][1] = v;
                    cores++;
                }
            }
        }
        fclose(f);
    }
    if (cores == 0) {
        long online = sysconf(_SC_NPROCESSORS_ONLN);
        cores = online > 0 ? (size_t)online : 1;
    }
    return cores;
}

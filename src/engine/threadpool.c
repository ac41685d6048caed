/*
 * Thread pool for the forward pass. A round of tasks is cut into one contiguous share per
 * thread: a thread runs its own share from the front, then takes what is left of the others'
 * from their ends. A matrix job thus streams one run of consecutive rows per core, which the
 * prefetchers and DRAM pages favour over chunks dealt out alternately, while a thread the OS
 * has descheduled still cannot hold a job up. Each share is one atomic word that carries the
 * round's generation, so a claim (one compare-and-swap) can only succeed for the current
 * round, and the caller waits for tasks to be done, not for workers to notice the round.
 * Idle threads spin briefly, then yield, then sleep on a condition variable.
 *
 * A round touches as few cache lines written by another core as it can, since on a machine
 * whose cores sit on two chiplets each such line costs a few hundred nanoseconds, against a
 * microsecond or two per task of a thin model's matrix: the caller writes one line (the
 * round's job word and parameters), each thread starts its own share from a word it wrote
 * itself, and the count of finished tasks is never reset.
 */
#include "threadpool.h"

#include <assert.h>
#include <pthread.h>
#include <sched.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The job word: generation (high 24 bits) | task count (20 bits), and a share word:
 * generation | end (20 bits) | next (20 bits), the tasks [next, end) of one thread's share.
 * Jobs with more tasks run as several rounds. */
enum { TASK_BITS = 20, GENERATION_SHIFT = 2 * TASK_BITS };
#define MAX_TASKS_PER_ROUND ((1u << TASK_BITS) - 1)
#define TASK_MASK ((uint64_t)MAX_TASKS_PER_ROUND)
#define GENERATION_MASK 0xffffffu

/*
 * How a thread waits (for a job, or for the tasks of one to finish): SPIN_POLLS polls with
 * the pause instruction, then polls that each yield the core, then sleep. Yielding costs a
 * system call on an idle machine, but on an oversubscribed one it hands the core to whoever
 * is runnable, often the very peer being waited for, where a spin would burn the time slice.
 * YIELD_POLLS (about a millisecond) outlasts the gaps inside a decode and between tokens.
 */
enum { SPIN_POLLS = 256, YIELD_POLLS = 2048 };

/*
 * One thread's share of a round, alone on its cache line. A round of at least one task per
 * thread leaves the words as the last round left them: a word of the previous generation
 * stands for the thread's whole share of the current one, [i * n / T, (i + 1) * n / T), and
 * the first claim writes it, usually by its owner, so the caller does not pull every
 * thread's line over at each round. A round with fewer tasks than threads, in which some
 * shares are empty and so would not be touched, has the caller write every word: no word
 * ever lags more than one generation behind, however the generations wrap.
 */
typedef struct share {
    alignas(64) _Atomic uint64_t word;
} share;

struct threadpool {
    size_t n_threads;
    share *shares;             /* n_threads */
    pthread_t *workers;
    pthread_mutex_t lock;
    pthread_cond_t job_ready;  /* a new generation, or stopping */
    pthread_cond_t job_done;   /* the last task of the round is done */

    /* The current round on one cache line, written by the caller before it publishes the
     * job word (see above) and constant until all its tasks are done, so a thread that
     * claimed a task may read it. */
    alignas(64) _Atomic uint64_t job;
    threadpool_task_fn fn;
    void *arg;
    size_t first_task;
    size_t done_target;        /* the value of done once this round's tasks are done */

    /* tasks finished over all rounds, added by each thread once a round */
    alignas(64) atomic_size_t done;

    alignas(64) atomic_size_t sleepers; /* workers asleep (or about to be) on job_ready */
    atomic_bool caller_asleep;          /* the caller sleeps on job_done */
    atomic_bool stopping;
};

typedef struct worker_start {
    threadpool *pool;
    size_t index;
} worker_start;

static uint32_t word_generation(uint64_t word)
{
    return (uint32_t)(word >> GENERATION_SHIFT);
}

static uint64_t make_word(uint32_t generation, size_t high, size_t low)
{
    return (uint64_t)generation << GENERATION_SHIFT | (uint64_t)high << TASK_BITS | (uint64_t)low;
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

/* A task of `owner`'s share in the round of job word `job`, its next one or (stealing) its
 * last one; false when that share is empty or the round is over. */
static bool claim(threadpool *pool, size_t owner, uint64_t job, bool from_end, size_t *task)
{
    uint32_t generation = word_generation(job);
    size_t n_tasks = (size_t)((job >> TASK_BITS) & TASK_MASK);
    _Atomic uint64_t *share = &pool->shares[owner].word;
    uint64_t word = atomic_load(share);
    for (;;) {
        size_t next = (size_t)(word & TASK_MASK), end = (size_t)((word >> TASK_BITS) & TASK_MASK);
        if (word_generation(word) != generation) {
            /* the previous generation: the whole share, untouched; any other: the round
             * is over (a later one has begun) */
            if (((word_generation(word) + 1) & GENERATION_MASK) != generation)
                return false;
            next = owner * n_tasks / pool->n_threads;
            end = (owner + 1) * n_tasks / pool->n_threads;
        }
        if (next >= end)
            return false;
        uint64_t claimed = from_end ? make_word(generation, end - 1, next)
                                    : make_word(generation, end, next + 1);
        if (atomic_compare_exchange_weak(share, &word, claimed)) {
            *task = from_end ? end - 1 : next;
            return true;
        }
    }
}

/*
 * Run tasks of the round of job word `job` until none is left: this thread's share, then the
 * ends of the others'. The thread counts its tasks done in `done` once, when it finds no
 * more: an atomic add per task moved the counter's cache line between the cores after every
 * task, a stall of a cross-core round trip each (several hundred ns between two chiplets,
 * against a microsecond or two for a task of a thin model's matrix). The caller of the round
 * is woken when this count completes the round and it sleeps.
 */
static void run_tasks(threadpool *pool, uint64_t job, size_t thread)
{
    size_t finished = 0;
    for (;;) {
        size_t task;
        bool claimed = claim(pool, thread, job, false, &task);
        for (size_t k = 1; k < pool->n_threads && !claimed; k++)
            claimed = claim(pool, (thread + k) % pool->n_threads, job, true, &task);
        if (!claimed)
            break;
        pool->fn(pool->arg, pool->first_task + task, thread);
        finished++;
    }
    if (finished == 0)
        return;
    size_t target = pool->done_target; /* read before done lets the caller move on */
    if (atomic_fetch_add(&pool->done, finished) + finished == target &&
        atomic_load(&pool->caller_asleep)) {
        pthread_mutex_lock(&pool->lock);
        pthread_cond_signal(&pool->job_done);
        pthread_mutex_unlock(&pool->lock);
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
        run_tasks(pool, word, start.index);
    }
    return NULL;
}

threadpool *threadpool_create(size_t n_threads, corral_error *err)
{
    if (n_threads < 1)
        n_threads = 1;
    /* aligned: the struct keeps its round, its count and its sleepers on lines of their own */
    threadpool *pool = aligned_alloc(alignof(threadpool), sizeof *pool);
    if (!pool) {
        corral_error_set(err, "out of memory");
        return NULL;
    }
    memset(pool, 0, sizeof *pool);
    pool->n_threads = n_threads;
    pthread_mutex_init(&pool->lock, NULL);
    pthread_cond_init(&pool->job_ready, NULL);
    pthread_cond_init(&pool->job_done, NULL);
    pool->workers = calloc(n_threads, sizeof *pool->workers);
    pool->shares = aligned_alloc(alignof(share), n_threads * sizeof *pool->shares);
    if (!pool->workers || !pool->shares) {
        threadpool_free(pool);
        corral_error_set(err, "out of memory");
        return NULL;
    }
    /* generation 0, the job word's before the first round: each share starts whole */
    for (size_t i = 0; i < n_threads; i++)
        atomic_init(&pool->shares[i].word, make_word(0, 0, 0));
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
    free(pool->shares);
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
    size_t target = atomic_load_explicit(&pool->done, memory_order_relaxed) + n_tasks;
    pool->done_target = target;
    uint32_t generation = (word_generation(atomic_load(&pool->job)) + 1) & GENERATION_MASK;
    if (n_tasks < pool->n_threads)
        for (size_t i = 0; i < pool->n_threads; i++)
            atomic_store(&pool->shares[i].word,
                         make_word(generation, (i + 1) * n_tasks / pool->n_threads,
                                   i * n_tasks / pool->n_threads));
    uint64_t job = make_word(generation, n_tasks, 0);
    atomic_store(&pool->job, job);
    if (atomic_load(&pool->sleepers) > 0) {
        pthread_mutex_lock(&pool->lock);
        pthread_cond_broadcast(&pool->job_ready);
        pthread_mutex_unlock(&pool->lock);
    }

    run_tasks(pool, job, 0);

    for (unsigned polls = 0; atomic_load(&pool->done) < target; polls++) {
        if (keep_polling(polls))
            continue;
        pthread_mutex_lock(&pool->lock);
        atomic_store(&pool->caller_asleep, true);
        while (atomic_load(&pool->done) < target)
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

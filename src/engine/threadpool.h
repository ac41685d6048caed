/*
 * A persistent pool of worker threads for the forward pass: created once per context,
 * it runs "parallel for" jobs where the calling thread works too. Each thread runs a
 * contiguous share of a job's tasks in order, then takes tasks left in the others' shares,
 * so uneven tasks balance themselves.
 * Not reentrant: one job at a time per pool.
 */
#ifndef CORRAL_ENGINE_THREADPOOL_H
#define CORRAL_ENGINE_THREADPOOL_H

#include <stddef.h>

#include "corral/error.h"

typedef struct threadpool threadpool;

/* task is in [0, n_tasks); thread is in [0, threadpool_size) and indexes per-thread scratch. */
typedef void (*threadpool_task_fn)(void *arg, size_t task, size_t thread);

/* n_threads counts the caller: 1 means no worker threads. */
threadpool *threadpool_create(size_t n_threads, corral_error *err);
void threadpool_free(threadpool *pool);
size_t threadpool_size(const threadpool *pool);

/* Run fn for every task and return when all are done. */
void threadpool_run(threadpool *pool, size_t n_tasks, threadpool_task_fn fn, void *arg);

/* Physical cores of this machine (the default thread count), at least 1. */
size_t threadpool_physical_cores(void);

#endif

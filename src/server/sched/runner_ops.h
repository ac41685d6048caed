/*
 * The seam between the scheduler's policy (which model runs where, who shares, who waits,
 * who is evicted) and the processes that carry it out. The scheduler decides; a
 * runner_ops starts a runner and waits until it answers, tells whether one is still alive,
 * ends one, and measures memory. runner_process.c is the real one (`corral runner`
 * children, /proc/meminfo); tests drive the policy with a fake.
 */
#ifndef CORRAL_SERVER_SCHED_RUNNER_OPS_H
#define CORRAL_SERVER_SCHED_RUNNER_OPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "corral/engine.h"
#include "corral/error.h"

/* One runner as the policy wants it. */
typedef struct runner_spec {
    const char *name;           /* the model as the request named it, for the log */
    const char *model_path;
    char *const *adapter_paths; /* LoRA adapters, in the order they apply */
    size_t n_adapters;
    const char *draft_path;     /* a draft model for speculative decoding, or NULL */
    const char *projector_path; /* a vision projector; NULL: none */
    uint32_t num_ctx, num_batch, num_parallel;
    int num_thread; /* 0: the runner's default */
    int num_gpu;    /* layers on a GPU: 0 none, -1 all that fit */
    corral_kv_type kv_type;
} runner_spec;

/* What a started runner reports. */
typedef struct runner_started {
    void *process;          /* the ops' own handle, passed back to alive, kill and stop */
    char socket_path[108];  /* where requests reach it */
    uint32_t n_ctx;         /* its context length (num_ctx capped at the model's); 0: unknown */
    uint32_t n_vocab;       /* its vocabulary size; 0: unknown */
    uint64_t vram_bytes;    /* what it holds on a GPU; 0: none */
} runner_started;

typedef struct runner_ops {
    void *ctx;
    /* Start a runner and wait until it answers (called without the scheduler's lock). False
     * with err when it could not start or did not answer in time; nothing is left behind. */
    bool (*start)(void *ctx, const runner_spec *spec, runner_started *out, corral_error *err);
    /* False once the runner has exited on its own (it crashed or was killed); the ops log
     * how it ended, once. */
    bool (*alive)(void *ctx, void *process);
    /* End a runner that misbehaved at once; stop still follows. */
    void (*kill)(void *ctx, void *process);
    /* Ask the runner to stop and return at once (NULL: stop alone asks); stop still follows.
     * Shutting down asks every runner first, so they wind down together. */
    void (*request_stop)(void *ctx, void *process);
    /* Stop the runner, wait for it, remove what it left, and free process. */
    void (*stop)(void *ctx, void *process);
    /* The bytes a runner of spec will take (weights and KV cache); UINT64_MAX: too many. */
    uint64_t (*estimate_bytes)(void *ctx, const runner_spec *spec);
    /* The memory free for another runner now. */
    uint64_t (*available_bytes)(void *ctx);
    /* Free ctx once the scheduler has stopped every runner; NULL: nothing to free. */
    void (*free)(void *ctx);
} runner_ops;

#endif

/*
 * The real runners behind the scheduler's policy: `corral runner` children started with
 * fork and exec, watched with waitpid and a health probe, stopped with SIGTERM then SIGKILL;
 * their sockets in a private directory under /tmp that names its owner (directories of
 * servers that died without tidying up are removed at start), their output in the server's
 * log (runner_log.h); memory as /proc/meminfo's
 * MemAvailable and each model's size from its GGUF metadata.
 */
#ifndef CORRAL_SERVER_SCHED_RUNNER_PROCESS_H
#define CORRAL_SERVER_SCHED_RUNNER_PROCESS_H

#include <stdbool.h>

#include "corral/error.h"
#include "server/sched/runner_ops.h"
#include "server/server.h"

/* Fill ops with the runner processes of config (its load timeout); false with err. The
 * scheduler frees them with ops->free. */
bool runner_process_ops_create(const server_config *config, runner_ops *ops, corral_error *err);

#endif

/*
 * What `corral serve` says at start about the GPUs: the Vulkan devices the engine finds and
 * the one a model offloaded with num_gpu would use, as ollama logs its discovery.
 */
#ifndef CORRAL_SERVER_GPU_LOG_H
#define CORRAL_SERVER_GPU_LOG_H

#include <stdbool.h>

#include "corral/engine.h"
#include "util/log.h"

/* One line per device (name, type, total and free memory, chosen / usable / skipped and
 * why), or one line saying no GPU is usable and why, when none is; `corral gpus --log`. */
void gpu_log_discovery(void);

/* The same lines from a child process (`corral gpus --log FORMAT` on the inherited stderr, in
 * the server's log format), started
 * in the background: a Vulkan driver (lavapipe maps all of LLVM) then never enters the server's
 * memory, and a driver that hangs or crashes cannot stop it. False with err set when the child
 * could not be started. */
bool gpu_log_discovery_start(log_format format, corral_error *err);

#endif

/*
 * The memory a runner of one model will take, as the scheduler plans with it: what must fit
 * in RAM beside the other runners. Read from the model's file (no load).
 */
#ifndef CORRAL_SERVER_SCHED_MEMORY_ESTIMATE_H
#define CORRAL_SERVER_SCHED_MEMORY_ESTIMATE_H

#include <stdint.h>

#include "corral/engine.h"

/*
 * The model at path with a KV cache of num_ctx x n_parallel tokens of kv_type: the copies
 * loading makes (repacked and converted weights), what one token reads of the weights left
 * in the file's mapping (the rest of the map is page cache the kernel can reclaim: a file
 * larger than free memory still runs), and the KV cache. UINT64_MAX: too many to count.
 * A file the engine cannot read counts its size.
 */
uint64_t memory_estimate_model_bytes(const char *path, uint32_t num_ctx, uint32_t n_parallel,
                                     corral_kv_type kv_type);

#endif

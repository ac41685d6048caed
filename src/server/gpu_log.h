/*
 * What `corral serve` says at start about the GPUs: the Vulkan devices the engine finds and
 * the one a model offloaded with num_gpu would use, as ollama logs its discovery.
 */
#ifndef CORRAL_SERVER_GPU_LOG_H
#define CORRAL_SERVER_GPU_LOG_H

/* One line per device (name, type, total and free memory, chosen / usable / skipped and
 * why), or one line saying no GPU is usable and why, when none is. */
void gpu_log_discovery(void);

#endif

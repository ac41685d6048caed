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

/*
 * The runner's cache of encoded images at its fullest for the vision projector at path (a
 * projector file, or a model file that carries its tower): PROMPT_CACHED_IMAGES images, each
 * the most bytes one image's embeddings take (corral_mmproj_image_bytes). 0 for a file the
 * engine cannot load as a projector (the runner refuses it too); UINT64_MAX: too many.
 * The counts of the last few files are kept, known by their inode, size and time.
 */
uint64_t memory_estimate_image_cache_bytes(const char *projector_path);

/*
 * The same cache at its fullest of clips, for the audio tower the model file at path carries:
 * the room of PROMPT_CACHED_IMAGES clips of 30 seconds (corral_audio_tower_clip_bytes), which
 * a longer clip takes several of (prompt_images.h). 0 for a file that carries none or one the
 * engine cannot load; kept as the images' count is.
 * The runner keeps images and clips in one cache: its fullest is the larger of the two.
 */
uint64_t memory_estimate_clip_cache_bytes(const char *model_path);

#endif

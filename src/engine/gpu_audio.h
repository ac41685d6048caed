/*
 * The engine's seam to a GPU backend for Gemma 4's audio tower: its conformer blocks on a
 * device, as audio_gemma4.c's encode runs them (half a SiLU feed-forward step, the local
 * attention with its relative-position term and tanh cap, the light convolution module, the
 * other half step, the block's output norm; every product's input and output bounds). The
 * blocks' weights go to the device once; a run takes a segment's rows in, through every
 * block, and back out, so the subsampling before and the projections after stay on the CPU.
 * The Vulkan backend implements it (vulkan/vk_audio.c); a build without it has this
 * header's inline versions, which take nothing to a device.
 */
#ifndef CORRAL_ENGINE_GPU_AUDIO_H
#define CORRAL_ENGINE_GPU_AUDIO_H

#include <stdbool.h>
#include <stdint.h>

#include "audio_gemma4.h"

typedef struct gpu_audio gpu_audio;

/* The blocks and the constants audio_gemma4.c runs them with: a query sees itself and `past`
 * rows before it; its logits capped by cap * tanh(logit / cap); queries scaled by q_scale
 * times a block's q_scale vector, keys by k_scale (times its k_scale vector where it has
 * one); each half feed-forward step added times ffn_residual; rel_pos: past + 1 rows of
 * n_embd, the sinusoid of each distance. */
typedef struct gpu_audio_blocks {
    uint32_t n_embd, n_head, n_ff, kernel, past;
    float eps, cap, q_scale, k_scale, ffn_residual;
    const audio_layer *layers;
    uint32_t n_layers;
    const float *rel_pos;
} gpu_audio_blocks;

#ifdef CORRAL_VULKAN
/* The device memory gpu_audio_create takes on device (-1: the best usable one) for these
 * blocks and runs of up to max_rows rows; false with the reason when there is no device or
 * it cannot run them (a matrix type it does not multiply, a reach or size beyond it). */
bool gpu_audio_bytes(int device, const gpu_audio_blocks *b, uint32_t max_rows, uint64_t *out,
                     corral_error *err);

/* The blocks uploaded to device, with room for runs of up to max_rows rows; NULL with the
 * reason. */
gpu_audio *gpu_audio_create(int device, const gpu_audio_blocks *b, uint32_t max_rows,
                            corral_error *err);

/* n_rows rows of n_embd floats through every block, in place. One run at a time. */
bool gpu_audio_run(gpu_audio *a, float *x, uint32_t n_rows, corral_error *err);

/* The device's name, for messages. */
const char *gpu_audio_device(const gpu_audio *a);

void gpu_audio_free(gpu_audio *a);
#else
static inline bool gpu_audio_bytes(int device, const gpu_audio_blocks *b, uint32_t max_rows,
                                   uint64_t *out, corral_error *err)
{
    (void)device, (void)b, (void)max_rows;
    *out = 0;
    corral_error_set(err, "this build has no GPU backend (built without CORRAL_VULKAN)");
    return false;
}

static inline gpu_audio *gpu_audio_create(int device, const gpu_audio_blocks *b,
                                          uint32_t max_rows, corral_error *err)
{
    (void)device, (void)b, (void)max_rows;
    corral_error_set(err, "this build has no GPU backend (built without CORRAL_VULKAN)");
    return NULL;
}

static inline bool gpu_audio_run(gpu_audio *a, float *x, uint32_t n_rows, corral_error *err)
{
    (void)a, (void)x, (void)n_rows;
    corral_error_set(err, "this build has no GPU backend (built without CORRAL_VULKAN)");
    return false;
}

static inline const char *gpu_audio_device(const gpu_audio *a)
{
    (void)a;
    return "";
}

static inline void gpu_audio_free(gpu_audio *a)
{
    (void)a;
}
#endif

#endif

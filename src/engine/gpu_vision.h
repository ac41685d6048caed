/*
 * The engine's seam to a GPU backend for vision towers: a tower's pre-norm ViT blocks on a
 * device, as vision.c's block runs them (LayerNorm or RMS norm, the query, key, value and
 * output products with their optional biases (clipped linears' bounds too), optional RMS
 * norms of each query, key and value head, the queries and keys turned by the rows' rotary
 * angles, attention of every row over every row or within windows of rows, a padding row
 * over the rows that are not padding, optional post norms, one-value gates on the two
 * branches and an output scale, a GELU MLP (by erf, by tanh or quick, each as the CPU
 * computes it), a SwiGLU or a quick GeGLU one). The blocks' weights go to the device once;
 * a run takes rows in, through a range of the blocks, and back out, so a tower keeps its own
 * steps between ranges on the CPU. The Vulkan backend implements it (vulkan/vk_vision.c); a build without it has this header's
 * inline versions, which take nothing to a device.
 */
#ifndef CORRAL_ENGINE_GPU_VISION_H
#define CORRAL_ENGINE_GPU_VISION_H

#include <stdbool.h>
#include <stdint.h>

#include "mmproj.h"

typedef struct gpu_vision gpu_vision;

/* A run's rows and what comes with them (vision_run's fields of the same names). */
typedef struct gpu_vision_rows {
    float *x;        /* n_rows rows of n_embd floats, in place */
    uint32_t n_rows;
    const uint8_t *padding;  /* per row whether it is padding, which sees no other padding;
                              * NULL: none */
    const float *rope_cs;    /* per row a head's width of floats: cos and sin of each pair;
                              * NULL: no rotation */
    bool rope_adjacent;      /* pairs (2i, 2i + 1) turn, not (i, i + d/2) */
    bool rope_halves;        /* each half of a head turns on its own (vision_run.rope_split) */
    float kq_scale;          /* the scores' scale; 0: 1 / sqrt(head width) */
    bool v_norm;             /* values RMS-normed per head, without a weight */
    const uint32_t *window;  /* per row its window, a window's rows together: the blocks
                              * that do not attend fully (vision_hparams.n_wa_pattern) attend
                              * within them; NULL: every block fully */
} gpu_vision_rows;

#ifdef CORRAL_VULKAN
/* Whether a device runs block l of a tower of hp as the CPU does: LayerNorm or RMS norm, a
 * GELU MLP (by erf, by tanh or quick), a SwiGLU or a quick GeGLU one, matrices of types the
 * device multiplies, F32 vectors (head norms a head wide, post norms and a per-channel
 * output scale n_embd), heads of even width. */
bool gpu_vision_supports(const vision_hparams *hp, const vision_layer *l);

/* The device memory gpu_vision_create takes on device (-1: the best usable one) for these
 * blocks and runs of up to max_rows rows, with padding rows or without (padding: the keys
 * and values a second time, for the padding rows to read); false with the reason when there
 * is no device. */
bool gpu_vision_bytes(int device, const vision_hparams *hp, const vision_layer *const *layers,
                      uint32_t n_layers, uint32_t max_rows, bool padding, uint64_t *out,
                      corral_error *err);

/* The blocks (each gpu_vision_supports) uploaded to device, with room for runs of up to
 * max_rows rows, with padding rows only when padding; NULL with the reason. */
gpu_vision *gpu_vision_create(int device, const vision_hparams *hp,
                              const vision_layer *const *layers, uint32_t n_layers,
                              uint32_t max_rows, bool padding, corral_error *err);

/* rows through blocks [first, first + count), in place. One run at a time. */
bool gpu_vision_run(gpu_vision *v, const gpu_vision_rows *rows, uint32_t first, uint32_t count,
                    corral_error *err);

/* The most rows one run takes (gpu_vision_create's max_rows). */
uint32_t gpu_vision_max_rows(const gpu_vision *v);

/* The device's name, for messages. */
const char *gpu_vision_device(const gpu_vision *v);

void gpu_vision_free(gpu_vision *v);
#else
static inline bool gpu_vision_supports(const vision_hparams *hp, const vision_layer *l)
{
    (void)hp, (void)l;
    return false;
}

static inline bool gpu_vision_bytes(int device, const vision_hparams *hp,
                                    const vision_layer *const *layers, uint32_t n_layers,
                                    uint32_t max_rows, bool padding, uint64_t *out,
                                    corral_error *err)
{
    (void)device, (void)hp, (void)layers, (void)n_layers, (void)max_rows, (void)padding;
    *out = 0;
    corral_error_set(err, "this build has no GPU backend (built without CORRAL_VULKAN)");
    return false;
}

static inline gpu_vision *gpu_vision_create(int device, const vision_hparams *hp,
                                            const vision_layer *const *layers,
                                            uint32_t n_layers, uint32_t max_rows, bool padding,
                                            corral_error *err)
{
    (void)device, (void)hp, (void)layers, (void)n_layers, (void)max_rows, (void)padding;
    corral_error_set(err, "this build has no GPU backend (built without CORRAL_VULKAN)");
    return NULL;
}

static inline bool gpu_vision_run(gpu_vision *v, const gpu_vision_rows *rows, uint32_t first,
                                  uint32_t count, corral_error *err)
{
    (void)v, (void)rows, (void)first, (void)count;
    corral_error_set(err, "this build has no GPU backend (built without CORRAL_VULKAN)");
    return false;
}

static inline uint32_t gpu_vision_max_rows(const gpu_vision *v)
{
    (void)v;
    return 0;
}

static inline const char *gpu_vision_device(const gpu_vision *v)
{
    (void)v;
    return "";
}

static inline void gpu_vision_free(gpu_vision *v)
{
    (void)v;
}
#endif

#endif

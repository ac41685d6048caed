/*
 * The engine's seam to a GPU backend: whole layers of a context run on a device. The
 * context's CPU blocks run the first layers as always; gpu_forward then takes the hidden
 * states (ctx->x) of the micro-batch through the last layers on the device, with those
 * layers' weights uploaded once and their KV cache kept there, in one submission, and puts
 * the states back in ctx->x. When every layer is on the device the output layer is too, and
 * the same submission gives the logits. The Vulkan backend (src/engine/vulkan)
 * implements it; a build without it has this header's inline versions, which offload nothing.
 */
#ifndef CORRAL_ENGINE_GPU_H
#define CORRAL_ENGINE_GPU_H

#include <stdbool.h>
#include <stdint.h>

#include "corral/engine.h"

typedef struct gpu_layers gpu_layers;

/* What happens to a sequence's recurrent states (delta_net.h): zeroed, copied to its
 * checkpoint of a kind, or put back from it. */
enum gpu_states { GPU_STATES_CLEAR, GPU_STATES_CHECKPOINT, GPU_STATES_RESTORE };

/* What the layers' forward passes cost: passes submitted, and how many of them were
 * recorded first (a pass of a shape seen before is submitted as it was recorded); the
 * dispatches and barriers the last pass submitted holds; the device's submissions so far,
 * every context's and every upload's (each is waited for). */
typedef struct gpu_layers_stats {
    uint64_t passes, recordings;
    uint32_t dispatches, barriers;
    uint64_t submits;
} gpu_layers_stats;

#ifdef CORRAL_VULKAN
/*
 * Layers of ctx on a device (device -1: the best usable one, see vk_device.h): the last
 * n_layers of them, or as many as the device's free memory holds when n_layers < 0. NULL
 * with the reason when there is no usable device, the model has something the device
 * kernels lack, or memory runs out; the context then runs on the CPU.
 */
gpu_layers *gpu_layers_create(const corral_context *ctx, int device, int n_layers,
                              corral_error *err);
void gpu_layers_free(gpu_layers *g);
/* The first layer on the device; the layers before it run on the CPU. */
uint32_t gpu_layers_first(const gpu_layers *g);
/* The device's name, for messages. */
const char *gpu_layers_device(const gpu_layers *g);
/* Bytes of the device's memory the layers hold (weights, cache and scratch). */
uint64_t gpu_layers_bytes(const gpu_layers *g);
/* The bytes the fitting of the layers to the device's free memory counted them at (at least
 * what they hold, gpu_layers_bytes). */
uint64_t gpu_layers_estimate(const gpu_layers *g);
gpu_layers_stats gpu_layers_get_stats(const gpu_layers *g);
/* ctx->x of the micro-batch (ctx->n_tokens tokens at ctx->tok_seq / tok_pos, ctx->rope_cs
 * filled, batch tokens [begin, begin + n_tokens)) through the device's layers, their keys
 * and values cached there. *logits_done: the device also wrote the logits of the tokens
 * that asked (ctx->logit_row), scaled and capped as the CPU's output does; else the caller
 * computes them from ctx->x. An encoder's input (corral_embed) has no logits: begin 0, and
 * ctx->x comes back for pooling. */
bool gpu_forward(gpu_layers *g, corral_context *ctx, size_t begin, bool *logits_done,
                 corral_error *err);
/* A context shift on the device's layers: sequence seq's cells from `from` to len move down
 * by n_discard, keys turned by the angles of the first row of ctx->rope_cs (per variant). */
bool gpu_seq_shift(gpu_layers *g, const corral_context *ctx, uint32_t seq, uint32_t from,
                   uint32_t len, uint32_t n_discard, corral_error *err);
/* Sequence seq's recurrent states on the device's Gated DeltaNet layers as delta_net.h's
 * functions treat the CPU's, kind the checkpoint copied to or put back from (below
 * ctx->n_checkpoints; unused by a clear): the work is recorded to run ahead of the next
 * forward pass, in its submission (nothing when the device holds no recurrent layer). */
void gpu_seq_states(gpu_layers *g, const corral_context *ctx, uint32_t seq, enum gpu_states op,
                    corral_checkpoint kind);
/* Sequence seq's image on the device's cross-attention layer il (cross_attn.h): its keys and
 * values, each n_rows rows of head_dim per KV head ([KV head][row][dim]), over the image the
 * sequence had there; the layers make room for n_rows rows a sequence when they hold fewer.
 * Which tokens read it, and how many of its rows, each forward pass takes from ctx->cross. */
bool gpu_cross_set_image(gpu_layers *g, const corral_context *ctx, uint32_t seq, uint32_t il,
                         const float *keys, const float *values, uint32_t n_rows,
                         corral_error *err);
#else
static inline gpu_layers *gpu_layers_create(const corral_context *ctx, int device,
                                            int n_layers, corral_error *err)
{
    (void)ctx, (void)device, (void)n_layers;
    corral_error_set(err, "this build has no GPU backend (built without CORRAL_VULKAN)");
    return NULL;
}
static inline void gpu_layers_free(gpu_layers *g) { (void)g; }
static inline uint32_t gpu_layers_first(const gpu_layers *g) { (void)g; return 0; }
static inline const char *gpu_layers_device(const gpu_layers *g) { (void)g; return ""; }
static inline uint64_t gpu_layers_bytes(const gpu_layers *g) { (void)g; return 0; }
static inline uint64_t gpu_layers_estimate(const gpu_layers *g) { (void)g; return 0; }
static inline gpu_layers_stats gpu_layers_get_stats(const gpu_layers *g)
{
    (void)g;
    return (gpu_layers_stats){0};
}
static inline bool gpu_forward(gpu_layers *g, corral_context *ctx, size_t begin,
                               bool *logits_done, corral_error *err)
{
    (void)g, (void)ctx, (void)begin, (void)logits_done;
    corral_error_set(err, "this build has no GPU backend");
    return false;
}
static inline bool gpu_seq_shift(gpu_layers *g, const corral_context *ctx, uint32_t seq,
                                 uint32_t from, uint32_t len, uint32_t n_discard,
                                 corral_error *err)
{
    (void)g, (void)ctx, (void)seq, (void)from, (void)len, (void)n_discard;
    corral_error_set(err, "this build has no GPU backend");
    return false;
}
static inline bool gpu_cross_set_image(gpu_layers *g, const corral_context *ctx,
                                       uint32_t seq, uint32_t il, const float *keys,
                                       const float *values, uint32_t n_rows, corral_error *err)
{
    (void)g, (void)ctx, (void)seq, (void)il, (void)keys, (void)values, (void)n_rows;
    corral_error_set(err, "this build has no GPU backend");
    return false;
}
static inline void gpu_seq_states(gpu_layers *g, const corral_context *ctx, uint32_t seq,
                                  enum gpu_states op, corral_checkpoint kind)
{
    (void)g, (void)ctx, (void)seq, (void)op, (void)kind;
}
#endif

#endif

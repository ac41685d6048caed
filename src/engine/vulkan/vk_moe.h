/*
 * The mixture-of-experts FFN of the device layers (vk_layers.c): each layer's router,
 * experts and shared expert uploaded, and the FFN recorded into the layers' command buffer
 * with the routing on the device (vk_moe.c).
 */
#ifndef CORRAL_ENGINE_VK_MOE_H
#define CORRAL_ENGINE_VK_MOE_H

#include "forward.h"
#include "vk_ops.h"

typedef struct vk_moe vk_moe;

/* Why the device cannot run the model's expert FFNs, or NULL when it can (or it has none). */
const char *vk_moe_unsupported(const corral_model *m);

/* The device memory layer il's expert FFN takes: its weights' buffers, no buffer of weights
 * larger than part_bytes (0 for a dense layer). */
uint64_t vk_moe_layer_bytes(const vk_device *dev, const corral_model *m, uint32_t il,
                            uint64_t part_bytes);

/* The device memory of the expert FFNs' scratch for ctx's micro-batch (0 without experts). */
uint64_t vk_moe_scratch_bytes(const vk_device *dev, const corral_context *ctx);

/* Layers [first, n_layer)'s expert FFNs on dev and their scratch for ctx's batch, no buffer
 * of weights larger than part_bytes; *bytes grows by the memory allocated. NULL with the reason
 * on failure; a model without experts gives an empty one. */
vk_moe *vk_moe_create(vk_device *dev, const corral_context *ctx, uint32_t first,
                      uint64_t part_bytes, uint64_t *bytes, corral_error *err);
void vk_moe_free(vk_moe *moe);

/* Whether layer il's FFN is one of experts. */
bool vk_moe_layer(const vk_moe *moe, uint32_t il);

/* Layer il's expert FFN of the n tokens in `in` into out (which may be in), routed on
 * router_in's rows (NULL: on in's; gemma4's router reads an input of its own); gelu_table:
 * vk_op_gelu's, which a GeGLU family's experts take. */
void vk_moe_record(vk_moe *moe, vk_commands *c, const corral_context *ctx, uint32_t il,
                   vk_buffer *in, vk_buffer *router_in, vk_span gelu_table, vk_buffer *out,
                   uint32_t n);

#endif

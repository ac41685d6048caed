/*
 * Poolside's Laguna of hf_family.h's table (LagunaForCausalLM, "laguna"), as ollama's converter
 * writes it: per-head q/k RMSNorms and a gate on the attention's output (attn_g), query heads
 * per layer (num_attention_heads_per_layer), sliding and global layers (layer_types) with
 * their own RoPE (rope_parameters' full_attention, sliding_attention), a dense first layer,
 * then sigmoid-routed experts with a selection bias and one shared expert.
 */
#ifndef CORRAL_CONVERT_HF_FAMILY_LAGUNA_H
#define CORRAL_CONVERT_HF_FAMILY_LAGUNA_H

#include <jansson.h>
#include <stdbool.h>

#include "convert/hf_family.h"

bool hf_family_is_laguna(const hf_arch *a);

/*
 * Laguna's own config.json keys into p (the common ones read already): head_dim and
 * num_key_value_heads (required), num_attention_heads_per_layer, layer_types,
 * sliding_window, the experts (num_experts, num_experts_per_tok, moe_intermediate_size,
 * shared_expert_intermediate_size, norm_topk_prob, moe_routed_scaling_factor), the dense
 * layers (mlp_only_layers or mlp_layer_types: only the first), rope_parameters (flat, or per
 * kind of layer) and swa_rope_parameters. Refused as ollama's converter refuses them: an
 * attention sink, gating other than per head, q/k norms other than RMSNorm, a softmax
 * router, router weights on the input, a decoder_sparse_step other than 1.
 */
hf_status hf_laguna_read_config(const json_t *config, hf_params *p, corral_error *err);

/* The pair of Laguna's name pieces (Hugging Face's, GGUF's) that starts s, or NULL. */
const char *const *hf_laguna_rename_at(const char *s);

/* Whether a block's tensor (the part of its name after "blk.L.") is one of layer's. */
bool hf_laguna_known_tensor(const hf_params *p, unsigned layer, const char *suffix);

/* Laguna's keys (the common ones written already). */
bool hf_laguna_write_keys(const hf_params *p, gguf_writer *w, corral_error *err);

#endif

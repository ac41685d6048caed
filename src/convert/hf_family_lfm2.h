/*
 * Liquid AI's LFM2 of hf_family.h's table (Lfm2ForCausalLM, "lfm2"; Lfm2MoeForCausalLM,
 * "lfm2moe"), as ollama's converter writes it: gated short convolution layers and attention
 * layers (config.json's layer_types; attention.head_count_kv per layer, 0 for a convolution
 * layer), the convolution's taps (conv_L_cache) as shortconv.l_cache, and for the mixture of
 * experts its leading dense layers and sigmoid router with a selection bias.
 */
#ifndef CORRAL_CONVERT_HF_FAMILY_LFM2_H
#define CORRAL_CONVERT_HF_FAMILY_LFM2_H

#include <jansson.h>
#include <stdbool.h>

#include "convert/hf_family.h"

/*
 * LFM2's own config.json keys into p (the common ones read already): the FFN width
 * (block_ff_dim, adjusted as block_auto_adjust_ff_dim says), norm_eps, conv_L_cache,
 * layer_types, rope_parameters' rope_theta, num_dense_layers and routed_scaling_factor.
 */
bool hf_family_is_lfm2(const hf_arch *a);

hf_status hf_lfm2_read_config(const json_t *config, hf_params *p, corral_error *err);

/* The pair of LFM2's name pieces (Hugging Face's, GGUF's) that starts s, or NULL. */
const char *const *hf_lfm2_rename_at(const char *s);

/* Whether a block's tensor (the part of its name after "blk.L.") is one of layer's. */
bool hf_lfm2_known_tensor(const hf_params *p, unsigned layer, const char *suffix);

/* LFM2's keys: attention.head_count_kv per layer, key and value lengths, shortconv.l_cache,
 * and a mixture of experts' leading dense layers, gating function and weights scale. */
bool hf_lfm2_write_keys(const hf_params *p, gguf_writer *w, corral_error *err);

#endif

/*
 * GLM-4 MoE Lite of hf_family.h's table (Glm4MoeLiteForCausalLM: GLM-4.7-Flash), as ollama's
 * converter writes it: DeepSeek-V2's architecture ("deepseek2"), its multi-head latent
 * attention with each layer's kv_b_proj split into attn_k_b (each head's key part, transposed
 * for the absorbed attention) and attn_v_b, leading dense layers, then sigmoid-routed experts
 * with a selection bias and shared experts; the tokenizer's pre-tokenizer "glm4" and its
 * end-of-turn and end-of-message tokens from generation_config.json's eos ids. Layers past
 * num_hidden_layers (the multi-token prediction layer) are left out.
 */
#ifndef CORRAL_CONVERT_HF_FAMILY_DEEPSEEK2_H
#define CORRAL_CONVERT_HF_FAMILY_DEEPSEEK2_H

#include <jansson.h>
#include <stdbool.h>

#include "convert/hf_family.h"

bool hf_family_is_deepseek2(const hf_arch *a);

/* Its own config.json keys into p (the common ones read already): the latent attention's
 * ranks and head parts, first_k_dense_replace, n_shared_experts, norm_topk_prob,
 * routed_scaling_factor, n_group and topk_group. */
hf_status hf_deepseek2_read_config(const json_t *config, hf_params *p, corral_error *err);

/* The pair of its name pieces (Hugging Face's, GGUF's) that starts s, or NULL. */
const char *const *hf_deepseek2_rename_at(const char *s);

/* Whether a checkpoint's tensor (its Hugging Face name) is in a layer past the model's. */
bool hf_deepseek2_skipped_tensor(const hf_params *p, const char *name);

/* Whether a block's tensor (the part of its name after "blk.L.") is one of layer's. */
bool hf_deepseek2_known_tensor(const hf_params *p, unsigned layer, const char *suffix);

/* Its keys beyond the common ones. */
bool hf_deepseek2_write_keys(const hf_params *p, gguf_writer *w, corral_error *err);

#endif

/*
 * DeepSeek-V2's GGUF ("deepseek2") of hf_family.h's table, from either source ollama converts
 * to it, each as ollama's converter for it writes it: multi-head latent attention, leading
 * dense layers, then routed experts (a selection bias, shared experts). Layers past
 * num_hidden_layers (the multi-token prediction layers) are left out.
 *
 * DeepseekV3ForCausalLM (V3, R1): each layer's kv_b_proj kept whole as attn_kv_b, each head's
 * key and value widths as key_length and value_length, head_count_kv as config.json gives it,
 * scoring_func as the gating function, YaRN's log multiplier (0.1 mscale_all_dim), a RoPE base
 * of 10000 when absent, pre-tokenizer "deepseek-v3"; besides ollama's keys, llama.cpp's
 * expert_group_count and expert_group_used_count where config.json groups the experts, which
 * the group-limited routing needs. q_lora_rank may be absent (attn_q then).
 *
 * Glm4MoeLiteForCausalLM (GLM-4.7-Flash): each layer's kv_b_proj split into attn_k_b (each
 * head's key rows, transposed for the absorbed attention) and attn_v_b (its value rows), the
 * latent cache row's widths as key_length and value_length and each head's as the _mla keys,
 * head_count_kv 1, sigmoid gating, expert groups (default 1), a RoPE base of 1000000 when
 * absent, pre-tokenizer "glm4" and generation_config.json's second and third eos ids as the
 * end-of-turn and end-of-message tokens.
 */
#ifndef CORRAL_CONVERT_HF_FAMILY_DEEPSEEK2_H
#define CORRAL_CONVERT_HF_FAMILY_DEEPSEEK2_H

#include <jansson.h>
#include <stdbool.h>

#include "convert/hf_family.h"

bool hf_family_is_deepseek2(const hf_arch *a);

/* Whether kv_b_proj is split into attn_k_b and attn_v_b (GLM-4 MoE Lite's; hf_convert.c splits
 * it) rather than kept whole. */
bool hf_deepseek2_splits_kv_b(const hf_arch *a);

/* The pre-tokenizer its converter names, whatever tokenizer.json's patterns say. */
const char *hf_deepseek2_pre_tokenizer(const hf_arch *a);

/* Its own config.json keys into p (the common ones read already): the latent attention's
 * ranks and head parts, first_k_dense_replace, n_shared_experts, norm_topk_prob,
 * routed_scaling_factor, n_group, topk_group, and V3's scoring_func and
 * rope_scaling.mscale_all_dim. */
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

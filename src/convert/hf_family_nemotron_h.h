/*
 * NVIDIA's Nemotron-H of hf_family.h's table (NemotronHForCausalLM: "nemotron_h", or
 * "nemotron_h_moe" where config.json gives experts), as ollama's converter writes it: each
 * layer one of a Mamba2 mixer, an attention mixer, an FFN or a mixture of experts, as
 * hybrid_override_pattern says, the per-layer arrays attention.head_count_kv and
 * feed_forward_length telling them apart; the Mamba2 sizes under ssm.*, A_log written as
 * -exp(A_log), D and A as one-column matrices, the gated norm as one row per group.
 */
#ifndef CORRAL_CONVERT_HF_FAMILY_NEMOTRON_H_H
#define CORRAL_CONVERT_HF_FAMILY_NEMOTRON_H_H

#include <jansson.h>
#include <stdbool.h>

#include "convert/hf_family.h"

bool hf_family_is_nemotron_h(const hf_arch *a);

/*
 * Nemotron-H's own config.json keys into p (the common ones read already; p->arch becomes
 * the "nemotron_h_moe" one where the config gives experts, moe_intermediate_size or
 * num_experts_per_tok, as ollama's converter tells them apart): the layer pattern,
 * the Mamba2 sizes, the epsilon (norm_eps or layer_norm_epsilon), partial_rotary_factor and
 * the experts' (n_routed_experts, n_shared_experts, moe_shared_expert_intermediate_size,
 * norm_topk_prob, routed_scaling_factor, n_group, topk_group).
 */
hf_status hf_nemotron_h_read_config(const json_t *config, hf_params *p, corral_error *err);

/* The pair of Nemotron-H's name pieces (Hugging Face's, GGUF's) that starts s, or NULL. */
const char *const *hf_nemotron_h_rename_at(const char *s);

/* Whether a checkpoint's tensor is left out (the multi-token prediction layers, mtp.*). */
bool hf_nemotron_h_skipped_tensor(const char *name);

/* Whether a block's tensor (the part of its name after "blk.L.") is one of layer's kind's. */
bool hf_nemotron_h_known_tensor(const hf_params *p, unsigned layer, const char *suffix);

/*
 * A tensor's GGUF shape where it differs from the checkpoint's (ne innermost first, *n_dims):
 * ssm_a and ssm_d [n] as [1, n], ssm_norm [inner] as [inner / groups, groups]. False where
 * it is the checkpoint's.
 */
bool hf_nemotron_h_reshape(const hf_params *p, const char *name, uint32_t *n_dims,
                           int64_t ne[4]);

/* A dense FFN layer's width from its up projection's rows (ffn_up.weight), where layers differ
 * (ollama's converter gives each intermediate_size). */
void hf_nemotron_h_ffn_seen(hf_params *p, const char *name, uint64_t rows);

/* Nemotron-H's keys: the per-layer arrays, both epsilons, the RoPE base (and dimensions), the
 * Mamba2 sizes and the experts'. */
bool hf_nemotron_h_write_keys(const hf_params *p, gguf_writer *w, corral_error *err);

#endif

/*
 * Google's Gemma 4 of hf_family.h's table (Gemma4ForCausalLM, and Gemma4ForConditionalGeneration's
 * text model under text_config; both "gemma4"), as ollama's converter writes it: sliding and
 * global attention layers of different head widths (head_dim, global_head_dim) and key/value
 * heads, the global layers' partial RoPE as a rope_freqs tensor, key/value sharing across the
 * last layers, per-layer inputs, a mixture of experts beside the dense FFN, norms kept as they
 * are stored (Gemma 4's RMSNorm scales by w); Gemma4ForConditionalGeneration's vision tower
 * (vision_config) and audio tower (audio_config) in the same file under the names ollama's
 * converter gives them.
 */
#ifndef CORRAL_CONVERT_HF_FAMILY_GEMMA4_H
#define CORRAL_CONVERT_HF_FAMILY_GEMMA4_H

#include <jansson.h>
#include <stdbool.h>

#include "convert/hf_family.h"

bool hf_family_is_gemma4(const hf_arch *a);

/*
 * Gemma 4's own config.json keys into p (the common ones read already): global_head_dim,
 * layer_types, sliding_window, num_global_key_value_heads, attention_k_eq_v,
 * num_kv_shared_layers, use_double_wide_mlp, hidden_size_per_layer_input,
 * final_logit_softcapping, rope_parameters (full_attention's and sliding_attention's),
 * with enable_moe_block num_experts, top_k_experts and moe_intermediate_size, and the towers'
 * vision_config and audio_config.
 */
hf_status hf_gemma4_read_config(const json_t *config, hf_params *p, corral_error *err);

/* The pair of Gemma 4's name pieces (Hugging Face's, GGUF's) that starts s, or NULL. */
const char *const *hf_gemma4_rename_at(const char *s);

/* A tower's name (model.vision_tower.*, model.embed_vision.*, model.audio_tower.*,
 * model.embed_audio.*) as ollama's file names it ("v.blk.0.attn_q.weight",
 * "mm.input_projection.weight", "a.blk.0.per_dim_scale.weight", "mm.a.fc.weight") into out
 * (cap bytes); false for any other name. */
bool hf_gemma4_rename_tower(const char *in, char *out, size_t cap);

/* Whether the checkpoint tensor hf_name is an audio attention's per_dim_scale, which ollama's
 * file holds through softplus, log(1 + exp(x)). */
bool hf_gemma4_softplus(const char *hf_name);

/* Whether a checkpoint tensor is left out: the audio tower and its projector when config.json
 * gives no audio tower, and the weightless embedding_post_projection_norm. */
bool hf_gemma4_skipped_tensor(const hf_params *p, const char *name);

/* Whether a GGUF name outside the text model's blocks is one of the model's (its tower's
 * included). */
bool hf_gemma4_known_global(const hf_params *p, const char *name);

/* Whether a block's tensor (the part of its name after "blk.L.") is one of layer's. */
bool hf_gemma4_known_tensor(const hf_params *p, unsigned layer, const char *suffix);

/* rope_freqs.weight: per pair of the global head's dimensions, 1 for the rotated ones
 * (partial_rotary_factor of them, 0.25 when absent) and 1e30 (no rotation) for the rest.
 * NULL with err set when out of memory; *n its length. */
float *hf_gemma4_rope_freqs(const hf_params *p, uint32_t *n, corral_error *err);

/* Gemma 4's keys (the common ones written already). */
bool hf_gemma4_write_keys(const hf_params *p, gguf_writer *w, corral_error *err);

#endif

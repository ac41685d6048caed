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

/* LFM2-VL (Lfm2VlForConditionalGeneration): the text model (under text_config, its tensors
 * under model.language_model.) with its SigLIP 2 tower in the same file, as ollama's
 * converter writes it; its vision_config and image settings (config.json's top, then
 * processor_config.json's image_processor) are read with hf_lfm2_read_config. */
bool hf_lfm2_is_vl(const hf_arch *a);

/* processor_config.json's image_processor (an object, or absent) into p's LFM2-VL settings. */
hf_status hf_lfm2_read_processor(const json_t *processor, hf_params *p, corral_error *err);

/* The tower's and projector's names (model.vision_tower.*, model.multi_modal_projector.*) as
 * ollama's file names them ("v.blk.0.ln1.weight", "mm.1.weight") into out (cap bytes); false
 * for any other name. */
bool hf_lfm2_rename_tower(const char *in, char *out, size_t cap);

/* Whether a GGUF name ("v.", "mm.") is one of the tower's. */
bool hf_lfm2_known_tower(const hf_params *p, const char *name);

/* LFM2's keys: attention.head_count_kv per layer, key and value lengths, shortconv.l_cache,
 * a mixture of experts' leading dense layers, gating function and weights scale, and
 * LFM2-VL's tower and image settings (lfm2.vision.*). */
bool hf_lfm2_write_keys(const hf_params *p, gguf_writer *w, corral_error *err);

#endif

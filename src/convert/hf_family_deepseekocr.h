/*
 * DeepSeek-OCR of hf_family.h's table (DeepseekOCRForCausalLM, "deepseekocr"), as ollama's
 * converter writes it: the language model (language_config; DeepSeek-V2's plain multi-head
 * attention, a leading dense layer, then softmax-routed experts beside shared ones) with its
 * SAM and CLIP towers and projector in the same file, under ollama's "s.", "v." and "mm."
 * names, and only the keys ollama's converter writes (no widths of the experts, epsilon or
 * RoPE keys: the engine takes those from the tensors and its defaults).
 */
#ifndef CORRAL_CONVERT_HF_FAMILY_DEEPSEEKOCR_H
#define CORRAL_CONVERT_HF_FAMILY_DEEPSEEKOCR_H

#include <jansson.h>
#include <stdbool.h>

#include "convert/hf_family.h"

bool hf_family_is_deepseekocr(const hf_arch *a);

/* DeepSeek-OCR's own config.json keys into p (the common ones read already from
 * language_config): its experts (n_routed_experts, num_experts_per_tok, first_k_dense_replace)
 * and vision_config's width."clip-l-14-224" and width."sam_vit_b". */
hf_status hf_deepseekocr_read_config(const json_t *config, hf_params *p, corral_error *err);

/* The towers' names (model.sam_model.*, model.vision_model.*, model.projector.*,
 * model.image_newline, model.view_seperator) as ollama's file names them into out (cap
 * bytes); false for any other name. */
bool hf_deepseekocr_rename_tower(const char *in, char *out, size_t cap);

/* The pair of the language model's name pieces (Hugging Face's, GGUF's) that starts s, or
 * NULL. */
const char *const *hf_deepseekocr_rename_at(const char *s);

/* Whether a GGUF name ("s.", "v.", "mm.") is one of the towers'. */
bool hf_deepseekocr_known_tower(const hf_params *p, const char *name);

/* Whether a block's tensor (the part of its name after "blk.L.") is one of layer's. */
bool hf_deepseekocr_known_tensor(const hf_params *p, unsigned layer, const char *suffix);

/* DeepSeek-OCR's keys (the common ones written already). */
bool hf_deepseekocr_write_keys(const hf_params *p, gguf_writer *w, corral_error *err);

#endif

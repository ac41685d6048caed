/*
 * Z.ai's GLM-OCR of hf_family.h's table (GlmOcrForConditionalGeneration, "glmocr"), as
 * ollama's converter writes it: the text model (text_config; GLM-4's sandwich-normed layers,
 * gate and up in one ffn_up, q and k permuted from interleaved to NeoX pairs for M-RoPE,
 * its multi-token prediction layers after the trunk as nextn.*) with its vision tower in the
 * same file (vision_config; the patch kernel's two temporal slices apart, a block's q/k/v
 * kept fused), preprocessor_config.json's pixel bounds and normalisation, and the tokenizer's
 * chatglm-bpe pre-tokenizer, <|endoftext|> as bos and unknown token and <|user|> as end of
 * turn.
 */
#ifndef CORRAL_CONVERT_HF_FAMILY_GLMOCR_H
#define CORRAL_CONVERT_HF_FAMILY_GLMOCR_H

#include <jansson.h>
#include <stdbool.h>

#include "convert/hf_family.h"

bool hf_family_is_glmocr(const hf_arch *a);

/*
 * GLM-OCR's own config.json keys into p (the common ones read already from text_config):
 * num_nextn_predict_layers (p->n_layer becomes the trunk's and theirs), rope_parameters
 * (rope_theta, partial_rotary_factor, mrope_section), vision_config and the image and video
 * token ids, with ollama's converter's defaults where it is silent.
 */
hf_status hf_glmocr_read_config(const json_t *config, hf_params *p, corral_error *err);

/* preprocessor_config.json (an object; ollama's converter requires it): size's
 * shortest_edge and longest_edge, patch_size, temporal_patch_size, merge_size, image_mean
 * and image_std. */
hf_status hf_glmocr_read_preprocessor(const json_t *preprocessor, hf_params *p,
                                      corral_error *err);

/* The tower's names (model.visual.*) as ollama's file names them into out (cap bytes); false
 * for any other name. */
bool hf_glmocr_rename_tower(const char *in, char *out, size_t cap);

/* The pair of GLM-OCR's text name pieces (Hugging Face's, GGUF's) that starts s, or NULL. */
const char *const *hf_glmocr_rename_at(const char *s);

/* Whether a checkpoint tensor is left out: a layer past the trunk and its prediction layers. */
bool hf_glmocr_skipped_tensor(const hf_params *p, const char *name);

/* Whether a GGUF name outside the text model's blocks is the tower's. */
bool hf_glmocr_known_tower(const hf_params *p, const char *name);

/* Whether a block's tensor (the part of its name after "blk.L.") is one of layer's. */
bool hf_glmocr_known_tensor(const hf_params *p, unsigned layer, const char *suffix);

/* The rotated dimensions of a head whose q/k rows are permuted to NeoX pairs (0: none). */
uint32_t hf_glmocr_neox_dims(const hf_params *p);

/* GLM-OCR's keys (the common ones written already). */
bool hf_glmocr_write_keys(const hf_params *p, gguf_writer *w, corral_error *err);

#endif

/*
 * A Hugging Face checkpoint directory made from a tiny llama.cpp-made GGUF fixture, by the
 * inverse of the conversion: config.json from the architecture's keys, tokenizer.json (or, for
 * a SentencePiece vocabulary, tokenizer.model), tokenizer_config.json and
 * generation_config.json from the tokenizer's, and the weights in
 * two safetensors shards with their index, under Hugging Face's names, Llama's Q/K rows in
 * Hugging Face's order (a qwen35 model as a Qwen3_5ForConditionalGeneration checkpoint: value
 * heads grouped, A_log, norms as w - 1, experts packed per layer, a vision tower's and an MTP
 * layer's tensor beside; a qwen3next model as a Qwen3NextForCausalLM one, its attn_qkv and
 * attn_gate fused in in_proj_qkvz; a nemotron_h model with an MTP layer's tensor beside; a
 * gemma4 model as Gemma 4's, its norms as they are, a fused attn_qkv as q/k/v, its experts'
 * stacks whole, a Gemma4ForConditionalGeneration's text model under text_config with tower
 * tensors beside; a nomic-bert-moe model as nomic-embed-text v2's, its experts packed in
 * mlp.experts.mlp.w1 and w2 with a bias beside, its "t5" vocabulary as tokenizer.json's
 * Unigram).
 * Converting the directory must give the fixture back. Fails the
 * current cmocka test on an error.
 */
#ifndef CORRAL_TESTS_HF_FIXTURE_H
#define CORRAL_TESTS_HF_FIXTURE_H

#include <stdbool.h>

#include "convert/safetensors.h"

/* The chat template hf_fixture_write puts in tokenizer_config.json. */
#define HF_FIXTURE_CHAT_TEMPLATE "{% for m in messages %}{{ m.content }}{% endfor %}"

/*
 * Write the checkpoint of gguf_path into dir (made if missing) as architecture hf_arch. Matrices
 * are stored as matrix_dtype; vectors as F32. With pre_regex, tokenizer.json's pre-tokenizer
 * is a Split with that pattern.
 */
void hf_fixture_write(const char *gguf_path, const char *dir, const char *hf_arch,
                      safetensors_dtype matrix_dtype, const char *pre_regex);

/*
 * hf_fixture_write, but a gpt-oss model's expert tensors (*_exps.*) taken from experts_path
 * (the same model with MXFP4 experts): blocks and scales, U8, as Hugging Face stores MXFP4.
 */
void hf_fixture_write_experts_from(const char *gguf_path, const char *experts_path,
                                   const char *dir, const char *hf_arch,
                                   safetensors_dtype matrix_dtype, const char *pre_regex);

/*
 * Write the Gemma3ForConditionalGeneration checkpoint of the gemma3 text model at text_path
 * and its llama.cpp projector at mmproj_path into dir: the text model's keys under
 * text_config and its tensors under language_model., the projector's keys as vision_config
 * and its tensors under Hugging Face's names (vision_tower.vision_model.*,
 * multi_modal_projector.*, the soft embedding norm as w - 1), mm_tokens_per_image =
 * tokens_per_image; matrices as matrix_dtype, vectors F32.
 */
void hf_fixture_write_vision(const char *text_path, const char *mmproj_path, const char *dir,
                             uint32_t tokens_per_image, safetensors_dtype matrix_dtype);

/*
 * hf_fixture_write_vision for the gemma4 text model at text_path and its llama.cpp gemma4v
 * projector: a Gemma4ForConditionalGeneration checkpoint, the tower under
 * model.vision_tower.* (its clipped linears as .linear.weight with their bounds as scalars,
 * the patch kernel as a linear layer over each patch's pixels, row by row, channels
 * innermost) and the projection under model.embed_vision.*.
 */
void hf_fixture_write_gemma4v(const char *text_path, const char *mmproj_path, const char *dir,
                              safetensors_dtype matrix_dtype);

/*
 * hf_fixture_write_gemma4v with the Gemma 4 audio tower at tower_path (a gemma4 file of a.*
 * and mm.a.* tensors, all F32, as tools/archref/gemma4audiogen.py writes it): its tensors
 * in a shard of their own under Hugging Face's names (block 0 in transformers' naming,
 * model.audio_tower.layers.0.*, block 1 in the conformer naming, conformer.1.*, which alone
 * names a key scale; clipped linears as .linear.weight with their bounds as scalars;
 * per_dim_scale before its softplus; the depthwise kernels [channels, 1, kernel]; kernels and
 * vectors F32, the other matrices matrix_dtype) in model-audio.safetensors, the index listing
 * them, and audio_config in config.json.
 */
void hf_fixture_write_gemma4_audio(const char *text_path, const char *mmproj_path,
                                   const char *tower_path, const char *dir,
                                   safetensors_dtype matrix_dtype);

/*
 * hf_fixture_write_vision for the lfm2 text model at text_path and its llama.cpp lfm2
 * projector: an Lfm2VlForConditionalGeneration checkpoint (model.language_model.*), the
 * SigLIP 2 tower under model.vision_tower.vision_model.* (the patch kernel as a linear layer
 * over each patch's pixels, channels innermost), the projector under
 * model.multi_modal_projector.*, a processor_config.json with the tile size and
 * normalisation, the tokenizer splitting text as Qwen2's.
 */
void hf_fixture_write_lfm2vl(const char *text_path, const char *mmproj_path, const char *dir,
                             safetensors_dtype matrix_dtype);

/*
 * hf_fixture_write_vision for the glm4 text model at text_path (M-RoPE, a prediction layer)
 * and its llama.cpp glm4v projector: a GlmOcrForConditionalGeneration checkpoint, the text
 * model under model.language_model.* (q and k in GLM's interleaved pairs, gate and up in
 * gate_up_proj), the tower under model.visual.* (the two temporal patch kernels stacked into
 * one Conv3D kernel), a preprocessor_config.json, the tokenizer splitting text as Qwen2's.
 */
void hf_fixture_write_glmocr(const char *text_path, const char *mmproj_path, const char *dir,
                             safetensors_dtype matrix_dtype);

/*
 * hf_fixture_write_vision for the deepseek2-ocr language model at text_path and its llama.cpp
 * deepseekocr projector: a DeepseekOCRForCausalLM checkpoint, the language model's keys under
 * language_config and its tensors under model.*, SAM under model.sam_model.*, CLIP under
 * model.vision_model.*, the projection under model.projector.*, the tokenizer splitting text
 * as Qwen2's.
 */
void hf_fixture_write_deepseekocr(const char *text_path, const char *mmproj_path,
                                  const char *dir, safetensors_dtype matrix_dtype);

/*
 * hf_fixture_write_vision for the mistral3 text model at text_path and its llama.cpp pixtral
 * projector: a Mistral3ForConditionalGeneration checkpoint, the tower under vision_tower.* and
 * multi_modal_projector.*, its Q and K rows in Hugging Face's order, the [IMG_BREAK] vector
 * as that token's row of the text embeddings, the tokenizer splitting text as Qwen2's.
 */
void hf_fixture_write_pixtral(const char *text_path, const char *mmproj_path, const char *dir,
                              safetensors_dtype matrix_dtype);

/*
 * hf_fixture_write_vision for the qwen2vl text model at text_path and its llama.cpp
 * qwen2.5vl_merger projector: a Qwen2_5_VLForConditionalGeneration checkpoint, its M-RoPE
 * sections as rope_scaling's, the tower under visual.* with its two temporal patch kernels
 * stacked and each block's Q, K and V fused into attn.qkv, the tokenizer splitting text as
 * Qwen2's.
 */
void hf_fixture_write_qwen25vl(const char *text_path, const char *mmproj_path, const char *dir,
                               safetensors_dtype matrix_dtype);

/*
 * hf_fixture_write_vision for the qwen3vl (or qwen3vlmoe) text model at text_path and its
 * llama.cpp qwen3vl_merger projector: a Qwen3VLForConditionalGeneration checkpoint
 * (Qwen3VLMoeForConditionalGeneration, its experts packed per layer; newer transformers'
 * layout: model.language_model.*, model.visual.*), its M-RoPE sections as rope_scaling's, its
 * deepstack layers listed, the two temporal patch kernels stacked, the deepstack mergers
 * numbered by place, a preprocessor_config.json with the projector's normalisation, the
 * tokenizer splitting text as Qwen2's.
 */
void hf_fixture_write_qwen3vl(const char *text_path, const char *mmproj_path, const char *dir,
                              safetensors_dtype matrix_dtype);

/*
 * hf_fixture_write_vision for the llama4 text model at text_path and its llama.cpp llama4
 * projector: a Llama4ForConditionalGeneration checkpoint (older transformers' layout:
 * language_model.*, vision_model.*), its FFN under feed_forward (the experts packed per layer,
 * a router, a shared expert), Q/K in GGUF's order as Llama 4's checkpoints keep them, the
 * tokenizer splitting text as Qwen2's.
 */
void hf_fixture_write_llama4(const char *text_path, const char *mmproj_path, const char *dir,
                             safetensors_dtype matrix_dtype);

/*
 * Write the MllamaForConditionalGeneration checkpoint of the mllama file at gguf_path (ollama's
 * layout: its text model and tower in one GGUF) into dir: the text model under
 * language_model. (Q/K in Hugging Face's order, the cross-attention layers under
 * cross_attn.), the tower under vision_model.* and multi_modal_projector.* with its gates as
 * their atanh and each block's Q and K transposed back into Hugging Face's order; no
 * rope_scaling (the file's rope_freqs are left out), the tokenizer splitting text as Qwen2's.
 */
void hf_fixture_write_mllama(const char *gguf_path, const char *dir,
                             safetensors_dtype matrix_dtype);

/*
 * Write the PEFT directory (adapter_config.json, adapter_model.safetensors) of the GGUF LoRA
 * adapter at adapter_path for the llama model at base_path into dir: lora_A and lora_B under
 * Hugging Face's names, in the adapter's types (F32 or F16), B's Q/K rows in Hugging Face's order.
 */
void hf_fixture_write_adapter(const char *adapter_path, const char *base_path, const char *dir);

/* Qwen2's pre-tokenizer pattern, as its tokenizer.json spells it. */
extern const char hf_fixture_qwen2_regex[];

#endif

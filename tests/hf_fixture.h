/*
 * A Hugging Face checkpoint directory made from a tiny llama.cpp-made GGUF fixture, by the
 * inverse of the conversion: config.json from the architecture's keys, tokenizer.json (or, for
 * a SentencePiece vocabulary, tokenizer.model), tokenizer_config.json and
 * generation_config.json from the tokenizer's, and the weights in
 * two safetensors shards with their index, under Hugging Face's names, Llama's Q/K rows in
 * Hugging Face's order. Converting the directory must give the fixture back. Fails the
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
 * Write the PEFT directory (adapter_config.json, adapter_model.safetensors) of the GGUF LoRA
 * adapter at adapter_path for the llama model at base_path into dir: lora_A and lora_B under
 * Hugging Face's names, in the adapter's types (F32 or F16), B's Q/K rows in Hugging Face's order.
 */
void hf_fixture_write_adapter(const char *adapter_path, const char *base_path, const char *dir);

/* Qwen2's pre-tokenizer pattern, as its tokenizer.json spells it. */
extern const char hf_fixture_qwen2_regex[];

#endif

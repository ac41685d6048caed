/*
 * Hugging Face checkpoint (a directory of config.json, tokenizer files and *.safetensors
 * shards) to one GGUF file, as llama.cpp's and ollama's converters write it: the same tensor
 * names, shapes and types (1-D tensors and biases F32, BF16 weights BF16, others F16), the
 * same metadata keys, Llama's Q/K rows permuted back to GGUF's RoPE pairing.
 *
 * Architectures (config.json's "architectures"[0]): LlamaForCausalLM and MistralForCausalLM
 * (GGUF "llama"), Qwen2ForCausalLM ("qwen2"), Qwen3ForCausalLM ("qwen3"), GemmaForCausalLM,
 * Gemma2ForCausalLM and Gemma3ForCausalLM (text; "gemma", "gemma2", "gemma3": their norms,
 * stored as w - 1, become 1 + w), Phi3ForCausalLM ("phi3": fused q/k/v and gate/up kept
 * fused, LongRoPE's factors as rope_factors_long/short tensors). The tokenizer is
 * a SentencePiece tokenizer.model when there is one, else tokenizer.json's BPE (see
 * hf_tokenizer.h). Shards (model*.safetensors when there are any, else *.safetensors) are
 * read in name order;
 * model.safetensors.index.json, when given, must name only shards that are given too.
 */
#ifndef CORRAL_CONVERT_HF_CONVERT_H
#define CORRAL_CONVERT_HF_CONVERT_H

#include <stdbool.h>
#include <stddef.h>

#include "corral/error.h"

#define HF_MAX_JSON_BYTES ((size_t)64 << 20) /* the largest vocabularies' tokenizer.json fit */
#define HF_SUPPORTED_ARCHITECTURES                                                           \
    "LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, "              \
    "GemmaForCausalLM, Gemma2ForCausalLM, Gemma3ForCausalLM, Phi3ForCausalLM"

/* One file of the checkpoint: its name relative to the directory, and where it is. */
typedef struct hf_file {
    const char *name;
    const char *path;
} hf_file;

typedef enum hf_status {
    HF_OK,
    HF_INVALID, /* the checkpoint: unsupported, incomplete or malformed */
    HF_IO,      /* reading or writing failed */
} hf_status;

/* Whether a file of a FROM directory belongs to a checkpoint (weights, config, tokenizer). */
bool hf_is_checkpoint_file(const char *name);

/* Whether a file's name makes it a checkpoint's weights (*.safetensors, not in a folder). */
bool hf_is_weights_file(const char *name);

/* Convert to out_path (written beside it, then renamed into place). */
hf_status hf_convert(const hf_file *files, size_t n, const char *out_path, corral_error *err);

#endif

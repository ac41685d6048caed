/*
 * A PEFT LoRA adapter (a directory of adapter_config.json and adapter_model.safetensors) to
 * the GGUF LoRA adapter llama.cpp's convert_lora_to_gguf.py writes for the same base model:
 * general.type "adapter", adapter.type "lora", adapter.lora.alpha from lora_alpha, the base
 * model's general.architecture, and for each adapted matrix NAME (GGUF's name for the base
 * tensor) NAME.lora_a (PEFT's lora_A, ne [n_in, rank]) and NAME.lora_b (lora_B, ne [rank,
 * n_out]), both F32. Llama's attn_q and attn_k rows are permuted to GGUF's RoPE pairing as the
 * model converter permutes the base's (hf_convert.h): on B, whose rows are the matrix's
 * outputs.
 *
 * The base model is a GGUF of the llama, qwen2, qwen3, qwen3moe, gemma, gemma2, gemma3 or phi3
 * architecture (the others' conversions split, fuse or reorder matrices an adapter would have
 * to follow): its architecture, head counts and layer count decide names and permutation. Adapters PEFT
 * scales otherwise than alpha / rank (DoRA, rsLoRA, per-module alphas) are refused, as are
 * tensors other than lora_A/lora_B pairs of attention, feed-forward and output matrices.
 */
#ifndef CORRAL_CONVERT_HF_ADAPTER_H
#define CORRAL_CONVERT_HF_ADAPTER_H

#include <stdbool.h>
#include <stddef.h>

#include "convert/hf_convert.h"
#include "corral/error.h"

#define HF_ADAPTER_CONFIG "adapter_config.json"
#define HF_ADAPTER_WEIGHTS "adapter_model.safetensors"

/* Whether a file's name is one of a PEFT adapter's that the conversion reads. */
bool hf_is_adapter_file(const char *name);

/* Convert the adapter among files for the base model at base_gguf_path into out_path (written
 * beside it, renamed into place when done). HF_INVALID names what is wrong with the adapter. */
hf_status hf_adapter_convert(const hf_file *files, size_t n, const char *base_gguf_path,
                             const char *out_path, corral_error *err);

#endif

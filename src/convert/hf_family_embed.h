/*
 * The encoder (embedding) architectures of hf_family.h's table: BertModel ("bert"), as
 * ollama's converter writes it. Their tensors keep Hugging Face's BERT names under GGUF's
 * (encoder.layer.L.attention.self.query as blk.L.attn_q, ...), their pooling and whether
 * embeddings are normalized come from sentence-transformers' modules.json and its pooling
 * module's config.json, and their tokenizer is tokenizer.json's WordPiece (hf_tokenizer.h).
 */
#ifndef CORRAL_CONVERT_HF_FAMILY_EMBED_H
#define CORRAL_CONVERT_HF_FAMILY_EMBED_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "convert/hf_family.h"

/* Whether the architecture is one of this file's. */
bool hf_family_is_encoder(const hf_arch *a);

/* A Hugging Face tensor name as GGUF's, into out (cap bytes, cut short if longer). */
void hf_embed_rename(const char *in, char *out, size_t cap);

/* Whether a checkpoint's tensor is left out (position ids, the pooler). */
bool hf_embed_skipped_tensor(const char *name);

/* Whether a GGUF name is one of the architecture's tensors. */
bool hf_embed_known_tensor(const hf_params *p, const char *name);

/*
 * modules.json (its parsed JSON): whether a Normalize module follows, and the name of the
 * Pooling module's config.json among the checkpoint's files ("1_Pooling/config.json") into
 * pooling_path (cap bytes; "" when there is no Pooling module).
 */
hf_status hf_embed_read_modules(const json_t *modules, hf_params *p, char *pooling_path,
                                size_t cap, corral_error *err);

/* The Pooling module's config.json: mean (1) or CLS (2) pooling, else none (0). */
hf_status hf_embed_read_pooling(const json_t *pooling, hf_params *p, corral_error *err);

/* The architecture's own keys: attention.causal, pooling_type, normalize_embeddings and the
 * LayerNorm epsilon. */
bool hf_embed_write_keys(const hf_params *p, gguf_writer *w, corral_error *err);

#endif

/*
 * The encoder (embedding) architectures of hf_family.h's table, as ollama's converter writes
 * them: BertModel ("bert"; its tensors' BERT names under GGUF's, encoder.layer.L.attention.
 * self.query as blk.L.attn_q, ..., its tokenizer tokenizer.json's WordPiece, see
 * hf_tokenizer.h), NomicBertModel ("nomic-bert", nomic-embed-text: the same with fused q/k/v,
 * RoPE and a SwiGLU FFN, under the names the engine reads, llama.cpp's; ollama's converter
 * renames a layout nomic's checkpoints do not use; "nomic-bert-moe" where config.json's
 * moe_every_n_layers gives experts, nomic-embed-text v2: a GELU FFN with biases, and in its
 * expert layers a router and the experts' packed up (mlp.experts.mlp.w1) and down (w2, each
 * expert's stored transposed) matrices, its tokenizer tokenizer.json's Unigram) and
 * Gemma3TextModel (EmbeddingGemma, "gemma-embedding": Gemma 3's text stack, hf_family.c's,
 * and two dense projections). Their pooling, whether embeddings are
 * normalized and EmbeddingGemma's projections come from sentence-transformers' modules.json
 * and its modules' folders.
 */
#ifndef CORRAL_CONVERT_HF_FAMILY_EMBED_H
#define CORRAL_CONVERT_HF_FAMILY_EMBED_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "convert/hf_family.h"

/* Whether the architecture is one of this file's; whether it is EmbeddingGemma. */
bool hf_family_is_encoder(const hf_arch *a);
bool hf_family_is_gemma_embedding(const hf_arch *a);

/* BERT's (nomic-bert's) tensor name as GGUF's, into out (cap bytes, cut short if longer). */
void hf_embed_rename(const hf_arch *a, const char *in, char *out, size_t cap);

/* nomic-bert's config.json with the Hugging Face names of its GPT-2 style keys (n_layer,
 * n_embd, n_inner, n_head, n_positions, layer_norm_epsilon, rotary_emb_base) and of its
 * experts' count per token (moe_top_k) added where the file lacks them; NULL when out of
 * memory. */
json_t *hf_embed_nomic_config(const json_t *config);

/* nomic-bert's keys past the common ones (read after them): moe_every_n_layers (experts,
 * nomic-embed-text v2: the architecture becomes nomic-bert-moe, whose FFN must be GELU and
 * whose experts' weights are not renormalized) and type_vocab_size. */
hf_status hf_embed_read_nomic_config(const json_t *config, hf_params *p, corral_error *err);

/* Whether a BERT checkpoint's tensor is left out (position ids, the pooler, nomic-bert-moe's
 * experts' bias, which neither the engine nor llama.cpp has a place for). */
bool hf_embed_skipped_tensor(const hf_arch *a, const char *name);

/* Whether name is one of nomic-bert-moe's packed experts (encoder.layers.L.mlp.experts.mlp.w1,
 * [experts x n_inner, n_embd], or w2, the same shape with each expert's down transposed): its
 * layer, and whether it is w2. */
bool hf_embed_parse_nomic_experts(const hf_arch *a, const char *name, unsigned *layer,
                                  bool *down);

/* Whether a layer of a nomic-bert-moe model has experts in place of its FFN. */
bool hf_embed_is_moe_layer(const hf_params *p, unsigned layer);

/* Whether a GGUF name is one of BERT's tensors. */
bool hf_embed_known_tensor(const hf_params *p, const char *name);

#define HF_MODULE_NAME_BYTES 256

/* The files of sentence-transformers' modules that a conversion reads, by their names among
 * the checkpoint's files ("" where there is none). */
typedef struct hf_modules {
    char pooling[HF_MODULE_NAME_BYTES]; /* the Pooling module's config.json */
    /* EmbeddingGemma's dense_2 and dense_3: 2_Dense's and 3_Dense's config.json and weights */
    char dense_config[2][HF_MODULE_NAME_BYTES], dense_weights[2][HF_MODULE_NAME_BYTES];
} hf_modules;

/*
 * modules.json (its parsed JSON) into *m and p: whether a Normalize module follows, where
 * the Pooling module's and, for EmbeddingGemma, the 2_Dense and 3_Dense modules' files are.
 * A BERT with a Dense module is refused (its projection would be left out), EmbeddingGemma
 * without both.
 */
hf_status hf_embed_read_modules(const json_t *modules, hf_params *p, hf_modules *m,
                                corral_error *err);

/* The Pooling module's config.json: mean (1) or CLS (2) pooling, else none (0; EmbeddingGemma:
 * mean). */
hf_status hf_embed_read_pooling(const json_t *pooling, hf_params *p, corral_error *err);

/* A Dense module's config.json (which: 0 for dense_2, 1 for dense_3): its in_features and
 * out_features, and no bias. */
hf_status hf_embed_read_dense(const json_t *dense, unsigned which, hf_params *p,
                              corral_error *err);

/* The architecture's own keys: BERT's attention.causal, pooling_type, normalize_embeddings
 * and LayerNorm epsilon (nomic-bert-moe's moe_every_n_layers and token type count too); EmbeddingGemma's pooling_type, its sliding layers' RoPE base and its
 * projections' sizes. */
bool hf_embed_write_keys(const hf_params *p, gguf_writer *w, corral_error *err);

#endif

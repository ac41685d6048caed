/*
 * A Hugging Face tokenizer (tokenizer.json's byte-level BPE, WordPiece or Unigram, or a
 * SentencePiece tokenizer.model,
 * with tokenizer_config.json and generation_config.json beside it) as GGUF tokenizer.* metadata,
 * as llama.cpp's and ollama's converters write it. For BPE: the "gpt2" model, tokens by id with
 * their types (special added tokens are control tokens, other added tokens user-defined),
 * merges, the pre-tokenizer named from its Split patterns; for WordPiece the "bert" model (its
 * tokens in that model's spelling, see hf_tokenizer.c); for Unigram (XLM-RoBERTa's) the "t5"
 * model as llama.cpp's converter writes it: the pieces' scores, the unknown piece, the
 * precompiled charsmap, whether a space mark starts a text and runs of spaces are made one,
 * whether bos and eos frame a text (the post-processor's template); for SentencePiece the
 * "llama" model (see hf_vocab_load_spm). Both: the chat template, and the special tokens that
 * tokenizer_config.json names (their add_*_token flags too; eos_token_ids from
 * generation_config.json's lists).
 */
#ifndef CORRAL_CONVERT_HF_TOKENIZER_H
#define CORRAL_CONVERT_HF_TOKENIZER_H

#include <jansson.h>
#include <stdint.h>

#include "corral/error.h"
#include "gguf.h"

#define HF_MAX_VOCAB (1u << 24) /* GGUF_MAX_ARRAY_LEN */

typedef struct hf_vocab hf_vocab;

/*
 * Read the tokenizer. tokenizer_config and generation_config may be NULL (absent files);
 * chat_template (NULL when absent) is chat_template.jinja's text, used when tokenizer_config
 * has no template. bpe_model is the model a BPE is written as: "gpt2", which refuses a BPE over
 * SentencePiece pieces (byte fallback, Metaspace); or Gemma 4's "llama", which ollama's
 * converter writes for its BPE of either kind (with its merges: the engine runs it as BPE over
 * text whose spaces are SentencePiece's).
 * vocab_size is config.json's (0 when absent): a shorter vocabulary is padded to it with
 * "[PAD<id>]" user-defined tokens, as are ids that no token has. NULL with err set on a
 * tokenizer Corral cannot convert or a malformed one.
 */
hf_vocab *hf_vocab_load(const json_t *tokenizer, const json_t *tokenizer_config,
                        const json_t *generation_config, const char *chat_template,
                        uint64_t vocab_size, const char *bpe_model, corral_error *err);
/*
 * A SentencePiece tokenizer.model (protobuf, as ollama prefers it to tokenizer.json) as the
 * "llama" model: its pieces with their scores and types, special_tokens_map.json's additional
 * special tokens as control tokens, added_tokens.json's after them as user-defined. The
 * special tokens tokenizer_config.json names are looked up among tokenizer.json's added
 * tokens, then among the pieces. Every JSON argument may be NULL (an absent file).
 */
hf_vocab *hf_vocab_load_spm(const void *model, size_t model_len, const json_t *tokenizer,
                            const json_t *added_tokens, const json_t *special_tokens_map,
                            const json_t *tokenizer_config, const json_t *generation_config,
                            const char *chat_template, uint64_t vocab_size, corral_error *err);

/* generation_config.json's second and third end-of-sequence ids (eos_token_id's list) as the
 * end-of-turn and end-of-message tokens, as ollama's GLM-4 MoE Lite converter writes them. */
void hf_vocab_eog_from_eos_ids(hf_vocab *vocab);

/* The pre-tokenizer's name as given (a static string), whatever the tokenizer's patterns say. */
void hf_vocab_set_pre(hf_vocab *vocab, const char *pre);

/* No chat template (Laguna's: ollama's converter leaves it out, its renderer formats prompts),
 * and add_bos_token written false whatever tokenizer_config.json says. */
void hf_vocab_as_laguna(hf_vocab *vocab);

/* GLM-OCR's special tokens as ollama's converter sets them: <|endoftext|> as bos and unknown
 * token, <|user|> as end of turn, where the vocabulary has them. */
void hf_vocab_as_glmocr(hf_vocab *vocab);

/* The first n tokens only, where there are more (the special tokens past them forgotten), as
 * ollama's EmbeddingGemma converter keeps those the embeddings have rows for. */
void hf_vocab_truncate(hf_vocab *vocab, uint32_t n);

/* The id of the token spelled text (the first, when several are), or -1. */
int64_t hf_vocab_find(const hf_vocab *vocab, const char *text);

void hf_vocab_free(hf_vocab *vocab);

uint32_t hf_vocab_count(const hf_vocab *vocab);

/* The tokenizer.* keys. */
bool hf_vocab_write(const hf_vocab *vocab, gguf_writer *w, corral_error *err);

#endif

/*
 * Corral's engine: the only header the runner, server and CLI may include from the engine.
 * It exposes files, models, contexts, tokenizers and sampling as opaque handles; tensor
 * types, kernels and GGUF internals stay behind it.
 */
#ifndef CORRAL_ENGINE_H
#define CORRAL_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "corral/error.h"

/* ---- CPU dispatch ---- */

/* Lower the kernel level for this process: "scalar", "avx2" or "avx512". */
bool corral_cpu_set_level(const char *name, corral_error *err);
/* Name of the level kernels run at now, and of the highest the CPU supports. */
const char *corral_cpu_level(void);
const char *corral_cpu_detected_level(void);

/* ---- Model files (GGUF) ---- */

typedef struct corral_model_file corral_model_file;

corral_model_file *corral_model_file_open(const char *path, corral_error *err);
void corral_model_file_close(corral_model_file *file);

/* gguf-info: metadata (arrays abbreviated to max_array_items) and, optionally, tensors. */
void corral_model_file_print(const corral_model_file *file, FILE *out, bool with_tensors,
                             size_t max_array_items);

/* ---- Tokenizers: SentencePiece and byte-level BPE from GGUF metadata, as llama.cpp ---- */

typedef int32_t corral_token;
typedef struct corral_vocab corral_vocab;

/* Load only the vocabulary of a GGUF file (the weights are never read). */
corral_vocab *corral_vocab_open(const char *gguf_path, corral_error *err);
void corral_vocab_free(corral_vocab *vocab);

size_t corral_vocab_n_tokens(const corral_vocab *vocab);
corral_token corral_vocab_bos(const corral_vocab *vocab); /* -1 when none */
corral_token corral_vocab_eos(const corral_vocab *vocab); /* -1 when none */
/* End of generation: eos, eot, eom and the vocabulary's end-of-turn tokens. */
bool corral_vocab_is_eog(const corral_vocab *vocab, corral_token id);

/*
 * Tokenize text[0..len) (any bytes). add_special adds BOS/EOS as the vocabulary says;
 * parse_special lets control-token text such as "<|eot_id|>" become that token (templates
 * need it; user text must not get it). Writes at most max_ids ids and sets *n_ids to the
 * number the text needs: when it is larger than max_ids, call again with a bigger buffer.
 * False (err set) only when the text is too large or memory runs out.
 */
bool corral_tokenize(const corral_vocab *vocab, const char *text, size_t len, bool add_special,
                     bool parse_special, corral_token *ids, size_t max_ids, size_t *n_ids,
                     corral_error *err);

/*
 * One token's bytes, as printed during generation: into buf[0..size), returning the full
 * length (call again with more room when it is larger). Control tokens are empty unless
 * special. A piece may be part of a UTF-8 character; see corral_detok_stream. An id out of
 * range gives 0.
 */
size_t corral_token_to_piece(const corral_vocab *vocab, corral_token id, char *buf, size_t size,
                             bool special);

/*
 * A whole sequence back to text, as llama.cpp's llama_detokenize: remove_special drops a
 * leading BOS / trailing EOS the vocabulary adds, unparse_special renders control tokens, and
 * BPE vocabularies clean up spaces before punctuation. Writes at most max_bytes and sets
 * *n_bytes to the full length. False (err set) on an id out of range.
 */
bool corral_detokenize(const corral_vocab *vocab, const corral_token *ids, size_t n_ids,
                       bool remove_special, bool unparse_special, char *text, size_t max_bytes,
                       size_t *n_bytes, corral_error *err);

/*
 * Streaming detokenizer for generation: each push returns the text that is now safe to show,
 * always valid UTF-8; bytes of a character still being spelled out by later tokens are held
 * back. Invalid bytes become U+FFFD. The returned text stays valid until the next call.
 */
typedef struct corral_detok_stream corral_detok_stream;

corral_detok_stream *corral_detok_stream_create(const corral_vocab *vocab, corral_error *err);
void corral_detok_stream_free(corral_detok_stream *stream);
const char *corral_detok_stream_push(corral_detok_stream *stream, corral_token id, size_t *len);
/* End of the sequence: a character left incomplete comes out as U+FFFD. */
const char *corral_detok_stream_finish(corral_detok_stream *stream, size_t *len);

#endif

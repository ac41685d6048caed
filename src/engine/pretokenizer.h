/*
 * BPE pre-tokenizers: the table of `tokenizer.ggml.pre` names -> regex lists, compiled once per
 * vocabulary with PCRE2 (UTF + Unicode properties, JIT when available), and the splitter that
 * cuts a text into the words BPE merges within. A compiled pretokenizer is read-only: each
 * split call brings its own match data, so threads may share one.
 */
#ifndef CORRAL_ENGINE_PRETOKENIZER_H
#define CORRAL_ENGINE_PRETOKENIZER_H

#include <stdbool.h>
#include <stddef.h>

#include "corral/error.h"

typedef struct pretokenizer pretokenizer;

/*
 * Compile the regexes for pre-type name (NULL = absent). An unknown name gives the "default"
 * list and sets *unknown_name; the caller decides whether to warn.
 */
pretokenizer *pretokenizer_create(const char *name, size_t name_len, bool *unknown_name,
                                  corral_error *err);
void pretokenizer_free(pretokenizer *pre);
/* The table row's canonical name ("llama3", "qwen2", "gpt-2", "default", ...). */
const char *pretokenizer_name(const pretokenizer *pre);

/* What a pre type changes in the vocabulary's defaults, per llama.cpp. */
typedef struct pretok_flags {
    bool add_bos;       /* the llama3 family adds BOS */
    bool ignore_merges; /* a word that is a token is emitted whole */
    bool clean_spaces;  /* detokenize removes spaces before punctuation */
} pretok_flags;

pretok_flags pretokenizer_flags(const pretokenizer *pre);

/* A word: text[start .. start + size). */
typedef struct pretok_word {
    size_t start;
    size_t size;
} pretok_word;

/* Reusable buffers for one thread's split calls; zero-initialise, release with _free. */
typedef struct pretok_scratch {
    pretok_word *words[2];
    size_t cap[2];
    void *match_data;
    void *jit_stack;
    void *match_context;
} pretok_scratch;

void pretok_scratch_free(pretok_scratch *scratch);

/*
 * Split valid UTF-8 text[0..len) into words (every byte lands in exactly one word, in order).
 * *words points into scratch and stays valid until the next call. False on a regex engine
 * failure or out of memory, with err set.
 */
bool pretokenizer_split(const pretokenizer *pre, const char *text, size_t len,
                        pretok_scratch *scratch, const pretok_word **words, size_t *n_words,
                        corral_error *err);

#endif

/*
 * A tokenizer vocabulary loaded from GGUF `tokenizer.*` metadata: token
 * texts, scores and types, the text -> id and merge maps, special ids, add_bos/add_eos, the
 * end-of-generation set and the special-token candidates. Immutable after loading, so threads
 * may share it. Token texts point into the GGUF map: the file must outlive the vocabulary
 * (vocab_load borrows it; corral_vocab_open owns its own).
 */
#ifndef CORRAL_ENGINE_VOCAB_H
#define CORRAL_ENGINE_VOCAB_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "corral/engine.h"
#include "bigram_queue.h"
#include "gguf.h"
#include "pretokenizer.h"
#include "vocab_map.h"

enum vocab_kind {
    VOCAB_SPM, /* tokenizer.ggml.model "llama" */
    VOCAB_BPE, /* "gpt2"; "gemma4" with escape_whitespace */
    VOCAB_WPM, /* "bert": WordPiece */
    VOCAB_UGM, /* "t5": SentencePiece Unigram */
};

/* GGUF token_type values; anything above 6 loads as UNDEFINED. */
enum token_type {
    TOKEN_UNDEFINED = 0,
    TOKEN_NORMAL = 1,
    TOKEN_UNKNOWN = 2,
    TOKEN_CONTROL = 3,
    TOKEN_USER_DEFINED = 4,
    TOKEN_UNUSED = 5,
    TOKEN_BYTE = 6,
};

enum token_flag {
    TOKEN_FLAG_LSTRIP = 1, /* eat whitespace before a special match */
    TOKEN_FLAG_RSTRIP = 2, /* eat whitespace after it */
    TOKEN_FLAG_EOG = 4,    /* ends generation */
};

/* A node of the UGM token prefix tree: children as a sibling list. */
typedef struct ugm_trie_node {
    int32_t first_child, next_sibling; /* -1 = none */
    int32_t token;                     /* the token whose text ends here, or -1 */
    uint8_t byte;                      /* the last byte of this node's text */
} ugm_trie_node;

/* What the Unigram tokenizer needs beyond the common vocabulary (tokenizer_ugm.c). */
typedef struct ugm_data {
    const uint8_t *nodes;     /* the charsmap's double array, in the GGUF map (or in
                               * owned_charsmap); 4 bytes a node */
    size_t n_nodes;           /* 0 = no charsmap */
    const char *replacements; /* NUL-terminated replacement strings, after the nodes */
    size_t replacements_size;
    uint8_t *owned_charsmap;  /* the charsmap decoded from base64, where nodes points */
    ugm_trie_node *trie;      /* normal, user-defined and unused tokens; node 0 is the root */
    float unknown_score;      /* the lowest normal score less a penalty */
    bool remove_extra_whitespaces;
} ugm_data;

/* Largest text the tokenizers accept in one call; symbol indices are int32. */
#define VOCAB_MAX_TEXT_BYTES ((size_t)1 << 29)

struct corral_vocab {
    gguf_file *owned_file; /* NULL when the file is borrowed */
    enum vocab_kind kind;
    uint32_t n_tokens;
    vocab_text *text;      /* per id; points into the map or into synth_text */
    float *score;          /* per id; 0 when the file has no scores */
    uint8_t *type;         /* per id, enum token_type */
    uint8_t *flags;        /* per id, enum token_flag bits */
    char *synth_text;      /* "[EMPTY_<id>]" texts for empty tokens */
    size_t max_token_bytes;
    size_t max_piece_bytes; /* longest token_to_piece result, special or not */

    token_map token_ids;
    merge_pair *merge_pairs; /* BPE */
    merge_map merges;        /* BPE */
    pretokenizer *pre;       /* BPE */

    corral_token bos, eos, eot, eom, unk;
    corral_token sep; /* WPM: [SEP], added last (bos is [CLS]) */
    bool add_bos, add_eos, add_space_prefix, clean_spaces, ignore_merges;
    /* tokenizer.ggml.model "gemma4": BPE over the text's own UTF-8 (no GPT-2 byte alphabet)
     * with spaces written as U+2581, SPM's <0xXX> tokens for bytes no symbol covers, and
     * pieces that turn U+2581 back into spaces */
    bool escape_whitespace;
    ugm_data ugm; /* UGM */

    corral_token *specials; /* CONTROL/USER_DEFINED/UNKNOWN ids, longest text first */
    size_t n_specials;

    corral_token byte_token[256]; /* SPM byte fallback / BPE single bytes; -1 = none */

    _Atomic(struct token_trie *) trie; /* for grammar masks; built on first use */
};

/*
 * Load from an open GGUF file, which must outlive the vocabulary. Fails (NULL, err set) on
 * missing or malformed tokenizer keys and on tokenizer models other than llama/gpt2/bert/gemma4/t5. Load
 * warnings (unknown pre-tokenizer, ...) go to stderr.
 */
corral_vocab *vocab_load(const gguf_file *file, corral_error *err);

/* A growable id list bounded by its creator. */
typedef struct token_list {
    corral_token *ids;
    size_t n, cap;
} token_list;

bool token_list_push(token_list *list, corral_token id, corral_error *err);

/* Per-call scratch buffers for the fragment tokenizers; zero-initialise, release with _free. */
typedef struct tokenize_scratch {
    char *bytes[3];
    size_t bytes_cap[3];
    struct merge_symbol *symbols;
    size_t symbols_cap;
    bigram_queue queue;
    pretok_scratch pretok;
} tokenize_scratch;

/* A symbol of the merge loops: bytes [start, start + size) of the fragment, in a list. */
typedef struct merge_symbol {
    uint32_t start, size; /* size 0 = absorbed into its left neighbour */
    int32_t prev, next;   /* -1 at the ends */
} merge_symbol;

void tokenize_scratch_free(tokenize_scratch *scratch);
/* Make scratch->bytes[which] hold n bytes / scratch->symbols hold n symbols. */
bool tokenize_scratch_bytes(tokenize_scratch *scratch, int which, size_t n, corral_error *err);
bool tokenize_scratch_symbols(tokenize_scratch *scratch, size_t n, corral_error *err);

/* Tokenize one raw fragment (no special tokens), appending ids. */
bool spm_tokenize_fragment(const corral_vocab *vocab, const char *text, size_t len,
                           tokenize_scratch *scratch, token_list *out, corral_error *err);
bool bpe_tokenize_fragment(const corral_vocab *vocab, const char *text, size_t len,
                           tokenize_scratch *scratch, token_list *out, corral_error *err);
bool wpm_tokenize_fragment(const corral_vocab *vocab, const char *text, size_t len,
                           tokenize_scratch *scratch, token_list *out, corral_error *err);
bool ugm_tokenize_fragment(const corral_vocab *vocab, const char *text, size_t len,
                           tokenize_scratch *scratch, token_list *out, corral_error *err);

/* UGM: read the charsmap and remove_extra_whitespaces, build the token tree (after the texts,
 * scores and types are loaded); ugm_free releases what ugm_load made. */
bool ugm_load(corral_vocab *vocab, const gguf_file *file, corral_error *err);
void ugm_free(corral_vocab *vocab);

/*
 * One token's bytes (as llama.cpp renders it) into buf[0..size); returns the full length, which may
 * exceed size (then only size bytes are written). Drops up to lstrip leading spaces. Control
 * and unknown tokens render only when special is set. id must be < n_tokens.
 */
size_t vocab_token_to_piece(const corral_vocab *vocab, corral_token id, char *buf, size_t size,
                            size_t lstrip, bool special);

/* GPT-2 byte <-> code point mapping: printable bytes map to themselves, the
 * other 68 to U+0100 onwards. */
uint32_t bpe_byte_to_cp(unsigned char byte);
/* The byte cp stands for, or -1 when cp is outside the table. */
int bpe_cp_to_byte(uint32_t cp);

#endif

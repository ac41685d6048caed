/*
 * A vocabulary's tokens as a prefix tree of their text bytes, for walking every token at once
 * (the grammar mask): tokens that share a prefix share its nodes, so a walk checks a prefix
 * once and skips a whole subtree when the prefix is refused. Built once per vocabulary, on
 * first use, and kept with it. End-of-generation tokens and tokens without text (control
 * tokens) are left out: they are never text to match.
 */
#ifndef CORRAL_ENGINE_TOKEN_TRIE_H
#define CORRAL_ENGINE_TOKEN_TRIE_H

#include <stdint.h>

#include "corral/engine.h"

/* The longest token text the trie holds; longer ones are left out (none are in real
 * vocabularies). */
enum { TOKEN_TRIE_MAX_BYTES = 256 };

/*
 * Nodes in depth-first order: node 0 is the empty prefix, a node's subtree is the nodes
 * [i, end), and its children follow it. A node's text is its parent's and one byte more.
 */
typedef struct token_trie_node {
    uint32_t end;         /* one past the last node of this subtree */
    uint32_t tokens;      /* first of this node's tokens in token_trie.ids */
    uint32_t n_tokens;    /* tokens whose text ends here */
    uint8_t byte;         /* the last byte of this node's text (none for node 0) */
    uint8_t depth_minus1; /* text length - 1 (node 0: 0, unused) */
} token_trie_node;

typedef struct token_trie {
    token_trie_node *nodes;
    uint32_t n_nodes;
    corral_token *ids; /* tokens by node */
    uint32_t n_ids;
} token_trie;

/* vocab's trie, built on the first call (thread-safe); NULL when out of memory. */
const token_trie *token_trie_of(const corral_vocab *vocab);

/* For the vocabulary's release. */
void token_trie_free(token_trie *trie);

#endif

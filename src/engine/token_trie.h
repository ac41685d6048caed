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
 * The tokens whose text ends at node i are ids[nodes[i].tokens, nodes[i + 1].tokens) (a last
 * node, nodes[n_nodes], closes the list); those of its subtree, up to nodes[end].tokens.
 */
typedef struct token_trie_node {
    uint32_t end;    /* one past the last node of this subtree */
    uint32_t tokens; /* first of this node's tokens in token_trie.ids */
    uint64_t info;   /* bits 0-39: the summary of the texts below (TOKEN_SUB_BITS); 48-55:
                      * the last byte of the text (none for node 0); 56-63: its length - 1
                      * (node 0: 0) */
} token_trie_node;

static inline uint8_t token_trie_byte(const token_trie_node *node)
{
    return (uint8_t)(node->info >> 48);
}

static inline size_t token_trie_depth(const token_trie_node *node)
{
    return (size_t)(node->info >> 56) + 1;
}

/* Tokens whose text ends at node i. */
static inline uint32_t token_trie_n_tokens(const token_trie_node *nodes, uint32_t i)
{
    return nodes[i + 1].tokens - nodes[i].tokens;
}

/*
 * Code points by class, for a grammar mask that takes a whole subtree at once: control
 * characters (U+0000-U+001F and U+007F), every code point from U+0080 (what UTF-8 decoding
 * can give: to U+1FFFFF), ASCII digits, lower-case and upper-case letters, and each other
 * printable ASCII character (space and punctuation) a class of its own.
 */
enum {
    TOKEN_CLASS_CONTROL,
    TOKEN_CLASS_NON_ASCII,
    TOKEN_CLASS_DIGIT,
    TOKEN_CLASS_LOWER,
    TOKEN_CLASS_UPPER,
    TOKEN_CLASS_PUNCT, /* the first of the 33 of space and punctuation, in code point order */
    TOKEN_CLASSES = TOKEN_CLASS_PUNCT + 33,
    /* besides the classes, in a node's summary: */
    TOKEN_SUB_PARTIAL_BAD = TOKEN_CLASSES, /* a token ends within a character no class can
                                            * complete */
    TOKEN_SUB_INVALID,                     /* a text is no UTF-8 (decoded from its start) */
    TOKEN_SUB_BITS,
};

/* The class of code point cp. */
unsigned token_trie_class(uint32_t cp);

/* Class k's code points: [*low, *high], and a second range [*low2, *high2] (control
 * characters only; else empty, *low2 > *high2). */
void token_trie_class_range(unsigned k, uint32_t *low, uint32_t *high, uint32_t *low2,
                            uint32_t *high2);

/*
 * A node's summary (token_trie_node.info's low bits): bit k set when a text below the node
 * (longer than its own), decoded from the start of the token, completes a character of
 * class k there or ends within a character (class TOKEN_CLASS_NON_ASCII), and the
 * TOKEN_SUB_ bits.
 */
static inline uint64_t token_trie_below(const token_trie_node *node)
{
    return node->info & ((1ull << TOKEN_SUB_BITS) - 1);
}

typedef struct token_trie {
    token_trie_node *nodes; /* n_nodes and the one that closes the token lists */
    uint32_t n_nodes;
    corral_token *ids; /* tokens by node */
    uint32_t n_ids;
    uint32_t root_child[256]; /* the root's child by its byte; 0: none */
} token_trie;

/* vocab's trie, built on the first call (thread-safe); NULL when out of memory. */
const token_trie *token_trie_of(const corral_vocab *vocab);

/* For the vocabulary's release. */
void token_trie_free(token_trie *trie);

#endif

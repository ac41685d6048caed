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
 * Nodes in breadth-first order, so that a node's children are side by side (a walk reads a
 * node's children in a row, not each at the end of its elder sibling's subtree): node 0 is
 * the empty prefix, and node i's children, in byte order, are the nodes
 * [nodes[i].children, nodes[i + 1].children) (a last node, nodes[n_nodes], closes the
 * list). A node's text is its parent's and one byte more. The tokens are numbered in
 * depth-first order (their texts sorted), so that a subtree's tokens are one range: the
 * token at position k is ids[k], and node i's subtree holds the positions from
 * nodes[i].tokens to its next sibling's (a last child: to its parent's end; the root's:
 * n_ids), those whose text ends at node i first, up to its first child's.
 */
typedef struct token_trie_node {
    uint32_t children; /* its first child */
    uint32_t tokens;   /* the first position of its subtree's tokens in token_trie.ids */
    uint64_t info;     /* bits 0-39: the summary of the texts below (TOKEN_SUB_BITS); 48-55:
                        * the last byte of the text (none for node 0) */
} token_trie_node;

static inline uint8_t token_trie_byte(const token_trie_node *node)
{
    return (uint8_t)(node->info >> 48);
}

/* The UTF-8 decoding of a text, one byte more: *value the code point's bits so far, *remain
 * the continuation bytes it still needs (0: the byte completes a character; -1: no UTF-8). */
static inline void token_trie_decode(uint32_t *value, int *remain, uint8_t b)
{
    if (*remain < 0)
        return;
    if (*remain > 0) {
        if ((b >> 6) != 2) {
            *remain = -1;
        } else {
            *value = (*value << 6) | (b & 0x3F);
            --*remain;
        }
    } else if (b < 0x80) {
        *value = b;
    } else {
        *remain = (b >> 5) == 6 ? 1 : (b >> 4) == 14 ? 2 : (b >> 3) == 30 ? 3 : -1;
        if (*remain >= 0)
            *value = b & (0x3Fu >> *remain);
    }
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
    corral_token *ids; /* the tokens by position */
    uint32_t n_ids;
    uint64_t *present; /* by token id, a bit per token of the vocabulary: set for those here */
    uint32_t root_child[256]; /* the root's child by its byte; 0: none */
} token_trie;

/* vocab's trie, built on the first call (thread-safe); NULL when out of memory. */
const token_trie *token_trie_of(const corral_vocab *vocab);

/* For the vocabulary's release. */
void token_trie_free(token_trie *trie);

#endif

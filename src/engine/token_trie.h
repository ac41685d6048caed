/*
 * A vocabulary's tokens as a prefix tree of their text bytes, for walking every token at once
 * (the grammar mask): tokens that share a prefix share its nodes, so a walk checks a prefix
 * once and skips a whole subtree when the prefix is refused. Built once per vocabulary, on
 * first use, and kept with it. End-of-generation tokens and tokens without text (control
 * tokens) are left out: they are never text to match.
 */
#ifndef CORRAL_ENGINE_TOKEN_TRIE_H
#define CORRAL_ENGINE_TOKEN_TRIE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
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
    uint64_t info;     /* bits 0-39: the summary of the texts below (TOKEN_SUB_BITS); 40-47:
                        * the most bytes a text below has past the node's (at most 255);
                        * 48-55: the last byte of the text (none for node 0) */
} token_trie_node;

static inline uint8_t token_trie_byte(const token_trie_node *node)
{
    return (uint8_t)(node->info >> 48);
}

/* The most bytes a text below node has past the node's own text: 0 for a leaf, at most 255
 * (a longer one counts 255). */
static inline unsigned token_trie_height(const token_trie_node *node)
{
    return (unsigned)(node->info >> 40) & 0xFF;
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

/* The classes of the code points below U+0080 set in ascii (bit cp & 63 of ascii[cp >> 6]). */
uint64_t token_trie_ascii_classes(const uint64_t ascii[2]);

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

/*
 * A walk from the root on behalf of a set of stacks that a character of any class in
 * `classes` takes to one set, which every such character brings back to itself (a string's
 * body takes nearly every character): up to where the walk meets a character of another
 * class, each token it passes is taken, so that part of the walk depends on the classes alone
 * and is kept with the trie for every grammar. Past those places (the exits) the set's own
 * walk goes on: from the first set within the first character, from the looping one after.
 * The classes hold none of the TOKEN_SUB_ bits. The same from below a node whose text ends
 * where such a set begins (` "`: a string opened within a token), over its subtree alone.
 *
 * With TOKEN_CLASS_NON_ASCII among them the walk goes through multi-byte characters too, as
 * the set's walk would: a partial character is alive and a token ending within one is taken
 * (some stack takes every code point from U+0080), but for the overlong two-byte forms
 * (decoded bits below 2 with one byte to come), which are exits.
 */
typedef struct token_trie_exit {
    uint32_t node, tokens_end; /* the node and the end of its tokens (token_trie_next's) */
    /* what a walk needs of the node where the set after its character takes nothing below
     * it, so that the node is not read: its tokens' first position, the end of those
     * ending at it (token_trie_own_end), its summary (token_trie_below) */
    uint32_t tokens, own_end;
    uint64_t below;
    uint32_t value; /* the decoding state before its byte (token_trie_decode) */
    int8_t remain;
    uint8_t byte; /* the node's byte, so that an exit no set takes is passed over unread */
    bool first;   /* within the text's first character: no character completed before it */
} token_trie_exit;

typedef struct token_trie_loop {
    uint64_t classes;
    uint32_t node;     /* the node it walks below: 0, the root, or a node's subtree */
    uint64_t *bits;    /* by position: the tokens taken before any exit */
    uint64_t *id_bits; /* the same by token id (token_trie.n_vocab bits); NULL below a node */
    uint32_t n_taken;  /* how many */
    token_trie_exit *exits;
    uint32_t n_exits;
} token_trie_loop;

/* What the loop walks kept with one trie may hold, all of them together. */
enum { TOKEN_TRIE_MAX_LOOPS = 16, TOKEN_TRIE_MAX_LOOP_BYTES = 32 << 20 };

/* The positions [from, to) set in bits (by position); their count. */
static inline uint32_t token_trie_mark(uint64_t *bits, uint32_t from, uint32_t to)
{
    if (from >= to)
        return 0;
    uint32_t first = from >> 6, last = (to - 1) >> 6;
    uint64_t head = UINT64_MAX << (from & 63), tail = UINT64_MAX >> (63 - ((to - 1) & 63));
    if (first == last) {
        bits[first] |= head & tail;
        return to - from;
    }
    bits[first] |= head;
    for (uint32_t w = first + 1; w < last; w++)
        bits[w] = UINT64_MAX;
    bits[last] |= tail;
    return to - from;
}

typedef struct token_trie {
    token_trie_node *nodes; /* n_nodes and the one that closes the token lists */
    uint32_t n_nodes;
    corral_token *ids; /* the tokens by position */
    uint32_t n_ids;
    uint64_t *present; /* by token id, a bit per token of the vocabulary: set for those here */
    uint32_t n_vocab;  /* the vocabulary's tokens, here or not */
    uint32_t root_child[256]; /* the root's child by its byte; 0: none */
    uint64_t class_ascii[TOKEN_CLASSES][2]; /* each class's code points below U+0080, a bit
                                             * each (bit cp & 63 of [cp >> 6]) */
    /* the loop walks made so far (token_trie_loop_of), which grammars on any thread read */
    pthread_mutex_t loops_lock;
    token_trie_loop *loops[TOKEN_TRIE_MAX_LOOPS];
    uint32_t n_loops;
    size_t loops_bytes;
} token_trie;

/* vocab's trie, built on the first call (thread-safe); NULL when out of memory. */
const token_trie *token_trie_of(const corral_vocab *vocab);

/* A depth-first walk's place among one node's children: the next to look at, one past the
 * last, and the end of the node's tokens (its last child's end). */
typedef struct token_trie_level {
    uint32_t next, last, end;
} token_trie_level;

/* The children of node i, whose tokens end at end, as the walk's next level. */
static inline token_trie_level token_trie_children(const token_trie *t, uint32_t i, uint32_t end)
{
    return (token_trie_level){t->nodes[i].children, t->nodes[i + 1].children, end};
}

/* The walk's next node, at level *d or above (the levels looked through left): *i, and
 * *tokens_end the end of its tokens. False when the walk is over. */
static inline bool token_trie_next(const token_trie *t, token_trie_level *level, size_t *d,
                                   uint32_t *i, uint32_t *tokens_end)
{
    while (*d > 0 && level[*d].next == level[*d].last)
        --*d;
    if (*d == 0)
        return false;
    token_trie_level *lv = &level[*d];
    *i = lv->next++;
    *tokens_end = lv->next < lv->last ? t->nodes[*i + 1].tokens : lv->end;
    return true;
}

/* The end of the tokens whose text ends at node i, of those up to end. */
static inline uint32_t token_trie_own_end(const token_trie *t, uint32_t i, uint32_t end)
{
    const token_trie_node *node = &t->nodes[i];
    return node->children < node[1].children ? t->nodes[node->children].tokens : end;
}

/* The loop walk for classes below node (0: the root; end: the end of its tokens, n_ids for
 * the root), made on the first call and kept with the trie until it is freed (thread-safe);
 * NULL when the trie holds as many as it may (below a node: half as many) or memory runs out
 * (then the set walks the whole way itself; a walk that did not fit is not tried again). */
const token_trie_loop *token_trie_loop_of(const token_trie *t, uint32_t node, uint32_t end,
                                          uint64_t classes);

/* For the vocabulary's release. */
void token_trie_free(token_trie *trie);

#endif

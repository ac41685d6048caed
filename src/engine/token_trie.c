/*
 * The token prefix tree (token_trie.h): every token's text sorted, then the nodes written in
 * one recursive pass over the sorted list, each range of texts sharing a byte at a depth
 * becoming one node.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "token_trie.h"
#include "vocab.h"

typedef struct piece {
    corral_token id;
    uint16_t len;
    size_t offset;       /* into the shared pool, while it may still move */
    const uint8_t *text; /* into the pool, once it is complete */
} piece;

static int compare_pieces(const void *pa, const void *pb)
{
    const piece *a = pa, *b = pb;
    size_t n = a->len < b->len ? a->len : b->len;
    int c = memcmp(a->text, b->text, n);
    if (c != 0)
        return c;
    if (a->len != b->len)
        return a->len < b->len ? -1 : 1;
    return (a->id > b->id) - (a->id < b->id);
}

typedef struct builder {
    token_trie *trie;
    const piece *pieces;
} builder;

/* The node for pieces[lo, hi), which all share their first depth bytes, and its subtree. */
static void build_node(builder *b, size_t lo, size_t hi, size_t depth, uint8_t byte)
{
    token_trie *t = b->trie;
    uint32_t self = t->n_nodes++;
    t->nodes[self] = (token_trie_node){
        .tokens = t->n_ids,
        .info = (uint64_t)byte << 48 | (uint64_t)(depth ? depth - 1 : 0) << 56};
    while (lo < hi && b->pieces[lo].len == depth) /* shorter texts sort first */
        t->ids[t->n_ids++] = b->pieces[lo++].id;
    while (lo < hi) {
        uint8_t next = b->pieces[lo].text[depth];
        size_t run = lo + 1;
        while (run < hi && b->pieces[run].text[depth] == next)
            run++;
        build_node(b, lo, run, depth + 1, next);
        lo = run;
    }
    t->nodes[self].end = t->n_nodes;
}

unsigned token_trie_class(uint32_t cp)
{
    if (cp >= 0x80)
        return TOKEN_CLASS_NON_ASCII;
    if (cp < 0x20 || cp == 0x7F)
        return TOKEN_CLASS_CONTROL;
    if (cp >= '0' && cp <= '9')
        return TOKEN_CLASS_DIGIT;
    if (cp >= 'a' && cp <= 'z')
        return TOKEN_CLASS_LOWER;
    if (cp >= 'A' && cp <= 'Z')
        return TOKEN_CLASS_UPPER;
    /* space and punctuation: U+0020-U+002F, U+003A-U+0040, U+005B-U+0060, U+007B-U+007E */
    unsigned k = cp <= 0x2F ? cp - 0x20 : cp <= 0x40 ? 16 + cp - 0x3A
               : cp <= 0x60 ? 23 + cp - 0x5B : 29 + cp - 0x7B;
    return TOKEN_CLASS_PUNCT + k;
}

void token_trie_class_range(unsigned k, uint32_t *low, uint32_t *high, uint32_t *low2,
                            uint32_t *high2)
{
    *low2 = 1;
    *high2 = 0;
    switch (k) {
    case TOKEN_CLASS_CONTROL: *low = 0; *high = 0x1F; *low2 = *high2 = 0x7F; return;
    case TOKEN_CLASS_NON_ASCII: *low = 0x80; *high = 0x1FFFFF; return;
    case TOKEN_CLASS_DIGIT: *low = '0'; *high = '9'; return;
    case TOKEN_CLASS_LOWER: *low = 'a'; *high = 'z'; return;
    case TOKEN_CLASS_UPPER: *low = 'A'; *high = 'Z'; return;
    default: break;
    }
    unsigned i = k - TOKEN_CLASS_PUNCT;
    uint32_t cp = i < 16 ? 0x20 + i : i < 23 ? 0x3A + i - 16 : i < 29 ? 0x5B + i - 23
                : 0x7B + i - 29;
    *low = *high = cp;
}

/* Each node's summary of the texts below it (token_trie_below): the nodes decoded from the
 * root forward, each one's bits then or'ed into its parent's from the last node back. */
static bool summarise(token_trie *t)
{
    uint32_t *parent = malloc(t->n_nodes * sizeof *parent);
    uint64_t *own = malloc(t->n_nodes * sizeof *own), *sub = calloc(t->n_nodes, sizeof *sub);
    if (!parent || !sub || !own) {
        free(sub);
        free(parent);
        free(own);
        return false;
    }
    uint32_t path[TOKEN_TRIE_MAX_BYTES + 1], value[TOKEN_TRIE_MAX_BYTES + 1];
    int remain[TOKEN_TRIE_MAX_BYTES + 1];
    path[0] = 0;
    value[0] = 0;
    remain[0] = 0;
    own[0] = 0;
    for (uint32_t i = 1; i < t->n_nodes; i++) {
        const token_trie_node *node = &t->nodes[i];
        size_t d = token_trie_depth(node);
        uint32_t v = value[d - 1];
        int r = remain[d - 1];
        uint8_t b = token_trie_byte(node);
        uint64_t bits = 0;
        if (r < 0) {
            /* already invalid */
        } else if (r > 0) {
            if ((b >> 6) != 2) {
                r = -1;
            } else {
                v = (v << 6) | (b & 0x3F);
                r--;
                if (r == 0)
                    bits = 1ull << token_trie_class(v);
            }
        } else if (b < 0x80) {
            v = b;
            bits = 1ull << token_trie_class(v);
        } else {
            r = (b >> 5) == 6 ? 1 : (b >> 4) == 14 ? 2 : (b >> 3) == 30 ? 3 : -1;
            if (r >= 0)
                v = b & (0x3Fu >> r);
        }
        if (r < 0)
            bits = 1ull << TOKEN_SUB_INVALID;
        else if (r > 0)
            bits = 1ull << TOKEN_CLASS_NON_ASCII |
                   (token_trie_n_tokens(t->nodes, i) && r == 1 && v < 2
                        ? 1ull << TOKEN_SUB_PARTIAL_BAD : 0);
        path[d] = i;
        value[d] = v;
        remain[d] = r;
        parent[i] = path[d - 1];
        own[i] = bits;
    }
    for (uint32_t i = t->n_nodes; i-- > 1;)
        sub[parent[i]] |= sub[i] | own[i];
    for (uint32_t i = 0; i < t->n_nodes; i++)
        t->nodes[i].info |= sub[i];
    free(parent);
    free(own);
    free(sub);
    return true;
}

static token_trie *build(const corral_vocab *vocab)
{
    uint32_t n = vocab->n_tokens;
    piece *pieces = malloc((n ? n : 1) * sizeof *pieces);
    size_t pool_cap = 1 << 16, pool_used = 0, n_pieces = 0, total_bytes = 0;
    uint8_t *pool = malloc(pool_cap);
    token_trie *t = calloc(1, sizeof *t);
    bool ok = pieces && pool && t;
    for (uint32_t id = 0; id < n && ok; id++) {
        char text[TOKEN_TRIE_MAX_BYTES];
        size_t len = corral_token_to_piece(vocab, (corral_token)id, text, sizeof text, false);
        if (len == 0 || len > sizeof text || corral_vocab_is_eog(vocab, (corral_token)id))
            continue;
        if (pool_cap - pool_used < len) {
            pool_cap *= 2;
            uint8_t *grown = realloc(pool, pool_cap);
            if (!(ok = grown != NULL))
                break;
            pool = grown;
        }
        memcpy(pool + pool_used, text, len);
        pieces[n_pieces++] = (piece){(corral_token)id, (uint16_t)len, pool_used, NULL};
        pool_used += len;
        total_bytes += len;
    }
    if (ok) {
        for (size_t i = 0; i < n_pieces; i++)
            pieces[i].text = pool + pieces[i].offset;
        qsort(pieces, n_pieces, sizeof *pieces, compare_pieces);
        /* at most a node per byte of text, the root and the one closing the token lists */
        t->nodes = malloc((total_bytes + 2) * sizeof *t->nodes);
        t->ids = malloc((n_pieces ? n_pieces : 1) * sizeof *t->ids);
        ok = t->nodes && t->ids;
    }
    if (ok) {
        builder b = {t, pieces};
        build_node(&b, 0, n_pieces, 0, 0);
        t->nodes[t->n_nodes] = (token_trie_node){.end = t->n_nodes + 1, .tokens = t->n_ids};
        for (uint32_t i = 1; i < t->n_nodes; i = t->nodes[i].end)
            t->root_child[token_trie_byte(&t->nodes[i])] = i;
        token_trie_node *fit = realloc(t->nodes, (t->n_nodes + 1) * sizeof *fit);
        if (fit)
            t->nodes = fit;
        ok = summarise(t);
    }
    free(pieces);
    free(pool);
    if (!ok) {
        token_trie_free(t);
        return NULL;
    }
    return t;
}

const token_trie *token_trie_of(const corral_vocab *vocab)
{
    /* the vocabulary is shared read-only; this one field is written once, atomically */
    _Atomic(token_trie *) *slot = &((corral_vocab *)vocab)->trie;
    token_trie *t = atomic_load_explicit(slot, memory_order_acquire);
    if (t)
        return t;
    token_trie *built = build(vocab);
    if (!built)
        return NULL;
    token_trie *expected = NULL;
    if (atomic_compare_exchange_strong_explicit(slot, &expected, built, memory_order_acq_rel,
                                                memory_order_acquire))
        return built;
    token_trie_free(built); /* another thread's came first */
    return expected;
}

void token_trie_free(token_trie *trie)
{
    if (!trie)
        return;
    free(trie->nodes);
    free(trie->ids);
    free(trie);
}

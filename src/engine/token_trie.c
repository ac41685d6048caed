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
    t->nodes[self] = (token_trie_node){.tokens = t->n_ids, .byte = byte,
                                        .depth_minus1 = (uint8_t)(depth ? depth - 1 : 0)};
    while (lo < hi && b->pieces[lo].len == depth) /* shorter texts sort first */
        t->ids[t->n_ids++] = b->pieces[lo++].id;
    t->nodes[self].n_tokens = t->n_ids - t->nodes[self].tokens;
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
        /* at most a node per byte of text, and the root */
        t->nodes = malloc((total_bytes + 1) * sizeof *t->nodes);
        t->ids = malloc((n_pieces ? n_pieces : 1) * sizeof *t->ids);
        ok = t->nodes && t->ids;
    }
    if (ok) {
        builder b = {t, pieces};
        build_node(&b, 0, n_pieces, 0, 0);
        token_trie_node *fit = realloc(t->nodes, t->n_nodes * sizeof *fit);
        if (fit)
            t->nodes = fit;
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

/*
 * The token prefix tree (token_trie.h): every token's text sorted (the tokens' positions),
 * then the nodes written breadth first over the sorted list, each range of texts sharing a
 * byte at a depth becoming one node.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "token_trie.h"
#include "vocab.h"

typedef struct piece {
    uint64_t key; /* the text's first 8 bytes, big-endian, zero-padded: sorts as the text */
    corral_token id;
    uint16_t len;
    size_t offset;       /* into the shared pool, while it may still move */
    const uint8_t *text; /* into the pool, once it is complete */
} piece;

/* The tokens' order: by text (a prefix first), then by id. */
static int compare_pieces(const void *pa, const void *pb)
{
    const piece *a = pa, *b = pb;
    if (a->key != b->key)
        return a->key < b->key ? -1 : 1;
    /* equal keys: the first min(len, 8) bytes are equal */
    size_t n = a->len < b->len ? a->len : b->len;
    int c = n > 8 ? memcmp(a->text + 8, b->text + 8, n - 8) : 0;
    if (c != 0)
        return c;
    if (a->len != b->len)
        return a->len < b->len ? -1 : 1;
    return (a->id > b->id) - (a->id < b->id);
}

/*
 * Sorts the pieces (compare_pieces' order). A comparison sort of a 128k vocabulary's texts
 * spent most of the trie's build in memcmp; the keys are sorted by radix instead (a byte a
 * pass, least significant first, stable), and only the runs that share a key, few and
 * short, by comparison. false when out of memory.
 */
static bool sort_pieces(piece *pieces, size_t n)
{
    piece *spare = malloc((n ? n : 1) * sizeof *spare);
    if (!spare)
        return false;
    piece *from = pieces, *to = spare;
    for (unsigned shift = 0; shift < 64; shift += 8) {
        size_t count[257] = {0};
        for (size_t i = 0; i < n; i++)
            count[((from[i].key >> shift) & 0xFF) + 1]++;
        if (n == 0 || count[((from[0].key >> shift) & 0xFF) + 1] == n)
            continue; /* every key has this byte: the pass would not move anything */
        for (unsigned b = 0; b < 256; b++)
            count[b + 1] += count[b];
        for (size_t i = 0; i < n; i++)
            to[count[(from[i].key >> shift) & 0xFF]++] = from[i];
        piece *swap = from;
        from = to;
        to = swap;
    }
    if (from != pieces)
        memcpy(pieces, from, n * sizeof *pieces);
    free(spare);
    for (size_t i = 0; i < n;) {
        size_t run = i + 1;
        while (run < n && pieces[run].key == pieces[i].key)
            run++;
        if (run - i > 1)
            qsort(pieces + i, run - i, sizeof *pieces, compare_pieces);
        i = run;
    }
    return true;
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

uint64_t token_trie_ascii_classes(const uint64_t ascii[2])
{
    uint64_t classes = 0;
    if ((ascii[0] & 0xFFFFFFFFu) || ascii[1] >> 63)
        classes |= 1ull << TOKEN_CLASS_CONTROL;
    if (ascii[0] & 0x3FFull << '0')
        classes |= 1ull << TOKEN_CLASS_DIGIT;
    if (ascii[1] & 0x3FFFFFFull << ('a' - 64))
        classes |= 1ull << TOKEN_CLASS_LOWER;
    if (ascii[1] & 0x3FFFFFFull << ('A' - 64))
        classes |= 1ull << TOKEN_CLASS_UPPER;
    /* space and punctuation: every code point from U+0020 but those above and U+007F */
    uint64_t punct[2] = {ascii[0] & 0xFC00FFFF00000000u, ascii[1] & 0x78000001F8000001u};
    for (unsigned half = 0; half < 2; half++)
        for (uint64_t b = punct[half]; b; b &= b - 1)
            classes |= 1ull << token_trie_class(64 * half + (unsigned)__builtin_ctzll(b));
    return classes;
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

/*
 * The nodes of the sorted texts, breadth first: each node, taken in turn, is the range of
 * texts [nodes[i].tokens, hi[i]) sharing their first depth[i] bytes, and its children (the
 * runs of those texts longer than that, by their next byte) are appended. Then each node's
 * summary (token_trie_below): its own bits (the character its byte completes, with the
 * decoding state carried from its parent) or'ed into its parent's, and its height, from the
 * last node back.
 */
static bool build_nodes(token_trie *t, const piece *pieces, uint32_t n_pieces, size_t cap)
{
    uint32_t *hi = malloc(cap * sizeof *hi), *value = malloc(cap * sizeof *value);
    uint16_t *depth = malloc(cap * sizeof *depth);
    int8_t *remain = malloc(cap * sizeof *remain);
    uint64_t *own = malloc(cap * sizeof *own);
    bool ok = hi && value && depth && remain && own;
    uint32_t n = 1;
    if (ok) {
        t->nodes[0] = (token_trie_node){.tokens = 0};
        hi[0] = n_pieces;
        depth[0] = 0;
        value[0] = 0;
        remain[0] = 0;
        own[0] = 0;
    }
    for (uint32_t i = 0; i < n && ok; i++) {
        uint32_t lo = t->nodes[i].tokens, d = depth[i];
        t->nodes[i].children = n;
        while (lo < hi[i] && pieces[lo].len == d) /* shorter texts sort first */
            lo++;
        bool ends_here = lo > t->nodes[i].tokens;
        if (i > 0) {
            uint64_t bits = 1ull << TOKEN_SUB_INVALID;
            if (remain[i] == 0)
                bits = 1ull << token_trie_class(value[i]);
            else if (remain[i] > 0)
                bits = 1ull << TOKEN_CLASS_NON_ASCII |
                       (ends_here && remain[i] == 1 && value[i] < 2 ? 1ull << TOKEN_SUB_PARTIAL_BAD
                                                                    : 0);
            own[i] = bits;
        }
        while (lo < hi[i]) {
            uint8_t next = pieces[lo].text[d];
            uint32_t run = lo + 1;
            while (run < hi[i] && pieces[run].text[d] == next)
                run++;
            /* at most a node per byte of text: cap holds them */
            uint32_t v = value[i];
            int r = remain[i];
            token_trie_decode(&v, &r, next);
            t->nodes[n] = (token_trie_node){.tokens = lo, .info = (uint64_t)next << 48};
            hi[n] = run;
            depth[n] = (uint16_t)(d + 1);
            value[n] = v;
            remain[n] = (int8_t)r;
            n++;
            lo = run;
        }
    }
    if (ok) {
        t->n_nodes = n;
        t->nodes[n] = (token_trie_node){.children = n, .tokens = n_pieces};
        const uint64_t below = (1ull << TOKEN_SUB_BITS) - 1;
        for (uint32_t i = n; i-- > 0;) {
            uint64_t height = 0;
            for (uint32_t c = t->nodes[i].children; c < t->nodes[i + 1].children; c++) {
                uint64_t h = token_trie_height(&t->nodes[c]) + 1;
                height = h > height ? h : height;
                t->nodes[i].info |= (t->nodes[c].info & below) | own[c];
            }
            t->nodes[i].info |= (height < 255 ? height : 255) << 40;
        }
    }
    free(hi);
    free(value);
    free(depth);
    free(remain);
    free(own);
    return ok;
}

static token_trie *build(const corral_vocab *vocab)
{
    uint32_t n = vocab->n_tokens;
    piece *pieces = malloc((n ? n : 1) * sizeof *pieces);
    size_t pool_cap = 1 << 16, pool_used = 0, n_pieces = 0, total_bytes = 0;
    uint8_t *pool = malloc(pool_cap);
    token_trie *t = calloc(1, sizeof *t);
    bool ok = pieces && pool && t;
    if (t && pthread_mutex_init(&t->loops_lock, NULL) != 0) {
        free(t);
        t = NULL;
        ok = false;
    }
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
        pieces[n_pieces++] = (piece){0, (corral_token)id, (uint16_t)len, pool_used, NULL};
        pool_used += len;
        total_bytes += len;
    }
    /* node and token positions are 32-bit: at most a node per byte of text, the root and
     * the one closing the lists */
    if (ok && total_bytes > UINT32_MAX - 2)
        ok = false;
    if (ok) {
        for (size_t i = 0; i < n_pieces; i++) {
            pieces[i].text = pool + pieces[i].offset;
            uint64_t key = 0;
            for (size_t k = 0; k < 8; k++)
                key = key << 8 | (k < pieces[i].len ? pieces[i].text[k] : 0);
            pieces[i].key = key;
        }
        ok = sort_pieces(pieces, n_pieces);
    }
    if (ok) {
        t->nodes = malloc((total_bytes + 2) * sizeof *t->nodes);
        t->ids = malloc((n_pieces ? n_pieces : 1) * sizeof *t->ids);
        ok = t->nodes && t->ids;
    }
    if (ok) {
        for (size_t i = 0; i < n_pieces; i++)
            t->ids[i] = pieces[i].id;
        t->n_ids = (uint32_t)n_pieces;
        ok = build_nodes(t, pieces, t->n_ids, total_bytes + 2);
    }
    if (ok) {
        for (uint32_t i = t->nodes[0].children; i < t->nodes[1].children; i++)
            t->root_child[token_trie_byte(&t->nodes[i])] = i;
        token_trie_node *fit = realloc(t->nodes, (t->n_nodes + 1) * sizeof *fit);
        if (fit)
            t->nodes = fit;
    }
    for (uint32_t cp = 0; ok && cp < 128; cp++)
        t->class_ascii[token_trie_class(cp)][cp >> 6] |= 1ull << (cp & 63);
    if (ok) {
        t->n_vocab = n;
        t->present = calloc(n / 64 + 1, sizeof *t->present);
        ok = t->present != NULL;
        for (uint32_t k = 0; k < t->n_ids && ok; k++)
            t->present[(uint32_t)t->ids[k] >> 6] |= 1ull << ((uint32_t)t->ids[k] & 63);
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

/* ---- loop walks ---- */

static void loop_free(token_trie_loop *l)
{
    if (!l)
        return;
    free(l->bits);
    free(l->id_bits);
    free(l->exits);
    free(l);
}

static size_t loop_bytes(const token_trie *t, const token_trie_loop *l)
{
    return sizeof *l + (l->bits ? ((size_t)t->n_ids / 64 + 1) * sizeof *l->bits : 0) +
           (l->id_bits ? ((size_t)t->n_vocab / 64 + 1) * sizeof *l->id_bits : 0) +
           (size_t)l->n_exits * sizeof *l->exits;
}

static bool loop_exit(token_trie_loop *l, uint32_t *cap, token_trie_exit e)
{
    if (l->n_exits == *cap) {
        uint32_t grown_cap = *cap ? 2 * *cap : 1024;
        if ((size_t)grown_cap * sizeof e > TOKEN_TRIE_MAX_LOOP_BYTES)
            return false;
        token_trie_exit *grown = realloc(l->exits, grown_cap * sizeof *grown);
        if (!grown)
            return false;
        l->exits = grown;
        *cap = grown_cap;
    }
    l->exits[l->n_exits++] = e;
    return true;
}

/* The exits by node, by radix (a byte of the node a pass, stable): a comparison sort of a
 * string's 1,500 exits at 128k took as long as the walk that found them. False when out of
 * memory. */
static bool sort_exits(token_trie_loop *l)
{
    token_trie_exit *spare = malloc((l->n_exits ? l->n_exits : 1) * sizeof *spare);
    if (!spare)
        return false;
    token_trie_exit *from = l->exits, *to = spare;
    for (unsigned shift = 0; shift < 32; shift += 8) {
        uint32_t count[257] = {0};
        for (uint32_t i = 0; i < l->n_exits; i++)
            count[((from[i].node >> shift) & 0xFF) + 1]++;
        for (unsigned b = 0; b < 256; b++)
            count[b + 1] += count[b];
        for (uint32_t i = 0; i < l->n_exits; i++)
            to[count[(from[i].node >> shift) & 0xFF]++] = from[i];
        token_trie_exit *swap = from;
        from = to;
        to = swap;
    }
    /* four passes: the sorted exits are back in l->exits */
    free(spare);
    return true;
}

/* The walk of token_trie_loop (token_trie.h): depth first below node (end: its tokens'),
 * each node's byte decoded; a character of the classes (or within one, where they hold every
 * code point from U+0080) keeps the walk on and takes the tokens ending there; a subtree
 * whose every character is of the classes is taken whole; any other character is an exit. */
static token_trie_loop *loop_walk(const token_trie *t, uint32_t from, uint32_t end,
                                  uint64_t classes)
{
    token_trie_loop *l = calloc(1, sizeof *l);
    if (!l || !(l->bits = calloc((size_t)t->n_ids / 64 + 1, sizeof *l->bits))) {
        loop_free(l);
        return NULL;
    }
    l->classes = classes;
    l->node = from;
    bool non_ascii = classes >> TOKEN_CLASS_NON_ASCII & 1;
    uint32_t value_at[TOKEN_TRIE_MAX_BYTES + 1], cap = 0;
    int remain_at[TOKEN_TRIE_MAX_BYTES + 1];
    bool first_at[TOKEN_TRIE_MAX_BYTES + 1]; /* no character completed yet */
    token_trie_level level[TOKEN_TRIE_MAX_BYTES + 1];
    value_at[0] = 0;
    remain_at[0] = 0;
    first_at[0] = true;
    level[1] = token_trie_children(t, from, end);
    uint32_t i, tokens_end;
    for (size_t d = 1; token_trie_next(t, level, &d, &i, &tokens_end);) {
        const token_trie_node *node = &t->nodes[i];
        uint32_t value = value_at[d - 1];
        int remain = remain_at[d - 1];
        token_trie_decode(&value, &remain, token_trie_byte(node));
        if (remain < 0)
            continue; /* no UTF-8: no set takes it */
        bool leaves = remain == 0 ? value < 0x80 && !(classes >> token_trie_class(value) & 1)
                                  : !non_ascii || (remain == 1 && value < 2);
        if (leaves) {
            token_trie_exit e = {i, tokens_end, node->tokens, token_trie_own_end(t, i, tokens_end),
                                 token_trie_below(node), value_at[d - 1],
                                 (int8_t)remain_at[d - 1], token_trie_byte(node),
                                 first_at[d - 1]};
            if (!loop_exit(l, &cap, e)) {
                loop_free(l);
                return NULL;
            }
            continue;
        }
        uint64_t below = token_trie_below(node);
        if (node->children == node[1].children ||
            (below >> TOKEN_CLASSES == 0 && (below & ~classes) == 0)) {
            l->n_taken += token_trie_mark(l->bits, node->tokens, tokens_end);
            continue;
        }
        l->n_taken += token_trie_mark(l->bits, node->tokens, token_trie_own_end(t, i, tokens_end));
        level[d + 1] = token_trie_children(t, i, tokens_end);
        value_at[d] = remain ? value : 0;
        remain_at[d] = remain;
        first_at[d] = first_at[d - 1] && remain > 0;
        d++;
    }
    /* by node: the walks from the exits then read the nodes in the order they are laid out */
    if (!sort_exits(l)) {
        loop_free(l);
        return NULL;
    }
    if (from != 0)
        return l; /* a node's walk is taken by position */
    size_t id_words = (size_t)t->n_vocab / 64 + 1;
    if (!(l->id_bits = malloc(id_words * sizeof *l->id_bits))) {
        loop_free(l);
        return NULL;
    }
    /* a string's loop takes most tokens: every token the trie holds, less those at the
     * positions it does not take (each token is at one position) */
    memcpy(l->id_bits, t->present, id_words * sizeof *l->id_bits);
    for (uint32_t w = 0; w <= t->n_ids / 64; w++) {
        uint64_t untaken = ~l->bits[w];
        if (w == t->n_ids / 64)
            untaken &= t->n_ids % 64 ? (1ull << (t->n_ids % 64)) - 1 : 0;
        for (; untaken; untaken &= untaken - 1) {
            uint32_t id = (uint32_t)t->ids[64 * w + (uint32_t)__builtin_ctzll(untaken)];
            l->id_bits[id >> 6] &= ~(1ull << (id & 63));
        }
    }
    return l;
}

const token_trie_loop *token_trie_loop_of(const token_trie *t, uint32_t node, uint32_t end,
                                          uint64_t classes)
{
    token_trie *kept = (token_trie *)t; /* only the loop walks change, under their lock */
    const token_trie_loop *found = NULL;
    pthread_mutex_lock(&kept->loops_lock);
    uint32_t k = 0;
    while (k < kept->n_loops &&
           (kept->loops[k]->classes != classes || kept->loops[k]->node != node))
        k++;
    if (k < kept->n_loops) {
        found = kept->loops[k]->bits ? kept->loops[k] : NULL;
    } else if (kept->n_loops < (node ? TOKEN_TRIE_MAX_LOOPS / 2 : TOKEN_TRIE_MAX_LOOPS)) {
        token_trie_loop *l = loop_walk(t, node, end, classes);
        if (l && kept->loops_bytes + loop_bytes(t, l) > TOKEN_TRIE_MAX_LOOP_BYTES) {
            loop_free(l);
            l = NULL;
        }
        if (!l && (l = calloc(1, sizeof *l))) { /* kept without its walk: not tried again */
            l->classes = classes;
            l->node = node;
        }
        if (l) {
            kept->loops_bytes += loop_bytes(t, l);
            kept->loops[kept->n_loops++] = l;
            found = l->bits ? l : NULL;
        }
    }
    pthread_mutex_unlock(&kept->loops_lock);
    return found;
}

void token_trie_free(token_trie *trie)
{
    if (!trie)
        return;
    for (uint32_t k = 0; k < trie->n_loops; k++)
        loop_free(trie->loops[k]);
    pthread_mutex_destroy(&trie->loops_lock);
    free(trie->nodes);
    free(trie->ids);
    free(trie->present);
    free(trie);
}

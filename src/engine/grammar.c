/*
 * Grammar-constrained decoding, as llama.cpp does it: GBNF text parsed into rules of
 * elements (literals and character classes become code-point elements, groups and
 * repetitions become rules of their own), and a pushdown matcher whose state is the set of
 * parse stacks the text so far may be in, each stack's top a character element still to
 * match. A token is allowed when each of its code points advances some stack in turn
 * (grammar_allows checks one token so). A UTF-8 character split across tokens is carried as
 * a partial code point.
 *
 * The mask of a whole step walks the vocabulary's token trie with the stacks: a prefix the
 * tokens share is matched once, and a subtree is skipped as soon as no stack takes its
 * prefix. For the walk, stacks are interned (equal stacks are one node), each node keeps the
 * stacks it goes to once its top character matches, and the set of tokens one stack allows
 * is kept once walked (as bits, or as ids where they are few): a stack that comes back
 * (inside a string, every character brings the same stacks back) costs a union of bit sets,
 * and a step whose stacks are the last step's keeps the last step's mask.
 * The walk itself goes by sets of stacks, interned in turn with their successors by code
 * point, and takes a whole subtree of the trie at once where the trie's summary of the
 * subtree's characters says each of them brings the set back to itself (a string's first
 * walk: the tokens with a quote, a backslash or a control character are looked at, the rest
 * taken by subtree) or keeps it alive as deep as the subtree goes (a bounded run of digits).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar.h"
#include "token_trie.h"

/* ---- elements and rules ---- */

typedef enum elem_type {
    ELEM_END,            /* end of a rule */
    ELEM_ALT,            /* another alternative follows */
    ELEM_RULE_REF,       /* value: a rule id */
    ELEM_CHAR,           /* value: a code point; starts a character class */
    ELEM_CHAR_NOT,       /* starts a negated class */
    ELEM_CHAR_RNG_UPPER, /* value: the upper end of a range from the previous code point */
    ELEM_CHAR_ALT,       /* value: one more code point of the class */
    ELEM_CHAR_ANY,       /* any code point (`.`) */
} elem_type;

typedef struct elem {
    elem_type type;
    uint32_t value;
} elem;

typedef struct elems {
    elem *v;
    size_t n, cap;
} elems;

/* Limits on hostile grammars: nesting while parsing, repetition counts, stack expansion. */
enum {
    MAX_NESTING = 128,
    MAX_REPEAT = 4096,
    MAX_RULES = 65536,
    MAX_EXPAND_DEPTH = 4096, /* each optional element skipped is a level */
    MAX_STACK = 1024,
    MAX_STACKS = 4096, /* a power of two: stack_set grows to it by doubling */
    STACK_SET_SCAN = 16,  /* a stack set up to this many stacks is searched without its index */
    SEARCH_BUDGET_PER_STEP = 8, /* grammar_allows' search: steps per stack and code point */
    MAX_EXPANSIONS = 1 << 16, /* per stack set: rules of many equal alternatives multiply */
};

static bool elems_push(elems *e, elem_type type, uint32_t value)
{
    if (e->n == e->cap) {
        size_t cap = e->cap ? 2 * e->cap : 16;
        elem *grown = realloc(e->v, cap * sizeof *grown);
        if (!grown)
            return false;
        e->v = grown;
        e->cap = cap;
    }
    e->v[e->n++] = (elem){type, value};
    return true;
}

static bool is_end_of_sequence(const elem *e)
{
    return e->type == ELEM_END || e->type == ELEM_ALT;
}

static bool is_char_element(const elem *e)
{
    return e->type == ELEM_CHAR || e->type == ELEM_CHAR_NOT || e->type == ELEM_CHAR_ANY;
}

/* ---- stacks: the matcher's state ---- */

typedef struct stack {
    const elem **e; /* e[n - 1] is the top: the next element to match */
    size_t n;
} stack;

typedef struct stack_set {
    stack *v;
    size_t n, cap;
    /* v's indices + 1 by the stacks' hash (open addressing, 0 empty; 2 * cap slots), once
     * cap is past STACK_SET_SCAN: a set of many stacks each expanding to many (a loop over
     * many alternatives) would otherwise compare every stack added with every one it holds */
    uint32_t *index;
    size_t expansions; /* expand calls made to fill it */
    bool failed;       /* out of memory, or a limit reached */
} stack_set;

static void stack_set_clear(stack_set *set)
{
    for (size_t i = 0; i < set->n; i++)
        free(set->v[i].e);
    if (set->index)
        memset(set->index, 0, 2 * set->cap * sizeof *set->index);
    set->n = 0;
    set->expansions = 0;
    set->failed = false;
}

static void stack_set_free(stack_set *set)
{
    stack_set_clear(set);
    free(set->v);
    free(set->index);
    *set = (stack_set){0};
}

static bool stack_equal(const stack *a, const elem *const *e, size_t n)
{
    return a->n == n && (n == 0 || memcmp(a->e, e, n * sizeof *e) == 0);
}

static size_t stack_hash(const elem *const *e, size_t n)
{
    uint64_t h = 0x9e3779b97f4a7c15u ^ n;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (uint64_t)(uintptr_t)e[i]) * 0xff51afd7ed558ccdu;
    return (size_t)(h ^ h >> 32);
}

/* The slot of e[0..n) in set's index: the one holding it, or the empty one where it goes. */
static uint32_t *stack_set_slot(const stack_set *set, const elem *const *e, size_t n)
{
    size_t mask = 2 * set->cap - 1, at = stack_hash(e, n) & mask;
    while (set->index[at] != 0 && !stack_equal(&set->v[set->index[at] - 1], e, n))
        at = (at + 1) & mask;
    return &set->index[at];
}

/* Add a copy of e[0..n) unless the set has it. */
static void stack_set_add(stack_set *set, const elem *const *e, size_t n)
{
    uint32_t *slot = NULL;
    if (set->index) {
        slot = stack_set_slot(set, e, n);
        if (*slot != 0)
            return;
    } else {
        for (size_t i = 0; i < set->n; i++)
            if (stack_equal(&set->v[i], e, n))
                return;
    }
    if (set->n == set->cap) {
        if (set->n == MAX_STACKS) {
            set->failed = true;
            return;
        }
        size_t cap = set->cap ? 2 * set->cap : 8; /* powers of two, MAX_STACKS among them */
        stack *grown = realloc(set->v, cap * sizeof *grown);
        if (!grown) {
            set->failed = true;
            return;
        }
        set->v = grown;
        /* a few stacks are found faster by a scan than the index is made */
        if (cap > STACK_SET_SCAN) {
            uint32_t *index = calloc(2 * cap, sizeof *index);
            if (!index) {
                set->failed = true;
                return;
            }
            free(set->index);
            set->index = index;
        }
        set->cap = cap;
        for (size_t i = 0; set->index && i < set->n; i++)
            *stack_set_slot(set, set->v[i].e, set->v[i].n) = (uint32_t)i + 1;
        slot = set->index ? stack_set_slot(set, e, n) : NULL;
    }
    const elem **copy = malloc((n ? n : 1) * sizeof *copy);
    if (!copy) {
        set->failed = true;
        return;
    }
    if (n)
        memcpy(copy, e, n * sizeof *copy);
    set->v[set->n++] = (stack){copy, n};
    if (slot)
        *slot = (uint32_t)set->n;
}

/*
 * For the mask: stacks interned as nodes (an element over a parent stack), so equal stacks
 * are one index, their expansions after a matched character are worked out once, and the
 * set of tokens a stack allows is kept once walked.
 */
typedef struct snode {
    const elem *e;      /* the top element; NULL for the empty stack (node 0) */
    uint32_t parent;    /* the stack below */
    uint32_t depth;     /* elements in the stack */
    uint32_t chain;     /* next node in its hash bucket */
    uint32_t set_mark;  /* the walk's set it was last added to */
    uint32_t next_mark; /* the expansion it was last added to */
    uint32_t next;      /* first of the stacks after the top matches, in next_pool */
    uint32_t n_next;    /* their count; NOT_YET until worked out */
    uint32_t mask;      /* index of its cached mask in masks; NO_MASK: none */
} snode;

/* The tokens one stack allows: a bit per token of the vocabulary, or where they are few (a
 * key's literal, a number's next digits) their ids. */
typedef struct kept_mask {
    uint64_t *bits; /* by token id; NULL where ids holds the mask */
    uint32_t *ids;
    uint32_t n_ids;
} kept_mask;

typedef struct interned {
    snode *v;
    uint32_t n, cap;
    uint32_t *buckets; /* by hash of (e, parent); NO_NODE ends a chain */
    uint32_t n_buckets;
    uint32_t *next_pool;
    size_t n_pool, pool_cap;
    kept_mask *masks; /* cached masks */
    size_t n_masks, masks_cap, masks_bytes;
    uint32_t set_stamp, next_stamp;
    bool failed; /* out of memory or a limit reached: the mask fails */
} interned;

/*
 * For the mask's walks from no partial character: sets of interned stacks interned in turn
 * (a set is its stacks' sorted ids), each with its successors by code point worked out once
 * (ASCII in a table, the rest in a hash table), and the classes of code points
 * (token_trie.h) that bring the set back to itself. A walk then takes one look-up per trie
 * node, and a whole subtree at once where every character below it brings the set back
 * (inside a string: nearly every subtree).
 */
typedef struct sset {
    uint32_t first;   /* its stacks, in set_cache.pool */
    uint32_t n;
    uint32_t chain;   /* next set in its hash bucket */
    uint32_t hash;
    uint32_t wide;    /* the successor by every code point from U+0080, when the same */
    uint64_t known;   /* the classes of code points (token_trie.h) looked at */
    uint64_t loops;   /* those of them that bring it back to itself */
    uint64_t takes;   /* the classes some stack takes a code point of: a subtree whose
                       * characters are of none of them holds no token it allows */
    uint64_t uniform;   /* the classes each stack takes all of or none of, where
                         * set_fill_classes has worked them out (bit UNIFORM_KNOWN) */
    uint64_t starts[4]; /* the bytes a character it takes may start with (bit b & 63 of
                         * starts[b >> 6]): the ASCII ones it takes, the lead bytes of longer
                         * characters where it takes some, and those of the overlong forms
                         * of ASCII (C0, C1, E0, F0), which decode below U+0080 */
} sset;

typedef struct set_cache {
    sset *v;
    uint32_t n, cap;
    uint32_t *buckets; /* by hash; NO_NODE ends a chain */
    uint32_t n_buckets;
    uint32_t *pool;    /* the sets' stacks */
    size_t n_pool, pool_cap;
    uint32_t *ascii;   /* successors of set i by ASCII code point: ascii[128 * i + cp], room
                        * for every set the cache may hold taken at once (a growing table
                        * was copied whole at the step that outgrew it), its pages touched
                        * as sets are made */
    uint64_t *keys;    /* other successors: set << 32 | code point, open addressing */
    uint32_t *values;
    size_t n_keys, keys_cap;
    uint32_t *scratch; /* a successor set being gathered */
    size_t scratch_cap;
    uint32_t max_sets; /* 0: MAX_SETS (grammar_limit_sets) */
    bool failed;       /* a limit reached or out of memory: the walks go the slow way */
} set_cache;

struct corral_grammar {
    elems *rules; /* by rule id, each ending in ELEM_END */
    size_t n_rules;
    uint32_t root;
    stack_set stacks;    /* the current state */
    uint32_t partial;    /* bits of a code point split across tokens */
    int partial_remain;  /* its continuation bytes still to come (0: none) */
    const corral_vocab *vocab;
    size_t n_vocab;
    corral_token end_token;
    /* the mask */
    const token_trie *trie;
    corral_token *eog;   /* the vocabulary's end-of-generation tokens */
    size_t n_eog;
    size_t n_words;      /* 64-bit words in a mask */
    uint64_t *bits;      /* the step's mask */
    corral_token *listed; /* the step's allowed ids where few (grammar_allowed_ids) */
    size_t list_max;     /* the most listed: n_vocab / 8, or grammar_limit_list's */
    size_t list_cap;
    uint64_t *walk_bits; /* one stack's mask, not kept or not yet */
    uint32_t *walk_ids;  /* the same as ids, where at most max_ids */
    uint32_t max_ids;    /* the most a mask holds as ids: a quarter of the bits' memory */
    uint64_t *walk_order; /* a walk's tokens by trie position (token_trie.ids), all clear
                           * between walks */
    uint32_t order_first, order_end; /* the positions set lie in [order_first, order_end) */
    interned in;
    set_cache sets;
    uint32_t *walk_sets; /* the walk's stack sets, a level's after its parent's */
    size_t walk_cap;
    size_t trie_visits;  /* trie nodes looked at by every walk so far */
    /* the stacks (interned ids) whose mask g->bits holds, where from no partial
     * character: a string's body brings the same stacks back at every step, whose union of
     * kept masks is then not made again */
    uint32_t *bits_stacks;   /* in the stacks' order */
    size_t n_bits_stacks;
    bool bits_kept;      /* g->bits is the mask of bits_stacks */
    size_t masks_reused; /* steps that took g->bits as it was */
    /* the text it was made from (opening NULL for corral_grammar_create), so that a caller
     * keeping grammars for later requests can tell which one a request asks for */
    char *source;
    char *opening;
};

/*
 * Expand the stack e[0..n) until its top is a character element (or it is empty: the
 * grammar is complete) and add every result to out: a rule reference on top is replaced by
 * each of its alternatives, under what follows the reference.
 */
static void expand(const corral_grammar *g, const elem *const *e, size_t n, stack_set *out,
                   int depth)
{
    if (n == 0 || is_char_element(e[n - 1])) {
        stack_set_add(out, e, n);
        return;
    }
    if (depth > MAX_EXPAND_DEPTH || n >= MAX_STACK || ++out->expansions > MAX_EXPANSIONS) {
        out->failed = true; /* left recursion, or too deep or wide */
        return;
    }
    const elem *ref = e[n - 1];
    const elem **next = malloc((n + 1) * sizeof *next);
    if (!next) {
        out->failed = true;
        return;
    }
    memcpy(next, e, (n - 1) * sizeof *next);
    size_t base = n - 1;
    if (!is_end_of_sequence(ref + 1))
        next[base++] = ref + 1;
    const elem *alt = g->rules[ref->value].v;
    for (;;) {
        size_t m = base;
        if (!is_end_of_sequence(alt))
            next[m++] = alt;
        expand(g, next, m, out, depth + 1);
        while (!is_end_of_sequence(alt))
            alt++;
        if (alt->type != ELEM_ALT)
            break;
        alt++;
    }
    free(next);
}

/* Does the class at pos match cp? *after is set past the class. */
static bool match_char(const elem *pos, uint32_t cp, const elem **after)
{
    if (pos->type == ELEM_CHAR_ANY) {
        *after = pos + 1;
        return true;
    }
    bool positive = pos->type == ELEM_CHAR, found = false;
    do {
        if (pos[1].type == ELEM_CHAR_RNG_UPPER) {
            found = found || (pos->value <= cp && cp <= pos[1].value);
            pos += 2;
        } else {
            found = found || pos->value == cp;
            pos += 1;
        }
    } while (pos->type == ELEM_CHAR_ALT);
    *after = pos;
    return found == positive;
}

/* Does the class at pos match some code point in [low, high]? */
static bool match_char_range(const elem *pos, uint32_t low, uint32_t high)
{
    if (pos->type == ELEM_CHAR_ANY)
        return true;
    bool positive = pos->type == ELEM_CHAR;
    do {
        if (pos[1].type == ELEM_CHAR_RNG_UPPER) {
            if (pos->value <= high && low <= pos[1].value)
                return positive;
            pos += 2;
        } else {
            if (low <= pos->value && pos->value <= high)
                return positive;
            pos += 1;
        }
    } while (pos->type == ELEM_CHAR_ALT);
    return !positive;
}

/* Could some code point that starts with the partial bytes (value, remain) match pos? */
static bool match_partial_char(const elem *pos, uint32_t value, int remain)
{
    if (remain < 0 || (remain == 1 && value < 2)) /* invalid, or an overlong 2-byte form */
        return false;
    uint32_t low = value << (6 * remain);
    uint32_t high = low | ((1u << (6 * remain)) - 1);
    if (low == 0) /* the shortest form of the sequence's length */
        low = remain == 2 ? 1u << 11 : remain == 3 ? 1u << 16 : 0;
    return match_char_range(pos, low, high);
}

/*
 * Might the partial bytes (value, remain) still decode to a code point pos matches, once
 * their continuation bytes come? Decoding takes any continuation bytes (overlong forms too),
 * so the code point may be any the remaining bits give: a positive class must meet that
 * range, a negated one must not cover it with one item. Never false when some completion
 * matches (it only prunes the walk); match_partial_char decides a token that ends within the
 * character.
 */
static bool match_partial_prefix(const elem *pos, uint32_t value, int remain)
{
    uint32_t low = value << (6 * remain), high = low | ((1u << (6 * remain)) - 1);
    if (pos->type != ELEM_CHAR_NOT)
        return match_char_range(pos, low, high);
    do {
        uint32_t first = pos->value, last = pos->value;
        if (pos[1].type == ELEM_CHAR_RNG_UPPER)
            last = (++pos)->value;
        if (first <= low && high <= last)
            return false;
        pos++;
    } while (pos->type == ELEM_CHAR_ALT);
    return true;
}

/* The stacks after matching cp from each of in's stacks. Stacks that differ only in their
 * top often come to the same stack once it is matched (a loop over alternatives of one
 * character each: every alternative ends where the loop goes on), so those are gathered
 * first, equal ones once, and each expanded once. */
static void accept_code_point(const corral_grammar *g, const stack_set *in, uint32_t cp,
                              stack_set *out)
{
    stack_set matched = {0};
    for (size_t i = 0; i < in->n && !matched.failed; i++) {
        const stack *s = &in->v[i];
        const elem *after;
        if (s->n == 0 || !match_char(s->e[s->n - 1], cp, &after))
            continue;
        const elem **next = malloc(s->n * sizeof *next);
        if (!next) {
            matched.failed = true;
            break;
        }
        memcpy(next, s->e, (s->n - 1) * sizeof *next);
        size_t n = s->n - 1;
        if (!is_end_of_sequence(after))
            next[n++] = after;
        stack_set_add(&matched, next, n);
        free(next);
    }
    out->failed = out->failed || matched.failed;
    for (size_t i = 0; i < matched.n && !out->failed; i++)
        expand(g, matched.v[i].e, matched.v[i].n, out, 0);
    stack_set_free(&matched);
}

/* The stacks after cps[0..n) (n > 0) from in's, in *out: false when a code point fits no
 * stack, or memory or a limit ran out (then *out holds no meaning but is still freed). */
static bool accept_code_points(const corral_grammar *g, const stack_set *in,
                               const uint32_t *cps, size_t n, stack_set *out)
{
    stack_set spare = {0};
    const stack_set *at = in;
    bool ok = true;
    for (size_t i = 0; i < n && ok; i++) {
        stack_set *next = (n - i) % 2 ? out : &spare; /* the last step's lands in out */
        stack_set_clear(next);
        accept_code_point(g, at, cps[i], next);
        ok = !next->failed && next->n > 0;
        at = next;
    }
    stack_set_free(&spare);
    return ok;
}

/* ---- UTF-8 with a carried partial code point ---- */

typedef struct utf8_state {
    uint32_t value;
    int remain; /* continuation bytes still to come; -1: invalid */
} utf8_state;

/* Decode s[0..len) continuing from *state into cps (room for len code points); the count. */
static size_t decode_utf8(const char *s, size_t len, utf8_state *state, uint32_t *cps)
{
    size_t n = 0, i = 0;
    uint32_t value = state->value;
    int remain = state->remain;
    if (remain < 0)
        return 0;
    for (; i < len; i++) {
        uint8_t b = (uint8_t)s[i];
        if (remain > 0) {
            if ((b >> 6) != 2) {
                state->remain = -1;
                return n;
            }
            value = (value << 6) | (b & 0x3F);
            if (--remain == 0)
                cps[n++] = value;
            continue;
        }
        if (b < 0x80) {
            cps[n++] = b;
            continue;
        }
        remain = (b >> 5) == 6 ? 1 : (b >> 4) == 14 ? 2 : (b >> 3) == 30 ? 3 : -1;
        if (remain < 0) { /* a continuation byte first, or no UTF-8 lead byte */
            state->remain = -1;
            return n;
        }
        value = b & (0x3Fu >> remain);
    }
    state->value = value;
    state->remain = remain;
    return n;
}

/* ---- candidate filtering ---- */

typedef struct candidate {
    corral_token id;
    const uint32_t *cps; /* the code points still to match */
    size_t n_cps;
    uint32_t partial;    /* the token's trailing partial code point */
    int partial_remain;
} candidate;

typedef struct candidates {
    candidate *v;
    size_t n;
} candidates;

static candidates reject_all(const corral_grammar *g, const stack_set *stacks,
                             const candidate *cands, size_t n, size_t *budget, bool *failed);

/* Those of cands that stack cannot take, each as it was given. With a budget (not NULL),
 * each call spends one of it and one for each stack it goes on with, and none left fails
 * the search. */
static candidates reject_for_stack(const corral_grammar *g, const stack *s,
                                   const candidate *cands, size_t n, size_t *budget,
                                   bool *failed)
{
    if (budget && (*budget == 0 || --*budget == 0)) {
        *failed = true;
        return (candidates){0};
    }
    candidates rejects = {malloc((n ? n : 1) * sizeof *rejects.v), 0};
    candidate *next = malloc((n ? n : 1) * sizeof *next);
    if (!rejects.v || !next) {
        free(next);
        free(rejects.v);
        *failed = true;
        return (candidates){0};
    }
    size_t n_next = 0;
    const elem *top = s->n ? s->e[s->n - 1] : NULL;
    const elem *after = NULL;
    for (size_t i = 0; i < n; i++) {
        const candidate *c = &cands[i];
        if (c->n_cps == 0) {
            /* all matched: only a trailing partial character may still be refused */
            if (c->partial_remain != 0 && (!top || !match_partial_char(top, c->partial,
                                                                       c->partial_remain)))
                rejects.v[rejects.n++] = *c;
        } else if (top && match_char(top, c->cps[0], &after)) {
            next[n_next] = *c;
            next[n_next].cps++;
            next[n_next].n_cps--;
            n_next++;
        } else {
            rejects.v[rejects.n++] = *c;
        }
    }
    if (n_next > 0) {
        match_char(top, 0, &after); /* the class's end, whatever matched */
        stack_set after_stacks = {0};
        const elem **e = malloc(s->n * sizeof *e);
        if (!e) {
            *failed = true;
        } else {
            memcpy(e, s->e, (s->n - 1) * sizeof *e);
            size_t m = s->n - 1;
            if (!is_end_of_sequence(after))
                e[m++] = after;
            expand(g, e, m, &after_stacks, 0);
            free(e);
            *failed = *failed || after_stacks.failed;
            if (budget && !*failed) { /* the stacks it made count too */
                if (*budget <= after_stacks.n) {
                    *budget = 0;
                    *failed = true;
                } else {
                    *budget -= after_stacks.n;
                }
            }
        }
        candidates deeper = reject_all(g, &after_stacks, next, n_next, budget, failed);
        for (size_t i = 0; i < deeper.n; i++) {
            candidate c = deeper.v[i];
            c.cps--; /* as given to this level */
            c.n_cps++;
            rejects.v[rejects.n++] = c;
        }
        free(deeper.v);
        stack_set_free(&after_stacks);
    }
    free(next);
    return rejects;
}

/* Those of cands that no stack of stacks can take (budget: as reject_for_stack's). */
static candidates reject_all(const corral_grammar *g, const stack_set *stacks,
                             const candidate *cands, size_t n, size_t *budget, bool *failed)
{
    candidates rejects = {malloc((n ? n : 1) * sizeof *rejects.v), n};
    if (!rejects.v) {
        *failed = true;
        return (candidates){0};
    }
    if (n)
        memcpy(rejects.v, cands, n * sizeof *rejects.v);
    for (size_t i = 0; i < stacks->n && rejects.n > 0 && !*failed; i++) {
        candidates fewer =
            reject_for_stack(g, &stacks->v[i], rejects.v, rejects.n, budget, failed);
        free(rejects.v);
        rejects = fewer;
    }
    return rejects;
}

static bool is_complete(const stack_set *stacks)
{
    for (size_t i = 0; i < stacks->n; i++)
        if (stacks->v[i].n == 0)
            return true;
    return false;
}

/* Token id as a candidate from the grammar's current partial state; false if it cannot be
 * one (control tokens, invalid UTF-8). Its code points are decoded into scratch, which has
 * room for as many as the token has bytes. */
static bool token_candidate(const corral_grammar *g, corral_token id, uint32_t *scratch,
                            candidate *c)
{
    char piece[TOKEN_TRIE_MAX_BYTES];
    size_t len = corral_token_to_piece(g->vocab, id, piece, sizeof piece, false);
    if (len == 0 || len > sizeof piece)
        return false; /* control tokens; and no token of a real vocabulary is this long */
    utf8_state state = {g->partial, g->partial_remain};
    size_t n = decode_utf8(piece, len, &state, scratch);
    if (state.remain < 0)
        return false;
    *c = (candidate){id, scratch, n, state.value, state.remain};
    return true;
}

bool grammar_allows(corral_grammar *g, corral_token id)
{
    if (id < 0 || (size_t)id >= g->n_vocab)
        return false;
    if (corral_vocab_is_eog(g->vocab, id))
        return is_complete(&g->stacks);
    uint32_t scratch[TOKEN_TRIE_MAX_BYTES];
    candidate c;
    if (!token_candidate(g, id, scratch, &c) || (c.n_cps == 0 && c.partial_remain == 0))
        return false;
    bool first_fits = c.n_cps == 0; /* most tokens fail on their first code point: no copies */
    for (size_t i = 0; i < g->stacks.n && !first_fits; i++) {
        const stack *s = &g->stacks.v[i];
        const elem *after;
        first_fits = s->n > 0 && match_char(s->e[s->n - 1], c.cps[0], &after);
    }
    if (!first_fits)
        return false;
    /* First a search stack by stack, which takes an allowed token down the first path that
     * fits it (a string's character: one stack of several), within a budget of steps as long
     * as the token times the stacks: where alternatives overlap (`([a-z] | [a-z] | [a-z])+`,
     * a schema's anyOf of strings) it branches wherever several stacks take a character, and
     * a refused token would cost that branching to the power of its length (seconds for one
     * token of 17 letters with four such alternatives). */
    size_t budget = SEARCH_BUDGET_PER_STEP * (g->stacks.n + 1) * (c.n_cps + 1);
    bool failed = false;
    candidates rejects = reject_all(g, &g->stacks, &c, 1, &budget, &failed);
    free(rejects.v);
    if (!failed)
        return rejects.n == 0;
    if (budget != 0)
        return false; /* out of memory, or a limit on the stacks */
    /* Past the budget: the token's code points through all the stacks at once, equal stacks
     * merged after each (the matcher's own step, accept_code_point), as long as the token
     * times the stacks whatever they share. */
    stack_set after = {0};
    const stack_set *at = c.n_cps > 0 ? &after : &g->stacks;
    bool allowed = c.n_cps == 0 || accept_code_points(g, &g->stacks, c.cps, c.n_cps, &after);
    if (allowed && c.partial_remain != 0) {
        allowed = false;
        for (size_t i = 0; i < at->n && !allowed; i++)
            allowed = at->v[i].n > 0 &&
                      match_partial_char(at->v[i].e[at->v[i].n - 1], c.partial, c.partial_remain);
    }
    stack_set_free(&after);
    return allowed;
}

bool grammar_allows_all(corral_grammar *g, uint8_t *allowed)
{
    size_t n = g->n_vocab, bytes = 0, used = 0, n_cands = 0;
    memset(allowed, 0, n);
    for (size_t id = 0; id < n; id++) {
        char piece[TOKEN_TRIE_MAX_BYTES];
        size_t len = corral_token_to_piece(g->vocab, (corral_token)id, piece, sizeof piece, false);
        bytes += len <= sizeof piece ? len : 0;
    }
    candidate *cands = malloc((n ? n : 1) * sizeof *cands);
    uint32_t *cps = malloc((bytes ? bytes : 1) * sizeof *cps); /* a code point a byte at most */
    bool failed = !cands || !cps;
    for (size_t id = 0; id < n && !failed; id++) {
        candidate c;
        if (corral_vocab_is_eog(g->vocab, (corral_token)id))
            allowed[id] = is_complete(&g->stacks);
        else if (token_candidate(g, (corral_token)id, cps + used, &c) &&
                 (c.n_cps > 0 || c.partial_remain != 0)) {
            used += c.n_cps;
            cands[n_cands++] = c;
        }
    }
    candidates rejects = {0};
    if (!failed)
        rejects = reject_all(g, &g->stacks, cands, n_cands, NULL, &failed);
    for (size_t i = 0; i < n_cands && !failed; i++)
        allowed[cands[i].id] = 1;
    for (size_t i = 0; i < rejects.n && !failed; i++)
        allowed[rejects.v[i].id] = 0;
    free(rejects.v);
    free(cands);
    free(cps);
    return !failed;
}

/* ---- the mask: interned stacks walked over the token trie ---- */

enum {
    EMPTY_STACK = 0,
    NO_NODE = UINT32_MAX,
    NOT_YET = UINT32_MAX,
    NO_MASK = UINT32_MAX,
    MAX_NODES = 1 << 20,                 /* past this many, the interned stacks start afresh */
    MAX_MASK_CACHE_BYTES = 16 << 20,     /* per grammar: 1024 masks of bits at 128k tokens */
    MASK_CACHE_MIN_VISITS = 8, /* trie nodes (a subtree taken whole: 8 of its tokens count
                                * one); a shorter walk's bits take about as long as the walk
                                * (a mask of ids is kept whatever its walk: it costs little) */
};

static uint32_t node_hash(const elem *e, uint32_t parent, uint32_t n_buckets)
{
    uint64_t h = ((uint64_t)(uintptr_t)e * 0x9e3779b97f4a7c15u) ^ ((uint64_t)parent * 0xc2b2ae3d27d4eb4fu);
    return (uint32_t)(h >> 32) & (n_buckets - 1);
}

static void interned_free(interned *in)
{
    free(in->v);
    free(in->buckets);
    free(in->next_pool);
    for (size_t i = 0; i < in->n_masks; i++) {
        free(in->masks[i].bits);
        free(in->masks[i].ids);
    }
    free(in->masks);
    *in = (interned){0};
}

/* Empty, with node 0 the empty stack; false when out of memory. */
static bool interned_init(interned *in)
{
    *in = (interned){0};
    in->cap = 1024;
    in->n_buckets = 1024;
    in->v = malloc(in->cap * sizeof *in->v);
    in->buckets = malloc(in->n_buckets * sizeof *in->buckets);
    if (!in->v || !in->buckets) {
        interned_free(in);
        return false;
    }
    memset(in->buckets, 0xff, in->n_buckets * sizeof *in->buckets);
    in->v[EMPTY_STACK] = (snode){.parent = NO_NODE, .chain = NO_NODE, .n_next = NOT_YET,
                                 .mask = NO_MASK};
    in->n = 1;
    return true;
}

static bool rehash(interned *in)
{
    uint32_t n_buckets = in->n_buckets * 2;
    uint32_t *buckets = malloc(n_buckets * sizeof *buckets);
    if (!buckets)
        return false;
    memset(buckets, 0xff, n_buckets * sizeof *buckets);
    for (uint32_t i = 1; i < in->n; i++) {
        uint32_t h = node_hash(in->v[i].e, in->v[i].parent, n_buckets);
        in->v[i].chain = buckets[h];
        buckets[h] = i;
    }
    free(in->buckets);
    in->buckets = buckets;
    in->n_buckets = n_buckets;
    return true;
}

/* The stack e over parent; NO_NODE (and failed set) when out of memory. */
static uint32_t intern(interned *in, const elem *e, uint32_t parent)
{
    uint32_t h = node_hash(e, parent, in->n_buckets);
    for (uint32_t i = in->buckets[h]; i != NO_NODE; i = in->v[i].chain)
        if (in->v[i].e == e && in->v[i].parent == parent)
            return i;
    if (in->n == in->cap) {
        snode *grown = realloc(in->v, 2 * (size_t)in->cap * sizeof *grown);
        if (!grown) {
            in->failed = true;
            return NO_NODE;
        }
        in->v = grown;
        in->cap *= 2;
    }
    if (in->n >= in->n_buckets) {
        if (!rehash(in)) {
            in->failed = true;
            return NO_NODE;
        }
        h = node_hash(e, parent, in->n_buckets);
    }
    uint32_t i = in->n++;
    in->v[i] = (snode){e, parent, in->v[parent].depth + 1, in->buckets[h], 0, 0, 0, NOT_YET,
                       NO_MASK};
    in->buckets[h] = i;
    return i;
}

static bool pool_push(interned *in, uint32_t s)
{
    if (in->n_pool == in->pool_cap) {
        size_t cap = in->pool_cap ? 2 * in->pool_cap : 1024;
        uint32_t *grown = realloc(in->next_pool, cap * sizeof *grown);
        if (!grown)
            return false;
        in->next_pool = grown;
        in->pool_cap = cap;
    }
    in->next_pool[in->n_pool++] = s;
    return true;
}

/* expand, on interned stacks: every expansion of s not yet in the pool since begin is added
 * to it. The same limits hold. */
static void expand_interned(const corral_grammar *g, interned *in, uint32_t s, size_t begin,
                            int depth, size_t *expansions)
{
    if (in->failed)
        return;
    const elem *ref = in->v[s].e;
    if (s == EMPTY_STACK || is_char_element(ref)) {
        if (in->v[s].next_mark == in->next_stamp)
            return;
        in->v[s].next_mark = in->next_stamp;
        if (in->n_pool - begin == MAX_STACKS || !pool_push(in, s))
            in->failed = true;
        return;
    }
    if (depth > MAX_EXPAND_DEPTH || in->v[s].depth > MAX_STACK || ++*expansions > MAX_EXPANSIONS) {
        in->failed = true;
        return;
    }
    uint32_t base = in->v[s].parent;
    if (!is_end_of_sequence(ref + 1) && (base = intern(in, ref + 1, base)) == NO_NODE)
        return;
    const elem *alt = g->rules[ref->value].v;
    for (;;) {
        uint32_t m = is_end_of_sequence(alt) ? base : intern(in, alt, base);
        if (m == NO_NODE)
            return;
        expand_interned(g, in, m, begin, depth + 1, expansions);
        while (!is_end_of_sequence(alt))
            alt++;
        if (alt->type != ELEM_ALT)
            break;
        alt++;
    }
}

/* The stacks s (whose top is a character element) goes to once its top matches: worked out
 * on first use. False when that fails. */
static bool stacks_after(const corral_grammar *g, interned *in, uint32_t s)
{
    if (in->v[s].n_next != NOT_YET)
        return true;
    const elem *after;
    match_char(in->v[s].e, 0, &after); /* the class's end, whatever matched */
    uint32_t t = in->v[s].parent;
    if (!is_end_of_sequence(after) && (t = intern(in, after, t)) == NO_NODE)
        return false;
    size_t begin = in->n_pool, expansions = 0;
    if (++in->next_stamp == 0) { /* the stamps wrapped: clear the old marks */
        for (uint32_t i = 0; i < in->n; i++)
            in->v[i].next_mark = 0;
        in->next_stamp = 1;
    }
    expand_interned(g, in, t, begin, 0, &expansions);
    if (in->failed || in->n_pool - begin > UINT32_MAX / 2) {
        in->failed = true;
        return false;
    }
    in->v[s].next = (uint32_t)begin;
    in->v[s].n_next = (uint32_t)(in->n_pool - begin);
    return true;
}

static bool walk_reserve(corral_grammar *g, size_t n)
{
    if (n <= g->walk_cap)
        return true;
    size_t cap = g->walk_cap ? g->walk_cap : 1024;
    while (cap < n)
        cap *= 2;
    uint32_t *grown = realloc(g->walk_sets, cap * sizeof *grown);
    if (!grown)
        return false;
    g->walk_sets = grown;
    g->walk_cap = cap;
    return true;
}

static uint32_t next_set_stamp(interned *in)
{
    if (++in->set_stamp == 0) {
        for (uint32_t i = 0; i < in->n; i++)
            in->v[i].set_mark = 0;
        in->set_stamp = 1;
    }
    return in->set_stamp;
}

/*
 * A walk's tokens (by position in the trie, allowed of them) as a mask by token id, in out:
 * by the allowed tokens or by the refused ones, whichever are fewer (a string's step
 * refuses few).
 */
static void to_token_order(const corral_grammar *g, const uint64_t *order, size_t allowed,
                           uint64_t *out)
{
    const token_trie *t = g->trie;
    size_t n_words = ((size_t)t->n_ids + 63) / 64;
    if (allowed <= t->n_ids - allowed) {
        memset(out, 0, g->n_words * sizeof *out);
        for (size_t w = g->order_first / 64; w < n_words && w * 64 < g->order_end; w++)
            for (uint64_t bits = order[w]; bits; bits &= bits - 1) {
                uint32_t id = (uint32_t)t->ids[w * 64 + (size_t)__builtin_ctzll(bits)];
                out[id >> 6] |= 1ull << (id & 63);
            }
        return;
    }
    memcpy(out, t->present, g->n_words * sizeof *out);
    for (size_t w = 0; w < n_words; w++) {
        size_t n = t->n_ids - w * 64 < 64 ? t->n_ids - w * 64 : 64;
        uint64_t refused = ~order[w] & (n == 64 ? UINT64_MAX : (1ull << n) - 1);
        for (; refused; refused &= refused - 1) {
            uint32_t id = (uint32_t)t->ids[w * 64 + (size_t)__builtin_ctzll(refused)];
            out[id >> 6] &= ~(1ull << (id & 63));
        }
    }
}

/* Set the positions [from, to) in the walk's tokens (g->walk_order); their count. */
static uint32_t mark_walk(corral_grammar *g, uint32_t from, uint32_t to)
{
    if (from >= to)
        return 0;
    g->order_first = from < g->order_first ? from : g->order_first;
    g->order_end = to > g->order_end ? to : g->order_end;
    return token_trie_mark(g->walk_order, from, to);
}

/* Clear the walk's tokens for the next walk: the words it set, not the whole vocabulary's (a
 * key's walk sets a few). */
static void clear_walk(corral_grammar *g)
{
    if (g->order_first < g->order_end) {
        size_t first = g->order_first / 64, last = (g->order_end - 1) / 64;
        memset(g->walk_order + first, 0, (last - first + 1) * sizeof *g->walk_order);
    }
    g->order_first = UINT32_MAX;
    g->order_end = 0;
}

/*
 * Set in the walk's tokens (g->walk_order, by position: bit k the token token_trie.ids[k]; a
 * subtree's tokens are one range of bits) every token whose text some stack of
 * start[0..n_start) takes, from the UTF-8 state u0, and add their count to *allowed: the
 * trie walked depth first, each node's stack set worked out from its parent's by one byte, a
 * subtree skipped as soon as no stack takes its prefix. The sets of the nodes on the current path are kept in walk_sets, each
 * after its parent's; *visited counts the nodes looked at. False when a limit is reached or
 * memory runs out.
 */
static bool walk_trie(corral_grammar *g, const uint32_t *start, size_t n_start, utf8_state u0,
                      size_t *visited, size_t *allowed)
{
    interned *in = &g->in;
    const token_trie *t = g->trie;
    size_t begin[TOKEN_TRIE_MAX_BYTES + 1], end[TOKEN_TRIE_MAX_BYTES + 1];
    utf8_state state[TOKEN_TRIE_MAX_BYTES + 1];
    token_trie_level level[TOKEN_TRIE_MAX_BYTES + 1];
    if (!walk_reserve(g, n_start))
        return false;
    memcpy(g->walk_sets, start, n_start * sizeof *start);
    begin[0] = 0;
    end[0] = n_start;
    state[0] = u0;
    level[1] = token_trie_children(t, 0, t->n_ids);
    uint32_t i, tokens_end;
    for (size_t d = 1; token_trie_next(t, level, &d, &i, &tokens_end); ++*visited) {
        const token_trie_node *node = &t->nodes[i];
        size_t p = d - 1;
        uint32_t value = state[p].value;
        int remain = state[p].remain;
        token_trie_decode(&value, &remain, token_trie_byte(node));
        if (remain < 0)
            continue;
        uint32_t own_end = token_trie_own_end(t, i, tokens_end);
        bool alive = false, ends_here = true;
        if (remain == 0) {
            size_t n = end[p];
            uint32_t stamp = next_set_stamp(in);
            for (size_t k = begin[p]; k < end[p]; k++) {
                uint32_t s = g->walk_sets[k];
                const elem *after;
                if (s == EMPTY_STACK || !match_char(in->v[s].e, value, &after))
                    continue;
                if (!stacks_after(g, in, s) || !walk_reserve(g, n + in->v[s].n_next))
                    return false;
                const uint32_t *next = in->next_pool + in->v[s].next;
                for (uint32_t j = 0; j < in->v[s].n_next; j++)
                    if (in->v[next[j]].set_mark != stamp) {
                        in->v[next[j]].set_mark = stamp;
                        g->walk_sets[n++] = next[j];
                    }
            }
            begin[d] = end[p];
            end[d] = n;
            state[d] = (utf8_state){0, 0};
            alive = n > end[p];
        } else {
            ends_here = false;
            for (size_t k = begin[p]; k < end[p] && !ends_here; k++) {
                uint32_t s = g->walk_sets[k];
                if (s == EMPTY_STACK)
                    continue;
                ends_here = own_end > node->tokens && match_partial_char(in->v[s].e, value, remain);
                alive = alive || ends_here || match_partial_prefix(in->v[s].e, value, remain);
            }
            begin[d] = begin[p];
            end[d] = end[p];
            state[d] = (utf8_state){value, remain};
        }
        if (!alive)
            continue;
        if (ends_here)
            *allowed += mark_walk(g, node->tokens, own_end);
        level[d + 1] = token_trie_children(t, i, tokens_end);
        d++;
    }
    return true;
}

/* ---- the mask's walks by sets of stacks (set_cache) ---- */

enum {
    SET_UNKNOWN = UINT32_MAX,  /* a successor not worked out yet */
    SET_DEAD = UINT32_MAX - 1, /* no stack takes the code point */
    SET_FAILED = UINT32_MAX - 2,
    SET_MIXED = UINT32_MAX - 3, /* sset.wide: not the same for every code point */
    MAX_SETS = 4096,               /* their ASCII successor tables: 2 MiB */
    MAX_SET_POOL = 1 << 20,        /* stacks in all sets: 4 MiB */
    MAX_SET_KEYS = 1 << 16,        /* non-ASCII successors kept (then worked out each time) */
    MAX_LOOP_STACKS = 16,          /* a larger set is not looked at for its loops */
    MAX_COVER_ITEMS = 16,          /* a larger class is never taken as covering a range */
    MAX_RUN = 16,                  /* set_runs follows no longer chains of sets */
    EXIT_BATCH = 64,               /* a loop walk's exits gathered before they are walked */
    NODE_LOOP_CHILDREN = 32,       /* a node below which a string opens takes a loop walk
                                    * kept with the trie where it has this many children */
    UNIFORM_KNOWN = 63,            /* sset.uniform worked out */
};

static void set_cache_free(set_cache *c)
{
    free(c->v);
    free(c->buckets);
    free(c->pool);
    free(c->ascii);
    free(c->keys);
    free(c->values);
    free(c->scratch);
    *c = (set_cache){.max_sets = c->max_sets};
}

static size_t set_cache_bytes(const set_cache *c)
{
    return (size_t)c->cap * sizeof *c->v + (size_t)c->n * 128 * sizeof *c->ascii +
           (size_t)c->n_buckets * sizeof *c->buckets + c->pool_cap * sizeof *c->pool +
           c->keys_cap * (sizeof *c->keys + sizeof *c->values) +
           c->scratch_cap * sizeof *c->scratch;
}

static uint32_t set_hash(const uint32_t *ids, size_t n)
{
    uint64_t h = 0x9e3779b97f4a7c15u ^ n;
    for (size_t i = 0; i < n; i++)
        h = (h ^ ids[i]) * 0xff51afd7ed558ccdu;
    return (uint32_t)(h >> 32);
}

static bool set_rehash(set_cache *c)
{
    uint32_t n_buckets = c->n_buckets ? 2 * c->n_buckets : 256;
    uint32_t *buckets = malloc(n_buckets * sizeof *buckets);
    if (!buckets)
        return false;
    memset(buckets, 0xff, n_buckets * sizeof *buckets);
    for (uint32_t i = 0; i < c->n; i++) {
        uint32_t h = c->v[i].hash & (n_buckets - 1);
        c->v[i].chain = buckets[h];
        buckets[h] = i;
    }
    free(c->buckets);
    c->buckets = buckets;
    c->n_buckets = n_buckets;
    return true;
}

enum { COVER_NONE, COVER_ALL, COVER_MIXED };

/* Does the class at pos take every code point of [low, high], none, or some? */
static int class_cover(const elem *pos, uint32_t low, uint32_t high)
{
    if (pos->type == ELEM_CHAR_ANY)
        return COVER_ALL;
    bool positive = pos->type == ELEM_CHAR, meets = false;
    size_t n_items = 0;
    const elem *p = pos;
    do {
        uint32_t first = p->value, last = first;
        if (p[1].type == ELEM_CHAR_RNG_UPPER)
            last = (++p)->value;
        meets = meets || (first <= high && low <= last);
        n_items++;
        p++;
    } while (p->type == ELEM_CHAR_ALT);
    if (!meets)
        return positive ? COVER_NONE : COVER_ALL;
    if (n_items > MAX_COVER_ITEMS)
        return COVER_MIXED;
    uint64_t x = low; /* [low, x) is covered */
    for (bool moved = true; moved && x <= high;) {
        moved = false;
        p = pos;
        do {
            uint32_t first = p->value, last = first;
            if (p[1].type == ELEM_CHAR_RNG_UPPER)
                last = (++p)->value;
            if (first <= x && x <= last) {
                x = (uint64_t)last + 1;
                moved = true;
            }
            p++;
        } while (p->type == ELEM_CHAR_ALT);
    }
    if (x <= high)
        return COVER_MIXED;
    return positive ? COVER_ALL : COVER_NONE;
}

/* Set in ascii (a bit per code point below U+0080) those the class at pos takes. */
static void class_ascii(const elem *pos, uint64_t ascii[2])
{
    uint64_t bits[2] = {0, 0};
    if (pos->type == ELEM_CHAR_ANY) {
        ascii[0] = ascii[1] = UINT64_MAX;
        return;
    }
    const elem *p = pos;
    do {
        uint32_t first = p->value, last = first;
        if (p[1].type == ELEM_CHAR_RNG_UPPER)
            last = (++p)->value;
        for (uint32_t half = 0; half < 2; half++) { /* [first, last] in [64 half, 64 half + 63] */
            uint32_t lo = first > 64 * half ? first - 64 * half : 0;
            uint32_t hi = last - 64 * half < 64 ? last - 64 * half : 63;
            if (last >= 64 * half && lo <= hi && lo < 64)
                bits[half] |= (UINT64_MAX >> (63 - hi)) & (UINT64_MAX << lo);
        }
        p++;
    } while (p->type == ELEM_CHAR_ALT);
    bool positive = pos->type == ELEM_CHAR;
    ascii[0] |= positive ? bits[0] : ~bits[0];
    ascii[1] |= positive ? bits[1] : ~bits[1];
}

/* The set of the stacks ids[0..n) (sorted, no two equal, not in c->pool); SET_FAILED at a
 * limit or when memory runs out. Its ASCII successors start unknown for the code points some
 * stack takes and dead for the others, so a walk meets the dead ones without a look at the
 * stacks. */
static uint32_t set_intern(corral_grammar *g, const uint32_t *ids, size_t n)
{
    set_cache *c = &g->sets;
    uint32_t h = set_hash(ids, n);
    if (c->n_buckets)
        for (uint32_t i = c->buckets[h & (c->n_buckets - 1)]; i != NO_NODE; i = c->v[i].chain)
            if (c->v[i].hash == h && c->v[i].n == n &&
                memcmp(c->pool + c->v[i].first, ids, n * sizeof *ids) == 0)
                return i;
    if (c->failed || c->n == (c->max_sets ? c->max_sets : MAX_SETS) ||
        c->n_pool + n > MAX_SET_POOL) {
        c->failed = true;
        return SET_FAILED;
    }
    size_t rows = c->max_sets ? c->max_sets : MAX_SETS;
    if (!c->ascii && !(c->ascii = malloc(rows * 128 * sizeof *c->ascii))) {
        c->failed = true;
        return SET_FAILED;
    }
    if (c->n == c->cap) {
        uint32_t cap = c->cap ? 2 * c->cap : 64;
        sset *v = realloc(c->v, cap * sizeof *v);
        if (!v) {
            c->failed = true;
            return SET_FAILED;
        }
        c->v = v;
        c->cap = cap;
    }
    if (c->n_pool + n > c->pool_cap) {
        size_t cap = c->pool_cap ? c->pool_cap : 1024;
        while (cap < c->n_pool + n)
            cap *= 2;
        uint32_t *pool = realloc(c->pool, cap * sizeof *pool);
        if (!pool) {
            c->failed = true;
            return SET_FAILED;
        }
        c->pool = pool;
        c->pool_cap = cap;
    }
    if (c->n >= c->n_buckets && !set_rehash(c)) {
        c->failed = true;
        return SET_FAILED;
    }
    uint64_t ascii[2] = {0, 0}, takes = 0;
    for (size_t k = 0; k < n; k++) {
        if (ids[k] == EMPTY_STACK)
            continue;
        const elem *top = g->in.v[ids[k]].e;
        class_ascii(top, ascii);
        if (class_cover(top, 0x80, 0x1FFFFF) != COVER_NONE)
            takes |= 1ull << TOKEN_CLASS_NON_ASCII;
    }
    takes |= token_trie_ascii_classes(ascii);
    uint32_t i = c->n++;
    memcpy(c->pool + c->n_pool, ids, n * sizeof *ids);
    bool wide = takes >> TOKEN_CLASS_NON_ASCII & 1;
    const uint64_t overlong_leads = 1ull << (0xC0 - 0xC0) | 1ull << (0xC1 - 0xC0) |
                                    1ull << (0xE0 - 0xC0) | 1ull << (0xF0 - 0xC0);
    c->v[i] = (sset){(uint32_t)c->n_pool, (uint32_t)n, c->buckets[h & (c->n_buckets - 1)], h,
                     SET_UNKNOWN, 0, 0, takes, 0,
                     {ascii[0], ascii[1], 0, wide ? UINT64_MAX : overlong_leads}};
    c->buckets[h & (c->n_buckets - 1)] = i;
    c->n_pool += n;
    uint32_t *row = c->ascii + (size_t)i * 128;
    for (uint32_t cp = 0; cp < 128; cp++)
        row[cp] = SET_DEAD;
    for (uint32_t half = 0; half < 2; half++)
        for (uint64_t b = ascii[half]; b; b &= b - 1)
            row[64 * half + (uint32_t)__builtin_ctzll(b)] = SET_UNKNOWN;
    return i;
}

static bool set_keys_grow(set_cache *c)
{
    size_t cap = c->keys_cap ? 2 * c->keys_cap : 1024;
    uint64_t *keys = malloc(cap * sizeof *keys);
    uint32_t *values = malloc(cap * sizeof *values);
    if (!keys || !values) {
        free(keys);
        free(values);
        return false;
    }
    memset(keys, 0xff, cap * sizeof *keys);
    for (size_t i = 0; i < c->keys_cap; i++) {
        if (c->keys[i] == UINT64_MAX)
            continue;
        size_t h = (size_t)((c->keys[i] * 0x9e3779b97f4a7c15u) >> 32) & (cap - 1);
        while (keys[h] != UINT64_MAX)
            h = (h + 1) & (cap - 1);
        keys[h] = c->keys[i];
        values[h] = c->values[i];
    }
    free(c->keys);
    free(c->values);
    c->keys = keys;
    c->values = values;
    c->keys_cap = cap;
    return true;
}

static int compare_ids(const void *pa, const void *pb)
{
    uint32_t a = *(const uint32_t *)pa, b = *(const uint32_t *)pb;
    return (a > b) - (a < b);
}

/* Sort ids[0..n): in place where they are few (a set's successor holds a handful of
 * stacks, and the library's sort costs more than the sorting there). */
static void sort_ids(uint32_t *ids, size_t n)
{
    if (n > 16) {
        qsort(ids, n, sizeof *ids, compare_ids);
        return;
    }
    for (size_t i = 1; i < n; i++) {
        uint32_t v = ids[i];
        size_t j = i;
        for (; j > 0 && ids[j - 1] > v; j--)
            ids[j] = ids[j - 1];
        ids[j] = v;
    }
}

static uint32_t set_wide(corral_grammar *g, uint32_t set);

/* The set after code point cp from set: its stacks whose top takes cp, each as
 * stacks_after gives it; SET_DEAD when none does, SET_FAILED at a limit. */
static uint32_t set_step(corral_grammar *g, uint32_t set, uint32_t cp)
{
    set_cache *c = &g->sets;
    interned *in = &g->in;
    uint64_t key = (uint64_t)set << 32 | cp;
    size_t slot = 0;
    if (cp < 128) {
        uint32_t known = c->ascii[(size_t)set * 128 + cp];
        if (known != SET_UNKNOWN)
            return known;
    } else {
        uint32_t wide = cp <= 0x1FFFFF && c->v[set].wide != SET_MIXED ? set_wide(g, set)
                                                                      : SET_MIXED;
        if (wide != SET_MIXED)
            return wide;
        if (c->keys_cap) {
            slot = (size_t)((key * 0x9e3779b97f4a7c15u) >> 32) & (c->keys_cap - 1);
            for (; c->keys[slot] != UINT64_MAX; slot = (slot + 1) & (c->keys_cap - 1))
                if (c->keys[slot] == key)
                    return c->values[slot];
        }
    }
    size_t n = 0;
    uint32_t stamp = next_set_stamp(in);
    for (uint32_t k = 0; k < c->v[set].n; k++) {
        uint32_t s = c->pool[c->v[set].first + k];
        const elem *after;
        if (s == EMPTY_STACK || !match_char(in->v[s].e, cp, &after))
            continue;
        if (!stacks_after(g, in, s)) {
            c->failed = true;
            return SET_FAILED;
        }
        size_t need = n + in->v[s].n_next;
        if (need > c->scratch_cap) {
            size_t cap = c->scratch_cap ? c->scratch_cap : 256;
            while (cap < need)
                cap *= 2;
            uint32_t *grown = realloc(c->scratch, cap * sizeof *grown);
            if (!grown) {
                c->failed = true;
                return SET_FAILED;
            }
            c->scratch = grown;
            c->scratch_cap = cap;
        }
        const uint32_t *next = in->next_pool + in->v[s].next;
        for (uint32_t j = 0; j < in->v[s].n_next; j++)
            if (in->v[next[j]].set_mark != stamp) {
                in->v[next[j]].set_mark = stamp;
                c->scratch[n++] = next[j];
            }
    }
    uint32_t result = SET_DEAD;
    if (n > 0) {
        sort_ids(c->scratch, n);
        if ((result = set_intern(g, c->scratch, n)) == SET_FAILED)
            return SET_FAILED;
    }
    if (cp < 128) {
        c->ascii[(size_t)set * 128 + cp] = result;
    } else if (c->n_keys < MAX_SET_KEYS) {
        if (2 * (c->n_keys + 1) > c->keys_cap && !set_keys_grow(c))
            return result; /* not kept; still right */
        slot = (size_t)((key * 0x9e3779b97f4a7c15u) >> 32) & (c->keys_cap - 1);
        while (c->keys[slot] != UINT64_MAX)
            slot = (slot + 1) & (c->keys_cap - 1);
        c->keys[slot] = key;
        c->values[slot] = result;
        c->n_keys++;
    }
    return result;
}

/* The set after any code point from U+0080 (to U+1FFFFF, what decoding gives), when its
 * stacks take all of them or none each; else SET_MIXED. */
static uint32_t set_wide(corral_grammar *g, uint32_t set)
{
    set_cache *c = &g->sets;
    if (c->v[set].wide != SET_UNKNOWN)
        return c->v[set].wide;
    bool uniform = c->v[set].n <= MAX_LOOP_STACKS;
    for (uint32_t j = 0; j < c->v[set].n && uniform; j++) {
        uint32_t s = c->pool[c->v[set].first + j];
        uniform = s == EMPTY_STACK || class_cover(g->in.v[s].e, 0x80, 0x1FFFFF) != COVER_MIXED;
    }
    c->v[set].wide = SET_MIXED; /* set_step below works it out */
    uint32_t next = uniform ? set_step(g, set, 0x80) : SET_MIXED;
    if (next != SET_FAILED)
        c->v[set].wide = next;
    return next;
}

/* The set after any code point of class k (token_trie.h) from set, when the set's stacks
 * each take all of the class or none of it (then it is one set); else SET_MIXED, or
 * SET_FAILED at a limit. */
static uint32_t class_step(corral_grammar *g, uint32_t set, unsigned k)
{
    set_cache *c = &g->sets;
    uint32_t low, high, low2, high2, n = c->v[set].n;
    if (n > MAX_LOOP_STACKS)
        return SET_MIXED;
    token_trie_class_range(k, &low, &high, &low2, &high2);
    uint64_t known = c->v[set].uniform;
    if (known >> UNIFORM_KNOWN & 1)
        return known >> k & 1 ? set_step(g, set, low) : SET_MIXED;
    bool uniform = true;
    for (uint32_t j = 0; j < n && uniform && (low != high || low2 <= high2); j++) {
        uint32_t s = c->pool[c->v[set].first + j];
        if (s == EMPTY_STACK)
            continue;
        int cover = class_cover(g->in.v[s].e, low, high);
        uniform = cover != COVER_MIXED &&
                  (low2 > high2 || class_cover(g->in.v[s].e, low2, high2) == cover);
    }
    return uniform ? set_step(g, set, low) : SET_MIXED;
}

/* Does every class of code points (token_trie.h) in classes (none of the TOKEN_SUB_ bits)
 * bring set back to itself (class_step)? Each class is worked out once per set, when first
 * asked about; the first that does not stops the answer. */
static bool set_loops(corral_grammar *g, uint32_t set, uint64_t classes)
{
    set_cache *c = &g->sets;
    if (classes & ~c->v[set].loops & c->v[set].known)
        return false;
    for (uint64_t todo = classes & ~c->v[set].known; todo; todo &= todo - 1) {
        unsigned k = (unsigned)__builtin_ctzll(todo);
        uint32_t next = class_step(g, set, k);
        if (next == SET_FAILED)
            return false; /* not known; asked again later */
        c->v[set].known |= 1ull << k; /* c->v may have moved */
        if (next != set)
            return false;
        c->v[set].loops |= 1ull << k;
    }
    return true;
}

/*
 * Does every text of at most height characters, each of the one class in classes (none of
 * the TOKEN_SUB_ bits), keep some stack of set alive? Each such character takes the set to
 * one set (class_step) that is not dead, up to height of them or until the set comes back
 * to itself: a bounded repetition whose bound is beyond what is left of a token (JSON's
 * digits as the schema's grammar writes them) takes the subtree whole as a loop does.
 */
static bool set_runs(corral_grammar *g, uint32_t set, uint64_t classes, unsigned height)
{
    if (classes == 0 || (classes & (classes - 1)) != 0 || height > MAX_RUN)
        return false;
    unsigned k = (unsigned)__builtin_ctzll(classes);
    for (unsigned step = 0; step < height; step++) {
        uint32_t next = class_step(g, set, k);
        if (next >= SET_MIXED) /* mixed, dead or failed */
            return false;
        if (next == set)
            return true;
        set = next;
    }
    return true;
}

/*
 * token_trie_next, but a level's children whose byte does not start a character of its set
 * (want: the set's index, whose sset.starts; NO_NODE: any byte) are passed over on their
 * byte alone: under a set that takes a few characters (a blank before a key takes a quote)
 * most children are refused.
 */
static bool next_wanted(const token_trie *t, const set_cache *c, token_trie_level *level,
                        const uint32_t *want, size_t *d, uint32_t *i, uint32_t *tokens_end)
{
    for (;;) {
        while (*d > 0 && level[*d].next == level[*d].last)
            --*d;
        if (*d == 0)
            return false;
        token_trie_level *lv = &level[*d];
        const uint64_t *w = want[*d] == NO_NODE ? NULL : c->v[want[*d]].starts;
        for (; w && lv->next < lv->last; lv->next++) {
            uint8_t b = token_trie_byte(&t->nodes[lv->next]);
            if (w[b >> 6] >> (b & 63) & 1)
                break;
        }
        if (lv->next == lv->last)
            continue;
        *i = lv->next++;
        *tokens_end = lv->next < lv->last ? t->nodes[*i + 1].tokens : lv->end;
        return true;
    }
}

static int walk_exits(corral_grammar *g, const token_trie_loop *loop, uint32_t set0,
                      uint32_t looping, bool node_loops, size_t *visited, size_t *allowed,
                      size_t *taken);
static bool loop_classes(corral_grammar *g, uint32_t set, uint32_t *after, uint64_t *classes);

/* The walk's tokens |= a loop walk's below a node (its bits lie in [from, to), the node's
 * subtree); their count. */
static uint32_t mark_loop(corral_grammar *g, const token_trie_loop *loop, uint32_t from,
                          uint32_t to)
{
    if (loop->n_taken == 0 || from >= to)
        return 0;
    for (size_t w = from / 64; w <= (to - 1) / 64; w++)
        g->walk_order[w] |= loop->bits[w];
    g->order_first = from < g->order_first ? from : g->order_first;
    g->order_end = to > g->order_end ? to : g->order_end;
    return loop->n_taken;
}

/*
 * The part of walk_by_sets below one node: node i, whose tokens end at tokens_end, and its
 * subtree, from set and the decoding state (value, remain) before its byte. Returns as
 * walk_by_sets. Where node_loops, a node with many children below which a string opens (a
 * set that takes a loop walk, loop_classes) takes the loop walk below it kept with the trie
 * and walks on from its exits, those walked without node_loops (two deep at most).
 */
static int walk_node_by_sets(corral_grammar *g, uint32_t from, uint32_t from_value,
                             int from_remain, uint32_t node_i, uint32_t node_end,
                             bool node_loops, size_t *visited, size_t *allowed, size_t *taken)
{
    set_cache *c = &g->sets;
    const token_trie *t = g->trie;
    uint32_t set[TOKEN_TRIE_MAX_BYTES + 1], value_at[TOKEN_TRIE_MAX_BYTES + 1];
    int remain_at[TOKEN_TRIE_MAX_BYTES + 1];
    token_trie_level level[TOKEN_TRIE_MAX_BYTES + 1];
    uint32_t want[TOKEN_TRIE_MAX_BYTES + 1]; /* next_wanted's */
    set[0] = from;
    value_at[0] = from_value;
    remain_at[0] = from_remain;
    level[1] = (token_trie_level){node_i, node_i + 1, node_end}; /* a level holding it alone */
    want[1] = NO_NODE;
    uint32_t i, tokens_end;
    for (size_t d = 1; next_wanted(t, c, level, want, &d, &i, &tokens_end); ++*visited) {
        const token_trie_node *node = &t->nodes[i];
        size_t p = d - 1;
        uint32_t value = value_at[p];
        int remain = remain_at[p];
        token_trie_decode(&value, &remain, token_trie_byte(node));
        if (remain < 0)
            continue;
        bool ends_here = true;
        if (remain == 0) {
            uint32_t next = value < 128 ? c->ascii[(size_t)set[p] * 128 + value]
                                        : c->v[set[p]].wide;
            if (next == SET_MIXED) /* by code point */
                next = SET_UNKNOWN;
            if (next == SET_UNKNOWN)
                next = set_step(g, set[p], value);
            if (next == SET_DEAD)
                continue;
            if (next == SET_FAILED)
                return g->in.failed ? 0 : -1;
            set[d] = next;
            value_at[d] = 0;
            remain_at[d] = 0;
        } else {
            const sset *here = &c->v[set[p]];
            bool alive = false, has_own = token_trie_own_end(t, i, tokens_end) > node->tokens;
            ends_here = false;
            for (uint32_t k = 0; k < here->n && !ends_here; k++) {
                uint32_t st = c->pool[here->first + k];
                if (st == EMPTY_STACK)
                    continue;
                const elem *top = g->in.v[st].e;
                ends_here = has_own && match_partial_char(top, value, remain);
                alive = alive || ends_here || match_partial_prefix(top, value, remain);
            }
            if (!alive)
                continue;
            set[d] = set[p];
            value_at[d] = value;
            remain_at[d] = remain;
        }
        uint64_t below = token_trie_below(node);
        if (node->children == node[1].children) { /* a leaf: its own tokens */
            if (ends_here)
                *allowed += mark_walk(g, node->tokens, tokens_end);
            continue;
        }
        uint32_t own_end = ends_here ? node->tokens : token_trie_own_end(t, i, tokens_end);
        if (below >> TOKEN_CLASSES == 0 &&
            (set_loops(g, set[d], below) ||
             set_runs(g, set[d], below, token_trie_height(node)))) {
            /* every character below brings the set back, or keeps it alive as far as the
             * texts below go: all the tokens below (a partial character at the end too, as
             * the set takes every code point from U+0080), and its own where they end here */
            uint32_t n = mark_walk(g, own_end, tokens_end);
            *allowed += n;
            *taken += n;
            continue;
        }
        if (ends_here)
            *allowed += mark_walk(g, node->tokens, token_trie_own_end(t, i, tokens_end));
        if ((below & c->v[set[d]].takes) == 0)
            continue; /* no stack takes a character below: nothing below is allowed */
        uint32_t looping;
        uint64_t classes;
        const token_trie_loop *loop;
        if (node_loops && remain_at[d] == 0 &&
            node[1].children - node->children >= NODE_LOOP_CHILDREN &&
            loop_classes(g, set[d], &looping, &classes) &&
            (loop = token_trie_loop_of(t, i, tokens_end, classes))) {
            uint32_t n = mark_loop(g, loop, t->nodes[node->children].tokens, tokens_end);
            *allowed += n;
            *taken += n;
            int r = walk_exits(g, loop, set[d], looping, false, visited, allowed, taken);
            if (r != 1)
                return r;
            continue;
        }
        level[d + 1] = token_trie_children(t, i, tokens_end);
        want[d + 1] = remain_at[d] == 0 ? set[d] : NO_NODE;
        d++;
    }
    return 1;
}

/*
 * Work out which classes (token_trie.h) each stack of set takes all of or none of
 * (sset.uniform, for class_step), and the set's successors by the ASCII code points of those
 * classes, one set_step for all the classes the same stacks take: a string's body takes some
 * thirty classes alike, and loop_classes asks about each.
 */
static void set_fill_classes(corral_grammar *g, uint32_t set)
{
    set_cache *c = &g->sets;
    uint32_t n = c->v[set].n;
    if (n > MAX_LOOP_STACKS || c->v[set].uniform >> UNIFORM_KNOWN & 1)
        return;
    uint64_t uniform_classes = 1ull << UNIFORM_KNOWN;
    uint64_t ascii[MAX_LOOP_STACKS][2];
    for (uint32_t j = 0; j < n; j++) {
        uint32_t s = c->pool[c->v[set].first + j];
        ascii[j][0] = ascii[j][1] = 0;
        if (s != EMPTY_STACK)
            class_ascii(g->in.v[s].e, ascii[j]);
    }
    uint32_t group_stacks[TOKEN_CLASSES], group_set[TOKEN_CLASSES], n_groups = 0;
    for (unsigned k = 0; k < TOKEN_CLASSES; k++) {
        const uint64_t *class = g->trie->class_ascii[k];
        uint32_t takers = 0; /* the stacks that take all of the class */
        bool uniform = true;
        for (uint32_t j = 0; j < n && uniform; j++) {
            uint32_t s = c->pool[c->v[set].first + j];
            uint64_t part0 = ascii[j][0] & class[0], part1 = ascii[j][1] & class[1];
            if (k == TOKEN_CLASS_NON_ASCII)
                uniform = s == EMPTY_STACK ||
                          class_cover(g->in.v[s].e, 0x80, 0x1FFFFF) != COVER_MIXED;
            else if (part0 == class[0] && part1 == class[1])
                takers |= 1u << j;
            else
                uniform = (part0 | part1) == 0;
        }
        uniform_classes |= (uint64_t)uniform << k;
        if (!uniform || takers == 0)
            continue;
        uint32_t *row = c->ascii + (size_t)set * 128, g_i = 0;
        while (g_i < n_groups && group_stacks[g_i] != takers)
            g_i++;
        if (g_i == n_groups) {
            uint32_t first = class[0] ? (uint32_t)__builtin_ctzll(class[0])
                                      : 64 + (uint32_t)__builtin_ctzll(class[1]);
            uint32_t next = set_step(g, set, first);
            if (next == SET_FAILED)
                return; /* uniform not known: class_step works each class out */
            group_stacks[n_groups] = takers;
            group_set[n_groups++] = next;
        }
        for (unsigned half = 0; half < 2; half++)
            for (uint64_t b = class[half]; b; b &= b - 1)
                if (row[64 * half + (unsigned)__builtin_ctzll(b)] == SET_UNKNOWN)
                    row[64 * half + (unsigned)__builtin_ctzll(b)] = group_set[g_i];
    }
    c->v[set].uniform = uniform_classes;
}

/*
 * Does set's walk take a loop walk kept with the trie (token_trie_loop)? When the set after
 * a lower-case letter, *after, comes back to itself on them: *classes those of its loops that
 * every code point of lead from set to *after (set itself, for a string's body already
 * begun; the opening quote's stacks, for one about to begin). The walk up to where it meets a
 * character of another class is then the same for every such set, of any grammar.
 */
static bool loop_classes(corral_grammar *g, uint32_t set, uint32_t *after, uint64_t *classes)
{
    uint32_t looping = class_step(g, set, TOKEN_CLASS_LOWER);
    if (looping >= SET_MIXED || !set_loops(g, looping, 1ull << TOKEN_CLASS_LOWER))
        return false;
    uint64_t loops = 0;
    set_fill_classes(g, looping);
    if (set != looping)
        set_fill_classes(g, set);
    for (unsigned k = 0; k < TOKEN_CLASSES; k++)
        if (set_loops(g, looping, 1ull << k) && (set == looping || class_step(g, set, k) == looping))
            loops |= 1ull << k;
    *after = looping;
    *classes = loops;
    return true;
}

/*
 * The walks on from a loop walk's exits (token_trie_loop), within the text's first character
 * from set0, after it from looping (walk_node_by_sets, node_loops passed on). Returns as
 * walk_by_sets. The exits to walk are gathered a batch at a time, their nodes fetched as they
 * are found and their children a few walks ahead: they are far apart in the trie, and the
 * walk would wait on each in turn.
 */
static int walk_exits(corral_grammar *g, const token_trie_loop *loop, uint32_t set0,
                      uint32_t looping, bool node_loops, size_t *visited, size_t *allowed,
                      size_t *taken)
{
    set_cache *c = &g->sets;
    const token_trie *t = g->trie;
    uint32_t todo[EXIT_BATCH];
    for (uint32_t k = 0; k < loop->n_exits;) {
        uint32_t n_todo = 0;
        for (; k < loop->n_exits && n_todo < EXIT_BATCH; k++) {
            const token_trie_exit *e = &loop->exits[k];
            uint32_t from = e->first ? set0 : looping;
            uint32_t next = e->remain == 0 && e->byte < 0x80
                                ? c->ascii[(size_t)from * 128 + e->byte] : SET_UNKNOWN;
            if (next == SET_DEAD)
                continue; /* a character no stack takes: its subtree unread */
            if (next < SET_MIXED && (e->below & c->v[next].takes) == 0) {
                /* its text is taken, and nothing below it: the node unread */
                *allowed += mark_walk(g, e->tokens, e->own_end);
                continue;
            }
            __builtin_prefetch(&t->nodes[e->node]);
            todo[n_todo++] = k;
        }
        for (uint32_t j = 0; j < n_todo; j++) {
            if (j + 4 < n_todo)
                __builtin_prefetch(&t->nodes[t->nodes[loop->exits[todo[j + 4]].node].children]);
            const token_trie_exit *e = &loop->exits[todo[j]];
            int r = walk_node_by_sets(g, e->first ? set0 : looping, e->value, e->remain, e->node,
                                      e->tokens_end, node_loops, visited, allowed, taken);
            if (r != 1)
                return r;
        }
    }
    return 1;
}

/*
 * walk_trie from the one stack s and no partial character, by sets (set_cache): bits,
 * *visited and *allowed as walk_trie's, and *taken the tokens subtrees taken whole gave. 1
 * when done, 0 when a limit on the stacks is reached or memory runs out, -1 when the set
 * cache is full (then the walk is for walk_trie). A set that loops on most characters (a
 * string's body) takes its loop walk's tokens (*loop_taken, whose tokens are not in bits)
 * and walks on from its exits alone.
 */
static int walk_by_sets(corral_grammar *g, uint32_t s, size_t *visited, size_t *allowed,
                        size_t *taken, const token_trie_loop **loop_taken)
{
    set_cache *c = &g->sets;
    const token_trie *t = g->trie;
    uint32_t set0 = set_intern(g, &s, 1);
    if (set0 == SET_FAILED)
        return -1;
    uint32_t looping;
    uint64_t classes;
    const token_trie_loop *loop;
    if (loop_classes(g, set0, &looping, &classes) &&
        (loop = token_trie_loop_of(t, 0, t->n_ids, classes))) {
        *loop_taken = loop;
        *taken += loop->n_taken;
        return walk_exits(g, loop, set0, looping, true, visited, allowed, taken);
    }
    /* the root's children by their byte, those no stack can start with left unread */
    for (unsigned first = 0; first < 256; first++) {
        uint32_t child = t->root_child[first], after = SET_DEAD;
        if (child == 0 || (first >= 0x80 && first < 0xC0) || first >= 0xF8)
            continue; /* no token, or a continuation byte or no lead byte of a character */
        /* a lead byte's characters are from U+0080 but for the overlong forms of C0, C1, E0
         * and F0, which decoding takes too: those are always looked at */
        bool overlong = first == 0xC0 || first == 0xC1 || first == 0xE0 || first == 0xF0;
        if (first < 0x80)
            after = c->ascii[(size_t)set0 * 128 + first];
        else
            after = overlong ? SET_MIXED : c->v[set0].wide;
        if (after == SET_UNKNOWN)
            after = first < 0x80 ? set_step(g, set0, first) : set_wide(g, set0);
        if (after == SET_FAILED)
            return g->in.failed ? 0 : -1;
        if (after == SET_DEAD)
            continue;
        uint32_t end = child + 1 < t->nodes[1].children ? t->nodes[child + 1].tokens : t->n_ids;
        int r = walk_node_by_sets(g, set0, 0, 0, child, end, true, visited, allowed, taken);
        if (r != 1)
            return r;
    }
    return 1;
}

/* The current stacks as interned ones: *out (malloc'd, *n of them). */
static bool intern_current(corral_grammar *g, uint32_t **out, size_t *n)
{
    interned *in = &g->in;
    if (g->sets.failed) /* full: start afresh */
        set_cache_free(&g->sets);
    if (in->n > MAX_NODES) { /* a long answer's stacks, mostly behind it: start afresh */
        g->bits_kept = false; /* its stacks' ids name other stacks from here */
        set_cache_free(&g->sets);
        interned_free(in);
        if (!interned_init(in))
            return false;
    }
    uint32_t *ids = malloc((g->stacks.n ? g->stacks.n : 1) * sizeof *ids);
    if (!ids)
        return false;
    for (size_t i = 0; i < g->stacks.n; i++) {
        const stack *st = &g->stacks.v[i];
        uint32_t s = EMPTY_STACK;
        for (size_t k = 0; k < st->n && s != NO_NODE; k++)
            s = intern(in, st->e[k], s);
        if (s == NO_NODE) {
            free(ids);
            return false;
        }
        ids[i] = s;
    }
    *out = ids;
    *n = g->stacks.n;
    return true;
}

/*
 * A walk's mask in g's walk_bits or walk_ids: its tokens (g->walk_order, allowed of them)
 * and those of the loop walk it took (NULL: none). As ids where they are few enough, else as
 * bits.
 */
static kept_mask walk_mask(corral_grammar *g, size_t allowed, const token_trie_loop *loop)
{
    const token_trie *t = g->trie;
    const uint64_t *order = g->walk_order;
    size_t n_words = ((size_t)t->n_ids + 63) / 64, first = g->order_first / 64;
    if (!loop && allowed <= g->max_ids) {
        uint32_t n = 0;
        bool fits = true;
        for (size_t w = first; w < n_words && w * 64 < g->order_end && fits; w++)
            for (uint64_t bits = order[w]; bits && (fits = n < g->max_ids); bits &= bits - 1)
                g->walk_ids[n++] = (uint32_t)t->ids[w * 64 + (size_t)__builtin_ctzll(bits)];
        if (fits)
            return (kept_mask){NULL, g->walk_ids, n};
    }
    if (!loop) {
        to_token_order(g, order, allowed, g->walk_bits);
        return (kept_mask){g->walk_bits, NULL, 0};
    }
    /* the loop's tokens are kept by id with it; the exits' walks add few */
    memcpy(g->walk_bits, loop->id_bits, g->n_words * sizeof *g->walk_bits);
    for (size_t w = first; w < n_words && w * 64 < g->order_end; w++)
        for (uint64_t bits = order[w]; bits; bits &= bits - 1) {
            uint32_t id = (uint32_t)t->ids[w * 64 + (size_t)__builtin_ctzll(bits)];
            g->walk_bits[id >> 6] |= 1ull << (id & 63);
        }
    return (kept_mask){g->walk_bits, NULL, 0};
}

/* The mask of the tokens one stack allows from no partial character: kept once walked when
 * it is ids or the walk was long (a short one's bits cost more than the walk), while the
 * cache has room. */
static bool stack_mask(corral_grammar *g, uint32_t s, kept_mask *mask)
{
    interned *in = &g->in;
    if (in->v[s].mask != NO_MASK) {
        *mask = in->masks[in->v[s].mask];
        return true;
    }
    size_t visited = 0, taken = 0, allowed = 0;
    const token_trie_loop *loop = NULL;
    int by_sets = walk_by_sets(g, s, &visited, &allowed, &taken, &loop);
    bool walked = by_sets > 0;
    if (by_sets < 0) { /* the set cache is full: the slow way */
        clear_walk(g);
        allowed = 0;
        loop = NULL;
        walked = walk_trie(g, &s, 1, (utf8_state){0, 0}, &visited, &allowed);
    }
    g->trie_visits += visited;
    if (!walked) {
        clear_walk(g);
        return false;
    }
    *mask = walk_mask(g, allowed, loop);
    clear_walk(g);
    size_t bytes = mask->bits ? g->n_words * sizeof *mask->bits
                              : (mask->n_ids ? mask->n_ids : 1) * sizeof *mask->ids;
    if ((mask->bits && visited + taken / 8 < MASK_CACHE_MIN_VISITS) ||
        in->masks_bytes + bytes > MAX_MASK_CACHE_BYTES)
        return true;
    if (in->n_masks == in->masks_cap) {
        size_t cap = in->masks_cap ? 2 * in->masks_cap : 16;
        kept_mask *grown = realloc(in->masks, cap * sizeof *grown);
        if (!grown)
            return true; /* not kept; the mask is still right */
        in->masks = grown;
        in->masks_cap = cap;
    }
    void *copy = malloc(bytes);
    if (copy) {
        memcpy(copy, mask->bits ? (const void *)mask->bits : (const void *)mask->ids,
               mask->bits || mask->n_ids ? bytes : 0);
        kept_mask kept = {mask->bits ? copy : NULL, mask->bits ? NULL : copy, mask->n_ids};
        in->v[s].mask = (uint32_t)in->n_masks;
        in->masks[in->n_masks++] = kept;
        in->masks_bytes += bytes;
    }
    return true;
}

/* g->bits: every token of text the grammar allows next. From no partial character, the
 * union of each stack's (cached) mask; within a split character, one walk of all stacks. */
static bool compute_mask(corral_grammar *g)
{
    uint32_t *cur;
    size_t n;
    if (!intern_current(g, &cur, &n))
        return false;
    if (g->partial_remain == 0) {
        /* compared in the stacks' order, not sorted: the stacks' masks are walked in that
         * order, which the first walks' cost depends on, and a string's step gives the
         * same stacks in the same order */
        if (g->bits_kept && n == g->n_bits_stacks &&
            memcmp(cur, g->bits_stacks, n * sizeof *cur) == 0) {
            free(cur);
            g->masks_reused++;
            return true;
        }
    }
    g->bits_kept = false;
    memset(g->bits, 0, g->n_words * sizeof *g->bits);
    bool ok = true;
    if (g->partial_remain == 0) {
        for (size_t i = 0; i < n && ok; i++) {
            kept_mask mask;
            if (cur[i] == EMPTY_STACK || !(ok = stack_mask(g, cur[i], &mask)))
                continue;
            if (mask.bits)
                for (size_t w = 0; w < g->n_words; w++)
                    g->bits[w] |= mask.bits[w];
            for (uint32_t k = 0; k < mask.n_ids; k++)
                g->bits[mask.ids[k] >> 6] |= 1ull << (mask.ids[k] & 63);
        }
    } else {
        size_t visited = 0, allowed = 0;
        ok = walk_trie(g, cur, n, (utf8_state){g->partial, g->partial_remain}, &visited,
                       &allowed);
        g->trie_visits += visited;
        if (ok)
            to_token_order(g, g->walk_order, allowed, g->bits);
        clear_walk(g);
    }
    if (ok && g->partial_remain == 0) {
        free(g->bits_stacks);
        g->bits_stacks = cur;
        g->n_bits_stacks = n;
        g->bits_kept = true;
    } else {
        free(cur);
    }
    g->in.failed = false; /* a failed walk fails this mask; the nodes made are still sound */
    return ok;
}

/* g->bits: the step's mask, end-of-generation tokens included once the grammar is complete. */
static bool step_mask(corral_grammar *g)
{
    if (!compute_mask(g))
        return false;
    if (is_complete(&g->stacks))
        for (size_t i = 0; i < g->n_eog; i++)
            g->bits[g->eog[i] >> 6] |= 1ull << (g->eog[i] & 63);
    return true;
}

/* How many bits are set (popcount, without the library call it is where the target has no
 * instruction for it). */
static unsigned count_bits(uint64_t bits)
{
    bits -= (bits >> 1) & 0x5555555555555555u;
    bits = (bits & 0x3333333333333333u) + ((bits >> 2) & 0x3333333333333333u);
    bits = (bits + (bits >> 4)) & 0x0F0F0F0F0F0F0F0Fu;
    return (unsigned)((bits * 0x0101010101010101u) >> 56);
}

bool grammar_allowed_ids(corral_grammar *g, const corral_token **ids, size_t *n)
{
    *ids = NULL;
    *n = 0;
    if (!step_mask(g))
        return false;
    if (g->list_cap < g->list_max) {
        corral_token *grown = realloc(g->listed, g->list_max * sizeof *grown);
        if (!grown)
            return true; /* the row's way */
        g->listed = grown;
        g->list_cap = g->list_max;
    }
    size_t count = 0;
    for (size_t w = 0; w < g->n_words; w++) {
        uint64_t bits = g->bits[w];
        if (bits == 0)
            continue;
        if (w == g->n_words - 1 && g->n_vocab % 64)
            bits &= (1ull << (g->n_vocab % 64)) - 1;
        if (count + count_bits(bits) > g->list_max)
            return true; /* many: the row's way, and a string's step gives up at once */
        for (; bits; bits &= bits - 1)
            g->listed[count++] = (corral_token)(w * 64 + (size_t)__builtin_ctzll(bits));
    }
    *ids = g->listed;
    *n = count;
    return true;
}

bool grammar_mask_worked_out(const corral_grammar *g, float *logits)
{
    bool any = false;
    for (size_t w = 0; w < g->n_words; w++) {
        uint64_t bits = g->bits[w];
        size_t base = w * 64, n = g->n_vocab - base < 64 ? g->n_vocab - base : 64;
        if (bits == 0) {
            for (size_t j = 0; j < n; j++)
                logits[base + j] = -INFINITY;
            continue;
        }
        uint64_t valid = n == 64 ? UINT64_MAX : (1ull << n) - 1, refused = ~bits & valid;
        float *row = logits + base;
        if (count_bits(refused) > 32) {
            /* most refused (a step after a key, a number's digits): the row filled at once
             * and the few kept put back, not a store per refused token */
            float kept[32];
            unsigned n_kept = 0;
            for (uint64_t k = bits & valid; k; k &= k - 1)
                kept[n_kept++] = row[__builtin_ctzll(k)];
            for (size_t j = 0; j < n; j++)
                row[j] = -INFINITY;
            n_kept = 0;
            for (uint64_t k = bits & valid; k; k &= k - 1, n_kept++) {
                row[__builtin_ctzll(k)] = kept[n_kept];
                any = any || kept[n_kept] != -INFINITY;
            }
            continue;
        }
        /* by set bits, not by token: a string's step refuses a few tokens of each word */
        for (; refused; refused &= refused - 1)
            row[__builtin_ctzll(refused)] = -INFINITY;
        for (uint64_t kept = bits & valid; kept && !any; kept &= kept - 1)
            any = row[__builtin_ctzll(kept)] != -INFINITY;
    }
    return any;
}

const uint64_t *grammar_mask_bits(const corral_grammar *g)
{
    return g->bits;
}

bool grammar_mask(corral_grammar *g, float *logits)
{
    return step_mask(g) && grammar_mask_worked_out(g, logits);
}

/* Advance stacks by text (from partial state *state); false if it does not fit. */
static bool advance_text(const corral_grammar *g, stack_set *stacks, utf8_state *state,
                         const char *text, size_t len)
{
    uint32_t *cps = malloc((len ? len : 1) * sizeof *cps);
    if (!cps)
        return false;
    size_t n = decode_utf8(text, len, state, cps);
    bool ok = state->remain >= 0;
    if (ok && n > 0) {
        stack_set next = {0};
        ok = accept_code_points(g, stacks, cps, n, &next);
        stack_set_free(stacks);
        *stacks = next;
    }
    free(cps);
    return ok;
}

void grammar_accept(corral_grammar *g, corral_token id)
{
    if (corral_vocab_is_eog(g->vocab, id))
        return;
    char piece[256];
    size_t len = corral_token_to_piece(g->vocab, id, piece, sizeof piece, false);
    utf8_state state = {g->partial, g->partial_remain};
    if (len > sizeof piece || !advance_text(g, &g->stacks, &state, piece, len))
        stack_set_clear(&g->stacks); /* nothing fits any more: only the end remains */
    g->partial = state.value;
    g->partial_remain = state.remain < 0 ? 0 : state.remain;
}

corral_token grammar_end_token(const corral_grammar *g)
{
    return g->end_token;
}

/* The start: every alternative of the root rule, expanded. */
static bool initial_stacks(const corral_grammar *g, stack_set *out)
{
    const elem *alt = g->rules[g->root].v;
    for (;;) {
        const elem *e[1] = {alt};
        expand(g, e, is_end_of_sequence(alt) ? 0 : 1, out, 0);
        while (!is_end_of_sequence(alt))
            alt++;
        if (alt->type != ELEM_ALT)
            break;
        alt++;
    }
    return !out->failed;
}

bool corral_grammar_accepts(const corral_grammar *g, const char *text, size_t len)
{
    stack_set stacks = {0};
    utf8_state state = {0, 0};
    bool ok = initial_stacks(g, &stacks) && advance_text(g, &stacks, &state, text, len) &&
              state.remain == 0 && is_complete(&stacks);
    stack_set_free(&stacks);
    return ok;
}

/* ---- the parser ---- */

typedef struct parser {
    const char *src;
    corral_error *err;
    bool failed;
    char **names;  /* by symbol id; NULL for the rules groups and repetitions make */
    elems *rules;  /* by symbol id; v NULL until defined */
    bool *defined;
    size_t n, cap;
} parser;

static const char *fail_at(parser *p, const char *pos, const char *what)
{
    if (!p->failed) {
        size_t line = 1;
        for (const char *c = p->src; c < pos && *c; c++)
            line += *c == '\n';
        corral_error_set(p->err, "grammar line %zu: %s", line, what);
    }
    p->failed = true;
    return NULL;
}

static bool is_word_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '-' || c == '_';
}

static const char *skip_space(const char *pos, bool newlines)
{
    for (;;) {
        if (*pos == ' ' || *pos == '\t' || (newlines && (*pos == '\r' || *pos == '\n'))) {
            pos++;
        } else if (*pos == '#') {
            while (*pos && *pos != '\r' && *pos != '\n')
                pos++;
        } else {
            return pos;
        }
    }
}

/* A new symbol (name NULL: a generated rule); its id, or UINT32_MAX. */
static uint32_t add_symbol(parser *p, const char *name, size_t len)
{
    if (p->n == MAX_RULES) {
        fail_at(p, p->src, "too many rules");
        return UINT32_MAX;
    }
    if (p->n == p->cap) {
        size_t cap = p->cap ? 2 * p->cap : 32;
        char **names = realloc(p->names, cap * sizeof *names);
        if (names)
            p->names = names;
        elems *rules = realloc(p->rules, cap * sizeof *rules);
        if (rules)
            p->rules = rules;
        bool *defined = realloc(p->defined, cap * sizeof *defined);
        if (defined)
            p->defined = defined;
        if (!names || !rules || !defined) {
            fail_at(p, p->src, "out of memory");
            return UINT32_MAX;
        }
        p->cap = cap;
    }
    char *copy = NULL;
    if (name && !(copy = strndup(name, len))) {
        fail_at(p, p->src, "out of memory");
        return UINT32_MAX;
    }
    p->names[p->n] = copy;
    p->rules[p->n] = (elems){0};
    p->defined[p->n] = false;
    return (uint32_t)p->n++;
}

static uint32_t symbol_id(parser *p, const char *name, size_t len)
{
    for (size_t i = 0; i < p->n; i++)
        if (p->names[i] && strlen(p->names[i]) == len && memcmp(p->names[i], name, len) == 0)
            return (uint32_t)i;
    return add_symbol(p, name, len);
}

/* One character of a literal or class, escapes included; its code point, or fails. */
static const char *parse_char(parser *p, const char *pos, uint32_t *cp)
{
    if (*pos == '\\') {
        int digits = 0;
        switch (pos[1]) {
        case 'x': digits = 2; break;
        case 'u': digits = 4; break;
        case 'U': digits = 8; break;
        case 't': *cp = '\t'; return pos + 2;
        case 'r': *cp = '\r'; return pos + 2;
        case 'n': *cp = '\n'; return pos + 2;
        case '\\': case '"': case '[': case ']': case '-': case '^': *cp = (uint8_t)pos[1];
            return pos + 2;
        default: return fail_at(p, pos, "unknown escape");
        }
        uint32_t value = 0;
        for (int i = 0; i < digits; i++) {
            char c = pos[2 + i];
            int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
                  : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
            if (d < 0)
                return fail_at(p, pos, "expecting hex digits after \\x, \\u or \\U");
            value = value << 4 | (uint32_t)d;
        }
        if (value > 0x10FFFF)
            return fail_at(p, pos, "code point out of range");
        *cp = value;
        return pos + 2 + digits;
    }
    utf8_state state = {0, 0};
    uint32_t out[4];
    size_t len = 1;
    uint8_t b = (uint8_t)*pos;
    len = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
    for (size_t i = 1; i < len; i++)
        if (!pos[i])
            len = 0;
    if (len == 0 || decode_utf8(pos, len, &state, out) != 1)
        return fail_at(p, pos, "invalid UTF-8");
    *cp = out[0];
    return pos + len;
}

/* S{min,max} (max < 0: unbounded) for the symbol at out[last..): S repeated min times, then
 * an optional chain of rules, as llama.cpp rewrites it. */
static bool repeat_symbol(parser *p, const char *pos, elems *out, size_t last, long min,
                          long max)
{
    if (last == out->n) {
        fail_at(p, pos, "expecting an item before *, +, ? or {");
        return false;
    }
    if (min > MAX_REPEAT || max > MAX_REPEAT || (max >= 0 && max < min)) {
        fail_at(p, pos, "bad repetition count");
        return false;
    }
    size_t sym_len = out->n - last;
    elem *sym = malloc(sym_len * sizeof *sym);
    if (!sym) {
        fail_at(p, pos, "out of memory");
        return false;
    }
    memcpy(sym, out->v + last, sym_len * sizeof *sym);
    bool ok = true;
    if (min == 0)
        out->n = last;
    for (long i = 1; i < min && ok; i++)
        for (size_t j = 0; j < sym_len && ok; j++)
            ok = elems_push(out, sym[j].type, sym[j].value);
    long n_opt = max < 0 ? 1 : max - min;
    uint32_t last_rule = 0;
    for (long i = 0; i < n_opt && ok; i++) {
        uint32_t id = add_symbol(p, NULL, 0);
        if (id == UINT32_MAX) {
            free(sym);
            return false;
        }
        elems rule = {0};
        for (size_t j = 0; j < sym_len && ok; j++)
            ok = elems_push(&rule, sym[j].type, sym[j].value);
        if (ok && (i > 0 || max < 0))
            ok = elems_push(&rule, ELEM_RULE_REF, max < 0 ? id : last_rule);
        ok = ok && elems_push(&rule, ELEM_ALT, 0) && elems_push(&rule, ELEM_END, 0);
        p->rules[id] = rule;
        p->defined[id] = true;
        last_rule = id;
    }
    if (ok && n_opt > 0)
        ok = elems_push(out, ELEM_RULE_REF, last_rule);
    free(sym);
    if (!ok)
        fail_at(p, pos, "out of memory");
    return ok;
}

static const char *parse_alternatives(parser *p, const char *pos, uint32_t rule_id, bool nested,
                                      int depth);

static const char *parse_count(parser *p, const char *pos, long *value)
{
    if (*pos < '0' || *pos > '9')
        return fail_at(p, pos, "expecting a number");
    long v = 0;
    while (*pos >= '0' && *pos <= '9') {
        v = v * 10 + (*pos++ - '0');
        if (v > MAX_REPEAT)
            return fail_at(p, pos, "bad repetition count");
    }
    *value = v;
    return pos;
}

static const char *parse_sequence(parser *p, const char *pos, elems *out, bool nested, int depth)
{
    size_t last = out->n;
    bool ok = true;
    while (*pos && ok) {
        if (*pos == '"') {
            last = out->n;
            for (pos++; *pos != '"';) {
                uint32_t cp;
                if (!*pos || *pos == '\n' || !(pos = parse_char(p, pos, &cp)))
                    return fail_at(p, pos ? pos : p->src, "unterminated literal");
                ok = elems_push(out, ELEM_CHAR, cp);
            }
            pos = skip_space(pos + 1, nested);
        } else if (*pos == '[') {
            elem_type start = ELEM_CHAR;
            if (*++pos == '^') {
                start = ELEM_CHAR_NOT;
                pos++;
            }
            last = out->n;
            while (*pos != ']' && ok) {
                uint32_t cp;
                if (!*pos || *pos == '\n' || !(pos = parse_char(p, pos, &cp)))
                    return fail_at(p, pos ? pos : p->src, "unterminated character class");
                ok = elems_push(out, last < out->n ? ELEM_CHAR_ALT : start, cp);
                if (ok && pos[0] == '-' && pos[1] && pos[1] != ']' && pos[1] != '\n') {
                    if (!(pos = parse_char(p, pos + 1, &cp)))
                        return NULL;
                    ok = elems_push(out, ELEM_CHAR_RNG_UPPER, cp);
                }
            }
            if (last == out->n)
                return fail_at(p, pos, "empty character class");
            pos = skip_space(pos + 1, nested);
        } else if (is_word_char(*pos)) {
            const char *end = pos;
            while (is_word_char(*end))
                end++;
            uint32_t id = symbol_id(p, pos, (size_t)(end - pos));
            if (id == UINT32_MAX)
                return NULL;
            last = out->n;
            ok = elems_push(out, ELEM_RULE_REF, id);
            pos = skip_space(end, nested);
        } else if (*pos == '(') {
            if (depth >= MAX_NESTING)
                return fail_at(p, pos, "groups nested too deep");
            uint32_t id = add_symbol(p, NULL, 0);
            if (id == UINT32_MAX)
                return NULL;
            p->defined[id] = true;
            if (!(pos = parse_alternatives(p, skip_space(pos + 1, true), id, true, depth + 1)))
                return NULL;
            if (*pos != ')')
                return fail_at(p, pos, "expecting ')'");
            last = out->n;
            ok = elems_push(out, ELEM_RULE_REF, id);
            pos = skip_space(pos + 1, nested);
        } else if (*pos == '.') {
            last = out->n;
            ok = elems_push(out, ELEM_CHAR_ANY, 0);
            pos = skip_space(pos + 1, nested);
        } else if (*pos == '*' || *pos == '+' || *pos == '?') {
            long min = *pos == '+', max = *pos == '?' ? 1 : -1;
            if (!repeat_symbol(p, pos, out, last, min, max))
                return NULL;
            pos = skip_space(pos + 1, nested);
        } else if (*pos == '{') {
            long min, max;
            const char *at = pos;
            if (!(pos = parse_count(p, skip_space(pos + 1, nested), &min)))
                return NULL;
            pos = skip_space(pos, nested);
            max = min;
            if (*pos == ',') {
                pos = skip_space(pos + 1, nested);
                max = -1;
                if (*pos >= '0' && *pos <= '9' && !(pos = parse_count(p, pos, &max)))
                    return NULL;
                pos = skip_space(pos, nested);
            }
            if (*pos != '}')
                return fail_at(p, pos, "expecting '}'");
            if (!repeat_symbol(p, at, out, last, min, max))
                return NULL;
            pos = skip_space(pos + 1, nested);
        } else {
            break;
        }
    }
    return ok ? pos : fail_at(p, pos, "out of memory");
}

static const char *parse_alternatives(parser *p, const char *pos, uint32_t rule_id, bool nested,
                                      int depth)
{
    elems rule = {0};
    pos = parse_sequence(p, pos, &rule, nested, depth);
    while (pos && *pos == '|') {
        if (!elems_push(&rule, ELEM_ALT, 0)) {
            pos = fail_at(p, pos, "out of memory");
            break;
        }
        pos = parse_sequence(p, skip_space(pos + 1, true), &rule, nested, depth);
    }
    if (pos && !elems_push(&rule, ELEM_END, 0))
        pos = fail_at(p, pos, "out of memory");
    if (!pos) {
        free(rule.v);
        return NULL;
    }
    free(p->rules[rule_id].v);
    p->rules[rule_id] = rule;
    return pos;
}

static const char *parse_rule(parser *p, const char *pos)
{
    const char *end = pos;
    while (is_word_char(*end))
        end++;
    if (end == pos)
        return fail_at(p, pos, "expecting a rule name");
    uint32_t id = symbol_id(p, pos, (size_t)(end - pos));
    if (id == UINT32_MAX)
        return NULL;
    if (p->defined[id])
        return fail_at(p, pos, "rule defined twice");
    p->defined[id] = true;
    pos = skip_space(end, false);
    if (strncmp(pos, "::=", 3) != 0)
        return fail_at(p, pos, "expecting ::=");
    if (!(pos = parse_alternatives(p, skip_space(pos + 3, true), id, false, 0)))
        return NULL;
    if (*pos == '\r')
        pos++;
    if (*pos == '\n')
        pos++;
    else if (*pos)
        return fail_at(p, pos, "expecting the end of the rule");
    return skip_space(pos, true);
}

static void parser_free(parser *p)
{
    for (size_t i = 0; i < p->n; i++) {
        free(p->names[i]);
        free(p->rules[i].v);
    }
    free(p->names);
    free(p->rules);
    free(p->defined);
}

/*
 * A start rule taking one optional whitespace character, then either opening or the rule
 * root: the rule's id, or UINT32_MAX (p failed). One at most: a model that likes
 * whitespace would otherwise pad forever before deciding.
 */
static uint32_t add_opening(parser *p, const char *opening, uint32_t root)
{
    uint32_t id = add_symbol(p, NULL, 0);
    if (id == UINT32_MAX)
        return id;
    p->defined[id] = true;
    size_t len = strlen(opening);
    uint32_t *cps = malloc((len ? len : 1) * sizeof *cps);
    utf8_state state = {0, 0};
    size_t n = cps ? decode_utf8(opening, len, &state, cps) : 0;
    elems rule = {0};
    bool ok = cps && state.remain == 0 && n > 0;
    if (!cps) {
        fail_at(p, p->src, "out of memory");
    } else if (!ok) {
        corral_error_set(p->err, "grammar: the opening text is not UTF-8");
        p->failed = true;
    }
    uint32_t ws = ok ? add_symbol(p, NULL, 0) : UINT32_MAX;
    if (ws != UINT32_MAX) { /* ws ::= [ \t\n\r] | */
        elems w = {0};
        p->defined[ws] = true;
        ok = elems_push(&w, ELEM_CHAR, ' ') && elems_push(&w, ELEM_CHAR_ALT, '\t') &&
             elems_push(&w, ELEM_CHAR_ALT, '\n') && elems_push(&w, ELEM_CHAR_ALT, '\r') &&
             elems_push(&w, ELEM_ALT, 0) && elems_push(&w, ELEM_END, 0);
        p->rules[ws] = w;
        ok = ok && elems_push(&rule, ELEM_RULE_REF, ws);
        for (size_t i = 0; i < n && ok; i++)
            ok = elems_push(&rule, ELEM_CHAR, cps[i]);
        ok = ok && elems_push(&rule, ELEM_ALT, 0) && elems_push(&rule, ELEM_RULE_REF, ws) &&
             elems_push(&rule, ELEM_RULE_REF, root) && elems_push(&rule, ELEM_END, 0);
        if (!ok)
            fail_at(p, p->src, "out of memory");
    }
    free(cps);
    p->rules[id] = rule;
    return p->failed ? UINT32_MAX : id;
}

/* Parse gbnf into g's rules, starting at root, or (opening non-NULL) at add_opening's rule;
 * false with err. */
static bool parse_grammar(corral_grammar *g, const char *gbnf, const char *opening,
                          corral_error *err)
{
    parser p = {.src = gbnf, .err = err};
    const char *pos = skip_space(gbnf, true);
    while (pos && *pos)
        pos = parse_rule(&p, pos);
    for (size_t i = 0; i < p.n && !p.failed; i++)
        if (!p.defined[i]) {
            corral_error_set(err, "grammar: undefined rule '%s'", p.names[i]);
            p.failed = true;
        }
    uint32_t root = UINT32_MAX;
    for (size_t i = 0; i < p.n && !p.failed; i++)
        if (p.names[i] && strcmp(p.names[i], "root") == 0)
            root = (uint32_t)i;
    if (!p.failed && root == UINT32_MAX) {
        corral_error_set(err, "grammar: no rule named 'root'");
        p.failed = true;
    }
    if (!p.failed && opening)
        root = add_opening(&p, opening, root);
    if (p.failed) {
        parser_free(&p);
        return false;
    }
    for (size_t i = 0; i < p.n; i++)
        free(p.names[i]);
    free(p.names);
    free(p.defined);
    g->rules = p.rules;
    g->n_rules = p.n;
    g->root = root;
    return true;
}

/* What the mask needs of the vocabulary: its trie (built once per vocabulary), its
 * end-of-generation tokens and room for the masks. */
static bool prepare_mask(corral_grammar *g, corral_error *err)
{
    g->n_vocab = corral_vocab_n_tokens(g->vocab);
    g->n_words = (g->n_vocab + 63) / 64;
    size_t n_eog = 0;
    for (size_t id = 0; id < g->n_vocab; id++)
        n_eog += corral_vocab_is_eog(g->vocab, (corral_token)id);
    g->eog = malloc((n_eog ? n_eog : 1) * sizeof *g->eog);
    g->bits = malloc((g->n_words ? g->n_words : 1) * sizeof *g->bits);
    g->walk_bits = malloc((g->n_words ? g->n_words : 1) * sizeof *g->walk_bits);
    g->max_ids = (uint32_t)(g->n_words / 2);
    g->walk_ids = malloc((g->max_ids ? g->max_ids : 1) * sizeof *g->walk_ids);
    g->walk_order = calloc(g->n_words ? g->n_words : 1, sizeof *g->walk_order);
    g->order_first = UINT32_MAX;
    g->list_max = g->n_vocab / 8;
    g->trie = token_trie_of(g->vocab);
    if (!g->eog || !g->bits || !g->walk_bits || !g->walk_ids || !g->walk_order || !g->trie ||
        !interned_init(&g->in)) {
        corral_error_set(err, "out of memory");
        return false;
    }
    for (size_t id = 0; id < g->n_vocab; id++)
        if (corral_vocab_is_eog(g->vocab, (corral_token)id))
            g->eog[g->n_eog++] = (corral_token)id;
    return true;
}

static corral_grammar *create(const char *gbnf, const char *opening, const corral_vocab *vocab,
                              corral_error *err)
{
    corral_grammar *g = calloc(1, sizeof *g);
    if (!g) {
        corral_error_set(err, "out of memory");
        return NULL;
    }
    g->vocab = vocab;
    g->source = strdup(gbnf);
    g->opening = opening ? strdup(opening) : NULL;
    if (!g->source || (opening && !g->opening)) {
        corral_error_set(err, "out of memory");
        corral_grammar_free(g);
        return NULL;
    }
    g->end_token = vocab ? corral_vocab_eos(vocab) : -1;
    size_t n_tokens = vocab ? corral_vocab_n_tokens(vocab) : 0;
    for (size_t id = 0; g->end_token < 0 && id < n_tokens; id++)
        if (corral_vocab_is_eog(vocab, (corral_token)id))
            g->end_token = (corral_token)id;
    if (!parse_grammar(g, gbnf, opening, err) || (vocab && !prepare_mask(g, err))) {
        corral_grammar_free(g);
        return NULL;
    }
    if (!initial_stacks(g, &g->stacks)) {
        corral_error_set(err,
                         "grammar: the rules expand without end or too widely (left recursion?)");
        corral_grammar_free(g);
        return NULL;
    }
    return g;
}

corral_grammar *corral_grammar_create(const char *gbnf, const corral_vocab *vocab,
                                      corral_error *err)
{
    return create(gbnf, NULL, vocab, err);
}

corral_grammar *corral_grammar_create_opening(const char *gbnf, const char *opening,
                                              const corral_vocab *vocab, corral_error *err)
{
    return create(gbnf, opening, vocab, err);
}

bool corral_grammar_restart(corral_grammar *g)
{
    stack_set_clear(&g->stacks);
    g->partial = 0;
    g->partial_remain = 0;
    return initial_stacks(g, &g->stacks);
}

const char *corral_grammar_source(const corral_grammar *g, const char **opening)
{
    *opening = g->opening;
    return g->source;
}

size_t corral_grammar_kept_bytes(const corral_grammar *g)
{
    const interned *in = &g->in;
    return in->masks_bytes + in->masks_cap * sizeof *in->masks +
           (size_t)in->cap * sizeof *in->v + (size_t)in->n_buckets * sizeof *in->buckets +
           in->pool_cap * sizeof *in->next_pool + set_cache_bytes(&g->sets);
}

void grammar_limit_sets(corral_grammar *g, uint32_t max_sets)
{
    set_cache_free(&g->sets);
    g->sets.max_sets = max_sets;
}

void grammar_limit_list(corral_grammar *g, size_t max_ids)
{
    g->list_max = max_ids;
}

size_t grammar_trie_visits(const corral_grammar *g)
{
    return g->trie_visits;
}

size_t grammar_masks_reused(const corral_grammar *g)
{
    return g->masks_reused;
}

void corral_grammar_free(corral_grammar *g)
{
    if (!g)
        return;
    free(g->source);
    free(g->opening);
    for (size_t i = 0; i < g->n_rules; i++)
        free(g->rules[i].v);
    free(g->rules);
    stack_set_free(&g->stacks);
    free(g->eog);
    free(g->bits);
    free(g->listed);
    free(g->walk_bits);
    free(g->walk_ids);
    free(g->walk_order);
    interned_free(&g->in);
    set_cache_free(&g->sets);
    free(g->walk_sets);
    free(g->bits_stacks);
    free(g);
}

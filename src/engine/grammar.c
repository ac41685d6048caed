/*
 * Grammar-constrained decoding, as llama.cpp does it: GBNF text parsed into rules of
 * elements (literals and character classes become code-point elements, groups and
 * repetitions become rules of their own), and a pushdown matcher whose state is the set of
 * parse stacks the text so far may be in, each stack's top a character element still to
 * match. A token is allowed when each of its code points advances some stack in turn; the
 * candidates of a whole vocabulary are filtered stack by stack, each code point checked once
 * per stack (llama.cpp's reject_candidates). A UTF-8 character split across tokens is
 * carried as a partial code point.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar.h"

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
    MAX_STACKS = 4096,
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
    size_t expansions; /* expand calls made to fill it */
    bool failed;       /* out of memory, or a limit reached */
} stack_set;

static void stack_set_clear(stack_set *set)
{
    for (size_t i = 0; i < set->n; i++)
        free(set->v[i].e);
    set->n = 0;
    set->expansions = 0;
    set->failed = false;
}

static void stack_set_free(stack_set *set)
{
    stack_set_clear(set);
    free(set->v);
    *set = (stack_set){0};
}

static bool stack_equal(const stack *a, const elem *const *e, size_t n)
{
    return a->n == n && (n == 0 || memcmp(a->e, e, n * sizeof *e) == 0);
}

/* Add a copy of e[0..n) unless the set has it. */
static void stack_set_add(stack_set *set, const elem *const *e, size_t n)
{
    for (size_t i = 0; i < set->n; i++)
        if (stack_equal(&set->v[i], e, n))
            return;
    if (set->n == MAX_STACKS) {
        set->failed = true;
        return;
    }
    if (set->n == set->cap) {
        size_t cap = set->cap ? 2 * set->cap : 8;
        stack *grown = realloc(set->v, cap * sizeof *grown);
        if (!grown) {
            set->failed = true;
            return;
        }
        set->v = grown;
        set->cap = cap;
    }
    const elem **copy = malloc((n ? n : 1) * sizeof *copy);
    if (!copy) {
        set->failed = true;
        return;
    }
    if (n)
        memcpy(copy, e, n * sizeof *copy);
    set->v[set->n++] = (stack){copy, n};
}

struct corral_grammar {
    elems *rules; /* by rule id, each ending in ELEM_END */
    size_t n_rules;
    uint32_t root;
    stack_set stacks;    /* the current state */
    uint32_t partial;    /* bits of a code point split across tokens */
    int partial_remain;  /* its continuation bytes still to come (0: none) */
    /* the vocabulary's tokens as code points (decoded from no partial state) */
    const corral_vocab *vocab;
    size_t n_vocab;
    uint32_t *cp_pool;
    size_t *cp_start;      /* token id -> offset in cp_pool; n_vocab + 1 entries */
    int8_t *token_remain;  /* continuation bytes its text ends short of; -1: not allowed */
    uint32_t *token_partial;
    size_t piece_bytes;    /* all tokens' text */
    corral_token end_token;
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

/* Could some code point that starts with the partial bytes (value, remain) match pos? */
static bool match_partial_char(const elem *pos, uint32_t value, int remain)
{
    if (remain < 0 || (remain == 1 && value < 2)) /* invalid, or an overlong 2-byte form */
        return false;
    if (pos->type == ELEM_CHAR_ANY)
        return true;
    uint32_t low = value << (6 * remain);
    uint32_t high = low | ((1u << (6 * remain)) - 1);
    if (low == 0) /* the shortest form of the sequence's length */
        low = remain == 2 ? 1u << 11 : remain == 3 ? 1u << 16 : 0;
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

/* The stacks after matching cp from each of in's stacks. */
static void accept_code_point(const corral_grammar *g, const stack_set *in, uint32_t cp,
                              stack_set *out)
{
    for (size_t i = 0; i < in->n && !out->failed; i++) {
        const stack *s = &in->v[i];
        const elem *after;
        if (s->n == 0 || !match_char(s->e[s->n - 1], cp, &after))
            continue;
        const elem **next = malloc(s->n * sizeof *next);
        if (!next) {
            out->failed = true;
            return;
        }
        memcpy(next, s->e, (s->n - 1) * sizeof *next);
        size_t n = s->n - 1;
        if (!is_end_of_sequence(after))
            next[n++] = after;
        expand(g, next, n, out, 0);
        free(next);
    }
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
                             const candidate *cands, size_t n, bool *failed);

/* Those of cands that stack cannot take, each as it was given. */
static candidates reject_for_stack(const corral_grammar *g, const stack *s,
                                   const candidate *cands, size_t n, bool *failed)
{
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
        }
        candidates deeper = reject_all(g, &after_stacks, next, n_next, failed);
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

/* Those of cands that no stack of stacks can take. */
static candidates reject_all(const corral_grammar *g, const stack_set *stacks,
                             const candidate *cands, size_t n, bool *failed)
{
    candidates rejects = {malloc((n ? n : 1) * sizeof *rejects.v), n};
    if (!rejects.v) {
        *failed = true;
        return (candidates){0};
    }
    if (n)
        memcpy(rejects.v, cands, n * sizeof *rejects.v);
    for (size_t i = 0; i < stacks->n && rejects.n > 0 && !*failed; i++) {
        candidates fewer = reject_for_stack(g, &stacks->v[i], rejects.v, rejects.n, failed);
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
 * one (control tokens, invalid UTF-8). Within a split character its code points are decoded
 * into scratch, which has room for as many as the token has bytes. */
static bool token_candidate(const corral_grammar *g, corral_token id, uint32_t *scratch,
                            candidate *c)
{
    if (g->partial_remain == 0) {
        if (g->token_remain[id] < 0)
            return false;
        *c = (candidate){id, g->cp_pool + g->cp_start[id], g->cp_start[id + 1] - g->cp_start[id],
                         g->token_partial[id], g->token_remain[id]};
        return true;
    }
    char piece[256];
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
    uint32_t scratch[256];
    candidate c;
    if (!token_candidate(g, id, scratch, &c) || (c.n_cps == 0 && c.partial_remain == 0))
        return false;
    bool failed = false;
    candidates rejects = reject_all(g, &g->stacks, &c, 1, &failed);
    bool allowed = !failed && rejects.n == 0;
    free(rejects.v);
    return allowed;
}

/*
 * Every token with a finite logit as a candidate into cands; false when out of memory. Within
 * a split character, each token's code points are decoded afresh into *pool, which has room
 * for all: a token decodes to at most as many code points as it has bytes.
 */
static bool collect_candidates(const corral_grammar *g, const float *logits, candidate *cands,
                               size_t *n_cands, uint32_t **pool)
{
    size_t n = 0, used = 0;
    if (g->partial_remain && !(*pool = malloc((g->piece_bytes + 1) * sizeof **pool)))
        return false;
    for (size_t id = 0; id < g->n_vocab; id++) {
        if (logits[id] == -INFINITY || corral_vocab_is_eog(g->vocab, (corral_token)id))
            continue;
        candidate c;
        if (!token_candidate(g, (corral_token)id, *pool ? *pool + used : NULL, &c) ||
            (c.n_cps == 0 && c.partial_remain == 0))
            continue;
        if (*pool)
            used += c.n_cps;
        cands[n++] = c;
    }
    *n_cands = n;
    return true;
}

bool grammar_mask(corral_grammar *g, float *logits)
{
    candidate *cands = malloc((g->n_vocab ? g->n_vocab : 1) * sizeof *cands);
    bool *keep = calloc(g->n_vocab ? g->n_vocab : 1, sizeof *keep);
    uint32_t *pool = NULL;
    size_t n = 0;
    bool failed = !cands || !keep || !collect_candidates(g, logits, cands, &n, &pool);
    candidates rejects = {0};
    if (!failed)
        rejects = reject_all(g, &g->stacks, cands, n, &failed);
    bool any = false;
    if (!failed) {
        bool complete = is_complete(&g->stacks);
        for (size_t id = 0; id < g->n_vocab; id++)
            if (logits[id] != -INFINITY && corral_vocab_is_eog(g->vocab, (corral_token)id))
                keep[id] = complete;
        for (size_t i = 0; i < n; i++)
            keep[cands[i].id] = true;
        for (size_t i = 0; i < rejects.n; i++)
            keep[rejects.v[i].id] = false;
        for (size_t id = 0; id < g->n_vocab && !any; id++)
            any = keep[id];
        if (any)
            for (size_t id = 0; id < g->n_vocab; id++)
                if (!keep[id])
                    logits[id] = -INFINITY;
    }
    free(rejects.v);
    free(cands);
    free(pool);
    free(keep);
    return any;
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
    for (size_t i = 0; i < n && ok; i++) {
        stack_set next = {0};
        accept_code_point(g, stacks, cps[i], &next);
        ok = !next.failed && next.n > 0;
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

/* Parse gbnf into g's rules; false with err. */
static bool parse_grammar(corral_grammar *g, const char *gbnf, corral_error *err)
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

/* Each token's text as code points from no partial state, for the candidate filter. */
static bool index_vocab(corral_grammar *g, corral_error *err)
{
    g->n_vocab = corral_vocab_n_tokens(g->vocab);
    g->cp_start = malloc((g->n_vocab + 1) * sizeof *g->cp_start);
    g->token_remain = malloc(g->n_vocab ? g->n_vocab : 1);
    g->token_partial = malloc((g->n_vocab ? g->n_vocab : 1) * sizeof *g->token_partial);
    size_t cap = 4 * g->n_vocab + 16, used = 0;
    g->cp_pool = malloc(cap * sizeof *g->cp_pool);
    bool ok = g->cp_start && g->token_remain && g->token_partial && g->cp_pool;
    for (size_t id = 0; id < g->n_vocab && ok; id++) {
        char piece[256];
        size_t len = corral_token_to_piece(g->vocab, (corral_token)id, piece, sizeof piece,
                                           false);
        g->cp_start[id] = used;
        if (len > sizeof piece || len == 0) {
            g->token_remain[id] = -1;
            continue;
        }
        if (cap - used < len) {
            cap = 2 * cap + len;
            uint32_t *grown = realloc(g->cp_pool, cap * sizeof *grown);
            if (!(ok = grown != NULL))
                break;
            g->cp_pool = grown;
        }
        g->piece_bytes += len;
        utf8_state state = {0, 0};
        used += decode_utf8(piece, len, &state, g->cp_pool + used);
        g->token_remain[id] = (int8_t)state.remain;
        g->token_partial[id] = state.value;
        if (state.remain < 0)
            used = g->cp_start[id];
    }
    if (ok)
        g->cp_start[g->n_vocab] = used;
    else
        corral_error_set(err, "out of memory");
    return ok;
}

corral_grammar *corral_grammar_create(const char *gbnf, const corral_vocab *vocab,
                                      corral_error *err)
{
    corral_grammar *g = calloc(1, sizeof *g);
    if (!g) {
        corral_error_set(err, "out of memory");
        return NULL;
    }
    g->vocab = vocab;
    g->end_token = vocab ? corral_vocab_eos(vocab) : -1;
    size_t n_tokens = vocab ? corral_vocab_n_tokens(vocab) : 0;
    for (size_t id = 0; g->end_token < 0 && id < n_tokens; id++)
        if (corral_vocab_is_eog(vocab, (corral_token)id))
            g->end_token = (corral_token)id;
    if (!parse_grammar(g, gbnf, err) || (vocab && !index_vocab(g, err))) {
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

void corral_grammar_free(corral_grammar *g)
{
    if (!g)
        return;
    for (size_t i = 0; i < g->n_rules; i++)
        free(g->rules[i].v);
    free(g->rules);
    stack_set_free(&g->stacks);
    free(g->cp_pool);
    free(g->cp_start);
    free(g->token_remain);
    free(g->token_partial);
    free(g);
}

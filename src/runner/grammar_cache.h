/*
 * The grammars of recent requests, kept for the next request that asks for the same one. A
 * grammar's masks are worked out as it goes (the token trie walked with each new stack of
 * the grammar, the result kept), and the first walks of a JSON schema's broad stacks cost
 * milliseconds each at a 128k vocabulary; a client that sends the same `format` on every
 * request would pay them every time. A kept grammar restarts with that work done.
 *
 * Each grammar is used by one request at a time: taking one removes it from the cache, and
 * two requests at once with the same text get two grammars (the one given back last with
 * the more work kept stays). Bounded by count and by the bytes of kept work; the least
 * recently given back goes first. Thread-safe.
 */
#ifndef CORRAL_RUNNER_GRAMMAR_CACHE_H
#define CORRAL_RUNNER_GRAMMAR_CACHE_H

#include <stdbool.h>
#include <stddef.h>

#include "corral/engine.h"

enum {
    GRAMMAR_CACHE_ENTRIES = 8,
    GRAMMAR_CACHE_BYTES = 64 << 20, /* four grammars at their own limit of kept masks */
};

typedef struct grammar_cache grammar_cache;

/* NULL when memory runs out. */
grammar_cache *grammar_cache_create(size_t max_entries, size_t max_bytes);
void grammar_cache_free(grammar_cache *cache);

/*
 * The grammar of gbnf (and opening: NULL for corral_grammar_create, else
 * corral_grammar_create_opening) for vocab, at its start: a kept one if the cache has it,
 * else a new one. The caller owns it until grammar_cache_give. NULL with err as the
 * create functions.
 */
corral_grammar *grammar_cache_take(grammar_cache *cache, const char *gbnf, const char *opening,
                                   const corral_vocab *vocab, corral_error *err);

/* Keep grammar (from grammar_cache_take, used or not) for a later request, or free it when
 * it does not fit. NULL does nothing. */
void grammar_cache_give(grammar_cache *cache, corral_grammar *grammar);

/* Requests served by a kept grammar, and by a new one (for tests). */
void grammar_cache_counts(grammar_cache *cache, size_t *kept, size_t *made);

#endif

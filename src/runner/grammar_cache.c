/*
 * Recent requests' grammars kept for the next one with the same text (grammar_cache.h): a
 * short array in order of giving back, the oldest first, searched by text.
 */
#include "grammar_cache.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct grammar_cache {
    pthread_mutex_t lock;
    size_t max_entries, max_bytes;
    corral_grammar **kept; /* oldest first */
    size_t *bytes;         /* each one's corral_grammar_kept_bytes when given back */
    size_t n, total_bytes;
    size_t n_kept_served, n_made;
};

grammar_cache *grammar_cache_create(size_t max_entries, size_t max_bytes)
{
    grammar_cache *cache = calloc(1, sizeof *cache);
    if (!cache)
        return NULL;
    cache->kept = calloc(max_entries ? max_entries : 1, sizeof *cache->kept);
    cache->bytes = calloc(max_entries ? max_entries : 1, sizeof *cache->bytes);
    if (!cache->kept || !cache->bytes) {
        free(cache->kept);
        free(cache->bytes);
        free(cache);
        return NULL;
    }
    cache->max_entries = max_entries;
    cache->max_bytes = max_bytes;
    pthread_mutex_init(&cache->lock, NULL);
    return cache;
}

void grammar_cache_free(grammar_cache *cache)
{
    if (!cache)
        return;
    for (size_t i = 0; i < cache->n; i++)
        corral_grammar_free(cache->kept[i]);
    pthread_mutex_destroy(&cache->lock);
    free(cache->kept);
    free(cache->bytes);
    free(cache);
}

/* Take entry i out, keeping the order of the rest; the caller holds the lock. */
static corral_grammar *remove_entry(grammar_cache *cache, size_t i)
{
    corral_grammar *grammar = cache->kept[i];
    cache->total_bytes -= cache->bytes[i];
    memmove(cache->kept + i, cache->kept + i + 1, (cache->n - i - 1) * sizeof *cache->kept);
    memmove(cache->bytes + i, cache->bytes + i + 1, (cache->n - i - 1) * sizeof *cache->bytes);
    cache->n--;
    return grammar;
}

static bool same_text(const char *a, const char *b)
{
    return a && b ? strcmp(a, b) == 0 : a == b;
}

/* Was grammar made from gbnf and opening? */
static bool made_from(const corral_grammar *grammar, const char *gbnf, const char *opening)
{
    const char *its_opening;
    const char *its_gbnf = corral_grammar_source(grammar, &its_opening);
    return same_text(its_gbnf, gbnf) && same_text(its_opening, opening);
}

/* The index of the kept grammar of this text, or n; the caller holds the lock. */
static size_t find(const grammar_cache *cache, const char *gbnf, const char *opening)
{
    for (size_t i = 0; i < cache->n; i++)
        if (made_from(cache->kept[i], gbnf, opening))
            return i;
    return cache->n;
}

corral_grammar *grammar_cache_take(grammar_cache *cache, const char *gbnf, const char *opening,
                                   const corral_vocab *vocab, corral_error *err)
{
    pthread_mutex_lock(&cache->lock);
    size_t i = find(cache, gbnf, opening);
    corral_grammar *grammar = i < cache->n ? remove_entry(cache, i) : NULL;
    if (grammar)
        cache->n_kept_served++;
    else
        cache->n_made++;
    pthread_mutex_unlock(&cache->lock);
    if (grammar && corral_grammar_restart(grammar))
        return grammar;
    corral_grammar_free(grammar); /* a restart that ran out of memory: start afresh */
    return opening ? corral_grammar_create_opening(gbnf, opening, vocab, err)
                   : corral_grammar_create(gbnf, vocab, err);
}

void grammar_cache_give(grammar_cache *cache, corral_grammar *grammar)
{
    if (!grammar)
        return;
    size_t bytes = corral_grammar_kept_bytes(grammar);
    if (bytes > cache->max_bytes || cache->max_entries == 0) {
        corral_grammar_free(grammar);
        return;
    }
    const char *opening;
    const char *gbnf = corral_grammar_source(grammar, &opening);
    pthread_mutex_lock(&cache->lock);
    /* one grammar per text: of two requests that ran the same one at once, the more worked */
    size_t i = find(cache, gbnf, opening);
    if (i < cache->n && cache->bytes[i] > bytes) {
        pthread_mutex_unlock(&cache->lock);
        corral_grammar_free(grammar);
        return;
    }
    if (i < cache->n)
        corral_grammar_free(remove_entry(cache, i));
    while (cache->n > 0 &&
           (cache->n == cache->max_entries || cache->total_bytes + bytes > cache->max_bytes))
        corral_grammar_free(remove_entry(cache, 0));
    cache->kept[cache->n] = grammar;
    cache->bytes[cache->n++] = bytes;
    cache->total_bytes += bytes;
    pthread_mutex_unlock(&cache->lock);
}

void grammar_cache_counts(grammar_cache *cache, size_t *kept, size_t *made)
{
    pthread_mutex_lock(&cache->lock);
    *kept = cache->n_kept_served;
    *made = cache->n_made;
    pthread_mutex_unlock(&cache->lock);
}

/*
 * The two lookups a vocabulary needs on the hot path: token text -> id and BPE merge
 * (left, right) -> rank. Open-addressing tables over strings that live elsewhere (the GGUF map
 * or the vocabulary), built once at load and read-only afterwards, so any number of threads
 * may look up at once.
 */
#ifndef CORRAL_ENGINE_VOCAB_MAP_H
#define CORRAL_ENGINE_VOCAB_MAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A byte string owned by someone else. */
typedef struct vocab_text {
    const char *data;
    uint32_t size;
} vocab_text;

typedef struct map_slot {
    uint32_t hash;
    uint32_t index_plus1; /* 0 = empty */
} map_slot;

/* token text -> id over texts[0..n). */
typedef struct token_map {
    const vocab_text *texts;
    map_slot *slots;
    uint32_t mask;
} token_map;

/*
 * Build the map; false when out of memory. *duplicate_id is set to the first id whose text
 * equals an earlier one (the map then keeps the earlier), or -1.
 */
bool token_map_init(token_map *map, const vocab_text *texts, uint32_t n, int64_t *duplicate_id);
void token_map_free(token_map *map);
/* Id of the token whose text is s[0..len), or -1. */
int32_t token_map_find(const token_map *map, const char *s, size_t len);

typedef struct merge_pair {
    vocab_text left;
    vocab_text right;
} merge_pair;

/* (left, right) -> rank over pairs[0..n); rank = index, a later duplicate keeps the earlier. */
typedef struct merge_map {
    const merge_pair *pairs;
    map_slot *slots;
    uint32_t mask;
} merge_map;

bool merge_map_init(merge_map *map, const merge_pair *pairs, uint32_t n);
void merge_map_free(merge_map *map);
/* Rank of the merge left+right, or -1. */
int32_t merge_map_find(const merge_map *map, const char *left, size_t left_len,
                       const char *right, size_t right_len);

#endif

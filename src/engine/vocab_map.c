/*
 * Token and merge hash tables (vocab_map.h). Linear probing at <= 50% load; each slot keeps
 * the full 32-bit hash so most mismatches are rejected without touching the key bytes.
 */
#include "vocab_map.h"

#include <stdlib.h>
#include <string.h>

/* FNV-1a over the bytes, continuing from h, with a final avalanche in map_hash_finish. */
static uint32_t hash_bytes(uint32_t h, const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)s[i];
        h *= 16777619u;
    }
    return h;
}

static uint32_t hash_finish(uint32_t h)
{
    h ^= h >> 16;
    h *= 0x7feb352du;
    h ^= h >> 15;
    h *= 0x846ca68bu;
    h ^= h >> 16;
    return h;
}

#define HASH_SEED 2166136261u

static uint32_t hash_text(const char *s, size_t len)
{
    return hash_finish(hash_bytes(HASH_SEED, s, len));
}

/* The separator makes ("ab","c") and ("a","bc") hash apart. */
static uint32_t hash_pair(const char *l, size_t l_len, const char *r, size_t r_len)
{
    uint32_t h = hash_bytes(HASH_SEED, l, l_len);
    h = (h ^ 0x1Fu) * 16777619u;
    return hash_finish(hash_bytes(h, r, r_len));
}

/* Slots for n keys at <= 50% load; NULL when n is too large or memory is short. */
static map_slot *alloc_slots(uint32_t n, uint32_t *mask)
{
    uint64_t cap = 16;
    while (cap < (uint64_t)n * 2)
        cap *= 2;
    if (cap > ((uint64_t)1 << 31))
        return NULL;
    *mask = (uint32_t)(cap - 1);
    return calloc((size_t)cap, sizeof(map_slot));
}

static bool text_equals(vocab_text t, const char *s, size_t len)
{
    return t.size == len && (len == 0 || memcmp(t.data, s, len) == 0);
}

bool token_map_init(token_map *map, const vocab_text *texts, uint32_t n, int64_t *duplicate_id)
{
    *duplicate_id = -1;
    map->texts = texts;
    map->slots = alloc_slots(n, &map->mask);
    if (!map->slots)
        return false;
    for (uint32_t id = 0; id < n; id++) {
        uint32_t h = hash_text(texts[id].data, texts[id].size);
        uint32_t i = h & map->mask;
        for (;; i = (i + 1) & map->mask) {
            map_slot *slot = &map->slots[i];
            if (slot->index_plus1 == 0) {
                slot->hash = h;
                slot->index_plus1 = id + 1;
                break;
            }
            if (slot->hash == h &&
                text_equals(texts[slot->index_plus1 - 1], texts[id].data, texts[id].size)) {
                if (*duplicate_id < 0)
                    *duplicate_id = id;
                break;
            }
        }
    }
    return true;
}

void token_map_free(token_map *map)
{
    if (!map)
        return;
    free(map->slots);
    map->slots = NULL;
}

int32_t token_map_find(const token_map *map, const char *s, size_t len)
{
    if (!map->slots)
        return -1;
    uint32_t h = hash_text(s, len);
    for (uint32_t i = h & map->mask;; i = (i + 1) & map->mask) {
        const map_slot *slot = &map->slots[i];
        if (slot->index_plus1 == 0)
            return -1;
        if (slot->hash == h && text_equals(map->texts[slot->index_plus1 - 1], s, len))
            return (int32_t)(slot->index_plus1 - 1);
    }
}

static bool pair_equals(const merge_pair *p, const char *l, size_t l_len, const char *r,
                        size_t r_len)
{
    return text_equals(p->left, l, l_len) && text_equals(p->right, r, r_len);
}

bool merge_map_init(merge_map *map, const merge_pair *pairs, uint32_t n)
{
    map->pairs = pairs;
    map->slots = alloc_slots(n, &map->mask);
    if (!map->slots)
        return false;
    for (uint32_t rank = 0; rank < n; rank++) {
        const merge_pair *p = &pairs[rank];
        if (!p->left.data) /* a line that had no separator: never matches */
            continue;
        uint32_t h = hash_pair(p->left.data, p->left.size, p->right.data, p->right.size);
        for (uint32_t i = h & map->mask;; i = (i + 1) & map->mask) {
            map_slot *slot = &map->slots[i];
            if (slot->index_plus1 == 0) {
                slot->hash = h;
                slot->index_plus1 = rank + 1;
                break;
            }
            if (slot->hash == h && pair_equals(&pairs[slot->index_plus1 - 1], p->left.data,
                                               p->left.size, p->right.data, p->right.size))
                break;
        }
    }
    return true;
}

void merge_map_free(merge_map *map)
{
    if (!map)
        return;
    free(map->slots);
    map->slots = NULL;
}

int32_t merge_map_find(const merge_map *map, const char *left, size_t left_len,
                       const char *right, size_t right_len)
{
    if (!map->slots)
        return -1;
    uint32_t h = hash_pair(left, left_len, right, right_len);
    for (uint32_t i = h & map->mask;; i = (i + 1) & map->mask) {
        const map_slot *slot = &map->slots[i];
        if (slot->index_plus1 == 0)
            return -1;
        if (slot->hash == h &&
            pair_equals(&map->pairs[slot->index_plus1 - 1], left, left_len, right, right_len))
            return (int32_t)(slot->index_plus1 - 1);
    }
}

/* Bump allocator for syntax trees; see arena.h. */
#include "template/arena.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct tarena_block {
    tarena_block *next;
    size_t used;
    size_t size;
    max_align_t data[];
};

enum { TARENA_BLOCK_BYTES = 16384 };

void tarena_init(tarena *a, size_t max_bytes)
{
    a->head = NULL;
    a->used_bytes = 0;
    a->max_bytes = max_bytes;
}

void tarena_free(tarena *a)
{
    if (!a)
        return;
    tarena_block *b = a->head;
    while (b) {
        tarena_block *next = b->next;
        free(b);
        b = next;
    }
    a->head = NULL;
    a->used_bytes = 0;
}

void *tarena_alloc(tarena *a, size_t size)
{
    size_t align = sizeof(max_align_t);
    if (size > a->max_bytes)
        return NULL;
    size = (size + align - 1) & ~(align - 1);
    if (size == 0)
        size = align;
    tarena_block *b = a->head;
    if (!b || b->size - b->used < size) {
        size_t bytes = size > TARENA_BLOCK_BYTES ? size : TARENA_BLOCK_BYTES;
        if (a->used_bytes > a->max_bytes - bytes)
            return NULL;
        b = calloc(1, sizeof *b + bytes);
        if (!b)
            return NULL;
        b->size = bytes;
        b->next = a->head;
        a->head = b;
        a->used_bytes += bytes;
    }
    void *p = (char *)b->data + b->used;
    b->used += size;
    return p;
}

char *tarena_strndup(tarena *a, const char *s, size_t n)
{
    if (n == SIZE_MAX)
        return NULL;
    char *p = tarena_alloc(a, n + 1);
    if (!p)
        return NULL;
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

bool tarena_push(tarena *a, void ***items, size_t *n, size_t *cap, void *item)
{
    if (*n == *cap) {
        size_t new_cap = *cap ? *cap * 2 : 4;
        if (new_cap > SIZE_MAX / sizeof(void *))
            return false;
        void **grown = tarena_alloc(a, new_cap * sizeof(void *));
        if (!grown)
            return false;
        if (*n)
            memcpy(grown, *items, *n * sizeof(void *));
        *items = grown;
        *cap = new_cap;
    }
    (*items)[(*n)++] = item;
    return true;
}

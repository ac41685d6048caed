/*
 * tarena: bump allocator that owns a parsed template's syntax tree, so a tree is freed in
 * one call however the parse ended. Memory is zeroed; the total is capped so a hostile
 * template cannot make the parser exhaust memory.
 */
#ifndef CORRAL_TEMPLATE_ARENA_H
#define CORRAL_TEMPLATE_ARENA_H

#include <stdbool.h>
#include <stddef.h>

typedef struct tarena_block tarena_block;

typedef struct tarena {
    tarena_block *head;
    size_t used_bytes;
    size_t max_bytes;
} tarena;

void tarena_init(tarena *a, size_t max_bytes);
void tarena_free(tarena *a);
void *tarena_alloc(tarena *a, size_t size); /* NULL when over the cap or out of memory */
char *tarena_strndup(tarena *a, const char *s, size_t n);
/* Append one pointer to a growing array kept in the arena (*items, *n); false on failure. */
bool tarena_push(tarena *a, void ***items, size_t *n, size_t *cap, void *item);

#endif

/* Binary min-heap of merge candidates (bigram_queue.h). */
#include "bigram_queue.h"

#include <stdlib.h>

#include "util/checked.h"

static bool before(const bigram *a, const bigram *b)
{
    return a->priority < b->priority || (a->priority == b->priority && a->left < b->left);
}

void bigram_queue_free(bigram_queue *q)
{
    if (!q)
        return;
    free(q->items);
    q->items = NULL;
    q->n = q->cap = 0;
}

bool bigram_queue_push(bigram_queue *q, bigram item)
{
    if (q->n == q->cap) {
        size_t cap = q->cap ? q->cap * 2 : 64, bytes;
        bigram *grown;
        if (!checked_mul_size(cap, sizeof *grown, &bytes) || !(grown = realloc(q->items, bytes)))
            return false;
        q->items = grown;
        q->cap = cap;
    }
    size_t i = q->n++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!before(&item, &q->items[parent]))
            break;
        q->items[i] = q->items[parent];
        i = parent;
    }
    q->items[i] = item;
    return true;
}

bool bigram_queue_pop(bigram_queue *q, bigram *out)
{
    if (q->n == 0)
        return false;
    *out = q->items[0];
    bigram last = q->items[--q->n];
    size_t i = 0;
    for (;;) {
        size_t child = 2 * i + 1;
        if (child >= q->n)
            break;
        if (child + 1 < q->n && before(&q->items[child + 1], &q->items[child]))
            child++;
        if (!before(&q->items[child], &last))
            break;
        q->items[i] = q->items[child];
        i = child;
    }
    if (q->n > 0)
        q->items[i] = last;
    return true;
}

/*
 * The priority queue SPM and BPE merging share: candidate merges of two adjacent symbols,
 * popped by lowest priority, ties to the leftmost pair (llama.cpp's order). SPM queues
 * -score, BPE the merge rank. Entries go stale as symbols merge; the tokenizers check.
 */
#ifndef CORRAL_ENGINE_BIGRAM_QUEUE_H
#define CORRAL_ENGINE_BIGRAM_QUEUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct bigram {
    double priority;
    int32_t left, right; /* symbol indices */
    uint32_t size;       /* bytes of left + right when queued */
} bigram;

/* Zero-initialise; storage is kept between uses. */
typedef struct bigram_queue {
    bigram *items;
    size_t n, cap;
} bigram_queue;

void bigram_queue_free(bigram_queue *q);
static inline void bigram_queue_clear(bigram_queue *q)
{
    q->n = 0;
}
/* False when out of memory. */
bool bigram_queue_push(bigram_queue *q, bigram item);
/* False when empty. */
bool bigram_queue_pop(bigram_queue *q, bigram *out);

#endif

/*
 * Memory on 2 MiB pages for the benchmarks, as a context holds its weights and KV cache, so
 * that figures from memory are the engine's: on 4 KiB pages a Zen 4 core streamed the 1-token
 * Q4_0 kernel at 23.7 GB/s, on huge pages at 28-29 (bench_quant).
 */
#ifndef CORRAL_BENCH_HUGE_PAGES_H
#define CORRAL_BENCH_HUGE_PAGES_H

#include <stdlib.h>
#include <sys/mman.h>

enum { HUGE_PAGE_BYTES = 2u << 20 };

/* bytes rounded up to whole huge pages; free() releases it. NULL when out of memory. */
static inline void *alloc_huge(size_t bytes)
{
    bytes = (bytes + HUGE_PAGE_BYTES - 1) & ~(size_t)(HUGE_PAGE_BYTES - 1);
    void *p = aligned_alloc(HUGE_PAGE_BYTES, bytes);
    if (p)
        madvise(p, bytes, MADV_HUGEPAGE); /* advice only */
    return p;
}

#endif

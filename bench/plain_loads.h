/*
 * Plain reads of a buffer at the widest vector width the CPU has, the benchmarks' yardstick
 * for a kernel's stream (bench_bandwidth, bench_stream): four independent XOR chains per
 * loop, so each is bound by loads, and optionally the kernels' software prefetch
 * (PLAIN_PREFETCH_BYTES ahead, into L2 with prefetcht2).
 */
#ifndef CORRAL_BENCH_PLAIN_LOADS_H
#define CORRAL_BENCH_PLAIN_LOADS_H

#include <immintrin.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* n, the bytes read, must be a multiple of PLAIN_CHUNK_BYTES */
enum { PLAIN_CHUNK_BYTES = 256, PLAIN_PREFETCH_BYTES = 8192 };

typedef uint64_t (*plain_read_fn)(const unsigned char *p, size_t n, bool prefetch);

static inline void plain_prefetch_chunk(const unsigned char *p)
{
    for (int k = 0; k < PLAIN_CHUNK_BYTES; k += 64)
        __builtin_prefetch(p + PLAIN_PREFETCH_BYTES + k, 0, 1);
}

__attribute__((target("avx512f"))) static inline uint64_t
plain_read_avx512(const unsigned char *p, size_t n, bool prefetch)
{
    __m512i a = _mm512_setzero_si512(), b = a, c = a, d = a;
    for (size_t i = 0; i < n; i += PLAIN_CHUNK_BYTES) {
        if (prefetch)
            plain_prefetch_chunk(p + i);
        a = _mm512_xor_si512(a, _mm512_loadu_si512(p + i));
        b = _mm512_xor_si512(b, _mm512_loadu_si512(p + i + 64));
        c = _mm512_xor_si512(c, _mm512_loadu_si512(p + i + 128));
        d = _mm512_xor_si512(d, _mm512_loadu_si512(p + i + 192));
    }
    return (uint64_t)_mm512_reduce_or_epi64(_mm512_xor_si512(_mm512_xor_si512(a, b),
                                                              _mm512_xor_si512(c, d)));
}

__attribute__((target("avx2"))) static inline uint64_t
plain_read_avx2(const unsigned char *p, size_t n, bool prefetch)
{
    __m256i a = _mm256_setzero_si256(), b = a, c = a, d = a;
    for (size_t i = 0; i < n; i += PLAIN_CHUNK_BYTES / 2) {
        if (prefetch && i % PLAIN_CHUNK_BYTES == 0)
            plain_prefetch_chunk(p + i);
        a = _mm256_xor_si256(a, _mm256_loadu_si256((const __m256i *)(p + i)));
        b = _mm256_xor_si256(b, _mm256_loadu_si256((const __m256i *)(p + i + 32)));
        c = _mm256_xor_si256(c, _mm256_loadu_si256((const __m256i *)(p + i + 64)));
        d = _mm256_xor_si256(d, _mm256_loadu_si256((const __m256i *)(p + i + 96)));
    }
    __m256i x = _mm256_xor_si256(_mm256_xor_si256(a, b), _mm256_xor_si256(c, d));
    return (uint64_t)_mm256_extract_epi64(x, 0) ^ (uint64_t)_mm256_extract_epi64(x, 3);
}

static inline uint64_t plain_read_words(const unsigned char *p, size_t n, bool prefetch)
{
    const uint64_t *w = (const uint64_t *)(const void *)p;
    uint64_t a = 0, b = 0, c = 0, d = 0;
    for (size_t i = 0; i < n / 8; i += 4) {
        if (prefetch && i % (PLAIN_CHUNK_BYTES / 8) == 0)
            plain_prefetch_chunk(p + 8 * i);
        a ^= w[i];
        b ^= w[i + 1];
        c ^= w[i + 2];
        d ^= w[i + 3];
    }
    return a ^ b ^ c ^ d;
}

/* The widest reader this CPU runs; *name says which loads it issues. */
static inline plain_read_fn plain_loads_select(const char **name)
{
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) {
        *name = "AVX-512";
        return plain_read_avx512;
    }
    if (__builtin_cpu_supports("avx2")) {
        *name = "AVX2";
        return plain_read_avx2;
    }
    *name = "8-byte";
    return plain_read_words;
}

#endif

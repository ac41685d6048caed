/*
 * Small AVX2 building blocks shared by the x86 kernel files (included only by files named
 * *_avx2.c / *_avx512.c, which are compiled with AVX2 + FMA + F16C). Each helper is one step
 * of a 32-element block dot product: unpack the quants, multiply-add bytes, reduce.
 */
#ifndef CORRAL_ENGINE_QUANT_X86_H
#define CORRAL_ENGINE_QUANT_X86_H

#include <immintrin.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "quant_legacy.h"

/* F16C gives the exact half -> float result of the portable code, NaN payloads included. */
static inline float x86_half(uint16_t h)
{
    return _cvtsh_ss(h);
}

static inline float x86_hsum_ps(__m256 v)
{
    __m128 sum = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    sum = _mm_add_ps(sum, _mm_movehl_ps(sum, sum));
    sum = _mm_add_ss(sum, _mm_movehdup_ps(sum));
    return _mm_cvtss_f32(sum);
}

/* 16 bytes of packed nibbles -> 32 bytes 0..15 in element order (low nibbles first): the
 * upper 128-bit lane is the same bytes shifted right by 4. */
static inline __m256i x86_unpack_nibbles(const uint8_t *qs)
{
    __m256i packed = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)qs));
    __m256i shifted = _mm256_srlv_epi64(packed, _mm256_setr_epi64x(0, 0, 4, 4));
    return _mm256_and_si256(shifted, _mm256_set1_epi8(0x0f));
}

/* The 32 bits of qh (LE) -> 32 bytes, 0xff where bit j is set. */
static inline __m256i x86_high_bit_mask(const uint8_t *qh)
{
    uint32_t bits;
    memcpy(&bits, qh, sizeof bits);
    /* Byte j takes byte j/8 of qh, then keeps bit j%8 of it. */
    const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                                            2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
    __m256i bytes = _mm256_shuffle_epi8(_mm256_set1_epi32((int)bits), spread);
    return _mm256_cmpeq_epi8(_mm256_and_si256(bytes, bit), bit);
}

/* Eight i32 partial sums of x[j] * y[j] for signed bytes x (any) and y (not -128). */
static inline __m256i x86_dot_i8(__m256i x, __m256i y)
{
    __m256i abs_x = _mm256_sign_epi8(x, x);
    __m256i signed_y = _mm256_sign_epi8(y, x);
    return _mm256_madd_epi16(_mm256_maddubs_epi16(abs_x, signed_y), _mm256_set1_epi16(1));
}

/* The same for unsigned x <= 31, where the pairwise i16 sums cannot saturate. */
static inline __m256i x86_dot_u8_i8(__m256i x, __m256i y)
{
    return _mm256_madd_epi16(_mm256_maddubs_epi16(x, y), _mm256_set1_epi16(1));
}

/* The sum of the eight i32 lanes of v. */
static inline int32_t x86_hsum_epi32(__m256i v)
{
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_hadd_epi32(s, s);
    s = _mm_hadd_epi32(s, s);
    return _mm_cvtsi128_si32(s);
}

/* The 4 bytes at p (an activation word) in every 32-bit lane. */
static inline __m256i x86_set1_word(const void *p)
{
    int32_t v;
    memcpy(&v, p, sizeof v);
    return _mm256_set1_epi32(v);
}

/*
 * The 16 bytes at p in both 128-bit lanes, and then word k (0..3) of them in every 32-bit lane
 * (k a constant where the loops unroll): the 1-token tiles take their activation words this
 * way, one load per four words and a vpshufd per word, where x86_set1_word is a load per
 * word. The cycles are the same, but a 1-token stream keeps fewer lines in flight the more
 * loads it issues per weight byte. Tiles of several tokens keep x86_set1_word, which needs
 * no register per token.
 */
static inline __m256i x86_lane_words(const void *p)
{
    return _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)p));
}

static inline __attribute__((always_inline)) __m256i x86_lane_word(__m256i lanes, int k)
{
    switch (k) {
    case 0: return _mm256_shuffle_epi32(lanes, 0x00);
    case 1: return _mm256_shuffle_epi32(lanes, 0x55);
    case 2: return _mm256_shuffle_epi32(lanes, 0xaa);
    default: return _mm256_shuffle_epi32(lanes, 0xff);
    }
}

/*
 * sum over j < 4 of maddubs(q[j], the word at qy + 4j), added in i16: the packed maddubs
 * kernels' step over 16 weights of 8 rows. Exact for q <= 15: a pair is then at most
 * 2 * 15 * 128 = 3840, the four 15360, and callers may add two such sums (30720). For
 * q <= 31 one sum is still exact (31744), but two are not.
 */
static inline __m256i x86_maddubs_words4(const __m256i q[4], const void *qy)
{
    const int8_t *y = qy;
    __m256i a = _mm256_maddubs_epi16(q[0], x86_set1_word(y));
    __m256i b = _mm256_maddubs_epi16(q[1], x86_set1_word(y + 4));
    a = _mm256_add_epi16(a, _mm256_maddubs_epi16(q[2], x86_set1_word(y + 8)));
    b = _mm256_add_epi16(b, _mm256_maddubs_epi16(q[3], x86_set1_word(y + 12)));
    return _mm256_add_epi16(a, b);
}

/* acc + d * isum in one rounding: one lane of a packed kernel's FMA, for the dots that add
 * their blocks in the packed kernels' order. */
static inline float x86_fused_add(float d, int32_t isum, float acc)
{
    __m128 sum = _mm_fmadd_ss(_mm_set_ss(d), _mm_cvtsi32_ss(_mm_setzero_ps(), isum), _mm_set_ss(acc));
    return _mm_cvtss_f32(sum);
}

/* The element type of a float kernel's weights and activations (the same for both). */
enum x86_float_kind { X86_F32, X86_F16, X86_BF16 };

static inline size_t x86_float_bytes(enum x86_float_kind kind)
{
    return kind == X86_F32 ? 4 : 2;
}

/* Where row r's chunk of len elements at element i of a float tile starts: row-major rows
 * are w_row_bytes apart, packed ones interleaved chunk by chunk (quant_legacy.h). */
static inline const char *x86_tile_row_at(enum x86_float_kind kind, bool interleaved,
                                          const char *w, size_t w_row_bytes, size_t r, size_t i,
                                          size_t len)
{
    if (interleaved)
        return w + (i * QUANT_FLOAT_TILE_ROWS + r * len) * x86_float_bytes(kind);
    return w + r * w_row_bytes + i * x86_float_bytes(kind);
}

/* fma(a, b, acc) on one lane, as a packed kernel's _mm*_fmadd_ps does it on each. */
static inline float x86_fused_madd(float a, float b, float acc)
{
    return _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(a), _mm_set_ss(b), _mm_set_ss(acc)));
}

/* The step after a block's scaled sum in those dots: Q4_1 and Q5_1 (blocks x of weights, y of
 * Q8_1 activations) add their min term m * s, the other types nothing. */
#define X86_NO_MIN_TERM(block_x, block_y, acc) (acc)
#define X86_MIN_TERM(block_x, block_y, acc) \
    x86_fused_madd(x86_half((block_x).m), x86_half((block_y).s), acc)

/*
 * Packed kernels stream their weights once per token; the hardware prefetcher alone keeps too
 * few lines in flight while the core also computes, so a 1-token matmul streamed well below
 * plain loads. Requesting the lines `X86_PREFETCH_BYTES` ahead as each chunk of `bytes` is
 * consumed closes most of that gap. Into L2 (prefetcht2), not L1: an L1 prefetch holds one
 * of the core's few L1 fill buffers until its line arrives, which capped the lines in
 * flight; with L2 as the target the distance can be twice L1's knee. Prefetches past the end
 * of a matrix are harmless: they never fault. That was Intel: on AMD Zen 4 the same requests
 * slow a 1-token Q4_0 / Q8_0 / Q4_K stream, so the 1-token paths ask only where
 * cpu_prefetch_single_stream says; tiles of several tokens and the AVX2 K-quant kernels
 * always ask (the AVX2 K-quants compute long enough per line that even Zen 4 needs the help;
 * the AVX2 Q6_K reads three interleaved runs per super-block, which the hardware prefetchers
 * do not follow).
 */
enum { X86_PREFETCH_BYTES = 8192 };

/* The lines of [p, p + bytes) `distance` bytes further on (X86_PREFETCH_BYTES, or for the
 * AVX2 1-token streams cpu_one_token_prefetch_bytes). */
static inline void x86_prefetch_ahead(const void *p, size_t bytes, size_t distance)
{
    /* integer arithmetic: the address may lie past the object. __builtin_prefetch (locality
     * 1: prefetcht2), because GCC 12 emitted no instruction for _mm_prefetch in the kernel
     * files. */
    uintptr_t ahead = (uintptr_t)p + distance;
    for (size_t offset = 0; offset < bytes; offset += 64)
        __builtin_prefetch((const void *)(ahead + offset), 0, 1);
}

/* x86_prefetch_ahead into L1 (prefetcht0): Zen 5's 1-token K-quant streams read faster so
 * (cpu_k_quant_prefetch_l1). */
static inline void x86_prefetch_ahead_l1(const void *p, size_t bytes, size_t distance)
{
    uintptr_t ahead = (uintptr_t)p + distance;
    for (size_t offset = 0; offset < bytes; offset += 64)
        __builtin_prefetch((const void *)(ahead + offset), 0, 3);
}

/*
 * Slice `slice` of `n_slices` of x86_prefetch_ahead(block, bytes, distance), nothing when
 * distance is 0: a kernel whose block spans many lines asks for them a few at a time, one
 * slice before each of its steps. Asked for all at once before the block (a Q6_K group's 53
 * lines), the requests queue behind each other and the 1-token kernel streams far below
 * plain loads; a few lines per step keep the stream even. Slices that tile the blocks ask
 * for every line at least once: a line that begins inside a slice after its last request
 * holds the next slice's first.
 */
static inline void x86_prefetch_slice(const void *block, size_t bytes, size_t distance,
                                      size_t slice, size_t n_slices)
{
    if (distance == 0)
        return;
    size_t begin = bytes * slice / n_slices, end = bytes * (slice + 1) / n_slices;
    x86_prefetch_ahead((const uint8_t *)block + begin, end - begin, distance);
}

#ifdef __AVX512BW__
/* nibbles + 16 in the bytes whose bit `bit` (0..7) of high_bits is set: the fifth bit of a
 * Q5_0 / Q5_1 / Q5_K quant put in through a byte mask (vptestmb) and a masked add, two
 * operations where shifting the bit into place and joining it took three or four. */
static inline __m512i x86_add_fifth_bit(__m512i nibbles, __m512i high_bits, int bit)
{
    __mmask64 set = _mm512_test_epi8_mask(high_bits, _mm512_set1_epi8((char)(1 << bit)));
    return _mm512_mask_add_epi8(nibbles, set, nibbles, _mm512_set1_epi8(0x10));
}
#endif

#ifdef __AVX512VNNI__
/*
 * VNNI with the activation word read straight into the instruction: vpdpbusd / vpdpwssd
 * with an embedded broadcast ({1to16}) of the 4 bytes at p. GCC 12 emits a separate
 * vpbroadcastd for _mm512_set1_epi32(word), one more uop for every product, and the packed
 * kernels issue little else: a chain of 12 independent products ran 4.1 per ns that way and
 * 5.7 per ns fused, as fast as from a register. Nothing else in the asm: the compiler still
 * schedules and allocates around it.
 */
typedef int32_t x86_word __attribute__((may_alias, aligned(1)));

/* acc + sum over each lane's 4 unsigned bytes of q times the 4 signed bytes at p */
static inline __m512i x86_dpbusd_word(__m512i acc, __m512i q, const void *p)
{
    __asm__("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(q), "m"(*(const x86_word *)p));
    return acc;
}

/* acc + sum over each lane's 2 signed i16 of q times the 2 signed i16 at p */
static inline __m512i x86_dpwssd_word(__m512i acc, __m512i q, const void *p)
{
    __asm__("vpdpwssd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(q), "m"(*(const x86_word *)p));
    return acc;
}
#endif

/*
 * The packed AVX-512 kernels' call of one row group for n_tok (1..4) tokens, each width a
 * constant in the call. A call's token tiles pass over the same rows in turn; prefetch_tile
 * says whether this one asks for their lines in software: the first, which streams them from
 * memory, and later ones only where the call's rows outgrow L2 (cpu_outgrows_l2), for in L2
 * such a request is a load spent for nothing, which compute-bound prompt tiles pay for. One
 * token asks only where prefetch_one says as well, and passes prefetch_one itself: a flag, or
 * where the kernels take a distance (bytes ahead, 0: none), a 1-token distance of its own.
 * The including file defines PACKED_TILE_CALL(group_fn, n_tok, prefetch) for its block types.
 */
#define PACKED_TILE_SWITCH(group_fn, n_tok, prefetch_tile, prefetch_one)                     \
    switch (n_tok) {                                                                         \
    case 4: PACKED_TILE_CALL(group_fn, 4, prefetch_tile); break;                             \
    case 3: PACKED_TILE_CALL(group_fn, 3, prefetch_tile); break;                             \
    case 2: PACKED_TILE_CALL(group_fn, 2, prefetch_tile); break;                             \
    default:                                                                                 \
        if ((prefetch_tile) && (prefetch_one))                                               \
            PACKED_TILE_CALL(group_fn, 1, (prefetch_one));                                   \
        else                                                                                 \
            PACKED_TILE_CALL(group_fn, 1, 0);                                                \
        break;                                                                               \
    }

/*
 * The group loop of the packed AVX2 kernels, which read a group of QUANT_PACK_ROWS rows as two
 * halves of 8, a 256-bit lane per row; half_block_fn(block, b, half, tile, n_tok, prefetch,
 * acc) adds rows 8 * half .. 8 * half + 7 of block b (at `block`) against n_tok tokens to
 * acc, and asks for the whole block's lines `prefetch` bytes ahead (none when 0), in slices
 * between its steps where the block spans many lines (x86_prefetch_slice). One token takes
 * both halves of each block in one pass: the two-pass order left memory idle while the
 * second half computed from cache. Between its two halves an empty asm with a memory
 * clobber: without it GCC 12 kept the first half's activation broadcasts live for the
 * second and spilled them and the quants to the stack, which slowed 1-token generation.
 * The first half prefetches, one token prefetch_one bytes ahead
 * (cpu_one_token_prefetch_bytes; 0 where the CPU streams better without), tiles
 * X86_PREFETCH_BYTES. The including file defines TILE_TOKENS (4).
 */
#define X86_PACKED_ONE_TOKEN(half_block_fn, block_bytes)                                      \
    if (n_tok == 1) {                                                                        \
        for (size_t b = 0; b < n_blocks; b++, group += (block_bytes)) {                      \
            half_block_fn(group, b, 0, tile, 1, prefetch_one, acc[0]);                       \
            __asm__ volatile("" ::: "memory");                                               \
            half_block_fn(group, b, 1, tile, 1, 0, acc[1]);                                  \
        }                                                                                    \
        return;                                                                              \
    }

/* A tile of 2..4 tokens here takes each half in turn over all blocks (both halves'
 * accumulators at once would not fit the 16 registers), the second finding the group in
 * cache. */
#define X86_PACKED_HALVES(half_block_fn, block_bytes)                                         \
    for (size_t half = 0; half < 2; half++)                                                  \
        for (size_t b = 0; b < n_blocks; b++)                                                \
            half_block_fn(group + b * (block_bytes), b, half, tile, n_tok,                   \
                          half == 0 ? X86_PREFETCH_BYTES : 0, acc[half]);

#define X86_DEFINE_PACKED_GROUP(name, half_block_fn, block_bytes, tile_type)                   \
    static inline __attribute__((always_inline)) void name(                                  \
        size_t n_blocks, const uint8_t *group, tile_type tile, size_t n_tok,                 \
        size_t prefetch_one, __m256 acc[2][TILE_TOKENS])                                     \
    {                                                                                        \
        X86_PACKED_ONE_TOKEN(half_block_fn, block_bytes)                                     \
        X86_PACKED_HALVES(half_block_fn, block_bytes)                                        \
    }

/*
 * The same for the types whose tile_block_fn(block, b, tile, n_tok, prefetch, acc) adds all
 * 16 rows of block b at once against 1..4 tokens, sharing each activation broadcast between
 * the halves, and asks for its block's lines `prefetch` bytes ahead (none when 0), in slices
 * between its steps where the block spans many lines (x86_prefetch_slice): one pass over the
 * group, the blocks in order, tiles X86_PREFETCH_BYTES ahead, one token prefetch_one. One
 * token goes this way too: half the broadcasts of a pass per half, which matters most in
 * cache, where the broadcasts and not memory bound the kernel.
 */
#define X86_DEFINE_PACKED_GROUP_WIDE(name, tile_block_fn, block_bytes, tile_type)             \
    static inline __attribute__((always_inline)) void name(                                  \
        size_t n_blocks, const uint8_t *group, tile_type tile, size_t n_tok,                 \
        size_t prefetch_one, __m256 acc[2][TILE_TOKENS])                                     \
    {                                                                                        \
        size_t distance = n_tok > 1 ? X86_PREFETCH_BYTES : prefetch_one;                     \
        for (size_t b = 0; b < n_blocks; b++, group += (block_bytes))                        \
            tile_block_fn(group, b, tile, n_tok, distance, acc);                             \
    }

/*
 * One token through tile_block_fn as above, tiles of 2..4 tokens through half_block_fn as in
 * X86_DEFINE_PACKED_GROUP: for Q5_K and Q6_K. Q5_K's 16-row tile streams one token faster
 * than its half blocks but spills more with several tokens, where the half blocks win;
 * Q6_K's computes one token faster from cache.
 */
#define X86_DEFINE_PACKED_GROUP_WIDE_ONE(name, tile_block_fn, half_block_fn, block_bytes,      \
                                         tile_type)                                          \
    static inline __attribute__((always_inline)) void name(                                  \
        size_t n_blocks, const uint8_t *group, tile_type tile, size_t n_tok,                 \
        size_t prefetch_one, __m256 acc[2][TILE_TOKENS])                                     \
    {                                                                                        \
        if (n_tok == 1) {                                                                    \
            for (size_t b = 0; b < n_blocks; b++, group += (block_bytes))                    \
                tile_block_fn(group, b, tile, 1, prefetch_one, acc);                         \
            return;                                                                          \
        }                                                                                    \
        X86_PACKED_HALVES(half_block_fn, block_bytes)                                        \
    }

/* One such group for n_tok (1..4) tokens, each width a constant in its call so that the token
 * loops unroll; the calling scope has n_blocks, group, prefetch_one, out and ldy. */
#define X86_PACKED_GROUP_CALL(group_fn, n_tok, tile_arg)                                      \
    do {                                                                                     \
        __m256 acc[2][TILE_TOKENS];                                                          \
        for (size_t k = 0; k < (n_tok); k++)                                                 \
            acc[0][k] = acc[1][k] = _mm256_setzero_ps();                                     \
        group_fn(n_blocks, group, tile_arg, (n_tok), prefetch_one, acc);                     \
        for (size_t k = 0; k < (n_tok); k++) {                                               \
            _mm256_storeu_ps(out + k * ldy, acc[0][k]);                                      \
            _mm256_storeu_ps(out + k * ldy + QUANT_PACK_ROWS / 2, acc[1][k]);                \
        }                                                                                    \
    } while (0)

#define X86_PACKED_GROUP_SWITCH(group_fn, n_tok, tile_arg)                                    \
    switch (n_tok) {                                                                         \
    case 4: X86_PACKED_GROUP_CALL(group_fn, 4, tile_arg); break;                             \
    case 3: X86_PACKED_GROUP_CALL(group_fn, 3, tile_arg); break;                             \
    case 2: X86_PACKED_GROUP_CALL(group_fn, 2, tile_arg); break;                             \
    default: X86_PACKED_GROUP_CALL(group_fn, 1, tile_arg); break;                            \
    }

#endif

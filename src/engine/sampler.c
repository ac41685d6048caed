/*
 * Token sampling with ollama's options, in llama.cpp's order: repetition penalties, top-k
 * (partial selection, never a full sort when k is set), typical-p, top-p, min-p, then
 * temperature and a draw from a seeded PRNG. Temperature 0 is greedy with ties going to the
 * lowest id. The sampler owns its candidate buffer and the recent-token history.
 */
#include <assert.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "corral/engine.h"
#include "grammar.h"
#include "sampler.h"

/* The values select_top_k takes the maximum of at a time to find its threshold. */
enum { TOP_K_BLOCK = 64 };

typedef struct candidate {
    corral_token id;
    float logit;
    float p;
} candidate;

struct corral_sampler {
    corral_sampler_params params;
    size_t n_vocab;
    float *logits; /* the step's logits, penalties applied, by id */
    candidate *cand;
    size_t n_cand;
    corral_token *history; /* ring of the last repeat_window tokens */
    size_t history_cap, history_len, history_head;
    uint32_t *counts; /* per id, scratch for penalties */
    float *block_max;  /* per block of TOP_K_BLOCK values, scratch for select_top_k */
    float *block_heap; /* the k highest of those, and more, scratch for select_top_k */
    uint64_t *block_exact; /* which of block_max are masked (masked_threshold), a bit each */
    uint64_t rng[4];
    corral_grammar *grammar; /* not owned; NULL: unconstrained */
    bool write_masked_rows;  /* sampler_write_masked_rows */
};

void corral_sampler_params_init(corral_sampler_params *p)
{
    *p = (corral_sampler_params){
        .temperature = 0.8f,
        .top_k = 40,
        .top_p = 0.9f,
        .min_p = 0.0f,
        .typical_p = 1.0f,
        .repeat_last_n = 64,
        .repeat_penalty = 1.0f,
        .presence_penalty = 0.0f,
        .frequency_penalty = 0.0f,
        .seed = -1,
    };
}

/* ---- xoshiro256** seeded through splitmix64 ---- */

static uint64_t splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

static uint64_t rng_next(uint64_t s[4])
{
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

/* Uniform in [0, 1) with 53 random bits. */
static double rng_uniform(uint64_t s[4])
{
    return (double)(rng_next(s) >> 11) * 0x1.0p-53;
}

static void seed_rng(corral_sampler *s, int64_t seed)
{
    uint64_t state;
    if (seed < 0) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        state = (uint64_t)ts.tv_sec * 1000000007u ^ (uint64_t)ts.tv_nsec ^ (uint64_t)(uintptr_t)s;
    } else {
        state = (uint64_t)seed;
    }
    for (int i = 0; i < 4; i++)
        s->rng[i] = splitmix64(&state);
}

corral_sampler *corral_sampler_create(const corral_sampler_params *p, size_t n_vocab,
                                      corral_error *err)
{
    if (n_vocab == 0 || n_vocab > INT32_MAX) {
        corral_error_set(err, "invalid vocabulary size %zu", n_vocab);
        return NULL;
    }
    corral_sampler *s = calloc(1, sizeof *s);
    if (!s) {
        corral_error_set(err, "out of memory");
        return NULL;
    }
    s->params = *p;
    s->n_vocab = n_vocab;
    s->history_cap = p->repeat_last_n > 0 ? (size_t)p->repeat_last_n : 0;
    s->logits = malloc(n_vocab * sizeof *s->logits);
    s->cand = malloc(n_vocab * sizeof *s->cand);
    s->counts = calloc(n_vocab, sizeof *s->counts);
    s->history = malloc((s->history_cap ? s->history_cap : 1) * sizeof *s->history);
    size_t n_blocks = n_vocab / TOP_K_BLOCK + 1;
    s->block_max = malloc(n_blocks * sizeof *s->block_max);
    s->block_heap = malloc(2 * n_blocks * sizeof *s->block_heap);
    s->block_exact = malloc((n_blocks / 64 + 1) * sizeof *s->block_exact);
    if (!s->logits || !s->cand || !s->counts || !s->history || !s->block_max || !s->block_heap ||
        !s->block_exact) {
        corral_sampler_free(s);
        corral_error_set(err, "out of memory");
        return NULL;
    }
    seed_rng(s, p->seed);
    return s;
}

void corral_sampler_free(corral_sampler *s)
{
    if (!s)
        return;
    free(s->logits);
    free(s->cand);
    free(s->counts);
    free(s->history);
    free(s->block_max);
    free(s->block_heap);
    free(s->block_exact);
    free(s);
}

void corral_sampler_accept(corral_sampler *s, corral_token id)
{
    if (s->history_cap == 0)
        return;
    s->history[s->history_head] = id;
    s->history_head = (s->history_head + 1) % s->history_cap;
    if (s->history_len < s->history_cap)
        s->history_len++;
}

void corral_sampler_reset(corral_sampler *s)
{
    s->history_len = s->history_head = 0;
}

/* ---- steps ---- */

/* Whether the repetition penalties change any logit this step. */
static bool penalties_apply(const corral_sampler *s)
{
    const corral_sampler_params *p = &s->params;
    return s->history_len > 0 && (p->repeat_penalty != 1.0f || p->frequency_penalty != 0.0f ||
                                  p->presence_penalty != 0.0f);
}

/*
 * The repetition penalties on values: by token id (ids NULL), or values[i] holding the logit
 * of ids[i] (ascending), where the ids absent are left alone. Each id of the history is
 * penalised once, by the same operations either way, so the two give the same floats.
 */
static void apply_penalties(corral_sampler *s, float *values, const corral_token *ids, size_t n)
{
    const corral_sampler_params *p = &s->params;
    if (!penalties_apply(s))
        return;
    for (size_t i = 0; i < s->history_len; i++) {
        corral_token id = s->history[i];
        if (id >= 0 && (size_t)id < s->n_vocab)
            s->counts[id]++;
    }
    for (size_t i = 0; i < s->history_len; i++) {
        corral_token id = s->history[i];
        if (id < 0 || (size_t)id >= s->n_vocab || s->counts[id] == 0)
            continue;
        uint32_t count = s->counts[id];
        s->counts[id] = 0; /* penalise each id once */
        size_t at = (size_t)id;
        if (ids) { /* binary search */
            size_t lo = 0, hi = n;
            while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (ids[mid] < id)
                    lo = mid + 1;
                else
                    hi = mid;
            }
            if (lo == n || ids[lo] != id)
                continue;
            at = lo;
        }
        float *logit = &values[at];
        if (*logit == -INFINITY) /* refused (by a grammar or the model) stays refused */
            continue;
        *logit = *logit <= 0.0f ? *logit * p->repeat_penalty : *logit / p->repeat_penalty;
        *logit -= (float)count * p->frequency_penalty + p->presence_penalty;
    }
}

/* Higher logit first; equal logits: lower id first (deterministic ties). */
static bool ranks_before(const candidate *a, const candidate *b)
{
    return a->logit > b->logit || (a->logit == b->logit && a->id < b->id);
}

static int compare_candidates(const void *pa, const void *pb)
{
    const candidate *a = pa, *b = pb;
    return ranks_before(a, b) ? -1 : ranks_before(b, a) ? 1 : 0;
}

static void sift_down(candidate *heap, size_t n, size_t i)
{
    /* a heap whose root is the *worst* kept candidate */
    for (;;) {
        size_t worst = i, l = 2 * i + 1, r = l + 1;
        if (l < n && ranks_before(&heap[worst], &heap[l]))
            worst = l;
        if (r < n && ranks_before(&heap[worst], &heap[r]))
            worst = r;
        if (worst == i)
            return;
        candidate tmp = heap[i];
        heap[i] = heap[worst];
        heap[worst] = tmp;
        i = worst;
    }
}

/* Lane by lane, v where it is above acc, else acc (a NaN never taken): the scalar
 * `v > acc ? v : acc` on each of four lanes of GCC's and clang's vector types, which both
 * compile to one vector instruction of the same meaning (x86's maxps). */
typedef float f32x4 __attribute__((vector_size(16)));

static f32x4 lanes_max(f32x4 v, f32x4 acc)
{
    f32x4 max;
    for (int lane = 0; lane < 4; lane++)
        max[lane] = v[lane] > acc[lane] ? v[lane] : acc[lane];
    return max;
}

static f32x4 load_lanes(const float *from)
{
    f32x4 v;
    memcpy(&v, from, sizeof v);
    return v;
}

/*
 * The masked row's value of id i without the row written: values[i] where allowed (a bit per
 * id, as grammar_mask_bits) has i's bit set or is NULL, else -INFINITY. Where most of the
 * vocabulary is allowed (a string's step), the row copied and its refused tokens written
 * cost more than the draw itself.
 */
static float allowed_value(const float *values, const uint64_t *allowed, size_t i)
{
    return !allowed || (allowed[i >> 6] >> (i & 63) & 1) ? values[i] : -INFINITY;
}

typedef int32_t i32x4 __attribute__((vector_size(16)));

/* lanes_max where the lane's bit (lane j's is bit j of bits) is set, else acc: the same as
 * lanes_max of -INFINITY there, which never beats acc. The lanes' mask from a table of the
 * 16 cases, anded with the vector comparison (false for NaN), and a select by bits. */
static f32x4 allowed_lanes_max(f32x4 v, f32x4 acc, uint64_t bits)
{
#define KEEP(b) {-((b) & 1), -((b) >> 1 & 1), -((b) >> 2 & 1), -((b) >> 3 & 1)}
    static const i32x4 keep[16] = {KEEP(0),  KEEP(1),  KEEP(2),  KEEP(3), KEEP(4),  KEEP(5),
                                   KEEP(6),  KEEP(7),  KEEP(8),  KEEP(9), KEEP(10), KEEP(11),
                                   KEEP(12), KEEP(13), KEEP(14), KEEP(15)};
#undef KEEP
    i32x4 take = (v > acc) & keep[bits & 15];
    return (f32x4)(((i32x4)v & take) | ((i32x4)acc & ~take));
}

/* The highest of n logits (n a multiple of 16), NaN left out; -INFINITY where there is none.
 * Four accumulators by name, not an array, so that they stay in registers. */
static float block_max(const float *logits, size_t n)
{
    f32x4 acc0 = {-INFINITY, -INFINITY, -INFINITY, -INFINITY};
    f32x4 acc1 = acc0, acc2 = acc0, acc3 = acc0;
    for (size_t i = 0; i < n; i += 16) {
        acc0 = lanes_max(load_lanes(logits + i), acc0);
        acc1 = lanes_max(load_lanes(logits + i + 4), acc1);
        acc2 = lanes_max(load_lanes(logits + i + 8), acc2);
        acc3 = lanes_max(load_lanes(logits + i + 12), acc3);
    }
    f32x4 all = lanes_max(lanes_max(acc0, acc1), lanes_max(acc2, acc3));
    float max = all[0];
    for (int j = 1; j < 4; j++)
        max = all[j] > max ? all[j] : max;
    return max;
}

/* block_max of the masked row's values (allowed_value) of 64 logits, allowed their word of
 * the mask. */
static float word_max_allowed(const float *logits, uint64_t allowed)
{
    f32x4 acc0 = {-INFINITY, -INFINITY, -INFINITY, -INFINITY};
    f32x4 acc1 = acc0, acc2 = acc0, acc3 = acc0;
    for (size_t i = 0; i < 64; i += 16) {
        uint64_t bits = allowed >> i;
        acc0 = allowed_lanes_max(load_lanes(logits + i), acc0, bits);
        acc1 = allowed_lanes_max(load_lanes(logits + i + 4), acc1, bits >> 4);
        acc2 = allowed_lanes_max(load_lanes(logits + i + 8), acc2, bits >> 8);
        acc3 = allowed_lanes_max(load_lanes(logits + i + 12), acc3, bits >> 12);
    }
    f32x4 all = lanes_max(lanes_max(acc0, acc1), lanes_max(acc2, acc3));
    float max = all[0];
    for (int j = 1; j < 4; j++)
        max = all[j] > max ? all[j] : max;
    return max;
}

/*
 * The id of the highest logit, the lowest on ties (-0 and +0 tie; NaN is never the
 * highest; every logit NaN: 0). The maximum of each block of logits in vector lanes, the
 * first block whose maximum beats those before it kept (or the tail's logit that does), and
 * the first id from there that holds it: no id before can (their blocks' maxima are lower).
 */
static corral_token greedy(const float *logits, size_t n)
{
    enum { BLOCK = 1024 };
    float max = -INFINITY;
    size_t from = 0, i = 0;
    for (; i + BLOCK <= n; i += BLOCK) {
        float block = block_max(logits + i, BLOCK);
        if (block > max) {
            max = block;
            from = i;
        }
    }
    for (; i < n; i++)
        if (logits[i] > max) {
            max = logits[i];
            from = i;
        }
    for (i = from; i < n; i++)
        if (logits[i] == max)
            return (corral_token)i;
    return 0; /* every logit is NaN */
}

/* Each whole block of TOP_K_BLOCK values' highest into maxima, in vector lanes (NaN left
 * out; a block of NaN: -INFINITY). */
static void block_maxima(const float *values, size_t n_blocks, float *maxima)
{
    for (size_t b = 0; b < n_blocks; b++)
        maxima[b] = block_max(values + b * TOP_K_BLOCK, TOP_K_BLOCK);
}

/*
 * Block b's maximum in maxima made the masked row's (word_max_allowed) where exact (a bit
 * per block) does not say it is already; whether it changed. A block is a word of the mask.
 */
static bool make_exact(const float *values, const uint64_t *allowed, size_t b, float *maxima,
                       uint64_t *exact)
{
    _Static_assert(TOP_K_BLOCK == 64, "a block of values is a word of the mask");
    if (exact[b >> 6] >> (b & 63) & 1)
        return false;
    exact[b >> 6] |= 1ull << (b & 63);
    float max = word_max_allowed(values + b * TOP_K_BLOCK, allowed[b]);
    bool changed = max != maxima[b];
    maxima[b] = max;
    return changed;
}

/* The k-th highest of n values without NaN (k <= n): a heap of the k highest, its root the
 * lowest of them. */
static float kth_highest(const float *values, size_t n, size_t k, float *heap)
{
    for (size_t i = 0; i < n; i++) {
        float v = values[i];
        size_t at;
        if (i < k) {
            at = i;
            while (at > 0 && v < heap[(at - 1) / 2]) { /* sift up */
                heap[at] = heap[(at - 1) / 2];
                at = (at - 1) / 2;
            }
            heap[at] = v;
            continue;
        }
        if (!(v > heap[0]))
            continue;
        at = 0; /* sift down from the root */
        for (;;) {
            size_t low = at, l = 2 * at + 1, r = l + 1;
            float low_v = v;
            if (l < k && heap[l] < low_v) {
                low = l;
                low_v = heap[l];
            }
            if (r < k && heap[r] < low_v)
                low = r;
            if (low == at)
                break;
            heap[at] = heap[low];
            at = low;
        }
        heap[at] = v;
    }
    return heap[0];
}

/*
 * The k-th highest of the masked row's block maxima (allowed_value; k <= n_blocks), from
 * s->block_max holding each block's maximum unmasked, an upper bound of its masked one.
 * Where a mask refuses few tokens, a refused one is rarely its block's highest, so: the
 * blocks at or above the (k + k / 4 + 4)-th highest bound made exact; where k of them are
 * still at or above that bound, no other block reaches them, and the k-th highest of those
 * is the k-th highest of the masked maxima. Else (a mask that refuses whole blocks) every
 * block is made exact, one pass more. A block whose bound is below the threshold holds
 * nothing at or above it.
 */
static float masked_threshold(corral_sampler *s, const float *values, const uint64_t *allowed,
                              size_t n_blocks, size_t k)
{
    float *high = s->block_heap + n_blocks; /* the exact maxima at or above the bound */
    memset(s->block_exact, 0, (n_blocks / 64 + 1) * sizeof *s->block_exact);
    size_t wide = k + k / 4 + 4 < n_blocks ? k + k / 4 + 4 : n_blocks, n_high = 0;
    float bound = kth_highest(s->block_max, n_blocks, wide, s->block_heap);
    for (size_t b = 0; b < n_blocks; b++)
        if (s->block_max[b] >= bound) {
            make_exact(values, allowed, b, s->block_max, s->block_exact);
            if (s->block_max[b] >= bound)
                high[n_high++] = s->block_max[b];
        }
    if (n_high >= k)
        return kth_highest(high, n_high, k, s->block_heap);
    for (size_t b = 0; b < n_blocks; b++)
        make_exact(values, allowed, b, s->block_max, s->block_exact);
    return kth_highest(s->block_max, n_blocks, k, s->block_heap);
}

/*
 * greedy of the masked row's values (allowed_value). From each block's maximum unmasked (an
 * upper bound of its masked one), the first block holding the highest made exact, again
 * until it was already (at most a few times, then every block made exact: a mask that
 * refuses whole blocks): no block before it reaches that highest, masked or not, so the
 * first id holding it is in that block or after it (in a later block where every allowed
 * logit of that block is NaN and the highest -INFINITY).
 */
static corral_token greedy_allowed(corral_sampler *s, const float *logits,
                                   const uint64_t *allowed)
{
    size_t n = s->n_vocab, n_blocks = n / TOP_K_BLOCK, tail = n_blocks * TOP_K_BLOCK;
    float tail_max = -INFINITY;
    for (size_t i = tail; i < n; i++) {
        float v = allowed_value(logits, allowed, i);
        tail_max = v > tail_max ? v : tail_max;
    }
    block_maxima(logits, n_blocks, s->block_max);
    memset(s->block_exact, 0, (n_blocks / 64 + 1) * sizeof *s->block_exact);
    enum { TRIES = 4 };
    float max;
    size_t from;
    for (int tries = 0;; tries++) {
        max = -INFINITY;
        from = 0;
        for (size_t b = 0; b < n_blocks; b++)
            if (s->block_max[b] > max) {
                max = s->block_max[b];
                from = b;
            }
        if (n_blocks == 0 || !make_exact(logits, allowed, from, s->block_max, s->block_exact))
            break;
        if (tries + 1 == TRIES)
            for (size_t b = 0; b < n_blocks; b++)
                make_exact(logits, allowed, b, s->block_max, s->block_exact);
    }
    if (tail_max > max) {
        max = tail_max;
        from = n_blocks;
    }
    for (size_t i = from * TOP_K_BLOCK; i < n; i++)
        if (allowed_value(logits, allowed, i) == max)
            return (corral_token)i;
    return 0; /* every logit is NaN */
}

/*
 * The candidates' heap of the k best (its root the worst kept) offered one more, in the
 * order the heap was filled before: the first k as they come, then ordered, then each that
 * beats the root in its place. *n: how many the heap holds.
 */
static void offer(candidate *heap, size_t *n, size_t k, candidate c)
{
    if (*n < k) {
        heap[(*n)++] = c;
        if (*n == k)
            for (size_t i = k / 2; i-- > 0;)
                sift_down(heap, k, i);
        return;
    }
    if (ranks_before(&c, &heap[0])) {
        heap[0] = c;
        sift_down(heap, k, 0);
    }
}

/*
 * Into the heap, of the n values (allowed_value), those that can be among the k best when
 * their k-th best value is at least threshold: every value above it, and the first k equal
 * to it (ties go to the lowest ids, which come first: ids NULL or ascending). maxima: each
 * whole block's.
 */
static void offer_at_or_above(candidate *heap, size_t *n_heap, size_t k, const float *values,
                              const corral_token *ids, const uint64_t *allowed, size_t n,
                              const float *maxima, float threshold)
{
    size_t ties = 0, n_blocks = n / TOP_K_BLOCK;
    for (size_t b = 0; b <= n_blocks; b++) {
        size_t from = b * TOP_K_BLOCK, to = b < n_blocks ? from + TOP_K_BLOCK : n;
        if (b < n_blocks && (maxima[b] < threshold || (maxima[b] == threshold && ties >= k)))
            continue; /* nothing above the threshold, and no tie still wanted */
        for (size_t i = from; i < to; i++) {
            float v = allowed_value(values, allowed, i);
            bool above = v > threshold;
            if (!above && !(v == threshold && ties < k))
                continue;
            ties += !above;
            offer(heap, n_heap, k, (candidate){ids ? ids[i] : (corral_token)i, v, 0.0f});
        }
    }
}

/*
 * The k best of n tokens as candidates, sorted best first: values[i] is the logit of ids[i]
 * (ids NULL: of id i; else ascending), or -INFINITY where allowed refuses i (allowed_value;
 * allowed only with ids NULL), so that the candidates are the masked row's; the threshold
 * then from masked_threshold. O(n log k), and no candidate is made for the others
 * (with a vocabulary of 128k, writing them all cost more than the selection). The order is
 * total but for NaN (ties by id), and a NaN offered to a full heap never beats its root, so
 * where the first k hold no NaN, the k best are those of the values without NaN whatever
 * order they are offered in and whichever others are offered besides: the heap takes only
 * the values at or above a threshold no higher than the k-th best, the k-th highest of the
 * whole blocks' maxima (each of those k blocks holds a value at least that high, or the
 * threshold is -INFINITY), and a block whose maximum is below it is not read again. A NaN
 * among the first k compares with nothing in the heap, whose result then depends on the
 * order of all n: every value is offered in order.
 */
static void select_top_k(corral_sampler *s, const float *values, const corral_token *ids,
                         const uint64_t *allowed, size_t n, size_t k)
{
    assert(!ids || !allowed);
    candidate *heap = s->cand; /* a heap whose root is the worst kept candidate */
    size_t n_heap = 0;
    s->n_cand = k;
    if (k == n) {
        for (size_t i = 0; i < n; i++)
            heap[i] = (candidate){ids ? ids[i] : (corral_token)i,
                                  allowed_value(values, allowed, i), 0.0f};
        qsort(s->cand, k, sizeof *s->cand, compare_candidates);
        return;
    }
    size_t n_blocks = n / TOP_K_BLOCK;
    bool offer_all = n_blocks < k;
    for (size_t i = 0; i < k && !offer_all; i++)
        offer_all = isnan(allowed_value(values, allowed, i));
    if (offer_all) {
        for (size_t i = 0; i < n; i++)
            offer(heap, &n_heap, k,
                  (candidate){ids ? ids[i] : (corral_token)i, allowed_value(values, allowed, i),
                              0.0f});
    } else {
        block_maxima(values, n_blocks, s->block_max);
        float threshold = allowed ? masked_threshold(s, values, allowed, n_blocks, k)
                                  : kth_highest(s->block_max, n_blocks, k, s->block_heap);
        offer_at_or_above(heap, &n_heap, k, values, ids, allowed, n, s->block_max, threshold);
    }
    assert(n_heap == k);
    qsort(s->cand, k, sizeof *s->cand, compare_candidates);
}

/* p = softmax(logit) over the current candidates (sorted best first). */
static void softmax_candidates(corral_sampler *s)
{
    float max = s->cand[0].logit;
    double sum = 0.0;
    for (size_t i = 0; i < s->n_cand; i++) {
        s->cand[i].p = expf(s->cand[i].logit - max);
        sum += s->cand[i].p;
    }
    for (size_t i = 0; i < s->n_cand; i++)
        s->cand[i].p = (float)(s->cand[i].p / sum);
}

/* Whether it cut the candidates (at the last of them too). */
static bool apply_top_p(corral_sampler *s, float top_p)
{
    softmax_candidates(s);
    double cum = 0.0;
    for (size_t i = 0; i < s->n_cand; i++) {
        cum += s->cand[i].p;
        if (cum >= top_p) {
            s->n_cand = i + 1;
            return true;
        }
    }
    return false;
}

static void apply_min_p(corral_sampler *s, float min_p)
{
    /* p_i >= min_p * p_max  <=>  logit_i >= logit_max + log(min_p) */
    float threshold = s->cand[0].logit + logf(min_p);
    size_t keep = 1;
    while (keep < s->n_cand && s->cand[keep].logit >= threshold)
        keep++;
    s->n_cand = keep;
}

typedef struct shifted {
    float score;
    size_t index;
} shifted;

static int compare_shifted(const void *pa, const void *pb)
{
    const shifted *a = pa, *b = pb;
    return a->score < b->score ? -1 : a->score > b->score ? 1 : (a->index > b->index) - (a->index < b->index);
}

/* Locally typical sampling: keep the tokens whose surprise is closest to the entropy.
 * Whether it cut the candidates (at the last of them too). */
static bool apply_typical_p(corral_sampler *s, float typical_p)
{
    softmax_candidates(s);
    double entropy = 0.0;
    for (size_t i = 0; i < s->n_cand; i++)
        if (s->cand[i].p > 0.0f)
            entropy -= s->cand[i].p * log(s->cand[i].p);
    shifted *order = malloc(s->n_cand * sizeof *order);
    candidate *kept = malloc(s->n_cand * sizeof *kept);
    if (!order || !kept) { /* out of memory: skip this filter rather than fail the token */
        free(order);
        free(kept);
        return false;
    }
    for (size_t i = 0; i < s->n_cand; i++)
        order[i] = (shifted){(float)fabs(-log(s->cand[i].p) - entropy), i};
    qsort(order, s->n_cand, sizeof *order, compare_shifted);
    double cum = 0.0;
    size_t n_keep = 0;
    bool cut = false;
    for (size_t i = 0; i < s->n_cand && !cut; i++) {
        kept[n_keep++] = s->cand[order[i].index];
        cum += s->cand[order[i].index].p;
        cut = cum > typical_p;
    }
    qsort(kept, n_keep, sizeof *kept, compare_candidates);
    memcpy(s->cand, kept, n_keep * sizeof *kept);
    s->n_cand = n_keep;
    free(order);
    free(kept);
    return cut;
}

/*
 * The filters, temperature and the seeded draw over the candidates: the k best of values
 * (by ids or allowed as select_top_k). *past_end: the draw fell past the rounding of the
 * last p, and the last candidate is returned.
 */
static corral_token draw_candidates(corral_sampler *s, const float *values,
                                    const corral_token *ids, const uint64_t *allowed, size_t n,
                                    bool *cut, bool *past_end)
{
    const corral_sampler_params *p = &s->params;
    size_t k = p->top_k > 0 && (size_t)p->top_k < s->n_vocab ? (size_t)p->top_k : s->n_vocab;
    *cut = k < n;
    select_top_k(s, values, ids, allowed, n, k < n ? k : n);
    if (p->typical_p < 1.0f)
        *cut = apply_typical_p(s, p->typical_p) || *cut;
    if (p->top_p < 1.0f)
        *cut = apply_top_p(s, p->top_p) || *cut;
    if (p->min_p > 0.0f) {
        apply_min_p(s, p->min_p);
        *cut = true;
    }

    for (size_t i = 0; i < s->n_cand; i++)
        s->cand[i].logit /= p->temperature;
    softmax_candidates(s);
    double r = rng_uniform(s->rng), cum = 0.0;
    *past_end = false;
    for (size_t i = 0; i < s->n_cand; i++) {
        cum += s->cand[i].p;
        if (r < cum)
            return s->cand[i].id;
    }
    *past_end = true;
    return s->cand[s->n_cand - 1].id;
}

/* Draw from a row of logits by id, the penalties applied, masked by allowed
 * (allowed_value): greedy, or the filters and temperature. */
static corral_token draw(corral_sampler *s, const float *row, const uint64_t *allowed)
{
    if (s->params.temperature <= 0.0f)
        return allowed ? greedy_allowed(s, row, allowed) : greedy(row, s->n_vocab);
    bool cut, past_end;
    return draw_candidates(s, row, NULL, allowed, s->n_vocab, &cut, &past_end);
}

/* The step's logits with the penalties applied: logits itself where they change nothing
 * (not copied: half a MiB at 128k), else a copy in s->logits. */
static const float *penalized_row(corral_sampler *s, const float *logits)
{
    if (!penalties_apply(s))
        return logits;
    memcpy(s->logits, logits, s->n_vocab * sizeof *s->logits);
    apply_penalties(s, s->logits, NULL, s->n_vocab);
    return s->logits;
}

size_t sampler_last_candidates(const corral_sampler *s, corral_token *ids, float *logits,
                               float *p, size_t max)
{
    size_t n = s->n_cand < max ? s->n_cand : max;
    for (size_t i = 0; i < n; i++) {
        ids[i] = s->cand[i].id;
        logits[i] = s->cand[i].logit;
        p[i] = s->cand[i].p;
    }
    return n;
}

void corral_sampler_set_grammar(corral_sampler *s, corral_grammar *grammar)
{
    s->grammar = grammar;
}

/*
 * Whether drawing first and masking only when the draw is refused gives exactly the masked
 * distribution. Greedy: the best token, if allowed, is the best allowed one. Plain
 * temperature sampling: an allowed token t comes first with p(t), or after a refusal (1 - Z)
 * from the masked draw with p(t) / Z, in all p(t) / Z (Z: the allowed tokens' mass). Not with
 * top-k, top-p, min-p or typical-p: those keep a different set once refused tokens are gone.
 */
static bool draw_first_is_exact(const corral_sampler *s)
{
    const corral_sampler_params *p = &s->params;
    return p->temperature <= 0.0f ||
           ((p->top_k <= 0 || (size_t)p->top_k >= s->n_vocab) && p->top_p >= 1.0f &&
            p->min_p <= 0.0f && p->typical_p >= 1.0f);
}

/* What the draw from a grammar's listed tokens gives. */
typedef enum listed_draw {
    LISTED_DRAWN, /* the token */
    LISTED_NONE,  /* no listed token has a logit above -INFINITY: end the text */
    LISTED_ROW,   /* a listed logit is not finite: the masked row's draw, which gives the same */
} listed_draw;

/*
 * The draw from the masked row, made from the n tokens the grammar allows alone (ids
 * ascending): the same token, candidates and probabilities, and the same numbers drawn from
 * the seeded PRNG. Where every allowed logit is finite after the penalties (which leave a
 * refused token at -INFINITY), the masked row is the allowed logits, penalised alike, and
 * -INFINITY elsewhere, so:
 * - greedy: the row's maximum is the allowed one, and its lowest id with it an allowed id;
 * - top-k: the row's k best are the allowed ones in the same order, then (where k is more
 *   than n) refused tokens at -INFINITY, whose p is 0 in every softmax: the sums are the
 *   same, typical-p orders them last (a surprise of infinity, the highest index) and top-p
 *   and typical-p cut before them or keep them all, min-p drops them;
 * - the draw: a refused candidate is never drawn, as its p adds nothing to the running sum,
 *   but the row's draw past the rounding of the last p returns its last candidate, refused
 *   where the refused ones were kept, and the sampler then takes the row's greedy token.
 * A logit that is not finite (a -INFINITY among the allowed, a NaN, an overflow) is left to
 * the masked row, where its order among the refused tokens matters.
 */
static listed_draw draw_listed(corral_sampler *s, const float *logits, const corral_token *ids,
                               size_t n, corral_token *out)
{
    float *values = s->logits; /* by position in ids */
    bool any = false;
    for (size_t i = 0; i < n; i++) {
        values[i] = logits[ids[i]];
        any = any || values[i] != -INFINITY;
    }
    if (!any)
        return LISTED_NONE;
    apply_penalties(s, values, ids, n);
    for (size_t i = 0; i < n; i++)
        if (!isfinite(values[i]))
            return LISTED_ROW;
    size_t best = 0;
    for (size_t i = 1; i < n; i++)
        best = values[i] > values[best] ? i : best;
    if (s->params.temperature <= 0.0f) {
        *out = ids[best];
        return LISTED_DRAWN;
    }
    bool cut, past_end;
    *out = draw_candidates(s, values, ids, NULL, n, &cut, &past_end);
    size_t k_row = s->params.top_k > 0 && (size_t)s->params.top_k < s->n_vocab
                       ? (size_t)s->params.top_k
                       : s->n_vocab;
    if (past_end && !cut && k_row > n) /* the row's last candidate was refused */
        *out = ids[best];
    return LISTED_DRAWN;
}

/* Whether some token allowed (a bit per id) has a logit above -INFINITY, as the masked row's
 * (a string's step finds one in its first word). */
static bool any_allowed(const float *logits, const uint64_t *allowed, size_t n)
{
    for (size_t w = 0; w * 64 < n; w++)
        for (uint64_t bits = allowed[w]; bits; bits &= bits - 1) {
            size_t i = w * 64 + (size_t)__builtin_ctzll(bits);
            if (i >= n)
                break;
            if (logits[i] != -INFINITY)
                return true;
        }
    return false;
}

void sampler_write_masked_rows(corral_sampler *s, bool write)
{
    s->write_masked_rows = write;
}

/*
 * With a grammar, the draw is from the distribution masked to the tokens it allows: drawn
 * first and kept when allowed where that is exact (draw_first_is_exact; one token's check
 * is cheaper than the mask), else from the allowed tokens alone where the grammar lists
 * them (draw_listed: a few hundred of 128k, not the row written and read again), else from
 * the logits read through the mask's bits (allowed_value: a string's step refuses a few
 * thousand tokens of 128k, and the row copied and written cost more than the draw). The
 * penalties never move a refused token off -INFINITY, so every path draws an allowed token,
 * whatever the repeat_penalty (0 would make it NaN, a negative one +INFINITY).
 */
corral_token corral_sampler_sample(corral_sampler *s, const float *logits)
{
    if (!s->grammar)
        return draw(s, penalized_row(s, logits), NULL);
    corral_token id = -1;
    if (draw_first_is_exact(s)) {
        id = draw(s, penalized_row(s, logits), NULL);
        if (grammar_allows(s->grammar, id)) {
            grammar_accept(s->grammar, id);
            return id;
        }
    }
    const corral_token *allowed;
    size_t n_allowed;
    bool masked = grammar_allowed_ids(s->grammar, &allowed, &n_allowed);
    const uint64_t *bits = grammar_mask_bits(s->grammar);
    listed_draw listed = LISTED_ROW;
    corral_token drawn = -1;
    if (masked && allowed)
        listed = draw_listed(s, logits, allowed, n_allowed, &drawn);
    if (listed == LISTED_DRAWN) {
        grammar_accept(s->grammar, drawn);
        return drawn;
    }
    if (masked && listed == LISTED_ROW)
        masked = any_allowed(logits, bits, s->n_vocab);
    if (!masked || listed == LISTED_NONE) { /* nothing fits: end the text */
        corral_token end = grammar_end_token(s->grammar);
        return end >= 0 ? end : id >= 0 ? id : greedy(logits, s->n_vocab);
    }
    const float *row;
    if (!s->write_masked_rows) {
        row = penalized_row(s, logits);
    } else {
        memcpy(s->logits, logits, s->n_vocab * sizeof *s->logits);
        grammar_mask_worked_out(s->grammar, s->logits);
        apply_penalties(s, s->logits, NULL, s->n_vocab);
        row = s->logits;
        bits = NULL;
    }
    id = draw(s, row, bits);
    if (!grammar_allows(s->grammar, id)) /* a draw past the rounding of the last p */
        id = bits ? greedy_allowed(s, row, bits) : greedy(row, s->n_vocab);
    grammar_accept(s->grammar, id);
    return id;
}

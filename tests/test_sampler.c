/*
 * Sampler: each ollama option on hand-made logit vectors, seeded reproducibility, greedy
 * ties, that draws follow the softmax distribution, and that top-k's selection gives the
 * candidates of a heap over every logit.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "corral/engine.h"
#include "sampler.h"

static corral_sampler *make(corral_sampler_params p, size_t n_vocab)
{
    corral_error err;
    corral_sampler *s = corral_sampler_create(&p, n_vocab, &err);
    if (!s)
        fail_msg("%s", err.message);
    return s;
}

/* Every option off except the ones a test sets. */
static corral_sampler_params plain(float temperature)
{
    corral_sampler_params p;
    corral_sampler_params_init(&p);
    p.temperature = temperature;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.seed = 1234;
    return p;
}

/* How often each id comes out of n draws. */
static void histogram(corral_sampler *s, const float *logits, size_t n_vocab, int n, int *counts)
{
    memset(counts, 0, n_vocab * sizeof *counts);
    for (int i = 0; i < n; i++) {
        corral_token id = corral_sampler_sample(s, logits);
        assert_true(id >= 0 && (size_t)id < n_vocab);
        counts[id]++;
    }
}

static void test_sampler_defaults_are_ollamas(void **state)
{
    (void)state;
    corral_sampler_params p;
    corral_sampler_params_init(&p);
    assert_true(p.temperature == 0.8f && p.top_k == 40 && p.top_p == 0.9f && p.min_p == 0.0f);
    assert_true(p.typical_p == 1.0f && p.repeat_last_n == 64 && p.repeat_penalty == 1.0f);
    assert_true(p.presence_penalty == 0.0f && p.frequency_penalty == 0.0f && p.seed == -1);
}

static void test_sampler_temperature_zero_is_greedy_with_lowest_id_on_ties(void **state)
{
    (void)state;
    float logits[6] = {0.5f, 3.0f, -1.0f, 3.0f, 2.9f, 3.0f};
    corral_sampler *s = make(plain(0.0f), 6);
    for (int i = 0; i < 10; i++)
        assert_int_equal(corral_sampler_sample(s, logits), 1);
    corral_sampler_free(s);

    /* a vocabulary of many lanes and a tail: ties in different lanes, the maximum last */
    enum { N = 1003 };
    static float many[N];
    for (int i = 0; i < N; i++)
        many[i] = (float)(i % 97) * 0.01f;
    many[517] = many[300] = many[301] = 7.0f;
    s = make(plain(0.0f), N);
    assert_int_equal(corral_sampler_sample(s, many), 300);
    many[N - 1] = 8.0f;
    assert_int_equal(corral_sampler_sample(s, many), N - 1);
    corral_sampler_free(s);
}

/* The first id of the highest logit, NaN left out (0 where all are NaN), one at a time. */
static corral_token first_highest(const float *logits, size_t n)
{
    size_t best = SIZE_MAX;
    for (size_t i = 0; i < n; i++)
        if (!isnan(logits[i]) && (best == SIZE_MAX || logits[i] > logits[best]))
            best = i;
    return best == SIZE_MAX ? 0 : (corral_token)best;
}

/* Greedy over a vocabulary of many blocks and a tail: the highest in a later block as well,
 * in the tail as well, -0 against +0, NaN anywhere, every logit -INFINITY or NaN. */
static void test_sampler_greedy_over_blocks_takes_the_first_highest(void **state)
{
    (void)state;
    enum { N = 5000, CASES = 9 };
    static float row[N];
    corral_sampler *s = make(plain(0.0f), N);
    for (int c = 0; c < CASES; c++) {
        srand((unsigned)c + 1);
        for (int i = 0; i < N; i++)
            row[i] = c == 7 ? -INFINITY : c == 8 ? NAN : -(float)rand() / (float)RAND_MAX;
        switch (c) {
        case 0: row[2100] = row[4100] = row[4990] = 1.0f; break; /* two blocks and the tail */
        case 1: row[1500] = -0.0f, row[3000] = 0.0f; break;      /* -0 first */
        case 2: row[700] = -0.0f, row[1500] = 0.0f, row[1499] = NAN; break;
        case 3: row[0] = NAN, row[4999] = 2.0f, row[4998] = NAN; break; /* in the tail alone */
        case 4: row[1023] = 3.0f, row[1024] = 3.0f; break;       /* at a block's end */
        case 5: row[4200] = 1.0f, row[4500] = 1.5f, row[4100] = 1.0f; break; /* tail climbs */
        case 6: for (int i = 0; i < N; i += 3) row[i] = NAN; row[3] = 0.5f; break;
        case 7: row[0] = NAN, row[2000] = NAN; break; /* every other -INFINITY: the first */
        default: break;                              /* all NaN: 0 */
        }
        assert_int_equal(corral_sampler_sample(s, row), first_highest(row, N));
    }
    corral_sampler_free(s);
}

static void test_sampler_fixed_seed_reproduces_draws(void **state)
{
    (void)state;
    float logits[8] = {1, 1.2f, 0.8f, 1.1f, 0.9f, 1.05f, 0.95f, 1};
    corral_token a[64], b[64];
    for (int run = 0; run < 2; run++) {
        corral_sampler *s = make(plain(1.0f), 8);
        for (int i = 0; i < 64; i++) {
            (run ? b : a)[i] = corral_sampler_sample(s, logits);
            corral_sampler_accept(s, (run ? b : a)[i]);
        }
        corral_sampler_free(s);
    }
    assert_memory_equal(a, b, sizeof a);
    corral_sampler_params p = plain(1.0f);
    p.seed = 99;
    corral_sampler *s = make(p, 8);
    int same = 0;
    for (int i = 0; i < 64; i++)
        same += corral_sampler_sample(s, logits) == a[i];
    assert_true(same < 64); /* another seed gives another sequence */
    corral_sampler_free(s);
}

static void test_sampler_draws_follow_softmax(void **state)
{
    (void)state;
    float logits[3] = {logf(0.5f), logf(0.3f), logf(0.2f)};
    corral_sampler *s = make(plain(1.0f), 3);
    int counts[3];
    histogram(s, logits, 3, 20000, counts);
    assert_true(abs(counts[0] - 10000) < 400);
    assert_true(abs(counts[1] - 6000) < 400);
    assert_true(abs(counts[2] - 4000) < 400);
    corral_sampler_free(s);
}

static void test_sampler_temperature_sharpens_and_flattens(void **state)
{
    (void)state;
    float logits[2] = {1.0f, 0.0f};
    int counts[2];
    corral_sampler *cold = make(plain(0.25f), 2), *hot = make(plain(4.0f), 2);
    histogram(cold, logits, 2, 10000, counts);
    assert_true(counts[0] > 9700); /* p0 = 1/(1+e^-4) = 0.982 */
    histogram(hot, logits, 2, 10000, counts);
    assert_true(counts[0] > 5300 && counts[0] < 5950); /* p0 = 1/(1+e^-0.25) = 0.562 */
    corral_sampler_free(cold);
    corral_sampler_free(hot);
}

static void test_sampler_top_k_keeps_only_the_k_best(void **state)
{
    (void)state;
    float logits[100];
    for (int i = 0; i < 100; i++)
        logits[i] = (float)((i * 37) % 100) * 0.01f; /* a permutation: best is id 73 (0.99) */
    corral_sampler_params p = plain(5.0f);
    p.top_k = 3;
    corral_sampler *s = make(p, 100);
    int counts[100];
    histogram(s, logits, 100, 3000, counts);
    int kept = 0;
    for (int i = 0; i < 100; i++)
        if (counts[i]) {
            kept++;
            assert_true(logits[i] > 0.965f); /* 0.97, 0.98, 0.99 */
        }
    assert_int_equal(kept, 3);
    corral_sampler_free(s);
}

/* The selection of the k best by a heap over every logit in id order, then a sort: the
 * sampler's before it skipped the logits below a threshold, whose result it must keep. */
typedef struct ref_candidate {
    corral_token id;
    float logit;
} ref_candidate;

static bool ref_ranks_before(const ref_candidate *a, const ref_candidate *b)
{
    return a->logit > b->logit || (a->logit == b->logit && a->id < b->id);
}

static int ref_compare(const void *pa, const void *pb)
{
    const ref_candidate *a = pa, *b = pb;
    return ref_ranks_before(a, b) ? -1 : ref_ranks_before(b, a) ? 1 : 0;
}

static void ref_sift_down(ref_candidate *heap, size_t n, size_t i)
{
    for (;;) {
        size_t worst = i, l = 2 * i + 1, r = l + 1;
        if (l < n && ref_ranks_before(&heap[worst], &heap[l]))
            worst = l;
        if (r < n && ref_ranks_before(&heap[worst], &heap[r]))
            worst = r;
        if (worst == i)
            return;
        ref_candidate tmp = heap[i];
        heap[i] = heap[worst];
        heap[worst] = tmp;
        i = worst;
    }
}

static void ref_top_k(const float *logits, size_t n, size_t k, ref_candidate *out)
{
    for (size_t i = 0; i < k; i++)
        out[i] = (ref_candidate){(corral_token)i, logits[i]};
    if (k < n) {
        for (size_t i = k / 2; i-- > 0;)
            ref_sift_down(out, k, i);
        for (size_t i = k; i < n; i++) {
            ref_candidate c = {(corral_token)i, logits[i]};
            if (ref_ranks_before(&c, &out[0])) {
                out[0] = c;
                ref_sift_down(out, k, 0);
            }
        }
    }
    qsort(out, k, sizeof *out, ref_compare);
}

static uint32_t next_random(uint32_t *state)
{
    *state ^= *state << 13;
    *state ^= *state >> 17;
    *state ^= *state << 5;
    return *state;
}

/* A row of one of the shapes that test the threshold: few distinct values (ties everywhere,
 * -0 and +0 among them), spread values, a masked row (-INFINITY but a few), infinities, a
 * NaN the last of the first k or just after them and one anywhere, many NaN, every value
 * equal. */
static void fill_row(float *row, size_t n, size_t k, int shape, uint32_t *rng)
{
    static const float levels[] = {-0.0f, 0.0f, 1.0f, -1.0f, 2.5f};
    for (size_t i = 0; i < n; i++) {
        uint32_t r = next_random(rng);
        float spread = (float)(r % 100000) * 1e-3f - 50.0f;
        switch (shape) {
        case 0: row[i] = levels[r % 5]; break;
        case 1: row[i] = spread; break;
        case 2: row[i] = r % 50 == 0 ? levels[r % 5] : -INFINITY; break;
        case 3: row[i] = r % 7 == 0 ? INFINITY : r % 7 == 1 ? -INFINITY : levels[r % 5]; break;
        case 4: row[i] = spread; break;
        case 5: row[i] = r % 3 == 0 ? NAN : levels[r % 5]; break;
        default: row[i] = i % 2 ? 0.0f : -0.0f; break;
        }
    }
    if (shape == 4) {
        row[next_random(rng) % 2 ? k - 1 : k % n] = NAN;
        row[next_random(rng) % n] = NAN;
    }
}

static bool same_float(float a, float b)
{
    return memcmp(&a, &b, sizeof a) == 0;
}

static void test_sampler_top_k_selects_as_a_heap_over_every_logit(void **state)
{
    (void)state;
    enum { MAX_N = 4099, SHAPES = 7 };
    static float row[MAX_N];
    static ref_candidate want[MAX_N];
    static corral_token ids[MAX_N];
    static float logits[MAX_N], p[MAX_N];
    static const size_t ns[] = {1, 63, 64, 129, 1000, 2600, MAX_N};
    uint32_t rng = 12345;
    for (size_t in = 0; in < sizeof ns / sizeof *ns; in++) {
        size_t n = ns[in], blocks = n / 64;
        /* k = blocks: the fewest blocks for a threshold; one more: too few */
        size_t ks[] = {1, 2, 3, 40, blocks, blocks + 1, n - 1, n};
        for (size_t ik = 0; ik < sizeof ks / sizeof *ks; ik++) {
            size_t k = ks[ik];
            if (k == 0 || k > n)
                continue;
            corral_sampler_params params = plain(1.0f);
            params.top_k = (int32_t)k;
            corral_sampler *s = make(params, n);
            for (int shape = 0; shape < SHAPES; shape++)
                for (int round = 0; round < 4; round++) {
                    fill_row(row, n, k, shape, &rng);
                    ref_top_k(row, n, k, want);
                    corral_sampler_sample(s, row);
                    size_t got = sampler_last_candidates(s, ids, logits, p, MAX_N);
                    assert_int_equal(got, k);
                    for (size_t i = 0; i < k; i++) {
                        if (ids[i] != want[i].id || !same_float(logits[i], want[i].logit))
                            fail_msg("n %zu k %zu shape %d: candidate %zu is %d, not %d", n, k,
                                     shape, i, ids[i], want[i].id);
                    }
                }
            corral_sampler_free(s);
        }
    }
}

static void test_sampler_top_p_keeps_the_smallest_nucleus(void **state)
{
    (void)state;
    float logits[4] = {logf(0.5f), logf(0.3f), logf(0.15f), logf(0.05f)};
    corral_sampler_params p = plain(1.0f);
    p.top_p = 0.7f; /* 0.5 < 0.7 <= 0.8: ids 0 and 1 */
    corral_sampler *s = make(p, 4);
    int counts[4];
    histogram(s, logits, 4, 5000, counts);
    assert_true(counts[0] > 0 && counts[1] > 0);
    assert_int_equal(counts[2] + counts[3], 0);
    /* renormalised over the nucleus: 0.5/0.8 */
    assert_true(abs(counts[0] - 3125) < 200);
    corral_sampler_free(s);
}

static void test_sampler_min_p_drops_tokens_below_fraction_of_best(void **state)
{
    (void)state;
    float logits[4] = {logf(0.4f), logf(0.3f), logf(0.19f), logf(0.11f)};
    corral_sampler_params p = plain(1.0f);
    p.min_p = 0.5f; /* keep p >= 0.2 */
    corral_sampler *s = make(p, 4);
    int counts[4];
    histogram(s, logits, 4, 4000, counts);
    assert_true(counts[0] > 0 && counts[1] > 0);
    assert_int_equal(counts[2] + counts[3], 0);
    corral_sampler_free(s);
}

static void test_sampler_typical_p_keeps_tokens_near_the_entropy(void **state)
{
    (void)state;
    /* p = 0.7, 0.1 x 3: entropy 0.94 nats; surprise 0.36 (id 0) and 2.30 (others).
     * |0.36 - 0.94| = 0.58 < 1.36, so id 0 is the most typical and, with typical_p 0.5, alone. */
    float logits[4] = {logf(0.7f), logf(0.1f), logf(0.1f), logf(0.1f)};
    corral_sampler_params p = plain(1.0f);
    p.typical_p = 0.5f;
    corral_sampler *s = make(p, 4);
    int counts[4];
    histogram(s, logits, 4, 1000, counts);
    assert_int_equal(counts[0], 1000);
    corral_sampler_free(s);
    /* typical_p 0.75 must add the others after id 0 (0.7 < 0.75) */
    p.typical_p = 0.75f;
    s = make(p, 4);
    histogram(s, logits, 4, 4000, counts);
    assert_true(counts[0] < 4000 && counts[0] > 2000);
    corral_sampler_free(s);
}

static void test_sampler_repeat_penalty_divides_positive_and_multiplies_negative(void **state)
{
    (void)state;
    corral_sampler_params p = plain(0.0f);
    p.repeat_penalty = 2.0f;
    p.repeat_last_n = 4;
    float pos[3] = {3.0f, 2.0f, 0.0f};
    corral_sampler *s = make(p, 3);
    corral_sampler_accept(s, 0); /* 3.0 -> 1.5 < 2.0 */
    assert_int_equal(corral_sampler_sample(s, pos), 1);
    corral_sampler_free(s);
    float neg[3] = {-1.0f, -1.5f, -5.0f};
    s = make(p, 3);
    corral_sampler_accept(s, 0); /* -1.0 -> -2.0 < -1.5 */
    assert_int_equal(corral_sampler_sample(s, neg), 1);
    /* the window forgets: after 4 other tokens id 0 is no longer penalised */
    for (int i = 0; i < 4; i++)
        corral_sampler_accept(s, 2);
    assert_int_equal(corral_sampler_sample(s, neg), 0);
    corral_sampler_free(s);
}

static void test_sampler_presence_and_frequency_penalties_subtract(void **state)
{
    (void)state;
    float logits[3] = {5.0f, 4.0f, 3.5f};
    corral_sampler_params p = plain(0.0f);
    p.presence_penalty = 0.6f; /* once: 5.0 - 0.6 = 4.4 > 4.0 */
    corral_sampler *s = make(p, 3);
    corral_sampler_accept(s, 0);
    corral_sampler_accept(s, 0);
    assert_int_equal(corral_sampler_sample(s, logits), 0);
    corral_sampler_free(s);
    p.presence_penalty = 0.0f;
    p.frequency_penalty = 0.6f; /* per occurrence: 5.0 - 1.2 = 3.8 < 4.0 */
    s = make(p, 3);
    corral_sampler_accept(s, 0);
    corral_sampler_accept(s, 0);
    assert_int_equal(corral_sampler_sample(s, logits), 1);
    corral_sampler_reset(s); /* history cleared */
    assert_int_equal(corral_sampler_sample(s, logits), 0);
    corral_sampler_free(s);
}

static void test_sampler_rejects_empty_vocabulary(void **state)
{
    (void)state;
    corral_sampler_params p = plain(1.0f);
    corral_error err;
    assert_null(corral_sampler_create(&p, 0, &err));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sampler_defaults_are_ollamas),
        cmocka_unit_test(test_sampler_temperature_zero_is_greedy_with_lowest_id_on_ties),
        cmocka_unit_test(test_sampler_greedy_over_blocks_takes_the_first_highest),
        cmocka_unit_test(test_sampler_fixed_seed_reproduces_draws),
        cmocka_unit_test(test_sampler_draws_follow_softmax),
        cmocka_unit_test(test_sampler_temperature_sharpens_and_flattens),
        cmocka_unit_test(test_sampler_top_k_keeps_only_the_k_best),
        cmocka_unit_test(test_sampler_top_k_selects_as_a_heap_over_every_logit),
        cmocka_unit_test(test_sampler_top_p_keeps_the_smallest_nucleus),
        cmocka_unit_test(test_sampler_min_p_drops_tokens_below_fraction_of_best),
        cmocka_unit_test(test_sampler_typical_p_keeps_tokens_near_the_entropy),
        cmocka_unit_test(test_sampler_repeat_penalty_divides_positive_and_multiplies_negative),
        cmocka_unit_test(test_sampler_presence_and_frequency_penalties_subtract),
        cmocka_unit_test(test_sampler_rejects_empty_vocabulary),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

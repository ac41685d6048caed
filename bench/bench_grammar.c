/*
 * Grammar mask time per decoding step: a JSON-schema `format` grammar (the server's own
 * schema-to-GBNF) driven through a valid answer, token by token, at a 32k vocabulary
 * (SentencePiece) and a 128k one (llama3's byte-level BPE). Each step computes the full mask
 * (every token the grammar allows next), then advances by the answer's token. Two rows per
 * vocabulary: every round from a fresh grammar, as a request with a new grammar starts, and
 * ("again") every round from the same grammar restarted after one untimed round, as the
 * runner serves a request whose grammar an earlier one had (its kept masks). Prints the
 * median, mean and worst step and the whole answer's mask time, medians over the rounds,
 * the time to create (or restart) the grammar, and, once per vocabulary, the first
 * grammar's create (which builds the vocabulary's trie) and its first answer's worst step
 * (which makes the trie's loop walks). BENCH_GRAMMAR_STEPS=1 in the environment
 * prints every step of every round to stderr: its time (wall and thread CPU, the steadier on
 * a shared machine), the trie nodes its walks looked at, the grammar's kept bytes.
 * BENCH_GRAMMAR_SAMPLE=greedy (or top-k) times a sampler's step under the grammar instead of
 * the mask alone, as a request samples, each step over a new row of spread pseudo-random
 * logits (no two alike, as a model's): greedy, with a token no step allows the best overall
 * (so the draw is refused and the masked draw made), or top-k 40 at temperature 1, which
 * masks first; the answer's token is the best allowed, so the sampler follows the answer.
 * BENCH_GRAMMAR_SAMPLE=free times top-k 40 at temperature 1 without a grammar instead, as
 * much as the answer's steps over such rows, the grammar column "none".
 * Usage: bench_grammar [ROUNDS [FIXTURES_DIR]]
 *        bench_grammar --gbnf   (print the grammar, for `corral infer --grammar`)
 *        bench_grammar --hostile [FIXTURES_DIR]   (grammars whose matching blows up:
 *            the drawn token's check over the 128k vocabulary, and one mask)
 */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "corral/engine.h"
#include "grammar.h"
#include "server/core/format_grammar.h"
#include "bench_schema.h"

#ifndef CORRAL_FIXTURES_DIR
#define CORRAL_FIXTURES_DIR "tests/fixtures"
#endif

static const char answer[] =
    "{\"name\": \"Zoë Ångström-Dubois\", \"age\": 42, \"email\": \"zoe@example.org\", "
    "\"score\": -12.75e3, \"active\": true, \"tags\": [\"kayak\", \"café au lait\", "
    "\"naïve \\\"quotes\\\"\", \"日本語のテキスト\"], \"address\": {\"street\": "
    "\"12 Rue de l'Église\", \"city\": \"Besançon\"}, \"status\": \"retired\"}";

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int compare_doubles(const void *pa, const void *pb)
{
    double a = *(const double *)pa, b = *(const double *)pb;
    return (a > b) - (a < b);
}

static double median(double *v, size_t n)
{
    qsort(v, n, sizeof *v, compare_doubles);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static double worst_step(const double *step, size_t n)
{
    double worst = 0;
    for (size_t i = 0; i < n; i++)
        worst = step[i] > worst ? step[i] : worst;
    return worst;
}

/* text as the longest token at each point, as a model writes it (no tokenizer's space
 * prefix); the count, 0 when some byte has no token. */
static size_t tokenize_longest(const corral_vocab *vocab, const char *text, corral_token *ids,
                               size_t max_ids)
{
    size_t n_vocab = corral_vocab_n_tokens(vocab), len = strlen(text), n = 0;
    for (size_t at = 0; at < len && n < max_ids;) {
        size_t best_len = 0;
        corral_token best = -1;
        for (size_t id = 0; id < n_vocab; id++) {
            char piece[256];
            size_t k = corral_token_to_piece(vocab, (corral_token)id, piece, sizeof piece, false);
            if (k > best_len && k <= len - at && k <= sizeof piece &&
                memcmp(piece, text + at, k) == 0) {
                best_len = k;
                best = (corral_token)id;
            }
        }
        if (best < 0)
            return 0;
        ids[n++] = best;
        at += best_len;
    }
    return n;
}

/* A token whose text is one control character, which no step of a JSON answer allows
 * (outside its strings, and escaped within them); -1 where the vocabulary has none. */
static corral_token refused_everywhere(const corral_vocab *vocab)
{
    size_t n_vocab = corral_vocab_n_tokens(vocab);
    for (size_t id = 0; id < n_vocab; id++) {
        char piece[8];
        if (corral_token_to_piece(vocab, (corral_token)id, piece, sizeof piece, false) == 1 &&
            piece[0] == '\x01')
            return (corral_token)id;
    }
    return -1;
}

/* The sampler BENCH_GRAMMAR_SAMPLE asks for, or NULL: the mask alone. One for every round,
 * so that its buffers' first touch is not a step's. */
static corral_sampler *bench_sampler(size_t n_vocab)
{
    const char *mode = getenv("BENCH_GRAMMAR_SAMPLE");
    if (!mode)
        return NULL;
    corral_sampler_params p;
    corral_sampler_params_init(&p);
    p.seed = 1;
    p.top_p = 1.0f;
    if (strcmp(mode, "greedy") == 0) {
        p.temperature = 0.0f;
    } else {
        p.temperature = 1.0f;
        p.top_k = 40;
    }
    corral_error err = {{0}};
    return corral_sampler_create(&p, n_vocab, &err);
}

/* A row of logits spread about 0 (a sum of four uniforms: few far from the middle, as a
 * model's, and no two alike). */
static void spread_logits(float *logits, size_t n_vocab, uint32_t *rng)
{
    for (size_t j = 0; j < n_vocab; j++) {
        float sum = 0.0f;
        for (int u = 0; u < 4; u++) {
            *rng ^= *rng << 13;
            *rng ^= *rng >> 17;
            *rng ^= *rng << 5;
            sum += (float)(*rng >> 8) * 0x1.0p-24f;
        }
        logits[j] = (sum - 2.0f) * 6.0f;
    }
}

/* The answer's steps through g: their times in step[], false when a step masks the answer.
 * With a sampler, each step's logits are spread, the answer's token above every other but
 * the refused one. */
static bool drive(corral_grammar *g, corral_sampler *sampler, corral_token refused,
                  const char *file, const corral_token *ids, size_t n_ids, float *logits,
                  size_t n_vocab, uint32_t *rng, double *step, size_t *allowed_sum)
{
    if (sampler) {
        corral_sampler_reset(sampler);
        corral_sampler_set_grammar(sampler, g);
    }
    for (size_t i = 0; i < n_ids; i++) {
        if (sampler) {
            spread_logits(logits, n_vocab, rng);
            logits[ids[i]] = 30.0f;
            logits[refused] = 40.0f;
        } else {
            for (size_t j = 0; j < n_vocab; j++)
                logits[j] = 0.0f;
        }
        struct timespec c0, c1;
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
        double s0 = now_seconds();
        size_t v0 = grammar_trie_visits(g);
        corral_token drawn = sampler ? corral_sampler_sample(sampler, logits) : -1;
        bool any = sampler ? drawn == ids[i] : grammar_mask(g, logits);
        step[i] = now_seconds() - s0;
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
        if (getenv("BENCH_GRAMMAR_STEPS")) {
            double cpu = (double)(c1.tv_sec - c0.tv_sec) + (double)(c1.tv_nsec - c0.tv_nsec) * 1e-9;
            fprintf(stderr, "step %zu: %.1f us (cpu %.1f), %zu nodes, kept %zu\n", i,
                    step[i] * 1e6, cpu * 1e6, grammar_trie_visits(g) - v0,
                    corral_grammar_kept_bytes(g));
        }
        if (!any || logits[ids[i]] == -INFINITY) {
            fprintf(stderr, "%s: step %zu: the answer's token %d is masked\n", file, i, ids[i]);
            return false;
        }
        if (sampler)
            continue; /* the sampler advanced g */
        for (size_t j = 0; j < n_vocab; j++)
            *allowed_sum += logits[j] == 0.0f;
        grammar_accept(g, ids[i]);
    }
    return true;
}

/* Whether BENCH_GRAMMAR_SAMPLE asks for sampling without a grammar. */
static bool sample_free(void)
{
    const char *mode = getenv("BENCH_GRAMMAR_SAMPLE");
    return mode && strcmp(mode, "free") == 0;
}

/* n_steps draws without a grammar, their times in step[], each from a new row of spread
 * logits. */
static void drive_free(corral_sampler *sampler, size_t n_steps, float *logits, size_t n_vocab,
                       uint32_t *rng, double *step)
{
    corral_sampler_set_grammar(sampler, NULL);
    for (size_t i = 0; i < n_steps; i++) {
        spread_logits(logits, n_vocab, rng);
        struct timespec c0, c1;
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
        double s0 = now_seconds();
        corral_sampler_sample(sampler, logits);
        step[i] = now_seconds() - s0;
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
        if (getenv("BENCH_GRAMMAR_STEPS")) {
            double cpu = (double)(c1.tv_sec - c0.tv_sec) + (double)(c1.tv_nsec - c0.tv_nsec) * 1e-9;
            fprintf(stderr, "step %zu: %.1f us (cpu %.1f)\n", i, step[i] * 1e6, cpu * 1e6);
        }
    }
}

/* The fixture vocabulary dir/file, or NULL with the reason printed. */
static corral_vocab *open_vocab(const char *dir, const char *file)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    corral_error err = {{0}};
    corral_vocab *vocab = corral_vocab_open(path, &err);
    if (!vocab)
        fprintf(stderr, "%s: %s\n", path, err.message);
    return vocab;
}

static int bench_vocab(const char *dir, const char *file, const char *gbnf, int rounds,
                       bool again)
{
    corral_vocab *vocab = open_vocab(dir, file);
    if (!vocab)
        return 1;
    corral_error err = {{0}};
    size_t n_vocab = corral_vocab_n_tokens(vocab);
    corral_token ids[1024];
    size_t n_ids = tokenize_longest(vocab, answer, ids, sizeof ids / sizeof *ids);
    if (n_ids == 0) {
        fprintf(stderr, "%s: the answer has no tokenization\n", file);
        corral_vocab_free(vocab);
        return 1;
    }
    float *logits = malloc(n_vocab * sizeof *logits);
    double *step = malloc(n_ids * sizeof *step);
    double *r_median = malloc(rounds * sizeof *r_median), *r_mean = malloc(rounds * sizeof *r_mean);
    double *r_max = malloc(rounds * sizeof *r_max), *r_total = malloc(rounds * sizeof *r_total);
    double *r_create = malloc(rounds * sizeof *r_create);
    size_t allowed_sum = 0;
    int status = 0;
    corral_sampler *sampler = bench_sampler(n_vocab);
    corral_token refused = refused_everywhere(vocab);
    if (getenv("BENCH_GRAMMAR_SAMPLE") && (!sampler || refused < 0)) {
        fprintf(stderr, "%s: no sampler, or no token refused at every step\n", file);
        status = 1;
    }
    corral_grammar *kept = NULL;
    uint32_t rng = 2463534242u;
    /* the vocabulary's first grammar builds its trie, and its first answer makes the
     * trie's loop walks: once per process, so apart from the rounds' medians */
    double first_create = -1.0, first_worst = -1.0;
    if (status == 0 && again) {
        double t0 = now_seconds();
        kept = corral_grammar_create(gbnf, vocab, &err);
        first_create = now_seconds() - t0;
        if (kept && !drive(kept, sampler, refused, file, ids, n_ids, logits, n_vocab, &rng,
                           step, &allowed_sum))
            status = 1;
        else if (kept)
            first_worst = worst_step(step, n_ids);
    }
    if (status == 0 && again && !kept) {
        fprintf(stderr, "grammar: %s\n", err.message);
        status = 1;
    }
    for (int r = 0; r < rounds && status == 0; r++) {
        if (sample_free()) {
            r_create[r] = 0.0;
            drive_free(sampler, n_ids, logits, n_vocab, &rng, step);
        } else {
            double t0 = now_seconds();
            corral_grammar *g = kept;
            if (g && !corral_grammar_restart(g))
                g = NULL;
            else if (!g)
                g = corral_grammar_create(gbnf, vocab, &err);
            r_create[r] = now_seconds() - t0;
            if (!g) {
                fprintf(stderr, "grammar: %s\n", kept ? "out of memory" : err.message);
                status = 1;
                break;
            }
            allowed_sum = 0;
            if (!drive(g, sampler, refused, file, ids, n_ids, logits, n_vocab, &rng, step,
                       &allowed_sum))
                status = 1;
            if (!kept)
                corral_grammar_free(g);
        }
        double total = 0;
        for (size_t i = 0; i < n_ids; i++)
            total += step[i];
        r_total[r] = total;
        r_mean[r] = total / (double)n_ids;
        r_max[r] = worst_step(step, n_ids);
        if (first_create < 0) {
            first_create = r_create[r];
            first_worst = r_max[r];
        }
        r_median[r] = median(step, n_ids);
    }
    corral_grammar_free(kept);
    corral_sampler_free(sampler);
    if (status == 0)
        printf("%-22s %-7s %7zu %6zu %9.1f %10.1f %10.1f %10.1f %10.2f %9.1f %9.1f %11.1f\n",
               file, sample_free() ? "none" : again ? "again" : "new", n_vocab, n_ids,
               (double)allowed_sum / (double)n_ids, median(r_median, rounds) * 1e6,
               median(r_mean, rounds) * 1e6, median(r_max, rounds) * 1e6,
               median(r_total, rounds) * 1e3, median(r_create, rounds) * 1e3,
               first_create * 1e3, first_worst * 1e6);
    free(logits);
    free(step);
    free(r_median);
    free(r_mean);
    free(r_max);
    free(r_total);
    free(r_create);
    corral_vocab_free(vocab);
    return status;
}

/* The sampler's check of one drawn token (grammar_allows) over every token of the 128k
 * vocabulary, and one mask, from a grammar's start: grammars whose alternatives take the same
 * characters, which a matcher searching stack by stack takes exponential time on, and a loop
 * over many one-character alternatives, whose stacks multiply. */
static int bench_hostile(const char *dir)
{
    corral_vocab *vocab = open_vocab(dir, "vocab-llama3-bpe.gguf");
    if (!vocab)
        return 1;
    corral_error err = {{0}};
    size_t n_vocab = corral_vocab_n_tokens(vocab);
    float *logits = malloc(n_vocab * sizeof *logits);
    static const size_t alternatives[] = {1, 4, 8, 100, 250};
    printf("%-34s %12s %14s %10s %9s\n", "grammar", "checks_ms", "worst_check_ms", "mask_ms",
           "allowed");
    int status = logits ? 0 : 1;
    for (size_t k = 0; k < sizeof alternatives / sizeof *alternatives && status == 0; k++) {
        size_t m = alternatives[k];
        bool rules = m > 8; /* many alternatives as rules of one class each */
        size_t cap = 64 + 32 * m;
        char *gbnf = malloc(cap);
        if (!gbnf) {
            status = 1;
            break;
        }
        size_t at = (size_t)snprintf(gbnf, cap, "root ::= (");
        for (size_t i = 0; i < m; i++)
            at += rules ? (size_t)snprintf(gbnf + at, cap - at, "%sr%zu", i ? " | " : "", i)
                        : (size_t)snprintf(gbnf + at, cap - at, "%s[a-z]", i ? " | " : "");
        at += (size_t)snprintf(gbnf + at, cap - at, ")+ \"!\"\n");
        for (size_t i = 0; rules && i < m; i++)
            at += (size_t)snprintf(gbnf + at, cap - at, "r%zu ::= [a-z]\n", i);
        corral_grammar *g = corral_grammar_create(gbnf, vocab, &err);
        free(gbnf);
        if (!g) {
            fprintf(stderr, "grammar: %s\n", err.message);
            status = 1;
            break;
        }
        double t0 = now_seconds(), worst = 0;
        size_t allowed = 0;
        for (size_t id = 0; id < n_vocab; id++) {
            double s0 = now_seconds();
            allowed += grammar_allows(g, (corral_token)id);
            double took = now_seconds() - s0;
            worst = took > worst ? took : worst;
        }
        double checks = now_seconds() - t0;
        for (size_t id = 0; id < n_vocab; id++)
            logits[id] = 0.0f;
        double m0 = now_seconds();
        grammar_mask(g, logits);
        double mask = now_seconds() - m0;
        char name[64];
        snprintf(name, sizeof name, rules ? "(%zu one-class rules)+" : "(%zu x [a-z])+", m);
        printf("%-34s %12.1f %14.3f %10.3f %9zu\n", name, checks * 1e3, worst * 1e3, mask * 1e3,
               allowed);
        corral_grammar_free(g);
    }
    free(logits);
    corral_vocab_free(vocab);
    return status;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--hostile") == 0)
        return bench_hostile(argc > 2 ? argv[2] : CORRAL_FIXTURES_DIR);
    bool print_gbnf = argc > 1 && strcmp(argv[1], "--gbnf") == 0;
    int rounds = argc > 1 && !print_gbnf ? atoi(argv[1]) : 5;
    const char *dir = argc > 2 ? argv[2] : CORRAL_FIXTURES_DIR;
    if (rounds < 1) {
        fprintf(stderr, "usage: bench_grammar [ROUNDS [FIXTURES_DIR]]\n");
        return 2;
    }
    json_error_t jerr;
    json_t *schema = json_loads(bench_schema_text, 0, &jerr);
    corral_error err = {{0}};
    char *gbnf = schema ? format_grammar_from_schema(schema, &err) : NULL;
    json_decref(schema);
    if (!gbnf) {
        fprintf(stderr, "schema: %s\n", schema ? err.message : jerr.text);
        return 1;
    }
    if (print_gbnf) {
        fputs(gbnf, stdout);
        free(gbnf);
        return 0;
    }
    printf("%-22s %-7s %7s %6s %9s %10s %10s %10s %10s %9s %9s %11s\n", "vocabulary", "grammar",
           "tokens", "steps", "allowed", "median_us", "mean_us", "worst_us", "answer_ms",
           "create_ms", "first_ms", "1st_worst_us");
    int status = 0;
    for (int again = 0; again <= (sample_free() ? 0 : 1) && status == 0; again++) {
        status = bench_vocab(dir, "vocab-llama-spm.gguf", gbnf, rounds, again);
        if (status == 0)
            status = bench_vocab(dir, "vocab-llama3-bpe.gguf", gbnf, rounds, again);
    }
    free(gbnf);
    return status;
}

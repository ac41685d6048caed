/*
 * Speculative decoding against plain decoding, through the runner's own slots (the engine
 * loop the server drives): greedy generation of TOKENS tokens after a prompt, plainly, with
 * prompt lookup's drafts, and with a draft model's when one is given, rounds interleaved
 * (the modes' order turns each round). Each round has its own random prompt of 96 tokens
 * (BOS first); with `repeat`, a text that repeats its prompt: a random passage of 32, the
 * target's own greedy continuation of it (TOKENS, generated untimed), and the passage again,
 * which a model that quotes its prompt continues as before (a `bigram` model of
 * make_bench_model does; random weights otherwise do not). Prints per mode the median generation tokens/s (from the first token to the
 * last, as the runner's eval_duration counts), the drafted and accepted tokens and the
 * acceptance rate, the speed-up against plain decoding (median of the rounds' ratios), the
 * same two in process CPU time (tokens per CPU second from the first token to the last: on a
 * shared machine the steadier figure at 1 thread; at several, the pools' brief spinning
 * counts too), and
 * whether every mode gave plain decoding's tokens in every round (it must: speculation keeps
 * the answer token for token). First, what verifying costs: the least time of a batch of
 * 1 + k tokens with every row's logits (a pending token and a draft of k) after the prompt,
 * against one token's, in wall and in process CPU time (the steadier on a shared machine).
 * Usage: bench_speculative TARGET.gguf [-m DRAFT.gguf] [-n TOKENS] [-r ROUNDS] [-t THREADS]
 *        [-k MAX_DRAFT] [-p random|repeat]
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "corral/engine.h"
#include "runner/draft_model.h"
#include "runner/slots.h"

enum { MAX_ROUNDS = 100, PROMPT_TOKENS = 96, PASSAGE_TOKENS = 32 };
enum { MODE_PLAIN, MODE_LOOKUP, MODE_DRAFT, N_MODES };
static const char *const mode_names[N_MODES] = {"plain", "lookup", "draft"};

typedef struct options {
    const char *target, *draft;
    long n_tokens, rounds, threads, max_draft;
    bool repeat;
} options;

typedef struct run_result {
    double tokens_per_s, tokens_per_cpu_s;
    size_t drafted, accepted, n_ids;
    corral_token *ids; /* the generated tokens, malloc'd */
} run_result;

static int compare_doubles(const void *pa, const void *pb)
{
    double a = *(const double *)pa, b = *(const double *)pb;
    return (a > b) - (a < b);
}

static double median(double *v, long n)
{
    qsort(v, (size_t)n, sizeof *v, compare_doubles);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* n random tokens (BOS first) from the middle of the vocabulary, which holds ordinary words
 * (the specials sit at the ends of llama-3's and SentencePiece's); r picks the stream. */
static void random_tokens(const corral_model *model, long r, size_t n, corral_token *out)
{
    const corral_vocab *vocab = corral_model_vocab(model);
    uint32_t n_vocab = corral_model_n_vocab(model), from = n_vocab / 16, span = n_vocab / 2;
    uint64_t state = 0x9e3779b97f4a7c15u * (uint64_t)(r + 2);
    corral_token bos = corral_vocab_bos(vocab);
    size_t at = 0;
    if (bos >= 0 && n > 0)
        out[at++] = bos;
    for (size_t i = at; i < n; i++) {
        state = state * 6364136223846793005u + 1442695040888963407u;
        out[i] = (corral_token)(from + (state >> 33) % span);
    }
}

static double clock_seconds(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* One greedy request on a fresh pool over ctx; false with a message. */
static bool run_once(const options *o, corral_model *model, corral_context *ctx,
                     draft_model *draft, int mode, corral_token *prompt, size_t n_prompt,
                     run_result *res)
{
    corral_error err = {{0}};
    slot_pool pool;
    size_t max_draft = mode == MODE_LOOKUP ? (size_t)o->max_draft : 0;
    if (!slot_pool_create(&pool, model, ctx, 1, 512, max_draft,
                          mode == MODE_DRAFT ? draft : NULL, &err)) {
        fprintf(stderr, "bench_speculative: %s\n", err.message);
        return false;
    }
    completion_request req = {.tokens = prompt, .n_tokens = n_prompt,
                              .num_predict = o->n_tokens, .num_keep = 4,
                              .draft_num_predict = mode == MODE_PLAIN ? 0 : o->max_draft};
    corral_sampler_params_init(&req.sampling);
    req.sampling.temperature = 0.0f;
    slot *s = slot_pool_submit(&pool, &req, &err);
    bool ok = s != NULL;
    if (ok) {
        pthread_mutex_lock(&pool.lock);
        double cpu_first = -1.0; /* process CPU time at the first token (woken per token) */
        while (!s->done) {
            pthread_cond_wait(&s->changed, &pool.lock);
            if (cpu_first < 0.0 && s->n_generated_ids > 0)
                cpu_first = clock_seconds(CLOCK_PROCESS_CPUTIME_ID);
        }
        double cpu_seconds = cpu_first < 0.0 ? 0.0
                                             : clock_seconds(CLOCK_PROCESS_CPUTIME_ID) - cpu_first;
        ok = strcmp(s->done_reason, "error") != 0;
        if (!ok)
            snprintf(err.message, sizeof err.message, "%s", s->error);
        int64_t first = s->t_first_ns ? s->t_first_ns : s->t_end_ns;
        double seconds = (double)(s->t_end_ns - first) * 1e-9;
        res->tokens_per_s = seconds > 0 ? (double)s->n_generated_ids / seconds : 0.0;
        res->tokens_per_cpu_s = cpu_seconds > 0 ? (double)s->n_generated_ids / cpu_seconds : 0.0;
        res->drafted = s->n_drafted;
        res->accepted = s->n_draft_accepted;
        res->n_ids = s->n_generated_ids;
        res->ids = malloc((res->n_ids + 1) * sizeof *res->ids);
        if (res->ids)
            memcpy(res->ids, s->generated, res->n_ids * sizeof *res->ids);
        else
            ok = false;
        pthread_mutex_unlock(&pool.lock);
        slot_pool_release(&pool, s);
    }
    if (!ok)
        fprintf(stderr, "bench_speculative: %s\n", err.message[0] ? err.message : "out of memory");
    slot_pool_free(&pool);
    return ok;
}

/* The verification batches' cost against one token's (see the top of the file). */
static bool print_verify_costs(const options *o, corral_model *model, corral_context *ctx)
{
    static const size_t sizes[] = {1, 2, 3, 5, 9, 17};
    enum { REPS = 5, MAX_BATCH = 17 };
    corral_token prompt[PROMPT_TOKENS], batch_tokens[MAX_BATCH + 1]; /* BOS, then the batch */
    int32_t seq[MAX_BATCH] = {0};
    bool logits[MAX_BATCH];
    random_tokens(model, 1000, PROMPT_TOKENS, prompt);
    random_tokens(model, 1001, MAX_BATCH + 1, batch_tokens);
    for (size_t i = 0; i < MAX_BATCH; i++)
        logits[i] = true;
    corral_error err = {{0}};
    corral_seq_truncate(ctx, 0, 0);
    corral_batch first = {.n_tokens = PROMPT_TOKENS, .tokens = prompt};
    bool ok = corral_decode(ctx, &first, &err);
    double wall[6], cpu[6];
    for (size_t s = 0; ok && s < sizeof sizes / sizeof sizes[0]; s++) {
        wall[s] = cpu[s] = 1e30;
        for (int r = 0; ok && r <= REPS; r++) { /* the first a warm-up */
            corral_batch b = {.n_tokens = sizes[s], .tokens = batch_tokens + 1, .seq = seq,
                              .logits = logits};
            double w = clock_seconds(CLOCK_MONOTONIC), c = clock_seconds(CLOCK_PROCESS_CPUTIME_ID);
            ok = corral_decode(ctx, &b, &err);
            c = clock_seconds(CLOCK_PROCESS_CPUTIME_ID) - c;
            w = clock_seconds(CLOCK_MONOTONIC) - w;
            corral_seq_truncate(ctx, 0, PROMPT_TOKENS);
            if (r > 0) {
                wall[s] = w < wall[s] ? w : wall[s];
                cpu[s] = c < cpu[s] ? c : cpu[s];
            }
        }
    }
    corral_seq_truncate(ctx, 0, 0);
    if (!ok) {
        fprintf(stderr, "bench_speculative: %s\n", err.message);
        return false;
    }
    printf("verifying (threads: %ld; least of %d): rows, ms wall, ms CPU, each against 1 row\n",
           o->threads, REPS);
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
        printf("  %2zu %9.2f %9.2f %6.2fx wall %6.2fx CPU\n", sizes[s], wall[s] * 1e3,
               cpu[s] * 1e3, wall[s] / wall[0], cpu[s] / cpu[0]);
    return true;
}

static bool parse_options(int argc, char **argv, options *o)
{
    *o = (options){.n_tokens = 128, .rounds = 5, .threads = 0, .max_draft = 8};
    if (argc < 2)
        return false;
    o->target = argv[1];
    for (int i = 2; i + 1 < argc; i += 2) {
        const char *flag = argv[i], *value = argv[i + 1];
        char *end;
        long n = strtol(value, &end, 10);
        bool number = *value && !*end;
        if (strcmp(flag, "-m") == 0)
            o->draft = value;
        else if (strcmp(flag, "-p") == 0 && strcmp(value, "random") == 0)
            o->repeat = false;
        else if (strcmp(flag, "-p") == 0 && strcmp(value, "repeat") == 0)
            o->repeat = true;
        else if (strcmp(flag, "-n") == 0 && number && n >= 1 && n <= 4096)
            o->n_tokens = n;
        else if (strcmp(flag, "-r") == 0 && number && n >= 1 && n <= MAX_ROUNDS)
            o->rounds = n;
        else if (strcmp(flag, "-t") == 0 && number && n >= 0 && n <= 256)
            o->threads = n;
        else if (strcmp(flag, "-k") == 0 && number && n >= 1 && n <= SLOT_MAX_DRAFT)
            o->max_draft = n;
        else
            return false;
    }
    return argc % 2 == 0;
}

int main(int argc, char **argv)
{
    options o;
    if (!parse_options(argc, argv, &o)) {
        fprintf(stderr, "usage: bench_speculative TARGET.gguf [-m DRAFT.gguf] [-n TOKENS] "
                        "[-r ROUNDS] [-t THREADS] [-k MAX_DRAFT 1-%d] [-p random|repeat]\n",
                SLOT_MAX_DRAFT);
        return 2;
    }
    corral_error err = {{0}};
    corral_model *model = corral_model_load(o.target, &err);
    corral_context *ctx = NULL;
    draft_model *draft = NULL;
    uint32_t n_ctx = (uint32_t)(2 * PASSAGE_TOKENS + PROMPT_TOKENS + 2 * o.n_tokens + SLOT_MAX_DRAFT);
    if (model) {
        corral_context_params cp;
        corral_context_params_init(&cp);
        cp.n_ctx = n_ctx;
        cp.n_batch = 512;
        cp.n_threads = (int)o.threads;
        cp.step_checkpoints = true; /* a recurrent target's drafts go back to one */
        ctx = corral_context_create(model, &cp, &err);
    }
    if (ctx && o.draft) {
        draft = draft_model_create(o.draft, n_ctx, 1, 512, (int)o.threads, &err);
        if (draft && !draft_model_vocab_matches(model, draft_model_model(draft), &err)) {
            draft_model_free(draft);
            draft = NULL;
        }
    }
    if (!ctx || (o.draft && !draft)) {
        fprintf(stderr, "bench_speculative: %s\n", err.message);
        draft_model_free(draft);
        corral_context_free(ctx);
        corral_model_free(model);
        return 1;
    }
    int n_modes = draft ? N_MODES : MODE_DRAFT;
    static double tps[N_MODES][MAX_ROUNDS], speedup[N_MODES][MAX_ROUNDS];
    static double cpu_tps[N_MODES][MAX_ROUNDS], cpu_speedup[N_MODES][MAX_ROUNDS];
    size_t drafted[N_MODES] = {0}, accepted[N_MODES] = {0}, generated[N_MODES] = {0};
    bool same = true;
    size_t n_prompt = o.repeat ? 2 * PASSAGE_TOKENS + (size_t)o.n_tokens : PROMPT_TOKENS;
    corral_token *prompt = malloc(n_prompt * sizeof *prompt);
    bool ok = prompt != NULL && print_verify_costs(&o, model, ctx);
    /* a warm-up of every mode (r = -1): the weights' pages, the draft's context */
    for (long r = -1; r < o.rounds && ok; r++) {
        if (o.repeat) {
            run_result seen = {0};
            random_tokens(model, r, PASSAGE_TOKENS, prompt);
            ok = run_once(&o, model, ctx, NULL, MODE_PLAIN, prompt, PASSAGE_TOKENS, &seen);
            /* passage, continuation (padded should the model stop early), passage */
            for (size_t i = 0; ok && i < (size_t)o.n_tokens; i++)
                prompt[PASSAGE_TOKENS + i] = seen.ids[i < seen.n_ids ? i : 0];
            memcpy(prompt + PASSAGE_TOKENS + o.n_tokens, prompt, PASSAGE_TOKENS * sizeof *prompt);
            free(seen.ids);
        } else {
            random_tokens(model, r, PROMPT_TOKENS, prompt);
        }
        run_result res[N_MODES] = {{0}};
        for (int i = 0; i < n_modes && ok; i++) {
            int m = (int)((i + (r < 0 ? 0 : r)) % n_modes);
            ok = run_once(&o, model, ctx, draft, m, prompt, n_prompt, &res[m]);
        }
        for (int m = 0; ok && r >= 0 && m < n_modes; m++) {
            tps[m][r] = res[m].tokens_per_s;
            speedup[m][r] = res[m].tokens_per_s / res[MODE_PLAIN].tokens_per_s;
            cpu_tps[m][r] = res[m].tokens_per_cpu_s;
            cpu_speedup[m][r] = res[m].tokens_per_cpu_s / res[MODE_PLAIN].tokens_per_cpu_s;
            drafted[m] += res[m].drafted;
            accepted[m] += res[m].accepted;
            generated[m] += res[m].n_ids;
            same = same && res[m].n_ids == res[MODE_PLAIN].n_ids &&
                   memcmp(res[m].ids, res[MODE_PLAIN].ids, res[m].n_ids * sizeof *res[m].ids) == 0;
        }
        for (int m = 0; m < n_modes; m++)
            free(res[m].ids);
    }
    if (ok) {
        printf("%s, %ld tokens after a %s prompt of %zu, %ld rounds, drafts of up to %ld\n",
               o.target, o.n_tokens, o.repeat ? "self-repeating" : "random", n_prompt,
               o.rounds, o.max_draft);
        if (draft)
            printf("draft model %s\n", o.draft);
        printf("%-7s %10s %8s %9s %9s %11s %10s %8s\n", "mode", "tokens/s", "speed-up",
               "drafted", "accepted", "acceptance", "CPU tok/s", "CPU x");
        for (int m = 0; m < n_modes; m++) {
            double rate = drafted[m] ? (double)accepted[m] / (double)drafted[m] : 0.0;
            printf("%-7s %10.2f %8.3f %9zu %9zu %10.1f%% %10.2f %8.3f\n", mode_names[m],
                   median(tps[m], o.rounds), median(speedup[m], o.rounds), drafted[m],
                   accepted[m], 100.0 * rate, median(cpu_tps[m], o.rounds),
                   median(cpu_speedup[m], o.rounds));
        }
        printf("tokens generated per mode: %zu; every mode's tokens equal plain decoding's: %s\n",
               generated[MODE_PLAIN], same ? "yes" : "NO");
    }
    free(prompt);
    draft_model_free(draft);
    corral_context_free(ctx);
    corral_model_free(model);
    return ok && same ? 0 : 1;
}

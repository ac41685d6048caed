/*
 * `corral bench MODEL.gguf`: prompt-processing and generation speed, measured as llama-bench
 * does so the two can be compared on the same file. pp = one batch of p random tokens, tg =
 * n tokens decoded one at a time; every run starts from an empty KV cache (F16, or the type
 * --kv names, as llama-bench's -ctk / -ctv), or from one holding d random tokens (-d,
 * llama-bench's depth; filled once, untimed, for all the tests at that depth and thread count,
 * each run cutting the cache back to it), after one warm-up. tg may also run s sequences at
 * once (-s, llama-batched-bench's parallel sequences): each step decodes one token of every sequence in one batch, as the runner does
 * for s clients. Prints the median tokens/s (all sequences' tokens) and min/max per test and,
 * for tg, the weight bytes streamed per second: of a mixture of experts, only the experts a
 * step uses; then the process's CPU milliseconds per token (median), which on a shared
 * machine leaves out the time the threads waited for a core, where the wall figures do not.
 * Uses only the public engine API.
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/commands.h"
#include "cli/device_option.h"
#include "corral/engine.h"

enum { MAX_LIST = 16, MAX_REPS = 1000, MAX_SEQ = 64 };

typedef struct int_list {
    long values[MAX_LIST];
    size_t n;
} int_list;

typedef struct bench_options {
    const char *model_path;
    int_list n_prompt, n_gen, threads, depth, n_seq;
    long reps;
    corral_kv_type kv_type;
    device_option device;
} bench_options;

/*
 * What a generated token reads: every weight in full but the experts and the embedding,
 * of which one row (all of it where it is also the output matrix); of the experts, those
 * of expert_used_count of expert_count (a step of several sequences: the share a step's
 * tokens choose, if each chose independently and evenly).
 */
typedef struct model_bytes {
    uint64_t file, weights, per_token; /* per_token: all but the experts */
    uint64_t experts;                  /* every expert's bytes */
    uint64_t n_expert, n_expert_used;
} model_bytes;

static void usage(FILE *out)
{
    fputs("Usage: corral bench MODEL.gguf [options]\n"
          "  -p N[,N...]       prompt tokens per pp test (default 128; 0 = no pp test)\n"
          "  -n N[,N...]       tokens generated per tg test (default 64; 0 = no tg test)\n"
          "  -t N[,N...]       threads (default: physical cores)\n"
          "  -d N[,N...]       tokens already in the KV cache before each test (default 0)\n"
          "  -s N[,N...]       sequences generating together in each tg test (default 1)\n"
          "  -r N              repetitions per test, after one warm-up (default 5)\n"
          "  --kv TYPE         KV cache type: f16 (default), f32, q8_0, q4_0\n"
          "  --cpu LEVEL       kernel level: scalar, avx2, avx512-novnni, avx512,\n"
          "                    avx512-vdpbf16ps\n"
          "  --device DEV      cpu, or vulkan[:N] (every layer that fits on GPU N)\n"
          "  --gpu-layers N    the last N layers on the GPU (-1: all that fit)\n",
          out);
}

static bool parse_list(const char *flag, const char *text, int_list *list)
{
    list->n = 0;
    const char *p = text;
    for (;;) {
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (errno || end == p || v < 0 || v > (1L << 20) || list->n == MAX_LIST ||
            (*end && *end != ',')) {
            fprintf(stderr, "corral bench: %s expects numbers 0..%ld separated by commas, got '%s'\n",
                    flag, 1L << 20, text);
            return false;
        }
        list->values[list->n++] = v;
        if (!*end)
            return true;
        p = end + 1;
    }
}

/* 0 = run, 1 = exit 0 (help), 2 = usage error. */
static int parse_args(int argc, char **argv, bench_options *o)
{
    *o = (bench_options){.n_prompt = {{128}, 1}, .n_gen = {{64}, 1}, .threads = {{0}, 1},
                         .depth = {{0}, 1}, .n_seq = {{1}, 1}, .reps = 5};
    for (int i = 1; i < argc; i++) {
        const char *flag = argv[i];
        if (strcmp(flag, "-h") == 0 || strcmp(flag, "--help") == 0) {
            usage(stdout);
            return 1;
        }
        if (flag[0] != '-') {
            if (o->model_path) {
                fprintf(stderr, "corral bench: one model only ('%s')\n", flag);
                return 2;
            }
            o->model_path = flag;
            continue;
        }
        static const char *const value_flags[] = {"-p", "-n", "-t", "-d", "-s", "-r", "--cpu", "--kv",
                                                  "--device", "--gpu-layers"};
        bool known = false;
        for (size_t f = 0; f < sizeof value_flags / sizeof value_flags[0]; f++)
            known = known || strcmp(flag, value_flags[f]) == 0;
        if (!known) {
            fprintf(stderr, "corral bench: unknown option '%s'\n", flag);
            return 2;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "corral bench: %s needs a value\n", flag);
            return 2;
        }
        const char *value = argv[++i];
        int_list reps;
        corral_error err;
        bool ok;
        if (strcmp(flag, "-p") == 0) {
            ok = parse_list(flag, value, &o->n_prompt);
        } else if (strcmp(flag, "-n") == 0) {
            ok = parse_list(flag, value, &o->n_gen);
        } else if (strcmp(flag, "-t") == 0) {
            ok = parse_list(flag, value, &o->threads);
        } else if (strcmp(flag, "-d") == 0) {
            ok = parse_list(flag, value, &o->depth);
        } else if (strcmp(flag, "-s") == 0) {
            ok = parse_list(flag, value, &o->n_seq);
            for (size_t k = 0; ok && k < o->n_seq.n; k++)
                ok = o->n_seq.values[k] >= 1 && o->n_seq.values[k] <= MAX_SEQ;
            if (!ok)
                fprintf(stderr, "corral bench: -s expects sequence counts 1..%d\n", MAX_SEQ);
        } else if (strcmp(flag, "-r") == 0) {
            ok = parse_list(flag, value, &reps) && reps.n == 1 && reps.values[0] >= 1 &&
                 reps.values[0] <= MAX_REPS;
            if (ok)
                o->reps = reps.values[0];
            else
                fprintf(stderr, "corral bench: -r expects 1..%d\n", MAX_REPS);
        } else if (strcmp(flag, "--kv") == 0) {
            ok = corral_kv_type_parse(value, &o->kv_type);
            if (!ok)
                fprintf(stderr, "corral bench: --kv expects f16, f32, q8_0 or q4_0, got '%s'\n",
                        value);
        } else if (strcmp(flag, "--device") == 0 || strcmp(flag, "--gpu-layers") == 0) {
            ok = device_option_parse(&o->device, "bench", flag, value) == 1;
        } else { /* --cpu */
            ok = corral_cpu_set_level(value, &err);
            if (!ok)
                fprintf(stderr, "corral bench: %s\n", err.message);
        }
        if (!ok)
            return 2;
    }
    if (!o->model_path) {
        usage(stderr);
        return 2;
    }
    return 0;
}

/* `<arch>.suffix` as an unsigned number, or 0 when absent or not a non-negative integer. */
static uint64_t arch_meta_uint(const corral_model_file *file, const char *suffix)
{
    long arch_at = corral_model_file_find_meta(file, "general.architecture");
    if (arch_at < 0 || corral_model_file_meta_type(file, (size_t)arch_at) != CORRAL_META_STRING)
        return 0;
    size_t len;
    const char *arch = corral_model_file_meta_string(file, (size_t)arch_at, 0, &len);
    char key[256];
    if (len > 128)
        return 0;
    snprintf(key, sizeof key, "%.*s.%s", (int)len, arch, suffix);
    long at = corral_model_file_find_meta(file, key);
    if (at < 0)
        return 0;
    corral_meta_type type = corral_model_file_meta_type(file, (size_t)at);
    if (type == CORRAL_META_UINT)
        return corral_model_file_meta_uint(file, (size_t)at, 0);
    if (type == CORRAL_META_INT && corral_model_file_meta_int(file, (size_t)at, 0) > 0)
        return (uint64_t)corral_model_file_meta_int(file, (size_t)at, 0);
    return 0;
}

/* Whether a tensor holds experts: a slab of all of them (blk.N.ffn_gate_exps.weight, their
 * biases), or one expert's matrix in older files (blk.N.ffn_gate.E.weight). */
static bool is_expert_tensor(const char *name)
{
    if (strstr(name, "_exps."))
        return true;
    unsigned layer, expert;
    char kind[8];
    int end = 0;
    return sscanf(name, "blk.%u.ffn_%7[a-z].%u.weight%n", &layer, kind, &expert, &end) == 3 &&
           name[end] == '\0';
}

static bool read_model_bytes(const char *path, model_bytes *bytes, corral_error *err)
{
    corral_model_file *file = corral_model_file_open(path, err);
    if (!file)
        return false;
    *bytes = (model_bytes){0};
    FILE *f = fopen(path, "rb");
    if (f && fseek(f, 0, SEEK_END) == 0)
        bytes->file = (uint64_t)ftell(f);
    if (f)
        fclose(f);
    bool tied = true;
    for (size_t i = 0; i < corral_model_file_n_tensors(file); i++)
        tied = tied && strcmp(corral_model_file_tensor_name(file, i), "output.weight") != 0;
    for (size_t i = 0; i < corral_model_file_n_tensors(file); i++) {
        const char *name = corral_model_file_tensor_name(file, i);
        uint64_t size = corral_model_file_tensor_bytes(file, i);
        bytes->weights += size;
        if (strcmp(name, "token_embd.weight") == 0 && !tied) {
            int64_t ne[4] = {0};
            corral_model_file_tensor_shape(file, i, ne);
            bytes->per_token += ne[1] > 0 ? size / (uint64_t)ne[1] : size;
        } else if (is_expert_tensor(name)) {
            bytes->experts += size;
        } else {
            bytes->per_token += size;
        }
    }
    bytes->n_expert = arch_meta_uint(file, "expert_count");
    bytes->n_expert_used = arch_meta_uint(file, "expert_used_count");
    if (bytes->n_expert_used > bytes->n_expert)
        bytes->n_expert_used = bytes->n_expert;
    corral_model_file_close(file);
    return true;
}

/* The weight bytes one step of n_seq sequences reads (model_bytes). */
static double bytes_per_step(const model_bytes *bytes, long n_seq)
{
    double share = 1.0;
    if (bytes->n_expert > 0) {
        double unused = 1.0 - (double)bytes->n_expert_used / (double)bytes->n_expert;
        share = 1.0 - pow(unused, (double)n_seq);
    }
    return (double)bytes->per_token + share * (double)bytes->experts;
}

static double clock_seconds(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* llama-bench's tokens: random ids (BOS first when the vocabulary adds one). */
static corral_token random_token(uint64_t *state, uint32_t n_vocab)
{
    *state = *state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (corral_token)((*state >> 33) % n_vocab);
}

/* n random tokens (BOS first) into sequence seq, whose ids seqs holds (n of them). */
static bool run_prompt(corral_context *ctx, corral_token *tokens, int32_t *seqs, long n,
                       int32_t seq, uint32_t n_vocab, corral_token bos, uint64_t *rng,
                       corral_error *err)
{
    for (long i = 0; i < n; i++) {
        tokens[i] = i == 0 && bos >= 0 ? bos : random_token(rng, n_vocab);
        seqs[i] = seq;
    }
    corral_batch batch = {.n_tokens = (size_t)n, .tokens = tokens, .seq = seqs};
    return corral_decode(ctx, &batch, err);
}

/* n steps, each one token of each of n_seq sequences in one batch, all with logits. */
static bool run_generation(corral_context *ctx, long n, long n_seq, uint32_t n_vocab,
                           corral_token bos, uint64_t *rng, corral_error *err)
{
    corral_token tokens[MAX_SEQ];
    int32_t seqs[MAX_SEQ];
    bool logits[MAX_SEQ];
    for (long s = 0; s < n_seq; s++) {
        tokens[s] = bos >= 0 ? bos : random_token(rng, n_vocab);
        seqs[s] = (int32_t)s;
        logits[s] = true;
    }
    for (long i = 0; i < n; i++) {
        corral_batch batch = {
            .n_tokens = (size_t)n_seq, .tokens = tokens, .seq = seqs, .logits = logits};
        if (!corral_decode(ctx, &batch, err))
            return false;
        for (long s = 0; s < n_seq; s++) {
            if (!corral_get_logits(ctx, (size_t)s)) {
                corral_error_set(err, "no logits for sequence %ld", s);
                return false;
            }
            tokens[s] = random_token(rng, n_vocab);
        }
    }
    return true;
}

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef struct bench_test {
    const char *kind; /* "pp" or "tg" */
    long n_tokens;
    long n_seq; /* sequences generating together (tg) */
} bench_test;

/* The tests of one thread count and depth, which share a context and its filled cache. */
typedef struct bench_group {
    long depth; /* tokens in the cache before the timed part, in every sequence */
    int n_threads;
    corral_kv_type kv_type;
    const device_option *device;
    const bench_test *tests;
    size_t n_tests;
} bench_group;

enum { DEPTH_BATCH = 512 };

/* A context that holds every test of the group: the largest prompt, generation and number of
 * sequences, on top of the depth. */
static corral_context *group_context_create(const corral_model *model, const bench_group *g,
                                            long *max_tokens, long *max_seq, corral_error *err)
{
    long tokens = 0, seqs = 1, batch = 1;
    for (size_t i = 0; i < g->n_tests; i++) {
        const bench_test *t = &g->tests[i];
        tokens = t->n_tokens > tokens ? t->n_tokens : tokens;
        seqs = t->n_seq > seqs ? t->n_seq : seqs;
        long b = t->kind[0] == 'p' ? t->n_tokens : t->n_seq;
        batch = b > batch ? b : batch;
    }
    corral_context_params params;
    corral_context_params_init(&params);
    params.n_ctx = (uint32_t)(g->depth + tokens + 1);
    /* the depth goes in batches of up to DEPTH_BATCH; raised only, so that a timed pp batch
     * or tg step is never split */
    long fill = g->depth < DEPTH_BATCH ? g->depth : DEPTH_BATCH;
    params.n_batch = (uint32_t)(batch > fill ? batch : fill);
    params.n_seq = (uint32_t)seqs;
    params.n_threads = g->n_threads;
    params.kv_type = g->kv_type;
    device_option_apply(g->device, &params);
    corral_context *ctx = corral_context_create(model, &params, err);
    if (ctx && params.n_gpu_layers != 0 && !corral_context_gpu_layers(ctx)) {
        corral_error_set(err, "no layer went to a GPU (the log says why)");
        corral_context_free(ctx);
        ctx = NULL;
    }
    *max_tokens = tokens;
    *max_seq = seqs;
    return ctx;
}

/* One test's figures per timed run, each sorted ascending: speed (tokens of all sequences
 * per second) and the process's CPU milliseconds per token. */
typedef struct bench_runs {
    double *speeds, *cpu_ms;
} bench_runs;

/* One test on the group's filled context: a warm-up, then reps timed runs, each from the
 * cache cut back to the depth. */
static bool run_test(const corral_model *model, corral_context *ctx, const bench_group *g,
                     const bench_test *test, corral_token *tokens, int32_t *seqs, long reps,
                     bench_runs *runs, corral_error *err)
{
    uint32_t n_vocab = corral_model_n_vocab(model);
    corral_token bos = corral_vocab_bos(corral_model_vocab(model));
    uint64_t rng = 1;
    bool ok = true;
    double n_tokens = (double)(test->n_tokens * test->n_seq);
    for (long run = -1; run < reps && ok; run++) {
        for (long s = 0; s < test->n_seq; s++)
            corral_seq_truncate(ctx, (int32_t)s, (uint32_t)g->depth);
        double start = clock_seconds(CLOCK_MONOTONIC);
        double cpu_start = clock_seconds(CLOCK_PROCESS_CPUTIME_ID);
        if (test->kind[0] == 'p')
            ok = run_prompt(ctx, tokens, seqs, test->n_tokens, 0, n_vocab, bos, &rng, err);
        else
            ok = run_generation(ctx, run < 0 ? 1 : test->n_tokens, test->n_seq, n_vocab, bos,
                                &rng, err);
        if (run >= 0) {
            runs->cpu_ms[run] =
                (clock_seconds(CLOCK_PROCESS_CPUTIME_ID) - cpu_start) * 1e3 / n_tokens;
            runs->speeds[run] = n_tokens / (clock_seconds(CLOCK_MONOTONIC) - start);
        }
    }
    if (ok) {
        qsort(runs->speeds, (size_t)reps, sizeof *runs->speeds, compare_doubles);
        qsort(runs->cpu_ms, (size_t)reps, sizeof *runs->cpu_ms, compare_doubles);
    }
    return ok;
}

static void print_header(const char *path, const model_bytes *bytes, corral_kv_type kv_type,
                         const device_option *device)
{
    printf("model: %s (%.0f MB; weights read per generated token %.2f MB", path,
           (double)bytes->file / 1e6, bytes_per_step(bytes, 1) / 1e6);
    if (bytes->n_expert > 0)
        printf(", %llu of %llu experts", (unsigned long long)bytes->n_expert_used,
               (unsigned long long)bytes->n_expert);
    printf(")\n");
    printf("KV cache: %s\n", corral_kv_type_name(kv_type));
    if (device->vulkan || device->gpu_layers_set) {
        corral_gpu_info gpus[16];
        size_t n = 0;
        corral_error err = {{0}};
        const char *name = "none found";
        if (corral_gpu_list(gpus, 16, &n, &err))
            for (size_t i = 0; i < n; i++)
                if (device->index >= 0 ? gpus[i].index == (uint32_t)device->index : gpus[i].chosen)
                    name = gpus[i].name;
        printf("device: vulkan, %s, gpu layers %ld\n", name,
               device->gpu_layers_set ? device->gpu_layers : -1L);
    }
    const char *level = corral_cpu_level();
    printf("kernels: %s (CPU supports %s)", level, corral_cpu_detected_level());
    if (strcmp(level, "scalar") != 0) /* the SIMD kernels, where the choice applies */
        printf(", 1-token software prefetch %s",
               corral_cpu_prefetches_single_stream() ? "on" : "off");
    printf("\n\n");
    printf("| test         | threads | t/s median | t/s min | t/s max | GB/s | CPU ms/t |\n");
    printf("|--------------|--------:|-----------:|--------:|--------:|-----:|---------:|\n");
}

static double median_of(const double *sorted, long n)
{
    return n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
}

/* One test's row. */
static void print_row(const bench_group *g, const bench_test *test, long reps,
                      const model_bytes *bytes, const bench_runs *runs)
{
    char name[64];
    int len = snprintf(name, sizeof name, "%s%ld", test->kind, test->n_tokens);
    if (test->n_seq > 1)
        len += snprintf(name + len, sizeof name - (size_t)len, " x%ld", test->n_seq);
    if (g->depth > 0)
        snprintf(name + len, sizeof name - (size_t)len, " @ d%ld", g->depth);
    const double *speeds = runs->speeds;
    double median = median_of(speeds, reps);
    char gbps[16] = ""; /* the weights are read once per step, for all sequences */
    if (test->kind[0] == 't')
        snprintf(gbps, sizeof gbps, "%.1f",
                 bytes_per_step(bytes, test->n_seq) * median / (double)test->n_seq / 1e9);
    char threads[16] = "auto";
    if (g->n_threads > 0)
        snprintf(threads, sizeof threads, "%d", g->n_threads);
    printf("| %-12s | %7s | %10.2f | %7.2f | %7.2f | %4s | %8.3f |\n", name, threads, median,
           speeds[0], speeds[reps - 1], gbps, median_of(runs->cpu_ms, reps));
    fflush(stdout);
}

/* The group's context, its cache filled to the depth once (untimed) in every sequence, then
 * each test, its row printed as it ends. */
static bool run_group(const corral_model *model, const bench_group *g, long reps,
                      const model_bytes *bytes, bench_runs *runs, corral_error *err)
{
    long max_tokens, max_seq;
    corral_context *ctx = group_context_create(model, g, &max_tokens, &max_seq, err);
    long n_buffer = max_tokens > g->depth ? max_tokens : g->depth;
    corral_token *tokens = malloc((size_t)n_buffer * sizeof *tokens);
    int32_t *seqs = malloc((size_t)n_buffer * sizeof *seqs);
    bool ok = ctx && tokens && seqs;
    if (ctx && !ok)
        corral_error_set(err, "out of memory");
    uint32_t n_vocab = corral_model_n_vocab(model);
    corral_token bos = corral_vocab_bos(corral_model_vocab(model));
    uint64_t rng = 1;
    for (long s = 0; ok && g->depth > 0 && s < max_seq; s++)
        ok = run_prompt(ctx, tokens, seqs, g->depth, (int32_t)s, n_vocab, bos, &rng, err);
    for (size_t i = 0; i < g->n_tests && ok; i++)
        if ((ok = run_test(model, ctx, g, &g->tests[i], tokens, seqs, reps, runs, err)))
            print_row(g, &g->tests[i], reps, bytes, runs);
    free(tokens);
    free(seqs);
    corral_context_free(ctx);
    return ok;
}

int cmd_bench(int argc, char **argv)
{
    bench_options o;
    int rc = parse_args(argc, argv, &o);
    if (rc)
        return rc == 1 ? 0 : 2;
    corral_error err = {{0}};
    model_bytes bytes;
    corral_model *model = NULL;
    if (!read_model_bytes(o.model_path, &bytes, &err) ||
        !(model = corral_model_load(o.model_path, &err))) {
        fprintf(stderr, "corral bench: %s\n", err.message);
        return 1;
    }
    bench_runs runs = {malloc((size_t)o.reps * sizeof *runs.speeds),
                       malloc((size_t)o.reps * sizeof *runs.cpu_ms)};
    bool ok = runs.speeds && runs.cpu_ms;
    print_header(o.model_path, &bytes, o.kv_type, &o.device);
    /* per thread count and depth, one group: the pp tests, then the tg tests, each at every -s */
    bench_test tests[2 * MAX_LIST + MAX_LIST * MAX_LIST];
    size_t n_tests = 0;
    for (size_t i = 0; i < o.n_prompt.n; i++)
        if (o.n_prompt.values[i] > 0)
            tests[n_tests++] = (bench_test){"pp", o.n_prompt.values[i], 1};
    for (size_t i = 0; i < o.n_gen.n; i++)
        for (size_t s = 0; s < o.n_seq.n && o.n_gen.values[i] > 0; s++)
            tests[n_tests++] = (bench_test){"tg", o.n_gen.values[i], o.n_seq.values[s]};
    for (size_t ti = 0; ti < o.threads.n && ok; ti++)
        for (size_t d = 0; d < o.depth.n && ok && n_tests > 0; d++) {
            bench_group g = {o.depth.values[d], (int)o.threads.values[ti], o.kv_type, &o.device,
                             tests, n_tests};
            ok = run_group(model, &g, o.reps, &bytes, &runs, &err);
        }
    if (!ok)
        fprintf(stderr, "corral bench: %s\n",
                runs.speeds && runs.cpu_ms ? err.message : "out of memory");
    free(runs.speeds);
    free(runs.cpu_ms);
    corral_model_free(model);
    corral_gpu_release();
    return ok ? 0 : 1;
}

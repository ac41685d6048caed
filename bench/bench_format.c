/*
 * Generation under a `format` grammar against free generation: greedy decoding of TOKENS
 * tokens from a model, free and with the JSON schema of bench_schema.h (the server's own
 * schema-to-GBNF), rounds interleaved. Prints per mode the median tokens/s, decode and
 * sampling milliseconds per token, and the ratio of the two modes' speeds; on a busy machine
 * the ratio from the medians of decode + sampling is the steadier figure. A random-weight
 * model (make_bench_model) is the hard case: its greedy token is almost never allowed, so
 * the whole mask is taken at nearly every step.
 * Usage: bench_format MODEL.gguf [TOKENS [ROUNDS [THREADS]]]
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "corral/engine.h"
#include "server/core/format_grammar.h"
#include "bench_schema.h"

enum { MAX_ROUNDS = 100 };

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

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, compare_doubles);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

typedef struct run_result {
    double tokens_per_s, decode_ms, sample_ms;
} run_result;

/* One greedy generation of up to n tokens (gbnf NULL: free); false with a message. */
static bool run_once(corral_model *model, const char *gbnf, int n, int threads, run_result *r)
{
    corral_error err = {{0}};
    const corral_vocab *vocab = corral_model_vocab(model);
    corral_context_params cp;
    corral_context_params_init(&cp);
    cp.n_ctx = 1024;
    cp.n_threads = threads;
    corral_sampler_params sp;
    corral_sampler_params_init(&sp);
    sp.temperature = 0.0f;
    corral_context *ctx = corral_context_create(model, &cp, &err);
    corral_sampler *s = ctx ? corral_sampler_create(&sp, corral_model_n_vocab(model), &err) : NULL;
    corral_grammar *g = s && gbnf ? corral_grammar_create(gbnf, vocab, &err) : NULL;
    corral_token prompt[64];
    size_t n_prompt = 0;
    const char *text = "Answer in JSON:";
    bool ok = s && (!gbnf || g) &&
              corral_tokenize(vocab, text, strlen(text), true, false, prompt, 64, &n_prompt, &err);
    corral_batch batch = {.n_tokens = n_prompt, .tokens = prompt};
    ok = ok && corral_decode(ctx, &batch, &err);
    if (g)
        corral_sampler_set_grammar(s, g);
    double decode = 0, sample = 0, t0 = now_seconds();
    int made = 0;
    const float *logits = ok ? corral_get_logits(ctx, n_prompt - 1) : NULL;
    while (ok && made < n) {
        double a = now_seconds();
        corral_token id = corral_sampler_sample(s, logits);
        double b = now_seconds();
        sample += b - a;
        made++;
        if (corral_vocab_is_eog(vocab, id) || made == n)
            break;
        batch = (corral_batch){.n_tokens = 1, .tokens = &id};
        ok = corral_decode(ctx, &batch, &err);
        decode += now_seconds() - b;
        logits = corral_get_logits(ctx, 0);
    }
    double total = now_seconds() - t0;
    if (!ok)
        fprintf(stderr, "bench_format: %s\n", err.message);
    else
        *r = (run_result){made / total, decode * 1e3 / made, sample * 1e3 / made};
    corral_grammar_free(g);
    corral_sampler_free(s);
    corral_context_free(ctx);
    return ok;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: bench_format MODEL.gguf [TOKENS [ROUNDS [THREADS]]]\n");
        return 2;
    }
    int n = argc > 2 ? atoi(argv[2]) : 64, rounds = argc > 3 ? atoi(argv[3]) : 5;
    int threads = argc > 4 ? atoi(argv[4]) : 0;
    if (n < 1 || rounds < 1 || rounds > MAX_ROUNDS || threads < 0) {
        fprintf(stderr, "usage: bench_format MODEL.gguf [TOKENS [ROUNDS [THREADS]]]\n");
        return 2;
    }
    json_error_t jerr;
    json_t *schema = json_loads(bench_schema_text, 0, &jerr);
    corral_error err = {{0}};
    char *gbnf = schema ? format_grammar_from_schema(schema, &err) : NULL;
    json_decref(schema);
    corral_model *model = gbnf ? corral_model_load(argv[1], &err) : NULL;
    if (!model) {
        fprintf(stderr, "bench_format: %s\n", gbnf ? err.message : "the schema has no grammar");
        free(gbnf);
        return 1;
    }
    double tps[2][MAX_ROUNDS], dec[2][MAX_ROUNDS], smp[2][MAX_ROUNDS];
    run_result warm;
    bool ok = run_once(model, gbnf, 8, threads, &warm); /* the trie, the weights' pages */
    for (int r = 0; r < rounds && ok; r++)
        for (int mode = 0; mode < 2 && ok; mode++) {
            run_result res;
            ok = run_once(model, mode ? gbnf : NULL, n, threads, &res);
            tps[mode][r] = res.tokens_per_s;
            dec[mode][r] = res.decode_ms;
            smp[mode][r] = res.sample_ms;
        }
    if (ok) {
        double m_tps[2], m_dec[2], m_smp[2];
        printf("%-8s %10s %12s %12s\n", "mode", "tokens/s", "decode_ms", "sample_ms");
        for (int mode = 0; mode < 2; mode++) {
            m_tps[mode] = median(tps[mode], rounds);
            m_dec[mode] = median(dec[mode], rounds);
            m_smp[mode] = median(smp[mode], rounds);
            printf("%-8s %10.2f %12.3f %12.3f\n", mode ? "format" : "free", m_tps[mode],
                   m_dec[mode], m_smp[mode]);
        }
        printf("format / free: %.3f by tokens/s, %.3f by decode + sampling\n", m_tps[1] / m_tps[0],
               (m_dec[0] + m_smp[0]) / (m_dec[0] + m_smp[1]));
    }
    corral_model_free(model);
    free(gbnf);
    return ok ? 0 : 1;
}

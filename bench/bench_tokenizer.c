/*
 * Tokenizer throughput: ~1 MiB of text (tokenizer-cases.txt, escapes decoded, repeated) through
 * each reference vocabulary, best of several runs on one thread; prints MB/s and tokens.
 * Usage: bench_tokenizer [FIXTURES_DIR]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "corral/engine.h"

#ifndef CORRAL_FIXTURES_DIR
#define CORRAL_FIXTURES_DIR "tests/fixtures"
#endif

#define TARGET_BYTES ((size_t)1 << 20)
#define RUNS 3

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The case file with \n \t \r \\ decoded, repeated to at least TARGET_BYTES. */
static char *load_text(const char *dir, size_t *len)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/tokenizer-cases.txt", dir);
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char raw[1 << 16];
    size_t n_raw = fread(raw, 1, sizeof raw, f);
    fclose(f);
    size_t n = 0;
    for (size_t i = 0; i < n_raw; i++) {
        char c = raw[i];
        if (c == '\\' && i + 1 < n_raw) {
            c = raw[++i];
            c = c == 'n' ? '\n' : c == 't' ? '\t' : c == 'r' ? '\r' : c;
        }
        raw[n++] = c;
    }
    if (n == 0)
        return NULL;
    char *text = malloc(TARGET_BYTES + n);
    if (!text)
        return NULL;
    size_t total = 0;
    while (total < TARGET_BYTES) {
        memcpy(text + total, raw, n);
        total += n;
    }
    *len = total;
    return text;
}

int main(int argc, char **argv)
{
    const char *dir = argc > 1 ? argv[1] : CORRAL_FIXTURES_DIR;
    size_t len;
    char *text = load_text(dir, &len);
    if (!text) {
        fprintf(stderr, "bench_tokenizer: cannot read %s/tokenizer-cases.txt\n", dir);
        return 1;
    }
    const char *vocabs[] = {"stories260K.gguf", "vocab-llama-spm.gguf", "tiny-tolstoy-f32.gguf",
                            "vocab-llama3-bpe.gguf", "arch/qwen2.gguf"};
    printf("%-24s %10s %10s %10s %12s\n", "vocabulary", "MiB", "tokens", "MB/s", "detok MB/s");
    size_t cap = 3 * len + 8;
    corral_token *ids = malloc(cap * sizeof *ids);
    char *back = malloc(4 * len + 64);
    int status = 0;
    for (size_t i = 0; i < sizeof vocabs / sizeof vocabs[0] && ids && back; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, vocabs[i]);
        corral_error err;
        corral_vocab *v = corral_vocab_open(path, &err);
        if (!v) {
            fprintf(stderr, "bench_tokenizer: %s\n", err.message);
            status = 1;
            continue;
        }
        double best = 1e30, best_detok = 1e30;
        size_t n = 0, n_bytes = 0;
        for (int run = 0; run < RUNS; run++) {
            double t0 = now_seconds();
            if (!corral_tokenize(v, text, len, true, false, ids, cap, &n, &err)) {
                fprintf(stderr, "bench_tokenizer: %s\n", err.message);
                status = 1;
                break;
            }
            double t1 = now_seconds();
            corral_detokenize(v, ids, n, true, false, back, 4 * len + 64, &n_bytes, &err);
            double t2 = now_seconds();
            if (t1 - t0 < best)
                best = t1 - t0;
            if (t2 - t1 < best_detok)
                best_detok = t2 - t1;
        }
        printf("%-24s %10.2f %10zu %10.1f %12.1f\n", vocabs[i], (double)len / (1 << 20), n,
               (double)len / best / 1e6, (double)n_bytes / best_detok / 1e6);
        corral_vocab_free(v);
    }
    free(back);
    free(ids);
    free(text);
    return status;
}

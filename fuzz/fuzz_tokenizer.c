/*
 * libFuzzer target for the tokenizers: arbitrary bytes through SPM (Llama 2, stories260K),
 * byte-level BPE (Llama 3, the tiny qwen2 vocabulary), WordPiece (the tiny bert
 * vocabulary: accent stripping, lower-casing, [UNK] words) and Unigram (vocab-ugm: its
 * precompiled charsmap, merged spaces, unknown code points), with and without special
 * parsing, then back through the detokenizer and the streaming decoder. Traps on an id out of range, a
 * failure on input that fits, a stream chunk that is not valid UTF-8, or a qwen2 round trip of
 * valid UTF-8 that does not give the text back (that vocabulary has every byte, no clean-up).
 * The first input byte picks the vocabulary and flags; the rest is the text.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "corral/engine.h"
#include "utf8.h"

#ifndef CORRAL_FIXTURES_DIR
#define CORRAL_FIXTURES_DIR "tests/fixtures"
#endif

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const vocab_files[] = {"vocab-llama-spm.gguf", "stories260K.gguf",
                                          "vocab-llama3-bpe.gguf", "arch/qwen2.gguf",
                                          "arch/bert.gguf", "vocab-ugm.gguf"};
#define N_VOCABS 6
#define QWEN2 3
static corral_vocab *vocabs[N_VOCABS];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    for (int i = 0; i < N_VOCABS; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", CORRAL_FIXTURES_DIR, vocab_files[i]);
        corral_error err;
        vocabs[i] = corral_vocab_open(path, &err);
        if (!vocabs[i]) {
            fprintf(stderr, "fuzz_tokenizer: %s\n", err.message);
            __builtin_trap();
        }
    }
    return 0;
}

static void check_stream(const corral_vocab *v, const corral_token *ids, size_t n)
{
    corral_error err;
    corral_detok_stream *s = corral_detok_stream_create(v, &err);
    if (!s)
        __builtin_trap();
    for (size_t i = 0; i <= n; i++) {
        size_t len;
        const char *chunk = i < n ? corral_detok_stream_push(s, ids[i], &len)
                                  : corral_detok_stream_finish(s, &len);
        int incomplete;
        if (utf8_valid_prefix((const unsigned char *)chunk, len, &incomplete) != len)
            __builtin_trap();
    }
    corral_detok_stream_free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    int which = data[0] % N_VOCABS;
    bool add_special = data[0] & 0x10, parse_special = data[0] & 0x20;
    const char *text = (const char *)data + 1;
    size_t len = size - 1;
    const corral_vocab *v = vocabs[which];

    size_t n, cap = 3 * len + 8; /* ids never outnumber bytes + BOS/EOS + prefixes */
    corral_token *ids = malloc(cap * sizeof *ids);
    corral_error err;
    if (!ids || !corral_tokenize(v, text, len, add_special, parse_special, ids, cap, &n, &err) ||
        n > cap)
        __builtin_trap();
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || (size_t)ids[i] >= corral_vocab_n_tokens(v))
            __builtin_trap();

    size_t n_bytes;
    if (!corral_detokenize(v, ids, n, true, parse_special, NULL, 0, &n_bytes, &err))
        __builtin_trap();
    char *back = malloc(n_bytes ? n_bytes : 1);
    if (!back || !corral_detokenize(v, ids, n, true, parse_special, back, n_bytes, &n_bytes, &err))
        __builtin_trap();
    int incomplete;
    if (which == QWEN2 && !parse_special &&
        utf8_valid_prefix((const unsigned char *)text, len, &incomplete) == len &&
        (n_bytes != len || memcmp(back, text, len) != 0))
        __builtin_trap();
    check_stream(v, ids, n);
    free(back);
    free(ids);
    return 0;
}

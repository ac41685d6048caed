/*
 * libFuzzer target for the grammar mask against its definition: a GBNF text (the input up
 * to its first NUL byte, after a byte of options) made into a grammar on a small vocabulary
 * written here, then driven token by token, each token picked among the allowed ones by the
 * next input byte. At every step the mask the trie walk works out (its bits, its list of
 * ids where it lists them, and the logits it masks) must be exactly the tokens
 * grammar_allows accepts one by one (the check the sampler makes of a token drawn first:
 * grammar_allows_all, the full rejection scan tests/test_grammar_mask.c compares with, is
 * exponential in overlapping alternatives and would time out here); after the drive, the
 * grammar restarted and driven through the same tokens must give the same masks from its
 * kept work. The options shrink the cache of stack sets (the slow walks) and the listing
 * limit. Any difference aborts, as does any crash, sanitizer report, leak or hang; a grammar
 * the parser refuses, or a step past the matcher's limits, ends the input quietly.
 *
 * The vocabulary mixes single characters, JSON fragments, texts sharing long prefixes,
 * multi-byte characters whole and split into byte tokens, overlong and out-of-range forms,
 * control characters and tokens without text, so that a walk meets loops, runs, partial
 * characters and subtrees taken whole on few tokens.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "corral/engine.h"
#include "gguf.h"
#include "grammar.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum { MAX_TEXT = 4096, MAX_STEPS = 32 };

/* A quote then a letter or digit, 36 of them, so that the quote's node has the children a
 * string opened within a token needs for its own loop walk (grammar.c, NODE_LOOP_CHILDREN). */
#define QUOTED(c) "\"" #c
#define QUOTED_ROW(a, b, c, d, e, f) QUOTED(a), QUOTED(b), QUOTED(c), QUOTED(d), QUOTED(e), QUOTED(f)

static const char *const vocab_texts[] = {
    "<unk>", "<s>", "</s>", "<ctl>",
    /* byte tokens: a newline, a quote, a backslash, DEL, and the bytes of é, 日 and 😀 */
    "<0x0A>", "<0x22>", "<0x5C>", "<0x7F>", "<0xC3>", "<0xA9>", "<0xE6>", "<0x97>", "<0xA5>",
    "<0xF0>", "<0x9F>", "<0x98>", "<0x80>", "<0xFF>", "<0xC0>",
    /* JSON and GBNF fragments */
    "{", "}", "[", "]", ":", ",", "\"", "\\", "\":", "\",", "\",\n", "\xe2\x96\x81\"",
    "\xe2\x96\x81", "\xe2\x96\x81\xe2\x96\x81", "\"a", "\"name\"", "\"}", "},", "]}", ":\xe2\x96\x81",
    ",\xe2\x96\x81", "\xe2\x96\x81{", "true", "false", "null", "nul", "tr", "0", "00", "1", "12",
    "-", "-1", ".", ".5", "e", "E", "e+", "1e", "+", "123456789", "\\u", "\\u00", "\\u00e9",
    "\\n", "\\\"", "\\\\", "\\t", "\n", "\t", "a\n", "\x01", "a\x1f", "\x7f",
    /* letters and words, some past 8 bytes sharing their first 8 */
    "a", "b", "c", "x", "y", "z", "A", "Z", "ab", "abc", "abcd", "abcdefgh", "abcdefghi",
    "abcdefghij", "abcdefgh\"", "zz\"", "y\"}", "a\"b", "hello", "\xe2\x96\x81hello",
    /* multi-byte characters, whole, with ASCII around them, or cut short */
    "\xc3\xa9", "\xc3\xa9\x61", "\xe6\x97\xa5", "\xe6\x97\xa5\xe6\x9c\xac", "\xf0\x9f\x98\x80",
    "\xf0\x9f\x98\x80\"", "b\xe0\xa4\xb9", "\xe0\xa4\xb9\x61\x62", "\xe0\xa4",
    /* overlong forms, a code point past U+10FFFF, a surrogate */
    "a\xc0\x80", "\xc1\xbf", "\xe0\x80\x80x", "c\xf4\x90\x80\x80", "d\xed\xa0\x80",
    QUOTED_ROW(b, c, d, e, f, g), QUOTED_ROW(h, i, j, k, l, m), QUOTED_ROW(n, o, p, q, r, s),
    QUOTED_ROW(t, u, v, w, x, y), QUOTED_ROW(z, 0, 1, 2, 3, 4), QUOTED_ROW(5, 6, 7, 8, 9, _),
};
enum { N_TEXTS = sizeof vocab_texts / sizeof *vocab_texts };

/* The small vocabulary, written once to a temporary file and opened; NULL if that failed
 * (a broken harness, reported once). */
static corral_vocab *small_vocab(void)
{
    static corral_vocab *vocab;
    static bool tried;
    if (tried)
        return vocab;
    tried = true;
    gguf_str strs[N_TEXTS];
    int32_t types[N_TEXTS];
    float scores[N_TEXTS];
    for (size_t i = 0; i < N_TEXTS; i++) {
        const char *t = vocab_texts[i];
        strs[i] = (gguf_str){t, strlen(t)};
        types[i] = i == 0 ? 2 /* unknown */
                 : i < 4  ? 3 /* control, no text */
                 : strncmp(t, "<0x", 3) == 0 ? 6 /* byte */ : 1;
        scores[i] = -(float)i;
    }
    char path[] = "/tmp/corral-fuzz-grammar-vocab-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) {
        perror("mkstemp");
        return NULL;
    }
    close(fd);
    corral_error err = {{0}};
    gguf_writer *w = gguf_writer_create();
    bool ok = w && gguf_writer_add_str(w, "tokenizer.ggml.model", "llama", 5, &err) &&
              gguf_writer_add_str_array(w, "tokenizer.ggml.tokens", strs, N_TEXTS, &err) &&
              gguf_writer_add_array(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, types,
                                    N_TEXTS, &err) &&
              gguf_writer_add_array(w, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, scores,
                                    N_TEXTS, &err) &&
              gguf_writer_begin(w, path, &err) && gguf_writer_finish(w, &err);
    gguf_writer_free(w);
    if (ok)
        vocab = corral_vocab_open(path, &err);
    unlink(path);
    if (!vocab)
        fprintf(stderr, "fuzz_grammar_mask: the vocabulary: %s\n", err.message);
    return vocab;
}

static void differ(const char *what, size_t step, size_t id)
{
    fprintf(stderr, "fuzz_grammar_mask: step %zu, token %zu: %s\n", step, id, what);
    abort();
}

/* Checks the step's mask every way against grammar_allows, token by token; allowed[] gets
 * the definition. False where a limit of the matcher ends the drive. */
static bool check_step(corral_grammar *g, size_t n_vocab, size_t step, uint8_t *allowed,
                       float *logits)
{
    const corral_token *ids;
    size_t n_ids;
    if (!grammar_allowed_ids(g, &ids, &n_ids))
        return false;
    for (size_t id = 0; id < n_vocab; id++)
        allowed[id] = grammar_allows(g, (corral_token)id);
    const uint64_t *bits = grammar_mask_bits(g);
    size_t n_allowed = 0;
    for (size_t id = 0; id < n_vocab; id++) {
        bool bit = bits[id >> 6] >> (id & 63) & 1;
        if (bit != (allowed[id] != 0))
            differ(bit ? "the mask's bits keep a token grammar_allows refuses"
                       : "the mask's bits refuse a token grammar_allows takes",
                   step, id);
        n_allowed += allowed[id] != 0;
    }
    if (ids) {
        if (n_ids != n_allowed)
            differ("the listed ids are not the allowed tokens", step, n_ids);
        for (size_t k = 0; k < n_ids; k++)
            if ((size_t)ids[k] >= n_vocab || !allowed[ids[k]] || (k > 0 && ids[k - 1] >= ids[k]))
                differ("a listed id out of place", step, (size_t)ids[k]);
    }
    for (size_t id = 0; id < n_vocab; id++)
        logits[id] = 0.0f;
    bool any = grammar_mask(g, logits);
    if (any != (n_allowed > 0))
        differ("grammar_mask's answer against the allowed count", step, n_allowed);
    for (size_t id = 0; any && id < n_vocab; id++)
        if ((logits[id] == 0.0f) != (allowed[id] != 0))
            differ("the masked logits differ from the definition", step, id);
    return true;
}

/* Drives g: at each step checks the mask, then accepts the allowed text token that
 * choices[step] picks (or picked[step] when replaying); the steps taken. */
static size_t drive(corral_grammar *g, const corral_vocab *vocab, const uint8_t *choices,
                    size_t n_choices, corral_token *picked, size_t n_replay, uint8_t *allowed,
                    float *logits)
{
    size_t n_vocab = corral_vocab_n_tokens(vocab);
    size_t limit = n_replay ? n_replay : (n_choices < MAX_STEPS ? n_choices : MAX_STEPS);
    for (size_t step = 0; step < limit; step++) {
        if (!check_step(g, n_vocab, step, allowed, logits))
            return step;
        corral_token next = -1;
        if (n_replay) {
            next = picked[step];
            if (!allowed[next])
                differ("a token allowed before the restart is refused after it", step,
                       (size_t)next);
        } else {
            size_t n_text = 0;
            for (size_t id = 0; id < n_vocab; id++)
                n_text += allowed[id] && !corral_vocab_is_eog(vocab, (corral_token)id);
            if (n_text == 0)
                return step;
            size_t pick = choices[step] % n_text;
            for (size_t id = 0; id < n_vocab && next < 0; id++)
                if (allowed[id] && !corral_vocab_is_eog(vocab, (corral_token)id) && pick-- == 0)
                    next = (corral_token)id;
            picked[step] = next;
        }
        grammar_accept(g, next);
    }
    return limit;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    corral_vocab *vocab = small_vocab();
    if (!vocab || size < 2)
        return 0;
    uint8_t options = data[0];
    const uint8_t *text_at = data + 1, *end = data + size;
    const uint8_t *nul = memchr(text_at, 0, (size_t)(end - text_at));
    size_t text_len = (size_t)((nul ? nul : end) - text_at);
    if (text_len > MAX_TEXT)
        return 0;
    char *gbnf = malloc(text_len + 1);
    if (!gbnf)
        return 0;
    memcpy(gbnf, text_at, text_len);
    gbnf[text_len] = '\0';
    const uint8_t *choices = nul ? nul + 1 : end;
    size_t n_choices = (size_t)(end - choices);
    corral_error err = {{0}};
    corral_grammar *g = corral_grammar_create(gbnf, vocab, &err);
    free(gbnf);
    if (!g)
        return 0;
    if (options & 1)
        grammar_limit_sets(g, 1 + (options >> 1 & 3)); /* the cache of sets full at once */
    if (options & 8)
        grammar_limit_list(g, options >> 4 & 7);
    size_t n_vocab = corral_vocab_n_tokens(vocab);
    uint8_t *allowed = malloc(n_vocab);
    float *logits = malloc(n_vocab * sizeof *logits);
    corral_token picked[MAX_STEPS];
    if (allowed && logits) {
        size_t taken = drive(g, vocab, choices, n_choices, picked, 0, allowed, logits);
        if (taken > 0 && corral_grammar_restart(g))
            drive(g, vocab, NULL, 0, picked, taken, allowed, logits);
    }
    free(allowed);
    free(logits);
    corral_grammar_free(g);
    return 0;
}

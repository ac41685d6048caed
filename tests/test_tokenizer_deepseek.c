/*
 * DeepSeek's own pre-tokenizers (tokenizer.ggml.pre deepseek-llm, deepseek-coder,
 * deepseek-v3). The first two against llama.cpp's vocabulary-only files and its expected ids
 * for its tokenizer test inputs (tests/fixtures/PROVENANCE.md), every case tokenized as its
 * test does: no BOS, special tokens as text. The vocabularies are stored gzipped and read
 * into memory. deepseek-v3 has no such file: its splitter is checked word by word on texts
 * whose splits follow from its definition.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <zlib.h>

#include "corral/engine.h"
#include "file_fixture.h"
#include "gguf.h"
#include "pretokenizer.h"
#include "vocab.h"

enum { MAX_CASES = 64, MAX_IDS = 1024 };

static const char *fixture_path(const char *name)
{
    static char path[2][2048];
    static int next;
    const char *dir = getenv("CORRAL_FIXTURES");
    char *p = path[next++ % 2];
    snprintf(p, sizeof path[0], "%s/%s", dir ? dir : "tests/fixtures", name);
    return p;
}

static char *read_fixture(const char *name, size_t *len)
{
    return file_fixture_read(fixture_path(name), len);
}

/* A gzipped fixture's bytes. */
static void *read_gzipped(const char *name, size_t *len)
{
    gzFile f = gzopen(fixture_path(name), "rb");
    if (!f)
        fail_msg("cannot open %s", fixture_path(name));
    size_t cap = 1u << 22, n = 0;
    char *data = malloc(cap);
    assert_non_null(data);
    for (;;) {
        if (n == cap) {
            cap *= 2;
            data = realloc(data, cap);
            assert_non_null(data);
        }
        int got = gzread(f, data + n, (unsigned)(cap - n));
        assert_true(got >= 0);
        if (got == 0)
            break;
        n += (size_t)got;
    }
    gzclose(f);
    *len = n;
    return data;
}

typedef struct loaded_vocab {
    void *bytes;
    gguf_file *file;
    corral_vocab *vocab;
} loaded_vocab;

static loaded_vocab load_vocab(const char *name)
{
    loaded_vocab v;
    size_t len;
    corral_error err;
    v.bytes = read_gzipped(name, &len);
    v.file = gguf_open_memory(v.bytes, len, name, &err);
    if (!v.file)
        fail_msg("%s: %s", name, err.message);
    v.vocab = vocab_load(v.file, &err);
    if (!v.vocab)
        fail_msg("%s: %s", name, err.message);
    return v;
}

static void free_vocab(loaded_vocab *v)
{
    corral_vocab_free(v->vocab);
    gguf_close(v->file);
    free(v->bytes);
}

/* The cases of the inputs file: texts separated by "\n__ggml_vocab_test__\n". */
static size_t split_cases(char *text, size_t len, const char **cases, size_t *lens)
{
    static const char sep[] = "\n__ggml_vocab_test__\n";
    size_t n = 0, pos = 0, sep_len = sizeof sep - 1;
    while (pos < len) {
        char *next = strstr(text + pos, sep);
        assert_true(n < MAX_CASES);
        cases[n] = text + pos;
        lens[n++] = next ? (size_t)(next - (text + pos)) : len - pos;
        if (!next)
            break;
        pos = (size_t)(next - text) + sep_len;
    }
    return n;
}

static void check_cases(const char *vocab_name, const char *out_name)
{
    size_t inp_len, out_len;
    char *inp = read_fixture("tokenizer-cases.deepseek.inp", &inp_len);
    char *out = read_fixture(out_name, &out_len);
    const char *cases[MAX_CASES];
    size_t lens[MAX_CASES];
    size_t n_cases = split_cases(inp, inp_len, cases, lens);
    assert_true(n_cases > 40);
    loaded_vocab v = load_vocab(vocab_name);
    char *line = out;
    static corral_token want[MAX_IDS], got[MAX_IDS];
    size_t failed = 0;
    for (size_t i = 0; i < n_cases; i++) {
        char *end = strchr(line, '\n');
        assert_non_null(end);
        *end = '\0';
        size_t n_want = 0;
        for (char *p = line, *next;; p = next) {
            long id = strtol(p, &next, 10);
            if (next == p)
                break;
            assert_true(n_want < MAX_IDS);
            want[n_want++] = (corral_token)id;
        }
        line = end + 1;
        corral_error err;
        size_t n_got;
        assert_true(corral_tokenize(v.vocab, cases[i], lens[i], false, false, got, MAX_IDS,
                                    &n_got, &err));
        bool same = n_got == n_want && memcmp(got, want, n_got * sizeof *got) == 0;
        if (!same) {
            failed++;
            fprintf(stderr, "%s case %zu: want", out_name, i + 1);
            for (size_t k = 0; k < n_want; k++)
                fprintf(stderr, " %d", want[k]);
            fprintf(stderr, "\n  got");
            for (size_t k = 0; k < n_got; k++)
                fprintf(stderr, " %d", got[k]);
            fprintf(stderr, "\n");
        }
    }
    assert_int_equal(failed, 0);
    free_vocab(&v);
    free(inp);
    free(out);
}

static void test_deepseek_llm_cases_match_llama_cpp(void **state)
{
    (void)state;
    check_cases("vocab-deepseek-llm.gguf.gz", "tokenizer-cases.deepseek-llm.out");
}

static void test_deepseek_coder_cases_match_llama_cpp(void **state)
{
    (void)state;
    check_cases("vocab-deepseek-coder.gguf.gz", "tokenizer-cases.deepseek-coder.out");
}

/* text split by pre-tokenizer `name` gives the words of want, NULL-terminated. */
static void check_split(const char *name, const char *text, const char *const *want)
{
    corral_error err;
    bool unknown;
    pretokenizer *pre = pretokenizer_create(name, strlen(name), &unknown, &err);
    assert_non_null(pre);
    assert_false(unknown);
    assert_string_equal(pretokenizer_name(pre), name);
    pretok_scratch scratch = {0};
    const pretok_word *words;
    size_t n;
    assert_true(pretokenizer_split(pre, text, strlen(text), &scratch, &words, &n, &err));
    size_t n_want = 0;
    while (want[n_want])
        n_want++;
    for (size_t i = 0; i < n || i < n_want; i++) {
        if (i >= n || i >= n_want || strlen(want[i]) != words[i].size ||
            memcmp(want[i], text + words[i].start, words[i].size) != 0)
            fail_msg("'%s' word %zu: want '%s', got '%.*s'", text, i, i < n_want ? want[i] : "",
                     i < n ? (int)words[i].size : 0, i < n ? text + words[i].start : "");
    }
    pretok_scratch_free(&scratch);
    pretokenizer_free(pre);
}

/*
 * deepseek-v3 by its definition: digits in threes before anything else; Han and kana runs
 * apart from what surrounds them; an ASCII punctuation mark or symbol leading ASCII letters
 * ("'re", ".com"); a word of letters and marks with one leading character that is no letter,
 * punctuation or symbol (a space, a digit left over, a non-ASCII space); punctuation runs
 * taking an optional space before and the newlines after; white space before a word left to
 * the word.
 */
static void test_deepseek_v3_splits_by_its_definition(void **state)
{
    (void)state;
    check_split("deepseek-v3", "1234567 apples",
                (const char *const[]){"123", "456", "7", " apples", NULL});
    check_split("deepseek-v3", "we're at example.com!\n\nok",
                (const char *const[]){"we", "'re", " at", " example", ".com", "!\n\n", "ok",
                                      NULL});
    check_split("deepseek-v3", "東京タワーへ行く",
                (const char *const[]){"東京タワーへ行く", NULL});
    check_split("deepseek-v3", "Hi東京x",
                (const char *const[]){"Hi", "東京", "x", NULL});
    check_split("deepseek-v3", "caf\xc3\xa9\xcc\x81 \xe2\x80\x83word",
                (const char *const[]){"caf\xc3\xa9\xcc\x81", " ", "\xe2\x80\x83word", NULL});
    check_split("deepseek-v3", "a  ,  b\t\n",
                (const char *const[]){"a", " ", " ,", " ", " b", "\t\n", NULL});
    check_split("deepseek-v3", "x=>y ++",
                (const char *const[]){"x", "=>", "y", " ++", NULL});
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_deepseek_llm_cases_match_llama_cpp),
        cmocka_unit_test(test_deepseek_coder_cases_match_llama_cpp),
        cmocka_unit_test(test_deepseek_v3_splits_by_its_definition),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

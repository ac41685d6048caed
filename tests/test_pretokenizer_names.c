/*
 * The pre-tokenizer names beyond llama3/qwen2/gpt-2/deepseek, against llama.cpp's ids: the
 * Llama 3 vocabulary (vocab-llama3-bpe.gguf) with tokenizer.ggml.pre set to each name
 * tokenizes every text of tokenizer-cases.pretok.txt as llama.cpp tokenized it
 * (tokenizer-cases.pretok.ids.txt, made as tests/fixtures/PROVENANCE.md says). BPE never
 * merges across a pre-token boundary and this vocabulary merges nearly everything, so a
 * different split shows in the ids. The flags each name sets (BOS, whole-word tokens, clean
 * spaces) are checked against llama.cpp's table too, and so is the name ollama's mistral3 files
 * stand for.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "corral/engine.h"
#include "file_fixture.h"
#include "gguf.h"
#include "pretokenizer.h"

enum { N_CASES = 12, MAX_IDS = 1024, MAX_LINES = 512 };

static const char *fixture_path(const char *name)
{
    static char path[2][2048];
    static int next;
    const char *dir = getenv("CORRAL_FIXTURES");
    char *p = path[next++ % 2];
    snprintf(p, sizeof path[0], "%s/%s", dir ? dir : "tests/fixtures", name);
    return p;
}

/* The texts: separated by "\n__ggml_vocab_test__\n", as in llama.cpp's tokenizer tests. */
static size_t split_cases(char *text, size_t len, const char **cases, size_t *lens)
{
    static const char sep[] = "\n__ggml_vocab_test__\n";
    size_t n = 0, pos = 0, sep_len = sizeof sep - 1;
    while (pos < len) {
        char *next = strstr(text + pos, sep);
        assert_true(n < N_CASES);
        cases[n] = text + pos;
        lens[n++] = next ? (size_t)(next - (text + pos)) : len - pos;
        if (!next)
            break;
        pos = (size_t)(next - text) + sep_len;
    }
    return n;
}

/*
 * vocab-llama3-bpe.gguf with general.architecture set to arch and tokenizer.ggml.pre to pre
 * (NULL: left out), written to dst and opened.
 */
static corral_vocab *open_vocab_as(const char *arch, const char *pre, const char *dst)
{
    corral_error err;
    gguf_file *in = gguf_open(fixture_path("vocab-llama3-bpe.gguf"), &err);
    gguf_writer *w = gguf_writer_create();
    assert_true(in && w);
    bool ok = gguf_writer_add_str(w, "general.architecture", arch, strlen(arch), &err);
    if (ok && pre)
        ok = gguf_writer_add_str(w, "tokenizer.ggml.pre", pre, strlen(pre), &err);
    for (size_t i = 0; ok && i < gguf_n_kv(in); i++) {
        const gguf_kv *kv = gguf_kv_at(in, i);
        if (strcmp(kv->key, "tokenizer.ggml.pre") != 0 &&
            strcmp(kv->key, "general.architecture") != 0)
            ok = gguf_writer_copy_kv(w, kv, &err);
    }
    ok = ok && gguf_writer_begin(w, dst, &err) && gguf_writer_finish(w, &err);
    if (!ok)
        fail_msg("%s", err.message);
    gguf_writer_free(w);
    gguf_close(in);
    corral_vocab *v = corral_vocab_open(dst, &err);
    if (!v)
        fail_msg("%s, %s: %s", arch, pre ? pre : "no pre", err.message);
    return v;
}

static size_t parse_ids(const char *s, corral_token *ids)
{
    size_t n = 0;
    for (char *end;; s = end) {
        long id = strtol(s, &end, 10);
        if (end == s)
            return n;
        assert_true(n < MAX_IDS);
        ids[n++] = (corral_token)id;
    }
}

/* Every name the ids file holds; each has all the cases, and is a name Corral knows. */
static void test_names_tokenize_as_llama_cpp(void **state)
{
    (void)state;
    size_t text_len, ids_len;
    char *text = file_fixture_read(fixture_path("tokenizer-cases.pretok.txt"), &text_len);
    char *ids = file_fixture_read(fixture_path("tokenizer-cases.pretok.ids.txt"), &ids_len);
    const char *cases[N_CASES];
    size_t lens[N_CASES];
    assert_int_equal(split_cases(text, text_len, cases, lens), N_CASES);

    char dst[] = "/tmp/corral-test-pretok-vocab-XXXXXX";
    int fd = mkstemp(dst);
    assert_true(fd >= 0);
    close(fd);

    static corral_token want[MAX_IDS], got[MAX_IDS];
    char name[64] = "";
    corral_vocab *v = NULL;
    size_t n_names = 0, n_checked = 0, failed = 0, next_case = 0;
    for (char *line = ids, *end; *line; line = end + 1) {
        end = strchr(line, '\n');
        assert_non_null(end);
        *end = '\0';
        /* "NAME CASE: id id ..." */
        char this_name[64];
        unsigned case_no;
        int used;
        assert_int_equal(sscanf(line, "%63s %u:%n", this_name, &case_no, &used), 2);
        if (strcmp(this_name, name) != 0) {
            assert_true(next_case == 0 || next_case == N_CASES);
            corral_vocab_free(v);
            snprintf(name, sizeof name, "%s", this_name);
            corral_error err;
            bool unknown = true;
            pretokenizer *pre = pretokenizer_create(name, strlen(name), &unknown, &err);
            assert_non_null(pre);
            if (unknown)
                fail_msg("pre-tokenizer '%s' is unknown", name);
            pretokenizer_free(pre);
            v = open_vocab_as("llama", name, dst);
            n_names++;
            next_case = 0;
        }
        assert_int_equal(case_no, ++next_case);
        size_t n_want = parse_ids(line + used, want), n_got;
        corral_error err;
        assert_true(corral_tokenize(v, cases[case_no - 1], lens[case_no - 1], true, true, got,
                                    MAX_IDS, &n_got, &err));
        n_checked++;
        if (n_got != n_want || memcmp(got, want, n_got * sizeof *got) != 0) {
            failed++;
            fprintf(stderr, "%s case %u: want", name, case_no);
            for (size_t k = 0; k < n_want; k++)
                fprintf(stderr, " %d", want[k]);
            fprintf(stderr, "\n  got");
            for (size_t k = 0; k < n_got; k++)
                fprintf(stderr, " %d", got[k]);
            fprintf(stderr, "\n");
        }
    }
    assert_int_equal(next_case, N_CASES);
    corral_vocab_free(v);
    unlink(dst);
    assert_true(n_names >= 14);
    assert_int_equal(n_checked, n_names * N_CASES);
    assert_int_equal(failed, 0);
    free(text);
    free(ids);
}

/* What llama.cpp's vocabulary loader sets for each of these names. */
static void test_flags_follow_llama_cpp(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        pretok_flags flags; /* add_bos, ignore_merges, clean_spaces */
    } want[] = {
        {"tekken", {true, true, false}},      {"qwen35", {false, false, false}},
        {"youtu", {false, true, false}},      {"tiny_aya", {false, false, false}},
        {"superbpe", {false, false, false}},  {"seed-coder", {false, false, false}},
        {"viking", {false, false, false}},    {"kimi-k2", {false, false, false}},
        {"f2llmv2", {false, false, false}},   {"joyai-llm", {false, false, false}},
        {"hunyuan", {false, false, false}},   {"smollm", {false, false, false}},
        {"trillion", {false, false, false}},  {"granite-docling", {false, false, false}},
        {"megrez", {false, false, true}},     {"stablelm2", {false, false, true}},
        {"starcoder", {false, false, true}},  {"gpt-2", {false, false, true}},
        {"falcon", {false, false, true}},     {"laguna", {false, false, false}},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        corral_error err;
        bool unknown = true;
        pretokenizer *pre = pretokenizer_create(want[i].name, strlen(want[i].name), &unknown,
                                                &err);
        assert_non_null(pre);
        pretok_flags got = pretokenizer_flags(pre);
        if (unknown || got.add_bos != want[i].flags.add_bos ||
            got.ignore_merges != want[i].flags.ignore_merges ||
            got.clean_spaces != want[i].flags.clean_spaces)
            fail_msg("%s: unknown %d, add_bos %d ignore_merges %d clean_spaces %d", want[i].name,
                     unknown, got.add_bos, got.ignore_merges, got.clean_spaces);
        pretokenizer_free(pre);
    }
}

/* Every case's ids with the vocabulary made as open_vocab_as says; returns the total count. */
static size_t tokenize_cases(const char *arch, const char *pre, corral_token *ids, size_t cap)
{
    size_t text_len;
    char *text = file_fixture_read(fixture_path("tokenizer-cases.pretok.txt"), &text_len);
    const char *cases[N_CASES];
    size_t lens[N_CASES];
    assert_int_equal(split_cases(text, text_len, cases, lens), N_CASES);
    char dst[] = "/tmp/corral-test-pretok-vocab-XXXXXX";
    int fd = mkstemp(dst);
    assert_true(fd >= 0);
    close(fd);
    corral_vocab *v = open_vocab_as(arch, pre, dst);
    size_t total = 0;
    for (size_t i = 0; i < N_CASES; i++) {
        size_t n;
        corral_error err;
        assert_true(corral_tokenize(v, cases[i], lens[i], true, true, ids + total, cap - total,
                                    &n, &err));
        assert_true(n <= cap - total);
        total += n;
    }
    corral_vocab_free(v);
    unlink(dst);
    free(text);
    return total;
}

/* ollama's mistral3 files say pre "default" (or nothing) and its engine splits them with
 * tekken's pattern: Corral does too, where another architecture's "default" splits otherwise. */
static void test_ollama_mistral3_default_pre_is_tekken(void **state)
{
    (void)state;
    enum { CAP = N_CASES * 128 };
    static corral_token tekken[CAP], got[CAP];
    size_t n_tekken = tokenize_cases("llama", "tekken", tekken, CAP);
    const char *pres[] = {"default", NULL};
    for (size_t i = 0; i < 2; i++) {
        size_t n = tokenize_cases("mistral3", pres[i], got, CAP);
        assert_int_equal(n, n_tekken);
        assert_memory_equal(got, tekken, n * sizeof *got);
    }
    size_t n = tokenize_cases("llama", "default", got, CAP);
    assert_true(n != n_tekken || memcmp(got, tekken, n * sizeof *got) != 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names_tokenize_as_llama_cpp),
        cmocka_unit_test(test_flags_follow_llama_cpp),
        cmocka_unit_test(test_ollama_mistral3_default_pre_is_tekken),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * Tokenizers against llama.cpp's own ids: every tokenizer case with the three reference
 * vocabularies (plain and parse-special), the input_ids of the arch models, the prompt ids
 * of the two model references, WordPiece's verified cases; round trips through the
 * detokenizer and the streaming decoder; special-token rules on small hand-built vocabularies.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "corral/engine.h"
#include "file_fixture.h"
#include "gguf.h"
#include "pretokenizer.h"
#include "util/base64.h"
#include "utf8.h"
#include "vocab.h"

#define N_CASES 68
#define MAX_IDS 4096

/* ---- fixtures ---- */

static char *fixture_path(const char *name)
{
    const char *dir = getenv("CORRAL_FIXTURES");
    assert_non_null(dir);
    static char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return path;
}

static char *read_fixture(const char *name, size_t *len)
{
    return file_fixture_read(fixture_path(name), len);
}

/* Split at '\n' into at most max lines (pointers into text, NUL-terminated in place). */
static size_t split_lines(char *text, size_t len, char **lines, size_t max)
{
    size_t n = 0;
    char *start = text;
    for (size_t i = 0; i < len && n < max; i++) {
        if (text[i] == '\n') {
            text[i] = '\0';
            lines[n++] = start;
            start = text + i + 1;
        }
    }
    return n;
}

/* tokenizer-cases.txt escapes: \n \t \r \\ (README). Decodes in place. */
static size_t unescape_case(char *s)
{
    size_t out = 0, len = strlen(s);
    for (size_t i = 0; i < len; i++) {
        if (s[i] == '\\' && i + 1 < len) {
            char c = s[++i];
            s[out++] = c == 'n' ? '\n' : c == 't' ? '\t' : c == 'r' ? '\r' : c;
        } else {
            s[out++] = s[i];
        }
    }
    return out;
}

typedef struct cases {
    char *data;
    char *text[N_CASES];
    size_t len[N_CASES];
} cases;

static void load_cases(cases *c)
{
    size_t len;
    c->data = read_fixture("tokenizer-cases.txt", &len);
    assert_int_equal(split_lines(c->data, len, c->text, N_CASES), N_CASES);
    for (int i = 0; i < N_CASES; i++)
        c->len[i] = unescape_case(c->text[i]);
}

static size_t parse_ids(const char *s, corral_token *ids, size_t max)
{
    size_t n = 0;
    char *end;
    for (;;) {
        long v = strtol(s, &end, 10);
        if (end == s)
            return n;
        assert_true(n < max);
        ids[n++] = (corral_token)v;
        s = end;
    }
}

static corral_vocab *open_vocab(const char *name)
{
    corral_error err = {{0}};
    corral_vocab *v = corral_vocab_open(fixture_path(name), &err);
    if (!v)
        fail_msg("%s: %s", name, err.message);
    return v;
}

static size_t tokenize(const corral_vocab *v, const char *text, size_t len, bool add_special,
                       bool parse_special, corral_token *ids)
{
    corral_error err;
    size_t n;
    assert_true(corral_tokenize(v, text, len, add_special, parse_special, ids, MAX_IDS, &n, &err));
    assert_true(n <= MAX_IDS);
    return n;
}

static void assert_ids_equal(const corral_token *want, size_t n_want, const corral_token *got,
                             size_t n_got, const char *what, int line)
{
    bool same = n_want == n_got;
    for (size_t i = 0; same && i < n_want; i++)
        same = want[i] == got[i];
    if (!same) {
        fprintf(stderr, "%s line %d: want", what, line);
        for (size_t i = 0; i < n_want; i++)
            fprintf(stderr, " %d", want[i]);
        fprintf(stderr, "\n  got");
        for (size_t i = 0; i < n_got; i++)
            fprintf(stderr, " %d", got[i]);
        fprintf(stderr, "\n");
        fail();
    }
}

/* Every case tokenized by v with add_special gives line N of the expected file. */
static void check_vocab_cases(const corral_vocab *v, const char *ids_name, bool parse_special)
{
    cases c;
    load_cases(&c);
    size_t len;
    char *expected = read_fixture(ids_name, &len);
    char *lines[N_CASES];
    assert_int_equal(split_lines(expected, len, lines, N_CASES), N_CASES);
    static corral_token want[MAX_IDS], got[MAX_IDS];
    for (int i = 0; i < N_CASES; i++) {
        size_t n_want = parse_ids(lines[i], want, MAX_IDS);
        size_t n_got = tokenize(v, c.text[i], c.len[i], true, parse_special, got);
        assert_ids_equal(want, n_want, got, n_got, ids_name, i + 1);
    }
    free(expected);
    free(c.data);
}

static void check_cases(const char *vocab_name, const char *ids_name, bool parse_special)
{
    corral_vocab *v = open_vocab(vocab_name);
    check_vocab_cases(v, ids_name, parse_special);
    corral_vocab_free(v);
}

static void test_spm_stories260K_cases_match_llama_cpp(void **state)
{
    (void)state;
    check_cases("stories260K.gguf", "tokenizer-cases.stories260K.ids.txt", false);
}

static void test_spm_llama2_cases_match_llama_cpp(void **state)
{
    (void)state;
    check_cases("vocab-llama-spm.gguf", "tokenizer-cases.llama-spm.ids.txt", false);
}

static void test_spm_llama2_parse_special_cases_match_llama_cpp(void **state)
{
    (void)state;
    check_cases("vocab-llama-spm.gguf", "tokenizer-cases.llama-spm.special-ids.txt", true);
}

static void test_bpe_llama3_cases_match_llama_cpp(void **state)
{
    (void)state;
    check_cases("vocab-llama3-bpe.gguf", "tokenizer-cases.llama3-bpe.ids.txt", false);
}

static void test_bpe_llama3_parse_special_cases_match_llama_cpp(void **state)
{
    (void)state;
    check_cases("vocab-llama3-bpe.gguf", "tokenizer-cases.llama3-bpe.special-ids.txt", true);
}

/* ---- arch models and model references ---- */

static void test_arch_models_input_ids_match_llama_cpp(void **state)
{
    (void)state;
    /* bert and nomic-bert have WordPiece vocabularies */
    const char *models[] = {"bert",       "gemma2", "gemma3", "llama-gqa", "llama-tied",
                            "nomic-bert", "phi3",   "qwen2",  "qwen3",
                            "starcoder2", "cohere2", "exaone4", "glm4"};
    for (size_t m = 0; m < sizeof models / sizeof models[0]; m++) {
        char name[64];
        snprintf(name, sizeof name, "arch/%s.json", models[m]);
        json_error_t jerr;
        json_t *root = json_load_file(fixture_path(name), 0, &jerr);
        assert_non_null(root);
        const char *text = json_string_value(json_object_get(root, "input_text"));
        json_t *ids = json_object_get(root, "input_ids");
        assert_non_null(text);
        assert_true(json_is_array(ids));
        corral_token want[256], got[MAX_IDS];
        size_t n_want = json_array_size(ids);
        assert_true(n_want <= 256);
        for (size_t i = 0; i < n_want; i++)
            want[i] = (corral_token)json_integer_value(json_array_get(ids, i));
        snprintf(name, sizeof name, "arch/%s.gguf", models[m]);
        corral_vocab *v = open_vocab(name);
        size_t n_got = tokenize(v, text, strlen(text), true, false, got);
        assert_ids_equal(want, n_want, got, n_got, models[m], 0);
        corral_vocab_free(v);
        json_decref(root);
    }
}

/* Each `prompt: "<json string>"` is followed by `prompt_ids: ...`. */
static void check_reference_prompts(const char *model, const char *reference, int n_expected)
{
    size_t len;
    char *data = read_fixture(reference, &len);
    char *lines[512];
    size_t n_lines = split_lines(data, len, lines, 512);
    corral_vocab *v = open_vocab(model);
    int checked = 0;
    for (size_t i = 0; i + 1 < n_lines; i++) {
        if (strncmp(lines[i], "prompt: ", 8) != 0)
            continue;
        json_error_t jerr;
        json_t *prompt = json_loads(lines[i] + 8, JSON_DECODE_ANY, &jerr);
        assert_true(json_is_string(prompt));
        size_t j = i + 1;
        while (j < n_lines && strncmp(lines[j], "prompt_ids: ", 12) != 0)
            j++;
        assert_true(j < n_lines);
        corral_token want[MAX_IDS], got[MAX_IDS];
        size_t n_want = parse_ids(lines[j] + 12, want, MAX_IDS);
        size_t n_got = tokenize(v, json_string_value(prompt), json_string_length(prompt), true,
                                false, got);
        assert_ids_equal(want, n_want, got, n_got, reference, (int)i + 1);
        json_decref(prompt);
        checked++;
    }
    assert_int_equal(checked, n_expected);
    corral_vocab_free(v);
    free(data);
}

static void test_tiny_tolstoy_reference_prompt_ids(void **state)
{
    (void)state;
    check_reference_prompts("tiny-tolstoy-f32.gguf", "tiny-tolstoy-reference.txt", 4);
}

static void test_stories260K_reference_prompt_ids(void **state)
{
    (void)state;
    check_reference_prompts("stories260K.gguf", "stories260K-reference.txt", 4);
}

/* ---- special ids ---- */

static void test_special_ids_and_end_of_generation_set(void **state)
{
    (void)state;
    corral_vocab *llama3 = open_vocab("vocab-llama3-bpe.gguf");
    assert_int_equal(corral_vocab_bos(llama3), 128000);
    assert_int_equal(corral_vocab_eos(llama3), 128009);
    for (corral_token id = 127990; id < 128256; id++) /* llama.cpp: {128001, 128008, 128009} */
        assert_int_equal(corral_vocab_is_eog(llama3, id),
                         id == 128001 || id == 128008 || id == 128009);
    assert_false(corral_vocab_is_eog(llama3, -1));
    assert_false(corral_vocab_is_eog(llama3, 128256));
    corral_vocab_free(llama3);

    corral_vocab *llama2 = open_vocab("vocab-llama-spm.gguf");
    assert_int_equal(corral_vocab_n_tokens(llama2), 32000);
    assert_int_equal(corral_vocab_bos(llama2), 1);
    assert_int_equal(corral_vocab_eos(llama2), 2);
    for (corral_token id = 0; id < 32000; id++)
        assert_int_equal(corral_vocab_is_eog(llama2, id), id == 2);
    corral_vocab_free(llama2);

    corral_vocab *qwen2 = open_vocab("arch/qwen2.gguf");
    assert_int_equal(corral_vocab_bos(qwen2), 301);
    assert_true(corral_vocab_is_eog(qwen2, 301));
    assert_true(corral_vocab_is_eog(qwen2, 303)); /* <|im_end|> by name */
    corral_vocab_free(qwen2);
}


/* ---- detokenizing ---- */

static size_t detokenize(const corral_vocab *v, const corral_token *ids, size_t n,
                         bool remove_special, bool unparse, char *text, size_t max)
{
    corral_error err;
    size_t n_bytes;
    assert_true(corral_detokenize(v, ids, n, remove_special, unparse, text, max, &n_bytes, &err));
    assert_true(n_bytes <= max);
    return n_bytes;
}

/*
 * detokenize(tokenize(x)) == x for every case a vocabulary can represent. The exceptions,
 * checked to really differ so the list stays honest:
 *  - SPM (both): line 59 holds a literal U+2581, which SPM reads as a space and prints as one.
 *  - llama3 BPE: clean_spaces rewrites " ," " ." " !" " ?" and " 's"-style contractions;
 *    only line 57 ("Hello!! ...world") has one (" .").
 */
static void check_round_trip(const char *vocab_name, const int *exceptions, size_t n_exceptions)
{
    cases c;
    load_cases(&c);
    corral_vocab *v = open_vocab(vocab_name);
    static corral_token ids[MAX_IDS];
    static char text[1 << 16];
    for (int i = 0; i < N_CASES; i++) {
        size_t n = tokenize(v, c.text[i], c.len[i], false, false, ids);
        size_t n_text = detokenize(v, ids, n, true, false, text, sizeof text);
        bool same = n_text == c.len[i] && memcmp(text, c.text[i], n_text) == 0;
        bool exempt = false;
        for (size_t e = 0; e < n_exceptions; e++)
            exempt |= exceptions[e] == i + 1;
        if (same == exempt)
            fail_msg("%s line %d: round trip %s: '%.*s'", vocab_name, i + 1,
                     exempt ? "unexpectedly exact" : "differs", (int)n_text, text);
    }
    corral_vocab_free(v);
    free(c.data);
}

static void test_round_trip_restores_every_representable_case(void **state)
{
    (void)state;
    static const int spm[] = {59};
    check_round_trip("stories260K.gguf", spm, 1);
    check_round_trip("vocab-llama-spm.gguf", spm, 1);
    check_round_trip("tiny-tolstoy-f32.gguf", spm, 1);
    static const int bpe[] = {57};
    check_round_trip("vocab-llama3-bpe.gguf", bpe, sizeof bpe / sizeof bpe[0]);
}

/* Results read from llama.cpp's C API on the same vocabularies. */
static void test_detokenize_follows_llama_cpp_space_rules(void **state)
{
    (void)state;
    corral_vocab *llama2 = open_vocab("vocab-llama-spm.gguf");
    char text[256];
    corral_token hello[] = {15043}, bos_hello[] = {1, 15043};
    size_t n = detokenize(llama2, hello, 1, true, false, text, sizeof text);
    assert_int_equal(n, 5);
    assert_memory_equal(text, "Hello", 5);
    n = detokenize(llama2, bos_hello, 2, true, false, text, sizeof text);
    assert_int_equal(n, 6);
    assert_memory_equal(text, " Hello", 6);
    n = detokenize(llama2, bos_hello, 2, false, true, text, sizeof text);
    assert_int_equal(n, 9);
    assert_memory_equal(text, "<s> Hello", 9);
    corral_vocab_free(llama2);

    corral_vocab *llama3 = open_vocab("vocab-llama3-bpe.gguf");
    const char *in = "Hello , world . It 's me ' x ' don 't";
    const char *want = "Hello, world. It's me'x'don 't";
    corral_token ids[64];
    size_t n_ids = tokenize(llama3, in, strlen(in), false, false, ids);
    n = detokenize(llama3, ids, n_ids, true, false, text, sizeof text);
    assert_int_equal(n, strlen(want));
    assert_memory_equal(text, want, n);
    corral_vocab_free(llama3);
}

static void test_detokenize_reports_full_length_when_buffer_is_short(void **state)
{
    (void)state;
    corral_vocab *v = open_vocab("vocab-llama3-bpe.gguf");
    corral_token ids[64];
    const char *in = "hello world";
    size_t n_ids = tokenize(v, in, strlen(in), false, false, ids);
    char text[4];
    corral_error err;
    size_t n;
    assert_true(corral_detokenize(v, ids, n_ids, true, false, text, sizeof text, &n, &err));
    assert_int_equal(n, strlen(in));
    assert_memory_equal(text, "hell", 4);
    corral_token bad = 128256;
    assert_false(corral_detokenize(v, &bad, 1, true, false, text, sizeof text, &n, &err));
    assert_non_null(strstr(err.message, "not in the vocabulary"));
    corral_vocab_free(v);
}

/* ---- streaming ---- */

static void assert_valid_utf8(const char *s, size_t len)
{
    int incomplete;
    assert_int_equal(utf8_valid_prefix((const unsigned char *)s, len, &incomplete), len);
}

/* Stream every case one token at a time: chunks are valid UTF-8 and add up to the text. */
static void check_stream(const char *vocab_name, bool spm_prefix)
{
    cases c;
    load_cases(&c);
    corral_vocab *v = open_vocab(vocab_name);
    corral_error err;
    corral_detok_stream *s = corral_detok_stream_create(v, &err);
    assert_non_null(s);
    static corral_token ids[MAX_IDS];
    static char text[1 << 16];
    for (int i = 0; i < N_CASES; i++) {
        if (spm_prefix && i + 1 == 59)
            continue; /* literal U+2581 comes back as a space (see check_round_trip) */
        size_t n = tokenize(v, c.text[i], c.len[i], true, false, ids), n_text = 0, len;
        for (size_t t = 0; t < n; t++) {
            const char *chunk = corral_detok_stream_push(s, ids[t], &len);
            assert_valid_utf8(chunk, len);
            memcpy(text + n_text, chunk, len);
            n_text += len;
        }
        corral_detok_stream_finish(s, &len);
        assert_int_equal(len, 0);
        /* Generation keeps SPM's prefix space: " Hello", as llama.cpp does. */
        size_t prefix = spm_prefix && c.len[i] > 0;
        assert_int_equal(n_text, prefix + c.len[i]);
        if (prefix)
            assert_int_equal(text[0], ' ');
        assert_memory_equal(text + prefix, c.text[i], c.len[i]);
    }
    corral_detok_stream_free(s);
    corral_vocab_free(v);
    free(c.data);
}

static void test_stream_chunks_are_valid_utf8_and_rebuild_the_text(void **state)
{
    (void)state;
    check_stream("vocab-llama-spm.gguf", true);
    check_stream("stories260K.gguf", true);
    check_stream("vocab-llama3-bpe.gguf", false);
}

static void test_stream_holds_a_split_character_until_complete(void **state)
{
    (void)state;
    corral_vocab *v = open_vocab("vocab-llama-spm.gguf");
    /* The llama is byte fallback in Llama 2: <0xF0> <0x9F> <0xA6> <0x99>. */
    corral_token llama[] = {3 + 0xF0, 3 + 0x9F, 3 + 0xA6, 3 + 0x99};
    corral_error err;
    corral_detok_stream *s = corral_detok_stream_create(v, &err);
    size_t len;
    for (int i = 0; i < 3; i++) {
        corral_detok_stream_push(s, llama[i], &len);
        assert_int_equal(len, 0);
    }
    const char *out = corral_detok_stream_push(s, llama[3], &len);
    assert_int_equal(len, 4);
    assert_memory_equal(out, "\xF0\x9F\xA6\x99", 4);
    /* A character cut off at the end comes out as U+FFFD, and a stray byte too. */
    corral_detok_stream_push(s, llama[0], &len);
    assert_int_equal(len, 0);
    out = corral_detok_stream_finish(s, &len);
    assert_int_equal(len, 3);
    assert_memory_equal(out, "\xEF\xBF\xBD", 3);
    out = corral_detok_stream_push(s, 3 + 0x80, &len);
    assert_int_equal(len, 3);
    assert_memory_equal(out, "\xEF\xBF\xBD", 3);
    corral_detok_stream_free(s);
    corral_vocab_free(v);
}

/* ---- invalid UTF-8 and hand-built vocabularies ---- */

static corral_token text_id(const corral_vocab *v, const char *text)
{
    corral_token id = token_map_find(&v->token_ids, text, strlen(text));
    assert_true(id >= 0);
    return id;
}

/* Invalid UTF-8 as llama.cpp handles it (SPM cuts characters by lead byte alone,
 * BPE decodes leniently), checked against llama.cpp. */
static void test_invalid_utf8_is_tokenized_as_llama_cpp_does(void **state)
{
    (void)state;
    corral_vocab *spm = open_vocab("vocab-llama-spm.gguf");
    corral_token ids[16];
    size_t n = tokenize(spm, "\xFF" "abc", 4, false, false, ids);
    corral_token want_ff[] = {29871, 3 + 0xFF, 3 + 'a', 3 + 'b', 3 + 'c'};
    assert_ids_equal(want_ff, 5, ids, n, "SPM \\xFFabc", 0);
    n = tokenize(spm, "\x80" "abc", 4, false, false, ids);
    corral_token want_80[] = {29871, 3 + 0x80, text_id(spm, "abc")};
    assert_ids_equal(want_80, 3, ids, n, "SPM \\x80abc", 0);
    corral_vocab_free(spm);

    corral_vocab *bpe = open_vocab("vocab-llama3-bpe.gguf");
    n = tokenize(bpe, "\xFF" "abc", 4, false, false, ids);
    corral_token want_bpe[] = {text_id(bpe, "\xC3\xAF\xC2\xBF\xC2\xBD"), text_id(bpe, "abc")};
    assert_ids_equal(want_bpe, 2, ids, n, "BPE \\xFFabc", 0);
    /* An encoded surrogate passes through as its three bytes; above U+10FFFF is U+FFFD. */
    n = tokenize(bpe, "\xED\xA0\x80x \xF5\x80\x80\x80", 9, false, false, ids);
    assert_true(n > 0);
    corral_vocab_free(bpe);
}

typedef struct spec_token {
    const char *text;
    int32_t type;
} spec_token;

/* Write a small vocabulary GGUF of a tokenizer model to a temp file. */
static void write_vocab(const spec_token *tokens, size_t n, const char *model,
                        const char *general_name, char *path)
{
    gguf_writer *w = gguf_writer_create();
    corral_error err;
    gguf_str texts[64];
    int32_t types[64];
    float scores[64];
    assert_true(n <= 64);
    for (size_t i = 0; i < n; i++) {
        texts[i] = (gguf_str){tokens[i].text, strlen(tokens[i].text)};
        types[i] = tokens[i].type;
        scores[i] = -(float)i;
    }
    assert_true(gguf_writer_add_str(w, "tokenizer.ggml.model", model, strlen(model), &err));
    assert_true(gguf_writer_add_str(w, "general.name", general_name, strlen(general_name), &err));
    assert_true(gguf_writer_add_str_array(w, "tokenizer.ggml.tokens", texts, n, &err));
    assert_true(gguf_writer_add_array(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, types, n,
                                      &err));
    assert_true(gguf_writer_add_array(w, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, scores, n,
                                      &err));
    strcpy(path, "/tmp/corral-test-vocab-XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    if (!gguf_writer_begin(w, path, &err) || !gguf_writer_finish(w, &err))
        fail_msg("%s", err.message);
    gguf_writer_free(w);
}

/* Write a small SPM vocabulary GGUF to a temp file and load it. */
static corral_vocab *build_vocab(const spec_token *tokens, size_t n, const char *general_name,
                                 char *path)
{
    write_vocab(tokens, n, "llama", general_name, path);
    corral_error err;
    corral_vocab *v = corral_vocab_open(path, &err);
    if (!v)
        fail_msg("%s", err.message);
    return v;
}

/* ---- WordPiece ---- */

/* Pieces named by their vocabulary text (NULL-terminated) as ids. */
static size_t texts_to_ids(const corral_vocab *v, const char *const *texts, corral_token *ids)
{
    size_t n = 0;
    for (; texts[n]; n++) {
        ids[n] = token_map_find(&v->token_ids, texts[n], strlen(texts[n]));
        if (ids[n] < 0)
            fail_msg("'%s' is not in the vocabulary", texts[n]);
    }
    return n;
}

static void check_wpm(const corral_vocab *v, const char *text, bool add_special,
                      bool parse_special, const char *const *want_texts)
{
    corral_token want[32], got[MAX_IDS];
    size_t n_want = texts_to_ids(v, want_texts, want);
    size_t n_got = tokenize(v, text, strlen(text), add_special, parse_special, got);
    assert_ids_equal(want, n_want, got, n_got, text, 0);
}

#define W "\xE2\x96\x81" /* U+2581, the word mark of WordPiece vocabularies in GGUF */

/* WordPiece cases checked against llama.cpp on the tiny bert vocabulary. */
static void test_wpm_cases_match_llama_cpp(void **state)
{
    (void)state;
    corral_vocab *v = open_vocab("arch/bert.gguf");
    /* [CLS] and [SEP] frame the text; punctuation is a word of its own */
    const char *const hello[] = {"[CLS]", W "he", "l", "l", "o", W ",", W "world", W "!",
                                 "[SEP]", NULL};
    check_wpm(v, "Hello, World!", true, false, hello);
    /* accents stripped, lower-cased */
    const char *const cafe[] = {W "c", "a", "f", "e", W "n", "a", "ive", NULL};
    check_wpm(v, "CAF\xC3\x89 na\xC3\xAFve", false, false, cafe);
    /* each CJK ideograph is a word, and one with no piece is [UNK] */
    const char *const cjk[] = {"[UNK]", "[UNK]", W "x", NULL};
    check_wpm(v, "\xE4\xBD\xA0\xE5\xA5\xBD x", false, false, cjk);
    /* [CLS] is text unless special tokens are parsed */
    const char *const cls_text[] = {W "[", W "c", "l", "s", W "]", W "well", NULL};
    check_wpm(v, "[CLS] well", false, false, cls_text);
    const char *const cls_token[] = {"[CLS]", W "well", NULL};
    check_wpm(v, "[CLS] well", false, true, cls_token);
    corral_vocab_free(v);
}

/* Control characters vanish without splitting a word; whitespace of any kind splits it. */
static void test_wpm_drops_controls_and_splits_at_unicode_whitespace(void **state)
{
    (void)state;
    corral_vocab *v = open_vocab("arch/bert.gguf");
    const char *const well[] = {W "well", NULL};
    check_wpm(v, "we\x01l\xC2\xADl", false, false, well); /* U+0001, soft hyphen (Cf) */
    const char *const two[] = {W "well", W "well", NULL};
    check_wpm(v, "well\xE3\x80\x80well", false, false, two); /* U+3000 */
    check_wpm(v, "well\xC2\x85well", false, false, two);     /* U+0085 */
    const char *const empty[] = {"[CLS]", "[SEP]", NULL};
    check_wpm(v, "", true, false, empty);
    check_wpm(v, " \t\x01 ", true, false, empty);
    corral_vocab_free(v);
}

static void test_wpm_detokenizes_like_spm_with_clean_spaces(void **state)
{
    (void)state;
    corral_vocab *v = open_vocab("arch/bert.gguf");
    corral_token ids[32];
    size_t n = tokenize(v, "Hello, World!", 13, true, false, ids);
    char text[64];
    size_t len = detokenize(v, ids, n, true, false, text, sizeof text);
    assert_int_equal(len, 14);
    assert_memory_equal(text, " hello, world!", 14);
    len = detokenize(v, ids, n, false, true, text, sizeof text);
    assert_int_equal(len, 24);
    assert_memory_equal(text, "[CLS] hello, world![SEP]", 24);
    corral_vocab_free(v);
}

static void test_unsupported_tokenizer_model_fails_with_message(void **state)
{
    (void)state;
    char path[64];
    const spec_token tokens[] = {{"<pad>", 3}, {"</s>", 3}, {"<unk>", 2}};
    write_vocab(tokens, 3, "rwkv", "test", path);
    corral_error err = {{0}};
    assert_null(corral_vocab_open(path, &err));
    assert_non_null(strstr(err.message, "'rwkv' is not supported"));
    unlink(path);
}

#define SPM_BASE                                                                              \
    {"<unk>", 2}, {"<s>", 3}, {"</s>", 3}, {"\xE2\x96\x81", 1}, {"a", 1}, {"b", 1}, {"c", 1},  \
        {"d", 1}, {"x", 1}, {"y", 1}, {"\n", 1}

static void test_special_tokens_longest_first_and_user_defined_always(void **state)
{
    (void)state;
    char path[64];
    /* ids 11.. : "bcd" and "ab" control, "INST" user-defined */
    const spec_token tokens[] = {SPM_BASE, {"bcd", 3}, {"ab", 3}, {"INST", 4}};
    corral_vocab *v = build_vocab(tokens, sizeof tokens / sizeof tokens[0], "test", path);
    corral_token ids[32];
    /* Longest special first: specials bcd and ab on "abcd" give a + bcd, not ab + cd. */
    size_t n = tokenize(v, "abcd", 4, false, true, ids);
    corral_token want_abcd[] = {3, 4, 11};
    assert_ids_equal(want_abcd, 3, ids, n, "abcd", 0);
    /* Without parse_special control text is plain text; user-defined matches anyway. */
    n = tokenize(v, "xINSTy", 6, false, false, ids);
    corral_token want_inst[] = {3, 8, 13, 3, 9};
    assert_ids_equal(want_inst, 5, ids, n, "xINSTy", 0);
    n = tokenize(v, "<s>", 3, false, false, ids);
    assert_true(n > 1);
    n = tokenize(v, "<s>", 3, false, true, ids);
    assert_int_equal(n, 1);
    assert_int_equal(ids[0], 1);
    corral_vocab_free(v);
    unlink(path);
}

static void test_phi3_special_tokens_eat_following_whitespace(void **state)
{
    (void)state;
    char path[64];
    const spec_token tokens[] = {SPM_BASE, {"<|endoftext|>", 3}, {"<|end|>", 3}};
    corral_vocab *v = build_vocab(tokens, sizeof tokens / sizeof tokens[0], "Phi-3 mini", path);
    corral_token ids[32];
    size_t n = tokenize(v, "<|end|>\na", 9, false, true, ids);
    corral_token want[] = {12, 3, 4}; /* <|end|> ▁ a: the "\n" is eaten */
    assert_ids_equal(want, 3, ids, n, "phi3 rstrip", 0);
    corral_vocab_free(v);
    unlink(path);
}

/* The words of text as pre-tokenizer `name` splits it, joined with '|'; *unknown as reported. */
static void split_words(const char *name, const char *text, char *out, size_t size, bool *unknown)
{
    corral_error err;
    pretokenizer *pre = pretokenizer_create(name, strlen(name), unknown, &err);
    assert_non_null(pre);
    pretok_scratch scratch = {0};
    const pretok_word *words;
    size_t n_words;
    assert_true(pretokenizer_split(pre, text, strlen(text), &scratch, &words, &n_words, &err));
    out[0] = '\0';
    for (size_t i = 0; i < n_words; i++)
        snprintf(out + strlen(out), size - strlen(out), "%s%.*s", i ? "|" : "", (int)words[i].size,
                 text + words[i].start);
    pretok_scratch_free(&scratch);
    pretokenizer_free(pre);
}

/* GLM-4's pre names are llama.cpp's CHATGLM4 type: the Llama 3 split, digits in threes
 * (qwen2's go one by one). */
static void test_glm4_pre_tokenizer_splits_like_llama3(void **state)
{
    (void)state;
    char words[256];
    const char *names[] = {"glm4", "chatglm-bpe"};
    for (size_t i = 0; i < 2; i++) {
        bool unknown = true;
        split_words(names[i], "GLM's 12345 steps", words, sizeof words, &unknown);
        assert_false(unknown);
        assert_string_equal(words, "GLM|'s| |123|45| steps");
    }
    bool unknown;
    split_words("qwen2", "GLM's 12345 steps", words, sizeof words, &unknown);
    assert_string_equal(words, "GLM|'s| |1|2|3|4|5| steps");
}

/* Qwen 3.5's pre-tokenizer ("qwen35") keeps a combining mark in the word of the letters
 * around it, where qwen2's splits the word there; digits still go one by one. */
static void test_qwen35_pre_tokenizer_keeps_marks_in_words(void **state)
{
    (void)state;
    char words[256];
    bool unknown = true;
    const char *text = "nai\xcc\x88ve caf\xc3\xa9s 2024";
    split_words("qwen35", text, words, sizeof words, &unknown);
    assert_false(unknown);
    assert_string_equal(words, "nai\xcc\x88ve| caf\xc3\xa9s| |2|0|2|4");
    split_words("qwen2", text, words, sizeof words, &unknown);
    assert_string_equal(words, "nai|\xcc\x88ve| caf\xc3\xa9s| |2|0|2|4");
}

/* gpt-oss's o200k pre-tokenizer (pre "gpt-4o"): case changes inside a word split it, a
 * contraction stays on its word, digits go in threes, a punctuation run takes the newline and
 * slash after it, and a letter outside a-z counts as an upper-case one (as llama.cpp's
 * regex has it). */
static void test_gpt4o_pre_tokenizer_splits_case_changes(void **state)
{
    (void)state;
    char words[256];
    const char *names[] = {"gpt-4o", "llama4"};
    for (size_t i = 0; i < 2; i++) {
        bool unknown = true;
        split_words(names[i], "HelloWorld's 12345 foo/\n/bar", words, sizeof words, &unknown);
        assert_false(unknown);
        assert_string_equal(words, "Hello|World's| |123|45| foo|/\n/|bar");
    }
    bool unknown;
    split_words("gpt-4o", "ÉtéOK  x\n\ny", words, sizeof words, &unknown);
    assert_string_equal(words, "Été|OK| | x|\n\n|y");
}

/* The vocabulary of fixture with the key/values w holds (w is taken) in place of the file's
 * of the same keys (NULL-terminated), written to dst and opened. */
static corral_vocab *open_vocab_replacing(const char *fixture, gguf_writer *w,
                                          const char *const *keys, const char *dst)
{
    corral_error err;
    gguf_file *in = gguf_open(fixture_path(fixture), &err);
    assert_true(in && w);
    bool ok = true;
    for (size_t i = 0; ok && i < gguf_n_kv(in); i++) {
        const gguf_kv *kv = gguf_kv_at(in, i);
        size_t k = 0;
        while (keys[k] && strcmp(kv->key, keys[k]) != 0)
            k++;
        if (!keys[k])
            ok = gguf_writer_copy_kv(w, kv, &err);
    }
    ok = ok && gguf_writer_begin(w, dst, &err) && gguf_writer_finish(w, &err);
    if (!ok)
        fail_msg("%s", err.message);
    gguf_writer_free(w);
    gguf_close(in);
    corral_vocab *v = corral_vocab_open(dst, &err);
    if (!v)
        fail_msg("%s", err.message);
    return v;
}

/* vocab-llama3-bpe.gguf with general.architecture and tokenizer.ggml.pre replaced. */
static corral_vocab *open_vocab_as(const char *arch, const char *pre, const char *dst)
{
    static const char *const keys[] = {"general.architecture", "tokenizer.ggml.pre", NULL};
    corral_error err;
    gguf_writer *w = gguf_writer_create();
    assert_non_null(w);
    assert_true(gguf_writer_add_str(w, keys[0], arch, strlen(arch), &err) &&
                gguf_writer_add_str(w, keys[1], pre, strlen(pre), &err));
    return open_vocab_replacing("vocab-llama3-bpe.gguf", w, keys, dst);
}

/* ollama's gptoss files say pre "default" but are o200k's: they tokenize as "gpt-4o" does,
 * where another architecture's "default" splits otherwise. */
static void test_ollama_gptoss_default_pre_is_gpt4o(void **state)
{
    (void)state;
    char dst[] = "/tmp/corral-test-gptoss-vocab-XXXXXX";
    int fd = mkstemp(dst);
    assert_true(fd >= 0);
    close(fd);
    const char *text = "HelloWorld's 12345 foo/\n/bar";
    static corral_token want[MAX_IDS], got[MAX_IDS], plain[MAX_IDS];
    corral_vocab *v = open_vocab_as("gpt-oss", "gpt-4o", dst);
    size_t n_want = tokenize(v, text, strlen(text), false, false, want);
    corral_vocab_free(v);
    v = open_vocab_as("gptoss", "default", dst);
    size_t n_got = tokenize(v, text, strlen(text), false, false, got);
    corral_vocab_free(v);
    v = open_vocab_as("llama", "default", dst);
    size_t n_plain = tokenize(v, text, strlen(text), false, false, plain);
    corral_vocab_free(v);
    assert_int_equal(n_got, n_want);
    assert_memory_equal(got, want, n_want * sizeof *want);
    assert_true(n_plain != n_want || memcmp(plain, want, n_want * sizeof *want) != 0);
    unlink(dst);
}

/* vocab-llama3-bpe.gguf as ollama's first Llama 3 files have it: tokenizer.ggml.pre "default"
 * (NULL: none) and <|end_of_text|> as the end of sequence, under architecture arch. */
static corral_vocab *open_llama3_gap_vocab(const char *arch, const char *pre, const char *dst)
{
    static const char *const keys[] = {"general.architecture", "tokenizer.ggml.pre",
                                       "tokenizer.ggml.eos_token_id", NULL};
    corral_error err;
    gguf_writer *w = gguf_writer_create();
    assert_non_null(w);
    assert_true(gguf_writer_add_str(w, keys[0], arch, strlen(arch), &err) &&
                gguf_writer_add_u32(w, keys[2], 128001, &err) &&
                (!pre || gguf_writer_add_str(w, keys[1], pre, strlen(pre), &err)));
    return open_vocab_replacing("vocab-llama3-bpe.gguf", w, keys, dst);
}

/* Such a file splits words as llama-bpe does (which another architecture's "default" does
 * not) and ends its sequences with <|eot_id|>, as llama.cpp reads it. */
static void test_ollama_llama3_metadata_gap_is_llama_bpe(void **state)
{
    (void)state;
    char dst[] = "/tmp/corral-test-llama3-vocab-XXXXXX";
    int fd = mkstemp(dst);
    assert_true(fd >= 0);
    close(fd);
    const char *text = "HelloWorld's 12345 foo/\n/bar";
    static corral_token want[MAX_IDS], got[MAX_IDS];
    corral_vocab *v = open_vocab("vocab-llama3-bpe.gguf");
    size_t n_want = tokenize(v, text, strlen(text), false, false, want);
    corral_vocab_free(v);
    const char *pres[] = {"default", NULL};
    for (size_t i = 0; i < 2; i++) {
        v = open_llama3_gap_vocab("llama", pres[i], dst);
        size_t n_got = tokenize(v, text, strlen(text), false, false, got);
        assert_int_equal(corral_vocab_eos(v), 128009);
        assert_true(corral_vocab_is_eog(v, 128001));
        corral_vocab_free(v);
        assert_int_equal(n_got, n_want);
        assert_memory_equal(got, want, n_want * sizeof *want);
    }
    v = open_llama3_gap_vocab("gpt2", "default", dst);
    size_t n_other = tokenize(v, text, strlen(text), false, false, got);
    assert_int_equal(corral_vocab_eos(v), 128001);
    corral_vocab_free(v);
    assert_true(n_other != n_want || memcmp(got, want, n_want * sizeof *want) != 0);
    unlink(dst);
}

static void test_tokenize_reports_needed_size_when_buffer_is_short(void **state)
{
    (void)state;
    corral_vocab *v = open_vocab("vocab-llama3-bpe.gguf");
    corral_token ids[2];
    size_t n;
    corral_error err;
    assert_true(corral_tokenize(v, "hello world again", 17, true, false, ids, 2, &n, &err));
    assert_int_equal(n, 4);
    assert_int_equal(ids[0], 128000);
    assert_int_equal(ids[1], 15339);
    corral_vocab_free(v);
}

static size_t tokenize_prompt(const corral_vocab *v, const char *text, bool add_special,
                              corral_token *ids)
{
    corral_error err;
    size_t n;
    assert_true(corral_tokenize_prompt(v, text, strlen(text), add_special, ids, MAX_IDS, &n, &err));
    assert_true(n <= MAX_IDS);
    return n;
}

/* A prompt starts with one BOS however its text was made: the begin-of-text a chat template
 * or renderer writes gives way to the one the vocabulary adds (and after a context, which
 * has it, to none), as llama.cpp's chat templates and ollama's renderers take it off; one
 * later in the text stays. A vocabulary that adds no BOS keeps the text's. corral_tokenize
 * itself stays llama.cpp's, which gives two. */
static void test_a_prompt_starts_with_one_bos(void **state)
{
    (void)state;
    static const char *const no_bos[] = {"tokenizer.ggml.add_bos_token", NULL};
    corral_error err;
    static const struct {
        const char *vocab, *with_bos, *with_bos_later;
    } cases[] = {
        {"vocab-llama-spm.gguf", "<s>Hello world", "Hello world<s>"},
        {"vocab-llama3-bpe.gguf", "<|begin_of_text|>Hello world", "Hello world<|begin_of_text|>"},
        {"vocab-gemma4.gguf", "<bos>Hello world", "Hello world<bos>"},
    };
    static corral_token plain[MAX_IDS], got[MAX_IDS];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        corral_vocab *v = open_vocab(cases[i].vocab);
        corral_token bos = corral_vocab_bos(v);
        size_t n_plain = tokenize_prompt(v, "Hello world", true, plain);
        assert_true(n_plain >= 2);
        assert_int_equal(plain[0], bos);
        assert_int_not_equal(plain[1], bos);
        size_t n = tokenize_prompt(v, cases[i].with_bos, true, got);
        assert_ids_equal(plain, n_plain, got, n, cases[i].vocab, 1);
        n = tokenize_prompt(v, cases[i].with_bos, false, got);
        assert_ids_equal(plain + 1, n_plain - 1, got, n, cases[i].vocab, 2);
        n = tokenize_prompt(v, cases[i].with_bos_later, true, got);
        assert_int_equal(n, n_plain + 1);
        assert_int_equal(got[n - 1], bos);
        n = tokenize(v, cases[i].with_bos, strlen(cases[i].with_bos), true, true, got);
        assert_int_equal(n, n_plain + 1);
        assert_int_equal(got[1], bos);
        corral_vocab_free(v);
    }
    char dst[] = "/tmp/corral-test-no-bos-vocab-XXXXXX";
    int fd = mkstemp(dst);
    assert_true(fd >= 0);
    close(fd);
    gguf_writer *w = gguf_writer_create();
    assert_true(w && gguf_writer_add_bool(w, no_bos[0], false, &err));
    corral_vocab *v = open_vocab_replacing("vocab-llama3-bpe.gguf", w, no_bos, dst);
    size_t n_plain = tokenize_prompt(v, "Hello world", true, plain);
    assert_true(n_plain >= 1);
    assert_int_not_equal(plain[0], 128000);
    size_t n = tokenize_prompt(v, "<|begin_of_text|>Hello world", true, got);
    assert_int_equal(n, n_plain + 1);
    assert_int_equal(got[0], 128000);
    assert_memory_equal(got + 1, plain, n_plain * sizeof *plain);
    corral_vocab_free(v);
    unlink(dst);
}

/* A draft model must share its target's vocabulary: the same file twice, and the two
 * models of one vocabulary, are the same; other vocabularies are not. */
static void test_vocab_same_compares_every_token(void **state)
{
    (void)state;
    corral_error err;
    corral_vocab *f32 = corral_vocab_open(fixture_path("tiny-tolstoy-f32.gguf"), &err);
    corral_vocab *f16 = corral_vocab_open(fixture_path("tiny-tolstoy-f16.gguf"), &err);
    corral_vocab *spm = corral_vocab_open(fixture_path("vocab-llama-spm.gguf"), &err);
    corral_vocab *small = corral_vocab_open(fixture_path("stories260K.gguf"), &err);
    assert_non_null(f32);
    assert_non_null(f16);
    assert_non_null(spm);
    assert_non_null(small);
    assert_true(corral_vocab_same(f32, f16, &err));
    assert_true(corral_vocab_same(spm, spm, &err));
    assert_false(corral_vocab_same(f32, small, &err));
    assert_string_equal(err.message, "512 tokens against 2048");
    assert_false(corral_vocab_same(spm, f32, &err));
    corral_vocab_free(f32);
    corral_vocab_free(f16);
    corral_vocab_free(spm);
    corral_vocab_free(small);
}

/*
 * gemma4's BPE (vocab-gemma4.gguf, a 366-token vocabulary written for this test: controls,
 * the 256 <0xXX> byte tokens, single characters, 38 merges, and a "\n\n" no merge makes):
 * every case as llama.cpp tokenizes it (with special tokens parsed; its add_bos false overridden as llama.cpp does),
 * and back to the text, U+2581 printing as the space it stands for, except where the text
 * itself held one (line 59) and where clean_spaces, on as for llama3, joins " ." (line 57).
 */
static void test_gemma4_cases_match_llama_cpp(void **state)
{
    (void)state;
    check_cases("vocab-gemma4.gguf", "tokenizer-cases.gemma4.ids.txt", true);
    static const int gemma4[] = {57, 59};
    check_round_trip("vocab-gemma4.gguf", gemma4, 2);
    /* a turn ends at <turn|> as at <eos>, as llama.cpp's end-of-generation set has it */
    corral_vocab *v = open_vocab("vocab-gemma4.gguf");
    assert_int_equal(corral_vocab_bos(v), 2);
    assert_true(corral_vocab_is_eog(v, 1));
    assert_true(corral_vocab_is_eog(v, 5));
    assert_false(corral_vocab_is_eog(v, 4)); /* <|turn> opens one */
    corral_vocab_free(v);
}

/*
 * ollama's gemma4 files: the same vocabulary with tokenizer.ggml.model "llama" and pre "gemma4"
 * (its converter's names). It tokenizes as llama.cpp's "gemma4" vocabulary does; read as
 * SentencePiece's, by scores, it would not.
 */
static void test_ollama_gemma4_llama_named_vocab_is_gemma4s(void **state)
{
    (void)state;
    char dst[] = "/tmp/corral-test-gemma4-vocab-XXXXXX";
    int fd = mkstemp(dst);
    assert_true(fd >= 0);
    close(fd);
    corral_error err;
    gguf_writer *w = gguf_writer_create();
    assert_non_null(w);
    assert_true(gguf_writer_add_str(w, "tokenizer.ggml.model", "llama", 5, &err));
    static const char *const keys[] = {"tokenizer.ggml.model", NULL};
    corral_vocab *v = open_vocab_replacing("vocab-gemma4.gguf", w, keys, dst);
    check_vocab_cases(v, "tokenizer-cases.gemma4.ids.txt", true);
    assert_int_equal(corral_vocab_bos(v), 2);
    corral_vocab_free(v);
    unlink(dst);
}

/*
 * The Unigram ("t5") vocabulary vocab-ugm.gguf (424 pieces written for this test by
 * tools/archref/ugmvocab.py: T5's <pad> </s> <unk>, a user-defined [MASK], single characters,
 * words and word pieces with scores, and a precompiled charsmap for tabs, newlines, no-break
 * spaces, full-width and compatibility forms, "!!" and "..."): every case as llama.cpp
 * tokenizes it, with remove_extra_whitespaces on. No BOS; </s> closes the text.
 */
static void test_ugm_cases_match_llama_cpp(void **state)
{
    (void)state;
    check_cases("vocab-ugm.gguf", "tokenizer-cases.ugm.ids.txt", true);
    corral_vocab *v = open_vocab("vocab-ugm.gguf");
    assert_int_equal(corral_vocab_bos(v), -1);
    assert_int_equal(corral_vocab_eos(v), 1);
    static corral_token ids[MAX_IDS];
    static const char text[] = "Hello   world\tagain";
    size_t n = tokenize(v, text, sizeof text - 1, true, false, ids);
    char out[64];
    size_t n_out = detokenize(v, ids, n, true, false, out, sizeof out);
    assert_int_equal(n_out, 17);
    assert_memory_equal(out, "Hello world again", 17);
    corral_vocab_free(v);
}

/* vocab-ugm.gguf rewritten: its charsmap replaced by charsmap[0..n) (absent when NULL), and
 * remove_extra_whitespaces set to merge_spaces. */
static void write_ugm_variant(const char *dst, const void *charsmap, size_t n, bool merge_spaces)
{
    corral_error err;
    gguf_file *in = gguf_open(fixture_path("vocab-ugm.gguf"), &err);
    gguf_writer *w = gguf_writer_create();
    assert_true(in && w);
    bool ok = gguf_writer_add_bool(w, "tokenizer.ggml.remove_extra_whitespaces", merge_spaces,
                                   &err);
    if (ok && charsmap)
        ok = gguf_writer_add_array(w, "tokenizer.ggml.precompiled_charsmap", GGUF_TYPE_UINT8,
                                   charsmap, n, &err);
    for (size_t i = 0; ok && i < gguf_n_kv(in); i++) {
        const gguf_kv *kv = gguf_kv_at(in, i);
        if (strcmp(kv->key, "tokenizer.ggml.precompiled_charsmap") != 0 &&
            strcmp(kv->key, "tokenizer.ggml.remove_extra_whitespaces") != 0)
            ok = gguf_writer_copy_kv(w, kv, &err);
    }
    ok = ok && gguf_writer_begin(w, dst, &err) && gguf_writer_finish(w, &err);
    if (!ok)
        fail_msg("%s", err.message);
    gguf_writer_free(w);
    gguf_close(in);
}

static void temp_path(char *path)
{
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
}

/* ollama's snowflake-arctic-embed2 files hold the charsmap as base64, one character a string:
 * vocab-ugm.gguf so rewritten tokenizes every case as llama.cpp does. A string of two
 * characters, or one outside the alphabet, is refused. */
static void test_ugm_charsmap_as_ollama_writes_it(void **state)
{
    (void)state;
    char path[] = "/tmp/corral-test-ugm-base64-XXXXXX";
    temp_path(path);
    corral_error err;
    gguf_file *in = gguf_open(fixture_path("vocab-ugm.gguf"), &err);
    assert_non_null(in);
    const gguf_kv *map = gguf_find_kv(in, "tokenizer.ggml.precompiled_charsmap");
    assert_true(map && map->elem_type == GGUF_TYPE_UINT8);
    char *text = util_base64_encode(map->data, map->n);
    assert_non_null(text);
    size_t n = strlen(text);
    gguf_str *chars = calloc(n, sizeof *chars);
    assert_non_null(chars);
    static const struct {
        size_t at, size;
        char c;
        const char *message; /* NULL: loads */
    } cases[] = {
        {0, 1, 0, NULL},
        {3, 2, 0, "element 3 has 2 bytes"},
        {5, 1, '*', "invalid base64"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        char odd = cases[c].c;
        for (size_t i = 0; i < n; i++)
            chars[i] = (gguf_str){text + i, 1};
        if (odd)
            chars[cases[c].at] = (gguf_str){&odd, 1};
        chars[cases[c].at].size = cases[c].size;
        gguf_writer *w = gguf_writer_create();
        assert_non_null(w);
        bool ok = gguf_writer_add_str_array(w, "tokenizer.ggml.precompiled_charsmap", chars, n,
                                            &err);
        for (size_t i = 0; ok && i < gguf_n_kv(in); i++) {
            const gguf_kv *kv = gguf_kv_at(in, i);
            if (kv != map)
                ok = gguf_writer_copy_kv(w, kv, &err);
        }
        ok = ok && gguf_writer_begin(w, path, &err) && gguf_writer_finish(w, &err);
        if (!ok)
            fail_msg("%s", err.message);
        gguf_writer_free(w);
        corral_vocab *v = corral_vocab_open(path, &err);
        if (cases[c].message) {
            assert_null(v);
            if (!strstr(err.message, cases[c].message))
                fail_msg("case %zu: '%s' does not say '%s'", c, err.message, cases[c].message);
            continue;
        }
        if (!v)
            fail_msg("%s", err.message);
        check_vocab_cases(v, "tokenizer-cases.ugm.ids.txt", true);
        corral_vocab_free(v);
    }
    free(chars);
    free(text);
    gguf_close(in);
    unlink(path);
}

/*
 * As llama.cpp writes XLM-RoBERTa's Unigram vocabularies (bge-m3, snowflake-arctic-embed2,
 * nomic-embed-text-v2-moe): add_bos_token on, with a BOS id. The texts open with it and close
 * with </s>, as llama.cpp's ids for the same file have them.
 */
static void test_ugm_with_a_bos_as_xlm_roberta(void **state)
{
    (void)state;
    char path[] = "/tmp/corral-test-ugm-vocab-XXXXXX";
    temp_path(path);
    corral_error err;
    gguf_file *in = gguf_open(fixture_path("vocab-ugm.gguf"), &err);
    gguf_writer *w = gguf_writer_create();
    assert_true(in && w);
    static const uint32_t bos = 0;
    bool ok = gguf_writer_add_bool(w, "tokenizer.ggml.add_bos_token", true, &err) &&
              gguf_writer_add_scalar(w, "tokenizer.ggml.bos_token_id", GGUF_TYPE_UINT32, &bos,
                                     &err);
    for (size_t i = 0; ok && i < gguf_n_kv(in); i++) {
        const gguf_kv *kv = gguf_kv_at(in, i);
        if (strcmp(kv->key, "tokenizer.ggml.add_bos_token") != 0 &&
            strcmp(kv->key, "tokenizer.ggml.bos_token_id") != 0)
            ok = gguf_writer_copy_kv(w, kv, &err);
    }
    ok = ok && gguf_writer_begin(w, path, &err) && gguf_writer_finish(w, &err);
    if (!ok)
        fail_msg("%s", err.message);
    gguf_writer_free(w);
    gguf_close(in);
    corral_vocab *v = corral_vocab_open(path, &err);
    if (!v)
        fail_msg("%s", err.message);
    static const struct {
        const char *text;
        corral_token ids[8];
        size_t n;
    } cases[] = {
        {"Hello world", {0, 173, 223, 1}, 4},
        {"  two  spaces", {0, 4, 314, 268, 383, 1}, 6},
        {"\xef\xac\x81ne\xe2\x80\xa6", {0, 4, 74, 294, 134, 1}, 6}, /* U+FB01 ne U+2026 */
    };
    static corral_token ids[MAX_IDS];
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        size_t n = tokenize(v, cases[c].text, strlen(cases[c].text), true, false, ids);
        assert_int_equal(n, cases[c].n);
        assert_memory_equal(ids, cases[c].ids, n * sizeof *ids);
    }
    corral_vocab_free(v);
    unlink(path);
}

/*
 * The same pieces with no charsmap and remove_extra_whitespaces off (llama.cpp's ids from
 * ugmvocab.py's --no-charsmap --keep-spaces file): every space is a U+2581 of its own, tabs
 * and newlines are characters. An empty charsmap array reads as none.
 */
static void test_ugm_without_charsmap_keeps_every_space(void **state)
{
    (void)state;
    char path[] = "/tmp/corral-test-ugm-vocab-XXXXXX";
    temp_path(path);
    for (int empty = 0; empty < 2; empty++) {
        static const uint8_t none[1];
        write_ugm_variant(path, empty ? none : NULL, 0, false);
        corral_error err;
        corral_vocab *v = corral_vocab_open(path, &err);
        if (!v)
            fail_msg("%s", err.message);
        check_vocab_cases(v, "tokenizer-cases.ugm-plain.ids.txt", true);
        corral_vocab_free(v);
    }
    unlink(path);
}

static void put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* A tokenizer error for text "a" through charsmap blob[0..n), which loads. */
static void assert_ugm_tokenize_fails(const char *path, const uint8_t *blob, size_t n,
                                      const char *message)
{
    write_ugm_variant(path, blob, n, true);
    corral_error err;
    corral_vocab *v = corral_vocab_open(path, &err);
    if (!v)
        fail_msg("%s", err.message);
    corral_token ids[8];
    size_t n_ids;
    assert_false(corral_tokenize(v, "a", 1, true, false, ids, 8, &n_ids, &err));
    if (!strstr(err.message, message))
        fail_msg("'%s' does not say '%s'", err.message, message);
    corral_vocab_free(v);
}

/*
 * A hostile charsmap is refused with a message, never read out of bounds: a size header past
 * the blob at load; at tokenization a walk past the double array, a replacement offset past
 * the strings and a replacement with no NUL.
 */
static void test_ugm_hostile_charsmap_fails_cleanly(void **state)
{
    (void)state;
    char path[] = "/tmp/corral-test-ugm-vocab-XXXXXX";
    temp_path(path);
    uint8_t blob[4 + 97 * 4 + 2] = {0};

    put_u32(blob, 400); /* more trie than blob */
    write_ugm_variant(path, blob, 9, true);
    corral_error err;
    assert_null(corral_vocab_open(path, &err));
    assert_non_null(strstr(err.message, "overruns"));

    put_u32(blob, 4); /* one node, the root, whose BASE points far away */
    put_u32(blob + 4, 1000u << 10);
    assert_ugm_tokenize_fails(path, blob, 9, "past its 1 nodes");

    /* "a" -> the replacement at offset 5: root BASE 1, "a" at 1 ^ 'a' = 96 with the leaf flag
     * and BASE 96 ^ 2, the value node at 2 */
    put_u32(blob, 97 * 4);
    put_u32(blob + 4, 1u << 10);
    put_u32(blob + 4 + 96 * 4, 'a' | 1u << 8 | (96u ^ 2u) << 10);
    put_u32(blob + 4 + 2 * 4, 1u << 31 | 5);
    blob[4 + 97 * 4] = 'x';
    blob[4 + 97 * 4 + 1] = '\0';
    assert_ugm_tokenize_fails(path, blob, sizeof blob, "offset 5 is past");
    put_u32(blob + 4 + 2 * 4, 1u << 31 | 0);
    assert_ugm_tokenize_fails(path, blob, sizeof blob - 1, "not terminated");
    unlink(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_spm_stories260K_cases_match_llama_cpp),
        cmocka_unit_test(test_spm_llama2_cases_match_llama_cpp),
        cmocka_unit_test(test_spm_llama2_parse_special_cases_match_llama_cpp),
        cmocka_unit_test(test_bpe_llama3_cases_match_llama_cpp),
        cmocka_unit_test(test_bpe_llama3_parse_special_cases_match_llama_cpp),
        cmocka_unit_test(test_arch_models_input_ids_match_llama_cpp),
        cmocka_unit_test(test_tiny_tolstoy_reference_prompt_ids),
        cmocka_unit_test(test_stories260K_reference_prompt_ids),
        cmocka_unit_test(test_special_ids_and_end_of_generation_set),
        cmocka_unit_test(test_wpm_cases_match_llama_cpp),
        cmocka_unit_test(test_wpm_drops_controls_and_splits_at_unicode_whitespace),
        cmocka_unit_test(test_wpm_detokenizes_like_spm_with_clean_spaces),
        cmocka_unit_test(test_unsupported_tokenizer_model_fails_with_message),
        cmocka_unit_test(test_vocab_same_compares_every_token),
        cmocka_unit_test(test_round_trip_restores_every_representable_case),
        cmocka_unit_test(test_detokenize_follows_llama_cpp_space_rules),
        cmocka_unit_test(test_detokenize_reports_full_length_when_buffer_is_short),
        cmocka_unit_test(test_stream_chunks_are_valid_utf8_and_rebuild_the_text),
        cmocka_unit_test(test_stream_holds_a_split_character_until_complete),
        cmocka_unit_test(test_invalid_utf8_is_tokenized_as_llama_cpp_does),
        cmocka_unit_test(test_special_tokens_longest_first_and_user_defined_always),
        cmocka_unit_test(test_phi3_special_tokens_eat_following_whitespace),
        cmocka_unit_test(test_glm4_pre_tokenizer_splits_like_llama3),
        cmocka_unit_test(test_gpt4o_pre_tokenizer_splits_case_changes),
        cmocka_unit_test(test_ollama_gptoss_default_pre_is_gpt4o),
        cmocka_unit_test(test_ollama_llama3_metadata_gap_is_llama_bpe),
        cmocka_unit_test(test_tokenize_reports_needed_size_when_buffer_is_short),
        cmocka_unit_test(test_a_prompt_starts_with_one_bos),
        cmocka_unit_test(test_gemma4_cases_match_llama_cpp),
        cmocka_unit_test(test_ollama_gemma4_llama_named_vocab_is_gemma4s),
        cmocka_unit_test(test_qwen35_pre_tokenizer_keeps_marks_in_words),
        cmocka_unit_test(test_ugm_cases_match_llama_cpp),
        cmocka_unit_test(test_ugm_charsmap_as_ollama_writes_it),
        cmocka_unit_test(test_ugm_with_a_bos_as_xlm_roberta),
        cmocka_unit_test(test_ugm_without_charsmap_keeps_every_space),
        cmocka_unit_test(test_ugm_hostile_charsmap_fails_cleanly),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

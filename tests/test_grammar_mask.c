/*
 * The grammar mask (the token trie walked with the grammar's stacks, masks kept per stack)
 * against the definition, token by token: at every step of a drive through a grammar, the
 * tokens grammar_mask keeps are exactly those grammar_allows accepts one at a time. On a 32k
 * SentencePiece vocabulary and on llama3's 128k byte-level BPE one, whose byte tokens split
 * characters. Grammars: JSON schemas through the server's own conversion, the generic JSON
 * object, classes of 2-, 3- and 4-byte characters (ranges across lengths, negations), and
 * grammars whose first steps are broad (the walks take whole subtrees at once), also with the
 * cache of stack sets kept too small (the slow walks). And on a small vocabulary written
 * here, its ids far from the trie's order (the texts sorted), with byte tokens that repeat
 * other tokens' texts or split characters, control tokens without text and deep chains of
 * prefixes. Drives follow a text (the longest token at each point) or draw allowed tokens at
 * random. A restarted grammar gives a new one's masks, with its walks' work kept. A string
 * opened within a token takes the loop walk kept below the opening's node. The trie's own
 * order (its positions' texts sorted, each node's children in byte order) is checked on
 * all three vocabularies.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "corral/engine.h"
#include "gguf.h"
#include "grammar.h"
#include "server/core/format_grammar.h"
#include "short_fixture.h"
#include "token_trie.h"

static char *fixture_path(const char *name)
{
    static char path[4096];
    const char *dir = getenv("CORRAL_FIXTURES");
    snprintf(path, sizeof path, "%s/%s", dir ? dir : "tests/fixtures", name);
    return path;
}

static corral_vocab *open_vocab(const char *name)
{
    corral_error err = {{0}};
    corral_vocab *vocab = corral_vocab_open(fixture_path(name), &err);
    if (!vocab)
        fail_msg("%s: %s", name, err.message);
    return vocab;
}

static char *schema_gbnf(const char *schema_json)
{
    json_error_t jerr;
    json_t *schema = json_loads(schema_json, JSON_DECODE_ANY, &jerr);
    if (!schema)
        fail_msg("bad test schema %s: %s", schema_json, jerr.text);
    corral_error err = {{0}};
    char *gbnf = format_grammar_from_schema(schema, &err);
    json_decref(schema);
    if (!gbnf)
        fail_msg("%s: %s", schema_json, err.message);
    return gbnf;
}

/* The mask at this step equals grammar_allows over the whole vocabulary (grammar_allows_all,
 * which one token in 61 of each step, a different one each step, checks against
 * grammar_allows itself); the count kept. Short runs (short_fixture.h), where the sanitizers
 * make the full scan slow, check one token in 32 with grammar_allows, a different one at each
 * step. */
static size_t check_step(corral_grammar *g, const corral_vocab *vocab, float *logits,
                         const char *what, size_t step)
{
    size_t n_vocab = corral_vocab_n_tokens(vocab), kept = 0;
    for (size_t id = 0; id < n_vocab; id++)
        logits[id] = 0.0f;
    bool any = grammar_mask(g, logits);
    bool sample = short_fixture_on();
    uint8_t *allowed = sample ? NULL : malloc(n_vocab);
    assert_true(sample || (allowed && grammar_allows_all(g, allowed)));
    for (size_t id = 0; id < n_vocab; id++) {
        bool masked = logits[id] == 0.0f, want = masked;
        bool asked = sample ? (id + step) % 32 == 0 : (id + step) % 61 == 0;
        if (asked)
            want = grammar_allows(g, (corral_token)id);
        if (!sample && want != allowed[id])
            fail_msg("%s, step %zu: token %zu: %s and grammar_allows_all differ", what, step, id,
                     asked ? "grammar_allows" : "the mask");
        if (!sample)
            want = allowed[id];
        if (masked != want) {
            char piece[256];
            size_t n = corral_token_to_piece(vocab, (corral_token)id, piece, sizeof piece, false);
            fail_msg("%s, step %zu: token %zu '%.*s': mask keeps %d, grammar allows %d", what,
                     step, id, (int)(n < sizeof piece ? n : 0), piece, masked, want);
        }
        kept += masked;
    }
    free(allowed);
    assert_int_equal(any, kept > 0);
    return kept;
}

/* The longest token that starts text, or -1. */
static corral_token longest_token(const corral_vocab *vocab, const char *text, size_t len,
                                  size_t *token_len)
{
    size_t n_vocab = corral_vocab_n_tokens(vocab), best_len = 0;
    corral_token best = -1;
    for (size_t id = 0; id < n_vocab; id++) {
        char piece[256];
        size_t k = corral_token_to_piece(vocab, (corral_token)id, piece, sizeof piece, false);
        if (k > best_len && k <= len && k <= sizeof piece && memcmp(piece, text, k) == 0 &&
            !corral_vocab_is_eog(vocab, (corral_token)id)) {
            best_len = k;
            best = (corral_token)id;
        }
    }
    *token_len = best_len;
    return best;
}

/* Drive gbnf through text, checking every step, then the end. */
static void drive_text(const corral_vocab *vocab, const char *gbnf, const char *text)
{
    corral_error err = {{0}};
    corral_grammar *g = corral_grammar_create(gbnf, vocab, &err);
    if (!g)
        fail_msg("%s: %s", gbnf, err.message);
    float *logits = malloc(corral_vocab_n_tokens(vocab) * sizeof *logits);
    assert_non_null(logits);
    size_t len = strlen(text), step = 0;
    for (size_t at = 0; at < len; step++) {
        size_t token_len;
        corral_token id = longest_token(vocab, text + at, len - at, &token_len);
        assert_true(id >= 0);
        check_step(g, vocab, logits, text, step);
        assert_true(grammar_allows(g, id));
        grammar_accept(g, id);
        at += token_len;
    }
    check_step(g, vocab, logits, text, step);
    assert_true(grammar_allows(g, corral_vocab_eos(vocab)));
    free(logits);
    corral_grammar_free(g);
}

/* Drive gbnf with tokens drawn from the mask (seeded), checking every step; the mask's walks
 * by at most max_sets sets of stacks (0: as usual). */
static void drive_random_sets(const corral_vocab *vocab, const char *gbnf, unsigned seed,
                              size_t steps, uint32_t max_sets)
{
    corral_error err = {{0}};
    corral_grammar *g = corral_grammar_create(gbnf, vocab, &err);
    if (!g)
        fail_msg("%s: %s", gbnf, err.message);
    grammar_limit_sets(g, max_sets);
    size_t n_vocab = corral_vocab_n_tokens(vocab);
    float *logits = malloc(n_vocab * sizeof *logits);
    assert_non_null(logits);
    uint64_t rng = seed * 0x9e3779b97f4a7c15u + 1;
    for (size_t step = 0; step < steps; step++) {
        size_t kept = check_step(g, vocab, logits, gbnf, step);
        size_t text_kept = 0;
        for (size_t id = 0; id < n_vocab; id++)
            text_kept += logits[id] == 0.0f && !corral_vocab_is_eog(vocab, (corral_token)id);
        if (kept == 0 || text_kept == 0)
            break;
        rng = rng * 6364136223846793005u + 1442695040888963407u;
        size_t pick = (size_t)(rng >> 33) % text_kept;
        for (size_t id = 0; id < n_vocab; id++)
            if (logits[id] == 0.0f && !corral_vocab_is_eog(vocab, (corral_token)id) &&
                pick-- == 0) {
                grammar_accept(g, (corral_token)id);
                break;
            }
    }
    free(logits);
    corral_grammar_free(g);
}

static void drive_random(const corral_vocab *vocab, const char *gbnf, unsigned seed,
                         size_t steps)
{
    drive_random_sets(vocab, gbnf, seed, steps, 0);
}

static const char person_schema[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"name\":{\"type\":\"string\"},\"age\":{\"type\":\"integer\"},"
    "\"score\":{\"type\":\"number\"},\"active\":{\"type\":\"boolean\"},"
    "\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"maxItems\":4},"
    "\"address\":{\"type\":\"object\",\"properties\":{\"street\":{\"type\":\"string\"},"
    "\"city\":{\"type\":\"string\"}},\"required\":[\"city\"]},"
    "\"status\":{\"enum\":[\"new\",\"active\",\"retired\"]}},"
    "\"required\":[\"name\",\"age\",\"tags\",\"status\"]}";

static const char person_answer[] =
    "{\"name\": \"Zoë Ångström\", \"age\": 42, \"score\": -12.75e3, \"active\": true, "
    "\"tags\": [\"café\", \"naïve \\\"q\\\" \\u00e9\", \"日本語\", \"😀x\"], "
    "\"address\": {\"city\": \"Besançon\"}, \"status\": \"retired\"}";

/* Characters of 1 to 4 bytes, ranges crossing byte lengths, negated classes, any. */
static const char utf8_gbnf[] =
    "root ::= (item \" \")* end\n"
    "item ::= [\\u00e0-\\u00ef] \"!\" | [\\u07f0-\\u0801]+ | [^a-z\\u00c0-\\u024f\\u4e00-\\u9fff]"
    " | \"日本\" [\\u8a00-\\u8aff]? | [\\U0001F600-\\U0001F64F]{1,3} | \"\\u00e9t\\u00e9\"\n"
    "end ::= . .? \".\"\n";

static void test_schema_and_json_32k(void **state)
{
    (void)state;
    corral_vocab *vocab = open_vocab("vocab-llama-spm.gguf");
    char *gbnf = schema_gbnf(person_schema);
    drive_text(vocab, gbnf, person_answer);
    drive_random(vocab, gbnf, 1, 20);
    free(gbnf);
    char *json = format_grammar_json_object();
    assert_non_null(json);
    drive_random(vocab, json, 2, 20);
    free(json);
    drive_random(vocab, utf8_gbnf, 3, 20);
    corral_vocab_free(vocab);
}

static void test_schema_and_json_128k(void **state)
{
    (void)state;
    corral_vocab *vocab = open_vocab("vocab-llama3-bpe.gguf");
    char *gbnf = schema_gbnf(person_schema);
    drive_text(vocab, gbnf,
               "{\"name\": \"Zoë \\\"Å\\\"\", \"age\": -4, \"tags\": [\"日本\"], \"status\": \"new\"}");
    free(gbnf);
    char *json = format_grammar_json_object();
    assert_non_null(json);
    drive_random(vocab, json, 4, 8);
    free(json);
    corral_vocab_free(vocab);
}

static void test_split_characters_128k(void **state)
{
    (void)state;
    corral_vocab *vocab = open_vocab("vocab-llama3-bpe.gguf");
    for (unsigned seed = 5; seed <= 6; seed++)
        drive_random(vocab, utf8_gbnf, seed, 10);
    /* each multi-byte character of the text byte by byte: partial states at every depth */
    drive_text(vocab, utf8_gbnf, "\xc3\xa0! \xdf\xb0\xe0\xa0\x80 \xf0\x9f\x98\x80 \xc3\xa9t\xc3\xa9 x.");
    corral_vocab_free(vocab);
}

/*
 * Grammars whose first steps are broad, the walks taking whole subtrees of the trie at once
 * where every character below brings the stacks back: a string's body (control characters
 * refused, or taken), any character, classes that take only some of the letters or of the
 * code points from U+0080 (a range to U+10FFFF, a hole), a string then what follows it,
 * digits repeated a bounded number of times (a bound beyond the digits a token holds, which
 * takes a subtree whole, and bounds within it), and ASCII alone (whose overlong forms, in
 * the small vocabulary below, start with lead bytes of longer characters).
 */
static const char *const broad_gbnfs[] = {
    "root ::= [^\"\\\\\\x00-\\x1F]* \"\\\"\" [,}] [ \\n]?\n",
    "root ::= .*\n",
    "root ::= [^\"]+ \"\\\"\"\n",
    "root ::= [^\\u00e9\\u4e00-\\u4eff\"]+ \"!\"\n",
    "root ::= ([a-zA-Z0-9 ] | [\\u0080-\\U0010FFFF] [a-m]*)* \".\"\n",
    ("root ::= \"\\\"\" ([^\"\\\\\\x7F\\x00-\\x1F] | \"\\\\\" [\"\\\\nt])* \"\\\"\" (\",\"\n"
     "    | \"}\" \" \"?)\n"),
    "root ::= [1-5] [0-9]{0,2} \"e\" | [6-9] [0-9]? \"e\"\n",
    "root ::= [a-z] [\\x00-\\x1F\\x7F] [a-z]? \"!\"\n",
};

static void test_broad_first_steps_128k(void **state)
{
    (void)state;
    corral_vocab *vocab = open_vocab("vocab-llama3-bpe.gguf");
    size_t n = sizeof broad_gbnfs / sizeof *broad_gbnfs;
    for (size_t i = 0; i < n; i++)
        drive_random(vocab, broad_gbnfs[i], 10 + (unsigned)i, short_fixture_on() ? 2 : 4);
    /* the cache of sets full at once and again and again: the slow walks, the same masks */
    drive_random_sets(vocab, broad_gbnfs[0], 20, short_fixture_on() ? 2 : 4, 2);
    char *gbnf = schema_gbnf(person_schema);
    drive_text(vocab, gbnf,
               "{\"name\": \"\\\"Zoë\", \"age\": 4, \"tags\": [], \"status\": \"new\"}");
    free(gbnf);
    corral_vocab_free(vocab);
}

static void test_broad_first_steps_32k(void **state)
{
    (void)state;
    corral_vocab *vocab = open_vocab("vocab-llama-spm.gguf");
    size_t n = sizeof broad_gbnfs / sizeof *broad_gbnfs;
    for (size_t i = 0; i < n; i++)
        drive_random(vocab, broad_gbnfs[i], 30 + (unsigned)i, short_fixture_on() ? 4 : 8);
    drive_random_sets(vocab, broad_gbnfs[5], 40, short_fixture_on() ? 2 : 8, 3);
    corral_vocab_free(vocab);
}

/*
 * A SentencePiece vocabulary whose ids run against the sorted order of their texts (the
 * trie numbers tokens by text): byte tokens repeating other tokens' texts ("x", the quote)
 * or splitting a character (é), control tokens without text, texts with a quote, a
 * backslash or a newline inside, and chains of prefixes (some past 8 bytes sharing their
 * first 8), written to path and opened.
 */
static corral_vocab *open_small_vocab(char *path)
{
    static const char *const texts[] = {
        "<unk>", "<s>", "</s>", "\xe6\x97\xa5\xe6\x9c\xac", "\xe6\x97\xa5", "\xc3\xa9\x61",
        "\xc3\xa9", "}", "{", "zz\"", "z", "y\"}", "x", "<0x78>", "<0x22>", "<0xC3>", "<0xA9>",
        "<0x0A>", "\\u00e9", "\\n", "\\\"", "\"", "a\"b", "abcdefgh", "abcdef", "abcd", "ab",
        "a", "\xe2\x96\x81\"", "\xe2\x96\x81", "\"name\"", "\"a", "\":", "\",", "\",\n", "9",
        "12", "-", ":", "true", "a\n", "\t", "<ctl>", "\x7f",
        /* overlong forms (one of DEL), a character beyond U+10FFFF and a surrogate after
         * letters, letters after a three-byte character, a quote after an emoji, a text
         * ending within a character */
        "a\xc0\x80", "\xc1\xbf", "\xe0\x80\x80x", "b\xe0\xa4\xb9", ("\xe0\xa4\xb9" "ab"),
        "\xf0\x9f\x98\x80\"", "\xe0\xa4", "c\xf4\x90\x80\x80", "d\xed\xa0\x80",
        /* texts past 8 bytes that share their first 8 (the sort's keys) with each other and
         * with "abcdefgh" */
        "abcdefghij", "abcdefgh\"", "abcdefghi",
    };
    enum { N = sizeof texts / sizeof *texts };
    gguf_str strs[N];
    int32_t types[N];
    float scores[N];
    for (size_t i = 0; i < N; i++) {
        strs[i] = (gguf_str){texts[i], strlen(texts[i])};
        types[i] = i == 0 ? 2 : i < 3 || strcmp(texts[i], "<ctl>") == 0 ? 3
                 : strncmp(texts[i], "<0x", 3) == 0 ? 6 : 1;
        scores[i] = -(float)i;
    }
    corral_error err = {{0}};
    gguf_writer *w = gguf_writer_create();
    assert_non_null(w);
    assert_true(gguf_writer_add_str(w, "tokenizer.ggml.model", "llama", 5, &err));
    assert_true(gguf_writer_add_str_array(w, "tokenizer.ggml.tokens", strs, N, &err));
    assert_true(gguf_writer_add_array(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, types, N,
                                      &err));
    assert_true(gguf_writer_add_array(w, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, scores, N,
                                      &err));
    strcpy(path, "/tmp/corral-test-grammar-vocab-XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    if (!gguf_writer_begin(w, path, &err) || !gguf_writer_finish(w, &err))
        fail_msg("%s", err.message);
    gguf_writer_free(w);
    corral_vocab *vocab = corral_vocab_open(path, &err);
    if (!vocab)
        fail_msg("%s", err.message);
    return vocab;
}

static void test_small_vocab_orders(void **state)
{
    (void)state;
    char path[64];
    corral_vocab *vocab = open_small_vocab(path);
    size_t n = sizeof broad_gbnfs / sizeof *broad_gbnfs;
    for (unsigned seed = 0; seed < 6; seed++) {
        for (size_t i = 0; i < n; i++)
            drive_random(vocab, broad_gbnfs[i], 50 + seed * 8 + (unsigned)i, 24);
        drive_random_sets(vocab, broad_gbnfs[5], 100 + seed, 24, 2);
        drive_random(vocab, utf8_gbnf, 110 + seed, 24);
    }
    char *gbnf = schema_gbnf("{\"type\":\"object\",\"properties\":{\"name\":{\"type\":"
                             "\"string\"}},\"required\":[\"name\"]}");
    drive_text(vocab, gbnf, "{\"name\": \"\\\"x\\u00e9ab\xc3\xa9\xe6\x97\xa5\\n\"}");
    for (unsigned seed = 0; seed < 6; seed++)
        drive_random(vocab, gbnf, 120 + seed, 40);
    free(gbnf);
    corral_vocab_free(vocab);
    unlink(path);
}

/*
 * A step whose stacks are the last step's (a string's body at every character) takes the
 * last step's mask as it is, and only then: a step within a split character between two
 * such steps (é as its two byte tokens) has its own mask, and the step after it works its
 * mask out again. Each step's mask is the definition's.
 */
static void test_repeated_stacks_reuse_the_mask(void **state)
{
    (void)state;
    char path[64];
    corral_vocab *vocab = open_small_vocab(path);
    const char *gbnf = "root ::= [^\"]* \"\\\"\"\n";
    corral_error err = {{0}};
    corral_grammar *g = corral_grammar_create(gbnf, vocab, &err);
    if (!g)
        fail_msg("%s", err.message);
    float *logits = malloc(corral_vocab_n_tokens(vocab) * sizeof *logits);
    assert_non_null(logits);
    /* x, é as <0xC3> <0xA9>, x, é as one token, the closing quote */
    static const corral_token ids[] = {12, 15, 16, 12, 6, 21};
    static const char *const pieces[] = {"x", "\xc3", "\xa9", "x", "\xc3\xa9", "\""};
    enum { N = sizeof ids / sizeof *ids };
    for (size_t i = 0; i < N; i++) {
        char piece[16];
        size_t len = corral_token_to_piece(vocab, ids[i], piece, sizeof piece, false);
        assert_true(len == strlen(pieces[i]) && memcmp(piece, pieces[i], len) == 0);
    }
    size_t reused[N + 1];
    for (size_t step = 0; step <= N; step++) {
        check_step(g, vocab, logits, gbnf, step);
        reused[step] = grammar_masks_reused(g);
        if (step < N) {
            assert_true(grammar_allows(g, ids[step]));
            grammar_accept(g, ids[step]);
        }
    }
    /* reused after x (from the start's stacks), after the x past the split é and after the
     * whole é; not at the start, within é, just after it nor after the quote */
    static const size_t want[N + 1] = {0, 1, 1, 1, 2, 3, 3};
    for (size_t step = 0; step <= N; step++)
        if (reused[step] != want[step])
            fail_msg("step %zu: %zu masks reused, want %zu", step, reused[step], want[step]);
    free(logits);
    corral_grammar_free(g);
    corral_vocab_free(vocab);
    unlink(path);
}

/* The longest-token ids of text (at most max); their count. */
static size_t longest_tokens(const corral_vocab *vocab, const char *text, corral_token *ids,
                             size_t max)
{
    size_t len = strlen(text), n = 0;
    for (size_t at = 0; at < len; n++) {
        size_t token_len;
        assert_true(n < max);
        ids[n] = longest_token(vocab, text + at, len - at, &token_len);
        assert_true(ids[n] >= 0);
        at += token_len;
    }
    return n;
}

/* The masks of a drive through ids[0..n) at every step (n + 1 of them, the last after every
 * id), one bit per token, in order. */
static uint64_t *drive_masks(corral_grammar *g, const corral_vocab *vocab,
                             const corral_token *ids, size_t n)
{
    size_t n_vocab = corral_vocab_n_tokens(vocab), n_words = (n_vocab + 63) / 64;
    uint64_t *masks = calloc((n + 1) * n_words, sizeof *masks);
    float *logits = malloc(n_vocab * sizeof *logits);
    assert_true(masks && logits);
    for (size_t step = 0; step <= n; step++) {
        for (size_t id = 0; id < n_vocab; id++)
            logits[id] = 0.0f;
        assert_true(grammar_mask(g, logits));
        for (size_t id = 0; id < n_vocab; id++)
            if (logits[id] == 0.0f)
                masks[step * n_words + id / 64] |= 1ull << (id % 64);
        if (step < n)
            grammar_accept(g, ids[step]);
    }
    free(logits);
    return masks;
}

/*
 * A restarted grammar (what the runner does for a request with the same grammar as an
 * earlier one) gives the masks of a new one at every step, and what the first drive worked
 * out serves the second: its walks of the trie look at no node again, but for the short
 * walks not worth keeping (a step inside a split character, a short walk's bits).
 */
static void test_restart_keeps_the_work_128k(void **state)
{
    (void)state;
    corral_vocab *vocab = open_vocab("vocab-llama3-bpe.gguf");
    char *gbnf = schema_gbnf(person_schema);
    const char *text = "{\"name\": \"Zoë \\\"Å\\\"\", \"age\": -4, \"tags\": [\"日本\", \"x\"], "
                       "\"address\": {\"city\": \"Nîmes\"}, \"status\": \"new\"}";
    size_t n_words = (corral_vocab_n_tokens(vocab) + 63) / 64;
    corral_error err = {{0}};
    corral_grammar *fresh = corral_grammar_create(gbnf, vocab, &err);
    corral_grammar *kept = corral_grammar_create(gbnf, vocab, &err);
    assert_true(fresh && kept);
    corral_token ids[128];
    size_t n = longest_tokens(vocab, text, ids, sizeof ids / sizeof *ids);
    free(drive_masks(kept, vocab, ids, n));
    size_t first_visits = grammar_trie_visits(kept);
    assert_true(corral_grammar_restart(kept));
    uint64_t *again = drive_masks(kept, vocab, ids, n);
    size_t again_visits = grammar_trie_visits(kept) - first_visits;
    uint64_t *expected = drive_masks(fresh, vocab, ids, n);
    assert_memory_equal(again, expected, (n + 1) * n_words * sizeof *expected);
    print_message("trie nodes looked at: %zu the first time, %zu after the restart\n",
                  first_visits, again_visits);
    assert_true(first_visits > 2000);
    assert_true(again_visits * 100 < first_visits);
    const char *opening;
    assert_string_equal(corral_grammar_source(kept, &opening), gbnf);
    assert_null(opening);
    assert_true(corral_grammar_kept_bytes(kept) > 4 * n_words * sizeof(uint64_t));
    free(again);
    free(expected);
    corral_grammar_free(fresh);
    corral_grammar_free(kept);
    free(gbnf);
    corral_vocab_free(vocab);
}

/*
 * A string opened within a token (` "` and its body, after a key) takes the loop walk kept
 * with the trie below the opening's node: the step reads that walk's exits, not the node's
 * few hundred children one by one, and its mask is the definition's.
 */
static void test_string_opened_within_a_token_128k(void **state)
{
    (void)state;
    corral_vocab *vocab = open_vocab("vocab-llama3-bpe.gguf");
    const char *gbnf = "root ::= \"{\" \" \\\"\" [^\"\\\\\\x00-\\x1F]* \"\\\"}\"\n";
    corral_error err = {{0}};
    corral_grammar *g = corral_grammar_create(gbnf, vocab, &err);
    assert_non_null(g);
    float *logits = malloc(corral_vocab_n_tokens(vocab) * sizeof *logits);
    assert_non_null(logits);
    size_t len;
    corral_token brace = longest_token(vocab, "{", 1, &len);
    assert_true(brace >= 0 && grammar_allows(g, brace));
    grammar_accept(g, brace);
    size_t before = grammar_trie_visits(g);
    check_step(g, vocab, logits, gbnf, 1);
    size_t visits = grammar_trie_visits(g) - before;
    print_message("trie nodes looked at after the brace: %zu\n", visits);
    assert_true(visits < 40);
    free(logits);
    corral_grammar_free(g);
    corral_vocab_free(vocab);
}

/*
 * The trie's order, which its walks rely on (a subtree's tokens one range of positions, a
 * node's children in byte order): every token with text once, the positions' texts sorted (a
 * prefix first, equal texts by id), each node's children in rising byte order and each
 * node's text the first bytes of its tokens'. On the small vocabulary and both real ones.
 */
static void check_trie_order(const corral_vocab *vocab)
{
    const token_trie *t = token_trie_of(vocab);
    assert_non_null(t);
    size_t n_vocab = corral_vocab_n_tokens(vocab), with_text = 0;
    char piece[TOKEN_TRIE_MAX_BYTES];
    for (size_t id = 0; id < n_vocab; id++) {
        size_t len = corral_token_to_piece(vocab, (corral_token)id, piece, sizeof piece, false);
        with_text += len > 0 && len <= sizeof piece && !corral_vocab_is_eog(vocab, (corral_token)id);
    }
    assert_int_equal(t->n_ids, with_text);
    char prev[TOKEN_TRIE_MAX_BYTES];
    size_t prev_len = 0;
    for (uint32_t k = 0; k < t->n_ids; k++) {
        size_t len = corral_token_to_piece(vocab, t->ids[k], piece, sizeof piece, false);
        if (k > 0) {
            size_t n = len < prev_len ? len : prev_len;
            int c = memcmp(prev, piece, n);
            if (c > 0 || (c == 0 && prev_len > len) ||
                (c == 0 && prev_len == len && t->ids[k - 1] >= t->ids[k]))
                fail_msg("positions %u and %u (tokens %d, %d) out of order", k - 1, k,
                         t->ids[k - 1], t->ids[k]);
        }
        memcpy(prev, piece, len);
        prev_len = len;
    }
    /* each node's text, rebuilt from the root, against its first token's */
    uint32_t *parent = malloc((t->n_nodes + 1) * sizeof *parent);
    assert_non_null(parent);
    parent[0] = 0;
    for (uint32_t i = 0; i < t->n_nodes; i++) {
        uint32_t first = t->nodes[i].children, end = t->nodes[i + 1].children;
        for (uint32_t c = first; c < end; c++) {
            parent[c] = i;
            if (c > first && token_trie_byte(&t->nodes[c]) <= token_trie_byte(&t->nodes[c - 1]))
                fail_msg("node %u: children %u and %u out of byte order", i, c - 1, c);
        }
    }
    for (uint32_t i = 1; i < t->n_nodes; i++) {
        size_t depth = 0;
        for (uint32_t at = i; at != 0; at = parent[at])
            depth++;
        assert_true(depth <= sizeof piece);
        size_t len = corral_token_to_piece(vocab, t->ids[t->nodes[i].tokens], piece,
                                           sizeof piece, false);
        assert_true(len >= depth);
        size_t d = depth;
        for (uint32_t at = i; at != 0; at = parent[at])
            if ((uint8_t)piece[--d] != token_trie_byte(&t->nodes[at]))
                fail_msg("node %u: its text is not its first token's (%d)", i,
                         t->ids[t->nodes[i].tokens]);
    }
    free(parent);
}

static void test_trie_order(void **state)
{
    (void)state;
    char path[64];
    corral_vocab *vocab = open_small_vocab(path);
    check_trie_order(vocab);
    corral_vocab_free(vocab);
    unlink(path);
    static const char *const names[] = {"vocab-llama-spm.gguf", "vocab-llama3-bpe.gguf"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        vocab = open_vocab(names[i]);
        check_trie_order(vocab);
        corral_vocab_free(vocab);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_schema_and_json_32k),
        cmocka_unit_test(test_schema_and_json_128k),
        cmocka_unit_test(test_split_characters_128k),
        cmocka_unit_test(test_restart_keeps_the_work_128k),
        cmocka_unit_test(test_string_opened_within_a_token_128k),
        cmocka_unit_test(test_broad_first_steps_128k),
        cmocka_unit_test(test_broad_first_steps_32k),
        cmocka_unit_test(test_small_vocab_orders),
        cmocka_unit_test(test_repeated_stacks_reuse_the_mask),
        cmocka_unit_test(test_trie_order),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

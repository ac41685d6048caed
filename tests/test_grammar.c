/*
 * Grammar-constrained decoding: GBNF parsing (every construct, and errors naming their
 * line), whole-text acceptance, and sampling against real vocabularies (a SentencePiece
 * one and llama3's byte-level BPE, whose byte tokens split UTF-8 characters): every drawn
 * token fits, the text is the grammar's, and the end token comes once it is complete.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "corral/engine.h"
#include "grammar.h"
#include "sampler.h"

static char *fixture_path(const char *name)
{
    static char path[4096];
    const char *dir = getenv("CORRAL_FIXTURES");
    snprintf(path, sizeof path, "%s/%s", dir ? dir : "tests/fixtures", name);
    return path;
}

static corral_grammar *parse(const char *gbnf, const corral_vocab *vocab)
{
    corral_error err = {{0}};
    corral_grammar *g = corral_grammar_create(gbnf, vocab, &err);
    if (!g)
        fail_msg("%s: %s", gbnf, err.message);
    return g;
}

static bool accepts(const corral_grammar *g, const char *text)
{
    return corral_grammar_accepts(g, text, strlen(text));
}

static void test_literals_alternatives_and_groups(void **state)
{
    (void)state;
    corral_grammar *g = parse("root ::= \"ab\" | \"c\" (\"d\" | \"ef\") # a comment\n", NULL);
    assert_true(accepts(g, "ab"));
    assert_true(accepts(g, "cd"));
    assert_true(accepts(g, "cef"));
    assert_false(accepts(g, "a"));
    assert_false(accepts(g, "abc"));
    assert_false(accepts(g, "ce"));
    assert_false(accepts(g, ""));
    corral_grammar_free(g);
}

static void test_classes_and_any(void **state)
{
    (void)state;
    corral_grammar *g = parse("root ::= [a-c0-9_] [^x-z\\]] . [\\x41\\u00e9-\\u00eb]\n", NULL);
    assert_true(accepts(g, "b5A\xc3\xa9"));
    assert_true(accepts(g, "b5!A"));
    assert_false(accepts(g, "_]!A")); /* ']' is excluded */
    assert_true(accepts(g, "9q\xe2\x82\xac\xc3\xab"));   /* any: a 3-byte character; ë */
    assert_false(accepts(g, "dq!A"));
    assert_false(accepts(g, "0y!A"));
    assert_false(accepts(g, "0q!B"));
    corral_grammar_free(g);
}

static void test_repetitions(void **state)
{
    (void)state;
    corral_grammar *g = parse("root ::= \"a\"* \"b\"+ \"c\"? d{2} e{1,3} f{2,}\n"
                              "d ::= \"d\"\ne ::= \"e\"\nf ::= \"f\"\n", NULL);
    assert_true(accepts(g, "bddeff"));
    assert_true(accepts(g, "aaabbbcddeeefffff"));
    assert_false(accepts(g, "ddeff"));       /* b+ needs one */
    assert_false(accepts(g, "bcceddeff"));   /* c? at most one */
    assert_false(accepts(g, "bdeff"));       /* d{2} */
    assert_false(accepts(g, "bddeeeeff"));   /* e{1,3} */
    assert_false(accepts(g, "bddef"));       /* f{2,} */
    corral_grammar_free(g);
}

static void test_rules_recursion_and_newlines(void **state)
{
    (void)state;
    /* right recursion, a rule used before it is defined, alternatives over several lines
     * inside parentheses, and an empty alternative */
    corral_grammar *g = parse("root ::= list\n"
                              "list ::= \"[\" (\n  item (\",\" item)*\n  |\n) \"]\"\n"
                              "item ::= [0-9]+ | list\n",
                              NULL);
    assert_true(accepts(g, "[]"));
    assert_true(accepts(g, "[1,22,[3,[]]]"));
    assert_false(accepts(g, "[1,]"));
    assert_false(accepts(g, "[[1]"));
    corral_grammar_free(g);
}

static void test_many_optional_elements(void **state)
{
    (void)state;
    /* every optional element skipped is one more level of expansion */
    char gbnf[4096] = "root ::= \"a\"";
    for (int i = 0; i < 300; i++)
        strcat(gbnf, " \"b\"?");
    strcat(gbnf, "\n");
    corral_grammar *g = parse(gbnf, NULL);
    assert_true(accepts(g, "a"));
    assert_true(accepts(g, "ab"));
    assert_true(accepts(g, "abbb"));
    corral_grammar_free(g);
}

static void test_escapes_and_utf8_literals(void **state)
{
    (void)state;
    corral_grammar *g =
        parse("root ::= \"\\\"\\\\\\n\\t\" \"\xc3\xa9\xe6\x97\xa5\" [\\u3040-\\u309f]\n", NULL);
    assert_true(accepts(g, "\"\\\n\t\xc3\xa9\xe6\x97\xa5\xe3\x81\x82"));
    assert_false(accepts(g, "\"\\\n\t\xc3\xa9\xe6\x97\xa5\xe3\x82\xa2")); /* katakana a */
    assert_false(accepts(g, "\"\\\n\t\xc3\xa9\xe6\x97\xa5\xe3\x81")); /* cut mid-character */
    corral_grammar_free(g);
}

static void expect_error(const char *gbnf, const char *message)
{
    corral_error err = {{0}};
    corral_grammar *g = corral_grammar_create(gbnf, NULL, &err);
    if (g)
        fail_msg("accepted: %s", gbnf);
    if (!strstr(err.message, message))
        fail_msg("%s: got \"%s\", want \"%s\"", gbnf, err.message, message);
}

static void test_opening(void **state)
{
    (void)state;
    corral_error err = {{0}};
    corral_grammar *g = corral_grammar_create_opening("root ::= \"{}\"\n", "<think>", NULL, &err);
    assert_non_null(g);
    assert_true(accepts(g, "<think>"));
    assert_true(accepts(g, "\n<think>"));
    assert_true(accepts(g, "{}"));
    assert_true(accepts(g, " {}"));
    assert_false(accepts(g, "  <think>")); /* one whitespace character at most */
    assert_false(accepts(g, "<think>{}"));
    assert_false(accepts(g, "<thin"));
    corral_grammar_free(g);
    assert_null(corral_grammar_create_opening("root ::= \"{}\"\n", "", NULL, &err));
    assert_null(corral_grammar_create_opening("root ::= \"{}\"\n", "\xc3", NULL, &err));
}

static void test_errors(void **state)
{
    (void)state;
    expect_error("a ::= \"x\"\n", "no rule named 'root'");
    expect_error("root ::= a\n", "undefined rule 'a'");
    expect_error("root ::= \"x\"\n\nroot ::= \"y\"\n", "line 3: rule defined twice");
    expect_error("root ::= \"x\n", "line 1: unterminated literal");
    expect_error("root ::= [a-\n", "line 1: unterminated character class");
    expect_error("root ::= \"a\"\nb = \"c\"\n", "line 2: expecting ::=");
    expect_error("root ::= (\"a\"\n", "expecting ')'");
    expect_error("root ::= * \"a\"\n", "expecting an item before");
    expect_error("root ::= \"a\"{3,2}\n", "bad repetition count");
    expect_error("root ::= \"a\"{99999}\n", "bad repetition count");
    expect_error("root ::= \"\\q\"\n", "unknown escape");
    expect_error("root ::= \"\\xZZ\"\n", "expecting hex digits");
    expect_error("root ::= \"a\" )\n", "line 1: expecting the end of the rule");
    expect_error("root ::= root \"a\"\n", "left recursion");
    char deep[2048] = "root ::= ";
    for (int i = 0; i < 200; i++)
        strcat(deep, "(");
    strcat(deep, "\"a\"\n");
    expect_error(deep, "nested too deep");
}

/* ---- sampling with a vocabulary ---- */

typedef struct drawn {
    char text[512];
    size_t len;
    bool ended;
    int n_tokens;
} drawn;

/* Draw up to max tokens with random logits under grammar; every token must be allowed. */
static drawn sample_text(corral_vocab *vocab, const char *gbnf, float temperature, int max,
                         unsigned seed)
{
    corral_grammar *g = parse(gbnf, vocab);
    corral_sampler_params p;
    corral_sampler_params_init(&p);
    p.temperature = temperature;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.seed = seed;
    corral_error err;
    size_t n_vocab = corral_vocab_n_tokens(vocab);
    corral_sampler *s = corral_sampler_create(&p, n_vocab, &err);
    assert_non_null(s);
    corral_sampler_set_grammar(s, g);
    float *logits = malloc(n_vocab * sizeof *logits);
    drawn d = {0};
    srand(seed);
    for (d.n_tokens = 0; d.n_tokens < max && !d.ended; d.n_tokens++) {
        for (size_t i = 0; i < n_vocab; i++)
            logits[i] = (float)rand() / (float)RAND_MAX * 10.0f;
        corral_token id = corral_sampler_sample(s, logits);
        if (corral_vocab_is_eog(vocab, id)) {
            d.ended = true;
            break;
        }
        char piece[256];
        size_t n = corral_token_to_piece(vocab, id, piece, sizeof piece, false);
        assert_true(n > 0 && d.len + n < sizeof d.text);
        memcpy(d.text + d.len, piece, n);
        d.len += n;
    }
    free(logits);
    corral_sampler_free(s);
    corral_grammar_free(g);
    return d;
}

static void test_sampling_spm(void **state)
{
    (void)state;
    corral_error err;
    corral_vocab *vocab = corral_vocab_open(fixture_path("tiny-tolstoy-f32.gguf"), &err);
    assert_non_null(vocab);
    for (unsigned seed = 1; seed <= 4; seed++) {
        drawn d = sample_text(vocab, "root ::= \" Prince\" \" Andrew\" | \" Natasha\"\n",
                              seed % 2 ? 0.0f : 1.0f, 40, seed);
        assert_true(d.ended);
        d.text[d.len] = '\0';
        assert_true(strcmp(d.text, " Prince Andrew") == 0 || strcmp(d.text, " Natasha") == 0);
    }
    /* free text under a bounded shape: ends within its bound, the end token last */
    drawn d = sample_text(vocab, "root ::= \" \" [a-z]{1,12} \",\" (\" \" [a-z]{1,12}){2}\n",
                          1.0f, 80, 9);
    assert_true(d.ended);
    d.text[d.len] = '\0';
    corral_grammar *check = parse("root ::= \" \" [a-z]{1,12} \",\" (\" \" [a-z]{1,12}){2}\n",
                                  NULL);
    assert_true(accepts(check, d.text));
    corral_grammar_free(check);
    corral_vocab_free(vocab);
}

/* llama3's vocabulary has a token for each byte: a character may come in pieces. */
static corral_token byte_token(const corral_vocab *vocab, unsigned char byte)
{
    size_t n = corral_vocab_n_tokens(vocab);
    for (size_t id = 0; id < n; id++) {
        char piece[8];
        if (corral_token_to_piece(vocab, (corral_token)id, piece, sizeof piece, false) == 1 &&
            (unsigned char)piece[0] == byte)
            return (corral_token)id;
    }
    fail_msg("no token for byte %02x", byte);
    return -1;
}

static void test_split_characters_bpe(void **state)
{
    (void)state;
    corral_error err;
    corral_vocab *vocab = corral_vocab_open(fixture_path("vocab-llama3-bpe.gguf"), &err);
    assert_non_null(vocab);
    corral_grammar *g = parse("root ::= [\\u00e0-\\u00ef] \"!\"\n", vocab);
    corral_token c3 = byte_token(vocab, 0xc3), c4 = byte_token(vocab, 0xc4);
    corral_token a9 = byte_token(vocab, 0xa9), bf = byte_token(vocab, 0xbf);
    assert_true(grammar_allows(g, c3));  /* starts U+00C0..U+00FF */
    assert_false(grammar_allows(g, c4)); /* starts U+0100.. */
    assert_false(grammar_allows(g, a9)); /* a continuation byte first */
    grammar_accept(g, c3);
    assert_true(grammar_allows(g, a9));  /* é */
    assert_false(grammar_allows(g, bf)); /* U+00FF is past the range */
    assert_false(grammar_allows(g, corral_vocab_eos(vocab)));
    size_t n_vocab = corral_vocab_n_tokens(vocab);
    float *logits = malloc(n_vocab * sizeof *logits);
    for (size_t i = 0; i < n_vocab; i++)
        logits[i] = 0.0f;
    assert_true(grammar_mask(g, logits));
    for (size_t i = 0; i < n_vocab; i++) { /* only tokens that finish the character stay */
        char piece[256];
        size_t n = corral_token_to_piece(vocab, (corral_token)i, piece, sizeof piece, false);
        bool kept = logits[i] == 0.0f;
        bool fits = n >= 1 && (unsigned char)piece[0] >= 0xa0 && (unsigned char)piece[0] <= 0xaf &&
                    (n == 1 || (n == 2 && piece[1] == '!'));
        if (kept != fits)
            fail_msg("token %zu (%zu bytes, first %02x): kept %d", i, n, (unsigned char)piece[0],
                     kept);
    }
    free(logits);
    grammar_accept(g, a9);
    grammar_accept(g, byte_token(vocab, '!'));
    assert_true(grammar_allows(g, corral_vocab_eos(vocab)));
    assert_false(grammar_allows(g, byte_token(vocab, '!')));
    corral_grammar_free(g);
    for (unsigned seed = 1; seed <= 3; seed++) {
        drawn d = sample_text(vocab, "root ::= \"caf\" [\\u00e0-\\u00ef] \" \" [a-z]{2}\n", 1.0f,
                              20, seed);
        assert_true(d.ended);
        d.text[d.len] = '\0';
        corral_grammar *check = parse("root ::= \"caf\" [\\u00e0-\\u00ef] \" \" [a-z]{2}\n", NULL);
        assert_true(accepts(check, d.text));
        corral_grammar_free(check);
    }
    corral_vocab_free(vocab);
}

/* The token whose text is exactly text. */
static corral_token token_of(const corral_vocab *vocab, const char *text)
{
    size_t n = corral_vocab_n_tokens(vocab);
    for (size_t id = 0; id < n; id++) {
        char piece[64];
        size_t k = corral_token_to_piece(vocab, (corral_token)id, piece, sizeof piece, false);
        if (k == strlen(text) && memcmp(piece, text, k) == 0)
            return (corral_token)id;
    }
    fail_msg("no token '%s'", text);
    return -1;
}

/*
 * Alternatives that take the same characters: after each letter every one of them is a
 * stack, so a search that tries the stacks one by one branches eight ways a letter, and a
 * long token refused near its end (the capital of "cancellationToken") would cost 8^12
 * paths. grammar_allows follows the token through all the stacks at once, equal ones
 * merged: the answers come at once, and the mask agrees with them on every token.
 */
static void test_overlapping_alternatives_bpe(void **state)
{
    (void)state;
    corral_error err;
    corral_vocab *vocab = corral_vocab_open(fixture_path("vocab-llama3-bpe.gguf"), &err);
    assert_non_null(vocab);
    corral_grammar *g = parse("root ::= ([a-z] | [a-z] | [a-y] | [b-z] | [a-x] | [c-z] | [a-w] |"
                              " [d-z])+ \"!\"\n",
                              vocab);
    corral_token refused = token_of(vocab, "cancellationToken");
    corral_token fits = token_of(vocab, "cancel");
    assert_false(grammar_allows(g, refused));
    assert_true(grammar_allows(g, fits));
    grammar_accept(g, fits);
    assert_false(grammar_allows(g, refused));
    assert_true(grammar_allows(g, token_of(vocab, "!")));
    size_t n_vocab = corral_vocab_n_tokens(vocab);
    float *logits = malloc(n_vocab * sizeof *logits);
    assert_non_null(logits);
    for (size_t i = 0; i < n_vocab; i++)
        logits[i] = 0.0f;
    assert_true(grammar_mask(g, logits));
    for (size_t i = 0; i < n_vocab; i++)
        if ((logits[i] == 0.0f) != grammar_allows(g, (corral_token)i))
            fail_msg("token %zu: the mask and grammar_allows differ", i);
    free(logits);
    corral_grammar_free(g);
    corral_vocab_free(vocab);
}

/*
 * Draws under a grammar follow the masked distribution exactly: the filters (top-k here)
 * see only allowed tokens. The best token overall, "z", is refused; a draw-first sampler
 * would keep "a" and "b" whenever the unmasked top 3 {z, a, b} gave them, and "c" only
 * after a refusal (0.117 instead of 0.186). With plain temperature, draw-first is exact and
 * is what the sampler does.
 */
static void test_masked_distribution(void **state)
{
    (void)state;
    corral_error err;
    corral_vocab *vocab = corral_vocab_open(fixture_path("tiny-tolstoy-f32.gguf"), &err);
    assert_non_null(vocab);
    size_t n_vocab = corral_vocab_n_tokens(vocab);
    corral_token ids[5] = {token_of(vocab, "z"), token_of(vocab, "a"), token_of(vocab, "b"),
                           token_of(vocab, "c"), token_of(vocab, "d")};
    const float values[5] = {2.0f, 1.0f, 0.5f, 0.0f, -0.5f};
    float *logits = malloc(n_vocab * sizeof *logits);
    for (size_t i = 0; i < n_vocab; i++)
        logits[i] = -30.0f;
    for (int i = 0; i < 5; i++)
        logits[ids[i]] = values[i];
    for (int top_k = 0; top_k <= 3; top_k += 3) {
        corral_grammar *g = parse("root ::= (\"a\" | \"b\" | \"c\" | \"d\")+\n", vocab);
        corral_sampler_params p;
        corral_sampler_params_init(&p);
        p.temperature = 1.0f;
        p.top_k = top_k;
        p.top_p = 1.0f;
        p.seed = 7;
        corral_sampler *s = corral_sampler_create(&p, n_vocab, &err);
        assert_non_null(s);
        corral_sampler_set_grammar(s, g);
        enum { DRAWS = 6000 };
        int counts[5] = {0};
        for (int n = 0; n < DRAWS; n++) {
            corral_token id = corral_sampler_sample(s, logits);
            for (int i = 0; i < 5; i++)
                counts[i] += id == ids[i];
        }
        double z = 0.0;
        int kept = top_k ? top_k : 4;
        for (int i = 1; i <= kept; i++)
            z += exp(values[i]);
        assert_int_equal(counts[0], 0);
        for (int i = 1; i < 5; i++) {
            double expected = i <= kept ? exp(values[i]) / z : 0.0;
            double se = sqrt(expected * (1.0 - expected) / DRAWS) + 1e-9;
            double seen = (double)counts[i] / DRAWS;
            if (fabs(seen - expected) > 4.5 * se + 1e-9)
                fail_msg("top_k %d, '%c': drawn %.4f, masked distribution %.4f", top_k,
                         "zabcd"[i], seen, expected);
        }
        corral_sampler_free(s);
        corral_grammar_free(g);
    }
    free(logits);
    corral_vocab_free(vocab);
}

/* One seeded run of the sampler under a grammar: each step's token and its draw's
 * candidates (ids, logits, probabilities) with the refused ones (-INFINITY) left out. */
enum { RUN_STEPS = 24, RUN_CANDS = 64 };
typedef struct sampled_run {
    corral_token id[RUN_STEPS];
    size_t n_cand[RUN_STEPS];
    corral_token cand_id[RUN_STEPS][RUN_CANDS];
    float cand_logit[RUN_STEPS][RUN_CANDS], cand_p[RUN_STEPS][RUN_CANDS];
    int n_steps;
    size_t most_listed, least_listed; /* the largest and smallest allowed sets met */
} sampled_run;

static void sample_run(corral_vocab *vocab, const char *gbnf, const corral_sampler_params *p,
                       size_t list_limit, bool write_rows, sampled_run *run)
{
    size_t n_vocab = corral_vocab_n_tokens(vocab);
    corral_grammar *g = parse(gbnf, vocab), *probe = parse(gbnf, vocab);
    grammar_limit_list(g, list_limit);
    grammar_limit_list(probe, n_vocab);
    corral_error err;
    corral_sampler *s = corral_sampler_create(p, n_vocab, &err);
    assert_non_null(s);
    corral_sampler_set_grammar(s, g);
    sampler_write_masked_rows(s, write_rows);
    float *logits = malloc(n_vocab * sizeof *logits);
    assert_non_null(logits);
    memset(run, 0, sizeof *run);
    run->least_listed = SIZE_MAX;
    srand(11);
    for (run->n_steps = 0; run->n_steps < RUN_STEPS; run->n_steps++) {
        int k = run->n_steps;
        for (size_t i = 0; i < n_vocab; i++) /* every fourth step, logits of -INFINITY */
            logits[i] = k % 4 == 3 && rand() % 97 == 0 ? -INFINITY
                                                       : (float)rand() / (float)RAND_MAX * 8.0f;
        for (size_t i = 0; k % 6 == 5 && i < n_vocab; i++) /* every sixth, NaN */
            logits[i] = rand() % 89 == 0 ? NAN : logits[i];
        const corral_token *allowed;
        size_t n_allowed;
        assert_true(grammar_allowed_ids(probe, &allowed, &n_allowed));
        run->most_listed = n_allowed > run->most_listed ? n_allowed : run->most_listed;
        run->least_listed = n_allowed < run->least_listed ? n_allowed : run->least_listed;
        corral_token cand[RUN_CANDS];
        float cand_logit[RUN_CANDS], cand_p[RUN_CANDS];
        run->id[k] = corral_sampler_sample(s, logits);
        if (!corral_vocab_is_eog(vocab, run->id[k]) && !grammar_allows(probe, run->id[k]))
            fail_msg("step %d: token %d drawn, which the grammar refuses", k, run->id[k]);
        corral_sampler_accept(s, run->id[k]);
        size_t n = sampler_last_candidates(s, cand, cand_logit, cand_p, RUN_CANDS);
        for (size_t i = 0; i < n; i++)
            if (cand_logit[i] != -INFINITY) {
                size_t at = run->n_cand[k]++;
                run->cand_id[k][at] = cand[i];
                run->cand_logit[k][at] = cand_logit[i];
                run->cand_p[k][at] = cand_p[i];
            }
        if (corral_vocab_is_eog(vocab, run->id[k]))
            break;
        grammar_accept(probe, run->id[k]);
    }
    free(logits);
    corral_sampler_free(s);
    corral_grammar_free(g);
    corral_grammar_free(probe);
}

/* Fail unless run and other (drawn another way, named how) hold the same tokens and, with
 * a temperature, the same candidates bit for bit. */
static void assert_same_draws(const sampled_run *row, const sampled_run *other,
                              const corral_sampler_params *p, int params, const char *how)
{
    if (row->n_steps != other->n_steps)
        fail_msg("params %d: %d steps from the row, %d %s", params, row->n_steps,
                 other->n_steps, how);
    for (int k = 0; k <= row->n_steps && k < RUN_STEPS; k++) {
        if (row->id[k] != other->id[k])
            fail_msg("params %d, step %d: token %d from the row, %d %s", params, k, row->id[k],
                     other->id[k], how);
        if (p->temperature <= 0.0f)
            continue;
        if (row->n_cand[k] != other->n_cand[k])
            fail_msg("params %d, step %d: %zu candidates from the row, %zu %s", params, k,
                     row->n_cand[k], other->n_cand[k], how);
        for (size_t c = 0; c < row->n_cand[k]; c++)
            if (row->cand_id[k][c] != other->cand_id[k][c] || /* NaN p: the same bits */
                memcmp(&row->cand_logit[k][c], &other->cand_logit[k][c], sizeof(float)) ||
                memcmp(&row->cand_p[k][c], &other->cand_p[k][c], sizeof(float)))
                fail_msg("params %d, step %d, candidate %zu: %d %a %a from the row, "
                         "%d %a %a %s", params, k, c, row->cand_id[k][c],
                         row->cand_logit[k][c], row->cand_p[k][c], other->cand_id[k][c],
                         other->cand_logit[k][c], other->cand_p[k][c], how);
    }
}

/*
 * The sampler draws from the few tokens a step allows (their ids and logits alone) where
 * the grammar lists them, else from the logits read through the mask's bits: both give the
 * same tokens as the masked row written out, and each draw the same candidates with the
 * same probabilities bit for bit, under every filter, the penalties (a refused token stays
 * refused, whatever the repeat_penalty), and logits of -INFINITY and NaN. The grammar's letters allow a few tokens a step (read through the bits
 * too where nothing is listed), its free text nearly all of them.
 */
static void test_listed_draw_is_the_masked_draw(void **state)
{
    (void)state;
    corral_error err;
    corral_vocab *vocab = corral_vocab_open(fixture_path("tiny-tolstoy-f32.gguf"), &err);
    assert_non_null(vocab);
    size_t n_vocab = corral_vocab_n_tokens(vocab);
    const char *gbnf = "root ::= [a-e]{1,6} \" \" [^\\x00-\\x1f]{1,12} \".\" [0-9]{1,4}\n";
    corral_sampler_params base;
    corral_sampler_params_init(&base);
    base.seed = 5;
    base.repeat_penalty = 1.3f;
    base.frequency_penalty = 0.1f;
    base.presence_penalty = 0.2f;
    enum { N_PARAMS = 13 };
    corral_sampler_params params[N_PARAMS];
    for (int i = 0; i < N_PARAMS; i++)
        params[i] = base;
    params[0].temperature = 0.0f;                                /* greedy */
    params[1].top_k = 5, params[1].top_p = 0.9f, params[1].min_p = 0.05f;
    params[2].top_k = 0, params[2].typical_p = 0.7f, params[2].top_p = 0.95f;
    params[3].top_k = 0, params[3].top_p = 1.0f, params[3].temperature = 1.0f; /* draw first */
    params[4].top_k = 50, params[4].top_p = 1.0f; /* more than a step allows: refused kept */
    params[5].top_k = 3, params[5].top_p = 0.5f, params[5].temperature = 0.3f;
    /* logits past FLT_MAX once divided: no p is a number, every draw falls past the last */
    params[6].top_k = 50, params[6].top_p = 1.0f, params[6].temperature = 1e-38f;
    params[7].top_k = 3, params[7].top_p = 1.0f, params[7].temperature = 1e-38f;
    for (int i = 8; i < 11; i++) /* and where a filter drops the refused ones */
        params[i].top_k = 50, params[i].top_p = 1.0f, params[i].temperature = 1e-38f;
    params[8].min_p = 0.05f;
    params[9].top_p = 0.9f;
    params[10].typical_p = 0.5f;
    /* a penalty below 0 would take a refused token of the history to +INFINITY */
    params[11].repeat_penalty = -1.0f, params[11].top_k = 5;
    params[12].repeat_penalty = -1.0f, params[12].temperature = 0.0f;
    static sampled_run row, listed, by_bits;
    for (int i = 0; i < N_PARAMS; i++) {
        sample_run(vocab, gbnf, &params[i], 0, true, &row);
        sample_run(vocab, gbnf, &params[i], n_vocab, false, &listed);
        sample_run(vocab, gbnf, &params[i], 0, false, &by_bits);
        assert_true(row.least_listed < 20 && row.most_listed > n_vocab / 2);
        assert_same_draws(&row, &listed, &params[i], i, "listed");
        assert_same_draws(&row, &by_bits, &params[i], i, "through the mask's bits");
    }
    corral_vocab_free(vocab);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_literals_alternatives_and_groups),
        cmocka_unit_test(test_classes_and_any),
        cmocka_unit_test(test_repetitions),
        cmocka_unit_test(test_rules_recursion_and_newlines),
        cmocka_unit_test(test_many_optional_elements),
        cmocka_unit_test(test_escapes_and_utf8_literals),
        cmocka_unit_test(test_opening),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_sampling_spm),
        cmocka_unit_test(test_split_characters_bpe),
        cmocka_unit_test(test_overlapping_alternatives_bpe),
        cmocka_unit_test(test_masked_distribution),
        cmocka_unit_test(test_listed_draw_is_the_masked_draw),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

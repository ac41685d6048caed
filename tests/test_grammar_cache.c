/*
 * The runner's cache of recent requests' grammars: a request with the grammar of an earlier
 * one gets that grammar back at its start, one with another text (or another opening) a
 * new one; two at once with the same text get two; the cache stays within its count and
 * bytes, giving up the least recently given back first.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "corral/engine.h"
#include "grammar.h"
#include "runner/grammar_cache.h"

static const char yes_no[] = "root ::= \"yes\" | \"no\"\n";
static const char digits[] = "root ::= [0-9]+\n";
static const char words[] = "root ::= [a-z]+ (\" \" [a-z]+)*\n";

static corral_vocab *vocab;

static int open_vocab(void **state)
{
    (void)state;
    char path[4096];
    const char *dir = getenv("CORRAL_FIXTURES");
    snprintf(path, sizeof path, "%s/vocab-llama-spm.gguf", dir ? dir : "tests/fixtures");
    corral_error err = {{0}};
    vocab = corral_vocab_open(path, &err);
    return vocab ? 0 : -1;
}

static int close_vocab(void **state)
{
    (void)state;
    corral_vocab_free(vocab);
    return 0;
}

static corral_grammar *take(grammar_cache *cache, const char *gbnf, const char *opening)
{
    corral_error err = {{0}};
    corral_grammar *g = grammar_cache_take(cache, gbnf, opening, vocab, &err);
    if (!g)
        fail_msg("%s: %s", gbnf, err.message);
    return g;
}

/* The token whose text is the one character c (the SentencePiece vocabulary has each
 * digit). */
static corral_token token_of(const char *c)
{
    for (size_t id = 0; id < corral_vocab_n_tokens(vocab); id++) {
        char piece[8];
        if (corral_token_to_piece(vocab, (corral_token)id, piece, sizeof piece, false) == 1 &&
            piece[0] == *c)
            return (corral_token)id;
    }
    fail_msg("no token for '%c'", *c);
    return -1;
}

/* Advance g through text, one token per character. */
static void advance(corral_grammar *g, const char *text)
{
    for (const char *c = text; *c; c++) {
        corral_token id = token_of(c);
        assert_true(grammar_allows(g, id));
        grammar_accept(g, id);
    }
}

static void assert_counts(grammar_cache *cache, size_t kept, size_t made)
{
    size_t k, m;
    grammar_cache_counts(cache, &k, &m);
    assert_int_equal(k, kept);
    assert_int_equal(m, made);
}

static void test_the_same_text_gets_its_grammar_back_at_its_start(void **state)
{
    (void)state;
    grammar_cache *cache = grammar_cache_create(4, 1 << 20);
    assert_non_null(cache);
    corral_grammar *first = take(cache, digits, NULL);
    float *logits = malloc(corral_vocab_n_tokens(vocab) * sizeof *logits);
    assert_non_null(logits);
    memset(logits, 0, corral_vocab_n_tokens(vocab) * sizeof *logits);
    assert_true(grammar_mask(first, logits));
    advance(first, "42");
    grammar_cache_give(cache, first);
    corral_grammar *again = take(cache, digits, NULL);
    assert_ptr_equal(again, first);
    assert_counts(cache, 1, 1);
    /* at its start again: a digit, not the end */
    assert_true(grammar_allows(again, token_of("7")));
    assert_false(grammar_allows(again, corral_vocab_eos(vocab)));
    /* another text, and the same text with an opening, are other grammars */
    corral_grammar *other = take(cache, yes_no, NULL);
    corral_grammar *opened = take(cache, digits, "<think>");
    assert_ptr_not_equal(other, again);
    assert_ptr_not_equal(opened, again);
    const char *opening;
    assert_string_equal(corral_grammar_source(opened, &opening), digits);
    assert_string_equal(opening, "<think>");
    assert_counts(cache, 1, 3);
    grammar_cache_give(cache, again);
    grammar_cache_give(cache, other);
    grammar_cache_give(cache, opened);
    assert_ptr_equal(take(cache, digits, "<think>"), opened);
    assert_ptr_equal(take(cache, digits, NULL), again);
    assert_counts(cache, 3, 3);
    grammar_cache_give(cache, again);
    grammar_cache_give(cache, opened);
    free(logits);
    grammar_cache_free(cache);
}

static void test_two_at_once_keep_the_one_that_worked_more(void **state)
{
    (void)state;
    grammar_cache *cache = grammar_cache_create(4, 64 << 20);
    assert_non_null(cache);
    corral_grammar *a = take(cache, words, NULL);
    corral_grammar *b = take(cache, words, NULL);
    assert_ptr_not_equal(a, b);
    float *logits = malloc(corral_vocab_n_tokens(vocab) * sizeof *logits);
    assert_non_null(logits);
    memset(logits, 0, corral_vocab_n_tokens(vocab) * sizeof *logits);
    assert_true(grammar_mask(b, logits)); /* b keeps a walked mask, a nothing */
    assert_true(corral_grammar_kept_bytes(b) > corral_grammar_kept_bytes(a));
    grammar_cache_give(cache, b);
    grammar_cache_give(cache, a); /* freed: b has more */
    assert_ptr_equal(take(cache, words, NULL), b);
    corral_grammar *c = take(cache, words, NULL); /* none kept now: a new one */
    assert_counts(cache, 1, 3);
    grammar_cache_give(cache, c);
    grammar_cache_give(cache, b); /* b replaces c */
    assert_ptr_equal(take(cache, words, NULL), b);
    grammar_cache_give(cache, b);
    free(logits);
    grammar_cache_free(cache);
}

static void test_bounded_by_count_and_bytes(void **state)
{
    (void)state;
    grammar_cache *cache = grammar_cache_create(2, 64 << 20);
    assert_non_null(cache);
    corral_grammar *g1 = take(cache, yes_no, NULL);
    corral_grammar *g2 = take(cache, digits, NULL);
    corral_grammar *g3 = take(cache, words, NULL);
    grammar_cache_give(cache, g1);
    grammar_cache_give(cache, g2);
    grammar_cache_give(cache, g3); /* g1, the oldest, goes */
    assert_ptr_equal(take(cache, digits, NULL), g2);
    assert_ptr_equal(take(cache, words, NULL), g3);
    corral_grammar *g1_again = take(cache, yes_no, NULL);
    assert_counts(cache, 2, 4);
    grammar_cache_give(cache, g1_again);
    grammar_cache_give(cache, g2);
    grammar_cache_give(cache, g3);
    grammar_cache_free(cache);

    /* room for about one grammar's bytes: the last given back stays, none over the bound */
    corral_grammar *probe = take(cache = grammar_cache_create(4, 1 << 20), digits, NULL);
    size_t one = corral_grammar_kept_bytes(probe);
    grammar_cache_give(cache, probe);
    grammar_cache_free(cache);
    cache = grammar_cache_create(4, one + one / 2);
    assert_non_null(cache);
    g1 = take(cache, yes_no, NULL);
    g2 = take(cache, digits, NULL);
    assert_int_equal(corral_grammar_kept_bytes(g1), one);
    grammar_cache_give(cache, g1);
    grammar_cache_give(cache, g2); /* g1 goes to make room */
    assert_ptr_equal(take(cache, digits, NULL), g2);
    assert_counts(cache, 1, 2);
    g1 = take(cache, yes_no, NULL);
    assert_counts(cache, 1, 3);
    grammar_cache_give(cache, g1);
    grammar_cache_give(cache, g2);
    grammar_cache_free(cache);
    cache = grammar_cache_create(4, one - 1); /* nothing fits: every grammar is freed */
    g1 = take(cache, yes_no, NULL);
    grammar_cache_give(cache, g1);
    corral_grammar *fresh = take(cache, yes_no, NULL);
    assert_counts(cache, 0, 2);
    grammar_cache_give(cache, fresh);
    grammar_cache_free(cache);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_the_same_text_gets_its_grammar_back_at_its_start),
        cmocka_unit_test(test_two_at_once_keep_the_one_that_worked_more),
        cmocka_unit_test(test_bounded_by_count_and_bytes),
    };
    return cmocka_run_group_tests(tests, open_vocab, close_vocab);
}

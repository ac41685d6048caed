/*
 * The engine's side of grammar-constrained decoding (the public half is in engine.h): what
 * the sampler asks of a corral_grammar while it draws a token. A grammar holds the set of
 * parse stacks its text so far may be in; a token is allowed when every code point of its
 * text advances some stack, an end-of-generation token when some stack is complete.
 */
#ifndef CORRAL_ENGINE_GRAMMAR_H
#define CORRAL_ENGINE_GRAMMAR_H

#include <stdbool.h>
#include <stdint.h>

#include "corral/engine.h"

/* Is id allowed next? */
bool grammar_allows(corral_grammar *grammar, corral_token id);

/* For tests: grammar_allows of every token of the vocabulary (allowed[id] 1 or 0), worked
 * out by the same rejection for all of them at once, a full scan of the vocabulary as
 * llama.cpp's sampler makes (the mask's definition, far faster than token by token). False
 * when memory runs out or a limit on the stacks is reached. */
bool grammar_allows_all(corral_grammar *grammar, uint8_t *allowed);

/*
 * Set the logit of every token the grammar does not allow next to -INFINITY (logits has one
 * entry per vocabulary token). False when no token with a finite logit is allowed, or when
 * memory runs out or a limit on the grammar's stacks is reached (then logits is unchanged).
 */
bool grammar_mask(corral_grammar *grammar, float *logits);

/*
 * Work out the tokens the grammar allows next. Where at most the grammar's listing limit are
 * (n_vocab / 8: a step after a key, within a number, between values), *ids points to them
 * ascending (end-of-generation tokens included once the grammar is complete), *n their count,
 * kept until the next call; else *ids is NULL (many are allowed, or memory ran out for the
 * list), and grammar_mask_bits reads the mask or grammar_mask_worked_out writes it. False
 * when memory runs out or a limit on the grammar's stacks is reached.
 */
bool grammar_allowed_ids(corral_grammar *grammar, const corral_token **ids, size_t *n);

/* grammar_mask with the mask grammar_allowed_ids worked out last (not worked out again). */
bool grammar_mask_worked_out(const corral_grammar *grammar, float *logits);

/* The mask grammar_allowed_ids worked out last, a bit per token: id allowed where bit
 * id & 63 of word id >> 6 is set (the last word's bits past the vocabulary undefined). */
const uint64_t *grammar_mask_bits(const corral_grammar *grammar);

/* For tests: list at most max_ids tokens in grammar_allowed_ids (0: never listed). */
void grammar_limit_list(corral_grammar *grammar, size_t max_ids);

/* Advance the grammar by id, which grammar_allows (or the mask) said is allowed. */
void grammar_accept(corral_grammar *grammar, corral_token id);

/* A token that ends generation, for when no token is allowed: the vocabulary's EOS, else
 * its first end-of-generation token, else -1. */
corral_token grammar_end_token(const corral_grammar *grammar);

/* Trie nodes the grammar's mask walks have looked at so far (for tests and benchmarks). */
size_t grammar_trie_visits(const corral_grammar *grammar);

/* Steps whose mask was the last step's, taken as it was because the stacks were the same
 * (for tests and benchmarks). */
size_t grammar_masks_reused(const corral_grammar *grammar);

/* For tests: walk the masks by at most max_sets sets of stacks (0: the usual limit), so that
 * the cache of sets fills and the walks go the slow way. */
void grammar_limit_sets(corral_grammar *grammar, uint32_t max_sets);

#endif

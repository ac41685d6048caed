/*
 * Shared by the vision tests (test_vision*.c) that hold a projector and its text model
 * against llama.cpp's references in tests/fixtures/vision: where a vision fixture is, the
 * lines of a ref.txt (the ids of a prompt's text chunks, the greedy ids), the prompt's ids
 * as Corral tokenizes them, a context holding the prompt around an image, the largest
 * difference from a logits file, and the greedy tokens from a set of last logits. Each fails
 * the current cmocka test on an error; the tolerances stay with the tests.
 */
#ifndef CORRAL_TESTS_VISION_REF_FIXTURE_H
#define CORRAL_TESTS_VISION_REF_FIXTURE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "corral/engine.h"

/* The most ids chunk_ids and tokenize give (the size of the tests' id arrays). */
#define VISION_MAX_IDS 64
/* The most greedy tokens check_greedy takes. */
#define VISION_MAX_GREEDY 64

/* $CORRAL_FIXTURES/vision/name (tests/fixtures/vision/name without it). The path lives in
 * one of four buffers used in turn, so up to four may be held at once. */
const char *vision_fixture(const char *name);

/* The text after `key` at the start of a line of a ref.txt (not its first line), or fail. */
const char *line_of(const char *text, const char *key);

/* The text after the first `key` anywhere in text, or fail. */
const char *text_after(const char *text, const char *key);

/* The integers from p to the end of its line, at most max of them, into out: how many. */
size_t ints_of(const char *p, int32_t *out, size_t max);

/* The ids of a ref.txt's text chunk ("chunk K text N: ids"), at most VISION_MAX_IDS. */
size_t chunk_ids(const char *ref, int chunk, int32_t *ids);

/* text through the vocabulary (special tokens parsed), at most VISION_MAX_IDS ids. */
size_t tokenize(const corral_vocab *vocab, const char *text, bool add_special, int32_t *ids);

/* The context parameters of the vision tests' text checks: the defaults with n_ctx cells,
 * 2 threads and an F32 KV cache (the references' cache). */
void vision_context_params(corral_context_params *params, uint32_t n_ctx);

/* A context on m made with params, holding ids0, the image embd and ids2 in sequence 0 (the
 * logits of ids2's last token the last kept). */
corral_context *decode_around_image(const corral_model *m, const corral_context_params *params,
                                    const int32_t *ids0, size_t n0,
                                    const corral_image_embd *embd, const int32_t *ids2,
                                    size_t n2);

/* The largest |logits[i] - v[i]| over n_vocab values, v the numbers in the file at path. */
float logits_file_diff(const float *logits, size_t n_vocab, const char *path);

/* From logits (ctx's last), n greedy tokens, each decoded in turn, must be the n ids at
 * want_line (a line of a ref.txt, after its key). */
void check_greedy(corral_context *ctx, const float *logits, size_t n_vocab,
                  const char *want_line, int n);

#endif

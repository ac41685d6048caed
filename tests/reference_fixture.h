/*
 * Shared by the tests that hold the engine against the reference files in tests/fixtures:
 * where a fixture is, a reference's text and the matrices in it, and the two measures the
 * tests compare logits by (the largest difference, the greedy id). Each fails the current
 * cmocka test on an error.
 */
#ifndef CORRAL_TESTS_REFERENCE_FIXTURE_H
#define CORRAL_TESTS_REFERENCE_FIXTURE_H

#include <stddef.h>

#include "corral/engine.h"

/* $CORRAL_FIXTURES/name (tests/fixtures/name without it). The path lives in one of four
 * buffers used in turn, so up to four may be held at once. */
const char *fixture(const char *name);

/* The whole file at path, NUL-terminated (malloc'd). */
char *read_file(const char *path);

/* The rows * cols numbers after the line "key ROWS COLS" in a reference's text, into out. */
void read_matrix(const char *text, const char *key, float *out, size_t rows, size_t cols);

/* The largest |a[i] - b[i]| over n values; infinity where either holds a NaN. */
float max_abs_diff(const float *a, const float *b, size_t n);

/* The first index of the largest of n logits: the greedy token. */
corral_token argmax(const float *logits, size_t n);

#endif

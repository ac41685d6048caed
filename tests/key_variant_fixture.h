/*
 * Shared by the tests that need a fixture model with its metadata changed: a copy of a
 * tests/fixtures model (its tensors as they are) with keys renamed, set, added or removed.
 * Each fails the current cmocka test on an error.
 */
#ifndef CORRAL_TESTS_KEY_VARIANT_FIXTURE_H
#define CORRAL_TESTS_KEY_VARIANT_FIXTURE_H

#include <stddef.h>
#include <stdint.h>

#include "gguf.h"

/* A change to one metadata pair: renamed (a numeric scalar), or set to a scalar of type
 * (added when absent), or removed when type is GGUF_TYPE_COUNT. */
typedef struct key_edit {
    const char *key;
    const char *rename; /* not NULL: the pair is kept under this name */
    enum gguf_type type;
    const void *value;
} key_edit;

/* The fixture src (a path under the fixtures folder) with the edits made (8 at most),
 * written to dst. */
void write_variant(const char *src, const char *dst, const key_edit *edits, size_t n_edits);

/* The fixture src with key set to a scalar of type (GGUF_TYPE_COUNT: removed), written to
 * dst. */
void write_key_variant(const char *src, const char *dst, const char *key, enum gguf_type type,
                       const void *value);

/* The fixture src with the u32 key set to value, written to dst. */
void write_u32_variant(const char *src, const char *dst, const char *key, uint32_t value);

#endif

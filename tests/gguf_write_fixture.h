/*
 * Shared by the tests' model writers (moe_fixture.c, head_fixture.c, onefile_fixture.c,
 * gptoss_fixture.c, key_variant_fixture.c and the writers inside test files): the steps each
 * rewrite of a GGUF model into a test file repeats. A gguf_writer takes a file's tensors in
 * two walks over them in one order: the first declares each (name, type, shape), the second,
 * after gguf_writer_begin, writes their bytes; writers that change tensors run one loop
 * twice, as pass 0 and pass 1.
 */
#ifndef CORRAL_TESTS_GGUF_WRITE_FIXTURE_H
#define CORRAL_TESTS_GGUF_WRITE_FIXTURE_H

#include <stdbool.h>

#include "corral/error.h"
#include "gguf.h"

/* Source tensor t as it is, under name: declared in pass 0, its bytes written in pass 1. */
bool gguf_write_fixture_copy(gguf_writer *w, int pass, const char *name, const gguf_tensor *t,
                             corral_error *err);

/* The end of the file w writes to path: finished when ok (every step before went well), and
 * w freed. Fails the current cmocka test with "writing PATH: message" otherwise. */
void gguf_write_fixture_finish(gguf_writer *w, bool ok, const char *path, corral_error *err);

#endif

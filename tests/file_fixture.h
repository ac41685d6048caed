/*
 * Shared by the tests that read a whole file (a reference, a model, what a command wrote):
 * its bytes in memory, bounded by nothing but the file, failing the current cmocka test when
 * it cannot be read.
 */
#ifndef CORRAL_TESTS_FILE_FIXTURE_H
#define CORRAL_TESTS_FILE_FIXTURE_H

#include <stddef.h>

/* The whole file at path (malloc'd), with a NUL after its bytes so that text can be read as
 * a string; *size its length when size is not NULL. */
void *file_fixture_read(const char *path, size_t *size);

#endif

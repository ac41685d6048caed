/*
 * Shared pieces of the test_store_* programs: a fresh temporary store root per test, removed
 * afterwards, and small file helpers that build a store by hand (as ollama would have left it)
 * without going through the code under test.
 */
#ifndef CORRAL_TESTS_STORE_FIXTURE_H
#define CORRAL_TESTS_STORE_FIXTURE_H

#include <stdbool.h>
#include <stddef.h>

/* A new empty directory under $TMPDIR (or /tmp); malloc'ed path. Aborts on failure. */
char *store_fixture_make_root(void);
/* rm -rf root, then free it. NULL is ignored. */
void store_fixture_remove_root(char *root);

/* "<a>/<b>/..." into a static buffer, for one use at a time. */
const char *store_fixture_path(const char *root, const char *relative);

/* Write bytes to root/relative, creating parent directories. Aborts on failure. */
void store_fixture_write(const char *root, const char *relative, const void *data, size_t len);
bool store_fixture_exists(const char *root, const char *relative);
/* Set the mtime of root/relative to seconds_ago in the past. */
void store_fixture_age(const char *root, const char *relative, long seconds_ago);
/* Entries in root/relative other than "." and "..". */
size_t store_fixture_count_entries(const char *root, const char *relative);

#endif

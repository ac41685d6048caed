/*
 * Reading a small file whole, with its size capped before anything is allocated past the cap:
 * Modelfiles, grammars, key files. Larger inputs (models, blobs) are streamed elsewhere. And
 * the two steps every writer of files shares: a directory's path made, a buffer written out.
 */
#ifndef CORRAL_UTIL_FILE_H
#define CORRAL_UTIL_FILE_H

#include <stdbool.h>
#include <stddef.h>

#include "corral/error.h"

/* The file at path, NUL-terminated, *len bytes (at most max_bytes). NULL with err set to
 * "PATH: why" (the system's reason, "larger than N MiB", "read error", "out of memory"). */
char *util_read_file(const char *path, size_t max_bytes, size_t *len, corral_error *err);

/* mkdir -p path (mode 0755 for what it creates); false with err set, also when path exists
 * and is not a directory. */
bool util_mkdirs(const char *path, corral_error *err);

/* All len bytes of data written to fd (a write interrupted by a signal is taken again);
 * false with errno set where a write fails. */
bool util_write_all(int fd, const void *data, size_t len);

#endif

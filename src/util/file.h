/*
 * Reading a small file whole, with its size capped before anything is allocated past the cap:
 * Modelfiles, grammars, key files. Larger inputs (models, blobs) are streamed elsewhere.
 */
#ifndef CORRAL_UTIL_FILE_H
#define CORRAL_UTIL_FILE_H

#include <stddef.h>

#include "corral/error.h"

/* The file at path, NUL-terminated, *len bytes (at most max_bytes). NULL with err set to
 * "PATH: why" (the system's reason, "larger than N MiB", "read error", "out of memory"). */
char *util_read_file(const char *path, size_t max_bytes, size_t *len, corral_error *err);

#endif

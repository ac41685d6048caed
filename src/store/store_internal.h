/*
 * What the files of src/store/ share and nobody else sees: the store struct, the file-system
 * helpers every write goes through (bounded reads, atomic writes, directory fsync), the walk
 * over manifests/ and the set of digests the manifests reference.
 * Temp files carry STORE_TEMP_PREFIX, which no valid name part or blob name can start with,
 * so a crash leaves nothing that lists as a model or a blob.
 */
#ifndef CORRAL_STORE_STORE_INTERNAL_H
#define CORRAL_STORE_STORE_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <time.h>

#include "store/store.h"

#define STORE_TEMP_PREFIX ".corral-tmp-"
#define STORE_BLOB_PREFIX "sha256-"

struct corral_store {
    char *root;
    char *manifests_dir;
    char *blobs_dir;
};

/* ---- files (fs.c) ---- */

/* The parts joined with '/', malloc'ed; the list ends with NULL. NULL only when out of memory. */
char *store_join(const char *first, ...) __attribute__((sentinel));

/* A whole regular file of at most max_bytes, NUL-terminated. NOT_FOUND when it is missing,
 * INVALID when it is too large or not a regular file. mtime may be NULL. */
corral_store_status store_read_file(const char *path, size_t max_bytes, char **out, size_t *len,
                                    struct timespec *mtime, corral_error *err);

/* Write data to path through a temp file in the same directory: write, fsync, chmod 0644,
 * rename, fsync the directory. */
bool store_write_file_atomic(const char *path, const void *data, size_t len, corral_error *err);

bool store_fsync_dir(const char *dir, corral_error *err);

/* The directory part of path, malloc'ed ("." when there is no '/'). */
char *store_dirname(const char *path);

/* s cut to fit cap with anything outside printable ASCII shown as '?', for error messages
 * that quote hostile input. */
void store_printable(const char *s, char *buf, size_t cap);

/* A blob file name "sha256-<64 lowercase hex>" as its digest; false for any other name. */
bool store_blob_name_to_digest(const char *file_name, char digest[CORRAL_DIGEST_BUF]);

/* ---- digests (digest.c) ---- */

/* A raw SHA-256 as "sha256:<hex>". */
void store_digest_format(const unsigned char hash[32], char out[CORRAL_DIGEST_BUF]);

/* ---- names (name.c) ---- */

/* s is a valid name part at this level of manifests/: 0 host, 1 namespace, 2 model, 3 tag. */
bool store_name_part_is_valid(unsigned level, const char *s);

/* Byte-wise ASCII case-insensitive equality, so no locale can change what matches. */
bool store_ascii_equal_fold(const char *a, const char *b);

/* ---- the manifests on disk (list.c) ---- */

/* Called for each regular file at a valid manifests/<host>/<ns>/<model>/<tag> path; a status
 * other than OK stops the walk and is returned. */
typedef corral_store_status (*store_manifest_visitor)(void *ctx, const corral_model_name *name,
                                                      const char *path, corral_error *err);
corral_store_status store_walk_manifests(const corral_store *store, store_manifest_visitor visit,
                                         void *ctx, corral_error *err);

/* Digests (config and layers) named by the manifests on disk. */
typedef struct store_digest_set {
    char (*digests)[CORRAL_DIGEST_BUF];
    size_t n, cap;
} store_digest_set;

/* Every digest any manifest references. A manifest that cannot be read or parsed is an error
 * (INVALID/IO): a caller about to delete blobs must not guess what it referenced. */
corral_store_status store_collect_references(const corral_store *store, store_digest_set *set,
                                             corral_error *err);
bool store_digest_set_has(const store_digest_set *set, const char *digest);
void store_digest_set_free(store_digest_set *set);

#endif

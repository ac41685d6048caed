/*
 * Blobs by digest: where one lives (blobs/sha256-<hex>), whether it exists and how big it is,
 * reading a small one whole, storing bytes as a blob, and bumping its mtime on reuse.
 * Streaming writes are blob_writer.c's; both validate the digest before forming a path.
 */
#include "store/store_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

char *corral_store_blob_path(const corral_store *store, const char *digest, corral_error *err)
{
    if (!corral_digest_check(digest, err))
        return NULL;
    char file_name[CORRAL_DIGEST_BUF];
    /* ':' becomes '-' on disk, as in ollama's layout. */
    memcpy(file_name, STORE_BLOB_PREFIX, strlen(STORE_BLOB_PREFIX));
    memcpy(file_name + 7, digest + 7, CORRAL_DIGEST_LEN - 7 + 1);
    char *path = store_join(store->blobs_dir, file_name, NULL);
    if (!path)
        corral_error_set(err, "out of memory");
    return path;
}

corral_store_status corral_store_blob_stat(const corral_store *store, const char *digest,
                                           uint64_t *size_bytes, corral_error *err)
{
    char *path = corral_store_blob_path(store, digest, err);
    if (!path)
        return corral_digest_is_valid(digest) ? CORRAL_STORE_IO : CORRAL_STORE_INVALID;
    struct stat st;
    corral_store_status status = CORRAL_STORE_OK;
    if (stat(path, &st) != 0) {
        corral_error_set(err, "blob %s: %s", digest, strerror(errno));
        status = errno == ENOENT ? CORRAL_STORE_NOT_FOUND : CORRAL_STORE_IO;
    } else if (!S_ISREG(st.st_mode)) {
        corral_error_set(err, "blob %s is not a regular file", digest);
        status = CORRAL_STORE_IO;
    } else if (size_bytes) {
        *size_bytes = (uint64_t)st.st_size;
    }
    free(path);
    return status;
}

corral_store_status corral_store_blob_touch(corral_store *store, const char *digest,
                                            corral_error *err)
{
    char *path = corral_store_blob_path(store, digest, err);
    if (!path)
        return corral_digest_is_valid(digest) ? CORRAL_STORE_IO : CORRAL_STORE_INVALID;
    corral_store_status status = CORRAL_STORE_OK;
    if (utimensat(AT_FDCWD, path, NULL, 0) != 0) {
        corral_error_set(err, "blob %s: %s", digest, strerror(errno));
        status = errno == ENOENT ? CORRAL_STORE_NOT_FOUND : CORRAL_STORE_IO;
    }
    free(path);
    return status;
}

corral_store_status corral_store_blob_read(const corral_store *store, const char *digest,
                                           size_t max_bytes, char **out, size_t *len,
                                           corral_error *err)
{
    char *path = corral_store_blob_path(store, digest, err);
    if (!path)
        return corral_digest_is_valid(digest) ? CORRAL_STORE_IO : CORRAL_STORE_INVALID;
    corral_store_status status = store_read_file(path, max_bytes, out, len, NULL, err);
    free(path);
    if (status != CORRAL_STORE_OK)
        corral_error_prefix(err, "blob %s", digest);
    return status;
}

corral_store_status corral_store_blob_write(corral_store *store, const void *data, size_t len,
                                            char digest[CORRAL_DIGEST_BUF], corral_error *err)
{
    corral_digest_of(data, len, digest);
    uint64_t size;
    if (corral_store_blob_stat(store, digest, &size, NULL) == CORRAL_STORE_OK && size == len)
        return corral_store_blob_touch(store, digest, err);
    corral_blob_writer *w = corral_blob_writer_create(store, UINT64_MAX, err);
    if (!w)
        return CORRAL_STORE_IO;
    corral_store_status status = corral_blob_writer_write(w, data, len, err)
                                     ? corral_blob_writer_finish(w, digest, len, err)
                                     : CORRAL_STORE_IO;
    corral_blob_writer_free(w);
    return status;
}
